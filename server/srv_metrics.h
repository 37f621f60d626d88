/* srv_metrics: the server's metrics, under TF Serving's names, and their
 * Prometheus page.
 *
 * Families (registered by srv_metrics_init in base/td_metrics; a name with
 * '/' in TF Serving has ':' here, as TF Serving's exporter writes it):
 *   :tensorflow:serving:request_count{model_name,status}        counter
 *   :tensorflow:serving:request_latency{model_name,API,entrypoint}
 *                                            histogram, microseconds,
 *                                            TF's buckets (10 x 1.8^k, 33)
 *   :tensorflow:serving:runtime_latency{model_name,API,runtime}  the same,
 *                                            for the engine run alone
 *   :tensorflow:serving:request_example_counts{model}          histogram
 *   :tensorflow:serving:request_example_count_total{model}     counter
 * and tensord's own:
 *   tensord_requests_rejected_total{model_name,entrypoint}  429 /
 *                                            RESOURCE_EXHAUSTED answers
 *   tensord_deadline_exceeded_total{model_name,entrypoint}  504 /
 *                                            DEADLINE_EXCEEDED answers
 *   tensord_runs_total{model_name,mode}      mode "inline" (on the thread
 *                                            that received the request) or
 *                                            "queued" (an engine worker)
 *   tensord_queue_depth{model_name}          gauge: requests waiting for an
 *                                            engine run
 *   tensord_inflight_runs{model_name}        gauge: requests being run
 *   tensord_model_version_state{model_name,version,state}  gauge, 1 for a
 *                                            version's current state and 0
 *                                            for the other states
 *   tensord_model_variable_bytes{model_name,version}  gauge: bytes of the
 *                                            variables an AVAILABLE version
 *                                            restored from its checkpoint
 *                                            (constants frozen into the
 *                                            graph are not counted)
 *   tensord_process_resident_memory_bytes    gauge (/proc/self/statm)
 *   tensord_gpu_memory_used_bytes{device}, tensord_gpu_memory_limit_bytes{device}
 *                                            gauges, only when models run
 *                                            on a GPU (eng_device_used/limit)
 * API is "Predict", "Classify", "Regress" or "MultiInference"; entrypoint
 * "REST" or "GRPC"; status the code's name ("OK", "NOT_FOUND", ...);
 * runtime "TF1" (TF Serving's value for a SavedModel session, kept so
 * dashboards filtering on it keep working). Loader and batching families
 * are registered by their own modules (ldr_metrics, bat_metrics).
 *
 * Everything is a no-op while td_metrics_enabled() is false. Thread-safe;
 * srv_metrics_init once, from main, before the transports start. */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "ldr_registry.h"
#include "td_buf.h"
#include "td_status.h"

#define SRV_METRICS_DEFAULT_PATH "/monitoring/prometheus/metrics"

typedef enum { SRV_EP_REST, SRV_EP_GRPC } srv_entrypoint;
typedef enum {
  SRV_METRIC_PREDICT,
  SRV_METRIC_CLASSIFY,
  SRV_METRIC_REGRESS,
  SRV_METRIC_MULTI_INFERENCE,
  SRV_METRIC_N_APIS
} srv_metric_api;

/* A model's series, found once per request (one hash probe) and kept by
 * pointer; they live as long as the process. */
typedef struct srv_mstats srv_mstats;

/* The registry is read by the version-state collector; it must outlive
 * every render. */
void srv_metrics_init(ldr_registry *registry);

/* The model's series; NULL while td_metrics_enabled() is false, or for an
 * empty name (every function below accepts NULL and does nothing). Names
 * are cut at 127 bytes; past TD_METRIC_MAX_SERIES models, NULL. */
srv_mstats *srv_metrics_model(const char *model);

/* One finished Predict/Classify/Regress/MultiInference request: `code` is
 * its answer, start_ns its arrival (td_now_ns clock), run_ns the engine
 * run's time (0: none; latencies are recorded for successes only, as TF
 * Serving does). */
void srv_metrics_request(srv_mstats *ms, srv_metric_api api, srv_entrypoint ep, td_code code,
                         uint64_t start_ns, uint64_t run_ns);
/* "Predict", "Classify", "Regress", "MultiInference". */
const char *srv_metrics_api_name(srv_metric_api api);
/* Examples in a Classify/Regress request. */
void srv_metrics_examples(srv_mstats *ms, int n);

/* Run accounting for srv_api (see srv_api.c). */
void srv_metrics_queue_add(srv_mstats *ms, int delta);
void srv_metrics_inflight_add(srv_mstats *ms, int delta, bool inline_run);

/* The text exposition of every registered family. */
void srv_metrics_render(td_buf *out);

#endif
