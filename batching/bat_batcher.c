/* Design: submitters append pieces under the mutex. A batch that may leave
 * at once (a batch thread is free and it is full or has no timeout to wait)
 * is handed to the engine queue by the submitter itself, and when a batch
 * finishes, its worker hands on the next ready one (and then picks it up
 * without sleeping), so the common path has no extra thread hop. The
 * scheduler thread only times batches that wait for batch_timeout_micros,
 * and drains the queues on shutdown. The merging, the model run and the
 * splitting happen on the engine worker that runs the batch (bat_queue's
 * run hook), never under the mutex.
 *
 * A task becomes one or more pieces (row ranges); a piece lives in exactly
 * one batch. A task completes when its last piece's batch is done, which is
 * when its done() is called. */
#include "bat_batcher.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "bat_metrics.h"
#include "eng_model.h"
#include "td_clock.h"

/* The parameters one signature queue runs with: the global ones, or its
 * model's own. Batches carry a copy, since their queue may be freed while
 * they run. */
typedef struct qparams {
  cfg_batching p;
  int64_t exec_size;
  uint64_t queue_timeout_ns; /* 0: none */
} qparams;

typedef struct task_state {
  bat_task *t;
  uint64_t submitted_ns;
  int64_t rows;
  int pieces_left;
  bool outputs_ready;
  td_code code;
  td_err err;
} task_state;

typedef struct piece {
  task_state *ts;
  int64_t off, len; /* rows of the task */
} piece;

typedef struct batch {
  struct batch *next;
  bat_batcher *owner;
  const ldr_signature *sig;
  int n, cap;
  piece *pieces;
  int n_live;   /* pieces [0, n_live) run; the rest expired while queued */
  qparams qp;
  int64_t rows; /* rows of the live pieces */
  uint64_t opened_ns;
  bat_task run;
} batch;

typedef struct sigq {
  const ldr_signature *sig;
  qparams qp;
  batch *head, *tail;
  int n_batches;
  struct sigq *next;
} sigq;

struct bat_batcher {
  cfg_batching p; /* global; p.num_batch_threads bounds every queue */
  bat_model_params_fn lookup;
  void *lookup_ctx;
  bat_batcher_stats stats;
  bat_queue *queue;
  uv_mutex_t mu;
  uv_cond_t cv;
  sigq *queues;
  int in_flight;
  bool stopping;
  uint64_t sched_wake; /* when the sleeping scheduler wakes (UINT64_MAX: on a
                          signal only); 0 while it is awake */
  uv_thread_t thread;
};

/* --- shapes and copies --------------------------------------------------- */

static bool batchable_dtype(eng_dtype dt) {
  return eng_dtype_size(dt) > 0 || dt == ENG_DT_STRING;
}

/* Tasks of a signature with string outputs are never split across batches:
 * a task's output strings are allocated at once, with every row's length. */
static bool has_string_output(const ldr_signature *sig) {
  for (int o = 0; o < sig->n_outputs; o++)
    if (sig->outputs[o].dtype == ENG_DT_STRING) return true;
  return false;
}

/* Can task t join a batch whose first task is ref? */
static bool compatible(const qparams *qp, const bat_task *ref, const bat_task *t) {
  for (int i = 0; i < t->sig->n_inputs; i++) {
    const eng_shape *a = &ref->inputs[i].shape, *c = &t->inputs[i].shape;
    if (a->rank != c->rank || ref->inputs[i].dtype != t->inputs[i].dtype) return false;
    /* Strings are not padded: they merge only with the same other dims. */
    if (qp->p.pad_variable_length_inputs && t->inputs[i].dtype != ENG_DT_STRING) continue;
    for (int d = 1; d < a->rank; d++)
      if (a->dim[d] != c->dim[d]) return false;
  }
  return true;
}

/* Copies one row (dims 1..rank-1 of src) into one row of dst, whose dims
 * may be larger; cells outside src get `fill` (elem bytes). */
