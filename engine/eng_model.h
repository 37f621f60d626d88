/* eng_model: a graph ready to run, with its variables.
 *
 * eng_model_create takes a top-level graph and its function library, flattens
 * function calls (eng_inline), lowers TF1 loops (eng_frames) and NCHW image
 * ops (eng_layout), and gives every variable (VarHandleOp /
 * VariableV2, keyed by container + shared_name as TensorFlow does) and
 * every lookup table (HashTableV2, MutableHashTableV2, keyed alike) a slot.
 *
 * Running works like a TensorFlow Session: feeds (tensors that replace graph
 * tensors, cutting the graph there), fetches (tensors to return) and targets
 * (nodes to run for their effects). Only the ancestors of fetches and targets
 * that are not cut by a feed run, in dependency order; control inputs order
 * execution. An eng_plan is that pruned schedule, built once (checking that
 * every op it needs exists, with an error naming the op and the node) and
 * run many times.
 *
 * Feeds are checked as TensorFlow checks them: a tensor fed to a Placeholder
 * must have its dtype and fit its declared shape (INVALID_ARGUMENT naming
 * the input). File access (RestoreV2 reading a checkpoint) goes through the
 * eng_io callbacks the loader supplies: the engine never opens files itself.
 *
 * Threads: building a model and running plans that write variables (restore,
 * init ops) happen once, on the loading thread (a RestoreV2's reads are
 * spread over the intra-op pool; see eng_io). After that, plans that only
 * read variables (serving signatures) may run concurrently from any number
 * of threads. A plan keeps its model alive only as long as the caller keeps
 * the model; destroy plans before their model. */
#ifndef ENG_MODEL_H
#define ENG_MODEL_H

#include "eng_graph.h"

typedef struct eng_model eng_model;
typedef struct eng_plan eng_plan;

/* Loader callbacks. A RestoreV2 reads its entries on the intra-op pool
 * (eng_pool), so restore and verify may be called from several threads at
 * once, each call for a different key: they must be safe for that. */
typedef struct eng_io {
  /* Reads checkpoint tensor `key` from the bundle at `prefix`. */
  td_code (*restore)(void *ctx, const char *prefix, const char *key, eng_dtype dtype,
                     eng_tensor *out, td_err *err);
  /* Reads the whole of asset file `path` (a vocabulary for
   * InitializeTableFromTextFileV2) into *data (malloc'd, the caller frees)
   * and *len. Optional: NULL fails such init ops cleanly. */
  td_code (*read_asset)(void *ctx, const char *path, char **data, size_t *len, td_err *err);
  /* Makes every check `restore` makes on tensor `key` (its checksum
   * included) without keeping its bytes, and gives its dtype and shape.
   * Optional: without it, entries nothing needs are read like the rest. */
  td_code (*verify)(void *ctx, const char *prefix, const char *key, eng_dtype dtype,
                    eng_dtype *out_dtype, eng_shape *out_shape, td_err *err);
  void *ctx;
} eng_io;

/* Takes ownership of graph and lib (lib may be NULL) even on failure; lib
 * is freed once its functions are inlined, before this returns. */
td_code eng_model_create(eng_graph *graph, eng_library *lib, const eng_io *io, eng_model **out,
                         td_err *err);
void eng_model_destroy(eng_model *m);
/* Drops the io callbacks (the loader closes the checkpoint after restore);
 * a later RestoreV2 then fails cleanly. */
void eng_model_detach_io(eng_model *m);
const eng_graph *eng_model_graph(const eng_model *m);

typedef struct eng_feed {
  const char *name; /* "node:index" */
  eng_tensor tensor;
} eng_feed;

/* One-shot run (load-time work: restore, init ops), on the CPU loop of the
 * calling thread. outs[i] receives a new reference for fetch[i]; the
 * caller releases them. */
td_code eng_model_run(eng_model *m, int n_feeds, const eng_feed *feeds, int n_fetch,
                      const char *const *fetch, eng_tensor *outs, int n_targets,
                      const char *const *targets, td_err *err);

