/* A residual add fused into a product's epilogue (eng_epilogue.h's
 * EPI_ADD_VALUE): Conv2D (1x1 on the packed GEMM, 3x3 read in place),
 * MatMul, a dense-layer Einsum and their batch-norm pair or bias, then AddV2 with a run-time value
 * (the block's input, another branch's convolution, a feed) and Relu. The fused plan has fewer
 * steps and gives the bits of the same plan with the sum's inputs fetched (which keeps the add out
 * of the epilogue), whole and in batch slices; without an activation after it the add stays a step.
 * An operand of another shape runs as the Add kernel itself (broadcasting, the output growing with
 * it), and one of another dtype fails as that Add fails. Under the isa-generic run the kernels take
 * the BLAS path, whose row-by-row epilogue adds the operand. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_graph.h"
#include "eng_model.h"
#include "eng_plan.h"
#include "td_opcase.h"

static void gconst(eng_graph *g, const char *name, int rank, const int64_t *dims, int salt,
                   float scale) {
  int id = td_opcase_node(g, name, "Const", NULL, 0, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert_int_eq(eng_tensor_alloc(&a->tensor, ENG_DT_FLOAT, &s, NULL), TD_OK);
  float *v = eng_tensor_data(&a->tensor);
  for (int64_t i = 0; i < eng_tensor_numel(&a->tensor); i++)
    v[i] = ((float)((i * 37 + salt * 11) % 29) / 14.0f - 1.0f) * scale;
}

/* A feed of any dtype (none declared). */
static void placeholder(eng_graph *g, const char *name) {
  td_opcase_node(g, name, "Placeholder", NULL, 0, NULL);
}

/* name = Conv2D(x, kxk weight cin -> cout) * s + b (its batch norm). */
static void conv_bn(eng_graph *g, const char *name, const char *x, int k, int64_t cin, int64_t cout,
                    int salt) {
  char w[64], s[64], b[64], c[64], m[64];
  snprintf(w, sizeof w, "%s_w", name);
  snprintf(s, sizeof s, "%s_s", name);
  snprintf(b, sizeof b, "%s_b", name);
  snprintf(c, sizeof c, "%s_conv", name);
  snprintf(m, sizeof m, "%s_mul", name);
  gconst(g, w, 4, (const int64_t[]){k, k, cin, cout}, salt, 0.3f);
  gconst(g, s, 1, &cout, salt + 1, 0.5f);
  gconst(g, b, 1, &cout, salt + 2, 0.2f);
  td_opcase_node(g, c, "Conv2D", "strides=li:1,1,1,1;padding=s:SAME", 2, (const char *[]){x, w});
  td_opcase_node(g, m, "Mul", NULL, 2, (const char *[]){c, s});
  td_opcase_node(g, name, "AddV2", NULL, 2, (const char *[]){m, b});
}

enum { IDENTITY, PROJECTION, FEED, MATMUL, EINSUM };

/* The block: sum = AddV2(main, other), y = Relu(sum). IDENTITY: main is
 * two convolutions of x (3x3, then 1x1), other is x itself (c channels);
 * PROJECTION: other is a 1x1 convolution of x beside them; FEED: main is
 * one 1x1 convolution, other the feed z; MATMUL: main is x [b, c] times a
 * weight plus a bias, other the feed z; EINSUM: main is x [b, t, c] by a
 * dense-layer Einsum plus a bias, other the feed z. swap: AddV2(other,
 * main). Without
 * relu, y = Identity(sum). */
static eng_graph *block_of(int kind, int64_t c, bool swap, bool relu) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  const char *other = "x";
  if (kind == FEED || kind == MATMUL || kind == EINSUM) {
    placeholder(g, "z");
    other = "z";
  }
  if (kind == MATMUL) {
    gconst(g, "mw", 2, (const int64_t[]){c, c + 3}, 1, 0.3f);
    gconst(g, "mb", 1, (const int64_t[]){c + 3}, 2, 0.2f);
    td_opcase_node(g, "mm", "MatMul", NULL, 2, (const char *[]){"x", "mw"});
    td_opcase_node(g, "main", "BiasAdd", NULL, 2, (const char *[]){"mm", "mb"});
  } else if (kind == EINSUM) {
    gconst(g, "ew", 2, (const int64_t[]){c, c + 3}, 1, 0.3f);
    gconst(g, "eb", 1, (const int64_t[]){c + 3}, 2, 0.2f);
    int id = td_opcase_node(g, "ein", "Einsum", NULL, 2, (const char *[]){"x", "ew"});
    eng_attr *a = eng_graph_add_attr(g, id, "equation");
    a->kind = ENG_ATTR_S;
    a->s.data = strdup("abc,cd->abd");
    a->s.len = strlen(a->s.data);
    td_opcase_node(g, "main", "AddV2", NULL, 2, (const char *[]){"ein", "eb"});
  } else if (kind == FEED) {
    conv_bn(g, "main", "x", 1, c, c, 1);
  } else {
    conv_bn(g, "a", "x", 3, c, c, 1);
    td_opcase_node(g, "a_relu", "Relu", NULL, 1, (const char *[]){"a"});
    conv_bn(g, "main", "a_relu", 1, c, c, 4);
    if (kind == PROJECTION) {
      conv_bn(g, "proj", "x", 1, c, c, 7);
      other = "proj";
    }
  }
  td_opcase_node(g, "sum", "AddV2", NULL, 2,
                 swap ? (const char *[]){other, "main"} : (const char *[]){"main", other});
  td_opcase_node(g, "y", relu ? "Relu" : "Identity", NULL, 1, (const char *[]){"sum"});
  return g;
}

