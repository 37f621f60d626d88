/* bat_queue: tasks whose deadline passed while they waited are abandoned
 * (done() with DEADLINE_EXCEEDED, never run); tasks with a live or no
 * deadline run. The engine is held by a first task whose run hook waits on
 * a semaphore, so what queues behind it waits a known time. */
#include <check.h>
#include <stdatomic.h>
#include <string.h>
#include <uv.h>

#include "bat_queue.h"

typedef struct probe {
  bat_task t;
  atomic_int ran;  /* the run hook was called */
  atomic_int done; /* done() was called */
  uv_sem_t *gate;  /* when set, the run hook waits on it */
} probe;

static ldr_signature sig = {.key = "serving_default"};

static td_code probe_run(bat_task *t) {
  probe *p = t->user;
  atomic_store(&p->ran, 1);
  if (p->gate) uv_sem_wait(p->gate);
  return TD_OK;
}

static void probe_done(bat_task *t) {
  probe *p = t->user;
  atomic_fetch_add(&p->done, 1);
}

static void probe_init(probe *p, uint64_t deadline_ns, uv_sem_t *gate) {
  memset(p, 0, sizeof *p);
  p->gate = gate;
  p->t = (bat_task){
      .sig = &sig, .run = probe_run, .done = probe_done, .user = p, .deadline_ns = deadline_ns};
}

static void wait_done(probe *p) {
  for (int i = 0; i < 60000 && !atomic_load(&p->done); i++) uv_sleep(1); /* a minute at least */
  ck_assert_int_eq(atomic_load(&p->done), 1);
}

START_TEST(test_expired_task_is_abandoned) {
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 16, &q, NULL), TD_OK);
  uv_sem_t gate;
  ck_assert_int_eq(uv_sem_init(&gate, 0), 0);
  probe hold, expired, live, none;
  probe_init(&hold, 0, &gate);
  ck_assert_int_eq(bat_queue_submit(q, &hold.t, NULL), TD_OK);
  while (!atomic_load(&hold.ran)) uv_sleep(1); /* the only worker is now busy */
  uint64_t now = uv_hrtime();
  probe_init(&expired, now + 20 * 1000000ull, NULL); /* 20 ms */
  probe_init(&live, now + 60 * 1000000000ull, NULL); /* a minute */
  probe_init(&none, 0, NULL);
  ck_assert_int_eq(bat_queue_submit(q, &expired.t, NULL), TD_OK);
  ck_assert_int_eq(bat_queue_submit(q, &live.t, NULL), TD_OK);
  ck_assert_int_eq(bat_queue_submit(q, &none.t, NULL), TD_OK);
  uv_sleep(60); /* past the 20 ms deadline while queued */
  uv_sem_post(&gate);
  wait_done(&hold);
  wait_done(&expired);
  wait_done(&live);
  wait_done(&none);
  ck_assert_int_eq(hold.t.code, TD_OK);
  ck_assert_int_eq(atomic_load(&expired.ran), 0);
  ck_assert_int_eq(expired.t.code, TD_DEADLINE_EXCEEDED);
  ck_assert_int_eq(expired.t.err.code, TD_DEADLINE_EXCEEDED);
  ck_assert_ptr_nonnull(strstr(expired.t.err.msg, "Deadline exceeded"));
  ck_assert_int_eq(atomic_load(&live.ran), 1);
  ck_assert_int_eq(live.t.code, TD_OK);
  ck_assert_int_eq(atomic_load(&none.ran), 1);
  ck_assert_int_eq(none.t.code, TD_OK);
  bat_queue_destroy(q);
  uv_sem_destroy(&gate);
}
END_TEST

START_TEST(test_deadline_checked_at_pickup_not_submit) {
  /* An idle worker picks a task up at once: a near deadline still runs. */
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 16, &q, NULL), TD_OK);
  probe p;
  probe_init(&p, uv_hrtime() + 2 * 1000000000ull, NULL);
  ck_assert_int_eq(bat_queue_submit(q, &p.t, NULL), TD_OK);
  wait_done(&p);
  ck_assert_int_eq(atomic_load(&p.ran), 1);
  ck_assert_int_eq(p.t.code, TD_OK);
  bat_queue_destroy(q);
}
END_TEST

/* --- inline runs ---------------------------------------------------------- */

/* Runs one task through the workers (which measure it) and waits. */
static void run_on_worker(bat_queue *q, probe *p) {
  ck_assert_int_eq(bat_queue_submit(q, &p->t, NULL), TD_OK);
  wait_done(p);
}

START_TEST(test_inline_only_once_measured_short) {
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 16, &q, NULL), TD_OK);
  probe p;
  probe_init(&p, 0, NULL);
  ck_assert(!bat_queue_try_run_here(q, &p.t)); /* never measured: the workers first */
  ck_assert_int_eq(atomic_load(&p.ran), 0);
  run_on_worker(q, &p);
  probe_init(&p, 0, NULL);
  ck_assert(bat_queue_try_run_here(q, &p.t));
  ck_assert_int_eq(atomic_load(&p.ran), 1);
  ck_assert_int_eq(atomic_load(&p.done), 0); /* the caller has the result; no done() */
  ck_assert_int_eq(p.t.code, TD_OK);
  /* Limit 0: never inline. */
  bat_queue_set_run_here_limit(q, 0);
  probe_init(&p, 0, NULL);
  ck_assert(!bat_queue_try_run_here(q, &p.t));
  bat_queue_destroy(q);
}
END_TEST

