/* Families are registered once; the request path looks its series up by
 * label values (lock-free in td_metrics) and adds to them. The collectors
 * read the registry and /proc at scrape time only. */
#include "td_clock.h"
#include "srv_metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "eng_device.h"
#include "td_metrics.h"

#define N_LATENCY_BOUNDS 33 /* TF Serving: Exponential(10, 1.8, 33) */
#define N_EXAMPLE_BOUNDS 15 /* Exponential(1, 2, 15) */

static struct {
  td_metric *request_count, *request_latency, *runtime_latency, *example_counts, *example_total;
  td_metric *rejected, *deadline, *runs, *queue_depth, *inflight, *state, *rss, *gpu_used,
      *gpu_limit, *var_bytes;
  ldr_registry *registry;
  uv_mutex_t collect_mu;
} M;

static const char *const EP[] = {"REST", "GRPC"};
static uv_mutex_t models_mu; /* creating a model's srv_mstats */

static void collect_states(void *ctx) {
  ldr_registry *reg = ctx;
  static const ldr_state states[] = {LDR_STATE_START, LDR_STATE_LOADING, LDR_STATE_AVAILABLE,
                                     LDR_STATE_UNLOADING, LDR_STATE_END};
  uv_mutex_lock(&M.collect_mu);
  td_metric_zero(M.state);
  td_metric_zero(M.var_bytes);
  char **names = NULL;
  int n = ldr_registry_model_names(reg, &names);
  for (int i = 0; i < n; i++) {
    ldr_version_status *st = NULL;
    int k = 0;
    if (ldr_registry_status(reg, names[i], -1, &st, &k, NULL)) k = 0;
    for (int j = 0; j < k; j++) {
      char v[24];
      snprintf(v, sizeof v, "%lld", (long long)st[j].version);
      ldr_servable *sv = NULL;
      if (st[j].state == LDR_STATE_AVAILABLE &&
          !ldr_registry_acquire(reg, names[i], st[j].version, &sv, NULL)) {
        const char *bv[2] = {names[i], v};
        td_series_set(td_metric_series(M.var_bytes, bv), (int64_t)ldr_servable_variable_bytes(sv));
        ldr_servable_unref(sv);
      }
      for (size_t s = 0; s < sizeof states / sizeof states[0]; s++) {
        const char *lv[3] = {names[i], v, ldr_state_name(states[s])};
        td_series_set(td_metric_series(M.state, lv), st[j].state == states[s]);
      }
    }
    free(st);
    free(names[i]);
  }
  free(names);
  uv_mutex_unlock(&M.collect_mu);
}

static void collect_rss(void *ctx) {
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return;
  long long size = 0, resident = 0;
  if (fscanf(f, "%lld %lld", &size, &resident) == 2)
    td_series_set(td_metric_series(M.rss, NULL), resident * sysconf(_SC_PAGESIZE));
  fclose(f);
}

static void collect_gpu(void *ctx) {
  if (!eng_device_active()) return; /* no series: the family is not shown on the CPU */
  const char *dev = eng_device_name();
  td_series_set(td_metric_series1(M.gpu_used, dev), (int64_t)eng_device_used());
  td_series_set(td_metric_series1(M.gpu_limit, dev), (int64_t)eng_device_limit());
}

