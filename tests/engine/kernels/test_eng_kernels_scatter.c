/* Failure paths of the scatter, segment and check kernels
 * (eng_kernels_scatter.c, eng_kernels_assert.c): a false Assert, a NaN
 * under CheckNumerics, an index or segment id out of range fail with
 * INVALID_ARGUMENT and a message naming the node and the value, never a
 * crash. Their numbers are op cases (test_eng_op.c), except
 * XlaDynamicUpdateSlice's: TensorFlow runs that op only under XLA, so its
 * expected outputs below follow XLA's documented semantics (each start
 * index clamped into [0, input_dim - update_dim]), worked out by hand. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "eng_op.h"
#include "td_opcase.h"

typedef td_tv tv;

static td_code run(const char *op, const char *attrs, int n_in, const tv *in, int n_out,
                   td_err *err) {
  eng_graph *g = eng_graph_create();
  int id = eng_graph_add_node(g, "thenode", op, NULL);
  eng_graph_node(g, id)->n_out = n_out;
  td_opcase_attrs(g, id, attrs);
  eng_tensor t[5] = {0}, out[3] = {0};
  for (int i = 0; i < n_in; i++) td_opcase_tensor(&in[i], &t[i]);
  td_err_clear(err);
  eng_kctx ctx = {.node = eng_graph_node(g, id),
                  .node_id = id,
                  .n_in = n_in,
                  .in = t,
                  .n_out = n_out,
                  .out = out,
                  .err = err};
  td_code rc = eng_op_find(op)->cpu(&ctx);
  for (int i = 0; i < 5; i++) eng_tensor_release(&t[i]);
  for (int i = 0; i < 3; i++) eng_tensor_release(&out[i]);
  eng_graph_destroy(g);
  return rc;
}

#define EXPECT(rc, err, text)                                              \
  do {                                                                     \
    ck_assert_int_eq(rc, TD_INVALID_ARGUMENT);                             \
    ck_assert_msg(strstr((err).msg, "thenode") && strstr((err).msg, text), \
                  "message '%s' lacks '%s'", (err).msg, text);             \
  } while (0)

START_TEST(false_assert_fails_with_its_data) {
  td_err err;
  tv in[] = {{ENG_DT_BOOL, 0, {0}, 1, (const double[]){0}},
             {ENG_DT_INT32, 1, {5}, 5, (const double[]){4, 5, 6, 7, 8}}};
  td_code rc = run("Assert", "summarize=i:2", 2, in, 0, &err);
  EXPECT(rc, err, "assertion failed: [4 5...]");
  tv yes[] = {{ENG_DT_BOOL, 0, {0}, 1, (const double[]){1}}};
  ck_assert_int_eq(run("Assert", "", 1, yes, 0, &err), TD_OK);
  tv notbool[] = {{ENG_DT_INT32, 0, {0}, 1, (const double[]){1}}};
  EXPECT(run("Assert", "", 1, notbool, 0, &err), err, "scalar bool");
}
END_TEST

START_TEST(check_numerics_names_nan_and_inf) {
  td_err err;
  tv nan[] = {{ENG_DT_FLOAT, 1, {3}, 3, (const double[]){1, NAN, 2}}};
  EXPECT(run("CheckNumerics", "message=s:logits", 1, nan, 1, &err), err,
         "logits : Tensor had NaN values");
  tv both[] = {{ENG_DT_FLOAT, 1, {2}, 2, (const double[]){-INFINITY, NAN}}};
  EXPECT(run("CheckNumerics", "", 1, both, 1, &err), err, "Inf and NaN");
}
END_TEST

START_TEST(bad_indices_and_ids_fail_cleanly) {
  td_err err;
  tv scatter[] = {{ENG_DT_INT32, 2, {2, 1}, 2, (const double[]){1, 5}},
                  {ENG_DT_FLOAT, 1, {2}, 2, (const double[]){1, 2}},
                  {ENG_DT_INT32, 1, {1}, 1, (const double[]){4}}};
  EXPECT(run("ScatterNd", "", 3, scatter, 1, &err), err, "indices[1] = 5");
  tv misfit[] = {{ENG_DT_INT32, 2, {2, 1}, 2, (const double[]){1, 2}},
                 {ENG_DT_FLOAT, 1, {3}, 3, (const double[]){1, 2, 3}},
                 {ENG_DT_INT32, 1, {1}, 1, (const double[]){4}}};
  EXPECT(run("ScatterNd", "", 3, misfit, 1, &err), err, "does not fit");
  tv unsorted[] = {{ENG_DT_FLOAT, 1, {3}, 3, (const double[]){1, 2, 3}},
                   {ENG_DT_INT32, 1, {3}, 3, (const double[]){0, 2, 1}}};
  EXPECT(run("SegmentSum", "", 2, unsorted, 1, &err), err, "not increasing");
  tv over[] = {{ENG_DT_FLOAT, 1, {3}, 3, (const double[]){1, 2, 3}},
               {ENG_DT_INT64, 1, {3}, 3, (const double[]){0, 3, 1}},
               {ENG_DT_INT32, 0, {0}, 1, (const double[]){3}}};
  EXPECT(run("UnsortedSegmentMax", "", 3, over, 1, &err), err, "segment_ids[1] = 3");
  tv pick[] = {{ENG_DT_FLOAT, 2, {2, 1}, 2, (const double[]){1, 2}},
               {ENG_DT_INT32, 1, {2}, 2, (const double[]){0, 2}},
               {ENG_DT_INT32, 1, {2}, 2, (const double[]){0, 0}}};
  EXPECT(run("SparseSegmentMean", "", 3, pick, 1, &err), err, "index is out of range");
  tv rank2[] = {{ENG_DT_FLOAT, 2, {1, 2}, 2, (const double[]){1, 2}}};
  EXPECT(run("Unique", "", 1, rank2, 2, &err), err, "1D");
}
END_TEST

/* Runs op on in and compares output 0 with want, element by element. */
static void expect_out(const char *op, const char *attrs, int n_in, const tv *in, const tv *want) {
  eng_graph *g = eng_graph_create();
  int id = eng_graph_add_node(g, "thenode", op, NULL);
  eng_graph_node(g, id)->n_out = 1;
  td_opcase_attrs(g, id, attrs);
  eng_tensor t[5] = {0}, out[1] = {0};
  for (int i = 0; i < n_in; i++) td_opcase_tensor(&in[i], &t[i]);
  td_err err;
  td_err_clear(&err);
  eng_kctx ctx = {.node = eng_graph_node(g, id),
                  .node_id = id,
                  .n_in = n_in,
                  .in = t,
                  .n_out = 1,
                  .out = out,
                  .err = &err};
  ck_assert_msg(eng_op_find(op)->check(ctx.node, &err) == TD_OK, "check: %s", err.msg);
  ck_assert_msg(eng_op_find(op)->cpu(&ctx) == TD_OK, "%s: %s", op, err.msg);
  ck_assert_int_eq(out[0].dtype, want->dt);
  eng_shape ws = eng_shape_make(want->rank, want->dim);
  ck_assert(eng_shape_equal(&out[0].shape, &ws));
  for (int i = 0; i < want->n; i++)
    ck_assert_msg(td_opcase_elem(&out[0], i) == want->v[i], "element %d is %g, want %g", i,
                  td_opcase_elem(&out[0], i), want->v[i]);
  for (int i = 0; i < 5; i++) eng_tensor_release(&t[i]);
  eng_tensor_release(&out[0]);
  eng_graph_destroy(g);
}

