/* srv_stats: per model version inference counters: the statistics
 * extension of the v2 protocol (REST /v2/models/{m}/stats, gRPC
 * ModelStatistics) and the per-version families of the metrics page read
 * the same counters.
 *
 * What is counted. srv_api records every model run it finishes, whatever
 * API asked for it (TF Serving's Predict/Classify/Regress/MultiInference as
 * well as v2 infer): one success or failure with its duration from
 * srv_call_begin to the run's end, split into phases for successes:
 *   compute_input   srv_call_begin to the hand-off to a worker or the
 *                   batcher (decoding the request into engine tensors);
 *   queue           the hand-off to the start of the run (waiting in the
 *                   batch queue or the work queue; ~0 for a run on the
 *                   thread that received the request);
 *   compute_infer   the run: the engine, and for a merged batch the merge
 *                   of the inputs and the split of the outputs;
 *   compute_output  not measured apart (encoding the answer happens after
 *                   the count): 0.
 * Also the rows it carried (the first input's leading dimension, 1 for a
 * scalar input) and the wall-clock time of the last one. Each request is one
 * execution: runs merged by the dynamic batcher are not told apart here.
 * Requests refused before a model version was resolved (unknown model, bad
 * version) are not counted: they belong to no version.
 *
 * One set of counters. The counts live in td_metrics series (counters
 * labelled model_name and version), registered by srv_stats_create and
 * updated whether or not the metrics page is on (times in nanoseconds; the
 * names carry no unit, as promtool's lint asks of non-base units):
 *   tensord_inference_request_success_total, ..._failure_total,
 *   tensord_inference_count_total (rows), tensord_inference_exec_count_total,
 *   tensord_inference_request_duration_total (successes),
 *   tensord_inference_fail_duration_total,
 *   tensord_inference_queue_duration_total,
 *   tensord_inference_compute_input_duration_total,
 *   tensord_inference_compute_infer_duration_total,
 *   tensord_inference_compute_output_duration_total.
 * A snapshot reads those series, so the v2 statistics and a scrape agree.
 * The families are process-wide: create one srv_stats per process.
 *
 * Ownership: srv_stats_create's object belongs to the caller and must
 * outlive every srv_api that points to it. Snapshots are caller-owned
 * (srv_stats_snapshot_free). Threads: every function is thread-safe (one
 * mutex around the version table; the counters are atomics). Failure: out
 * of memory, or a family past TD_METRIC_MAX_SERIES versions, drops that
 * record (logged once); a snapshot that cannot be allocated is empty. */
#ifndef SRV_STATS_H
#define SRV_STATS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct srv_stats srv_stats;

typedef struct srv_stats_entry {
  char *model;
  int64_t version;
  uint64_t success_count, success_ns;
  uint64_t fail_count, fail_ns;
  uint64_t queue_ns, compute_input_ns, compute_infer_ns, compute_output_ns; /* successes */
  uint64_t inference_count; /* rows (batch elements) of successful runs */
  uint64_t execution_count; /* successful runs */
  uint64_t last_ms;         /* ms since the epoch of the last run; 0: none */
} srv_stats_entry;

/* One finished run. */
typedef struct srv_stats_sample {
  bool ok;
  uint64_t rows;
  uint64_t total_ns; /* begin to the run's end */
  uint64_t queue_ns, input_ns, infer_ns, output_ns;
} srv_stats_sample;

srv_stats *srv_stats_create(void);
void srv_stats_destroy(srv_stats *s);

/* s NULL: no-op. */
void srv_stats_record(srv_stats *s, const char *model, int64_t version, const srv_stats_sample *x);

/* Entries of `model` (NULL: every model) and `version` (< 0: every
 * version), sorted by model then version. Returns the count. */
int srv_stats_snapshot(srv_stats *s, const char *model, int64_t version, srv_stats_entry **out);
void srv_stats_snapshot_free(srv_stats_entry *e, int n);

#endif
