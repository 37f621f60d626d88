/* eng_model: plans over graphs built by hand with the eng_graph API.
 *
 * Covers arithmetic with broadcasting in every numeric dtype the kernels
 * take, Placeholder feed checks, TensorFlow's unfed-placeholder error,
 * pruning (unknown ops outside the needed subgraph, feeds that cut the
 * graph), control dependencies, cycles, TF1 ref variables and TF2 resource
 * variables, function inlining (StatefulPartitionedCall, direct calls,
 * nesting, control returns, recursion) and concurrent runs of one plan. */
#include <check.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_graph.h"
#include "eng_model.h"
#include "eng_pool.h"
#include "td_opcase.h"
#include "td_testcheck.h"

/* --- graph building ------------------------------------------------------ */

/* Adds a node with n_out outputs; the variadic list (NULL-terminated) holds
 * its inputs as "node[:i]" or "^node". */
static void set_type(eng_graph *g, int id, const char *name, eng_dtype dt) {
  eng_attr *a = eng_graph_add_attr(g, id, name);
  a->kind = ENG_ATTR_TYPE;
  a->type = dt;
}

static void set_int(eng_graph *g, int id, const char *name, int64_t v) {
  eng_attr *a = eng_graph_add_attr(g, id, name);
  a->kind = ENG_ATTR_I;
  a->i = v;
}

static void set_str(eng_graph *g, int id, const char *name, const char *s) {
  eng_attr *a = eng_graph_add_attr(g, id, name);
  a->kind = ENG_ATTR_S;
  a->s.data = strdup(s);
  a->s.len = strlen(s);
}

static void set_func(eng_graph *g, int id, const char *name, const char *fn) {
  eng_attr *a = eng_graph_add_attr(g, id, name);
  a->kind = ENG_ATTR_FUNC;
  a->func = strdup(fn);
}

static eng_shape shape(int rank, const int64_t *dims) { return eng_shape_make(rank, dims); }

/* A tensor of dtype dt filled from doubles. */
static eng_tensor tensor(eng_dtype dt, int rank, const int64_t *dims, const double *v) {
  eng_shape s = shape(rank, dims);
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc(&t, dt, &s, NULL), TD_OK);
  int64_t n = eng_tensor_numel(&t);
  for (int64_t i = 0; i < n; i++) switch (dt) {
      case ENG_DT_FLOAT:
        ((float *)eng_tensor_data(&t))[i] = (float)v[i];
        break;
      case ENG_DT_DOUBLE:
        ((double *)eng_tensor_data(&t))[i] = v[i];
        break;
      case ENG_DT_INT32:
        ((int32_t *)eng_tensor_data(&t))[i] = (int32_t)v[i];
        break;
      case ENG_DT_INT64:
        ((int64_t *)eng_tensor_data(&t))[i] = (int64_t)v[i];
        break;
      default:
        ck_abort_msg("dtype %d", dt);
    }
  return t;
}

static double elem(const eng_tensor *t, int64_t i) {
  switch (t->dtype) {
    case ENG_DT_FLOAT:
      return ((float *)eng_tensor_data(t))[i];
    case ENG_DT_DOUBLE:
      return ((double *)eng_tensor_data(t))[i];
    case ENG_DT_INT32:
      return ((int32_t *)eng_tensor_data(t))[i];
    case ENG_DT_INT64:
      return (double)((int64_t *)eng_tensor_data(t))[i];
    default:
      ck_abort_msg("dtype %d", t->dtype);
  }
  return 0;
}

/* Checks dtype, shape and values (exactly: the test values are all
 * representable in every dtype). */
static void expect(const eng_tensor *t, eng_dtype dt, int rank, const int64_t *dims,
                   const double *v) {
  ck_assert_ptr_nonnull(t->buf);
  ck_assert_int_eq(t->dtype, dt);
  eng_shape s = shape(rank, dims);
  char a[64], b[64];
  ck_assert_msg(eng_shape_equal(&t->shape, &s), "shape %s, want %s",
                eng_shape_str(&t->shape, a, sizeof a), eng_shape_str(&s, b, sizeof b));
  for (int64_t i = 0; i < eng_tensor_numel(t); i++)
    ck_assert_msg(elem(t, i) == v[i], "element %lld: %g, want %g", (long long)i, elem(t, i), v[i]);
}

static int cnst(eng_graph *g, const char *name, eng_dtype dt, int rank, const int64_t *dims,
                const double *v) {
  int id = td_opcase_vnode(g, name, "Const", 1, NULL);
  set_type(g, id, "dtype", dt);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  a->tensor = tensor(dt, rank, dims, v);
  return id;
}

static int placeholder(eng_graph *g, const char *name, eng_dtype dt, int rank,
                       const int64_t *dims) {
  int id = td_opcase_vnode(g, name, "Placeholder", 1, NULL);
  set_type(g, id, "dtype", dt);
  if (rank >= -1) {
    eng_attr *a = eng_graph_add_attr(g, id, "shape");
    a->kind = ENG_ATTR_SHAPE;
    a->shape = rank < 0 ? eng_shape_unknown() : shape(rank, dims);
  }
  return id;
}

static eng_model *model(eng_graph *g, eng_library *lib) {
  eng_model *m = NULL;
  td_err err;
  td_err_clear(&err);
  ck_ok(eng_model_create(g, lib, NULL, &m, &err), err);
  ck_assert_ptr_nonnull(m);
  return m;
}

static eng_plan *plan(eng_model *m, int n_in, const char *const *in, int n_out,
                      const char *const *out) {
  eng_plan *p = NULL;
  td_err err;
  td_err_clear(&err);
  ck_ok(eng_plan_create(m, n_in, in, n_out, out, 0, NULL, &p, &err), err);
  return p;
}

static void release_all(eng_tensor *t, int n) {
  for (int i = 0; i < n; i++) eng_tensor_release(&t[i]);
}

/* --- arithmetic ------------------------------------------------------------ */

/* x[2,3] * c[3]; col[2,1] + row[1,3]; (x*c) + scalar; x - scalar; with the
 * placeholder fed in dtype dt. */
static void arithmetic(eng_dtype dt) {
  eng_graph *g = eng_graph_create();
  const int64_t d23[] = {2, 3}, d3[] = {3}, d21[] = {2, 1}, d13[] = {1, 3};
  placeholder(g, "x", dt, 2, (int64_t[]){-1, 3});
  cnst(g, "c", dt, 1, d3, (double[]){1, 2, -3});
  td_opcase_vnode(g, "m", "Mul", 1, "x", "c", NULL);
  cnst(g, "col", dt, 2, d21, (double[]){10, 20});
  cnst(g, "row", dt, 2, d13, (double[]){1, 2, 3});
  td_opcase_vnode(g, "s", "AddV2", 1, "col", "row:0", NULL);
  cnst(g, "k", dt, 0, NULL, (double[]){100});
  td_opcase_vnode(g, "t", "AddV2", 1, "m:0", "k", NULL);
  td_opcase_vnode(g, "u", "Sub", 1, "k", "x", NULL);
  td_opcase_vnode(g, "v", "Add", 1, "row", "col", NULL);
  td_opcase_vnode(g, "sq", "Mul", 1, "x", "x", NULL);
  eng_model *mo = model(g, NULL);
  const char *in[] = {"x:0"};
  const char *out[] = {"m:0", "s:0", "t", "u:0", "v:0", "sq:0"};
  eng_plan *p = plan(mo, 1, in, 6, out);
  eng_shape decl = eng_plan_input_shape(p, 0);
  ck_assert_int_eq(decl.rank, 2);
  ck_assert_int_eq(decl.dim[0], -1);
  ck_assert_int_eq(decl.dim[1], 3);

  eng_tensor x = tensor(dt, 2, d23, (double[]){1, 2, 3, 4, 5, 6});
  eng_tensor o[6] = {0};
  td_err err;
  td_err_clear(&err);
  for (int rep = 0; rep < 3; rep++) { /* plans are reusable */
    ck_ok(eng_plan_run(p, &x, o, &err), err);
    expect(&o[0], dt, 2, d23, (double[]){1, 4, -9, 4, 10, -18});
    expect(&o[1], dt, 2, d23, (double[]){11, 12, 13, 21, 22, 23});
    expect(&o[2], dt, 2, d23, (double[]){101, 104, 91, 104, 110, 82});
    expect(&o[3], dt, 2, d23, (double[]){99, 98, 97, 96, 95, 94});
    expect(&o[4], dt, 2, d23, (double[]){11, 12, 13, 21, 22, 23});
    expect(&o[5], dt, 2, d23, (double[]){1, 4, 9, 16, 25, 36});
    release_all(o, 6);
  }
  /* The caller's input is untouched. */
  expect(&x, dt, 2, d23, (double[]){1, 2, 3, 4, 5, 6});
  eng_tensor_release(&x);

  /* Broadcasting a batch of one and of zero rows. */
  const int64_t d13b[] = {1, 3}, d03[] = {0, 3};
  x = tensor(dt, 2, d13b, (double[]){-1, 0, 1});
  ck_ok(eng_plan_run(p, &x, o, &err), err);
  expect(&o[0], dt, 2, d13b, (double[]){-1, 0, -3});
  release_all(o, 6);
  eng_tensor_release(&x);
  x = tensor(dt, 2, d03, NULL);
  ck_ok(eng_plan_run(p, &x, o, &err), err);
  ck_assert_int_eq(o[0].shape.rank, 2);
  ck_assert_int_eq(o[0].shape.dim[0], 0);
  ck_assert_int_eq(o[0].shape.dim[1], 3);
  release_all(o, 6);
  eng_tensor_release(&x);

  eng_plan_destroy(p);
  eng_model_destroy(mo);
}

