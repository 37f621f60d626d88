/* Failure paths of the scatter, segment and check kernels
 * (eng_kernels_scatter.c, eng_kernels_assert.c): a false Assert, a NaN
 * under CheckNumerics, an index or segment id out of range fail with
 * INVALID_ARGUMENT and a message naming the node and the value, never a
 * crash. Their numbers are op cases (test_eng_op.c). */
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

int main(void) {
  Suite *s = suite_create("eng_kernels_scatter");
  TCase *tc = tcase_create("failures");
  tcase_add_test(tc, false_assert_fails_with_its_data);
  tcase_add_test(tc, check_numerics_names_nan_and_inf);
  tcase_add_test(tc, bad_indices_and_ids_fail_cleanly);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