static void copy_row(char *dst, const eng_shape *ds, const char *src, const eng_shape *ss, int dim,
                     size_t elem, const char *fill) {
  int64_t dn = ds->dim[dim], sn = ss->dim[dim];
  size_t dstride = elem, sstride = elem;
  for (int d = dim + 1; d < ds->rank; d++) {
    dstride *= (size_t)ds->dim[d];
    sstride *= (size_t)ss->dim[d];
  }
  if (dim == ds->rank - 1) {
    memcpy(dst, src, (size_t)sn * elem);
    for (int64_t k = sn; k < dn; k++) memcpy(dst + (size_t)k * elem, fill, elem);
    return;
  }
  for (int64_t k = 0; k < dn; k++) {
    if (k < sn) {
      copy_row(dst + (size_t)k * dstride, ds, src + (size_t)k * sstride, ss, dim + 1, elem, fill);
    } else {
      for (size_t c = 0; c < dstride / elem; c++) memcpy(dst + (size_t)k * dstride + c * elem, fill, elem);
    }
  }
}

static size_t row_bytes(const eng_shape *s, size_t elem) {
  size_t n = elem;
  for (int d = 1; d < s->rank; d++) n *= (size_t)s->dim[d];
  return n;
}

/* Writes rows [off, off+len) of task input `src` at row `at` of `dst`. */
static void put_rows(eng_tensor *dst, int64_t at, const eng_tensor *src, int64_t off, int64_t len) {
  size_t elem = eng_dtype_size(src->dtype);
  size_t drow = row_bytes(&dst->shape, elem), srow = row_bytes(&src->shape, elem);
  char *d = (char *)eng_tensor_data(dst) + (size_t)at * drow;
  const char *s = (const char *)eng_tensor_data(src) + (size_t)off * srow;
  if (drow == srow) {
    memcpy(d, s, (size_t)len * srow);
    return;
  }
  const char *fill = (const char *)eng_tensor_data(src); /* its own first element */
  for (int64_t r = 0; r < len; r++)
    if (dst->shape.rank > 1)
      copy_row(d + (size_t)r * drow, &dst->shape, s + (size_t)r * srow, &src->shape, 1, elem, fill);
}

/* --- running a batch (engine worker) ------------------------------------ */

static int64_t row_elems(const eng_shape *s) {
  int64_t n = 1;
  for (int d = 1; d < s->rank; d++) n *= s->dim[d];
  return n;
}

/* A string input: the pieces' rows (every piece has the same other dims),
 * then the padding rows (the first row of the last task). */
static td_code merge_strings(batch *bt, int i, int64_t total, eng_tensor *dst, td_err *err) {
  const eng_tensor *first = &bt->pieces[0].ts->t->inputs[i];
  const bat_task *last = bt->pieces[bt->n_live - 1].ts->t;
  int64_t per = row_elems(&first->shape);
  size_t *lens = malloc(sizeof *lens * (size_t)(total * per + 1));
  if (!lens) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  int64_t at = 0;
  for (int pass = 0; pass < 2; pass++) { /* lengths, then bytes */
    at = 0;
    for (int k = 0; k <= bt->n_live; k++) {
      const eng_tensor *src = k < bt->n_live ? &bt->pieces[k].ts->t->inputs[i] : &last->inputs[i];
      int64_t off = k < bt->n_live ? bt->pieces[k].off : 0;
      int64_t len = k < bt->n_live ? bt->pieces[k].len : total - at;
      const eng_str *ss = eng_tensor_strs(src);
      for (int64_t r = 0; r < len; r++, at++)
        for (int64_t e = 0; e < per; e++) {
          /* Padding rows repeat the last task's first row. */
          const eng_str *x = &ss[(k < bt->n_live ? off + r : 0) * per + e];
          if (pass == 0)
            lens[at * per + e] = x->len;
          else if (x->len)
            memcpy(eng_tensor_str_bytes(dst, at * per + e), x->data, x->len);
        }
    }
    if (pass == 0) {
      eng_shape s = first->shape;
      s.dim[0] = total;
      td_code rc = eng_tensor_alloc_strings(dst, &s, lens, err);
      if (rc) {
        free(lens);
        return rc;
      }
    }
  }
  free(lens);
  return TD_OK;
}

