/* Dynamic batching: merged runs give every task exactly its own answer
 * (y = 2x + 1 row by row), across concurrency, padding to allowed sizes,
 * splitting, variable-length padding, separate signatures, overflow and
 * shutdown. The model is a small graph built with the engine's IR. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "bat_batcher.h"
#include "eng_model.h"

typedef struct fixture {
  eng_model *model;
  ldr_tensor_info in_info, out_info;
  ldr_signature sig;
} fixture;

static void add_const(eng_graph *g, const char *name, float v) {
  int id = eng_graph_add_node(g, name, "Const", NULL);
  eng_graph_node(g, id)->n_out = 1;
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  eng_shape sc = eng_shape_scalar();
  ck_assert_int_eq(eng_tensor_alloc(&a->tensor, ENG_DT_FLOAT, &sc, NULL), TD_OK);
  *(float *)eng_tensor_data(&a->tensor) = v;
  a->kind = ENG_ATTR_TENSOR;
}

/* y = x * mul + add, fed at x:0, fetched at y:0. */
static void fixture_init(fixture *f, float mul, float add) {
  eng_graph *g = eng_graph_create();
  int x = eng_graph_add_node(g, "x", "Placeholder", NULL);
  eng_graph_node(g, x)->n_out = 1;
  eng_attr *dt = eng_graph_add_attr(g, x, "dtype");
  dt->kind = ENG_ATTR_TYPE;
  dt->type = ENG_DT_FLOAT;
  add_const(g, "mul", mul);
  add_const(g, "add", add);
  int m = eng_graph_add_node(g, "m", "Mul", NULL);
  eng_graph_node(g, m)->n_out = 1;
  eng_graph_add_input(g, m, (eng_edge){x, 0}, NULL);
  eng_graph_add_input(g, m, (eng_edge){eng_graph_find(g, "mul", 3), 0}, NULL);
  int y = eng_graph_add_node(g, "y", "AddV2", NULL);
  eng_graph_node(g, y)->n_out = 1;
  eng_graph_add_input(g, y, (eng_edge){m, 0}, NULL);
  eng_graph_add_input(g, y, (eng_edge){eng_graph_find(g, "add", 3), 0}, NULL);
  ck_assert_int_eq(eng_model_create(g, NULL, NULL, &f->model, NULL), TD_OK);
  f->in_info = (ldr_tensor_info){.alias = "x", .name = "x:0", .dtype = ENG_DT_FLOAT,
                                 .shape = eng_shape_unknown()};
  f->out_info = (ldr_tensor_info){.alias = "y", .name = "y:0", .dtype = ENG_DT_FLOAT,
                                  .shape = eng_shape_unknown()};
  f->sig = (ldr_signature){.key = "serving_default", .n_inputs = 1, .inputs = &f->in_info,
                           .n_outputs = 1, .outputs = &f->out_info};
  const char *in[] = {"x:0"}, *out[] = {"y:0"};
  td_err err;
  ck_assert_int_eq(eng_plan_create(f->model, 1, in, 1, out, 0, NULL, &f->sig.plan, &err), TD_OK);
}

static void fixture_free(fixture *f) {
  eng_plan_destroy(f->sig.plan);
  eng_model_destroy(f->model);
}

/* --- tasks -------------------------------------------------------------- */

typedef struct req {
  bat_task t;
  eng_tensor in, out;
  float mul, add;
  atomic_int done;
} req;

static uv_mutex_t done_mu;
static uv_cond_t done_cv;
static atomic_int n_done;

static void on_done(bat_task *t) {
  req *r = t->user;
  atomic_store(&r->done, 1);
  uv_mutex_lock(&done_mu);
  atomic_fetch_add(&n_done, 1);
  uv_cond_broadcast(&done_cv);
  uv_mutex_unlock(&done_mu);
}

static void wait_done(int n) {
  uv_mutex_lock(&done_mu);
  while (atomic_load(&n_done) < n) ck_assert_int_eq(uv_cond_timedwait(&done_cv, &done_mu, 20000000000ull), 0);
  uv_mutex_unlock(&done_mu);
}

/* Waits until the batcher has sent `n` batches to the engine queue: a
 * batch counted there no longer takes tasks, however slow the box is. */
static void wait_batches(bat_batcher *b, uint64_t n) {
  for (;;) {
    bat_batcher_stats st;
    bat_batcher_get_stats(b, &st);
    if (st.batches >= n) return;
    uv_sleep(1);
  }
}

