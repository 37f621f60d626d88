/* eng_profile: a profile counts every CPU step of the profiled model's
 * plans, node by node: once per run when the batch runs whole, once per
 * slice when it runs as slices (on one thread or on the pool's); a fused node is
 * counted in its producer (whose `fused` says how many ops it took in),
 * the shapes are those of the first run, and nothing of another model's
 * runs is counted. One profile at a time. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "eng_graph.h"
#include "eng_model.h"
#include "eng_profile.h"
#include "eng_threads.h"
#include "td_opcase.h"

static void gconst(eng_graph *g, const char *name, int rank, const int64_t *dims, eng_dtype dt) {
  int id = td_opcase_node(g, name, "Const", NULL, 0, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert_int_eq(eng_tensor_alloc(&a->tensor, dt, &s, NULL), TD_OK);
  int64_t n = eng_tensor_numel(&a->tensor);
  for (int64_t i = 0; i < n; i++) {
    if (dt == ENG_DT_FLOAT)
      ((float *)eng_tensor_data(&a->tensor))[i] = (float)((i * 37) % 19) / 16.0f - 0.5f;
    else
      ((int32_t *)eng_tensor_data(&a->tensor))[i] = (int32_t)(i + 1); /* axes 1, 2 */
  }
}

/* x [b, 48, 48, 32] -> 3x3 Conv2D, Relu (fused into it) -> Softmax -> Mean
 * over [1, 2]: separable, 288 KiB an example, so a batch of 10 runs as
 * slices of 3, 3, 3 and 1 (test_eng_threads.c), a batch of 1 whole. */
static void build(eng_model **m, eng_plan **p) {
  eng_graph *g = eng_graph_create();
  td_opcase_node(g, "x", "Placeholder", "dtype=t:1", 0, NULL);
  gconst(g, "w", 4, (const int64_t[]){3, 3, 32, 32}, ENG_DT_FLOAT);
  gconst(g, "ax", 1, (const int64_t[]){2}, ENG_DT_INT32);
  td_opcase_node(g, "conv", "Conv2D", "strides=li:1,1,1,1;padding=s:SAME", 2,
                 (const char *[]){"x", "w"});
  td_opcase_node(g, "relu", "Relu", NULL, 1, (const char *[]){"conv"});
  td_opcase_node(g, "sm", "Softmax", NULL, 1, (const char *[]){"relu"});
  td_opcase_node(g, "y", "Mean", NULL, 2, (const char *[]){"sm", "ax"});
  td_err err;
  ck_assert_msg(eng_model_create(g, NULL, NULL, m, &err) == TD_OK, "%s", err.msg);
  ck_assert_msg(eng_plan_create(*m, 1, (const char *[]){"x:0"}, 1, (const char *[]){"y:0"}, 0, NULL,
                                p, &err) == TD_OK,
                "%s", err.msg);
}

static void run(eng_plan *p, int64_t batch, int times) {
  eng_tensor x = {0};
  eng_shape s = eng_shape_make(4, (const int64_t[]){batch, 48, 48, 32});
  ck_assert_int_eq(eng_tensor_alloc(&x, ENG_DT_FLOAT, &s, NULL), TD_OK);
  float *v = eng_tensor_data(&x);
  for (int64_t i = 0; i < eng_tensor_numel(&x); i++) v[i] = (float)(i % 23) / 8.0f - 1.0f;
  for (int t = 0; t < times; t++) {
    eng_tensor out = {0};
    td_err err;
    ck_assert_msg(eng_plan_run(p, &x, &out, &err) == TD_OK, "%s", err.msg);
    eng_tensor_release(&out);
  }
  eng_tensor_release(&x);
}

static const eng_profile_node *at(const eng_profile *pf, const char *name) {
  int id = eng_graph_find(pf->g, name, strlen(name));
  ck_assert_int_ge(id, 0);
  ck_assert_int_lt(id, pf->n_nodes);
  return &pf->node[id];
}

START_TEST(counts_runs_and_slices) {
  eng_model *m, *other_m;
  eng_plan *p, *other;
  build(&m, &p);
  build(&other_m, &other);
  td_err err;
  ck_assert_ptr_null(eng_profile_end());
  eng_threads_set(1);
  run(p, 10, 1); /* decides slicing outside the profile */
  ck_assert_int_eq(eng_profile_begin(p, &err), TD_OK);
  ck_assert_int_eq(eng_profile_begin(other, &err), TD_FAILED_PRECONDITION);
  run(p, 1, 2);
  run(other, 1, 3);
  eng_profile *pf = eng_profile_end();
  ck_assert_ptr_nonnull(pf);
  ck_assert_ptr_eq(pf->g, eng_model_graph(m));
  const eng_profile_node *conv = at(pf, "conv");
  ck_assert_int_eq(conv->calls, 2);
  ck_assert_int_eq(conv->fused, 1);
  ck_assert_int_ge(conv->ns, 0);
  ck_assert_int_eq(conv->in0.rank, 4);
  ck_assert_int_eq(conv->in0.dim[0], 1);
  ck_assert_int_eq(conv->in1.dim[0], 3);
  ck_assert_int_eq(conv->out.dim[3], 32);
  ck_assert_int_eq(at(pf, "relu")->calls, 0);
  ck_assert_int_eq(at(pf, "sm")->calls, 2);
  ck_assert_int_eq(at(pf, "y")->calls, 2);
  ck_assert_int_eq(at(pf, "y")->out.rank, 2);
  ck_assert_int_eq(at(pf, "y")->in1.rank, 1);
  ck_assert_int_eq(at(pf, "x")->calls, 0); /* fed, not run */
  eng_profile_free(pf);

  /* A batch of 10 runs as four slices, on one thread or on two. */
  for (int t = 1; t <= 2; t++) {
    eng_threads_set(t);
    ck_assert_int_eq(eng_profile_begin(p, &err), TD_OK);
    run(p, 10, 1);
    pf = eng_profile_end();
    ck_assert_int_eq(eng_plan_get_info(p).slice_examples, 3);
    ck_assert_int_eq(at(pf, "conv")->calls, 4);
    ck_assert_int_eq(at(pf, "y")->calls, 4);
    ck_assert_int_le(at(pf, "conv")->in0.dim[0], 3);
    eng_profile_free(pf);
  }
  eng_threads_set(1);
  ck_assert_ptr_null(eng_profile_end());
  eng_plan_destroy(p);
  eng_plan_destroy(other);
  eng_model_destroy(m);
  eng_model_destroy(other_m);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_profile");
  TCase *tc = tcase_create("profile");
  tcase_add_test(tc, counts_runs_and_slices);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
