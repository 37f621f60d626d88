/* eng_merge (internal to engine/): load-time passes that run a few steps
 * of a plan as one step of a plan-internal op (ENG_OP_PLAN_ONLY in the op
 * table: the graph is untouched, and an executor that does not know the op
 * runs it on the CPU). Each merged step computes what the separate steps
 * would, bit for bit; what goes away is the intermediate tensors and their
 * passes over memory. They run, in eng_compile.c's order, on a folded plan
 * whose epilogues are fused (eng_fuse.h), by the thread compiling it; all
 * but eng_merge_pad_views only when the CPU runs the plan.
 *
 * When memory runs short a pass stops where it is: the plan stays valid,
 * with fewer steps merged. */
#ifndef ENG_MERGE_H
#define ENG_MERGE_H

#include "eng_plan.h"

/* A Pad (zeros on H and W, a constant amount) whose only reader is a VALID
 * DepthwiseConv2dNative (Keras's ZeroPadding2D before a stride-2 depthwise
 * layer): the Pad becomes _PadView, which passes its input through, and
 * the convolution _DepthwiseConv2dNativePadded, which applies the padding
 * as its window's. Both steps stay; the padded copy goes. */
void eng_merge_pad_views(eng_plan *p);

/* Keras's LayerNormalization (its Mean and the ten or eleven ops after it,
 * centred and scaled over one axis) becomes one _LayerNorm step with its
 * constants in an EPI_LAYER_NORM epilogue. */
void eng_merge_layer_norms(eng_plan *p);

/* After the weights are packed. An inverted residual block's 1x1
 * expansion (packed, not Winograd's form) whose output only a depthwise
 * convolution with multiplier 1 reads (perhaps through a pad view) becomes
 * one _ExpandDepthwise step run band by band, so the expanded tensor stays
 * in cache: its epilogue holds the expansion's ops, an EPI_DEPTHWISE op
 * (the filter) and the depthwise layer's ops. */
void eng_merge_expand_depthwise(eng_plan *p);

/* After the weights are packed. A Mul (squeeze-and-excitation's excite)
 * whose product only a 1x1 stride-1 Conv2D with a packed weight reads
 * becomes one _ScaledConv1x1 step at the Mul's place, with the Conv2D's
 * packed weight and epilogue: the GEMM scales rows as it reads them, so
 * the product is never written. */
void eng_merge_scaled_conv(eng_plan *p);

#endif