/* A task of `rows` x `cols` distinct values seeded by id. */
static void req_init(req *r, fixture *f, int id, int64_t rows, int64_t cols, float mul, float add) {
  memset(r, 0, sizeof *r);
  eng_shape s = {.rank = 2, .dim = {rows, cols}};
  ck_assert_int_eq(eng_tensor_alloc(&r->in, ENG_DT_FLOAT, &s, NULL), TD_OK);
  float *x = eng_tensor_data(&r->in);
  for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)(id * 1000 + i) * 0.5f;
  r->mul = mul;
  r->add = add;
  r->t = (bat_task){.sig = &f->sig, .inputs = &r->in, .outputs = &r->out, .done = on_done, .user = r};
}

/* Checks the answer equals the unbatched one for this task's own input
 * (over the first `cols` columns when padding widened it). */
static void req_check(req *r) {
  ck_assert_msg(r->t.code == TD_OK, "task failed: %s", r->t.err.msg);
  ck_assert_int_eq(r->out.shape.dim[0], r->in.shape.dim[0]);
  int64_t rows = r->in.shape.dim[0], cols = r->in.shape.dim[1], ocols = r->out.shape.dim[1];
  ck_assert_int_ge(ocols, cols);
  const float *x = eng_tensor_data(&r->in), *y = eng_tensor_data(&r->out);
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++)
      ck_assert_msg(y[i * ocols + j] == x[i * cols + j] * r->mul + r->add, "row %lld col %lld", (long long)i,
                    (long long)j);
}

static void req_free(req *r) {
  eng_tensor_release(&r->in);
  eng_tensor_release(&r->out);
}

static void setup(void) {
  uv_mutex_init(&done_mu);
  uv_cond_init(&done_cv);
  atomic_store(&n_done, 0);
}

static void teardown(void) {
  uv_cond_destroy(&done_cv);
  uv_mutex_destroy(&done_mu);
}

static cfg_batching params(int64_t max, int64_t timeout_us, int64_t threads) {
  cfg_batching p;
  cfg_batching_defaults(&p, 2);
  p.max_batch_size = p.max_execution_batch_size = max;
  p.batch_timeout_micros = timeout_us;
  p.num_batch_threads = threads;
  return p;
}

/* --- concurrency: no cross-talk ------------------------------------------- */

#define N_SUBMITTERS 8
#define PER_SUBMITTER 60

typedef struct submitter {
  bat_batcher *b;
  fixture *f;
  req *reqs;
  int base;
  atomic_int failed;
} submitter;

static void submit_many(void *arg) {
  submitter *s = arg;
  for (int i = 0; i < PER_SUBMITTER; i++) {
    req *r = &s->reqs[i];
    req_init(r, s->f, s->base + i, 1 + (s->base + i) % 3, 4, 2.0f, 1.0f);
    /* No Check assertions off the test's thread: count failures instead. */
    if (bat_batcher_submit(s->b, &r->t, NULL) != TD_OK) atomic_fetch_add(&s->failed, 1);
  }
}

START_TEST(test_concurrent_clients_get_their_own_answers) {
  fixture f;
  fixture_init(&f, 2.0f, 1.0f);
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(2, 4096, &q, NULL), TD_OK);
  cfg_batching p = params(32, 2000, 2);
  p.max_enqueued_batches = 1000;
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  static req reqs[N_SUBMITTERS][PER_SUBMITTER];
  submitter subs[N_SUBMITTERS];
  uv_thread_t th[N_SUBMITTERS];
  for (int i = 0; i < N_SUBMITTERS; i++) {
    subs[i] = (submitter){.b = b, .f = &f, .reqs = reqs[i], .base = i * PER_SUBMITTER};
    uv_thread_create(&th[i], submit_many, &subs[i]);
  }
  for (int i = 0; i < N_SUBMITTERS; i++) {
    uv_thread_join(&th[i]);
    ck_assert_int_eq(atomic_load(&subs[i].failed), 0);
  }
  wait_done(N_SUBMITTERS * PER_SUBMITTER);
  bat_batcher_stats st;
  bat_batcher_get_stats(b, &st);
  bat_batcher_destroy(b);
  bat_queue_destroy(q);
  uint64_t rows = 0;
  for (int i = 0; i < N_SUBMITTERS; i++)
    for (int k = 0; k < PER_SUBMITTER; k++) {
      req_check(&reqs[i][k]);
      rows += (uint64_t)reqs[i][k].in.shape.dim[0];
      req_free(&reqs[i][k]);
    }
  ck_assert_uint_eq(st.rows, rows);
  ck_assert_int_le(st.max_batch_rows, 32);
  /* Requests were merged: far fewer runs than requests. */
  ck_assert_msg(st.batches < N_SUBMITTERS * PER_SUBMITTER / 2, "%llu batches", (unsigned long long)st.batches);
  fixture_free(&f);
}
END_TEST