static eng_graph *block(int kind, int64_t c, bool swap) { return block_of(kind, c, swap, true); }

static eng_tensor tensor(eng_dtype dt, int rank, const int64_t *dims, int salt) {
  eng_tensor t;
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert_int_eq(eng_tensor_alloc(&t, dt, &s, NULL), TD_OK);
  for (int64_t i = 0; i < eng_tensor_numel(&t); i++) {
    double v = (double)((i * 13 + salt * 7) % 31) / 10.0 - 1.5;
    if (dt == ENG_DT_FLOAT)
      ((float *)eng_tensor_data(&t))[i] = (float)v;
    else
      ((double *)eng_tensor_data(&t))[i] = v;
  }
  return t;
}

/* Runs g (destroyed) on feeds in[0..n_in) ("x:0", then "z:0") fetching
 * y:0, and with `cut` its main and other values too (keeping the add out of
 * any epilogue); *steps gets the plan's step count. Returns the run's
 * code, *y its output, err its message. */
static td_code run(eng_graph *g, int n_in, const eng_tensor *in, bool cut, const char *other,
                   eng_tensor *y, int *steps, td_err *err) {
  eng_model *m;
  ck_assert_msg(eng_model_create(g, NULL, NULL, &m, err) == TD_OK, "%s", err->msg);
  const char *ins[] = {"x:0", "z:0"}, *outs[] = {"y:0", "main:0", other};
  eng_plan *p;
  ck_assert_msg(eng_plan_create(m, n_in, ins, cut ? 3 : 1, outs, 0, NULL, &p, err) == TD_OK, "%s",
                err->msg);
  *steps = eng_plan_get_info(p).steps;
  eng_tensor out[3] = {0};
  td_code rc = eng_plan_run(p, in, out, err);
  *y = out[0];
  eng_tensor_release(&out[1]);
  eng_tensor_release(&out[2]);
  eng_plan_destroy(p);
  eng_model_destroy(m);
  return rc;
}

static void same_bits(const char *what, const eng_tensor *a, const eng_tensor *b) {
  ck_assert_msg(eng_shape_equal(&a->shape, &b->shape), "%s: shapes differ", what);
  const float *x = eng_tensor_data(a), *y = eng_tensor_data(b);
  for (int64_t i = 0; i < eng_tensor_numel(a); i++)
    ck_assert_msg(!memcmp(&x[i], &y[i], sizeof *x), "%s: y[%lld] = %.9g fused, %.9g unfused", what,
                  (long long)i, x[i], y[i]);
}

/* Runs the block fused and cut on the same feeds; the fused plan must take
 * the add (fewer steps) and give the same bits. */
static void check_block(const char *what, int kind, int64_t c, bool swap, int n_in,
                        const eng_tensor *in) {
  const char *other = kind == PROJECTION ? "proj:0" : kind == IDENTITY ? "x:0" : "z:0";
  eng_tensor yf, yu;
  int sf, su;
  td_err err;
  ck_assert_msg(run(block(kind, c, swap), n_in, in, false, other, &yf, &sf, &err) == TD_OK,
                "%s: %s", what, err.msg);
  ck_assert_msg(run(block(kind, c, swap), n_in, in, true, other, &yu, &su, &err) == TD_OK, "%s: %s",
                what, err.msg);
  ck_assert_msg(sf + 2 == su, "%s: %d steps fused, %d cut", what, sf, su);
  same_bits(what, &yf, &yu);
  eng_tensor_release(&yf);
  eng_tensor_release(&yu);
}

START_TEST(residual_add_fuses_with_the_same_bits) {
  /* 24 and 40 channels: panels with masked edge columns. Batches of 1
   * (whole) and 6 (decided once, then sliced). */
  const int64_t chans[] = {24, 40};
  const int64_t batches[] = {1, 6};
  const int kinds[] = {IDENTITY, PROJECTION, FEED};
  for (int ci = 0; ci < 2; ci++)
    for (int bi = 0; bi < 2; bi++)
      for (int ki = 0; ki < 3; ki++)
        for (int swap = 0; swap < 2; swap++) {
          int64_t c = chans[ci], b = batches[bi];
          eng_tensor in[2] = {tensor(ENG_DT_FLOAT, 4, (const int64_t[]){b, 9, 7, c}, 1),
                              tensor(ENG_DT_FLOAT, 4, (const int64_t[]){b, 9, 7, c}, 2)};
          char what[96];
          snprintf(what, sizeof what, "kind %d, %lld channels, batch %lld%s", kinds[ki],
                   (long long)c, (long long)b, swap ? ", swapped" : "");
          for (int rep = 0; rep < 3; rep++) /* the slicing decision, then its slices */
            check_block(what, kinds[ki], c, swap, kinds[ki] == FEED ? 2 : 1, in);
          eng_tensor_release(&in[0]);
          eng_tensor_release(&in[1]);
        }
  /* 48x48x64 floats an example: slices of one, three of them. */
  eng_tensor x = tensor(ENG_DT_FLOAT, 4, (const int64_t[]){3, 48, 48, 64}, 3);
  for (int rep = 0; rep < 3; rep++) check_block("sliced", IDENTITY, 64, false, 1, &x);
  eng_tensor_release(&x);
}
END_TEST

