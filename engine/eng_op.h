/* eng_op: the op table. One entry per TensorFlow op the engine runs: its
 * name, flags, static shape inference, and its CPU kernel.
 *
 * Kernels receive an eng_kctx: the node (attributes), the model (variable
 * slots, file access for RestoreV2), the input tensors and an output array
 * to fill, one tensor per output (the kernel allocates or shares them). A
 * kernel reports failure through ctx->err with a message naming the node.
 *
 * Shape inference (infer) maps input shapes, which may hold unknown dims, to
 * output shapes, and rejects inputs no run could accept. Ops whose output
 * shape depends on data (variables, checkpoints) leave infer NULL: their
 * outputs are unknown until run.
 *
 * The table is static and read-only; lookups are thread-safe. */
#ifndef ENG_OP_H
#define ENG_OP_H

#include "eng_graph.h"

struct eng_model;

typedef struct eng_kctx {
  const eng_node *node;
  int node_id;
  struct eng_model *model;
  int n_in;
  const eng_tensor *in;
  int n_out;
  eng_tensor *out;
  td_err *err;
  /* Fused epilogue (eng_plan.h) for output 0, or NULL. A kernel that can
   * apply it while its output is hot (row by row) does so and sets
   * epi_done; otherwise the run loop applies it afterwards. */
  const struct eng_epilogue *epi;
  bool epi_done;
  /* Input 1 (a constant weight) packed at load for eng_gemm, or NULL. */
  const struct eng_packed *packed;
} eng_kctx;

typedef td_code (*eng_kernel_fn)(eng_kctx *ctx);
typedef td_code (*eng_infer_fn)(const eng_node *node, const eng_shape *in, eng_shape *out,
                                td_err *err);

enum {
  ENG_OP_REF_INPUT0 = 1 << 0, /* input 0 is a variable reference (Assign) */
  ENG_OP_STATEFUL = 1 << 1,   /* writes variables: not run while serving */
  /* TF1 control flow: Switch leaves the untaken output empty (dead), Merge
   * runs with dead inputs (empty) and forwards a live one. Plans holding
   * these are not folded or fused, and run on the CPU. */
  ENG_OP_DEAD_FLOW = 1 << 2,
  /* Put in a plan by the compiler, never read from a graph: a graph node
   * naming it is an unsupported op. */
  ENG_OP_PLAN_ONLY = 1 << 3,
};

typedef struct eng_op_def {
  const char *name;
  unsigned flags;
  eng_infer_fn infer; /* NULL: output shapes known only at run time */
  eng_kernel_fn cpu;
} eng_op_def;

const eng_op_def *eng_op_find(const char *name);
/* The table, for tests that walk every op. */
int eng_op_count(void);
const eng_op_def *eng_op_at(int i);

#endif