/* --- a gate to hold the engine busy ----------------------------------------- */

typedef struct gate {
  bat_task t;
  uv_sem_t open;
  atomic_int running;
} gate;

static td_code gate_run(bat_task *t) {
  gate *g = t->user;
  atomic_store(&g->running, 1);
  uv_sem_wait(&g->open);
  return TD_OK;
}

static void gate_done(bat_task *t) { (void)t; }

/* Occupies the queue's only worker until gate_release. */
static void gate_hold(gate *g, bat_queue *q, fixture *f) {
  memset(g, 0, sizeof *g);
  uv_sem_init(&g->open, 0);
  g->t = (bat_task){.sig = &f->sig, .run = gate_run, .done = gate_done, .user = g};
  ck_assert_int_eq(bat_queue_submit(q, &g->t, NULL), TD_OK);
  while (!atomic_load(&g->running)) uv_sleep(1);
}

static void gate_release(gate *g) { uv_sem_post(&g->open); }

START_TEST(test_padding_to_allowed_sizes) {
  fixture f;
  fixture_init(&f, 2.0f, 1.0f);
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 64, &q, NULL), TD_OK);
  cfg_batching p = params(8, 0, 1);
  p.n_allowed_batch_sizes = 3;
  p.allowed_batch_sizes[0] = 2;
  p.allowed_batch_sizes[1] = 4;
  p.allowed_batch_sizes[2] = 8;
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  /* First task runs alone (a thread is free); the engine is then held so
   * the next three accumulate into one batch of 3, padded to 4. */
  gate g;
  gate_hold(&g, q, &f);
  req r[4];
  req_init(&r[0], &f, 0, 1, 3, 2.0f, 1.0f);
  ck_assert_int_eq(bat_batcher_submit(b, &r[0].t, NULL), TD_OK);
  wait_batches(b, 1); /* r[0]'s batch has left for the engine queue */
  for (int i = 1; i < 4; i++) {
    req_init(&r[i], &f, i, 1, 3, 2.0f, 1.0f);
    ck_assert_int_eq(bat_batcher_submit(b, &r[i].t, NULL), TD_OK);
  }
  gate_release(&g);
  wait_done(4);
  bat_batcher_stats st;
  bat_batcher_get_stats(b, &st);
  ck_assert_uint_eq(st.batches, 2);
  ck_assert_uint_eq(st.rows, 4);
  ck_assert_uint_eq(st.padding_rows, 1 + 1); /* 1 -> 2, 3 -> 4 */
  ck_assert_int_eq(st.max_batch_rows, 4);
  for (int i = 0; i < 4; i++) {
    req_check(&r[i]);
    ck_assert_int_eq(r[i].out.shape.dim[0], 1); /* padding dropped */
    req_free(&r[i]);
  }
  bat_batcher_destroy(b);
  bat_queue_destroy(q);
  uv_sem_destroy(&g.open);
  fixture_free(&f);
}
END_TEST

START_TEST(test_large_requests_split_or_rejected) {
  fixture f;
  fixture_init(&f, 3.0f, -1.0f);
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(2, 64, &q, NULL), TD_OK);
  cfg_batching p = params(10, 0, 2);
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  req big;
  req_init(&big, &f, 1, 11, 2, 3.0f, -1.0f);
  td_err err;
  ck_assert_int_eq(bat_batcher_submit(b, &big.t, &err), TD_INVALID_ARGUMENT);
  ck_assert_str_eq(err.msg, "Task size 11 is larger than maximum input batch size 10");
  req_free(&big);
  bat_batcher_destroy(b);

  p.enable_large_batch_splitting = true;
  p.max_execution_batch_size = 4;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  req_init(&big, &f, 2, 10, 3, 3.0f, -1.0f);
  ck_assert_int_eq(bat_batcher_submit(b, &big.t, NULL), TD_OK);
  wait_done(1);
  req_check(&big); /* reassembled from 4 + 4 + 2 rows */
  bat_batcher_stats st;
  bat_batcher_get_stats(b, &st);
  ck_assert_uint_eq(st.batches, 3);
  ck_assert_int_eq(st.max_batch_rows, 4);
  req_free(&big);
  bat_batcher_destroy(b);
  bat_queue_destroy(q);
  fixture_free(&f);
}
END_TEST

