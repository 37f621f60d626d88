/* A flat array under one mutex: a server holds few model versions, and a
 * record is a scan of them plus a few additions. */
#include "srv_stats.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "td_log.h"

struct srv_stats {
  uv_mutex_t mu;
  srv_stats_entry *e;
  int n, cap;
  bool warned;
};

srv_stats *srv_stats_create(void) {
  srv_stats *s = calloc(1, sizeof *s);
  if (!s) return NULL;
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
static srv_stats_entry *find_or_add(srv_stats *s, const char *model, int64_t version) {
  for (int i = 0; i < s->n; i++)
    if (s->e[i].version == version && !strcmp(s->e[i].model, model)) return &s->e[i];
  if (s->n == s->cap) {
    int cap = s->cap ? 2 * s->cap : 8;
    srv_stats_entry *g = realloc(s->e, sizeof *g * (size_t)cap);
    if (!g) return NULL;
    s->e = g;
    s->cap = cap;
  }
  char *name = strdup(model);
  if (!name) return NULL;
  srv_stats_entry *e = &s->e[s->n++];
  memset(e, 0, sizeof *e);
  e->model = name;
  e->version = version;
  return e;
}

void srv_stats_record(srv_stats *s, const char *model, int64_t version, bool ok, uint64_t rows,
                      uint64_t ns) {
  if (!s || !model) return;
  uint64_t ms = now_ms();
  uv_mutex_lock(&s->mu);
  srv_stats_entry *e = find_or_add(s, model, version);
  if (!e) {
    if (!s->warned) td_log_warn("statistics: out of memory; records are being dropped");
    s->warned = true;
  } else if (ok) {
    e->success_count++;
    e->success_ns += ns;
    e->inference_count += rows;
    e->execution_count++;
    e->last_ms = ms;
  } else {
    e->fail_count++;
    e->fail_ns += ns;
    e->last_ms = ms;
  }
  uv_mutex_unlock(&s->mu);
}

static int cmp_entry(const void *pa, const void *pb) {
  const srv_stats_entry *a = pa, *b = pb;
  int c = strcmp(a->model, b->model);
  if (c) return c;
  return a->version < b->version ? -1 : a->version > b->version;
}

int srv_stats_snapshot(srv_stats *s, const char *model, int64_t version, srv_stats_entry **out) {
  *out = NULL;
  if (!s) return 0;
  uv_mutex_lock(&s->mu);
  srv_stats_entry *r = s->n ? calloc((size_t)s->n, sizeof *r) : NULL;
  int k = 0;
  for (int i = 0; r && i < s->n; i++) {
    if (model && strcmp(model, s->e[i].model)) continue;
    if (version >= 0 && version != s->e[i].version) continue;
    r[k] = s->e[i];
    if (!(r[k].model = strdup(s->e[i].model))) break;
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