static td_code merge_inputs(batch *bt, int64_t total, eng_tensor *in, td_err *err) {
  const ldr_signature *sig = bt->sig;
  for (int i = 0; i < sig->n_inputs; i++) {
    const eng_tensor *first = &bt->pieces[0].ts->t->inputs[i];
    if (first->dtype == ENG_DT_STRING) {
      td_code rc = merge_strings(bt, i, total, &in[i], err);
      if (rc) return rc;
      continue;
    }
    eng_shape s = first->shape;
    s.dim[0] = total;
    for (int k = 1; k < bt->n_live; k++)
      for (int d = 1; d < s.rank; d++) {
        int64_t v = bt->pieces[k].ts->t->inputs[i].shape.dim[d];
        if (v > s.dim[d]) s.dim[d] = v;
      }
    td_code rc = eng_tensor_alloc(&in[i], first->dtype, &s, err);
    if (rc) return rc;
    int64_t at = 0;
    for (int k = 0; k < bt->n_live; k++) {
      const piece *pc = &bt->pieces[k];
      put_rows(&in[i], at, &pc->ts->t->inputs[i], pc->off, pc->len);
      at += pc->len;
    }
    /* Padding to an allowed size: the first row of the last task. */
    const bat_task *last = bt->pieces[bt->n_live - 1].ts->t;
    for (; at < total; at++) put_rows(&in[i], at, &last->inputs[i], 0, 1);
  }
  return TD_OK;
}

/* A task's string output: its rows [at, at + pc->len) of the batch's
 * output, lengths and bytes. Such tasks are never split (has_string_output),
 * so the piece is the whole task. */
static td_code alloc_string_rows(eng_tensor *dst, const eng_tensor *src, int64_t at,
                                 const piece *pc, td_err *err) {
  if (pc->off != 0 || pc->len != pc->ts->rows)
    return td_err_set(err, TD_INTERNAL, "a task with string outputs was split across batches");
  int64_t per = row_elems(&src->shape), n = pc->len * per;
  const eng_str *ss = eng_tensor_strs(src) + at * per;
  size_t *lens = malloc(sizeof *lens * (size_t)(n + 1));
  if (!lens) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int64_t e = 0; e < n; e++) lens[e] = ss[e].len;
  eng_shape s = src->shape;
  s.dim[0] = pc->len;
  td_code rc = eng_tensor_alloc_strings(dst, &s, lens, err);
  free(lens);
  for (int64_t e = 0; !rc && e < n; e++)
    if (ss[e].len) memcpy(eng_tensor_str_bytes(dst, e), ss[e].data, ss[e].len);
  return rc;
}

static td_code split_outputs(batch *bt, int64_t total, eng_tensor *out, td_err *err) {
  bat_batcher *b = bt->owner;
  const ldr_signature *sig = bt->sig;
  for (int o = 0; o < sig->n_outputs; o++) {
    if (out[o].shape.rank < 1 || out[o].shape.dim[0] != total || !batchable_dtype(out[o].dtype))
      return td_err_set(err, TD_FAILED_PRECONDITION,
                        "Batched output tensor's 0th dimension does not equal the sum of the 0th "
                        "dimension sizes of the input tensors (output '%s')",
                        sig->outputs[o].alias);
  }
  int64_t at = 0;
  for (int k = 0; k < bt->n_live; k++) {
    piece *pc = &bt->pieces[k];
    task_state *ts = pc->ts;
    td_code rc = TD_OK;
    uv_mutex_lock(&b->mu);
    if (!ts->outputs_ready) {
      for (int o = 0; o < sig->n_outputs && !rc; o++) {
        eng_shape s = out[o].shape;
        s.dim[0] = ts->rows;
        if (out[o].dtype == ENG_DT_STRING)
          rc = alloc_string_rows(&ts->t->outputs[o], &out[o], at, pc, err);
        else
          rc = eng_tensor_alloc(&ts->t->outputs[o], out[o].dtype, &s, err);
      }
      ts->outputs_ready = !rc;
    }
    for (int o = 0; o < sig->n_outputs && !rc; o++) {
      const eng_tensor *to = &ts->t->outputs[o];
      bool same = to->dtype == out[o].dtype && to->shape.rank == out[o].shape.rank;
      for (int d = 1; same && d < to->shape.rank; d++) same = to->shape.dim[d] == out[o].shape.dim[d];
      if (!same)
        rc = td_err_set(err, TD_FAILED_PRECONDITION,
                        "pieces of one split request produced outputs of different shapes");
    }
    uv_mutex_unlock(&b->mu);
    if (rc) return rc;
    for (int o = 0; o < sig->n_outputs; o++) {
      if (out[o].dtype == ENG_DT_STRING) continue; /* copied by alloc_string_rows */
      size_t row = row_bytes(&out[o].shape, eng_dtype_size(out[o].dtype));
      memcpy((char *)eng_tensor_data(&ts->t->outputs[o]) + (size_t)pc->off * row,
             (const char *)eng_tensor_data(&out[o]) + (size_t)at * row, (size_t)pc->len * row);
    }
    at += pc->len;
  }
  return TD_OK;
}