START_TEST(test_shapes_and_signatures_never_mix) {
  fixture f1, f2;
  fixture_init(&f1, 2.0f, 1.0f);
  fixture_init(&f2, -4.0f, 0.5f); /* another version / signature */
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 64, &q, NULL), TD_OK);
  cfg_batching p = params(16, 0, 1);
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  gate g;
  gate_hold(&g, q, &f1);
  req r[6];
  req_init(&r[0], &f1, 0, 2, 3, 2.0f, 1.0f);
  req_init(&r[1], &f2, 1, 1, 3, -4.0f, 0.5f);
  req_init(&r[2], &f1, 2, 1, 5, 2.0f, 1.0f); /* other non-batch dim */
  req_init(&r[3], &f2, 3, 3, 3, -4.0f, 0.5f);
  req_init(&r[4], &f1, 4, 1, 3, 2.0f, 1.0f);
  req_init(&r[5], &f1, 5, 2, 5, 2.0f, 1.0f);
  for (int i = 0; i < 6; i++) ck_assert_int_eq(bat_batcher_submit(b, &r[i].t, NULL), TD_OK);
  gate_release(&g);
  wait_done(6);
  for (int i = 0; i < 6; i++) {
    req_check(&r[i]);
    ck_assert_int_eq(r[i].out.shape.dim[1], r[i].in.shape.dim[1]); /* no padding */
    req_free(&r[i]);
  }
  bat_batcher_destroy(b);

  /* With pad_variable_length_inputs the widths merge; columns beyond a
   * task's own width are padding. */
  p.pad_variable_length_inputs = true;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  atomic_store(&n_done, 0);
  gate_hold(&g, q, &f1);
  /* The batch thread's one slot goes to r[2], which then waits behind the
   * gate, so r[0] and r[1] gather into one batch. */
  req_init(&r[2], &f1, 2, 1, 4, 2.0f, 1.0f);
  ck_assert_int_eq(bat_batcher_submit(b, &r[2].t, NULL), TD_OK);
  wait_batches(b, 1);
  req_init(&r[0], &f1, 0, 1, 3, 2.0f, 1.0f);
  req_init(&r[1], &f1, 1, 2, 5, 2.0f, 1.0f);
  for (int i = 0; i < 2; i++) ck_assert_int_eq(bat_batcher_submit(b, &r[i].t, NULL), TD_OK);
  gate_release(&g);
  wait_done(3);
  bat_batcher_stats st;
  bat_batcher_get_stats(b, &st);
  ck_assert_uint_eq(st.batches, 2);
  req_check(&r[2]);
  req_free(&r[2]);
  req_check(&r[0]);
  req_check(&r[1]);
  ck_assert_int_eq(r[0].out.shape.dim[1], 5);
  /* The padded cells hold the task's own first element, transformed. */
  const float *x0 = eng_tensor_data(&r[0].in), *y0 = eng_tensor_data(&r[0].out);
  ck_assert(y0[4] == x0[0] * 2.0f + 1.0f);
  for (int i = 0; i < 2; i++) req_free(&r[i]);
  bat_batcher_destroy(b);
  bat_queue_destroy(q);
  uv_sem_destroy(&g.open);
  fixture_free(&f1);
  fixture_free(&f2);
}
END_TEST

START_TEST(test_full_queue_is_rejected_at_once) {
  fixture f;
  fixture_init(&f, 2.0f, 1.0f);
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 64, &q, NULL), TD_OK);
  cfg_batching p = params(2, 0, 1);
  p.max_enqueued_batches = 1;
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  gate g;
  gate_hold(&g, q, &f);
  req r[4];
  for (int i = 0; i < 4; i++) req_init(&r[i], &f, i, 1, 2, 2.0f, 1.0f);
  /* r0 is dispatched (the batch thread is free) and waits behind the gate;
   * r1 and r2 fill the one allowed waiting batch; r3 finds the queue full. */
  ck_assert_int_eq(bat_batcher_submit(b, &r[0].t, NULL), TD_OK);
  wait_batches(b, 1);
  ck_assert_int_eq(bat_batcher_submit(b, &r[1].t, NULL), TD_OK);
  ck_assert_int_eq(bat_batcher_submit(b, &r[2].t, NULL), TD_OK);
  td_err err;
  ck_assert_int_eq(bat_batcher_submit(b, &r[3].t, &err), TD_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(err.msg, "The batch scheduling queue to which this task was submitted is full");
  gate_release(&g);
  wait_done(3);
  for (int i = 0; i < 3; i++) req_check(&r[i]);
  for (int i = 0; i < 4; i++) req_free(&r[i]);
  bat_batcher_destroy(b);
  bat_queue_destroy(q);
  uv_sem_destroy(&g.open);
  fixture_free(&f);
}
END_TEST

