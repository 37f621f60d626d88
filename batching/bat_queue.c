#include "bat_queue.h"

#include <stdbool.h>
#include <stdlib.h>
#include <uv.h>

#include "eng_model.h"

struct bat_queue {
  uv_mutex_t mu;
  uv_cond_t cv;
  bat_task *head, *tail;
  int queued, max_queued;
  bool stopping;
  int n_workers;
  uv_thread_t *threads;
};

static void run_task(bat_task *t) {
  td_err_clear(&t->err);
  if (t->deadline_ns && uv_hrtime() >= t->deadline_ns)
    t->code = td_err_set(&t->err, TD_DEADLINE_EXCEEDED,
                         "Deadline exceeded before the request could run");
  else if (t->run)
    t->code = t->run(t);
  else if (!t->sig->plan)
    t->code = td_err_set(&t->err, TD_FAILED_PRECONDITION, "signature '%s' cannot run: %s",
                         t->sig->key, t->sig->plan_error ? t->sig->plan_error : "no plan");
  else
    t->code = eng_plan_run(t->sig->plan, t->inputs, t->outputs, &t->err);
  t->done(t);
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
    q->queued--;
    uv_mutex_unlock(&q->mu);
    t->next = NULL;
    run_task(t);
  }
}

td_code bat_queue_create(int n_workers, int max_queued, bat_queue **out, td_err *err) {
  if (n_workers < 1 || max_queued < 1)
    return td_err_set(err, TD_INVALID_ARGUMENT, "queue needs >= 1 worker and >= 1 slot");
  bat_queue *q = calloc(1, sizeof *q);
  if (!q) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  q->threads = calloc((size_t)n_workers, sizeof *q->threads);
  if (!q->threads || uv_mutex_init(&q->mu) || uv_cond_init(&q->cv)) {
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
  } else if (q->queued >= q->max_queued) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "request queue is full (%d waiting)", q->queued);
  } else {
    t->next = NULL;
    if (q->tail)
      q->tail->next = t;
    else
      q->head = t;
    q->tail = t;
    q->queued++;
    uv_cond_signal(&q->cv);
  }
  uv_mutex_unlock(&q->mu);
  return rc;
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
  free(q->threads);
  free(q);
}