START_TEST(arith_float) { arithmetic(ENG_DT_FLOAT); }
END_TEST
START_TEST(arith_double) { arithmetic(ENG_DT_DOUBLE); }
END_TEST
START_TEST(arith_int32) { arithmetic(ENG_DT_INT32); }
END_TEST
START_TEST(arith_int64) { arithmetic(ENG_DT_INT64); }
END_TEST

START_TEST(arith_scalars_and_rank3) {
  eng_graph *g = eng_graph_create();
  cnst(g, "a", ENG_DT_FLOAT, 0, NULL, (double[]){1.5});
  cnst(g, "b", ENG_DT_FLOAT, 0, NULL, (double[]){0.25});
  td_opcase_vnode(g, "ab", "Mul", 1, "a", "b", NULL);
  /* [2,1,3] * [4,1] -> [2,4,3] */
  const int64_t d213[] = {2, 1, 3}, d41[] = {4, 1}, d243[] = {2, 4, 3};
  cnst(g, "p", ENG_DT_FLOAT, 3, d213, (double[]){1, 2, 3, 4, 5, 6});
  cnst(g, "q", ENG_DT_FLOAT, 2, d41, (double[]){1, 10, 100, 1000});
  td_opcase_vnode(g, "pq", "Mul", 1, "p", "q", NULL);
  td_opcase_vnode(g, "mx", "Maximum", 1, "a", "p", NULL);
  td_opcase_vnode(g, "dv", "RealDiv", 1, "p", "b", NULL);
  eng_model *m = model(g, NULL);
  const char *out[] = {"ab", "pq", "mx", "dv"};
  eng_plan *p = plan(m, 0, NULL, 4, out);
  eng_tensor o[4] = {0};
  td_err err;
  ck_ok(eng_plan_run(p, NULL, o, &err), err);
  expect(&o[0], ENG_DT_FLOAT, 0, NULL, (double[]){0.375});
  double want[24];
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++)
      for (int k = 0; k < 3; k++)
        want[(i * 4 + j) * 3 + k] = (i * 3 + k + 1) * (double[]){1, 10, 100, 1000}[j];
  expect(&o[1], ENG_DT_FLOAT, 3, d243, want);
  expect(&o[2], ENG_DT_FLOAT, 3, d213, (double[]){1.5, 2, 3, 4, 5, 6});
  expect(&o[3], ENG_DT_FLOAT, 3, d213, (double[]){4, 8, 12, 16, 20, 24});
  release_all(o, 4);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

START_TEST(arith_errors) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  placeholder(g, "y", ENG_DT_FLOAT, -1, NULL);
  placeholder(g, "i", ENG_DT_INT32, -1, NULL);
  td_opcase_vnode(g, "xy", "AddV2", 1, "x", "y", NULL);
  td_opcase_vnode(g, "xi", "Mul", 1, "x", "i", NULL);
  eng_model *m = model(g, NULL);
  const char *in[] = {"x", "y"};
  const char *out[] = {"xy"};
  eng_plan *p = plan(m, 2, in, 1, out);
  eng_tensor t[2] = {tensor(ENG_DT_FLOAT, 1, (int64_t[]){3}, (double[]){1, 2, 3}),
                     tensor(ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){1, 2})};
  eng_tensor o = {0};
  td_err err;
  td_err_clear(&err);
  ck_err(eng_plan_run(p, t, &o, &err), err, TD_INVALID_ARGUMENT, "Incompatible shapes");
  ck_assert_msg(strstr(err.msg, "xy"), "message '%s' lacks the node", err.msg);
  ck_assert_ptr_null(o.buf);
  eng_plan_destroy(p);
  release_all(t, 2);

  const char *in2[] = {"x", "i"};
  const char *out2[] = {"xi"};
  p = plan(m, 2, in2, 1, out2);
  t[0] = tensor(ENG_DT_FLOAT, 1, (int64_t[]){1}, (double[]){1});
  t[1] = tensor(ENG_DT_INT32, 1, (int64_t[]){1}, (double[]){1});
  td_err_clear(&err);
  ck_err(eng_plan_run(p, t, &o, &err), err, TD_INVALID_ARGUMENT, "xi");
  release_all(t, 2);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

/* --- feeds ---------------------------------------------------------------- */

START_TEST(placeholder_feed_checks) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "inp", ENG_DT_FLOAT, 2, (int64_t[]){-1, 3});
  placeholder(g, "sc", ENG_DT_INT64, 0, NULL);
  td_opcase_vnode(g, "y", "Identity", 1, "inp", NULL);
  td_opcase_vnode(g, "z", "Identity", 1, "sc", NULL);
  eng_model *m = model(g, NULL);
  const char *in[] = {"inp:0", "sc"};
  const char *out[] = {"y:0", "z:0"};
  eng_plan *p = plan(m, 2, in, 2, out);
  eng_tensor o[2] = {0};
  td_err err;

  eng_tensor good[2] = {tensor(ENG_DT_FLOAT, 2, (int64_t[]){4, 3}, (double[12]){0}),
                        tensor(ENG_DT_INT64, 0, NULL, (double[]){5})};
  ck_ok(eng_plan_run(p, good, o, &err), err);
  ck_assert_ptr_eq(o[0].buf, good[0].buf); /* identities pass the buffer through */
  expect(&o[1], ENG_DT_INT64, 0, NULL, (double[]){5});
  release_all(o, 2);

  /* Wrong dtype. */
  eng_tensor bad = tensor(ENG_DT_DOUBLE, 2, (int64_t[]){4, 3}, (double[12]){0});
  eng_tensor feeds[2] = {bad, good[1]};
  td_err_clear(&err);
  ck_err(eng_plan_run(p, feeds, o, &err), err, TD_INVALID_ARGUMENT, "inp");
  ck_assert_msg(strstr(err.msg, "float") && strstr(err.msg, "double"), "message: %s", err.msg);
  ck_assert_ptr_null(o[0].buf);
  eng_tensor_release(&bad);

  /* Wrong dim, wrong rank, rank 0 for a vector and vice versa. */
  const int64_t dims[][3] = {{4, 2, 0}, {12, 0, 0}, {4, 3, 1}};
  const int ranks[] = {2, 1, 3};
  for (int k = 0; k < 3; k++) {
    bad = tensor(ENG_DT_FLOAT, ranks[k], dims[k], (double[12]){0});
    feeds[0] = bad;
    td_err_clear(&err);
    ck_err(eng_plan_run(p, feeds, o, &err), err, TD_INVALID_ARGUMENT, "inp");
    ck_assert_msg(strstr(err.msg, "[?,3]"), "message: %s", err.msg);
    eng_tensor_release(&bad);
  }
  bad = tensor(ENG_DT_INT64, 1, (int64_t[]){1}, (double[]){5});
  feeds[0] = good[0];
  feeds[1] = bad;
  td_err_clear(&err);
  ck_err(eng_plan_run(p, feeds, o, &err), err, TD_INVALID_ARGUMENT, "sc");
  eng_tensor_release(&bad);
  release_all(good, 2);
  eng_plan_destroy(p);

  /* Unknown inputs and outputs fail at plan creation. */
  const char *nope[] = {"nope:0"};
  td_err_clear(&err);
  ck_err(eng_plan_create(m, 1, nope, 1, out, 0, NULL, &p, &err), err, TD_NOT_FOUND, "nope");
  ck_err(eng_plan_create(m, 0, NULL, 1, nope, 0, NULL, &p, &err), err, TD_NOT_FOUND, "nope");
  const char *y5[] = {"y:5"};
  ck_err(eng_plan_create(m, 0, NULL, 1, y5, 0, NULL, &p, &err), err, TD_INVALID_ARGUMENT, "y:5");
  const char *tg[] = {"ghost"};
  ck_err(eng_plan_create(m, 0, NULL, 0, NULL, 1, tg, &p, &err), err, TD_NOT_FOUND, "ghost");
  eng_model_destroy(m);
}
END_TEST