START_TEST(test_timeout_gathers_and_destroy_flushes) {
  fixture f;
  fixture_init(&f, 2.0f, 1.0f);
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(2, 64, &q, NULL), TD_OK);
  /* A long timeout: the batch waits to fill; destroy must still run it. */
  cfg_batching p = params(64, 10 * 1000 * 1000, 2);
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  req r[5];
  for (int i = 0; i < 5; i++) {
    req_init(&r[i], &f, i, 1, 2, 2.0f, 1.0f);
    ck_assert_int_eq(bat_batcher_submit(b, &r[i].t, NULL), TD_OK);
  }
  uv_sleep(30);
  ck_assert_int_eq(atomic_load(&n_done), 0); /* still gathering */
  bat_batcher_destroy(b);
  wait_done(5);
  for (int i = 0; i < 5; i++) {
    req_check(&r[i]);
    req_free(&r[i]);
  }
  bat_queue_destroy(q);
  fixture_free(&f);
}
END_TEST

START_TEST(test_expired_tasks_are_dropped_from_their_batch) {
  fixture f;
  fixture_init(&f, 2.0f, 1.0f);
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 64, &q, NULL), TD_OK);
  cfg_batching p = params(16, 0, 1);
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  gate g;
  gate_hold(&g, q, &f);
  req r[4];
  for (int i = 0; i < 4; i++) req_init(&r[i], &f, i, 1 + i, 2, 2.0f, 1.0f);
  ck_assert_int_eq(bat_batcher_submit(b, &r[0].t, NULL), TD_OK); /* waits behind the gate */
  wait_batches(b, 1);
  r[2].t.deadline_ns = uv_hrtime() + 5 * 1000 * 1000; /* 5 ms: passes while queued */
  for (int i = 1; i < 4; i++) ck_assert_int_eq(bat_batcher_submit(b, &r[i].t, NULL), TD_OK);
  uv_sleep(50);
  gate_release(&g);
  wait_done(4);
  ck_assert_int_eq(r[2].t.code, TD_DEADLINE_EXCEEDED);
  ck_assert_ptr_null(r[2].out.buf);
  for (int i = 0; i < 4; i++) {
    if (i != 2) req_check(&r[i]);
    req_free(&r[i]);
  }
  bat_batcher_destroy(b);
  bat_queue_destroy(q);
  uv_sem_destroy(&g.open);
  fixture_free(&f);
}
END_TEST

/* Per-model parameters: "small" has its own limits and a queue timeout. */
/* "small"'s queue timeout, read each time its queue is made. */
static _Atomic int64_t small_timeout_us;

static bool small_model(void *ctx, const char *model, cfg_batching *out, int64_t *timeout_us) {
  (void)ctx;
  *timeout_us = 0;
  if (strcmp(model, "small")) return false;
  cfg_batching_defaults(out, 1);
  out->max_batch_size = out->max_execution_batch_size = 2;
  *timeout_us = atomic_load(&small_timeout_us);
  return true;
}

START_TEST(test_per_model_parameters_and_queue_timeout) {
  fixture f, g2;
  fixture_init(&f, 2.0f, 1.0f);
  fixture_init(&g2, 2.0f, 1.0f);
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 64, &q, NULL), TD_OK);
  cfg_batching p = params(16, 0, 1);
  atomic_store(&small_timeout_us, 5000);
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, small_model, NULL, &b, NULL), TD_OK);
  req r[4];
  req_init(&r[0], &f, 0, 3, 2, 2.0f, 1.0f);
  r[0].t.model = "small";
  td_err err;
  ck_assert_int_eq(bat_batcher_submit(b, &r[0].t, &err), TD_INVALID_ARGUMENT);
  ck_assert_str_eq(err.msg, "Task size 3 is larger than maximum input batch size 2");
  /* The same rows are fine for a model on the global parameters. */
  req_init(&r[1], &g2, 1, 3, 2, 2.0f, 1.0f);
  r[1].t.model = "other";
  ck_assert_int_eq(bat_batcher_submit(b, &r[1].t, NULL), TD_OK);
  wait_done(1);
  req_check(&r[1]);
  /* A "small" task waiting longer than its 5 ms queue timeout fails. */
  gate g;
  gate_hold(&g, q, &f);
  req_init(&r[2], &f, 2, 1, 2, 2.0f, 1.0f);
  r[2].t.model = "small";
  req_init(&r[3], &f, 3, 1, 2, 2.0f, 1.0f);
  r[3].t.model = "small";
  ck_assert_int_eq(bat_batcher_submit(b, &r[2].t, NULL), TD_OK); /* waits behind the gate */
  uv_sleep(50);
  gate_release(&g);
  wait_done(2);
  ck_assert_int_eq(r[2].t.code, TD_DEADLINE_EXCEEDED);
  /* Nothing in the way now: the model's next queue (its last one went with
   * r[2]) takes a minute's timeout, as 5 ms without a wait cannot be
   * promised on a loaded box. */
  atomic_store(&small_timeout_us, 60 * 1000 * 1000);
  ck_assert_int_eq(bat_batcher_submit(b, &r[3].t, NULL), TD_OK);
  wait_done(3);
  req_check(&r[3]);
  for (int i = 0; i < 4; i++) req_free(&r[i]);
  bat_batcher_destroy(b);
  bat_queue_destroy(q);
  uv_sem_destroy(&g.open);
  fixture_free(&f);
  fixture_free(&g2);
}
END_TEST

