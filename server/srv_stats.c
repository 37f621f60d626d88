/* The version table is a flat array under one mutex (a server holds few
 * model versions); each entry keeps pointers to its td_metrics series, which
 * hold the counts. Recording finds the entry under the mutex and adds to the
 * series (relaxed atomics); a snapshot copies the table and reads them. */
#include "srv_stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "td_log.h"
#include "td_metrics.h"

enum {
  C_SUCCESS,
  C_FAIL,
  C_ROWS,
  C_EXEC,
  C_SUCCESS_NS,
  C_FAIL_NS,
  C_QUEUE_NS,
  C_INPUT_NS,
  C_INFER_NS,
  C_OUTPUT_NS,
  C_N
};

static const struct {
  const char *name, *help;
} FAMILY[C_N] = {
    {"tensord_inference_request_success_total", "Successful model runs."},
    {"tensord_inference_request_failure_total", "Failed model runs."},
    {"tensord_inference_count_total", "Rows (batch elements) of successful runs."},
    {"tensord_inference_exec_count_total", "Successful runs (executions)."},
    {"tensord_inference_request_duration_total",
     "Nanoseconds of successful runs, request decoding to the run's end."},
    {"tensord_inference_fail_duration_total", "Nanoseconds of failed runs."},
    {"tensord_inference_queue_duration_total",
     "Nanoseconds successful runs waited in the batch or work queue."},
    {"tensord_inference_compute_input_duration_total",
     "Nanoseconds successful runs spent decoding their inputs."},
    {"tensord_inference_compute_infer_duration_total",
     "Nanoseconds successful runs spent running (batch merge and split included)."},
    {"tensord_inference_compute_output_duration_total",
     "Nanoseconds successful runs spent on their outputs (not measured apart: 0)."},
};

typedef struct entry {
  char *model;
  int64_t version;
  td_series *c[C_N];
  uint64_t last_ms;
} entry;

struct srv_stats {
  uv_mutex_t mu;
  td_metric *fam[C_N];
  entry *e;
  int n, cap;
  bool warned;
};

srv_stats *srv_stats_create(void) {
  srv_stats *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  const char *const labels[] = {"model_name", "version"};
  for (int k = 0; k < C_N; k++)
    if (!(s->fam[k] = td_metric_counter(FAMILY[k].name, FAMILY[k].help, 2, labels))) {
      free(s);
      return NULL;
    }
  if (uv_mutex_init(&s->mu)) {
    free(s);
    return NULL;
  }
  return s;
}

void srv_stats_destroy(srv_stats *s) {
  if (!s) return;
  for (int i = 0; i < s->n; i++) free(s->e[i].model);
  free(s->e);
  uv_mutex_destroy(&s->mu);
  free(s);
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Under s->mu. */
static entry *find_or_add(srv_stats *s, const char *model, int64_t version) {
  for (int i = 0; i < s->n; i++)
    if (s->e[i].version == version && !strcmp(s->e[i].model, model)) return &s->e[i];
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    entry *g = realloc(s->e, sizeof *g * (size_t)cap);
    if (!g) return NULL;
    s->e = g;
    s->cap = cap;
  }
  entry e = {.version = version};
  char v[24];
  snprintf(v, sizeof v, "%lld", (long long)version);
  for (int k = 0; k < C_N; k++)
    if (!(e.c[k] = td_metric_series2(s->fam[k], model, v))) return NULL;
  if (!(e.model = strdup(model))) return NULL;
  s->e[s->n] = e;
  return &s->e[s->n++];
}

void srv_stats_record(srv_stats *s, const char *model, int64_t version, const srv_stats_sample *x) {
  if (!s || !model || !x) return;
  uint64_t ms = now_ms();
  /* The series are never freed: their pointers, copied out under the lock,
   * stay valid after it (the entry itself may move with a realloc). */
  td_series *c[C_N];
  uv_mutex_lock(&s->mu);
  entry *e = find_or_add(s, model, version);
  if (e) {
    e->last_ms = ms;
    memcpy(c, e->c, sizeof c);
  } else if (!s->warned) {
    td_log_warn("statistics: out of memory or too many model versions; records are dropped");
    s->warned = true;
  }
  uv_mutex_unlock(&s->mu);
  if (!e) return;
  if (x->ok) {
    td_series_add(c[C_SUCCESS], 1);
    td_series_add(c[C_EXEC], 1);
    td_series_add(c[C_ROWS], (int64_t)x->rows);
    td_series_add(c[C_SUCCESS_NS], (int64_t)x->total_ns);
    td_series_add(c[C_QUEUE_NS], (int64_t)x->queue_ns);
    td_series_add(c[C_INPUT_NS], (int64_t)x->input_ns);
    td_series_add(c[C_INFER_NS], (int64_t)x->infer_ns);
    td_series_add(c[C_OUTPUT_NS], (int64_t)x->output_ns);
  } else {
    td_series_add(c[C_FAIL], 1);
    td_series_add(c[C_FAIL_NS], (int64_t)x->total_ns);
  }
}

static int cmp_entry(const void *pa, const void *pb) {
  const srv_stats_entry *a = pa, *b = pb;
  int c = strcmp(a->model, b->model);
  if (c) return c;
  return a->version < b->version ? -1 : a->version > b->version;
}

static uint64_t val(const entry *e, int k) { return (uint64_t)td_series_value(e->c[k]); }

int srv_stats_snapshot(srv_stats *s, const char *model, int64_t version, srv_stats_entry **out) {
  *out = NULL;
  if (!s) return 0;
  uv_mutex_lock(&s->mu);
  srv_stats_entry *r = s->n ? calloc((size_t)s->n, sizeof *r) : NULL;
  int k = 0;
  for (int i = 0; r && i < s->n; i++) {
    const entry *e = &s->e[i];
    if (model && strcmp(model, e->model)) continue;
    if (version >= 0 && version != e->version) continue;
    if (!(r[k].model = strdup(e->model))) break;
    r[k].version = e->version;
    r[k].last_ms = e->last_ms;
    r[k].success_count = val(e, C_SUCCESS);
    r[k].success_ns = val(e, C_SUCCESS_NS);
    r[k].fail_count = val(e, C_FAIL);
    r[k].fail_ns = val(e, C_FAIL_NS);
    r[k].queue_ns = val(e, C_QUEUE_NS);
    r[k].compute_input_ns = val(e, C_INPUT_NS);
    r[k].compute_infer_ns = val(e, C_INFER_NS);
    r[k].compute_output_ns = val(e, C_OUTPUT_NS);
    r[k].inference_count = val(e, C_ROWS);
    r[k].execution_count = val(e, C_EXEC);
    k++;
  }
  uv_mutex_unlock(&s->mu);
  if (r) qsort(r, (size_t)k, sizeof *r, cmp_entry);
  *out = r;
  return k;
}

void srv_stats_snapshot_free(srv_stats_entry *e, int n) {
  for (int i = 0; i < n; i++) free(e[i].model);
  free(e);
}
