/* srv_stats: per model version request counters, for the statistics
 * extension of the v2 protocol (REST /v2/models/{m}/stats, gRPC
 * ModelStatistics).
 *
 * What is counted. srv_api records every model run it finishes, whatever
 * API asked for it (TF Serving's Predict/Classify/Regress as well as v2
 * infer): one success or failure with its duration, from srv_call_begin to
 * the run's end (decoding, queueing, batching and the engine run together:
 * the split into queue and compute time is not measured), the rows it
 * carried (the first input's leading dimension, 1 for a scalar input) and
 * the wall-clock time of the last one. Each request is one execution: runs
 * merged by the dynamic batcher are not told apart here. Requests refused
 * before a model version was resolved (unknown model, bad version) are not
 * counted: they belong to no version.
 *
 * These are the only request counters in the server; a metrics exporter
 * reads the same ones through srv_stats_snapshot.
 *
 * Ownership: srv_stats_create's object belongs to the caller and must
 * outlive every srv_api that points to it. Snapshots are caller-owned
 * (srv_stats_snapshot_free). Threads: every function is thread-safe (one
 * mutex; a record is a short critical section). Failure: out of memory while
 * recording drops that one record (logged once); a snapshot that cannot be
 * allocated is empty. */
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
  uint64_t inference_count; /* rows (batch elements) of successful runs */
  uint64_t execution_count; /* successful runs */
  uint64_t last_ms;         /* ms since the epoch of the last run; 0: none */
} srv_stats_entry;

srv_stats *srv_stats_create(void);
void srv_stats_destroy(srv_stats *s);

/* s NULL: no-op. */
void srv_stats_record(srv_stats *s, const char *model, int64_t version, bool ok, uint64_t rows,
                      uint64_t ns);

/* Entries of `model` (NULL: every model) and `version` (< 0: every
 * version), sorted by model then version. Returns the count. */
int srv_stats_snapshot(srv_stats *s, const char *model, int64_t version, srv_stats_entry **out);
void srv_stats_snapshot_free(srv_stats_entry *e, int n);

#endif
