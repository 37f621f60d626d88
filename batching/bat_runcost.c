/* A set-associative table: a key hashes to one set of WAYS entries; a new
 * key takes an empty way or the one used longest ago. */
#include "bat_runcost.h"

#include <stdlib.h>
#include <uv.h>

#define SETS 32
#define WAYS 8
/* A sample this many times the limit replaces the average instead of
 * moving it (a stale entry, or a plan that has become slow). */
#define JUMP_FACTOR 4
#define EWMA_SHIFT 3 /* weight 1/8 per sample */

typedef struct entry {
  const void *key; /* NULL: empty */
  uint64_t avg_ns;
  uint64_t size_ok; /* largest input seen within the limit */
  uint64_t used;    /* stamp of the last access */
} entry;

struct bat_runcost {
  uv_mutex_t mu;
  uint64_t limit_ns;
  uint64_t clock;
  entry sets[SETS][WAYS];
};

td_code bat_runcost_create(uint64_t limit_ns, bat_runcost **out, td_err *err) {
  bat_runcost *c = calloc(1, sizeof *c);
  if (!c) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (uv_mutex_init(&c->mu)) {
    free(c);
    return td_err_set(err, TD_INTERNAL, "cannot create the run-cost lock");
  }
  c->limit_ns = limit_ns;
  *out = c;
  return TD_OK;
}

void bat_runcost_destroy(bat_runcost *c) {
  if (!c) return;
  uv_mutex_destroy(&c->mu);
  free(c);
}

void bat_runcost_set_limit(bat_runcost *c, uint64_t limit_ns) {
  uv_mutex_lock(&c->mu);
  c->limit_ns = limit_ns;
  uv_mutex_unlock(&c->mu);
}

uint64_t bat_runcost_limit(bat_runcost *c) {
  uv_mutex_lock(&c->mu);
  uint64_t v = c->limit_ns;
  uv_mutex_unlock(&c->mu);
  return v;
}

static entry *set_of(bat_runcost *c, const void *key) {
  uintptr_t h = (uintptr_t)key;
  h ^= h >> 17;
  h *= (uintptr_t)0x9E3779B97F4A7C15ull;
  return c->sets[(h >> 24) % SETS];
}

static entry *find(bat_runcost *c, const void *key) {
  entry *s = set_of(c, key);
  for (int i = 0; i < WAYS; i++)
    if (s[i].key == key) return &s[i];
  return NULL;
}

void bat_runcost_record(bat_runcost *c, const void *key, uint64_t size, uint64_t ns) {
  if (!key) return;
  uv_mutex_lock(&c->mu);
  entry *e = find(c, key);
  if (!e) {
    entry *s = set_of(c, key);
    e = &s[0];
    for (int i = 0; i < WAYS && e->key; i++)
      if (!s[i].key || s[i].used < e->used) e = &s[i];
    *e = (entry){.key = key, .avg_ns = ns};
  } else if (ns > JUMP_FACTOR * c->limit_ns) {
    e->avg_ns = ns;
  } else {
    int64_t d = (int64_t)ns - (int64_t)e->avg_ns;
    e->avg_ns = (uint64_t)((int64_t)e->avg_ns + d / (1 << EWMA_SHIFT));
  }
  if (ns <= c->limit_ns) {
    if (size > e->size_ok) e->size_ok = size;
  } else if (size <= e->size_ok) {
    e->size_ok = size / 2;
  }
  e->used = ++c->clock;
  uv_mutex_unlock(&c->mu);
}

bool bat_runcost_is_short(bat_runcost *c, const void *key, uint64_t size) {
  if (!key) return false;
  uv_mutex_lock(&c->mu);
  bool ok = false;
  entry *e = c->limit_ns ? find(c, key) : NULL;
  if (e) {
    e->used = ++c->clock;
    ok = e->avg_ns <= c->limit_ns && size <= e->size_ok;
  }
  uv_mutex_unlock(&c->mu);
  return ok;
}
