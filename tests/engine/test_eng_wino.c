/* Winograd F(2x2, 3x3) convolutions (eng_wino.h) against a sum in double:
 * 3x3 Conv2D of stride 1 with SAME, VALID and EXPLICIT padding, odd and
 * even output sizes (tiles past the edge), channel counts that leave
 * masked vector lanes and GEMM panels, batches, a folded batch norm and
 * ReLU, and a residual add in the epilogue. Each plan must run the
 * Winograd form (eng_plan_info.winograd_steps); each output within a
 * rounding bound of the exact sum scaled by the sum of its terms'
 * magnitudes. Filters that do not suit (stride 2, a 5x5 window, few
 * channels, more than 256 x 256 channel pairs) keep the direct form, and the results do not depend
 * on the pool's thread count. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_graph.h"
#include "eng_isa.h"
#include "eng_model.h"
#include "eng_plan.h"
#include "eng_pool.h"
#include "eng_wino.h"
#include "td_opcase.h"

static float val(int64_t i, int salt, float scale) {
  return ((float)((i * 37 + salt * 11) % 29) / 14.0f - 1.0f) * scale;
}

static void gconst(eng_graph *g, const char *name, int rank, const int64_t *dims, int salt,
                   float scale) {
  int id = td_opcase_node(g, name, "Const", NULL, 0, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert_int_eq(eng_tensor_alloc(&a->tensor, ENG_DT_FLOAT, &s, NULL), TD_OK);
  float *v = eng_tensor_data(&a->tensor);
  for (int64_t i = 0; i < eng_tensor_numel(&a->tensor); i++) v[i] = val(i, salt, scale);
}

typedef struct conv_case {
  int64_t n, h, w, cin, cout, k, stride;
  const char *pad;    /* SAME, VALID or EXPLICIT */
  int64_t ep[4];      /* EXPLICIT: top, bottom, left, right */
  bool bn, relu, add; /* y = relu(conv * s + b + z) */
} conv_case;

static int64_t out_dim(const conv_case *cc, int64_t in, int64_t before, int64_t after,
                       int64_t *pb) {
  if (!strcmp(cc->pad, "VALID")) {
    *pb = 0;
    return (in - cc->k) / cc->stride + 1;
  }
  if (!strcmp(cc->pad, "EXPLICIT")) {
    *pb = before;
    return (in + before + after - cc->k) / cc->stride + 1;
  }
  int64_t o = (in + cc->stride - 1) / cc->stride;
  int64_t total = (o - 1) * cc->stride + cc->k - in;
  if (total < 0) total = 0;
  *pb = total / 2;
  return o;
}

static eng_graph *graph_of(const conv_case *cc) {
  eng_graph *g = eng_graph_create();
  td_opcase_node(g, "x", "Placeholder", NULL, 0, NULL);
  td_opcase_node(g, "z", "Placeholder", NULL, 0, NULL);
  gconst(g, "w", 4, (const int64_t[]){cc->k, cc->k, cc->cin, cc->cout}, 1, 0.3f);
  gconst(g, "s", 1, &cc->cout, 2, 0.5f);
  gconst(g, "b", 1, &cc->cout, 3, 0.2f);
  char attrs[160];
  if (!strcmp(cc->pad, "EXPLICIT"))
    snprintf(attrs, sizeof attrs,
             "strides=li:1,%lld,%lld,1;padding=s:EXPLICIT;explicit_paddings=li:0,0,%lld,%lld,%lld,"
             "%lld,0,0",
             (long long)cc->stride, (long long)cc->stride, (long long)cc->ep[0],
             (long long)cc->ep[1], (long long)cc->ep[2], (long long)cc->ep[3]);
  else
    snprintf(attrs, sizeof attrs, "strides=li:1,%lld,%lld,1;padding=s:%s", (long long)cc->stride,
             (long long)cc->stride, cc->pad);
  td_opcase_node(g, "conv", "Conv2D", attrs, 2, (const char *[]){"x", "w"});
  const char *last = "conv";
  if (cc->bn) {
    td_opcase_node(g, "mul", "Mul", NULL, 2, (const char *[]){"conv", "s"});
    td_opcase_node(g, "bias", "AddV2", NULL, 2, (const char *[]){"mul", "b"});
    last = "bias";
  }
  if (cc->add) {
    td_opcase_node(g, "sum", "AddV2", NULL, 2, (const char *[]){last, "z"});
    last = "sum";
  }
  td_opcase_node(g, "y", cc->relu ? "Relu" : "Identity", NULL, 1, (const char *[]){last});
  return g;
}

