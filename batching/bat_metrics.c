#include "bat_metrics.h"

#include <pthread.h>
#include <stdio.h>

#include "td_metrics.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static td_metric *queuing, *input, *processed, *padding, *wrapped;
static td_series *queuing_s, *input_s, *processed_s, *wrapped_s;

static void init(void) {
  double q[52], s[14];
  td_metric_exponential_bounds(100, 1.2, 52, q);
  td_metric_exponential_bounds(1, 2, 14, s);
  const char *const pool_l[] = {"thread_pool_name"};
  const char *const exec_l[] = {"execution_batch_size"};
  queuing = td_metric_histogram(":tensorflow:serving:batching_session:queuing_latency",
                                "Distribution of wall time (in microseconds) tasks spent in "
                                "the batch queue.",
                                1, pool_l, q, 52);
  input = td_metric_histogram(":tensorflow:serving:batching_session:input_batch_size",
                              "Tracks the batch size distribution on the inputs.", 0, NULL, s, 14);
  processed =
      td_metric_histogram(":tensorflow:serving:batching_session:processed_batch_size",
                          "Tracks the batch size distribution on processing.", 0, NULL, s, 14);
  padding =
      td_metric_histogram(":tensorflow:serving:batching_session:padding_size",
                          "Tracks the padding size distribution on batches.", 1, exec_l, s, 14);
  wrapped = td_metric_counter(":tensorflow:serving:batching_session:wrapped_run_count",
                              "Tasks run through the batcher.", 0, NULL);
  queuing_s = td_metric_series1(queuing, "model_server_batch_threads");
  input_s = td_metric_series(input, NULL);
  processed_s = td_metric_series(processed, NULL);
  wrapped_s = td_metric_series(wrapped, NULL);
}

void bat_metrics_piece(int64_t rows, uint64_t wait_ns) {
  if (!td_metrics_enabled()) return;
  pthread_once(&once, init);
  td_series_observe(queuing_s, (double)wait_ns / 1e3);
  td_series_observe(input_s, (double)rows);
  td_series_add(wrapped_s, 1);
}

void bat_metrics_batch(int64_t rows, int64_t padded) {
  if (!td_metrics_enabled()) return;
  pthread_once(&once, init);
  char exec[24];
  snprintf(exec, sizeof exec, "%lld", (long long)padded);
  td_series_observe(processed_s, (double)padded);
  td_series_observe(td_metric_series1(padding, exec), (double)(padded - rows));
}
