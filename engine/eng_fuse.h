/* eng_fuse (internal to engine/): epilogue fusion, the load-time pass that
 * runs the elementwise ops after a product in place on the product's
 * output (eng_epilogue.h), and the one that moves a depthwise layer's
 * scale into its filter. Both run on a folded plan before its weights are
 * packed, by the thread compiling it (eng_compile.c).
 *
 * A Conv2D, DepthwiseConv2dNative, MatMul, dense BatchMatMul or
 * dense-layer Einsum (EinsumDense: its per-channel constants span the
 * weight's free dims) whose output feeds a chain of single-consumer
 * elementwise ops with constant per-channel (or scalar) operands (BiasAdd,
 * Add/AddV2, Sub, Mul: biases and decomposed batch norm) and ReLU/ReLU6,
 * ending perhaps in a swish (x * sigmoid(x), Keras's silu with its
 * IdentityN) or, except after a depthwise convolution, a GELU (the eight
 * ops of TensorFlow's gelu(approximate=True) or the five of its exact
 * form), runs the chain in place on its own output. On the CPU the chain
 * may also take one add of a run-time value (a residual's shortcut)
 * followed by a ReLU. The arithmetic is the same, element for element, as
 * the separate kernels', so results are bit-identical; what goes away is
 * one output allocation and one pass over memory per fused op. */
#ifndef ENG_FUSE_H
#define ENG_FUSE_H

#include "eng_plan.h"

/* Allocates the plan's epilogue slots (p->epi; left NULL when memory is
 * short, and then nothing is fused) and fuses every chain it finds; the
 * fused ops' steps leave the schedule. */
void eng_fuse_chains(eng_plan *p);

/* A depthwise convolution whose epilogue starts with a per-channel (or
 * scalar) multiply, a batch-norm scale, and whose constant filter no other
 * step reads: the plan's filter becomes a scaled copy and the multiply
 * leaves the epilogue (one op fewer per output). Each tap then rounds once
 * as w * s instead of the sum being scaled and rounded again: the last bit
 * may differ, the summation order does not. The plan's constant and
 * epilogue change together, so every executor sees the same. Runs after
 * eng_merge_pad_views (the padded convolution is one of its ops). */
void eng_fuse_dw_scales(eng_plan *p);

#endif