static int64_t padded_size(const qparams *qp, int64_t rows) {
  for (int i = 0; i < qp->p.n_allowed_batch_sizes; i++)
    if (qp->p.allowed_batch_sizes[i] >= rows) return qp->p.allowed_batch_sizes[i];
  return rows;
}

/* Moves pieces whose task deadline has passed behind the live ones and
 * fails their tasks with DEADLINE_EXCEEDED; they are not run. */
static void drop_expired(batch *bt) {
  uint64_t now = td_now_ns();
  bt->n_live = bt->n;
  for (int k = 0; k < bt->n_live;) {
    task_state *ts = bt->pieces[k].ts;
    if (!ts->t->deadline_ns || now < ts->t->deadline_ns) {
      k++;
      continue;
    }
    uv_mutex_lock(&bt->owner->mu);
    if (!ts->code)
      ts->code = td_err_set(&ts->err, TD_DEADLINE_EXCEEDED,
                            "Deadline exceeded while waiting in the batch queue");
    uv_mutex_unlock(&bt->owner->mu);
    bt->rows -= bt->pieces[k].len;
    piece tmp = bt->pieces[k];
    bt->pieces[k] = bt->pieces[bt->n_live - 1];
    bt->pieces[--bt->n_live] = tmp;
  }
}

static td_code run_batch(bat_task *rt) {
  batch *bt = rt->user;
  const ldr_signature *sig = bt->sig;
  drop_expired(bt);
  if (!bt->n_live) return TD_OK;
  if (!sig->plan)
    return td_err_set(&rt->err, TD_FAILED_PRECONDITION, "signature '%s' cannot run: %s", sig->key,
                      sig->plan_error ? sig->plan_error : "no plan");
  for (int k = 0; k < bt->n_live; k++)
    if (bt->pieces[k].ts->t->started) bt->pieces[k].ts->t->started(bt->pieces[k].ts->t);
  int64_t total = padded_size(&bt->qp, bt->rows);
  eng_tensor *in = calloc((size_t)sig->n_inputs + 1, sizeof *in);
  eng_tensor *out = calloc((size_t)sig->n_outputs + 1, sizeof *out);
  td_code rc = in && out ? TD_OK : td_err_set(&rt->err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (!rc) rc = merge_inputs(bt, total, in, &rt->err);
  rt->run_units = 0;
  for (int i = 0; !rc && i < sig->n_inputs; i++) rt->run_units += eng_tensor_nbytes(&in[i]);
  if (!rc) rc = eng_plan_run(sig->plan, in, out, &rt->err);
  if (!rc) rc = split_outputs(bt, total, out, &rt->err);
  for (int i = 0; in && i < sig->n_inputs; i++) eng_tensor_release(&in[i]);
  for (int i = 0; out && i < sig->n_outputs; i++) eng_tensor_release(&out[i]);
  free(in);
  free(out);
  return rc;
}

static batch *take_ready(bat_batcher *b, uint64_t now, uint64_t *wake);

/* A batch left waiting for its timeout (ready at `wake`) while a thread is
 * free is the scheduler's to time: wake it if it sleeps past that. A batch
 * waiting for a thread leaves from the worker that finishes first. Mutex
 * held. */
static void wake_scheduler(bat_batcher *b, uint64_t wake) {
  if (wake < b->sched_wake && b->in_flight < b->p.num_batch_threads) uv_cond_signal(&b->cv);
}

/* Completes the batch's pieces and the tasks whose last piece this was.
 * With take_next (the worker that ran it), also takes the next batch that
 * may leave, under the same lock, and returns it for the caller to
 * dispatch: once in_flight is down the batcher may be destroyed (when
 * stopping), so nothing here touches it after that unlock, and a batch
 * taken keeps it alive until that batch is done. */
static batch *finish_batch(batch *bt, td_code code, const td_err *err, bool take_next) {
  bat_batcher *b = bt->owner;
  for (int k = 0; k < bt->n; k++) {
    task_state *ts = bt->pieces[k].ts;
    uv_mutex_lock(&b->mu);
    if (code && !ts->code) {
      ts->code = code;
      ts->err = *err;
    }
    bool last = --ts->pieces_left == 0;
    uv_mutex_unlock(&b->mu);
    if (!last) continue;
    bat_task *t = ts->t;
    t->code = ts->code;
    t->err = ts->err;
    if (t->code)
      for (int o = 0; o < t->sig->n_outputs; o++) eng_tensor_release(&t->outputs[o]);
    free(ts);
    t->done(t);
  }
  free(bt->pieces);
  free(bt);
  batch *next = NULL;
  uv_mutex_lock(&b->mu);
  b->in_flight--;
  if (b->stopping) {
    uv_cond_signal(&b->cv); /* the scheduler drains the rest */
  } else if (take_next) {
    uint64_t wake;
    next = take_ready(b, td_now_ns(), &wake);
    if (!next) wake_scheduler(b, wake);
  }
  uv_mutex_unlock(&b->mu);
  return next;
}

static void dispatch(bat_batcher *b, batch *bt);

/* The worker hands the next ready batch to the engine queue, and takes it
 * up as soon as it returns, without sleeping. */
static void batch_done(bat_task *rt) {
  batch *bt = rt->user;
  bat_batcher *b = bt->owner;
  batch *next = finish_batch(bt, rt->code, &rt->err, true);
  if (next) dispatch(b, next);
}

/* Counts a batch as it leaves for the engine (mutex held). */
static void count_batch(bat_batcher *b, const batch *bt, uint64_t now) {
  int64_t padded = padded_size(&bt->qp, bt->rows);
  b->stats.batches++;
  b->stats.rows += bt->rows;
  b->stats.padding_rows += padded - bt->rows;
  if (padded > b->stats.max_batch_rows) b->stats.max_batch_rows = padded;
  bat_metrics_batch(bt->rows, padded);
  for (int k = 0; k < bt->n; k++) {
    uint64_t wait = now - bt->pieces[k].ts->submitted_ns;
    bat_metrics_piece(bt->pieces[k].len, wait);
    b->stats.queue_delay_ns += wait;
    if (wait > b->stats.max_queue_delay_ns) b->stats.max_queue_delay_ns = wait;
  }
}

static void dispatch(bat_batcher *b, batch *bt) {
  bt->run = (bat_task){.sig = bt->sig, .run = run_batch, .done = batch_done, .user = bt};
  td_err err;
  if (bat_queue_submit(b->queue, &bt->run, &err)) finish_batch(bt, err.code, &err, false);
}

/* --- dispatch ------------------------------------------------------------ */

/* Takes the first batch that may leave now (full, waited long enough, or
 * anything while stopping) if a batch thread is free, counting it as in
 * flight; NULL otherwise. *wake gets the earliest time a waiting batch
 * becomes ready (UINT64_MAX: none). Mutex held. */
static batch *take_ready(bat_batcher *b, uint64_t now, uint64_t *wake) {
  *wake = UINT64_MAX;
  for (sigq **qp = &b->queues; *qp; qp = &(*qp)->next) {
    sigq *q = *qp;
    batch *h = q->head;
    uint64_t timeout = (uint64_t)q->qp.p.batch_timeout_micros * 1000u;
    bool is_ready = b->stopping || h != q->tail || h->rows >= q->qp.exec_size ||
                    now - h->opened_ns >= timeout;
    if (!is_ready) {
      if (h->opened_ns + timeout < *wake) *wake = h->opened_ns + timeout;
      continue;
    }
    if (b->in_flight >= b->p.num_batch_threads && !b->stopping) continue;
    q->head = h->next;
    q->n_batches--;
    if (!q->head) {
      q->tail = NULL;
      *qp = q->next;
      free(q);
    } else {
      /* Round robin: move this queue to the end. */
      *qp = q->next;
      q->next = NULL;
      sigq **end = &b->queues;
      while (*end) end = &(*end)->next;
      *end = q;
    }
    b->in_flight++;
    count_batch(b, h, now);
    return h;
  }
  return NULL;
}

/* Sends what may leave now to the engine from a submitting thread, so that
 * a batch costs no hop through the scheduler thread (a worker that finishes
 * a batch hands on the next one in finish_batch); the scheduler only wakes
 * for batches that wait for their timeout. Called without the mutex, by
 * submitters only: the batcher is not destroyed while they run. */
static void dispatch_ready(bat_batcher *b) {
  for (;;) {
    uint64_t wake;
    uv_mutex_lock(&b->mu);
    batch *ready = b->stopping ? NULL : take_ready(b, td_now_ns(), &wake);
    if (!ready && !b->stopping) wake_scheduler(b, wake);
    uv_mutex_unlock(&b->mu);
    if (!ready) return;
    dispatch(b, ready);
  }
}

static void scheduler(void *arg) {
  bat_batcher *b = arg;
  uv_mutex_lock(&b->mu);
  for (;;) {
    uint64_t now = td_now_ns(), wake;
    batch *ready = take_ready(b, now, &wake);
    if (ready) {
      uv_mutex_unlock(&b->mu);
      dispatch(b, ready);
      uv_mutex_lock(&b->mu);
      continue;
    }
    if (b->stopping && !b->queues && !b->in_flight) break;
    if (wake != UINT64_MAX && b->in_flight < b->p.num_batch_threads) {
      b->sched_wake = wake;
      uv_cond_timedwait(&b->cv, &b->mu, wake > now ? wake - now : 0);
    } else {
      b->sched_wake = UINT64_MAX;
      uv_cond_wait(&b->cv, &b->mu);
    }
    b->sched_wake = 0; /* awake: it scans before it sleeps again */
  }
  uv_mutex_unlock(&b->mu);
}

/* --- submission ---------------------------------------------------------- */

static void qparams_for(const bat_batcher *b, const char *model, qparams *qp) {
  int64_t timeout_us = 0;
  qp->p = b->p;
  if (b->lookup && model && b->lookup(b->lookup_ctx, model, &qp->p, &timeout_us))
    qp->p.num_batch_threads = b->p.num_batch_threads;
  qp->exec_size = cfg_batching_exec_size(&qp->p);
  qp->queue_timeout_ns = timeout_us > 0 ? (uint64_t)timeout_us * 1000u : 0;
}

static batch *new_batch(bat_batcher *b, const sigq *q) {
  batch *bt = calloc(1, sizeof *bt);
  if (!bt) return NULL;
  bt->owner = b;
  bt->sig = q->sig;
  bt->qp = q->qp;
  bt->opened_ns = td_now_ns();
  return bt;
}

static bool add_piece(batch *bt, task_state *ts, int64_t off, int64_t len) {
  if (bt->n == bt->cap) {
    int cap = bt->cap ? bt->cap * 2 : 8;
    piece *p = realloc(bt->pieces, sizeof *p * (size_t)cap);
    if (!p) return false;
    bt->pieces = p;
    bt->cap = cap;
  }
  bt->pieces[bt->n++] = (piece){ts, off, len};
  bt->rows += len;
  ts->pieces_left++;
  return true;
}

/* The task's rows (dimension 0, the same in every input), and whether it
 * must run unbatched (*direct: no inputs, or one the batcher cannot merge).
 * Inputs without a dimension 0 or with unequal ones are errors. */
static td_code task_rows(const bat_task *t, int64_t *rows, bool *direct, td_err *err) {
  const ldr_signature *sig = t->sig;
  *direct = sig->n_inputs == 0;
  *rows = -1;
  for (int i = 0; i < sig->n_inputs; i++) {
    const eng_tensor *x = &t->inputs[i];
    if (!batchable_dtype(x->dtype) || x->shape.rank > 6) *direct = true;
    if (x->shape.rank < 1)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "Batching Run() input tensors must have at least one dimension");
    if (*rows >= 0 && x->shape.dim[0] != *rows)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "Batching Run() input tensors must have equal 0th-dimension size");
    *rows = x->shape.dim[0];
  }
  return TD_OK;
}

