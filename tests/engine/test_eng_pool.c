/* eng_pool: every chunk of every run exactly once, for pools of 1 to 4
 * threads called from several threads at once and from inside a chunk;
 * the helpers really take chunks; the default pool follows its size. */
#include <check.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <threads.h>
#include <time.h>

#include "eng_pool.h"

#define MAX_CHUNKS 64

typedef struct run_state {
  atomic_int hits[MAX_CHUNKS];
  eng_pool *pool;
  int nested; /* chunk 0 starts a run of its own with this many chunks */
  atomic_int nested_hits[MAX_CHUNKS];
} run_state;

static void count_nested(void *arg, int64_t i) {
  run_state *s = arg;
  atomic_fetch_add(&s->nested_hits[i], 1);
}

static void count(void *arg, int64_t i) {
  run_state *s = arg;
  atomic_fetch_add(&s->hits[i], 1);
  if (i == 0 && s->nested) eng_pool_run(s->pool, s->nested, count_nested, s);
}

/* One caller: many runs of varying size on one pool, each checked. */
typedef struct caller {
  eng_pool *pool;
  int seed;
  int bad; /* runs where some chunk did not run exactly once */
} caller;

static int caller_main(void *arg) {
  caller *c = arg;
  run_state *s = malloc(sizeof *s);
  for (int r = 0; r < 200; r++) {
    int n = (r * 7 + c->seed * 13) % (MAX_CHUNKS + 1);
    for (int i = 0; i < MAX_CHUNKS; i++) {
      atomic_init(&s->hits[i], 0);
      atomic_init(&s->nested_hits[i], 0);
    }
    s->pool = c->pool;
    s->nested = r % 5 == 0 ? 1 + r % 9 : 0;
    eng_pool_run(c->pool, n, count, s);
    for (int i = 0; i < MAX_CHUNKS; i++) {
      if (atomic_load(&s->hits[i]) != (i < n)) c->bad++;
      int nested = n > 0 && s->nested && i < s->nested;
      if (atomic_load(&s->nested_hits[i]) != nested) c->bad++;
    }
  }
  free(s);
  return 0;
}

START_TEST(every_chunk_once_from_many_callers) {
  for (int threads = 1; threads <= 4; threads++) {
    eng_pool *p = eng_pool_create(threads);
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(eng_pool_threads(p), threads);
    enum { CALLERS = 4 };
    thrd_t t[CALLERS];
    caller c[CALLERS];
    for (int k = 0; k < CALLERS; k++) {
      c[k] = (caller){p, k, 0};
      ck_assert_int_eq(thrd_create(&t[k], caller_main, &c[k]), thrd_success);
    }
    for (int k = 0; k < CALLERS; k++) {
      thrd_join(t[k], NULL);
      ck_assert_msg(c[k].bad == 0, "pool of %d, caller %d: %d chunks not run exactly once", threads,
                    k, c[k].bad);
    }
    eng_pool_destroy(p);
  }
}
END_TEST

/* Two chunks that each wait until the other has started can only finish
 * if a helper runs one while the caller runs the other. The wait polls
 * with a generous deadline, so a busy machine only slows it down. */
typedef struct meet {
  atomic_int started;
  atomic_int late;
  thrd_t who[2];
} meet;

static void rendezvous(void *arg, int64_t i) {
  meet *m = arg;
  m->who[i] = thrd_current();
  atomic_fetch_add(&m->started, 1);
  struct timespec t0;
  timespec_get(&t0, TIME_UTC);
  while (atomic_load(&m->started) < 2) {
    struct timespec now, nap = {0, 1000000};
    timespec_get(&now, TIME_UTC);
    if (now.tv_sec - t0.tv_sec > 60) {
      atomic_store(&m->late, 1);
      return;
    }
    thrd_sleep(&nap, NULL);
  }
}

START_TEST(helpers_take_chunks) {
  eng_pool *p = eng_pool_create(2);
  meet m = {0};
  eng_pool_run(p, 2, rendezvous, &m);
  ck_assert_int_eq(atomic_load(&m.late), 0);
  ck_assert(!thrd_equal(m.who[0], m.who[1]));
  eng_pool_destroy(p);
}
END_TEST

START_TEST(default_pool_follows_its_size) {
  eng_pool_set_threads(3);
  ck_assert_int_eq(eng_pool_threads(NULL), 3);
  ck_assert_int_eq(eng_pool_threads(eng_pool_default()), 3);
  run_state *s = calloc(1, sizeof *s);
  eng_pool_run(NULL, 10, count, s);
  for (int i = 0; i < MAX_CHUNKS; i++) ck_assert_int_eq(atomic_load(&s->hits[i]), i < 10);
  eng_pool_set_threads(0); /* below one counts as one */
  ck_assert_int_eq(eng_pool_threads(NULL), 1);
  eng_pool_set_threads(1000);
  ck_assert_int_eq(eng_pool_threads(NULL), 64);
  eng_pool_set_threads(1);
  free(s);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("eng_pool");
  TCase *tc = tcase_create("pool");
  tcase_add_test(tc, every_chunk_once_from_many_callers);
  tcase_add_test(tc, helpers_take_chunks);
  tcase_add_test(tc, default_pool_follows_its_size);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *r = srunner_create(suite());
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