#define SEQ16 \
  (const double[]) { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15 }

START_TEST(dynamic_update_slice_clamps_as_xla) {
  const char *at = "T=t:1;Tindices=t:3";
  tv x = {ENG_DT_FLOAT, 2, {4, 4}, 16, SEQ16};
  tv u = {ENG_DT_FLOAT, 2, {2, 2}, 4, (const double[]){100, 101, 102, 103}};
  /* In range: rows 1-2, columns 2-3. */
  tv in1[] = {x, u, {ENG_DT_INT32, 1, {2}, 2, (const double[]){1, 2}}};
  tv want1 = {ENG_DT_FLOAT,
              2,
              {4, 4},
              16,
              (const double[]){0, 1, 2, 3, 4, 5, 100, 101, 8, 9, 102, 103, 12, 13, 14, 15}};
  expect_out("XlaDynamicUpdateSlice", at, 3, in1, &want1);
  /* 3 clamps to 4 - 2 = 2, -1 to 0. */
  tv in2[] = {x, u, {ENG_DT_INT32, 1, {2}, 2, (const double[]){3, -1}}};
  tv want2 = {ENG_DT_FLOAT,
              2,
              {4, 4},
              16,
              (const double[]){0, 1, 2, 3, 4, 5, 6, 7, 100, 101, 10, 11, 102, 103, 14, 15}};
  expect_out("XlaDynamicUpdateSlice", at, 3, in2, &want2);
  /* Rank 3, int32 data, int64 indices: start (5, 1, 0) clamps to (1, 1, 0). */
  tv in3[] = {{ENG_DT_INT32, 3, {2, 3, 2}, 12, SEQ16},
              {ENG_DT_INT32, 3, {1, 2, 2}, 4, (const double[]){-1, -2, -3, -4}},
              {ENG_DT_INT64, 1, {3}, 3, (const double[]){5, 1, 0}}};
  tv want3 = {
      ENG_DT_INT32, 3, {2, 3, 2}, 12, (const double[]){0, 1, 2, 3, 4, 5, 6, 7, -1, -2, -3, -4}};
  expect_out("XlaDynamicUpdateSlice", "T=t:3;Tindices=t:9", 3, in3, &want3);
  /* An update as large as the input: any start clamps to 0. */
  tv in4[] = {{ENG_DT_FLOAT, 1, {3}, 3, (const double[]){1, 2, 3}},
              {ENG_DT_FLOAT, 1, {3}, 3, (const double[]){7, 8, 9}},
              {ENG_DT_INT32, 1, {1}, 1, (const double[]){2}}};
  tv want4 = {ENG_DT_FLOAT, 1, {3}, 3, (const double[]){7, 8, 9}};
  expect_out("XlaDynamicUpdateSlice", at, 3, in4, &want4);
  /* Scalars: no indices, the update replaces the value. */
  tv in5[] = {{ENG_DT_FLOAT, 0, {0}, 1, (const double[]){5}},
              {ENG_DT_FLOAT, 0, {0}, 1, (const double[]){-7}},
              {ENG_DT_INT32, 1, {0}, 0, (const double[]){0}}};
  tv want5 = {ENG_DT_FLOAT, 0, {0}, 1, (const double[]){-7}};
  expect_out("XlaDynamicUpdateSlice", at, 3, in5, &want5);
  /* An empty update leaves the input as it was. */
  tv in6[] = {x,
              {ENG_DT_FLOAT, 2, {0, 2}, 0, (const double[]){0}},
              {ENG_DT_INT32, 1, {2}, 2, (const double[]){9, 9}}};
  tv want6 = {ENG_DT_FLOAT, 2, {4, 4}, 16, SEQ16};
  expect_out("XlaDynamicUpdateSlice", at, 3, in6, &want6);
}
END_TEST