/* Builds the pruned schedule feeding `inputs` and fetching `outputs`. */
td_code eng_plan_create(eng_model *m, int n_inputs, const char *const *inputs, int n_outputs,
                        const char *const *outputs, int n_targets, const char *const *targets,
                        eng_plan **out, td_err *err);
void eng_plan_destroy(eng_plan *p);
/* Static shape of plan input i as the graph declares it (rank -1 unknown). */
eng_shape eng_plan_input_shape(const eng_plan *p, int i);
/* in[i] feeds inputs[i]; out[i] receives outputs[i] (caller releases).
 * A serving plan specialises itself to the input shapes it sees: the first
 * request of a new shape builds (and caches, a few per plan) a plan in which
 * everything computed from shapes alone is folded; later requests of that
 * shape run it. A large batch of a serving plan on the CPU may run as
 * slices of the batch (eng_slice.h), run side by side on the engine's
 * thread pool, each slice on one of its threads, when the pool is free
 * (eng_pool.h); a plan of a model on a device runs
 * there (eng_device_attach). The executor: eng_exec.c. */
td_code eng_plan_run(const eng_plan *p, const eng_tensor *in, eng_tensor *out, td_err *err);
/* True when runs of p stay on the host (its model is not on a device);
 * a run on a device uses the calling thread's device stream and arena.
 * Thread-safe once the model is loaded. */
bool eng_plan_on_host(const eng_plan *p);
/* Builds, ahead of any request, the plan specialised to every input having
 * its declared shape with `batch` for an unknown first dimension (a no-op
 * when another dimension is unknown, or the plan does not specialise), so
 * that the first requests of a freshly loaded version do not pay for it. */
void eng_plan_prepare(eng_plan *p, int64_t batch);

/* What compiling did to a plan (for `tensord inspect` and benchmarks):
 * steps left to run per request, values computed once at load, and ops
 * fused into the epilogue of a Conv2D/DepthwiseConv2dNative/MatMul, the
 * shape-specialised plans built so far (see eng_plan_run), and how its
 * large batches run (batch slicing, decided by its first run at a batch
 * of two or more). */
typedef struct eng_plan_info {
  int steps;
  int consts;
  int fused_ops;
  int shape_plans;          /* plans specialised to input shapes so far */
  int shape_plan_steps;     /* steps per request in the first of them */
  long long slice_examples; /* examples per batch slice; 0 not decided yet, -1 runs whole */
  int tail_steps;           /* steps run once over the whole batch after the slices */
  int winograd_steps;       /* Conv2D steps packed in Winograd's form (eng_wino.h) */
} eng_plan_info;
eng_plan_info eng_plan_get_info(const eng_plan *p);
/* The distinct ops of the plan's steps, in run order, with their counts
 * ("Conv2D x3, Relu, ..."), into buf (truncated to n bytes with "...").
 * Control-flow steps count as their own op, not their subgraphs'. */
void eng_plan_op_list(const eng_plan *p, char *buf, size_t n);

/* --- for kernels -------------------------------------------------------- */
/* The plan of a control-flow node's subgraph (role "cond" / "body" for
 * While, "then" / "else" for If; see eng_inline.h), feeding its arguments
 * and fetching its results; built on first use, then shared (thread-safe).
 * Plans built by eng_plan_create already built those of their steps. */
td_code eng_model_subplan(eng_model *m, int node_id, const char *role, const eng_plan **out,
                          td_err *err);
int64_t eng_model_node_slot(const eng_model *m, int node_id);
const char *eng_model_slot_name(const eng_model *m, int64_t slot);
/* Shares the slot's value; FAILED_PRECONDITION if it was never assigned. */
td_code eng_model_slot_read(eng_model *m, int64_t slot, eng_tensor *out, td_err *err);
bool eng_model_slot_initialized(eng_model *m, int64_t slot);
/* Releases the value of every variable that no serving plan built so far
 * (one built without targets, or a subgraph plan of one) reads: a Keras
 * export stores each variable twice, under two objects, and the restore op
 * assigns both, while the serving functions read one. Call once the
 * serving plans are built; a plan built later that reads a released
 * variable fails as on an unassigned one (FAILED_PRECONDITION). Returns
 * the bytes released. Not thread-safe against running plans. */