START_TEST(test_invalid_tasks_and_params) {
  fixture f;
  fixture_init(&f, 2.0f, 1.0f);
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 64, &q, NULL), TD_OK);
  cfg_batching p = params(8, 0, 1);
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  req r;
  memset(&r, 0, sizeof r);
  eng_shape sc = eng_shape_scalar();
  ck_assert_int_eq(eng_tensor_alloc(&r.in, ENG_DT_FLOAT, &sc, NULL), TD_OK);
  r.t = (bat_task){.sig = &f.sig, .inputs = &r.in, .outputs = &r.out, .done = on_done, .user = &r};
  td_err err;
  ck_assert_int_eq(bat_batcher_submit(b, &r.t, &err), TD_INVALID_ARGUMENT);
  ck_assert_str_eq(err.msg, "Batching Run() input tensors must have at least one dimension");
  req_free(&r);
  bat_batcher_destroy(b);
  bat_queue_destroy(q);
  p.n_allowed_batch_sizes = 2;
  p.allowed_batch_sizes[0] = 4;
  p.allowed_batch_sizes[1] = 6;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, &err), TD_INVALID_ARGUMENT);
  ck_assert_str_eq(err.msg,
                   "Last entry in allowed_batch_sizes must match max_batch_size; last entry was 6; expected 8");
  p.allowed_batch_sizes[1] = 3;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, &err), TD_INVALID_ARGUMENT);
  fixture_free(&f);
}
END_TEST

/* An idle batcher runs a lone request on the calling thread (a batch of one,
 * done() not called), once the signature's runs are known to be short; not
 * while a batch runs or the engine is busy, nor when the request would wait
 * for a timeout or be padded. */
START_TEST(test_idle_batcher_runs_a_lone_request_inline) {
  fixture f;
  fixture_init(&f, 3.0f, 0.5f);
  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 64, &q, NULL), TD_OK);
  /* "Short" is judged by measured times: generous here, so a slow build
   * (sanitizers, a loaded machine) still counts this model's runs short. */
  bat_queue_set_run_here_limit(q, 1000000000u);
  cfg_batching p = params(8, 0, 1);
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  req r[6];
  /* Not measured yet: it goes the usual way, and the batch is measured. */
  req_init(&r[0], &f, 0, 1, 3, 3.0f, 0.5f);
  ck_assert(!bat_batcher_try_run_here(b, &r[0].t));
  ck_assert_int_eq(bat_batcher_submit(b, &r[0].t, NULL), TD_OK);
  wait_done(1);
  req_check(&r[0]);
  /* Now a lone request runs inline, once the worker that answered r[0]
   * has also let go of its batch and its engine slot (done() comes first;
   * a refused try changes nothing, so it may be asked again). */
  req_init(&r[1], &f, 1, 1, 3, 3.0f, 0.5f);
  bool ran = false;
  for (int i = 0; i < 10000 && !(ran = bat_batcher_try_run_here(b, &r[1].t)); i++) usleep(1000);
  ck_assert(ran);
  req_check(&r[1]);
  ck_assert_int_eq(atomic_load(&r[1].done), 0); /* the caller has the answer */
  bat_batcher_stats st;
  bat_batcher_get_stats(b, &st);
  ck_assert_uint_eq(st.batches, 2);
  ck_assert_uint_eq(st.rows, 2);
  /* The engine busy: no. A batch of this batcher running: no. */
  gate g;
  gate_hold(&g, q, &f);
  req_init(&r[2], &f, 2, 1, 3, 3.0f, 0.5f);
  ck_assert(!bat_batcher_try_run_here(b, &r[2].t));
  ck_assert_int_eq(bat_batcher_submit(b, &r[2].t, NULL), TD_OK); /* waits behind the gate */
  req_init(&r[3], &f, 3, 1, 3, 3.0f, 0.5f);
  ck_assert(!bat_batcher_try_run_here(b, &r[3].t));
  ck_assert_int_eq(bat_batcher_submit(b, &r[3].t, NULL), TD_OK);
  gate_release(&g);
  wait_done(3);
  req_check(&r[2]);
  req_check(&r[3]);
  bat_batcher_destroy(b);
  uv_sem_destroy(&g.open);
  /* A timeout to wait for, or padding to add: no. */
  p = params(8, 1000, 1);
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  req_init(&r[4], &f, 4, 1, 3, 3.0f, 0.5f);
  ck_assert(!bat_batcher_try_run_here(b, &r[4].t));
  bat_batcher_destroy(b);
  p = params(8, 0, 1);
  p.n_allowed_batch_sizes = 2;
  p.allowed_batch_sizes[0] = 2;
  p.allowed_batch_sizes[1] = 8;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  req_init(&r[5], &f, 5, 1, 3, 3.0f, 0.5f);
  ck_assert(!bat_batcher_try_run_here(b, &r[5].t));
  bat_batcher_destroy(b);
  for (int i = 0; i < 6; i++) req_free(&r[i]);
  bat_queue_destroy(q);
  fixture_free(&f);
}
END_TEST