td_code bat_batcher_submit(bat_batcher *b, bat_task *t, td_err *err) {
  const ldr_signature *sig = t->sig;
  bool direct;
  int64_t rows;
  td_code rc = task_rows(t, &rows, &direct, err);
  if (rc) return rc;
  if (direct || rows == 0) return bat_queue_submit(b->queue, t, err);

  /* The queue's parameters: an existing queue keeps the ones it was made
   * with; a new one asks for the model's own (outside the lock). */
  uv_mutex_lock(&b->mu);
  sigq *q = b->queues;
  while (q && q->sig != sig) q = q->next;
  qparams qp;
  if (q) {
    qp = q->qp;
  } else {
    uv_mutex_unlock(&b->mu);
    qparams_for(b, t->model, &qp);
    uv_mutex_lock(&b->mu);
    q = b->queues;
    while (q && q->sig != sig) q = q->next;
    if (q) qp = q->qp;
  }
  uv_mutex_unlock(&b->mu);
  if (rows > qp.p.max_batch_size)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Task size %lld is larger than maximum input batch size %lld",
                      (long long)rows, (long long)qp.p.max_batch_size);
  /* A task with string outputs that would need splitting runs by itself. */
  bool whole = has_string_output(sig);
  if (whole && rows > qp.exec_size) return bat_queue_submit(b->queue, t, err);

  task_state *ts = calloc(1, sizeof *ts);
  if (!ts) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  ts->t = t;
  ts->rows = rows;
  ts->submitted_ns = td_now_ns();
  for (int o = 0; o < sig->n_outputs; o++) t->outputs[o] = (eng_tensor){0};
  if (qp.queue_timeout_ns) {
    uint64_t limit = td_now_ns() + qp.queue_timeout_ns;
    if (!t->deadline_ns || limit < t->deadline_ns) t->deadline_ns = limit;
  }

  uv_mutex_lock(&b->mu);
  if (b->stopping) {
    rc = td_err_set(err, TD_UNAVAILABLE, "server is shutting down");
    goto out;
  }
  q = b->queues;
  while (q && q->sig != sig) q = q->next;
  if (q) qp = q->qp; /* made meanwhile by another submitter */
  batch *open = q ? q->tail : NULL;
  int64_t room = 0;
  if (open && compatible(&qp, open->pieces[0].ts->t, t)) room = qp.exec_size - open->rows;
  if (room < 0) room = 0;
  int64_t first = rows < room ? rows : room;
  if (whole && first < rows) first = 0; /* a fresh batch of its own */
  int64_t rest = rows - first;
  int64_t fresh = (rest + qp.exec_size - 1) / qp.exec_size;
  if ((q ? q->n_batches : 0) + fresh > qp.p.max_enqueued_batches) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED,
                    "The batch scheduling queue to which this task was submitted is full");
    goto out;
  }
  if (!q) {
    q = calloc(1, sizeof *q);
    if (!q) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      goto out;
    }
    q->sig = sig;
    q->qp = qp;
    sigq **end = &b->queues;
    while (*end) end = &(*end)->next;
    *end = q;
  }
  /* Allocate every new batch first, so nothing half-applies on failure. */
  batch **fresh_b = calloc((size_t)fresh + 1, sizeof *fresh_b);
  bool ok = fresh_b != NULL;
  for (int64_t k = 0; ok && k < fresh; k++) ok = (fresh_b[k] = new_batch(b, q)) != NULL;
  if (ok && first) ok = add_piece(open, ts, 0, first);
  for (int64_t k = 0, off = first; ok && k < fresh; k++) {
    int64_t len = rows - off < qp.exec_size ? rows - off : qp.exec_size;
    ok = add_piece(fresh_b[k], ts, off, len);
    off += len;
  }
  if (!ok) {
    /* Only reachable when out of memory: undo. */
    if (first && open->n && open->pieces[open->n - 1].ts == ts) {
      open->n--;
      open->rows -= first;
    }
    for (int64_t k = 0; fresh_b && k < fresh; k++)
      if (fresh_b[k]) {
        free(fresh_b[k]->pieces);
        free(fresh_b[k]);
      }
    free(fresh_b);
    if (!q->head) {
      sigq **qp = &b->queues;
      while (*qp != q) qp = &(*qp)->next;
      *qp = q->next;
      free(q);
    }
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto out;
  }
  for (int64_t k = 0; k < fresh; k++) {
    if (q->tail)
      q->tail->next = fresh_b[k];
    else
      q->head = fresh_b[k];
    q->tail = fresh_b[k];
    q->n_batches++;
  }
  free(fresh_b);
  ts = NULL; /* owned by the batches now */
