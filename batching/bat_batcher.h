/* bat_batcher: dynamic batching in front of the engine queue.
 *
 * Tasks for the same signature of the same loaded version (the signature
 * pointer is the key, so versions never mix) are merged along dimension 0
 * into one batch, run once on an engine worker through bat_queue, and the
 * outputs are split back to each task. This follows TF Serving's
 * BatchingSession with its parameters (cfg_batching):
 *  - a batch closes when it reaches the execution batch size, or when a
 *    batch thread is free and the batch has waited batch_timeout_micros
 *    (0: run as soon as a thread is free; tasks that arrive while every
 *    thread is busy accumulate);
 *  - at most num_batch_threads batches run at once; at most
 *    max_enqueued_batches wait per signature, beyond which submission fails
 *    at once with RESOURCE_EXHAUSTED;
 *  - a batch is padded up to the next allowed_batch_sizes entry by
 *    repeating the first row of its last task, and the padding is dropped
 *    from the outputs;
 *  - a task larger than max_batch_size is rejected with TF Serving's
 *    message (INVALID_ARGUMENT); with enable_large_batch_splitting, one
 *    larger than max_execution_batch_size is split across batches of that
 *    many rows and reassembled;
 *  - tasks whose non-batch dimensions differ go to separate batches, or,
 *    with pad_variable_length_inputs, are padded to the batch's maximum with
 *    each tensor's own first element.
 * String tensors merge too (classify/regress examples), but only with the
 * same other dims (they are not padded), and a task of a signature with
 * string outputs is never split across batches: one larger than a batch
 * runs by itself.
 *
 * Contract for tasks: as bat_queue_submit (done() exactly once for every
 * accepted task, called on an engine worker). Thread-safe; create/destroy
 * from one thread. destroy runs what is pending, then waits for it. */
#ifndef BAT_BATCHER_H
#define BAT_BATCHER_H

#include "bat_queue.h"
#include "cfg_batching.h"

typedef struct bat_batcher bat_batcher;

/* Counters for the metrics exporter and tests (monotonic since create). */
typedef struct bat_batcher_stats {
  uint64_t batches;            /* batches sent to the engine */
  uint64_t rows;               /* request rows in them */
  uint64_t padding_rows;       /* rows added to reach an allowed size */
  int64_t max_batch_rows;      /* largest batch run, padding included */
  uint64_t queue_delay_ns;     /* sum over pieces of submit-to-dispatch time */
  uint64_t max_queue_delay_ns; /* the longest such wait */
} bat_batcher_stats;

/* Per-model parameters (beyond TF Serving, as Triton users expect): asked
 * when a signature's queue is created for a task naming its model
 * (bat_task.model). Returns true with *out set to replace the global
 * parameters for that model (its num_batch_threads is ignored: the thread
 * count is shared); *queue_timeout_micros > 0 fails tasks that wait longer
 * than that in the queue with DEADLINE_EXCEEDED. Must be thread-safe. */
typedef bool (*bat_model_params_fn)(void *ctx, const char *model, cfg_batching *out,
                                    int64_t *queue_timeout_micros);

/* The queue must outlive the batcher. lookup may be NULL. */
td_code bat_batcher_create(const cfg_batching *params, bat_queue *queue, bat_model_params_fn lookup,
                           void *lookup_ctx, bat_batcher **out, td_err *err);
td_code bat_batcher_submit(bat_batcher *b, bat_task *t, td_err *err);
/* A batch of one run on the calling thread, as bat_queue_try_run_here runs a
 * task (t->code, t->err and the outputs set, done() NOT called; false: it
 * did nothing and t should be submitted), when the batcher is idle: no
 * batch runs or waits (under load requests merge instead), the model's
 * batch_timeout_micros is 0, the task needs no padding or splitting, and
 * the queue's own conditions hold (the signature's runs, batched ones
 * included, are known to be short, and an engine worker is idle). It counts
 * as a running batch meanwhile, so tasks arriving then queue and merge. */
bool bat_batcher_try_run_here(bat_batcher *b, bat_task *t);
void bat_batcher_get_stats(bat_batcher *b, bat_batcher_stats *out);
void bat_batcher_destroy(bat_batcher *b);

#endif