/* y = Identity(x) over strings: string inputs merge, string outputs split
 * back per task; a task with string outputs is never split across batches
 * (larger than a batch, it runs by itself). */
typedef struct sreq {
  bat_task t;
  eng_tensor in, out;
  int rows;
  atomic_int done;
} sreq;

static void sreq_done(bat_task *t) {
  sreq *r = t->user;
  atomic_store(&r->done, 1);
  uv_mutex_lock(&done_mu);
  atomic_fetch_add(&n_done, 1);
  uv_cond_broadcast(&done_cv);
  uv_mutex_unlock(&done_mu);
}

static void srow(char *buf, size_t cap, int id, int r, int e) {
  /* Lengths differ per element, and one is empty. */
  if (id == 1 && r == 0 && e == 1)
    buf[0] = 0;
  else
    snprintf(buf, cap, "task%d-row%d-%.*s", id, r, e + 1, "xyz");
}

static void sreq_init(sreq *q, ldr_signature *sig, int id, int rows) {
  memset(q, 0, sizeof *q);
  q->rows = rows;
  eng_shape s = {.rank = 2, .dim = {rows, 2}};
  size_t lens[64] = {0};
  char buf[64];
  for (int r = 0; r < rows; r++)
    for (int e = 0; e < 2; e++) {
      srow(buf, sizeof buf, id, r, e);
      lens[r * 2 + e] = strlen(buf);
    }
  ck_assert_int_eq(eng_tensor_alloc_strings(&q->in, &s, lens, NULL), TD_OK);
  for (int r = 0; r < rows; r++)
    for (int e = 0; e < 2; e++) {
      srow(buf, sizeof buf, id, r, e);
      memcpy(eng_tensor_str_bytes(&q->in, r * 2 + e), buf, lens[r * 2 + e]);
    }
  q->t = (bat_task){.sig = sig, .inputs = &q->in, .outputs = &q->out, .done = sreq_done, .user = q};
}

static void sreq_check(sreq *q, int id) {
  ck_assert_msg(q->t.code == TD_OK, "task %d failed: %s", id, q->t.err.msg);
  ck_assert_int_eq(q->out.dtype, ENG_DT_STRING);
  ck_assert_int_eq(q->out.shape.rank, 2);
  ck_assert_int_eq(q->out.shape.dim[0], q->rows);
  ck_assert_int_eq(q->out.shape.dim[1], 2);
  const eng_str *o = eng_tensor_strs(&q->out);
  char buf[64];
  for (int r = 0; r < q->rows; r++)
    for (int e = 0; e < 2; e++) {
      srow(buf, sizeof buf, id, r, e);
      ck_assert_uint_eq(o[r * 2 + e].len, strlen(buf));
      ck_assert(!memcmp(o[r * 2 + e].data, buf, strlen(buf)));
    }
}

