/* The pool's one job at a time: the caller holding `busy` posts (fn, arg,
 * nchunks) under the mutex with a new generation number, wakes sleeping
 * helpers, and takes chunks itself. A chunk is claimed by a compare-and-swap
 * on one 64-bit word, generation in the high half and next chunk index in
 * the low half, so a helper that wakes late, after that job is over, can
 * never claim a chunk of the next job through a stale view: its swap fails
 * on the generation. The caller waits only for chunks that were claimed,
 * never for helpers that did not show up. */
#include "eng_pool.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <threads.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

#define MAX_THREADS 64
/* Pause instructions an idle thread spins through before it sleeps (a
 * helper waiting for the next op, the caller for the last chunks). Off: a
 * fork/join micro-benchmark (8 chunks of ~2 us per op) showed no gain
 * from 256 or 2048 on a shared 2-core machine, where a spinning thread
 * takes the core another worker needs. -DENG_POOL_SPIN=N turns it on. */
#ifndef ENG_POOL_SPIN
#define ENG_POOL_SPIN 0
#endif
#define SPIN ENG_POOL_SPIN

typedef struct job {
  eng_pool_fn fn;
  void *arg;
  int64_t n;
} job;

struct eng_pool {
  atomic_int threads;
  atomic_flag busy;
  mtx_t mu;
  cnd_t wake, fin;
  job job;                     /* under mu; valid for generation `posted` */
  atomic_uint posted;          /* generation of the last posted job */
  unsigned gen;                /* the poster's counter (only the busy holder) */
  atomic_uint_least64_t claim; /* gen << 32 | next chunk */
  atomic_int_least64_t done;   /* chunks of the current job finished */
  int sleepers;                /* under mu */
  bool stop;                   /* under mu */
  int nhelpers;                /* only the busy holder, and destroy */
  thrd_t helper[MAX_THREADS];
};

/* The next chunk of job generation g, or -1 when it has none left (or is
 * over). */
static int64_t claim_next(eng_pool *p, unsigned g, int64_t n) {
  uint64_t v = atomic_load_explicit(&p->claim, memory_order_relaxed);
  for (;;) {
    if ((unsigned)(v >> 32) != g) return -1;
    int64_t i = (int64_t)(v & 0xffffffffu);
    if (i >= n) return -1;
    if (atomic_compare_exchange_weak_explicit(&p->claim, &v, v + 1, memory_order_acq_rel,
                                              memory_order_relaxed))
      return i;
  }
}

static void work(eng_pool *p, const job *j, unsigned g) {
  int64_t i;
  while ((i = claim_next(p, g, j->n)) >= 0) {
    j->fn(j->arg, i);
    if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == j->n) {
      mtx_lock(&p->mu);
      cnd_broadcast(&p->fin);
      mtx_unlock(&p->mu);
    }
  }
}

static int helper_main(void *arg) {
  eng_pool *p = arg;
  /* Not the generation posted now: a helper started for a job may first
   * run after it was posted, and must still join it. (A job already over
   * costs one failed claim.) */
  unsigned seen = 0;
  for (;;) {
    for (int s = 0; s < SPIN && atomic_load_explicit(&p->posted, memory_order_relaxed) == seen; s++)
      CPU_RELAX();
    mtx_lock(&p->mu);
    while (atomic_load(&p->posted) == seen && !p->stop) {
      p->sleepers++;
      cnd_wait(&p->wake, &p->mu);
      p->sleepers--;
    }
    if (p->stop) {
      mtx_unlock(&p->mu);
      return 0;
    }
    seen = atomic_load(&p->posted);
    job j = p->job;
    mtx_unlock(&p->mu);
    work(p, &j, seen);
  }
}

static int clamp(int threads) {
  return threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
}

static bool init(eng_pool *p, int threads) {
  atomic_init(&p->threads, clamp(threads));
  atomic_flag_clear(&p->busy);
  atomic_init(&p->posted, 0);
  atomic_init(&p->claim, 0);
  atomic_init(&p->done, 0);
  if (mtx_init(&p->mu, mtx_plain) != thrd_success) return false;
  if (cnd_init(&p->wake) != thrd_success) {
    mtx_destroy(&p->mu);
    return false;
  }
  if (cnd_init(&p->fin) != thrd_success) {
    cnd_destroy(&p->wake);
    mtx_destroy(&p->mu);
    return false;
  }
  return true;
}

eng_pool *eng_pool_create(int threads) {
  eng_pool *p = calloc(1, sizeof *p);
  if (!p || !init(p, threads)) {
    free(p);
    return NULL;
  }
  return p;
}

void eng_pool_destroy(eng_pool *p) {
  if (!p) return;
  mtx_lock(&p->mu);
  p->stop = true;
  cnd_broadcast(&p->wake);
  mtx_unlock(&p->mu);
  for (int i = 0; i < p->nhelpers; i++) thrd_join(p->helper[i], NULL);
  cnd_destroy(&p->fin);
  cnd_destroy(&p->wake);
  mtx_destroy(&p->mu);
  free(p);
}