START_TEST(dynamic_update_slice_bad_shapes_fail_cleanly) {
  td_err err;
  tv x = {ENG_DT_FLOAT, 2, {2, 2}, 4, (const double[]){1, 2, 3, 4}};
  tv big[] = {x,
              {ENG_DT_FLOAT, 2, {3, 1}, 3, (const double[]){0, 0, 0}},
              {ENG_DT_INT32, 1, {2}, 2, (const double[]){0, 0}}};
  EXPECT(run("XlaDynamicUpdateSlice", "", 3, big, 1, &err), err,
         "larger than input [2,2] in dim 0");
  tv rank[] = {x,
               {ENG_DT_FLOAT, 1, {2}, 2, (const double[]){0, 0}},
               {ENG_DT_INT32, 1, {2}, 2, (const double[]){0, 0}}};
  EXPECT(run("XlaDynamicUpdateSlice", "", 3, rank, 1, &err), err, "must have the rank");
  tv nix[] = {x, x, {ENG_DT_INT32, 1, {3}, 3, (const double[]){0, 0, 0}}};
  EXPECT(run("XlaDynamicUpdateSlice", "", 3, nix, 1, &err), err, "vector of 2 values");
  tv fix[] = {x, x, {ENG_DT_FLOAT, 1, {2}, 2, (const double[]){0, 0}}};
  EXPECT(run("XlaDynamicUpdateSlice", "", 3, fix, 1, &err), err, "int32 or int64");
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_kernels_scatter");
  TCase *tc = tcase_create("failures");
  tcase_add_test(tc, false_assert_fails_with_its_data);
  tcase_add_test(tc, check_numerics_names_nan_and_inf);
  tcase_add_test(tc, bad_indices_and_ids_fail_cleanly);
  tcase_add_test(tc, dynamic_update_slice_clamps_as_xla);
  tcase_add_test(tc, dynamic_update_slice_bad_shapes_fail_cleanly);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
