/* Every run a worker or a caller running here makes is timed into the run-cost
 * table (a clock read before and after: tens of nanoseconds), keyed by the
 * signature. `queued` and `stopping` are written under the mutex but read
 * without it by bat_queue_try_run_here: a stale read only sends a task the
 * usual way, or runs here one that a worker would have picked up at once.
 * `running` counts runs in progress (workers and callers); a run here
 * claims a slot only while it is below the worker count, so at most
 * n_workers runs compute at once, as without runs here (a worker that
 * picks a task up meanwhile may briefly make it one more). */
#include "bat_queue.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <uv.h>

#include "bat_runcost.h"
#include "eng_model.h"
#include "td_clock.h"

struct bat_queue {
  uv_mutex_t mu;
  uv_cond_t cv;
  bat_task *head, *tail;
  atomic_int queued;
  int max_queued;
  atomic_bool stopping;
  atomic_int running; /* runs in progress, on workers and on callers' threads */
  int n_workers;
  uv_thread_t *threads;
  bat_runcost *cost;
};

/* Units of input the run-cost table compares: bytes of numeric data, one
 * per element of string tensors. */
static uint64_t task_size(const bat_task *t) {
  uint64_t n = 0;
  if (!t->inputs) return t->run_units;
  for (int i = 0; i < t->sig->n_inputs; i++) {
    size_t b = eng_tensor_nbytes(&t->inputs[i]);
    int64_t e = eng_tensor_numel(&t->inputs[i]);
    n += b ? b : e > 0 ? (uint64_t)e : 0;
  }
  return n;
}

/* Runs t and sets t->code / t->err; done() is the caller's. */
static void run_task(bat_queue *q, bat_task *t) {
  td_err_clear(&t->err);
  if (t->deadline_ns && td_now_ns() >= t->deadline_ns) {
    t->code = td_err_set(&t->err, TD_DEADLINE_EXCEEDED,
                         "Deadline exceeded before the request could run");
    return;
  }
  if (!t->run && !t->sig->plan) {
    t->code = td_err_set(&t->err, TD_FAILED_PRECONDITION, "signature '%s' cannot run: %s",
                         t->sig->key, t->sig->plan_error ? t->sig->plan_error : "no plan");
    return;
  }
  if (t->started) t->started(t);
  uint64_t t0 = td_now_ns();
  if (t->run)
    t->code = t->run(t);
  else
    t->code = eng_plan_run(t->sig->plan, t->inputs, t->outputs, &t->err);
  /* Failed runs (bad input caught in the engine) say nothing of the cost. */
  if (!t->code) bat_runcost_record(q->cost, t->sig, task_size(t), td_now_ns() - t0);
}

static void worker(void *arg) {
  bat_queue *q = arg;
  for (;;) {
    uv_mutex_lock(&q->mu);
    while (!q->head && !q->stopping) uv_cond_wait(&q->cv, &q->mu);
    bat_task *t = q->head;
    if (!t) {
      uv_mutex_unlock(&q->mu);
      return;
    }
    q->head = t->next;
    if (!q->head) q->tail = NULL;
    atomic_fetch_sub_explicit(&q->queued, 1, memory_order_relaxed);
    uv_mutex_unlock(&q->mu);
    t->next = NULL;
    atomic_fetch_add_explicit(&q->running, 1, memory_order_relaxed);
    run_task(q, t);
    t->done(t);
    atomic_fetch_sub_explicit(&q->running, 1, memory_order_relaxed);
  }
}

td_code bat_queue_create(int n_workers, int max_queued, bat_queue **out, td_err *err) {
  if (n_workers < 1 || max_queued < 1)
    return td_err_set(err, TD_INVALID_ARGUMENT, "queue needs >= 1 worker and >= 1 slot");
  bat_queue *q = calloc(1, sizeof *q);
  if (!q) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  q->threads = calloc((size_t)n_workers, sizeof *q->threads);
  if (!q->threads || bat_runcost_create(BAT_RUN_HERE_LIMIT_NS, &q->cost, NULL)) {
    free(q->threads);
    free(q);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (uv_mutex_init(&q->mu) || uv_cond_init(&q->cv)) {
    bat_runcost_destroy(q->cost);
    free(q->threads);
    free(q);
    return td_err_set(err, TD_INTERNAL, "cannot create queue primitives");
  }
  q->max_queued = max_queued;
  for (int i = 0; i < n_workers; i++) {
    if (uv_thread_create(&q->threads[i], worker, q)) {
      q->n_workers = i;
      bat_queue_destroy(q);
      return td_err_set(err, TD_INTERNAL, "cannot start engine worker %d", i);
    }
  }
  q->n_workers = n_workers;
  *out = q;
  return TD_OK;
}

td_code bat_queue_submit(bat_queue *q, bat_task *t, td_err *err) {
  uv_mutex_lock(&q->mu);
  td_code rc = TD_OK;
  if (q->stopping) {
    rc = td_err_set(err, TD_UNAVAILABLE, "server is shutting down");
  } else if (atomic_load_explicit(&q->queued, memory_order_relaxed) >= q->max_queued) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "request queue is full (%d waiting)",
                    atomic_load_explicit(&q->queued, memory_order_relaxed));
  } else {
    t->next = NULL;
    if (q->tail)
      q->tail->next = t;
    else
      q->head = t;
    q->tail = t;
    atomic_fetch_add_explicit(&q->queued, 1, memory_order_relaxed);
    uv_cond_signal(&q->cv);
  }
  uv_mutex_unlock(&q->mu);
  return rc;
}

bool bat_queue_try_run_here(bat_queue *q, bat_task *t) {
  if (atomic_load_explicit(&q->stopping, memory_order_relaxed) ||
      atomic_load_explicit(&q->queued, memory_order_relaxed) > 0)
    return false;
  if (!t->run && !t->sig->plan) return false; /* the workers word the error */
  if (t->sig->plan && !eng_plan_on_host(t->sig->plan)) return false; /* see bat_queue.h */
  if (!bat_runcost_is_short(q->cost, t->sig, task_size(t))) return false;
  /* Take an idle worker's place, or leave the run to the queue. */
  int n = atomic_load_explicit(&q->running, memory_order_relaxed);
  do {
    if (n >= q->n_workers) return false;
  } while (!atomic_compare_exchange_weak_explicit(&q->running, &n, n + 1, memory_order_relaxed,
                                                  memory_order_relaxed));
  run_task(q, t);
  atomic_fetch_sub_explicit(&q->running, 1, memory_order_relaxed);
  return true;
}

void bat_queue_set_run_here_limit(bat_queue *q, uint64_t limit_ns) {
  bat_runcost_set_limit(q->cost, limit_ns);
}

void bat_queue_destroy(bat_queue *q) {
  if (!q) return;
  uv_mutex_lock(&q->mu);
  q->stopping = true;
  uv_cond_broadcast(&q->cv);
  uv_mutex_unlock(&q->mu);
  for (int i = 0; i < q->n_workers; i++) uv_thread_join(&q->threads[i]);
  uv_cond_destroy(&q->cv);
  uv_mutex_destroy(&q->mu);
  bat_runcost_destroy(q->cost);
  free(q->threads);
  free(q);
}