START_TEST(unfed_placeholder) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, 1, (int64_t[]){-1});
  cnst(g, "two", ENG_DT_FLOAT, 0, NULL, (double[]){2});
  td_opcase_vnode(g, "y", "Mul", 1, "x", "two", NULL);
  eng_model *m = model(g, NULL);
  const char *out[] = {"y:0"};
  eng_plan *p = plan(m, 0, NULL, 1, out);
  eng_tensor o = {0};
  td_err err;
  td_err_clear(&err);
  ck_err(eng_plan_run(p, NULL, &o, &err), err, TD_INVALID_ARGUMENT,
         "You must feed a value for placeholder tensor 'x'");
  ck_assert_ptr_null(o.buf);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

START_TEST(fetch_fed_and_const_feed) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, 1, (int64_t[]){-1});
  cnst(g, "c", ENG_DT_FLOAT, 0, NULL, (double[]){3});
  td_opcase_vnode(g, "y", "Mul", 1, "x", "c", NULL);
  eng_model *m = model(g, NULL);
  /* Feeding a Const replaces it (the loader feeds save/Const this way). */
  const char *in[] = {"x", "c:0"};
  const char *out[] = {"y", "x:0", "c"};
  eng_plan *p = plan(m, 2, in, 3, out);
  eng_tensor f[2] = {tensor(ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){1, 2}),
                     tensor(ENG_DT_FLOAT, 0, NULL, (double[]){-1})};
  eng_tensor o[3] = {0};
  td_err err;
  ck_ok(eng_plan_run(p, f, o, &err), err);
  expect(&o[0], ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){-1, -2});
  ck_assert_ptr_eq(o[1].buf, f[0].buf);
  ck_assert_ptr_eq(o[2].buf, f[1].buf);
  release_all(o, 3);
  release_all(f, 2);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

START_TEST(wide_nodes_and_repeated_fetches) {
  /* IdentityN over 20 tensors: more inputs and outputs than the run loop's
   * on-stack arrays hold. */
  enum { W = 20 };
  eng_graph *g = eng_graph_create();
  char name[16], ref[24];
  for (int i = 0; i < W; i++) {
    snprintf(name, sizeof name, "c%d", i);
    cnst(g, name, ENG_DT_INT64, 0, NULL, (double[]){i * 3});
  }
  int id = td_opcase_vnode(g, "wide", "IdentityN", W, NULL);
  for (int i = 0; i < W; i++) {
    snprintf(ref, sizeof ref, "c%d", i);
    eng_edge e;
    ck_assert_int_eq(eng_graph_parse_edge(g, ref, &e, NULL), TD_OK);
    ck_assert_int_eq(eng_graph_add_input(g, id, e, NULL), TD_OK);
  }
  td_opcase_vnode(g, "sum", "AddV2", 1, "wide:19", "wide:19", NULL);
  eng_model *m = model(g, NULL);
  const char *out[] = {"wide:0", "wide:17", "wide:19", "sum", "wide:17", "sum:0"};
  eng_plan *p = plan(m, 0, NULL, 6, out);
  eng_tensor o[6] = {0};
  td_err err;
  for (int rep = 0; rep < 2; rep++) {
    ck_ok(eng_plan_run(p, NULL, o, &err), err);
    const double want[] = {0, 51, 57, 114, 51, 114};
    for (int i = 0; i < 6; i++) expect(&o[i], ENG_DT_INT64, 0, NULL, &want[i]);
    ck_assert_ptr_eq(o[1].buf, o[4].buf);
    release_all(o, 6);
  }
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

/* --- pruning --------------------------------------------------------------- */

START_TEST(unknown_op_needed) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  td_opcase_vnode(g, "weird", "FancyOp", 1, "x", NULL);
  td_opcase_vnode(g, "y", "Identity", 1, "weird", NULL);
  eng_model *m = model(g, NULL);
  const char *in[] = {"x"};
  const char *out[] = {"y"};
  eng_plan *p = (eng_plan *)0x1;
  td_err err;
  td_err_clear(&err);
  ck_err(eng_plan_create(m, 1, in, 1, out, 0, NULL, &p, &err), err, TD_UNIMPLEMENTED, "FancyOp");
  ck_assert_msg(strstr(err.msg, "'weird'"), "message '%s' lacks the node", err.msg);
  ck_assert_ptr_eq(p, (eng_plan *)0x1); /* out-param untouched */
  /* As a target too. */
  const char *tg[] = {"weird"};
  td_err_clear(&err);
  ck_err(eng_plan_create(m, 1, in, 0, NULL, 1, tg, &p, &err), err, TD_UNIMPLEMENTED, "weird");
  eng_model_destroy(m);
}
END_TEST

/* The compiler's plan-internal ops (ENG_OP_PLAN_ONLY) are in the op table
 * but are no graph's ops: a node naming one is an unsupported op. */
START_TEST(plan_internal_op_in_graph) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  td_opcase_vnode(g, "v", "_PadView", 1, "x", NULL);
  eng_model *m = model(g, NULL);
  const char *in[] = {"x"};
  const char *out[] = {"v"};
  eng_plan *p = NULL;
  td_err err;
  td_err_clear(&err);
  ck_err(eng_plan_create(m, 1, in, 1, out, 0, NULL, &p, &err), err, TD_UNIMPLEMENTED, "_PadView");
  ck_assert_ptr_null(p);
  eng_model_destroy(m);
}
END_TEST

START_TEST(unknown_op_pruned) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  cnst(g, "c", ENG_DT_FLOAT, 0, NULL, (double[]){2});
  td_opcase_vnode(g, "save", "SaveV2", 0, "x", NULL);       /* never needed */
  td_opcase_vnode(g, "rnd", "RandomUniform", 1, "c", NULL); /* consumes c, not needed */
  td_opcase_vnode(g, "y", "Mul", 1, "x", "c", NULL);
  td_opcase_vnode(g, "z", "AddV2", 1, "rnd", "y", NULL); /* downstream of y, not needed */
  eng_model *m = model(g, NULL);
  const char *in[] = {"x"};
  const char *out[] = {"y"};
  eng_plan *p = plan(m, 1, in, 1, out);
  eng_tensor x = tensor(ENG_DT_FLOAT, 1, (int64_t[]){1}, (double[]){4}), o = {0};
  td_err err;
  ck_ok(eng_plan_run(p, &x, &o, &err), err);
  expect(&o, ENG_DT_FLOAT, 1, (int64_t[]){1}, (double[]){8});
  eng_tensor_release(&o);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

START_TEST(feed_cuts_graph) {
  /* x -> TensordNoSuchOp (unknown) -> feat -> y = feat * 0.5 + 2: feeding
   * feat:0 (as TF1 half_plus_two's "x:0") never runs the parser. */
  eng_graph *g = eng_graph_create();
  placeholder(g, "ser", ENG_DT_STRING, 1, (int64_t[]){-1});
  td_opcase_vnode(g, "parse", "TensordNoSuchOp", 2, "ser", NULL);
  td_opcase_vnode(g, "feat", "Identity", 1, "parse:1", NULL);
  cnst(g, "a", ENG_DT_FLOAT, 0, NULL, (double[]){0.5});
  cnst(g, "b", ENG_DT_FLOAT, 0, NULL, (double[]){2});
  td_opcase_vnode(g, "mul", "Mul", 1, "feat", "a", NULL);
  td_opcase_vnode(g, "y", "AddV2", 1, "mul", "b", NULL);
  eng_model *m = model(g, NULL);

  const char *in[] = {"feat:0"};
  const char *out[] = {"y:0"};
  eng_plan *p = plan(m, 1, in, 1, out);
  /* Not a Placeholder: no declared shape to check against. */
  ck_assert_int_eq(eng_plan_input_shape(p, 0).rank, -1);
  eng_tensor x = tensor(ENG_DT_FLOAT, 2, (int64_t[]){3, 1}, (double[]){1, 2, 5}), o = {0};
  td_err err;
  ck_ok(eng_plan_run(p, &x, &o, &err), err);
  expect(&o, ENG_DT_FLOAT, 2, (int64_t[]){3, 1}, (double[]){2.5, 3, 4.5});
  eng_tensor_release(&o);
  eng_tensor_release(&x);
  eng_plan_destroy(p);

  /* Feeding the unknown op's own output cuts it off as well. */
  const char *in2[] = {"parse:1"};
  p = plan(m, 1, in2, 1, out);
  x = tensor(ENG_DT_FLOAT, 1, (int64_t[]){1}, (double[]){0});
  ck_ok(eng_plan_run(p, &x, &o, &err), err);
  expect(&o, ENG_DT_FLOAT, 1, (int64_t[]){1}, (double[]){2});
  eng_tensor_release(&o);
  eng_tensor_release(&x);
  eng_plan_destroy(p);

  /* Feeding the other output of the parser does not: it must run. */
  const char *in3[] = {"parse:0"};
  td_err_clear(&err);
  ck_err(eng_plan_create(m, 1, in3, 1, out, 0, NULL, &p, &err), err, TD_UNIMPLEMENTED,
         "TensordNoSuchOp");
  eng_model_destroy(m);
}
END_TEST