START_TEST(test_string_tensors_merge_and_split_back) {
  eng_graph *gr = eng_graph_create();
  int x = eng_graph_add_node(gr, "x", "Placeholder", NULL);
  eng_graph_node(gr, x)->n_out = 1;
  eng_attr *dt = eng_graph_add_attr(gr, x, "dtype");
  dt->kind = ENG_ATTR_TYPE;
  dt->type = ENG_DT_STRING;
  int y = eng_graph_add_node(gr, "y", "Identity", NULL);
  eng_graph_node(gr, y)->n_out = 1;
  eng_graph_add_input(gr, y, (eng_edge){x, 0}, NULL);
  fixture f;
  ck_assert_int_eq(eng_model_create(gr, NULL, NULL, &f.model, NULL), TD_OK);
  f.in_info = (ldr_tensor_info){.alias = "x", .name = "x:0", .dtype = ENG_DT_STRING,
                                .shape = eng_shape_unknown()};
  f.out_info = (ldr_tensor_info){.alias = "y", .name = "y:0", .dtype = ENG_DT_STRING,
                                 .shape = eng_shape_unknown()};
  f.sig = (ldr_signature){.key = "serving_default", .n_inputs = 1, .inputs = &f.in_info,
                          .n_outputs = 1, .outputs = &f.out_info};
  const char *in[] = {"x:0"}, *out[] = {"y:0"};
  td_err err;
  ck_assert_int_eq(eng_plan_create(f.model, 1, in, 1, out, 0, NULL, &f.sig.plan, &err), TD_OK);

  bat_queue *q;
  ck_assert_int_eq(bat_queue_create(1, 64, &q, NULL), TD_OK);
  cfg_batching p = params(8, 0, 1);
  p.n_allowed_batch_sizes = 2;
  p.allowed_batch_sizes[0] = 4;
  p.allowed_batch_sizes[1] = 8;
  bat_batcher *b;
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  gate g;
  gate_hold(&g, q, &f);
  sreq r[4];
  int rows[4] = {1, 2, 3, 5};
  for (int i = 0; i < 3; i++) {
    sreq_init(&r[i], &f.sig, i, rows[i]);
    ck_assert_int_eq(bat_batcher_submit(b, &r[i].t, NULL), TD_OK);
    if (i == 0) wait_batches(b, 1); /* r[0]'s batch is waiting behind the gate */
  }
  /* 5 rows do not fit the 3 left in the open batch: a batch of their own,
   * not split. */
  sreq_init(&r[3], &f.sig, 3, rows[3]);
  ck_assert_int_eq(bat_batcher_submit(b, &r[3].t, NULL), TD_OK);
  gate_release(&g);
  wait_done(4);
  for (int i = 0; i < 4; i++) sreq_check(&r[i], i);
  bat_batcher_stats st;
  bat_batcher_get_stats(b, &st);
  ck_assert_uint_eq(st.batches, 3);               /* {r0}, {r1, r2}, {r3} */
  ck_assert_uint_eq(st.rows, 11);
  ck_assert_uint_eq(st.padding_rows, 3 + 3 + 3); /* 1 -> 4, 5 -> 8, 5 -> 8 */
  /* Larger than a batch run (splitting on): runs unbatched, whole. */
  sreq big;
  sreq_init(&big, &f.sig, 9, 12);
  p = params(16, 0, 1);
  p.enable_large_batch_splitting = true;
  p.max_execution_batch_size = 8;
  bat_batcher_destroy(b);
  ck_assert_int_eq(bat_batcher_create(&p, q, NULL, NULL, &b, NULL), TD_OK);
  ck_assert_int_eq(bat_batcher_submit(b, &big.t, NULL), TD_OK);
  wait_done(5);
  sreq_check(&big, 9);
  bat_batcher_destroy(b);
  bat_queue_destroy(q);
  for (int i = 0; i < 4; i++) {
    eng_tensor_release(&r[i].in);
    eng_tensor_release(&r[i].out);
  }
  eng_tensor_release(&big.in);
  eng_tensor_release(&big.out);
  uv_sem_destroy(&g.open);
  fixture_free(&f);
}
END_TEST

int main(void) {
  Suite *s = suite_create("bat_batcher");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, test_concurrent_clients_get_their_own_answers);
  tcase_add_test(tc, test_padding_to_allowed_sizes);
  tcase_add_test(tc, test_large_requests_split_or_rejected);
  tcase_add_test(tc, test_shapes_and_signatures_never_mix);
  tcase_add_test(tc, test_full_queue_is_rejected_at_once);
  tcase_add_test(tc, test_timeout_gathers_and_destroy_flushes);
  tcase_add_test(tc, test_expired_tasks_are_dropped_from_their_batch);
  tcase_add_test(tc, test_per_model_parameters_and_queue_timeout);
  tcase_add_test(tc, test_invalid_tasks_and_params);
  tcase_add_test(tc, test_idle_batcher_runs_a_lone_request_inline);
  tcase_add_test(tc, test_string_tensors_merge_and_split_back);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
