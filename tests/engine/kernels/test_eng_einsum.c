/* eng_einsum with a constant right operand: which equations pack it at load
 * (eng_einsum_const_b), and that a plan running the packed weight gives
 * the same bits as the same Einsum with the weight fed (packed per call),
 * before and after the original is freed (eng_model_release_packed_sources),
 * at other batch sizes, and that a kernel asked to read the freed original
 * fails INTERNAL instead. */
#include <check.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "eng_einsum.h"
#include "eng_isa.h"
#include "eng_gemm.h"
#include "eng_graph.h"
#include "eng_kernels.h"
#include "eng_model.h"
#include "eng_plan.h"

static int node(eng_graph *g, const char *name, const char *op, ...) {
  td_err err;
  int id = eng_graph_add_node(g, name, op, &err);
  ck_assert_msg(id >= 0, "add %s: %s", name, err.msg);
  eng_graph_node(g, id)->n_out = 1;
  va_list ap;
  va_start(ap, op);
  for (const char *in; (in = va_arg(ap, const char *));) {
    eng_edge e;
    ck_assert_int_eq(eng_graph_parse_edge(g, in, &e, &err), TD_OK);
    ck_assert_int_eq(eng_graph_add_input(g, id, e, NULL), TD_OK);
  }
  va_end(ap);
  return id;
}

static float val(int64_t i, int salt) { return (float)((i * 37 + salt * 11) % 23) / 7.0f - 1.3f; }

static eng_tensor filled(int rank, const int64_t *dims, int salt) {
  eng_shape s = eng_shape_make(rank, dims);
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &s, NULL), TD_OK);
  float *v = eng_tensor_data(&t);
  for (int64_t i = 0; i < eng_tensor_numel(&t); i++) v[i] = val(i, salt);
  return t;
}

static void placeholder(eng_graph *g, const char *name) {
  int id = node(g, name, "Placeholder", NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "dtype");
  a->kind = ENG_ATTR_TYPE;
  a->type = ENG_DT_FLOAT;
}

static int einsum_node(eng_graph *g, const char *eq, const char *b) {
  int e = node(g, "e", "Einsum", "a", b, NULL);
  eng_attr *at = eng_graph_add_attr(g, e, "equation");
  at->kind = ENG_ATTR_S;
  at->s.data = strdup(eq);
  at->s.len = strlen(eq);
  return e;
}

/* A model computing Einsum(a, w): w a variable's value when konst (a
 * weight: packed at load), else a second Placeholder (packed per call). */
static eng_plan *einsum_plan(const char *eq, const eng_tensor *w, bool konst, eng_model **m) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "a");
  int vh = -1;
  if (konst) {
    vh = node(g, "v", "VarHandleOp", NULL);
    eng_attr *a = eng_graph_add_attr(g, vh, "dtype");
    a->kind = ENG_ATTR_TYPE;
    a->type = ENG_DT_FLOAT;
    node(g, "w", "ReadVariableOp", "v", NULL);
  } else {
    placeholder(g, "w");
  }
  einsum_node(g, eq, "w");
  td_err err;
  ck_assert_int_eq(eng_model_create(g, NULL, NULL, m, &err), TD_OK);
  if (konst) {
    eng_tensor copy;
    ck_assert_int_eq(eng_tensor_copy(&copy, w, NULL), TD_OK);
    ck_assert_int_eq(eng_model_slot_write(*m, eng_model_node_slot(*m, vh), &copy, &err), TD_OK);
    eng_tensor_release(&copy);
  }
  const char *in[] = {"a:0", "w:0"}, *out[] = {"e:0"};
  eng_plan *p;
  ck_assert_msg(eng_plan_create(*m, konst ? 1 : 2, in, 1, out, 0, NULL, &p, &err) == TD_OK, "%s",
                err.msg);
  return p;
}

static eng_tensor run(eng_plan *p, const eng_tensor *a, const eng_tensor *w) {
  eng_tensor in[2] = {*a, w ? *w : (eng_tensor){0}}, y = {0};
  td_err err;
  ck_assert_msg(eng_plan_run(p, in, &y, &err) == TD_OK, "%s", err.msg);
  return y;
}

START_TEST(const_b_forms) {
  struct {
    const char *eq;
    int rank;
    int64_t dim[4];
    bool ok, tb;
    int64_t k, n;
  } cases[] = {
      {"abc,cd->abd", 2, {6, 5}, true, false, 6, 5},      /* a dense layer on [B, T, C] */
      {"abc,cde->abde", 3, {6, 2, 3}, true, false, 6, 6}, /* query/key/value projections */
      {"abcd,cde->abe", 3, {2, 3, 5}, true, false, 6, 5}, /* attention's output projection */
      {"abc,dc->abd", 2, {5, 6}, true, true, 6, 5},       /* B stored [n, k] */
      {"bij,bjk->bik", 3, {2, 3, 4}, false, false, 0, 0}, /* a batch label */
      {"...c,cd->...d", 2, {6, 5}, false, false, 0, 0},   /* an ellipsis */
      {"acb,cd->abd", 2, {6, 5}, false, false, 0, 0},     /* A transposed */
      {"abc,cd->adb", 2, {6, 5}, false, false, 0, 0},     /* output not [free A, free B] */
      {"abc,cd->abd", 2, {0, 5}, false, false, 0, 0},     /* an empty weight */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    eng_shape b = eng_shape_make(cases[i].rank, cases[i].dim);
    int64_t k = -1, n = -1;
    bool tb = false;
    bool ok = eng_einsum_const_b(cases[i].eq, &b, &k, &n, &tb);
    ck_assert_msg(ok == cases[i].ok, "%s: %d", cases[i].eq, ok);
    if (!ok) continue;
    ck_assert_int_eq(k, cases[i].k);
    ck_assert_int_eq(n, cases[i].n);
    ck_assert_int_eq(tb, cases[i].tb);
  }
}
END_TEST

