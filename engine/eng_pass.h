/* eng_pass (internal to engine/): what the load-time compiler's passes
 * (eng_compile.c's folding and packing, eng_fuse.c's epilogue chains,
 * eng_merge.c's merged steps) ask of a plan, and how they rewrite it.
 *
 * Values and steps are a plan's (eng_plan.h): a value index is base[node]
 * + output, a step an index into steps[]. The queries only read the plan;
 * eng_pass_drop_steps and eng_pass_rewrite change its schedule. A plan is
 * compiled by one thread before it is shared, so none of this locks. */
#ifndef ENG_PASS_H
#define ENG_PASS_H

#include <stdbool.h>

#include "eng_plan.h"

/* Whether value v is fed (an input of the plan) or fetched (an output):
 * a pass may neither drop nor take over such a value. */
bool eng_pass_is_fed(const eng_plan *p, int v);
bool eng_pass_is_fetched(const eng_plan *p, int v);
/* The constant computed at load for value v, or NULL. */
const eng_tensor *eng_pass_const(const eng_plan *p, int v);
/* Step s's input k's value. */
int eng_pass_in(const eng_plan *p, int s, int k);
/* Step s's op is `op` with n_in inputs and one output. */
bool eng_pass_step_is(const eng_plan *p, int s, const char *op, int n_in);
/* Step s's op is `op` and reads values a and b (in either order), its two
 * inputs. */
bool eng_pass_reads_both(const eng_plan *p, int s, const char *op, int a, int b);
/* The float scalar (rank 0) constant step s reads beside value v, when v
 * is one of its two inputs, once; else NULL. */
const eng_tensor *eng_pass_scalar_beside(const eng_plan *p, int s, int v);
/* A BatchMatMul that is a dense layer once its right operand is a constant
 * matrix: not adjoint on the left (and producing float for V3). */
bool eng_pass_dense_bmm(const eng_node *nd);

/* Per value, how many steps read it (inputs and fused addends) into
 * readers[n_values] and, where reader is not NULL, the last of them. */
void eng_pass_count_readers(const eng_plan *p, int *readers, int *reader);
/* How many steps read value v; the first max of them, in schedule order,
 * into out. */
int eng_pass_readers_of(const eng_plan *p, int v, int *out, int max);
/* The one step reading v when a pass may drop v (no other reader, not fed
 * or fetched); else -1. */
int eng_pass_sole_reader(const eng_plan *p, int v);

/* Removes the steps marked in gone[n_steps] from the schedule (with their
 * epilogue and packed-weight slots), keeping the order of the others. */
void eng_pass_drop_steps(eng_plan *p, const bool *gone);

/* One merge at step s for eng_pass_rewrite: 1 when it rewrote s into the
 * merged step (op) and marked in gone[] the steps that leave, 0 when s
 * does not start its pattern, -1 when memory is short. */
typedef int (*eng_pass_at)(eng_plan *p, int s, const eng_op_def *op, bool *gone);
/* Runs `at` on every step not yet gone, in schedule order, then drops the
 * steps it marked; on -1 it stops, keeping what it merged. The merged
 * steps run the plan-internal op `op_name` on the CPU only: does nothing
 * when a device runs the plan, when the op table lacks the op, when the
 * plan has no epilogue slots, or (packed) no packed weights. */
void eng_pass_rewrite(eng_plan *p, const char *op_name, bool packed, eng_pass_at at);

#endif