static eng_tensor tensor(int rank, const int64_t *dims, int salt) {
  eng_tensor t;
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &s, NULL), TD_OK);
  for (int64_t i = 0; i < eng_tensor_numel(&t); i++)
    ((float *)eng_tensor_data(&t))[i] = (float)((i * 13 + salt * 7) % 31) / 10.0f - 1.5f;
  return t;
}

/* Runs the case; *wino gets the plan's Winograd steps. */
static eng_tensor run_case(const conv_case *cc, const eng_tensor *in, int *wino) {
  td_err err;
  eng_model *m;
  ck_assert_msg(eng_model_create(graph_of(cc), NULL, NULL, &m, &err) == TD_OK, "%s", err.msg);
  const char *ins[] = {"x:0", "z:0"}, *outs[] = {"y:0"};
  eng_plan *p;
  ck_assert_msg(eng_plan_create(m, 2, ins, 1, outs, 0, NULL, &p, &err) == TD_OK, "%s", err.msg);
  *wino = eng_plan_get_info(p).winograd_steps;
  eng_tensor y = {0};
  ck_assert_msg(eng_plan_run(p, in, &y, &err) == TD_OK, "%s", err.msg);
  eng_plan_destroy(p);
  eng_model_destroy(m);
  return y;
}

/* The case's output element by element in double: |got - want| within
 * 1e-6 of the sum of its terms' magnitudes (the worst seen, direct or
 * Winograd, is 2.4e-7). Winograd is expected where want_wino says so and
 * the engine has it at all (not on the generic instruction set, nor with
 * TENSORD_ENGINE_WINOGRAD=0). */
static void check_case(const conv_case *cc, bool want_wino) {
  int64_t pt, pl;
  int64_t oh = out_dim(cc, cc->h, cc->ep[0], cc->ep[1], &pt);
  int64_t ow = out_dim(cc, cc->w, cc->ep[2], cc->ep[3], &pl);
  eng_tensor in[2] = {tensor(4, (const int64_t[]){cc->n, cc->h, cc->w, cc->cin}, 1),
                      tensor(4, (const int64_t[]){cc->n, oh, ow, cc->cout}, 2)};
  int wino;
  eng_tensor y = run_case(cc, in, &wino);
  char what[160];
  snprintf(what, sizeof what, "%lldx%lldx%lldx%lld -> %lld, %lldx%lld /%lld %s", (long long)cc->n,
           (long long)cc->h, (long long)cc->w, (long long)cc->cin, (long long)cc->cout,
           (long long)cc->k, (long long)cc->k, (long long)cc->stride, cc->pad);
  bool have = eng_isa_active() != ENG_ISA_GENERIC && eng_wino_enabled();
  ck_assert_msg(wino == (want_wino && have ? 1 : 0), "%s: %d Winograd steps", what, wino);
  ck_assert_int_eq(y.shape.rank, 4);
  ck_assert_msg(y.shape.dim[1] == oh && y.shape.dim[2] == ow && y.shape.dim[3] == cc->cout,
                "%s: output shape", what);
  const float *x = eng_tensor_data(&in[0]), *z = eng_tensor_data(&in[1]);
  const float *got = eng_tensor_data(&y);
  for (int64_t b = 0; b < cc->n; b++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++)
        for (int64_t o = 0; o < cc->cout; o++) {
          double sum = 0, mag = 0;
          for (int64_t a = 0; a < cc->k; a++)
            for (int64_t e = 0; e < cc->k; e++) {
              int64_t iy = i * cc->stride - pt + a, ix = j * cc->stride - pl + e;
              if (iy < 0 || iy >= cc->h || ix < 0 || ix >= cc->w) continue;
              for (int64_t c = 0; c < cc->cin; c++) {
                double t = (double)x[((b * cc->h + iy) * cc->w + ix) * cc->cin + c] *
                           val(((a * cc->k + e) * cc->cin + c) * cc->cout + o, 1, 0.3f);
                sum += t;
                mag += fabs(t);
              }
            }
          if (cc->bn) {
            double s = val(o, 2, 0.5f);
            sum = sum * s + val(o, 3, 0.2f);
            mag = mag * fabs(s) + fabs(val(o, 3, 0.2f));
          }
          int64_t at = ((b * oh + i) * ow + j) * cc->cout + o;
          if (cc->add) {
            sum += z[at];
            mag += fabs(z[at]);
          }
          if (cc->relu && sum < 0) sum = 0;
          double err = fabs(got[at] - sum) / (mag + 1e-3);
          ck_assert_msg(err <= 1e-6, "%s: y[%lld,%lld,%lld,%lld] = %.9g, want %.9g", what,
                        (long long)b, (long long)i, (long long)j, (long long)o, got[at], sum);
        }
  eng_tensor_release(&y);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
}