START_TEST(no_activation_keeps_the_add) {
  /* A sum that feeds on without a ReLU (MobileNetV2's blocks) stays a step. */
  eng_tensor in[2] = {tensor(ENG_DT_FLOAT, 4, (const int64_t[]){2, 5, 5, 24}, 1),
                      tensor(ENG_DT_FLOAT, 4, (const int64_t[]){2, 5, 5, 24}, 2)};
  eng_tensor yf, yu;
  int sf, su;
  td_err err;
  ck_assert_int_eq(run(block_of(FEED, 24, false, false), 2, in, false, "z:0", &yf, &sf, &err),
                   TD_OK);
  ck_assert_int_eq(run(block_of(FEED, 24, false, false), 2, in, true, "z:0", &yu, &su, &err),
                   TD_OK);
  ck_assert_int_eq(sf, su);
  same_bits("no activation", &yf, &yu);
  eng_tensor_release(&yf);
  eng_tensor_release(&yu);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
}
END_TEST

START_TEST(matmul_takes_a_residual_add) {
  eng_tensor in[2] = {tensor(ENG_DT_FLOAT, 2, (const int64_t[]){5, 20}, 1),
                      tensor(ENG_DT_FLOAT, 2, (const int64_t[]){5, 23}, 2)};
  check_block("matmul", MATMUL, 20, false, 2, in);
  check_block("matmul, swapped", MATMUL, 20, true, 2, in);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
  /* A dense-layer Einsum: z of the output's shape, then of [c + 3] (the
   * product takes the bias, the run loop the add and the ReLU). */
  eng_tensor ein[2] = {tensor(ENG_DT_FLOAT, 3, (const int64_t[]){2, 7, 20}, 1),
                       tensor(ENG_DT_FLOAT, 3, (const int64_t[]){2, 7, 23}, 2)};
  check_block("einsum", EINSUM, 20, false, 2, ein);
  eng_tensor_release(&ein[1]);
  ein[1] = tensor(ENG_DT_FLOAT, 1, (const int64_t[]){23}, 3);
  check_block("einsum, z of [n]", EINSUM, 20, true, 2, ein);
  eng_tensor_release(&ein[0]);
  eng_tensor_release(&ein[1]);
}
END_TEST

START_TEST(another_shape_broadcasts_as_add_does) {
  /* z of [c] (a run-time bias), and z of [2, 6, 5, c] against a batch of
   * one, which grows the output to z's batch. */
  const int64_t c = 24;
  eng_tensor x = tensor(ENG_DT_FLOAT, 4, (const int64_t[]){1, 6, 5, c}, 1);
  eng_tensor zs[2] = {tensor(ENG_DT_FLOAT, 1, &c, 2),
                      tensor(ENG_DT_FLOAT, 4, (const int64_t[]){2, 6, 5, c}, 3)};
  for (int i = 0; i < 2; i++) {
    eng_tensor in[2] = {x, zs[i]};
    check_block(i ? "z grows the batch" : "z of [c]", FEED, c, i == 1, 2, in);
  }
  eng_tensor yf;
  int sf;
  td_err err;
  eng_tensor y2;
  eng_tensor in[2] = {x, zs[1]};
  ck_assert_int_eq(run(block(FEED, c, false), 2, in, false, "z:0", &y2, &sf, &err), TD_OK);
  ck_assert_int_eq(y2.shape.rank, 4);
  ck_assert_int_eq(y2.shape.dim[0], 2);
  eng_tensor_release(&y2);
  /* A double z: the Add's own error, the serving plan intact. */
  eng_tensor zd = tensor(ENG_DT_DOUBLE, 1, &c, 2);
  eng_tensor bad[2] = {x, zd};
  yf = (eng_tensor){0};
  ck_assert_int_eq(run(block(FEED, c, false), 2, bad, false, "z:0", &yf, &sf, &err),
                   TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, "'sum' (AddV2): operands are float and double") != NULL, "%s",
                err.msg);
  ck_assert_ptr_null(yf.buf);
  eng_tensor_release(&zd);
  eng_tensor_release(&x);
  eng_tensor_release(&zs[0]);
  eng_tensor_release(&zs[1]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_residual");
  TCase *tc = tcase_create("residual");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, residual_add_fuses_with_the_same_bits);
  tcase_add_test(tc, no_activation_keeps_the_add);
  tcase_add_test(tc, matmul_takes_a_residual_add);
  tcase_add_test(tc, another_shape_broadcasts_as_add_does);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
