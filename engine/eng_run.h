/* eng_run (internal to engine/): the CPU run loop, the one loop over a
 * plan's steps.
 *
 * eng_run_cpu runs a whole plan on the calling thread: constant folding
 * (eng_compile.c), one-shot load-time runs (eng_model_run), the executor
 * (eng_exec.c) for plans on the CPU and nested runs of control flow. The
 * GPU executor (device/eng_gpu.c) shares the same bookkeeping step by step
 * (begin, a step each, finish), running on the CPU the steps it cannot
 * lower.
 *
 * The value table comes from a per-thread block that only grows, so a warm
 * run makes no allocation of its own (a nested run on the same thread, a
 * While or If body run by its kernel, takes its table from malloc). Any
 * thread; a plan may run on many
 * threads at once (each run has its own table). Fails with the kernel's
 * error, prefixed with the node and op unless the kernel named it. */
#ifndef ENG_RUN_H
#define ENG_RUN_H

#include "eng_plan.h"

/* One run of a plan. values[v] is value v's host tensor (empty until
 * computed, or while it lives only on a device), left[v] its remaining
 * readers, fed[v] whether a feed supplied it. eng_run_cpu is begin,
 * eng_run_step_cpu for every step, finish. */
typedef struct eng_run {
  const eng_plan *p;
  const eng_graph *g; /* p's model's graph */
  eng_tensor *values;
  int *left;
  bool *fed;
  /* TF1 control flow (ENG_OP_DEAD_FLOW ops: Switch, Merge): dead[v] marks
   * a value of an untaken branch, ndead[node] a node that did not run for
   * that reason (a dead control input kills its dependents too). */
  bool *dead;
  bool *ndead;
  /* When set (the run that decides batch slicing), each value's shape and
   * dtype as produced or fed. */
  eng_shape *shapes;
  eng_dtype *dtypes;
  /* When set (a run of the general plan whose values a shape
   * specialisation folds, eng_plan_spec_find): kept[v] takes a share of
   * each value v that want[v] marks, as a step produces it. */
  const bool *want;
  eng_tensor *kept;
  void *scratch, *mem;
} eng_run;

/* Checks the feeds and fills the table with feeds and constants. Call
 * eng_run_finish even when it fails. */
td_code eng_run_begin(eng_run *r, const eng_plan *p, const eng_tensor *in, td_err *err);
/* Runs step s's CPU kernel; its inputs must be in values. Stores its
 * outputs and drops one use of each input. */
td_code eng_run_step_cpu(eng_run *r, int s, td_err *err);
/* Drops one use of each input of step s (releasing host values no longer
 * read), for a step run elsewhere. */
void eng_run_drop_inputs(eng_run *r, int s);
/* When rc is TD_OK and out is not NULL, shares the outputs into out;
 * releases the table. Returns rc, or the error of collecting the outputs. */
td_code eng_run_finish(eng_run *r, td_code rc, eng_tensor *out, td_err *err);

/* One whole run of p on the CPU: in[i] feeds input i, out[i] receives
 * output i (the caller releases them). */
td_code eng_run_cpu(const eng_plan *p, const eng_tensor *in, eng_tensor *out, td_err *err);

#endif
