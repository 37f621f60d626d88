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
 * Whether a plan is separable is decided once, from one real run at a
 * batch of at least two (the value shapes and dtypes it recorded), by a
 * conservative allowlist (each op's slice kind in the op table, eng_op.h):
 * every op that touches batch-dependent values must
 * be one that treats dim 0 as the batch (elementwise maps with constants
 * that do not span dim 0, NHWC convolutions and pools, Pad that leaves dim
 * 0 alone, MatMul with the batch on its rows, reductions and softmax over
 * other axes, Reshape to [-1, ...]); every batch-dependent value must have
 * the batch as dim 0; inputs and outputs must be numeric. Anything else
 * keeps the plan whole. The executor (eng_exec.c) runs the slices, as
 * many at once as the engine's pool has threads (each slice on one thread),
 * and stacks their outputs. Pure functions of their arguments, any thread. */
#ifndef ENG_SLICE_H
#define ENG_SLICE_H

#include "eng_plan.h"

/* Slices smaller than this are not worth a split. */
#define ENG_SLICE_MIN 2

/* Decides from a run of p at batch `batch` (shapes[v], dtypes[v] recorded
 * for every value it produced or was fed; dtype INVALID for none). On
 * true, *bytes is the largest activation of one example. */
bool eng_slice_separable(const eng_plan *p, const eng_shape *shapes, const eng_dtype *dtypes,
                         int64_t batch, int64_t *bytes);
/* Examples per slice for a batch whose largest per-example activation is
 * `bytes`: as many as fit the cache budget, at least ENG_SLICE_MIN. */
int64_t eng_slice_size(int64_t bytes, int64_t batch);

#endif