/* --- variables and control dependencies -------------------------------------- */

static int var_handle(eng_graph *g, const char *name, const char *shared) {
  int id = td_opcase_vnode(g, name, "VarHandleOp", 1, NULL);
  set_type(g, id, "dtype", ENG_DT_FLOAT);
  set_str(g, id, "container", "");
  set_str(g, id, "shared_name", shared);
  return id;
}

START_TEST(control_deps_order) {
  /* Three writes to one variable chained by control edges, then a read
   * that depends on the last. Without ordering, the read would see an
   * earlier value or none. Node indices run against the required order. */
  eng_graph *g = eng_graph_create();
  var_handle(g, "v", "v");
  cnst(g, "c3", ENG_DT_FLOAT, 0, NULL, (double[]){3});
  cnst(g, "c2", ENG_DT_FLOAT, 0, NULL, (double[]){2});
  cnst(g, "c1", ENG_DT_FLOAT, 0, NULL, (double[]){1});
  td_opcase_vnode(g, "w1", "AssignVariableOp", 0, "v", "c1", NULL);
  td_opcase_vnode(g, "w2", "AssignVariableOp", 0, "v", "c2", "^w1", NULL);
  td_opcase_vnode(g, "w3", "AssignVariableOp", 0, "v", "c3", "^w2", NULL);
  td_opcase_vnode(g, "r", "ReadVariableOp", 1, "v", "^w3", NULL);
  td_opcase_vnode(g, "r_any", "ReadVariableOp", 1, "v", NULL);
  td_opcase_vnode(g, "done", "NoOp", 0, "^w3", NULL);
  eng_model *m = model(g, NULL);
  eng_tensor o = {0};
  td_err err;
  const char *out[] = {"r:0"};
  ck_ok(eng_model_run(m, 0, NULL, 1, out, &o, 0, NULL, &err), err);
  expect(&o, ENG_DT_FLOAT, 0, NULL, (double[]){3});
  eng_tensor_release(&o);

  /* Reset through a target chain, read through a separate plan. */
  eng_graph *g2 = eng_graph_create();
  var_handle(g2, "v", "v");
  cnst(g2, "c1", ENG_DT_FLOAT, 0, NULL, (double[]){1});
  cnst(g2, "c2", ENG_DT_FLOAT, 0, NULL, (double[]){2});
  td_opcase_vnode(g2, "w2", "AssignVariableOp", 0, "v", "c2", NULL);
  td_opcase_vnode(g2, "w1", "AssignVariableOp", 0, "v", "c1", "^w2", NULL);
  td_opcase_vnode(g2, "init", "NoOp", 0, "^w1", NULL);
  td_opcase_vnode(g2, "r", "ReadVariableOp", 1, "v", NULL);
  eng_model *m2 = model(g2, NULL);
  const char *tg[] = {"init"};
  ck_ok(eng_model_run(m2, 0, NULL, 0, NULL, NULL, 1, tg, &err), err);
  ck_ok(eng_model_run(m2, 0, NULL, 1, out, &o, 0, NULL, &err), err);
  expect(&o, ENG_DT_FLOAT, 0, NULL, (double[]){1});
  eng_tensor_release(&o);
  eng_model_destroy(m2);
  eng_model_destroy(m);
}
END_TEST

START_TEST(release_unserved_variables) {
  /* Two variables restored by the init chain (as a Keras export restores
   * each weight under two objects); the serving plan reads one. Releasing
   * frees the other's bytes only; the served one keeps serving, and a plan
   * built afterwards that reads the released one fails cleanly. */
  eng_graph *g = eng_graph_create();
  var_handle(g, "a", "a");
  var_handle(g, "b", "b");
  cnst(g, "ca", ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){1, 2});
  cnst(g, "cb", ENG_DT_FLOAT, 1, (int64_t[]){3}, (double[]){3, 4, 5});
  td_opcase_vnode(g, "wa", "AssignVariableOp", 0, "a", "ca", NULL);
  td_opcase_vnode(g, "wb", "AssignVariableOp", 0, "b", "cb", NULL);
  td_opcase_vnode(g, "init", "NoOp", 0, "^wa", "^wb", NULL);
  td_opcase_vnode(g, "ra", "ReadVariableOp", 1, "a", NULL);
  td_opcase_vnode(g, "rb", "ReadVariableOp", 1, "b", NULL);
  eng_model *m = model(g, NULL);
  td_err err;
  const char *tg[] = {"init"};
  ck_ok(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, tg, &err), err);
  /* No serving plan yet: both go. */
  ck_assert_uint_eq(eng_model_release_unserved(m), 5 * sizeof(float));
  /* Restored again: the release above dropped both. */
  ck_ok(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, tg, &err), err);
  eng_plan *p = NULL;
  const char *out[] = {"ra:0"};
  ck_ok(eng_plan_create(m, 0, NULL, 1, out, 0, NULL, &p, &err), err);
  ck_assert_uint_eq(eng_model_release_unserved(m), 3 * sizeof(float));
  eng_tensor o = {0};
  ck_ok(eng_plan_run(p, NULL, &o, &err), err);
  expect(&o, ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){1, 2});
  eng_tensor_release(&o);
  const char *outb[] = {"rb:0"};
  td_err_clear(&err);
  ck_err(eng_model_run(m, 0, NULL, 1, outb, &o, 0, NULL, &err), err, TD_FAILED_PRECONDITION,
         "uninitialized");
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

START_TEST(cycle_detected) {
  eng_graph *g = eng_graph_create();
  cnst(g, "c", ENG_DT_FLOAT, 0, NULL, (double[]){1});
  int a = td_opcase_vnode(g, "a", "AddV2", 1, "c", NULL);
  int b = td_opcase_vnode(g, "b", "Identity", 1, "a", NULL);
  ck_assert_int_eq(eng_graph_add_input(g, a, (eng_edge){b, 0}, NULL), TD_OK);
  td_opcase_vnode(g, "out", "Identity", 1, "b", NULL);
  /* A control-only cycle elsewhere. */
  int p = td_opcase_vnode(g, "p", "NoOp", 0, NULL);
  int q = td_opcase_vnode(g, "q", "NoOp", 0, "^p", NULL);
  ck_assert_int_eq(eng_graph_add_ctrl(g, p, q, NULL), TD_OK);
  td_opcase_vnode(g, "fine", "Identity", 1, "c", NULL);
  eng_model *m = model(g, NULL);
  eng_plan *pl = NULL;
  td_err err;
  const char *out[] = {"out"};
  td_err_clear(&err);
  ck_err(eng_plan_create(m, 0, NULL, 1, out, 0, NULL, &pl, &err), err, TD_INVALID_ARGUMENT,
         "cycle");
  ck_assert_ptr_null(pl);
  const char *tg[] = {"q"};
  td_err_clear(&err);
  ck_err(eng_plan_create(m, 0, NULL, 0, NULL, 1, tg, &pl, &err), err, TD_INVALID_ARGUMENT, "cycle");
  /* The cycle does not matter when it is not needed. */
  const char *fine[] = {"fine"};
  pl = plan(m, 0, NULL, 1, fine);
  eng_plan_destroy(pl);
  /* Nor when a feed cuts it. */
  const char *in[] = {"a:0"};
  pl = plan(m, 1, in, 1, out);
  eng_tensor x = tensor(ENG_DT_FLOAT, 0, NULL, (double[]){7}), o = {0};
  ck_ok(eng_plan_run(pl, &x, &o, &err), err);
  expect(&o, ENG_DT_FLOAT, 0, NULL, (double[]){7});
  eng_tensor_release(&o);
  eng_tensor_release(&x);
  eng_plan_destroy(pl);
  eng_model_destroy(m);
}
END_TEST

