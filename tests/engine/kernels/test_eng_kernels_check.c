/* The op table's load-time checks (eng_kernels_check.c): nodes a kernel
 * would refuse on every request fail eng_plan_create naming the node and
 * the op, nodes it accepts (TensorFlow's defaults, missing attributes)
 * pass; and string tensors through the element-moving kernels
 * (eng_kernels_strmove.c). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "eng_model.h"
#include "eng_op.h"
#include "td_opcase.h"

/* Runs op's check on a node with attrs (td_opcase syntax). */
static td_code check_node(const char *op, const char *attrs, int n_in, td_err *err) {
  eng_graph *g = eng_graph_create();
  int id = eng_graph_add_node(g, "thenode", op, NULL);
  for (int i = 0; i < n_in; i++) {
    int src = eng_graph_add_node(g, i ? "in1" : "in0", "Placeholder", NULL);
    eng_graph_node(g, src)->n_out = 1;
    eng_graph_add_input(g, id, (eng_edge){src, 0}, NULL);
  }
  eng_graph_node(g, id)->n_out = 1;
  td_opcase_attrs(g, id, attrs);
  const eng_op_def *d = eng_op_find(op);
  ck_assert_ptr_nonnull(d);
  td_err_clear(err);
  td_code rc = d->check ? d->check(eng_graph_node(g, id), err) : TD_OK;
  eng_graph_destroy(g);
  return rc;
}

