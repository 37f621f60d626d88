/* eng_op: the op table. One entry per TensorFlow op the engine runs (and
 * the few ops the compiler puts in plans): its name, flags, static shape
 * inference, its CPU kernel, and the properties the load-time passes ask
 * about it (how it treats a sliced batch, what its output shapes follow
 * from). A device's lowering table is the device's own (device/eng_gpu.c).
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
 * The load-time check (check) says whether the kernel accepts a node at
 * all, from what the graph states before any data: its attributes (dtype
 * attrs such as T, data_format, strides, an Einsum equation) and its input
 * count. Plan building (eng_plan_build) runs it on every step of every
 * plan, so a version whose signatures reach a node its kernel would refuse
 * fails the load with UNIMPLEMENTED (or INVALID_ARGUMENT for a node no
 * TensorFlow kernel accepts either) naming the node and the op, instead of
 * failing every request. It never rejects over values or data-dependent
 * shapes: those stay the kernel's errors. NULL: every node of the op is
 * accepted (its kernel handles every dtype and attribute TensorFlow
 * allows).
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
  /* Its EPI_ADD_VALUE operand (eng_epilogue.h), or NULL; epi_part: when
   * the operand did not fit and the kernel applied the ops before it only,
   * their count. */
  const eng_tensor *epi_in;
  int epi_part;
  /* Input 1 (a constant weight) packed at load for eng_gemm, or NULL. */
  const struct eng_packed *packed;
} eng_kctx;

typedef td_code (*eng_kernel_fn)(eng_kctx *ctx);
typedef td_code (*eng_infer_fn)(const eng_node *node, const eng_shape *in, eng_shape *out,
                                td_err *err);
/* Fails with a message "node 'N' (Op): ..." when the kernel cannot run node. */
typedef td_code (*eng_check_fn)(const eng_node *node, td_err *err);

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
  /* Shape specialisation (eng_compile.c): the output shapes follow from
   * the input shapes and the values of the inputs in shape_values. An op
   * without it never has a shape known before it runs. */
  ENG_OP_SHAPED = 1 << 4,
  /* Its value changes from run to run (random sources): never folded into
   * a constant, in a plan or a shape specialisation. */
  ENG_OP_RANDOM = 1 << 5,
};

/* How an op treats dim 0 when a batch runs as slices (eng_slice.h). An op
 * of kind NO that reads a batch-dependent value keeps the plan whole. */
typedef enum {
  ENG_SLICE_NO,
  ENG_SLICE_UNARY,       /* one input, elementwise */
  ENG_SLICE_VIEW,        /* passes input 0 through (a folded Pad) */
  ENG_SLICE_EACH,        /* input i to output i (IdentityN) */
  ENG_SLICE_ELEMENTWISE, /* broadcasting; constants must not span dim 0 */
  ENG_SLICE_WINDOW,      /* NHWC convolution, pool or batch norm over input 0 */
  ENG_SLICE_PAD,         /* Pad with a constant amount that leaves dim 0 alone */
  ENG_SLICE_MATMUL,      /* the batch on the rows of input 0 */
  ENG_SLICE_REDUCE,      /* over constant axes other than 0 */
  ENG_SLICE_SOFTMAX,     /* over the last axis of rank >= 2 */
  ENG_SLICE_RESHAPE,     /* to [-1, ...], or Keras's Reshape(x, [Shape(x)[0], ...]) */
} eng_slice_kind;

/* shape_values: bit i = the value of input i; ENG_SHAPE_LAST = the last
 * input's (ConcatV2's axis). */
#define ENG_SHAPE_LAST (~0u)

typedef struct eng_op_def {
  const char *name;
  unsigned flags;
  eng_infer_fn infer; /* NULL: output shapes known only at run time */
  eng_kernel_fn cpu;
  eng_slice_kind slice;
  unsigned shape_values; /* with ENG_OP_SHAPED: the inputs whose values the output shapes read */
  eng_check_fn check;    /* load-time acceptance of a node; NULL accepts all */
} eng_op_def;

const eng_op_def *eng_op_find(const char *name);
/* How many data inputs op `name` takes, from TensorFlow's OpDef for it
 * (engine/eng_op_arity.inc, written by scripts/gen_op_arity.py): at least
 * *min, at most *max (-1: a list input leaves it open). False for an op the
 * OpDefs do not know (the plan-internal ones): nothing to check. IdentityN
 * may have none (inlining makes one of a call without results). Plans
 * refuse a node outside its op's range before any kernel reads inputs. */
bool eng_op_arity(const char *name, int *min, int *max);
/* The table, for tests that walk every op. */
int eng_op_count(void);
const eng_op_def *eng_op_at(int i);

#endif
