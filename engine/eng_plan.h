/* eng_plan (internal to engine/): the layout of a compiled plan, shared by
 * the plan builder (eng_model.c), the load-time compiler (eng_compile.c,
 * its passes in eng_fuse.c and eng_merge.c through eng_pass.h), the run
 * loop (eng_run.c), the executor (eng_exec.c), batch slicing
 * (eng_slice.c) and the GPU executor (device/eng_gpu.c).
 *
 * The engine's own rooms: engine/ holds the model and plan builder, the
 * compiler, the run loop and the executor; engine/kernels/ the CPU kernels
 * behind the op table; engine/device/ device selection and the GPU
 * executor. A plan is built (eng_model.c), compiled (eng_compile.c), and
 * run through eng_plan_run (eng_exec.c), which picks slices, the
 * shape-specialised plan, and the device or the CPU loop.
 *
 * Values: every output of every graph node has a value index (base[node] +
 * output). A run fills a value table; uses[v] is how many reads the
 * remaining steps and the fetches make of v, so a value is released right
 * after its last reader.
 *
 * After eng_plan_compile, some values are constants computed at load
 * (consts: value index and tensor; the run loop starts with them in the
 * table and their producing steps are gone), and some steps carry an
 * epilogue: elementwise per-channel ops (bias, batch-norm scale and shift,
 * ReLU, swish, GELU; eng_epilogue.h) and at most one add of a run-time value
 * (a residual's shortcut, which the step then reads like an input: uses[]
 * counts it) applied in place to the step's output 0, which is then stored
 * as the value of the last fused node instead of the step's own. MatMul,
 * Conv2D and dense-layer Einsum steps with a constant weight also get it
 * packed for eng_gemm, a Pad feeding a VALID depthwise convolution
 * becomes the op table's plan-internal _PadView /
 * _DepthwiseConv2dNativePadded, Keras's LayerNormalization (a Mean and
 * the ten or eleven ops after it) one _LayerNorm step on the CPU, its
 * constants in an EPI_LAYER_NORM epilogue, and a packed 1x1 expansion with
 * the depthwise convolution reading it one _ExpandDepthwise step on the
 * CPU (the Conv2D's, its epilogue carrying the depthwise layer in an
 * EPI_DEPTHWISE op and that layer's own ops), and a Mul with the 1x1
 * Conv2D reading its product one _ScaledConv1x1 step on the CPU (the
 * Mul's, with the Conv2D's packed weight and epilogue). */
#ifndef ENG_PLAN_H
#define ENG_PLAN_H

#include <stdatomic.h>
#include <threads.h>

#include "eng_epilogue.h"
#include "eng_model.h"
#include "eng_op.h"

struct eng_plan {
  eng_model *m;
  int n_steps;
  int *steps;             /* node ids in run order */
  const eng_op_def **ops; /* per step */
  eng_epilogue **epi;     /* per step: NULL, or ops fused after it */
  const struct eng_packed **packed; /* per step: NULL, or its constant weight packed (the
                                       model's, eng_model_pack) */
  int *base;              /* per node: first value index */
  int n_values;
  int *uses;              /* per value: number of readers during a run */
  int n_inputs;
  int *in_value;          /* per input: value index fed */
  eng_shape *in_shape;    /* declared shape of each input's producer (Placeholder) */
  eng_dtype *in_dtype;    /* declared dtype or INVALID */
  char **in_name;
  int n_outputs;
  int *out_value;
  int n_consts;
  int *const_value;       /* value indices computed at load */
  eng_tensor *const_tensor;
  /* Shape specialisations (eng_compile.c): plans for one set of input
   * shapes in which everything computed from shapes alone is folded. */
  char **out_name;
  bool can_specialise; /* a compiled serving plan with inputs */
  bool is_specialised;
  mtx_t spec_lock;
  int n_specs;
  struct eng_spec *specs;
  size_t spec_bytes; /* what the cached shape plans hold of their own (eng_compile.c's
                        SPEC_BUDGET); SIZE_MAX once a plan was refused for it */
  bool spec_none;    /* nothing folds for any shape: no plan is built */
  /* Batch slicing (eng_slice.h): 0 not decided yet, -1 never, else the
   * examples per slice (eng_slice_size; the run caps it at its batch);
   * slice_cut: the first step of the tail that then runs whole, or 0 for
   * none (set before slice_each). */
  atomic_llong slice_each;
  atomic_int slice_cut;
};