START_TEST(tf1_ref_variable) {
  /* VariableV2 v; v/Assign = Assign(v, init); v/read = Identity(v);
   * y = v/read * x. */
  eng_graph *g = eng_graph_create();
  int v = td_opcase_vnode(g, "v", "VariableV2", 1, NULL);
  set_type(g, v, "dtype", ENG_DT_FLOAT);
  set_str(g, v, "container", "");
  set_str(g, v, "shared_name", "");
  cnst(g, "init", ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){0.5, 4});
  cnst(g, "other", ENG_DT_FLOAT, 1, (int64_t[]){3}, (double[]){1, 2, 3});
  td_opcase_vnode(g, "v/Assign", "Assign", 1, "v", "init", NULL);
  td_opcase_vnode(g, "v/Assign_bad", "Assign", 1, "v", "other", NULL);
  td_opcase_vnode(g, "v/read", "Identity", 1, "v", NULL);
  placeholder(g, "x", ENG_DT_FLOAT, 1, (int64_t[]){-1});
  td_opcase_vnode(g, "y", "Mul", 1, "v/read", "x", NULL);
  td_opcase_vnode(g, "y2", "Mul", 1, "v", "x", NULL); /* an op reading the ref directly */
  eng_model *m = model(g, NULL);
  const char *in[] = {"x"};
  const char *out[] = {"y", "v:0", "y2"};
  eng_plan *p = plan(m, 1, in, 3, out);
  eng_tensor x = tensor(ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){2, 3}), o[3] = {0};
  td_err err;
  td_err_clear(&err);
  ck_err(eng_plan_run(p, &x, o, &err), err, TD_FAILED_PRECONDITION, "uninitialized");
  ck_assert_msg(strstr(err.msg, "v"), "message: %s", err.msg);
  for (int i = 0; i < 3; i++) ck_assert_ptr_null(o[i].buf);

  const char *tg[] = {"v/Assign"};
  ck_ok(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, tg, &err), err);
  ck_ok(eng_plan_run(p, &x, o, &err), err);
  expect(&o[0], ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){1, 12});
  /* Fetching the ref itself gives its value, not the handle. */
  ck_assert(!o[1].is_ref);
  expect(&o[1], ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){0.5, 4});
  expect(&o[2], ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){1, 12});
  release_all(o, 3);

  /* validate_shape (default true) refuses a reshaping Assign. */
  const char *bad[] = {"v/Assign_bad"};
  td_err_clear(&err);
  ck_err(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, bad, &err), err, TD_INVALID_ARGUMENT,
         "v/Assign_bad");
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

START_TEST(resource_variable) {
  eng_graph *g = eng_graph_create();
  var_handle(g, "w", "weights");
  var_handle(g, "w_alias", "weights"); /* same shared_name: same slot */
  var_handle(g, "u", "unset");
  cnst(g, "val", ENG_DT_FLOAT, 1, (int64_t[]){3}, (double[]){1, 2, 3});
  td_opcase_vnode(g, "assign", "AssignVariableOp", 0, "w", "val", NULL);
  int r = td_opcase_vnode(g, "read", "ReadVariableOp", 1, "w_alias", NULL);
  set_type(g, r, "dtype", ENG_DT_FLOAT);
  int ru = td_opcase_vnode(g, "read_u", "ReadVariableOp", 1, "u", NULL);
  set_type(g, ru, "dtype", ENG_DT_FLOAT);
  int rb = td_opcase_vnode(g, "read_badtype", "ReadVariableOp", 1, "w", NULL);
  set_type(g, rb, "dtype", ENG_DT_INT32);
  td_opcase_vnode(g, "init_q", "VarIsInitializedOp", 1, "u", NULL);
  eng_model *m = model(g, NULL);
  td_err err;
  eng_tensor o = {0};
  const char *out[] = {"read"};
  td_err_clear(&err);
  ck_err(eng_model_run(m, 0, NULL, 1, out, &o, 0, NULL, &err), err, TD_FAILED_PRECONDITION,
         "weights");
  const char *tg[] = {"assign"};
  ck_ok(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, tg, &err), err);
  ck_ok(eng_model_run(m, 0, NULL, 1, out, &o, 0, NULL, &err), err);
  expect(&o, ENG_DT_FLOAT, 1, (int64_t[]){3}, (double[]){1, 2, 3});
  eng_tensor_release(&o);

  const char *out_u[] = {"read_u"};
  td_err_clear(&err);
  ck_err(eng_model_run(m, 0, NULL, 1, out_u, &o, 0, NULL, &err), err, TD_FAILED_PRECONDITION,
         "unset");
  ck_assert_ptr_null(o.buf);
  const char *out_b[] = {"read_badtype"};
  td_err_clear(&err);
  ck_err(eng_model_run(m, 0, NULL, 1, out_b, &o, 0, NULL, &err), err, TD_INVALID_ARGUMENT, "int32");
  const char *out_q[] = {"init_q"};
  ck_ok(eng_model_run(m, 0, NULL, 1, out_q, &o, 0, NULL, &err), err);
  ck_assert_int_eq(o.dtype, ENG_DT_BOOL);
  ck_assert(!*(bool *)eng_tensor_data(&o));
  eng_tensor_release(&o);
  eng_model_destroy(m);
}
END_TEST

/* --- restore through the io callbacks ---------------------------------------- */

static td_code fake_restore(void *ctx, const char *prefix, const char *key, eng_dtype dtype,
                            eng_tensor *out, td_err *err) {
  int *calls = ctx;
  (*calls)++;
  if (strcmp(prefix, "/ckpt/variables"))
    return td_err_set(err, TD_INVALID_ARGUMENT, "prefix %s", prefix);
  if (strcmp(key, "w")) return td_err_set(err, TD_NOT_FOUND, "Key %s not found in checkpoint", key);
  eng_shape s = {.rank = 1, .dim = {2}};
  td_code rc = eng_tensor_alloc(out, dtype, &s, err);
  if (!rc) ((float *)eng_tensor_data(out))[1] = 42;
  return rc;
}

static int string_const(eng_graph *g, const char *name, int n, const char *const *v, bool vec) {
  int id = td_opcase_vnode(g, name, "Const", 1, NULL);
  set_type(g, id, "dtype", ENG_DT_STRING);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  size_t *lens = malloc((size_t)n * sizeof *lens);
  for (int i = 0; i < n; i++) lens[i] = strlen(v[i]);
  eng_shape s = vec ? (eng_shape){.rank = 1, .dim = {n}} : eng_shape_scalar();
  ck_assert_int_eq(eng_tensor_alloc_strings(&a->tensor, &s, lens, NULL), TD_OK);
  for (int i = 0; i < n; i++) memcpy(eng_tensor_str_bytes(&a->tensor, i), v[i], lens[i]);
  free(lens);
  return id;
}

START_TEST(restore_v2) {
  eng_graph *g = eng_graph_create();
  string_const(g, "save/Const", 1, (const char *[]){"model"}, false);
  string_const(g, "names", 1, (const char *[]){"w"}, true);
  string_const(g, "missing", 1, (const char *[]){"b"}, true);
  string_const(g, "slices", 1, (const char *[]){""}, true);
  int rv = td_opcase_vnode(g, "RestoreV2", "RestoreV2", 1, "save/Const", "names", "slices", NULL);
  eng_attr *a = eng_graph_add_attr(g, rv, "dtypes");
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_TYPE;
  a->n = 1;
  a->ltype = malloc(sizeof *a->ltype);
  a->ltype[0] = ENG_DT_FLOAT;
  int rb = td_opcase_vnode(g, "RestoreB", "RestoreV2", 1, "save/Const", "missing", "slices", NULL);
  eng_graph_copy_attr(g, rb, eng_node_attr(eng_graph_node(g, rv), "dtypes"), NULL);
  var_handle(g, "w", "w");
  var_handle(g, "b", "b");
  td_opcase_vnode(g, "assign_w", "AssignVariableOp", 0, "w", "RestoreV2", NULL);
  td_opcase_vnode(g, "assign_b", "AssignVariableOp", 0, "b", "RestoreB", NULL);
  td_opcase_vnode(g, "restore_all", "NoOp", 0, "^assign_w", NULL);
  td_opcase_vnode(g, "restore_b", "NoOp", 0, "^assign_b", NULL);
  td_opcase_vnode(g, "read", "ReadVariableOp", 1, "w", NULL);
  int calls = 0;
  eng_io io = {.restore = fake_restore, .ctx = &calls};
  eng_model *m = NULL;
  td_err err;
  ck_ok(eng_model_create(g, NULL, &io, &m, &err), err);

  size_t plen = strlen("/ckpt/variables");
  eng_feed feed = {.name = "save/Const:0"};
  eng_shape sc = eng_shape_scalar();
  ck_assert_int_eq(eng_tensor_alloc_strings(&feed.tensor, &sc, &plen, NULL), TD_OK);
  memcpy(eng_tensor_str_bytes(&feed.tensor, 0), "/ckpt/variables", plen);
  const char *tg[] = {"restore_all"};
  ck_ok(eng_model_run(m, 1, &feed, 0, NULL, NULL, 1, tg, &err), err);
  ck_assert_int_eq(calls, 1);
  eng_tensor o = {0};
  const char *out[] = {"read"};
  ck_ok(eng_model_run(m, 0, NULL, 1, out, &o, 0, NULL, &err), err);
  expect(&o, ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){0, 42});
  eng_tensor_release(&o);

  const char *tb[] = {"restore_b"};
  td_err_clear(&err);
  ck_err(eng_model_run(m, 1, &feed, 0, NULL, NULL, 1, tb, &err), err, TD_NOT_FOUND,
         "Key b not found in checkpoint");

  /* Without the feed, the Const's own prefix reaches the reader. */
  td_err_clear(&err);
  ck_err(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, tg, &err), err, TD_INVALID_ARGUMENT,
         "prefix model");

  eng_model_detach_io(m);
  td_err_clear(&err);
  ck_err(eng_model_run(m, 1, &feed, 0, NULL, NULL, 1, tg, &err), err, TD_FAILED_PRECONDITION, "w");
  eng_tensor_release(&feed.tensor);
  eng_model_destroy(m);
}
END_TEST