static eng_pool default_pool;
static bool default_ok;
static once_flag default_once = ONCE_FLAG_INIT;
static atomic_int default_threads = 1;

static void default_init(void) { default_ok = init(&default_pool, atomic_load(&default_threads)); }

eng_pool *eng_pool_default(void) {
  call_once(&default_once, default_init);
  return default_ok ? &default_pool : NULL;
}

void eng_pool_set_threads(int threads) {
  atomic_store(&default_threads, clamp(threads));
  eng_pool *p = eng_pool_default();
  if (p) atomic_store(&p->threads, clamp(threads));
}

int eng_pool_threads(const eng_pool *p) {
  return p ? atomic_load(&p->threads) : atomic_load(&default_threads);
}

static void serial(int64_t n, eng_pool_fn fn, void *arg) {
  for (int64_t i = 0; i < n; i++) fn(arg, i);
}

void eng_pool_run(eng_pool *p, int64_t nchunks, eng_pool_fn fn, void *arg) {
  if (nchunks <= 0) return;
  if (!p) p = eng_pool_default();
  int threads = p ? atomic_load_explicit(&p->threads, memory_order_relaxed) : 1;
  if (nchunks < 2 || threads < 2 || nchunks > 0xffffffffu ||
      atomic_flag_test_and_set_explicit(&p->busy, memory_order_acquire)) {
    serial(nchunks, fn, arg);
    return;
  }
  /* Helpers beyond the chunk count would find nothing to do. */
  int want = threads - 1 < nchunks - 1 ? threads - 1 : (int)(nchunks - 1);
  while (p->nhelpers < want && thrd_create(&p->helper[p->nhelpers], helper_main, p) == thrd_success)
    p->nhelpers++;
  if (!p->nhelpers) {
    atomic_flag_clear_explicit(&p->busy, memory_order_release);
    serial(nchunks, fn, arg);
    return;
  }
  unsigned g = ++p->gen;
  if (!g) g = ++p->gen; /* generation 0 is the helpers' initial "seen" */
  job j = {fn, arg, nchunks};
  mtx_lock(&p->mu);
  p->job = j;
  atomic_store(&p->done, 0);
  atomic_store(&p->claim, (uint64_t)g << 32);
  atomic_store(&p->posted, g);
  if (p->sleepers) cnd_broadcast(&p->wake);
  mtx_unlock(&p->mu);
  work(p, &j, g);
  for (int s = 0; s < SPIN && atomic_load(&p->done) < nchunks; s++) CPU_RELAX();
  if (atomic_load(&p->done) < nchunks) {
    mtx_lock(&p->mu);
    while (atomic_load(&p->done) < nchunks) cnd_wait(&p->fin, &p->mu);
    mtx_unlock(&p->mu);
  }
  atomic_flag_clear_explicit(&p->busy, memory_order_release);
}

typedef struct try_job {
  eng_pool_try_fn fn;
  void *arg;
  td_code *rc;
  td_err *err;
} try_job;

static void try_chunk(void *arg, int64_t i) {
  const try_job *t = arg;
  t->rc[i] = t->fn(t->arg, i, &t->err[i]);
}

td_code eng_pool_try(eng_pool *p, int64_t nchunks, eng_pool_try_fn fn, void *arg, td_err *err) {
  if (nchunks <= 0) return TD_OK;
  try_job t = {fn, arg, calloc((size_t)nchunks, sizeof *t.rc),
               malloc((size_t)nchunks * sizeof *t.err)};
  td_code rc = TD_OK;
  if (!t.rc || !t.err) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory for %lld chunks",
                    (long long)nchunks);
  } else {
    for (int64_t i = 0; i < nchunks; i++) td_err_clear(&t.err[i]);
    eng_pool_run(p, nchunks, try_chunk, &t);
    for (int64_t i = 0; i < nchunks && !rc; i++)
      if ((rc = t.rc[i]) && err) *err = t.err[i];
  }
  free(t.rc);
  free(t.err);
  return rc;
}

typedef struct range_job {
  eng_pool_range_fn fn;
  void *arg;
  int64_t n, per;
} range_job;

static void range_chunk(void *arg, int64_t i) {
  const range_job *r = arg;
  int64_t i0 = i * r->per, i1 = i0 + r->per < r->n ? i0 + r->per : r->n;
  r->fn(r->arg, i0, i1);
}

void eng_pool_for(eng_pool *p, int64_t n, int64_t grain, int64_t align, eng_pool_range_fn fn,
                  void *arg) {
  if (n <= 0) return;
  if (!p) p = eng_pool_default();
  int threads = eng_pool_threads(p);
  if (grain < 1) grain = 1;
  if (align < 1) align = 1;
  if (threads < 2 || n < 2 * grain) {
    fn(arg, 0, n);
    return;
  }
  int64_t want = 4 * (int64_t)threads, per = (n + want - 1) / want;
  if (per < grain) per = grain;
  per = (per + align - 1) / align * align;
  range_job r = {fn, arg, n, per};
  eng_pool_run(p, (n + per - 1) / per, range_chunk, &r);
}
