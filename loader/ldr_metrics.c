#include "ldr_metrics.h"

#include <pthread.h>

#include "td_metrics.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static td_metric *attempts, *latency, *warmup;

static void init(void) {
  const char *const al[] = {"model_path", "status"};
  const char *const ll[] = {"model_path"};
  double b[33];
  td_metric_exponential_bounds(10, 1.8, 33, b);
  attempts = td_metric_counter(":tensorflow:cc:saved_model:load_attempt_count",
                               "The number of times a SavedModel load was attempted.", 2, al);
  latency = td_metric_counter(":tensorflow:cc:saved_model:load_latency",
                              "Microseconds spent in successful SavedModel loads.", 1, ll);
  warmup = td_metric_histogram(":tensorflow:serving:model_warmup_latency",
                               "Distribution of wall time (in microseconds) for warming up the "
                               "model.",
                               2, al, b, 33);
}

void ldr_metrics_load(const char *path, bool ok, uint64_t micros) {
  if (!td_metrics_enabled()) return;
  pthread_once(&once, init);
  td_series_add(td_metric_series2(attempts, path, ok ? "success" : "fail"), 1);
  if (ok) td_series_add(td_metric_series1(latency, path), (int64_t)micros);
}

void ldr_metrics_warmup(const char *path, td_code code, uint64_t micros) {
  if (!td_metrics_enabled()) return;
  pthread_once(&once, init);
  td_series_observe(td_metric_series2(warmup, path, td_code_name(code)), (double)micros);
}
