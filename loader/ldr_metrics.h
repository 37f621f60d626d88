/* ldr_metrics: model-load metrics under TensorFlow's and TF Serving's names
 * (families in base/td_metrics, registered on first use):
 *   :tensorflow:cc:saved_model:load_attempt_count{model_path,status}
 *       counter; status "success" or "fail", one per load attempt
 *   :tensorflow:cc:saved_model:load_latency{model_path}
 *       counter: microseconds spent in successful loads
 *   :tensorflow:serving:model_warmup_latency{model_path,status}
 *       histogram, microseconds (TF Serving's buckets 10 x 1.8^k, 33);
 *       status the code's name ("OK", "DATA_LOSS", ...)
 * model_path is the version directory. No-ops while td_metrics_enabled() is
 * false. Thread-safe. */
#ifndef LDR_METRICS_H
#define LDR_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "td_status.h"

void ldr_metrics_load(const char *path, bool ok, uint64_t micros);
void ldr_metrics_warmup(const char *path, td_code code, uint64_t micros);

#endif