START_TEST(test_inline_never_overtakes_queued_work) {
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(2, 16, &q, NULL), TD_OK);
  probe p;
  probe_init(&p, 0, NULL);
  run_on_worker(q, &p); /* measured short */
  uv_sem_t gate;
  ck_assert_int_eq(uv_sem_init(&gate, 0), 0);
  ldr_signature other = {.key = "other"};
  probe hold, hold2, waiting;
  probe_init(&hold, 0, &gate);
  hold.t.sig = &other;
  probe_init(&hold2, 0, &gate);
  hold2.t.sig = &other;
  probe_init(&waiting, 0, NULL);
  ck_assert_int_eq(bat_queue_submit(q, &hold.t, NULL), TD_OK);
  while (!atomic_load(&hold.ran)) uv_sleep(1);
  /* One of two workers is busy and nothing waits: a short run may go
   * inline, in the idle worker's place. */
  probe_init(&p, 0, NULL);
  ck_assert(bat_queue_try_run_here(q, &p.t));
  /* Both workers busy: no more runs at once, it goes to the queue. */
  ck_assert_int_eq(bat_queue_submit(q, &hold2.t, NULL), TD_OK);
  while (!atomic_load(&hold2.ran)) uv_sleep(1);
  probe_init(&p, 0, NULL);
  ck_assert(!bat_queue_try_run_here(q, &p.t));
  ck_assert_int_eq(atomic_load(&p.ran), 0);
  /* Something waits: it goes to the queue behind it. */
  ck_assert_int_eq(bat_queue_submit(q, &waiting.t, NULL), TD_OK);
  probe_init(&p, 0, NULL);
  ck_assert(!bat_queue_try_run_here(q, &p.t));
  ck_assert_int_eq(atomic_load(&p.ran), 0);
  uv_sem_post(&gate);
  uv_sem_post(&gate);
  wait_done(&hold);
  wait_done(&hold2);
  wait_done(&waiting);
  bat_queue_destroy(q);
  uv_sem_destroy(&gate);
}
END_TEST

static td_code slow_run(bat_task *t) {
  probe *p = t->user;
  atomic_store(&p->ran, 1);
  uv_sleep(2); /* 2 ms: far above a 100 us limit */
  return TD_OK;
}

START_TEST(test_slow_signature_stays_on_workers) {
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 16, &q, NULL), TD_OK);
  probe p;
  probe_init(&p, 0, NULL);
  p.t.run = slow_run;
  run_on_worker(q, &p);
  probe_init(&p, 0, NULL);
  p.t.run = slow_run;
  ck_assert(!bat_queue_try_run_here(q, &p.t));
  ck_assert_int_eq(atomic_load(&p.ran), 0);
  bat_queue_destroy(q);
}
END_TEST

START_TEST(test_inline_honours_deadline) {
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 16, &q, NULL), TD_OK);
  probe p;
  probe_init(&p, 0, NULL);
  run_on_worker(q, &p);
  probe_init(&p, 1, NULL); /* long past */
  ck_assert(bat_queue_try_run_here(q, &p.t));
  ck_assert_int_eq(atomic_load(&p.ran), 0);
  ck_assert_int_eq(p.t.code, TD_DEADLINE_EXCEEDED);
  bat_queue_destroy(q);
}
END_TEST

START_TEST(test_inline_not_larger_than_seen) {
  /* A plain plan-less signature with one float input: the input's size
   * decides. Run hooks stand in for the plan. */
  static ldr_signature sized = {.key = "sized", .n_inputs = 1};
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 16, &q, NULL), TD_OK);
  eng_tensor small = {0}, big = {0};
  eng_shape s4 = eng_shape_make(1, (int64_t[]){4}), s4k = eng_shape_make(1, (int64_t[]){4096});
  ck_assert_int_eq(eng_tensor_alloc(&small, ENG_DT_FLOAT, &s4, NULL), TD_OK);
  ck_assert_int_eq(eng_tensor_alloc(&big, ENG_DT_FLOAT, &s4k, NULL), TD_OK);
  probe p;
  probe_init(&p, 0, NULL);
  p.t.sig = &sized;
  p.t.inputs = &small;
  run_on_worker(q, &p);
  probe_init(&p, 0, NULL);
  p.t.sig = &sized;
  p.t.inputs = &big;
  ck_assert(!bat_queue_try_run_here(q, &p.t)); /* 4096 floats never seen to run */
  p.t.inputs = &small;
  ck_assert(bat_queue_try_run_here(q, &p.t));
  bat_queue_destroy(q);
  eng_tensor_release(&small);
  eng_tensor_release(&big);
}
END_TEST

int main(void) {
  Suite *s = suite_create("bat_queue");
  TCase *tc = tcase_create("deadline");
  tcase_add_test(tc, test_expired_task_is_abandoned);
  tcase_add_test(tc, test_deadline_checked_at_pickup_not_submit);
  suite_add_tcase(s, tc);
  TCase *ti = tcase_create("inline");
  tcase_add_test(ti, test_inline_only_once_measured_short);
  tcase_add_test(ti, test_inline_never_overtakes_queued_work);
  tcase_add_test(ti, test_slow_signature_stays_on_workers);
  tcase_add_test(ti, test_inline_honours_deadline);
  tcase_add_test(ti, test_inline_not_larger_than_seen);
  suite_add_tcase(s, ti);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
