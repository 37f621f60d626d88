/* bat_metrics: dynamic-batching metrics under TF Serving's BatchingSession
 * names (families in base/td_metrics, registered on first use):
 *   :tensorflow:serving:batching_session:queuing_latency{thread_pool_name}
 *       histogram, microseconds a task waited before its batch left
 *       (TF Serving's buckets 100 x 1.2^k, 52); the pool is
 *       "model_server_batch_threads", TF Serving's name for the server's one
 *       shared pool
 *   :tensorflow:serving:batching_session:input_batch_size     histogram of
 *       task sizes (rows), buckets 2^k, 14
 *   :tensorflow:serving:batching_session:processed_batch_size histogram of
 *       batch sizes run, padding included
 *   :tensorflow:serving:batching_session:padding_size{execution_batch_size}
 *       histogram of padding rows
 *   :tensorflow:serving:batching_session:wrapped_run_count    counter of
 *       tasks batched
 * No-ops while td_metrics_enabled() is false. Thread-safe. */
#ifndef BAT_METRICS_H
#define BAT_METRICS_H

#include <stdint.h>

/* One piece of a task leaving in a batch, after waiting wait_ns. */
void bat_metrics_piece(int64_t rows, uint64_t wait_ns);
/* One batch leaving for the engine. */
void bat_metrics_batch(int64_t rows, int64_t padded);

#endif