static void same_bits(const char *eq, const eng_tensor *x, const eng_tensor *y) {
  ck_assert_int_eq(eng_tensor_numel(x), eng_tensor_numel(y));
  ck_assert_msg(
      !memcmp(eng_tensor_data(x), eng_tensor_data(y), sizeof(float) * (size_t)eng_tensor_numel(x)),
      "%s: the packed weight's result differs from packing per call", eq);
}

/* Einsum(a, w) with w packed at load against w fed: the same bits at two
 * batch sizes, before and after the original is freed; batch 0 after it. */
static void packed_case(const char *eq, int ra, const int64_t *da, int rb, const int64_t *db) {
  eng_tensor w = filled(rb, db, 2);
  eng_model *mk, *mf;
  eng_plan *pk = einsum_plan(eq, &w, true, &mk), *pf = einsum_plan(eq, &w, false, &mf);
  bool packs = eng_isa_active() != ENG_ISA_GENERIC;
  ck_assert_int_eq(eng_model_weight_stats(mk).packed_bytes > 0, packs);
  int64_t d[ENG_MAX_RANK];
  memcpy(d, da, sizeof *d * (size_t)ra);
  for (int round = 0; round < 2; round++) {
    if (round == 1 && packs) {
      ck_assert_uint_eq(eng_model_release_packed_sources(mk, 1, &pk), eng_tensor_nbytes(&w));
      ck_assert_uint_eq(eng_model_weight_stats(mk).packed_sources, 0);
    }
    for (int64_t batch = 2; batch <= 3; batch++) {
      d[0] = batch;
      eng_tensor a = filled(ra, d, (int)batch);
      eng_tensor yk = run(pk, &a, NULL), yf = run(pf, &a, &w);
      same_bits(eq, &yk, &yf);
      eng_tensor_release(&yk);
      eng_tensor_release(&yf);
      eng_tensor_release(&a);
    }
  }
  d[0] = 0; /* an empty batch reads no weight */
  eng_tensor a = filled(ra, d, 0), y = run(pk, &a, NULL);
  ck_assert_int_eq(eng_tensor_numel(&y), 0);
  eng_tensor_release(&y);
  eng_tensor_release(&a);
  eng_plan_destroy(pk);
  eng_plan_destroy(pf);
  eng_model_destroy(mk);
  eng_model_destroy(mf);
  eng_tensor_release(&w);
}

START_TEST(packed_weight_matches_per_call_packing) {
  /* Sizes past one register block and one panel, with ragged edges. */
  packed_case("abc,cde->abde", 3, (int64_t[]){2, 9, 40}, 3, (int64_t[]){40, 3, 13});
  packed_case("abcd,cde->abe", 4, (int64_t[]){2, 7, 3, 13}, 3, (int64_t[]){3, 13, 37});
  packed_case("abc,dc->abd", 3, (int64_t[]){2, 13, 33}, 2, (int64_t[]){45, 33});
  packed_case("abc,cd->abd", 3, (int64_t[]){2, 1, 17}, 2, (int64_t[]){17, 24}); /* m = batch */
}
END_TEST

/* The kernel given a freed (hollow) weight and no packed form, as a step
 * that could not use it would be: INTERNAL, not a read of missing bytes;
 * an empty product still succeeds. */
START_TEST(hollow_weight_fails_internal) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "a");
  placeholder(g, "w");
  int e = einsum_node(g, "abc,cd->abd", "w");
  eng_tensor w, a = filled(3, (int64_t[]){2, 3, 4}, 1);
  eng_shape ws = eng_shape_make(2, (int64_t[]){4, 5});
  ck_assert_int_eq(eng_tensor_alloc_hollow(&w, ENG_DT_FLOAT, &ws, NULL), TD_OK);
  eng_tensor in[2] = {a, w}, out = {0};
  td_err err;
  td_err_clear(&err);
  eng_kctx c = {.node = eng_graph_node(g, e),
                .node_id = e,
                .n_in = 2,
                .in = in,
                .n_out = 1,
                .out = &out,
                .err = &err};
  ck_assert_int_eq(eng_k_einsum(&c), TD_INTERNAL);
  ck_assert_ptr_nonnull(strstr(err.msg, "packed"));
  eng_tensor_release(&out);
  eng_tensor_release(&a);
  in[0] = a = filled(3, (int64_t[]){0, 3, 4}, 1);
  out = (eng_tensor){0};
  ck_assert_int_eq(eng_k_einsum(&c), TD_OK);
  ck_assert_int_eq(eng_tensor_numel(&out), 0);
  eng_tensor_release(&out);
  eng_tensor_release(&a);
  eng_tensor_release(&w);
  eng_graph_destroy(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_einsum");
  TCase *tc = tcase_create("einsum");
  tcase_add_test(tc, const_b_forms);
  tcase_add_test(tc, packed_weight_matches_per_call_packing);
  tcase_add_test(tc, hollow_weight_fails_internal);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
