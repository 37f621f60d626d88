/* Each family keeps its series twice: in an open-addressing table of
 * atomic pointers (lock-free lookup; a slot, once filled, never changes)
 * and on a list in creation order (rendering). Both only grow, under the
 * family's mutex. A histogram's sum is a double kept as its bits and
 * updated by compare-and-swap. */
#include "td_metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS (TD_METRIC_MAX_SERIES * 2) /* a power of two, half full at most */
#define MAX_FAMILIES 128
#define MAX_COLLECTORS 16

struct td_series {
  td_metric *family;
  uint64_t hash;
  char *values[TD_METRIC_MAX_LABELS];
  _Atomic int64_t value;      /* counter, gauge; histogram: count */
  _Atomic uint64_t sum_bits;  /* histogram: the sum, as a double's bits */
  _Atomic(td_series *) next;  /* creation order */
  _Atomic uint64_t buckets[]; /* histogram: n_bounds + 1 (the last: +Inf) */
};

struct td_metric {
  char *name;
  char *help;
  td_metric_kind kind;
  int n_labels;
  char *labels[TD_METRIC_MAX_LABELS];
  int n_bounds;
  double bounds[TD_METRIC_MAX_BUCKETS];
  pthread_mutex_t mu;
  int n_series;
  _Atomic(td_series *) head;
  td_series *tail;
  _Atomic(td_series *) slots[SLOTS];
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static td_metric *families[MAX_FAMILIES];
static _Atomic int n_families;
static struct {
  td_metrics_collect_fn fn;
  void *ctx;
} collectors[MAX_COLLECTORS];
static int n_collectors;
static atomic_bool enabled;

void td_metrics_set_enabled(bool on) { atomic_store(&enabled, on); }
bool td_metrics_enabled(void) { return atomic_load_explicit(&enabled, memory_order_relaxed); }

void td_metric_exponential_bounds(double start, double factor, int n, double *out) {
  double v = start;
  for (int i = 0; i < n; i++, v *= factor) out[i] = v;
}

static td_metric *family_new(const char *name, const char *help, td_metric_kind kind, int n_labels,
                             const char *const *labels, const double *bounds, int n_bounds) {
  if (!name || n_labels < 0 || n_labels > TD_METRIC_MAX_LABELS || n_bounds < 0 ||
      n_bounds > TD_METRIC_MAX_BUCKETS)
    return NULL;
  for (int i = 1; i < n_bounds; i++)
    if (!(bounds[i] > bounds[i - 1])) return NULL;
  pthread_mutex_lock(&reg_mu);
  td_metric *m = NULL;
  int n = atomic_load(&n_families);
  for (int i = 0; i < n; i++)
    if (!strcmp(families[i]->name, name)) {
      m = families[i];
      goto out;
    }
  if (n == MAX_FAMILIES || !(m = calloc(1, sizeof *m))) goto out;
  m->name = strdup(name);
  m->help = strdup(help ? help : "");
  bool ok = m->name && m->help;
  for (int i = 0; i < n_labels; i++) ok = ok && (m->labels[i] = strdup(labels[i]));
  if (!ok) {
    for (int i = 0; i < n_labels; i++) free(m->labels[i]);
    free(m->name);
    free(m->help);
    free(m);
    m = NULL;
    goto out;
  }
  m->kind = kind;
  m->n_labels = n_labels;
  m->n_bounds = n_bounds;
  if (n_bounds) memcpy(m->bounds, bounds, (size_t)n_bounds * sizeof *bounds);
  pthread_mutex_init(&m->mu, NULL);
  families[n] = m;
  atomic_store(&n_families, n + 1);
out:
  pthread_mutex_unlock(&reg_mu);
  return m;
}

td_metric *td_metric_counter(const char *name, const char *help, int n_labels,
                             const char *const *labels) {
  return family_new(name, help, TD_METRIC_COUNTER, n_labels, labels, NULL, 0);
}

td_metric *td_metric_gauge(const char *name, const char *help, int n_labels,
                           const char *const *labels) {
  return family_new(name, help, TD_METRIC_GAUGE, n_labels, labels, NULL, 0);
}

td_metric *td_metric_histogram(const char *name, const char *help, int n_labels,
                               const char *const *labels, const double *bounds, int n_bounds) {
  return family_new(name, help, TD_METRIC_HISTOGRAM, n_labels, labels, bounds, n_bounds);
}

static size_t value_len(const char *v) {
  size_t n = strlen(v);
  return n > TD_METRIC_MAX_VALUE ? TD_METRIC_MAX_VALUE : n;
}

static uint64_t hash_values(int n, const char *const *values) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (int i = 0; i < n; i++) {
    const char *v = values[i] ? values[i] : "";
    size_t len = value_len(v);
    for (size_t k = 0; k < len; k++) h = (h ^ (unsigned char)v[k]) * 1099511628211ull;
    h = (h ^ 0x1f) * 1099511628211ull;
  }
  return h;
}