out:
  uv_mutex_unlock(&b->mu);
  free(ts);
  if (!rc) dispatch_ready(b);
  return rc;
}

bool bat_batcher_try_run_here(bat_batcher *b, bat_task *t) {
  bool direct;
  int64_t rows;
  if (task_rows(t, &rows, &direct, NULL) || direct || rows < 1) return false;
  /* Only when no batch runs or waits at all: a waiting task would be
   * overtaken, and under load requests should merge, which they do while
   * a batch runs. */
  uv_mutex_lock(&b->mu);
  bool ok = !b->queues && !b->stopping && b->in_flight == 0;
  if (ok) b->in_flight++;
  uv_mutex_unlock(&b->mu);
  if (!ok) return false;
  /* The model's parameters: a batch of one leaves at once only with no
   * timeout to wait, needs no padding and no splitting. */
  qparams qp;
  qparams_for(b, t->model, &qp);
  ok = qp.p.batch_timeout_micros == 0 && rows <= qp.exec_size &&
       padded_size(&qp, rows) == rows;
  /* Runs only if the run is known to be short and an engine worker idle. */
  if (ok) ok = bat_queue_try_run_here(b->queue, t);
  uv_mutex_lock(&b->mu);
  b->in_flight--;
  if (ok) {
    b->stats.batches++;
    b->stats.rows += (uint64_t)rows;
    if (rows > b->stats.max_batch_rows) b->stats.max_batch_rows = rows;
  }
  uv_mutex_unlock(&b->mu);
  /* Tasks that arrived meanwhile may have waited for this thread. */
  dispatch_ready(b);
  return ok;
}

