/* cfg_batching: dynamic batching parameters as a plain struct, read from TF
 * Serving's --batching_parameters_file (text-format
 * tensorflow.serving.BatchingParameters) with TF Serving's defaults for
 * unset fields and its validation rules.
 *
 * Pure functions; thread-safe. */
#ifndef CFG_BATCHING_H
#define CFG_BATCHING_H

#include <stdbool.h>
#include <stdint.h>

#include "td_status.h"

#define CFG_MAX_ALLOWED_BATCH_SIZES 64

typedef struct cfg_batching {
  int64_t max_batch_size;       /* rows per batch; also bounds one request (1000) */
  int64_t batch_timeout_micros; /* wait for a batch to fill once a thread is free (0) */
  int64_t max_enqueued_batches; /* per model-signature queue bound (10) */
  int64_t num_batch_threads;    /* batches running at once (CPU count) */
  int n_allowed_batch_sizes;
  int64_t allowed_batch_sizes[CFG_MAX_ALLOWED_BATCH_SIZES]; /* pad up to these */
  bool pad_variable_length_inputs;   /* pad dims >= 1 to the batch maximum */
  bool enable_large_batch_splitting; /* split requests over batches */
  int64_t max_execution_batch_size;  /* rows per run when splitting (= max_batch_size) */
} cfg_batching;

void cfg_batching_defaults(cfg_batching *b, int cpus);
/* Reads the file over the defaults and validates. Parse errors name line
 * and column. */
td_code cfg_batching_load(const char *path, int cpus, cfg_batching *out, td_err *err);
td_code cfg_batching_parse(const char *text, int cpus, cfg_batching *out, td_err *err);
struct Tensorflow__Serving__BatchingParameters;
/* From a parsed BatchingParameters message: TF Serving's defaults for unset
 * fields, then validation. */
td_code cfg_batching_from_proto(const struct Tensorflow__Serving__BatchingParameters *p, int cpus,
                                cfg_batching *out, td_err *err);
/* TF Serving's rules: positive sizes, allowed sizes increasing, the last
 * allowed size equal to the execution batch size. */
td_code cfg_batching_validate(const cfg_batching *b, td_err *err);
/* Rows one batch may run: max_execution_batch_size when splitting, else
 * max_batch_size. */
int64_t cfg_batching_exec_size(const cfg_batching *b);

#endif