START_TEST(winograd_matches_the_exact_sum) {
  const conv_case cases[] = {
      {1, 9, 7, 16, 32, 3, 1, "SAME", {0}, true, true, false},
      {2, 8, 8, 24, 40, 3, 1, "VALID", {0}, true, false, false},
      {1, 5, 6, 17, 19, 3, 1, "EXPLICIT", {1, 2, 0, 1}, false, true, false},
      {1, 7, 7, 32, 48, 3, 1, "SAME", {0}, true, true, true},
      {3, 14, 13, 64, 64, 3, 1, "SAME", {0}, true, true, true},
      {1, 1, 1, 16, 16, 3, 1, "SAME", {0}, false, false, false},
      {1, 3, 3, 16, 16, 3, 1, "VALID", {0}, false, false, false},
      {1, 4, 5, 256, 256, 3, 1, "SAME", {0}, true, true, true},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], true);
}
END_TEST

START_TEST(other_filters_stay_direct) {
  const conv_case cases[] = {
      {1, 9, 7, 16, 32, 3, 2, "SAME", {0}, true, true, false},     /* stride 2 */
      {1, 9, 7, 16, 32, 5, 1, "SAME", {0}, true, true, false},     /* 5x5 */
      {1, 9, 7, 8, 32, 3, 1, "SAME", {0}, true, true, false},      /* 8 channels in */
      {1, 9, 7, 16, 8, 3, 1, "SAME", {0}, true, true, false},      /* 8 out */
      {1, 4, 4, 256, 272, 3, 1, "SAME", {0}, false, false, false}, /* 256 x 272 pairs */
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) check_case(&cases[i], false);
}
END_TEST

START_TEST(threads_do_not_change_the_bits) {
  const conv_case cc = {2, 20, 18, 32, 64, 3, 1, "SAME", {0}, true, true, true};
  eng_tensor in[2] = {tensor(4, (const int64_t[]){2, 20, 18, 32}, 1),
                      tensor(4, (const int64_t[]){2, 20, 18, 64}, 2)};
  eng_tensor y[3];
  for (int t = 1; t <= 3; t++) {
    eng_pool_set_threads(t);
    int wino;
    y[t - 1] = run_case(&cc, in, &wino);
    ck_assert_int_eq(wino, eng_isa_active() != ENG_ISA_GENERIC && eng_wino_enabled());
  }
  for (int t = 1; t < 3; t++)
    ck_assert_msg(!memcmp(eng_tensor_data(&y[0]), eng_tensor_data(&y[t]), eng_tensor_nbytes(&y[0])),
                  "%d threads differ from one", t + 1);
  eng_pool_set_threads(1);
  for (int t = 0; t < 3; t++) eng_tensor_release(&y[t]);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_wino");
  TCase *tc = tcase_create("wino");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, winograd_matches_the_exact_sum);
  tcase_add_test(tc, other_filters_stay_direct);
  tcase_add_test(tc, threads_do_not_change_the_bits);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