static bool same_values(const td_series *s, int n, const char *const *values) {
  for (int i = 0; i < n; i++) {
    const char *v = values[i] ? values[i] : "";
    size_t len = value_len(v);
    if (strncmp(s->values[i], v, len) || s->values[i][len]) return false;
  }
  return true;
}

static td_series *series_new(td_metric *m, uint64_t h, const char *const *values) {
  size_t nb = m->kind == TD_METRIC_HISTOGRAM ? (size_t)m->n_bounds + 1 : 0;
  td_series *s = calloc(1, sizeof *s + nb * sizeof s->buckets[0]);
  if (!s) return NULL;
  s->family = m;
  s->hash = h;
  for (int i = 0; i < m->n_labels; i++) {
    const char *v = values[i] ? values[i] : "";
    if (!(s->values[i] = strndup(v, value_len(v)))) {
      for (int k = 0; k < i; k++) free(s->values[k]);
      free(s);
      return NULL;
    }
  }
  return s;
}

td_series *td_metric_series(td_metric *m, const char *const *values) {
  if (!m) return NULL;
  uint64_t h = hash_values(m->n_labels, values);
  size_t i = (size_t)h & (SLOTS - 1);
  for (;;) { /* lock-free: slots only go from NULL to a series */
    td_series *s = atomic_load_explicit(&m->slots[i], memory_order_acquire);
    if (!s) break;
    if (s->hash == h && same_values(s, m->n_labels, values)) return s;
    i = (i + 1) & (SLOTS - 1);
  }
  pthread_mutex_lock(&m->mu);
  td_series *s = NULL;
  for (;;) { /* again under the lock: another thread may have added it */
    td_series *t = atomic_load_explicit(&m->slots[i], memory_order_acquire);
    if (!t) break;
    if (t->hash == h && same_values(t, m->n_labels, values)) {
      s = t;
      goto out;
    }
    i = (i + 1) & (SLOTS - 1);
  }
  if (m->n_series >= TD_METRIC_MAX_SERIES || !(s = series_new(m, h, values))) goto out;
  m->n_series++;
  if (m->tail)
    atomic_store_explicit(&m->tail->next, s, memory_order_release);
  else
    atomic_store_explicit(&m->head, s, memory_order_release);
  m->tail = s;
  atomic_store_explicit(&m->slots[i], s, memory_order_release);
out:
  pthread_mutex_unlock(&m->mu);
  return s;
}

td_series *td_metric_series1(td_metric *m, const char *v0) {
  const char *v[1] = {v0};
  return td_metric_series(m, v);
}

td_series *td_metric_series2(td_metric *m, const char *v0, const char *v1) {
  const char *v[2] = {v0, v1};
  return td_metric_series(m, v);
}

void td_series_add(td_series *s, int64_t delta) {
  if (s) atomic_fetch_add_explicit(&s->value, delta, memory_order_relaxed);
}

void td_series_set(td_series *s, int64_t value) {
  if (s) atomic_store_explicit(&s->value, value, memory_order_relaxed);
}

void td_series_observe(td_series *s, double v) {
  if (!s || s->family->kind != TD_METRIC_HISTOGRAM || isnan(v)) return;
  const td_metric *m = s->family;
  int lo = 0, hi = m->n_bounds; /* first bound >= v; n_bounds: +Inf */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (m->bounds[mid] >= v)
      hi = mid;
    else
      lo = mid + 1;
  }
  atomic_fetch_add_explicit(&s->buckets[lo], 1, memory_order_relaxed);
  uint64_t old = atomic_load_explicit(&s->sum_bits, memory_order_relaxed), nw;
  do {
    double d;
    memcpy(&d, &old, sizeof d);
    d += v;
    memcpy(&nw, &d, sizeof nw);
  } while (!atomic_compare_exchange_weak_explicit(&s->sum_bits, &old, nw, memory_order_relaxed,
                                                  memory_order_relaxed));
  atomic_fetch_add_explicit(&s->value, 1, memory_order_relaxed);
}

