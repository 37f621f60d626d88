/* Random sources (eng_kernels_random.c): the shape and dtype asked for,
 * values in range (uniform in [0, 1), truncated normal within two standard
 * deviations), a mean far inside generous bounds, two runs that differ; and
 * the op table keeps them out of constant folding. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "eng_op.h"
#include "td_opcase.h"

static td_code draw(const char *op, const char *attrs, const td_tv *shape, eng_tensor *out) {
  eng_graph *g = eng_graph_create();
  int id = eng_graph_add_node(g, "thenode", op, NULL);
  eng_graph_node(g, id)->n_out = 1;
  td_opcase_attrs(g, id, attrs);
  eng_tensor in = {0};
  td_opcase_tensor(shape, &in);
  td_err err;
  td_err_clear(&err);
  eng_kctx ctx = {.node = eng_graph_node(g, id),
                  .node_id = id,
                  .n_in = 1,
                  .in = &in,
                  .n_out = 1,
                  .out = out,
                  .err = &err};
  td_code rc = eng_op_find(op)->cpu(&ctx);
  eng_tensor_release(&in);
  eng_graph_destroy(g);
  return rc;
}

static const td_tv SHAPE = {ENG_DT_INT32, 1, {2}, 2, (const double[]){100, 50}};

START_TEST(uniform_in_unit_interval) {
  eng_tensor a = {0}, b = {0};
  ck_assert_int_eq(draw("RandomUniform", "", &SHAPE, &a), TD_OK);
  ck_assert_int_eq(draw("RandomUniform", "", &SHAPE, &b), TD_OK);
  ck_assert_int_eq(a.dtype, ENG_DT_FLOAT);
  ck_assert_int_eq(a.shape.rank, 2);
  ck_assert_int_eq(a.shape.dim[0], 100);
  ck_assert_int_eq(a.shape.dim[1], 50);
  const float *x = eng_tensor_data(&a), *y = eng_tensor_data(&b);
  double sum = 0;
  int same = 0;
  for (int i = 0; i < 5000; i++) {
    ck_assert(x[i] >= 0.0f && x[i] < 1.0f);
    sum += x[i];
    same += x[i] == y[i];
  }
  ck_assert_msg(fabs(sum / 5000 - 0.5) < 0.05, "mean %g", sum / 5000);
  ck_assert_int_lt(same, 50);
  eng_tensor_release(&a);
  eng_tensor_release(&b);
}
END_TEST

START_TEST(normals_and_truncated) {
  eng_tensor a = {0}, t = {0};
  ck_assert_int_eq(draw("RandomStandardNormal", "dtype=t:2", &SHAPE, &a), TD_OK);
  ck_assert_int_eq(a.dtype, ENG_DT_DOUBLE);
  ck_assert_int_eq(draw("TruncatedNormal", "", &SHAPE, &t), TD_OK);
  const double *x = eng_tensor_data(&a);
  const float *y = eng_tensor_data(&t);
  double sum = 0, sq = 0;
  for (int i = 0; i < 5000; i++) {
    sum += x[i];
    sq += x[i] * x[i];
    ck_assert(fabsf(y[i]) < 2.0f);
  }
  ck_assert_msg(fabs(sum / 5000) < 0.15 && fabs(sq / 5000 - 1.0) < 0.2, "mean %g, square %g",
                sum / 5000, sq / 5000);
  eng_tensor_release(&a);
  eng_tensor_release(&t);
  td_err err;
  ck_assert_int_eq(
      eng_op_find("RandomUniform")->check(&(eng_node){.name = "n", .op = "RandomUniform"}, &err),
      TD_OK);
}
END_TEST

START_TEST(never_folded) {
  const char *ops[] = {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"};
  for (int i = 0; i < 3; i++) ck_assert(eng_op_find(ops[i])->flags & ENG_OP_RANDOM);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_kernels_random");
  TCase *tc = tcase_create("random");
  tcase_add_test(tc, uniform_in_unit_interval);
  tcase_add_test(tc, normals_and_truncated);
  tcase_add_test(tc, never_folded);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