/* A node with fewer (or more) data inputs than its op's OpDef allows fails
 * the plan, naming it, before any kernel reads an input that is not there
 * (an Identity without inputs in a While body once read a stray pointer). */
START_TEST(plan_refuses_wrong_arity) {
  eng_graph *g = eng_graph_create();
  cnst(g, "x", ENG_DT_FLOAT, 0, NULL, (double[]){1});
  td_opcase_vnode(g, "empty", "Identity", 1, NULL);
  td_opcase_vnode(g, "three", "AddV2", 1, "x", "x", "x", NULL);
  td_opcase_vnode(g, "ok", "AddV2", 1, "x", "x", NULL);
  eng_model *m = model(g, NULL);
  eng_plan *p = NULL;
  td_err err;
  td_err_clear(&err);
  const char *o1[] = {"empty"}, *o2[] = {"three"}, *o3[] = {"ok"};
  ck_err(eng_plan_create(m, 0, NULL, 1, o1, 0, NULL, &p, &err), err, TD_INVALID_ARGUMENT,
         "node 'empty': op 'Identity' takes 1 data inputs, the node has 0");
  ck_assert_ptr_null(p);
  td_err_clear(&err);
  ck_err(eng_plan_create(m, 0, NULL, 1, o2, 0, NULL, &p, &err), err, TD_INVALID_ARGUMENT,
         "op 'AddV2' takes 2 data inputs, the node has 3");
  td_err_clear(&err);
  ck_ok(eng_plan_create(m, 0, NULL, 1, o3, 0, NULL, &p, &err), err);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

/* A RestoreV2 of many entries reads them on the pool: every entry once,
 * each into its own output, and the error is the first failing entry's in
 * order, at any thread count. */
static td_code numbered_restore(void *ctx, const char *prefix, const char *key, eng_dtype dtype,
                                eng_tensor *out, td_err *err) {
  __atomic_fetch_add((int *)ctx, 1, __ATOMIC_RELAXED);
  int k = atoi(key + 1);
  if (strstr(prefix, "fail") && (k == 57 || k == 150))
    return td_err_set(err, TD_DATA_LOSS, "checksum mismatch for tensor '%s'", key);
  eng_shape s = {.rank = 1, .dim = {1000}};
  td_code rc = eng_tensor_alloc(out, dtype, &s, err);
  if (!rc)
    for (int i = 0; i < 1000; i++) ((float *)eng_tensor_data(out))[i] = (float)(k * 1000 + i);
  return rc;
}

START_TEST(restore_v2_pool) {
  enum { N = 200 };
  for (int threads = 1; threads <= 3; threads++) {
    eng_pool_set_threads(threads);
    eng_graph *g = eng_graph_create();
    char keys[N][8];
    const char *kp[N];
    for (int i = 0; i < N; i++) {
      snprintf(keys[i], sizeof keys[i], "k%d", i);
      kp[i] = keys[i];
    }
    const char *sl[N];
    for (int i = 0; i < N; i++) sl[i] = "";
    string_const(g, "prefix", 1, (const char *[]){"ok"}, false);
    string_const(g, "names", N, kp, true);
    string_const(g, "slices", N, sl, true);
    int rv = td_opcase_vnode(g, "RestoreV2", "RestoreV2", N, "prefix", "names", "slices", NULL);
    eng_attr *a = eng_graph_add_attr(g, rv, "dtypes");
    a->kind = ENG_ATTR_LIST;
    a->list_kind = ENG_ATTR_TYPE;
    a->n = N;
    a->ltype = malloc(N * sizeof *a->ltype);
    for (int i = 0; i < N; i++) a->ltype[i] = ENG_DT_FLOAT;
    int calls = 0;
    eng_io io = {.restore = numbered_restore, .ctx = &calls};
    eng_model *m = NULL;
    td_err err;
    ck_ok(eng_model_create(g, NULL, &io, &m, &err), err);
    char names[N][24];
    const char *fetch[N];
    for (int i = 0; i < N; i++) {
      snprintf(names[i], sizeof names[i], "RestoreV2:%d", i);
      fetch[i] = names[i];
    }
    eng_tensor *o = calloc(N, sizeof *o);
    ck_ok(eng_model_run(m, 0, NULL, N, fetch, o, 0, NULL, &err), err);
    ck_assert_int_eq(calls, N);
    for (int i = 0; i < N; i++) {
      const float *v = eng_tensor_data(&o[i]);
      ck_assert_float_eq(v[0], (float)(i * 1000));
      ck_assert_float_eq(v[999], (float)(i * 1000 + 999));
      eng_tensor_release(&o[i]);
    }

    size_t plen = strlen("fail");
    eng_feed feed = {.name = "prefix:0"};
    eng_shape sc = eng_shape_scalar();
    ck_assert_int_eq(eng_tensor_alloc_strings(&feed.tensor, &sc, &plen, NULL), TD_OK);
    memcpy(eng_tensor_str_bytes(&feed.tensor, 0), "fail", plen);
    td_err_clear(&err);
    ck_err(eng_model_run(m, 1, &feed, N, fetch, o, 0, NULL, &err), err, TD_DATA_LOSS, "'k57'");
    ck_assert_ptr_null(strstr(err.msg, "k150"));
    eng_tensor_release(&feed.tensor);
    free(o);
    eng_model_destroy(m);
  }
  eng_pool_set_threads(1);
}
END_TEST

/* --- function inlining ---------------------------------------------------------- */

static eng_function *function(eng_library *lib, const char *name, int n_args) {
  td_err err;
  eng_function *f = eng_library_add(lib, name, &err);
  ck_assert_msg(f != NULL, "%s", err.msg);
  for (int i = 0; i < n_args; i++) {
    char an[16];
    snprintf(an, sizeof an, "arg%d", i);
    int id = td_opcase_vnode(f->body, an, "_Arg", 1, NULL);
    set_int(f->body, id, "index", i);
  }
  f->n_args = n_args;
  return f;
}

static void rets(eng_function *f, int n, ...) {
  f->rets = calloc((size_t)n + 1, sizeof *f->rets);
  f->n_rets = n;
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    td_err err;
    const char *r = va_arg(ap, const char *);
    ck_assert_msg(eng_graph_parse_edge(f->body, r, &f->rets[i], &err) == TD_OK, "%s", err.msg);
  }
  va_end(ap);
}

static void ctrl_rets(eng_function *f, int n, ...) {
  f->ctrl_rets = calloc((size_t)n + 1, sizeof *f->ctrl_rets);
  f->n_ctrl_rets = n;
  va_list ap;
  va_start(ap, n);
  for (int i = 0; i < n; i++) {
    const char *r = va_arg(ap, const char *);
    f->ctrl_rets[i] = eng_graph_find(f->body, r, strlen(r));
    ck_assert_int_ge(f->ctrl_rets[i], 0);
  }
  va_end(ap);
}

/* f(a, b) = (a * b + a, a * b) */
static void add_f(eng_library *lib) {
  eng_function *f = function(lib, "f", 2);
  td_opcase_vnode(f->body, "mul", "Mul", 1, "arg0", "arg1", NULL);
  td_opcase_vnode(f->body, "add", "AddV2", 1, "mul", "arg0", NULL);
  rets(f, 2, "add:0", "mul:0");
}