/* One shape specialisation of a plan: the input shapes and dtypes it is
 * for, and its plan (NULL: building it failed, remembered as such). */
typedef struct eng_spec {
  eng_shape *shapes;
  eng_dtype *dtypes;
  eng_plan *plan;
} eng_spec;

/* eng_compile.c. The specialised plan for these inputs, built on first use
 * and cached (the first four shapes always; up to 32 while the constants
 * and schedules of the plans cached past the fourth stay within a budget,
 * eng_compile.c's SPEC_BUDGET; after the first plan refused for it, no new
 * shape gets one); NULL to run the general plan.
 * Thread-safe. eng_plan_free_specs frees the cache (eng_plan_destroy). The
 * build folds the values computed from shapes by running a sub-plan, which
 * for a Shape of an activation runs the layers before it. */
const eng_plan *eng_plan_specialised(eng_plan *p, const eng_tensor *in);
void eng_plan_free_specs(eng_plan *p);

/* A specialisation under way whose folded values a run of the general plan
 * collects (its eng_run's want and kept, per value), so that the first
 * request of a new shape costs one run of the general plan instead of a
 * build and a run. */
typedef struct eng_spec_build {
  eng_plan *sp; /* the schedule, before folding */
  bool *cnode, *cstep;
  bool *want;       /* per value: the run keeps it */
  eng_tensor *kept; /* per value: what the run kept */
  int n_values;
} eng_spec_build;
/* The cached specialisation for these inputs, or NULL; with NULL, *build
 * is a build to complete (or NULL: none to make: the cache is full, the
 * feeds are bad, or there is nothing to fold). Run p with *build's want
 * and kept, then pass it to eng_plan_spec_finish (ran: the run succeeded;
 * otherwise the build is dropped and a later request tries again), which
 * caches the plan (or a failed fold, as eng_plan_specialised does), frees
 * the build and returns the plan now cached, or NULL. Thread-safe: threads
 * building the same shape at once keep the first plan stored. */
const eng_plan *eng_plan_spec_find(eng_plan *p, const eng_tensor *in, eng_spec_build **build);
const eng_plan *eng_plan_spec_finish(eng_plan *p, const eng_tensor *in, eng_spec_build *b,
                                     bool ran);
/* eng_model.c. Weight w (k x n; n x k when trans_b) packed for eng_gemm with a
 * per-channel scale folded in (nscale 0: none), once per model: the plans
 * of a model (the general one and its shape-specialised ones) share it and
 * must not free it. NULL when eng_gemm cannot pack it. Thread-safe. */
const struct eng_packed *eng_model_pack(eng_model *m, const eng_tensor *w, int64_t k, int64_t n,
                                        bool trans_b, const float *scale, int64_t nscale);
/* The same for a 3x3 Conv2D filter w [3, 3, cin, cout] in Winograd's form
 * (eng_wino_pack), cached beside the others. */
const struct eng_packed *eng_model_pack_wino(eng_model *m, const eng_tensor *w, const float *scale,
                                             int64_t nscale);
/* eng_weights.c. Whether the Conv2D at step s has, on every input the graph
 * allows, as many input channels as its filter's depth (not a grouped
 * convolution): then it always runs its packed filter. */
bool eng_plan_conv_runs_packed(const eng_model *m, const eng_plan *p, int s);
/* TensorFlow's feed check of input i (dtype, declared shape). */
td_code eng_plan_check_feed(const eng_plan *p, int i, const eng_tensor *t, td_err *err);

/* Builds the schedule only (no folding or fusion). */
td_code eng_plan_build(eng_model *m, int n_inputs, const char *const *inputs, int n_outputs,
                       const char *const *outputs, int n_targets, const char *const *targets,
                       eng_plan **out, td_err *err);

/* Folds constant subgraphs and fuses epilogues into a built plan whose
 * steps write no state. Leaves the plan as it was when folding fails (the
 * error then surfaces when the plan runs, as it would have). */
void eng_plan_compile(eng_plan *p);

#endif