int64_t td_series_value(const td_series *s) {
  return s ? atomic_load_explicit(&((td_series *)s)->value, memory_order_relaxed) : 0;
}

void td_metric_zero(td_metric *m) {
  if (!m || m->kind != TD_METRIC_GAUGE) return;
  for (td_series *s = atomic_load_explicit(&m->head, memory_order_acquire); s;
       s = atomic_load_explicit(&s->next, memory_order_acquire))
    atomic_store_explicit(&s->value, 0, memory_order_relaxed);
}

double td_series_sum(const td_series *s) {
  if (!s) return 0;
  uint64_t b = atomic_load_explicit(&((td_series *)s)->sum_bits, memory_order_relaxed);
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

void td_metrics_add_collector(td_metrics_collect_fn fn, void *ctx) {
  pthread_mutex_lock(&reg_mu);
  if (n_collectors < MAX_COLLECTORS) {
    collectors[n_collectors].fn = fn;
    collectors[n_collectors].ctx = ctx;
    n_collectors++;
  }
  pthread_mutex_unlock(&reg_mu);
}

static void put_escaped(td_buf *b, const char *v) {
  for (; *v; v++) {
    if (*v == '\\')
      td_buf_puts(b, "\\\\");
    else if (*v == '"')
      td_buf_puts(b, "\\\"");
    else if (*v == '\n')
      td_buf_puts(b, "\\n");
    else
      td_buf_putc(b, *v);
  }
}

/* {a="x",b="y"[,le="..."]}; nothing for no labels and no le. */
static void put_labels(td_buf *b, const td_series *s, const char *le) {
  const td_metric *m = s->family;
  if (!m->n_labels && !le) return;
  td_buf_putc(b, '{');
  for (int i = 0; i < m->n_labels; i++) {
    td_buf_printf(b, "%s%s=\"", i ? "," : "", m->labels[i]);
    put_escaped(b, s->values[i]);
    td_buf_putc(b, '"');
  }
  if (le) td_buf_printf(b, "%sle=\"%s\"", m->n_labels ? "," : "", le);
  td_buf_putc(b, '}');
}

static void render_family(td_buf *b, td_metric *m) {
  td_series *s = atomic_load_explicit(&m->head, memory_order_acquire);
  if (!s) return;
  static const char *const kinds[] = {"counter", "gauge", "histogram"};
  if (*m->help) {
    td_buf_printf(b, "# HELP %s ", m->name);
    for (const char *h = m->help; *h; h++) {
      if (*h == '\\')
        td_buf_puts(b, "\\\\");
      else if (*h == '\n')
        td_buf_puts(b, "\\n");
      else
        td_buf_putc(b, *h);
    }
    td_buf_putc(b, '\n');
  }
  td_buf_printf(b, "# TYPE %s %s\n", m->name, kinds[m->kind]);
  for (; s; s = atomic_load_explicit(&s->next, memory_order_acquire)) {
    if (m->kind != TD_METRIC_HISTOGRAM) {
      td_buf_puts(b, m->name);
      put_labels(b, s, NULL);
      td_buf_printf(b, " %lld\n", (long long)td_series_value(s));
      continue;
    }
    uint64_t cum = 0;
    char le[40];
    for (int i = 0; i <= m->n_bounds; i++) {
      cum += atomic_load_explicit(&s->buckets[i], memory_order_relaxed);
      if (i < m->n_bounds)
        snprintf(le, sizeof le, "%.10g", m->bounds[i]);
      else
        snprintf(le, sizeof le, "+Inf");
      td_buf_printf(b, "%s_bucket", m->name);
      put_labels(b, s, le);
      td_buf_printf(b, " %llu\n", (unsigned long long)cum);
    }
    td_buf_printf(b, "%s_sum", m->name);
    put_labels(b, s, NULL);
    td_buf_printf(b, " %.17g\n", td_series_sum(s));
    /* The count is the +Inf bucket, so the two always agree. */
    td_buf_printf(b, "%s_count", m->name);
    put_labels(b, s, NULL);
    td_buf_printf(b, " %llu\n", (unsigned long long)cum);
  }
}

void td_metrics_render(td_buf *out) {
  pthread_mutex_lock(&reg_mu);
  int nc = n_collectors;
  pthread_mutex_unlock(&reg_mu);
  for (int i = 0; i < nc; i++) collectors[i].fn(collectors[i].ctx);
  int n = atomic_load(&n_families);
  for (int i = 0; i < n; i++) render_family(out, families[i]);
}