START_TEST(inline_partitioned_call) {
  eng_library *lib = eng_library_create();
  add_f(lib);
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, 1, (int64_t[]){-1});
  cnst(g, "c", ENG_DT_FLOAT, 0, NULL, (double[]){3});
  int call = td_opcase_vnode(g, "call", "StatefulPartitionedCall", 2, "x", "c", NULL);
  set_func(g, call, "f", "f");
  int pc = td_opcase_vnode(g, "pcall", "PartitionedCall", 2, "c", "x", NULL);
  set_func(g, pc, "f", "f");
  int direct = td_opcase_vnode(g, "direct", "f", 2, "x", "x", NULL);
  (void)direct;
  td_opcase_vnode(g, "y", "Identity", 1, "call:1", NULL);
  eng_model *m = model(g, lib);
  const eng_graph *mg = eng_model_graph(m);
  ck_assert_int_ge(eng_graph_find(mg, "call/mul", 8), 0);
  ck_assert_int_ge(eng_graph_find(mg, "direct/add", 10), 0);
  ck_assert_str_eq(eng_graph_node(mg, eng_graph_find(mg, "call", 4))->op, "IdentityN");

  const char *in[] = {"x"};
  const char *out[] = {"call:0", "call:1", "y", "pcall:0", "direct", "direct:1"};
  eng_plan *p = plan(m, 1, in, 6, out);
  eng_tensor x = tensor(ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){1, 2}), o[6] = {0};
  td_err err;
  ck_ok(eng_plan_run(p, &x, o, &err), err);
  const int64_t d2[] = {2};
  expect(&o[0], ENG_DT_FLOAT, 1, d2, (double[]){4, 8});
  expect(&o[1], ENG_DT_FLOAT, 1, d2, (double[]){3, 6});
  expect(&o[2], ENG_DT_FLOAT, 1, d2, (double[]){3, 6});
  expect(&o[3], ENG_DT_FLOAT, 1, d2, (double[]){6, 9});
  expect(&o[4], ENG_DT_FLOAT, 1, d2, (double[]){2, 6});
  expect(&o[5], ENG_DT_FLOAT, 1, d2, (double[]){1, 4});
  release_all(o, 6);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

START_TEST(inline_nested) {
  eng_library *lib = eng_library_create();
  add_f(lib);
  /* g(a) = f(a, a)[1] + 1 via a StatefulPartitionedCall inside; h(a) = g(g(a)) by direct calls. */
  eng_function *gf = function(lib, "g", 1);
  int in = td_opcase_vnode(gf->body, "inner", "StatefulPartitionedCall", 2, "arg0", "arg0", NULL);
  set_func(gf->body, in, "f", "f");
  int one = td_opcase_vnode(gf->body, "one", "Const", 1, NULL);
  eng_attr *a = eng_graph_add_attr(gf->body, one, "value");
  a->kind = ENG_ATTR_TENSOR;
  a->tensor = tensor(ENG_DT_FLOAT, 0, NULL, (double[]){1});
  td_opcase_vnode(gf->body, "res", "AddV2", 1, "inner:1", "one", NULL);
  rets(gf, 1, "res:0");
  eng_function *hf = function(lib, "h", 1);
  td_opcase_vnode(hf->body, "g1", "g", 1, "arg0", NULL);
  td_opcase_vnode(hf->body, "g2", "g", 1, "g1", NULL);
  rets(hf, 1, "g2:0");

  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, 1, (int64_t[]){-1});
  int c = td_opcase_vnode(g, "top", "StatefulPartitionedCall", 1, "x", NULL);
  set_func(g, c, "f", "h");
  eng_model *m = model(g, lib);
  const eng_graph *mg = eng_model_graph(m);
  /* Every call is gone: no node still names a function. */
  for (int i = 0; i < eng_graph_node_count(mg); i++) {
    const eng_node *n = eng_graph_node(mg, i);
    ck_assert_msg(strcmp(n->op, "StatefulPartitionedCall") && strcmp(n->op, "g") &&
                      strcmp(n->op, "f") && strcmp(n->op, "h") && strcmp(n->op, "_Arg"),
                  "node %s still has op %s", n->name, n->op);
  }
  ck_assert_int_ge(eng_graph_find(mg, "top/g2/inner/mul", 16), 0);

  const char *ins[] = {"x"};
  const char *out[] = {"top:0"};
  eng_plan *p = plan(m, 1, ins, 1, out);
  eng_tensor x = tensor(ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){2, -1}), o = {0};
  td_err err;
  ck_ok(eng_plan_run(p, &x, &o, &err), err);
  /* g(2) = 5, g(5) = 26; g(-1) = 2, g(2) = 5 */
  expect(&o, ENG_DT_FLOAT, 1, (int64_t[]){2}, (double[]){26, 5});
  eng_tensor_release(&o);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

START_TEST(inline_control_returns) {
  /* The TF2 restore pattern: a call whose only effect is an
   * AssignVariableOp reached through control returns. */
  eng_library *lib = eng_library_create();
  eng_function *f = function(lib, "restore", 2);
  td_opcase_vnode(f->body, "ident", "Identity", 1, "arg1", NULL);
  td_opcase_vnode(f->body, "assign", "AssignVariableOp", 0, "arg0", "ident", NULL);
  td_opcase_vnode(f->body, "noop", "NoOp", 0, "^assign", NULL);
  td_opcase_vnode(f->body, "out", "Identity", 1, "arg1", "^noop", NULL);
  rets(f, 1, "out:0");
  ctrl_rets(f, 2, "assign", "noop");

  eng_function *sf = function(lib, "side_only", 2);
  td_opcase_vnode(sf->body, "assign", "AssignVariableOp", 0, "arg0", "arg1", NULL);
  rets(sf, 0);
  ctrl_rets(sf, 1, "assign");

  eng_graph *g = eng_graph_create();
  var_handle(g, "v", "v");
  cnst(g, "val", ENG_DT_FLOAT, 0, NULL, (double[]){9});
  cnst(g, "val2", ENG_DT_FLOAT, 0, NULL, (double[]){-9});
  int c = td_opcase_vnode(g, "StatefulPartitionedCall_2", "StatefulPartitionedCall", 1, "v", "val",
                          NULL);
  set_func(g, c, "f", "restore");
  int s = td_opcase_vnode(g, "side", "StatefulPartitionedCall", 0, "v", "val2", NULL);
  set_func(g, s, "f", "side_only");
  int r = td_opcase_vnode(g, "read", "ReadVariableOp", 1, "v", NULL);
  set_type(g, r, "dtype", ENG_DT_FLOAT);
  eng_model *m = model(g, lib);
  td_err err;
  const char *tg[] = {"StatefulPartitionedCall_2"};
  ck_ok(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, tg, &err), err);
  eng_tensor o = {0};
  const char *out[] = {"read"};
  ck_ok(eng_model_run(m, 0, NULL, 1, out, &o, 0, NULL, &err), err);
  expect(&o, ENG_DT_FLOAT, 0, NULL, (double[]){9});
  eng_tensor_release(&o);

  /* A call with no data results still runs its side effects as a target. */
  const char *ts[] = {"side"};
  ck_ok(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, ts, &err), err);
  ck_ok(eng_model_run(m, 0, NULL, 1, out, &o, 0, NULL, &err), err);
  expect(&o, ENG_DT_FLOAT, 0, NULL, (double[]){-9});
  eng_tensor_release(&o);
  eng_model_destroy(m);
}
END_TEST

START_TEST(inline_call_control_inputs_gate_body) {
  /* A call's control inputs must run before anything in its body, also
   * before body nodes whose only inputs are the call's arguments (TF's
   * inliner routes every argument through the call's input control node). */
  eng_library *lib = eng_library_create();
  eng_function *f = function(lib, "reader", 1);
  int rd = td_opcase_vnode(f->body, "read", "ReadVariableOp", 1, "arg0", NULL);
  set_type(f->body, rd, "dtype", ENG_DT_FLOAT);
  rets(f, 1, "read:0");

  eng_graph *g = eng_graph_create();
  var_handle(g, "v", "v");
  cnst(g, "val", ENG_DT_FLOAT, 0, NULL, (double[]){5});
  td_opcase_vnode(g, "assign", "AssignVariableOp", 0, "v", "val", NULL);
  int c = td_opcase_vnode(g, "call", "StatefulPartitionedCall", 1, "v", "^assign", NULL);
  set_func(g, c, "f", "reader");
  eng_model *m = model(g, lib);
  eng_tensor o = {0};
  td_err err;
  td_err_clear(&err);
  const char *out[] = {"call:0"};
  ck_ok(eng_model_run(m, 0, NULL, 1, out, &o, 0, NULL, &err), err);
  expect(&o, ENG_DT_FLOAT, 0, NULL, (double[]){5});
  eng_tensor_release(&o);
  eng_model_destroy(m);
}
END_TEST