void srv_metrics_init(ldr_registry *registry) {
  double lat[N_LATENCY_BOUNDS], ex[N_EXAMPLE_BOUNDS];
  td_metric_exponential_bounds(10, 1.8, N_LATENCY_BOUNDS, lat);
  td_metric_exponential_bounds(1, 2, N_EXAMPLE_BOUNDS, ex);
  const char *const count_l[] = {"model_name", "status"};
  const char *const lat_l[] = {"model_name", "API", "entrypoint"};
  const char *const run_l[] = {"model_name", "API", "runtime"};
  const char *const model_l[] = {"model"};
  const char *const ep_l[] = {"model_name", "entrypoint"};
  const char *const mode_l[] = {"model_name", "mode"};
  const char *const name_l[] = {"model_name"};
  const char *const state_l[] = {"model_name", "version", "state"};
  uv_mutex_init(&M.collect_mu);
  uv_mutex_init(&models_mu);
  M.request_count = td_metric_counter(":tensorflow:serving:request_count",
                                      "The total number of requests.", 2, count_l);
  M.request_latency = td_metric_histogram(":tensorflow:serving:request_latency",
                                          "Distribution of wall time (in microseconds) for "
                                          "requests, successful ones only.",
                                          3, lat_l, lat, N_LATENCY_BOUNDS);
  M.runtime_latency = td_metric_histogram(":tensorflow:serving:runtime_latency",
                                          "Distribution of wall time (in microseconds) of the "
                                          "model run, successful requests only.",
                                          3, run_l, lat, N_LATENCY_BOUNDS);
  M.example_counts = td_metric_histogram(":tensorflow:serving:request_example_counts",
                                         "The number of examples per Classify or Regress "
                                         "request.",
                                         1, model_l, ex, N_EXAMPLE_BOUNDS);
  M.example_total = td_metric_counter(":tensorflow:serving:request_example_count_total",
                                      "The total number of examples in Classify and Regress "
                                      "requests.",
                                      1, model_l);
  M.rejected = td_metric_counter("tensord_requests_rejected_total",
                                 "Requests answered RESOURCE_EXHAUSTED: a full queue (HTTP "
                                 "429) or a body over the size limit (HTTP 413).",
                                 2, ep_l);
  M.deadline = td_metric_counter("tensord_deadline_exceeded_total",
                                 "Requests answered DEADLINE_EXCEEDED (HTTP 504).", 2, ep_l);
  M.runs = td_metric_counter("tensord_runs_total",
                             "Requests run by the engine, on the receiving thread (inline) or "
                             "on an engine worker (queued).",
                             2, mode_l);
  M.queue_depth =
      td_metric_gauge("tensord_queue_depth", "Requests waiting for an engine run.", 1, name_l);
  M.inflight =
      td_metric_gauge("tensord_inflight_runs", "Requests being run by the engine.", 1, name_l);
  M.state = td_metric_gauge("tensord_model_version_state",
                            "1 for the state a model version is in, 0 for the others.", 3, state_l);
  M.rss = td_metric_gauge("tensord_process_resident_memory_bytes",
                          "Resident memory of the tensord process in bytes.", 0, NULL);
  const char *const ver_l[] = {"model_name", "version"};
  M.var_bytes = td_metric_gauge("tensord_model_variable_bytes",
                                "Bytes of variables a loaded version restored from its checkpoint "
                                "(0 once it is no longer loaded).",
                                2, ver_l);
  const char *const dev_l[] = {"device"};
  M.gpu_used = td_metric_gauge("tensord_gpu_memory_used_bytes",
                               "GPU memory tensord has in use (weights, arenas).", 1, dev_l);
  M.gpu_limit =
      td_metric_gauge("tensord_gpu_memory_limit_bytes",
                      "GPU memory tensord may use (--per_process_gpu_memory_fraction).", 1, dev_l);
  M.registry = registry;
  if (registry) td_metrics_add_collector(collect_states, registry);
  td_metrics_add_collector(collect_rss, NULL);
  td_metrics_add_collector(collect_gpu, NULL);
}

#define MODEL_SLOTS 2048 /* a power of two; at most TD_METRIC_MAX_SERIES models */

struct srv_mstats {
  char name[128];
  uint64_t hash;
  td_series *ok, *depth, *inflight, *runs_inline, *runs_queued; /* made with the entry */
  _Atomic(td_series *) latency[SRV_METRIC_N_APIS][2];           /* made on first use */
  _Atomic(td_series *) runtime[SRV_METRIC_N_APIS];
};

static _Atomic(srv_mstats *) models[MODEL_SLOTS];
static int n_models;
static const char *const API[] = {"Predict", "Classify", "Regress", "MultiInference"};