td_code bat_batcher_create(const cfg_batching *params, bat_queue *queue, bat_model_params_fn lookup,
                           void *lookup_ctx, bat_batcher **out, td_err *err) {
  td_code rc = cfg_batching_validate(params, err);
  if (rc) return rc;
  bat_batcher *b = calloc(1, sizeof *b);
  if (!b) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  b->p = *params;
  b->lookup = lookup;
  b->lookup_ctx = lookup_ctx;
  b->queue = queue;
  if (uv_mutex_init(&b->mu) || uv_cond_init(&b->cv)) {
    free(b);
    return td_err_set(err, TD_INTERNAL, "cannot create batcher primitives");
  }
  if (uv_thread_create(&b->thread, scheduler, b)) {
    uv_cond_destroy(&b->cv);
    uv_mutex_destroy(&b->mu);
    free(b);
    return td_err_set(err, TD_INTERNAL, "cannot start the batch scheduler");
  }
  *out = b;
  return TD_OK;
}

void bat_batcher_get_stats(bat_batcher *b, bat_batcher_stats *out) {
  uv_mutex_lock(&b->mu);
  *out = b->stats;
  uv_mutex_unlock(&b->mu);
}

void bat_batcher_destroy(bat_batcher *b) {
  if (!b) return;
  uv_mutex_lock(&b->mu);
  b->stopping = true;
  uv_cond_signal(&b->cv);
  uv_mutex_unlock(&b->mu);
  uv_thread_join(&b->thread);
  uv_cond_destroy(&b->cv);
  uv_mutex_destroy(&b->mu);
  free(b);
}
