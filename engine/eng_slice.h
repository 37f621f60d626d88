/* eng_slice (internal to engine/): whether a large batch may run as a few
 * smaller ones (batch slicing), so that each op's activations stay in cache between ops.
 *
 * At batch 32 a convolutional net's layers hold megabytes per tensor; run
 * over the whole batch, every op streams its input and output through main
 * memory. When every example's outputs depend only on that example's
 * inputs (no op mixes the batch), the plan may run on consecutive slices
 * of the batch and the outputs be stacked back, with the same arithmetic
 * per example and so the same numbers.
 *
 * Whether a plan is separable is decided once, from one real run of the plan
 * itself (not a shape specialisation, whose constants may be folded from that
 * batch's size) at a batch of at least two (the value shapes and dtypes it
 * recorded), by a conservative allowlist (each op's slice kind in the op
 * table, eng_op.h): every op that touches batch-dependent values must be one
 * that treats dim 0 as the batch (elementwise maps with constants that do not
 * span dim 0, NHWC convolutions and pools, Pad that leaves dim 0 alone, MatMul
 * with the batch on its rows, reductions and softmax over other axes, Reshape
 * to [-1, ...] or, as Keras's Reshape and Flatten write it, to [Shape(x)[0],
 * ...], whose Shape, StridedSlice and Pack steps may feed nothing else); every
 * other batch-dependent value must have the batch as dim 0; inputs and outputs
 * must be numeric. Anything else keeps the plan whole. The executor
 * (eng_exec.c) runs the slices, as many at once as the engine's pool has
 * threads (each slice on one thread), and stacks their outputs. Pure functions
 * of their arguments, any thread. */
#ifndef ENG_SLICE_H
#define ENG_SLICE_H

#include "eng_plan.h"

/* Slices smaller than this are not worth a split, unless the plan's
 * weights are small beside its activations (ENG_SLICE_WEIGHT_RATIO). */
#define ENG_SLICE_MIN 2
/* Every slice reads all of the plan's weights once more, so slices of one
 * example double the weight traffic of slices of two. That pays when the
 * weights total at most this many times the largest per-example
 * activation: then a single example's working set fits where two do not,
 * and the extra weight reads cost less than the activations kept in cache.
 * (Zen 5 VM, one thread, batch 32, slices of one against two: MobileNetV2
 * 224^2, weights about 3x its largest activation, 1.05-1.19x the
 * throughput in two interleaved runs; EfficientNetB0 224^2, about 4x,
 * level; ResNet50 224^2, about 30x, 0.97x.) */
#define ENG_SLICE_WEIGHT_RATIO 8

/* A separable plan's tail: steps from some step on that run once over
 * the whole batch, after the slices of the steps before it, from their
 * values stacked (every element is computed as in a slice: eng_gemm's sums
 * do not depend on the rows). Slices would read the tail's weights once
 * each, for products of few rows; the whole batch moves the tail's
 * activations through memory instead. The tail starts where the first
 * outweighs the second most (eng_slice.c's find_tail: its weights over the
 * slice size against twice its activations per example), when it reads
 * at least ENG_SLICE_TAIL_WEIGHTS bytes of weights: a classifier after its
 * global pooling, and the last stages of a convolutional net whose layers
 * hold more weights than activations. */
#define ENG_SLICE_TAIL_WEIGHTS (256 << 10)

/* Decides from a run of p at batch `batch` (shapes[v], dtypes[v] recorded
 * for every value it produced or was fed; dtype INVALID for none). On
 * true, *bytes is the largest activation of one example and *cut the
 * first step of p's tail (p->n_steps: none). */
bool eng_slice_separable(const eng_plan *p, const eng_shape *shapes, const eng_dtype *dtypes,
                         int64_t batch, int64_t *bytes, int *cut);
/* The values that steps [cut, n_steps) read (an epilogue's operand
 * included) or p fetches, and that steps before cut make, into fv (room
 * for p->n_values); returns their count, or -1 when memory is short. */
int eng_slice_frontier(const eng_plan *p, int cut, int *fv);
/* The bytes of p's constants at their nominal size (numel times dtype
 * size, whether a constant is held as it is or only packed): what each
 * slice reads of the model's weights. */
int64_t eng_slice_weight_bytes(const eng_plan *p);
/* Examples per slice for a plan whose largest per-example activation is
 * `bytes` and whose weights are `weights` bytes: as many as fit the cache
 * budget, at least ENG_SLICE_MIN, or at least 1 when weights <=
 * ENG_SLICE_WEIGHT_RATIO * bytes. The executor caps it at the batch. */
int64_t eng_slice_size(int64_t bytes, int64_t weights);

#endif
