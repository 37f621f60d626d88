/* eng_profile: where a model's CPU runs spend their time, node by node (for
 * benchmarks: eng_bench's profile mode, bench/engine/profile.py).
 *
 * eng_profile_begin(plan) starts counting, process-wide, every CPU step of
 * every plan of that plan's model: whole runs and batch slices on any
 * thread, shape-specialised plans included. Per graph node it keeps the
 * wall time of its kernel and fused epilogue, how often it ran, how many
 * ops its epilogue fused, and the shapes of its first two inputs and of
 * its output the first time it ran. A node whose kernel runs a nested plan
 * (While, If) counts that plan's time, and the nested steps count too.
 * Steps that run on a device are not counted. Runs of other models are
 * not slowed beyond one atomic load per step.
 *
 * One profile at a time: begin fails while one is running. Call begin and
 * end when no run of the model is in flight (end does not wait for runs).
 * The caller frees end's result with eng_profile_free. */
#ifndef ENG_PROFILE_H
#define ENG_PROFILE_H

#include "eng_model.h"

typedef struct eng_profile_node {
  long long ns;            /* total over the profile */
  long long calls;         /* times it ran */
  int fused;               /* ops of its epilogue */
  eng_shape in0, in1, out; /* at the first run; rank -1 when absent */
} eng_profile_node;

typedef struct eng_profile {
  const eng_graph *g; /* the model's graph: node i is eng_graph_node(g, i) */
  int n_nodes;
  eng_profile_node *node; /* per graph node */
} eng_profile;

/* Fails (TD_FAILED_PRECONDITION) while another profile is running, or
 * TD_RESOURCE_EXHAUSTED. */
td_code eng_profile_begin(const eng_plan *p, td_err *err);
/* Stops counting; NULL when none was running or out of memory. */
eng_profile *eng_profile_end(void);
void eng_profile_free(eng_profile *pf);

/* --- for the run loop (eng_run.c) ---------------------------------------- */

/* The running profile when it counts model m's steps, else NULL. */
struct eng_prof_live *eng_profile_live(const eng_model *m);
/* Counts one run of node `node` that began at t0 (td_now_ns). */
void eng_profile_count(struct eng_prof_live *pf, int node, uint64_t t0, const eng_tensor *in,
                       int n_in, const eng_tensor *out, int fused);

#endif