size_t eng_model_release_unserved(eng_model *m);
/* Frees the original of every packed weight (eng_model_pack) that nothing
 * but its packed form needs, so a loaded version holds each such weight
 * once, in the layout its kernel reads. `plans` are every plan built to
 * serve (their shape-specialised plans and the model's subgraph plans are
 * looked at too). An original stays when: the model is on a device (its
 * upload reads the originals); any plan reads a variable at run time (a
 * step on a variable handle, or a handle among its constants); a plan
 * fetches the weight, or a step without the packed form reads it (a
 * second consumer, an epilogue); or its buffer has a holder beyond those
 * known (the variable, the plans' constants, the packed table). A freed
 * original becomes a hollow tensor (eng_tensor_alloc_hollow) of its dtype
 * and shape in all those places, so shape-specialised plans built later
 * find the packed form again (eng_plan_specialised reuses the general
 * plan's constants); a step that would read its data fails (INTERNAL)
 * instead. Returns the bytes freed. Call once the serving plans are built
 * and prepared, on the loading thread, before any plan runs elsewhere. */
size_t eng_model_release_packed_sources(eng_model *m, int n_plans, eng_plan *const *plans);
/* What a model holds in weights (for tests and `tensord inspect`). */
typedef struct eng_weight_stats {
  size_t variable_bytes; /* variables' values held, hollow ones not counted */
  size_t packed_bytes;   /* packed layouts (eng_gemm), k * n floats each */
  size_t packed_sources; /* originals of packed weights still held */
  size_t released_bytes; /* originals freed by eng_model_release_packed_sources */
} eng_weight_stats;
eng_weight_stats eng_model_weight_stats(const eng_model *m);
/* Notes the variables a plan with these feeds, fetches and targets would
 * read or assign, without building one to run (the loader notes every
 * signature and the init op before restoring). Once one is noted, a
 * RestoreV2 run restores only the checkpoint entries whose values reach a
 * noted variable or anything but a variable assignment: each other entry is
 * checked through eng_io.verify (so a corrupt one still fails the load) and
 * its variable assigned a hollow stand-in of its dtype and shape, which
 * eng_model_release_unserved frees. A Keras export stores each variable
 * twice and serves one: its restore then allocates the weights once. A
 * plan that cannot be built (its error surfaces when it is created) turns
 * this off, so every entry is restored. */
void eng_model_note_reads(eng_model *m, int n_inputs, const char *const *inputs, int n_outputs,
                          const char *const *outputs, int n_targets, const char *const *targets);
/* True when RestoreV2 node `node` need not keep output `i` (see above). */
bool eng_model_restore_skips(eng_model *m, int node, int i);
td_code eng_model_verify(eng_model *m, const char *prefix, const char *key, eng_dtype dtype,
                         eng_dtype *out_dtype, eng_shape *out_shape, td_err *err);
/* Replaces the slot's value with a new reference to `value`. */
td_code eng_model_slot_write(eng_model *m, int64_t slot, const eng_tensor *value, td_err *err);
td_code eng_model_restore(eng_model *m, const char *prefix, const char *key, eng_dtype dtype,
                          eng_tensor *out, td_err *err);
/* Reads an asset file through the io callbacks (FAILED_PRECONDITION
 * without them, e.g. after eng_model_detach_io). */
td_code eng_model_read_asset(eng_model *m, const char *path, char **data, size_t *len,
                             td_err *err);

/* --- for the device layer (device/) -------------------------------------- */
/* The model's device state (weights on the device), opaque here; NULL on
 * the CPU. Setting it frees the previous one with its own free_fn, and
 * eng_model_destroy frees the last. Set while no plan of the model runs. */
void *eng_model_dev(const eng_model *m);
void eng_model_set_dev(eng_model *m, void *dev, void (*free_fn)(void *));

#endif