START_TEST(inline_errors) {
  td_err err;
  /* Missing callee. */
  eng_library *lib = eng_library_create();
  add_f(lib);
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  int c = td_opcase_vnode(g, "call", "StatefulPartitionedCall", 1, "x", "x", NULL);
  set_func(g, c, "f", "absent_fn");
  eng_model *m = (eng_model *)0x1;
  td_err_clear(&err);
  ck_err(eng_model_create(g, lib, NULL, &m, &err), err, TD_NOT_FOUND, "absent_fn");
  ck_assert_msg(strstr(err.msg, "call"), "message: %s", err.msg);
  ck_assert_ptr_eq(m, (eng_model *)0x1);

  /* Wrong number of arguments. */
  lib = eng_library_create();
  add_f(lib);
  g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  c = td_opcase_vnode(g, "call", "StatefulPartitionedCall", 1, "x", NULL);
  set_func(g, c, "f", "f");
  td_err_clear(&err);
  ck_err(eng_model_create(g, lib, NULL, &m, &err), err, TD_INVALID_ARGUMENT, "call");

  /* More results asked than returned. */
  lib = eng_library_create();
  add_f(lib);
  g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  td_opcase_vnode(g, "call", "f", 3, "x", "x", NULL);
  td_err_clear(&err);
  ck_err(eng_model_create(g, lib, NULL, &m, &err), err, TD_INVALID_ARGUMENT, "call");

  /* Without a library, a call op is just an op the engine lacks. */
  g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  c = td_opcase_vnode(g, "call", "StatefulPartitionedCall", 1, "x", NULL);
  set_func(g, c, "f", "f");
  m = model(g, NULL);
  const char *out[] = {"call"};
  eng_plan *p = NULL;
  td_err_clear(&err);
  ck_err(eng_plan_create(m, 0, NULL, 1, out, 0, NULL, &p, &err), err, TD_UNIMPLEMENTED,
         "StatefulPartitionedCall");
  eng_model_destroy(m);
}
END_TEST

START_TEST(inline_recursive_fails) {
  /* rec(a) = rec(a): must fail cleanly (INVALID_ARGUMENT), not loop or
   * exhaust memory. The tcase timeout bounds it. */
  eng_library *lib = eng_library_create();
  eng_function *f = function(lib, "rec", 1);
  td_opcase_vnode(f->body, "again", "rec", 1, "arg0", NULL);
  rets(f, 1, "again:0");
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  td_opcase_vnode(g, "r", "rec", 1, "x", NULL);
  eng_model *m = NULL;
  td_err err;
  td_err_clear(&err);
  ck_err(eng_model_create(g, lib, NULL, &m, &err), err, TD_INVALID_ARGUMENT, "recursi");
  ck_assert_ptr_null(m);
}
END_TEST

START_TEST(inline_mutual_recursion_fails) {
  eng_library *lib = eng_library_create();
  eng_function *f2 = function(lib, "ping", 1);
  int pc = td_opcase_vnode(f2->body, "to_pong", "StatefulPartitionedCall", 1, "arg0", NULL);
  set_func(f2->body, pc, "f", "pong");
  rets(f2, 1, "to_pong:0");
  eng_function *f3 = function(lib, "pong", 1);
  td_opcase_vnode(f3->body, "to_ping", "ping", 1, "arg0", NULL);
  rets(f3, 1, "to_ping:0");
  eng_graph *g = eng_graph_create();
  placeholder(g, "x", ENG_DT_FLOAT, -1, NULL);
  td_opcase_vnode(g, "r", "ping", 1, "x", NULL);
  eng_model *m = NULL;
  td_err err;
  td_err_clear(&err);
  ck_err(eng_model_create(g, lib, NULL, &m, &err), err, TD_INVALID_ARGUMENT, "recursi");
  ck_assert_ptr_null(m);
}
END_TEST

/* --- concurrency ------------------------------------------------------------- */

typedef struct worker {
  const eng_plan *p;
  int id;
  int failures;
  char msg[256];
} worker;

static void *work(void *arg) {
  worker *w = arg;
  for (int it = 0; it < 2000 && !w->failures; it++) {
    int n = 1 + (it + w->id) % 7;
    double v[8];
    for (int i = 0; i < n; i++) v[i] = w->id * 100 + it % 50 + i;
    eng_tensor x = tensor(ENG_DT_FLOAT, 1, (int64_t[]){n}, v), o[2] = {0};
    td_err err;
    td_err_clear(&err);
    if (eng_plan_run(w->p, &x, o, &err)) {
      w->failures++;
      snprintf(w->msg, sizeof w->msg, "run: %.200s", err.msg);
    } else {
      for (int i = 0; i < n && !w->failures; i++) {
        float want = (float)v[i] * 0.5f + 2.0f;
        if (o[0].shape.dim[0] != n || ((float *)eng_tensor_data(&o[0]))[i] != want ||
            ((float *)eng_tensor_data(&o[1]))[i] != (float)v[i] * 0.5f) {
          w->failures++;
          snprintf(w->msg, sizeof w->msg, "thread %d iter %d elem %d wrong", w->id, it, i);
        }
      }
      release_all(o, 2);
    }
    eng_tensor_release(&x);
  }
  return NULL;
}

START_TEST(concurrent_runs) {
  /* half_plus_two with resource variables and a function call, as TF2 exports it. */
  eng_library *lib = eng_library_create();
  eng_function *f = function(lib, "predict", 3);
  int ra = td_opcase_vnode(f->body, "ra", "ReadVariableOp", 1, "arg1", NULL);
  set_type(f->body, ra, "dtype", ENG_DT_FLOAT);
  int rb = td_opcase_vnode(f->body, "rb", "ReadVariableOp", 1, "arg2", NULL);
  set_type(f->body, rb, "dtype", ENG_DT_FLOAT);
  td_opcase_vnode(f->body, "mul", "Mul", 1, "ra", "arg0", NULL);
  td_opcase_vnode(f->body, "add", "AddV2", 1, "mul", "rb", NULL);
  rets(f, 2, "add:0", "mul:0");
  eng_graph *g = eng_graph_create();
  placeholder(g, "serving_default_x", ENG_DT_FLOAT, 1, (int64_t[]){-1});
  var_handle(g, "a", "a");
  var_handle(g, "b", "b");
  cnst(g, "a_init", ENG_DT_FLOAT, 0, NULL, (double[]){0.5});
  cnst(g, "b_init", ENG_DT_FLOAT, 0, NULL, (double[]){2});
  td_opcase_vnode(g, "assign_a", "AssignVariableOp", 0, "a", "a_init", NULL);
  td_opcase_vnode(g, "assign_b", "AssignVariableOp", 0, "b", "b_init", NULL);
  td_opcase_vnode(g, "init", "NoOp", 0, "^assign_a", "^assign_b", NULL);
  int c = td_opcase_vnode(g, "StatefulPartitionedCall", "StatefulPartitionedCall", 2,
                          "serving_default_x", "a", "b", NULL);
  set_func(g, c, "f", "predict");
  eng_model *m = model(g, lib);
  td_err err;
  const char *tg[] = {"init"};
  ck_ok(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, tg, &err), err);
  const char *in[] = {"serving_default_x:0"};
  const char *out[] = {"StatefulPartitionedCall:0", "StatefulPartitionedCall:1"};
  eng_plan *p = plan(m, 1, in, 2, out);
  pthread_t th[4];
  worker w[4];
  for (int i = 0; i < 4; i++) {
    w[i] = (worker){.p = p, .id = i};
    ck_assert_int_eq(pthread_create(&th[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < 4; i++) ck_assert_msg(w[i].failures == 0, "%s", w[i].msg);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("eng_model");
  TCase *tc = tcase_create("plans");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, arith_float);
  tcase_add_test(tc, arith_double);
  tcase_add_test(tc, arith_int32);
  tcase_add_test(tc, arith_int64);
  tcase_add_test(tc, arith_scalars_and_rank3);
  tcase_add_test(tc, arith_errors);
  tcase_add_test(tc, placeholder_feed_checks);
  tcase_add_test(tc, unfed_placeholder);
  tcase_add_test(tc, fetch_fed_and_const_feed);
  tcase_add_test(tc, wide_nodes_and_repeated_fetches);
  tcase_add_test(tc, unknown_op_needed);
  tcase_add_test(tc, plan_internal_op_in_graph);
  tcase_add_test(tc, unknown_op_pruned);
  tcase_add_test(tc, feed_cuts_graph);
  tcase_add_test(tc, control_deps_order);
  tcase_add_test(tc, cycle_detected);
  suite_add_tcase(s, tc);

  tc = tcase_create("variables");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, tf1_ref_variable);
  tcase_add_test(tc, resource_variable);
  tcase_add_test(tc, restore_v2);
  tcase_add_test(tc, restore_v2_pool);
  tcase_add_test(tc, release_unserved_variables);
  suite_add_tcase(s, tc);

  tc = tcase_create("inline");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, inline_partitioned_call);
  tcase_add_test(tc, inline_nested);
  tcase_add_test(tc, inline_control_returns);
  tcase_add_test(tc, plan_refuses_wrong_arity);
  tcase_add_test(tc, inline_call_control_inputs_gate_body);
  tcase_add_test(tc, inline_errors);
  tcase_add_test(tc, inline_recursive_fails);
  tcase_add_test(tc, inline_mutual_recursion_fails);
  suite_add_tcase(s, tc);

  tc = tcase_create("threads");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, concurrent_runs);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