START_TEST(refused_nodes_name_node_and_op) {
  const struct {
    const char *op, *attrs, *msg;
  } bad[] = {
      {"Conv2D", "T=t:3;strides=li:1,1,1,1;padding=s:SAME", "T int32"},
      {"Conv2D", "strides=li:1,1,1,1;padding=s:SAME;data_format=s:NCHW", "NCHW"},
      {"Conv2D", "strides=li:2,1,1,1;padding=s:SAME", "batch or depth"},
      {"Conv2D", "strides=li:1,1;padding=s:SAME", "4 elements"},
      {"MaxPool", "ksize=li:1,2,2,2;strides=li:1,1,1,1;padding=s:VALID", "depth"},
      {"AvgPool", "strides=li:1,1,1,1;padding=s:VALID", "ksize"},
      {"DepthwiseConv2dNative", "strides=li:1,1,1,1;padding=s:CAUSAL", "padding 'CAUSAL'"},
      {"FusedBatchNormV3", "epsilon=f:0.001;data_format=s:NCHW", "NCHW"},
      {"Softmax", "T=t:9", "T int64"},
      {"MatMul", "T=t:3", "T int32"},
      {"Einsum", "equation=s:ab,bc->a", "equation 'ab,bc->a'"},
      {"Einsum", "equation=s:aab,bc->ac", "not supported"},
      {"Tile", "T=t:21", "T variant"},
      {"FFT2D", "Tcomplex=t:1", "Tcomplex float"},
      {"RFFT", "Treal=t:19;Tcomplex=t:8", "Treal half"},
      {"IRFFT3D", "Treal=t:1;Tcomplex=t:1", "Tcomplex float"},
      {"Complex", "T=t:3;Tout=t:8", "T int32"},
      {"Real", "T=t:1;Tout=t:1", "T float"},
      {"Angle", "T=t:8;Tout=t:8", "Tout complex64"},
      {"Conj", "T=t:21", "T variant"},
      {"Sum", "T=t:8", "T complex64"},
      {"Mean", "T=t:18", "T complex128"},
      {"SquaredDifference", "T=t:8", "T complex64"},
      {"BroadcastArgs", "T=t:1", "T float"},
      {"L2Loss", "T=t:3", "T int32"},
      {"LinSpace", "T=t:3;Tidx=t:3", "T int32"},
      {"LinSpace", "T=t:1;Tidx=t:1", "Tidx float"},
      {"XlaDynamicUpdateSlice", "T=t:7;Tindices=t:3", "T string"},
      {"XlaDynamicUpdateSlice", "T=t:1;Tindices=t:1", "Tindices float"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    td_err err;
    td_code rc = check_node(bad[k].op, bad[k].attrs, 2, &err);
    ck_assert_msg(rc != TD_OK, "%s %s accepted", bad[k].op, bad[k].attrs);
    ck_assert_msg(
        strstr(err.msg, "thenode") && strstr(err.msg, bad[k].op) && strstr(err.msg, bad[k].msg),
        "%s: message '%s'", bad[k].op, err.msg);
  }
}
END_TEST

START_TEST(accepted_nodes) {
  const struct {
    const char *op, *attrs;
  } good[] = {
      {"Conv2D", "T=t:1;strides=li:1,2,2,1;padding=s:SAME"},
      {"Conv2D", "strides=li:1,1,1,1;padding=s:EXPLICIT;explicit_paddings=li:0,0,1,1,1,1,0,0"},
      {"Conv2D", "T=t:19;strides=li:1,1,1,1;padding=s:VALID"}, /* half: widened at load */
      {"MaxPool", "ksize=li:1,2,2,1;strides=li:1,2,2,1;padding=s:VALID"},
      {"Einsum", "equation=s:...ij,jk->...ik"},
      {"Einsum", "equation=s:...ij,...jk->...ik"},
      {"Einsum", "equation=s:bij,bjk->bik"},
      {"Tile", "T=t:7"},
      {"GatherV2", "T=t:7"},
      {"Tile", ""},
      {"MatMul", "T=t:2"},
      {"FFT2D", "Tcomplex=t:18"},
      {"RFFT", "Treal=t:2;Tcomplex=t:18"},
      {"Complex", ""},
      {"Real", "T=t:18;Tout=t:2"},
      {"Sum", "T=t:1"},
      {"Equal", "T=t:7"},
  };
  for (size_t k = 0; k < sizeof good / sizeof *good; k++) {
    td_err err;
    td_code rc = check_node(good[k].op, good[k].attrs, 2, &err);
    ck_assert_msg(rc == TD_OK, "%s %s refused: %s", good[k].op, good[k].attrs, err.msg);
  }
}
END_TEST

/* The check runs when a plan is built, so the load fails, not requests. */
START_TEST(plan_create_runs_checks) {
  eng_graph *g = eng_graph_create();
  int x = eng_graph_add_node(g, "x", "Placeholder", NULL);
  eng_graph_node(g, x)->n_out = 1;
  int e = eng_graph_add_node(g, "mix", "Einsum", NULL);
  eng_graph_node(g, e)->n_out = 1;
  eng_graph_add_input(g, e, (eng_edge){x, 0}, NULL);
  eng_graph_add_input(g, e, (eng_edge){x, 0}, NULL);
  td_opcase_attrs(g, e, "equation=s:ij,jk->i;N=i:2");
  td_err err;
  td_err_clear(&err);
  eng_model *m = NULL;
  ck_assert_int_eq(eng_model_create(g, NULL, NULL, &m, &err), TD_OK);
  const char *in[] = {"x"}, *out[] = {"mix"};
  eng_plan *p = NULL;
  td_code rc = eng_plan_create(m, 1, in, 1, out, 0, NULL, &p, &err);
  ck_assert_int_eq(rc, TD_UNIMPLEMENTED);
  ck_assert_ptr_null(p);
  ck_assert_msg(strstr(err.msg, "'mix' (Einsum)") && strstr(err.msg, "ij,jk->i"), "%s", err.msg);
  eng_model_destroy(m);
}
END_TEST

static void strings(eng_tensor *t, int rank, const int64_t *dims, const char *const *v) {
  eng_shape s = eng_shape_make(rank, dims);
  int64_t n = eng_shape_numel(&s);
  size_t lens[16];
  for (int64_t i = 0; i < n; i++) lens[i] = strlen(v[i]);
  ck_assert_int_eq(eng_tensor_alloc_strings(t, &s, lens, NULL), TD_OK);
  for (int64_t i = 0; i < n; i++) memcpy(eng_tensor_str_bytes(t, i), v[i], lens[i]);
}

static void ints(eng_tensor *t, int n, const int64_t *v) {
  int64_t d = n;
  eng_shape s = eng_shape_make(1, &d);
  ck_assert_int_eq(eng_tensor_alloc(t, ENG_DT_INT32, &s, NULL), TD_OK);
  for (int i = 0; i < n; i++) ((int32_t *)eng_tensor_data(t))[i] = (int32_t)v[i];
}

static void run(const char *op, const char *attrs, int n_in, eng_tensor *in, int n_out,
                eng_tensor *out) {
  eng_graph *g = eng_graph_create();
  int id = eng_graph_add_node(g, "n", op, NULL);
  eng_graph_node(g, id)->n_out = n_out;
  td_opcase_attrs(g, id, attrs);
  td_err err;
  td_err_clear(&err);
  eng_kctx ctx = {.node = eng_graph_node(g, id),
                  .node_id = id,
                  .n_in = n_in,
                  .in = in,
                  .n_out = n_out,
                  .out = out,
                  .err = &err};
  ck_assert_msg(eng_op_find(op)->cpu(&ctx) == TD_OK, "%s: %s", op, err.msg);
  eng_graph_destroy(g);
}

static void expect_strings(const eng_tensor *t, int rank, const int64_t *dims,
                           const char *const *v) {
  ck_assert_int_eq(t->dtype, ENG_DT_STRING);
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert(eng_shape_equal(&t->shape, &s));
  for (int64_t i = 0; i < eng_shape_numel(&s); i++) {
    eng_str e = eng_tensor_strs(t)[i];
    ck_assert_msg(e.len == strlen(v[i]) && !memcmp(e.data, v[i], e.len), "element %lld",
                  (long long)i);
  }
}

START_TEST(string_tile_gather_concat) {
  eng_tensor in[3] = {0}, out[2] = {0};
  strings(&in[0], 2, (int64_t[]){2, 1}, (const char *[]){"ab", ""});
  ints(&in[1], 2, (int64_t[]){1, 3});
  run("Tile", "", 2, in, 1, out);
  expect_strings(&out[0], 2, (int64_t[]){2, 3}, (const char *[]){"ab", "ab", "ab", "", "", ""});
  eng_tensor_release(&out[0]);
  eng_tensor_release(&in[1]);

  strings(&in[1], 1, (int64_t[]){3}, (const char *[]){"x", "yy", "zzz"});
  eng_tensor idx = {0};
  ints(&idx, 3, (int64_t[]){2, 2, 0});
  eng_tensor axis = {0};
  ck_assert_int_eq(eng_tensor_alloc(&axis, ENG_DT_INT32, &(eng_shape){0}, NULL), TD_OK);
  eng_tensor gin[3] = {in[1], idx, axis};
  run("GatherV2", "", 3, gin, 1, out);
  expect_strings(&out[0], 1, (int64_t[]){3}, (const char *[]){"zzz", "zzz", "x"});
  eng_tensor_release(&out[0]);

  /* Two string inputs: element numbers of the second follow the first's. */
  eng_tensor a = {0};
  strings(&a, 1, (int64_t[]){2}, (const char *[]){"p", "q"});
  eng_tensor cin[3] = {in[1], a, axis};
  run("ConcatV2", "", 3, cin, 1, out);
  expect_strings(&out[0], 1, (int64_t[]){5}, (const char *[]){"x", "yy", "zzz", "p", "q"});
  eng_tensor_release(&out[0]);
  run("Pack", "axis=i:0", 2, (eng_tensor[]){a, a}, 1, out);
  expect_strings(&out[0], 2, (int64_t[]){2, 2}, (const char *[]){"p", "q", "p", "q"});
  eng_tensor_release(&out[0]);
  eng_tensor_release(&a);
  eng_tensor_release(&idx);
  eng_tensor_release(&axis);
  for (int i = 0; i < 3; i++) eng_tensor_release(&in[i]);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("eng_kernels_check");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, refused_nodes_name_node_and_op);
  tcase_add_test(tc, accepted_nodes);
  tcase_add_test(tc, plan_create_runs_checks);
  tcase_add_test(tc, string_tile_gather_concat);
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