static uint64_t name_hash(const char *s, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

srv_mstats *srv_metrics_model(const char *model) {
  if (!td_metrics_enabled() || !model || !*model) return NULL;
  size_t len = strnlen(model, sizeof((srv_mstats *)0)->name - 1);
  uint64_t h = name_hash(model, len);
  size_t i = (size_t)h & (MODEL_SLOTS - 1);
  for (;; i = (i + 1) & (MODEL_SLOTS - 1)) { /* lock-free: slots are filled once */
    srv_mstats *m = atomic_load_explicit(&models[i], memory_order_acquire);
    if (!m) break;
    if (m->hash == h && !strncmp(m->name, model, len) && !m->name[len]) return m;
  }
  uv_mutex_lock(&models_mu);
  srv_mstats *m = NULL;
  for (;; i = (i + 1) & (MODEL_SLOTS - 1)) {
    srv_mstats *t = atomic_load_explicit(&models[i], memory_order_acquire);
    if (!t) break;
    if (t->hash == h && !strncmp(t->name, model, len) && !t->name[len]) {
      m = t;
      goto out;
    }
  }
  if (n_models >= TD_METRIC_MAX_SERIES || !(m = calloc(1, sizeof *m))) goto out;
  memcpy(m->name, model, len);
  m->hash = h;
  m->ok = td_metric_series2(M.request_count, m->name, "OK");
  m->depth = td_metric_series1(M.queue_depth, m->name);
  m->inflight = td_metric_series1(M.inflight, m->name);
  m->runs_inline = td_metric_series2(M.runs, m->name, "inline");
  m->runs_queued = td_metric_series2(M.runs, m->name, "queued");
  n_models++;
  atomic_store_explicit(&models[i], m, memory_order_release);
out:
  uv_mutex_unlock(&models_mu);
  return m;
}

static td_series *lazy(_Atomic(td_series *) *slot, td_metric *f, const char *const *labels) {
  td_series *s = atomic_load_explicit(slot, memory_order_acquire);
  if (!s && (s = td_metric_series(f, labels))) atomic_store_explicit(slot, s, memory_order_release);
  return s;
}

void srv_metrics_request(srv_mstats *ms, srv_metric_api api, srv_entrypoint ep, td_code code,
                         uint64_t start_ns, uint64_t run_ns) {
  if (!ms || (unsigned)api >= SRV_METRIC_N_APIS) return;
  if (code) {
    td_series_add(td_metric_series2(M.request_count, ms->name, td_code_name(code)), 1);
    if (code == TD_RESOURCE_EXHAUSTED)
      td_series_add(td_metric_series2(M.rejected, ms->name, EP[ep]), 1);
    else if (code == TD_DEADLINE_EXCEEDED)
      td_series_add(td_metric_series2(M.deadline, ms->name, EP[ep]), 1);
    return;
  }
  td_series_add(ms->ok, 1);
  const char *lv[3] = {ms->name, API[api], EP[ep]};
  td_series_observe(lazy(&ms->latency[api][ep], M.request_latency, lv),
                    (double)(td_now_ns() - start_ns) / 1e3);
  if (run_ns) {
    const char *rv[3] = {ms->name, API[api], "TF1"};
    td_series_observe(lazy(&ms->runtime[api], M.runtime_latency, rv), (double)run_ns / 1e3);
  }
}

const char *srv_metrics_api_name(srv_metric_api api) {
  return (unsigned)api < SRV_METRIC_N_APIS ? API[api] : "?";
}

void srv_metrics_examples(srv_mstats *ms, int n) {
  if (!ms) return;
  td_series_observe(td_metric_series1(M.example_counts, ms->name), n);
  td_series_add(td_metric_series1(M.example_total, ms->name), n);
}

void srv_metrics_queue_add(srv_mstats *ms, int delta) {
  if (ms) td_series_add(ms->depth, delta);
}

void srv_metrics_inflight_add(srv_mstats *ms, int delta, bool inline_run) {
  if (!ms) return;
  td_series_add(ms->inflight, delta);
  if (delta > 0) td_series_add(inline_run ? ms->runs_inline : ms->runs_queued, 1);
}

void srv_metrics_render(td_buf *out) { td_metrics_render(out); }
