/* eng_epilogue's swish and GELU. Swish: a Conv2D (1x1 on the packed GEMM, 3x3 in place),
 * a depthwise convolution (multiplier 1 on eng_dwconv, 2 row by row) and
 * a MatMul followed by a batch-norm pair and Keras's silu (Mul by beta,
 * Sigmoid, Mul, IdentityN) fuse the swish into the producer's epilogue and
 * give the same bits as the unfused Sigmoid and Mul kernels (the same
 * graph with the pre-swish value fetched, which keeps the swish out of the
 * epilogue). The GEMM and depthwise kernels of every instruction set this
 * CPU has (AVX2 on an AVX-512 CPU included) match eng_vmath_sigmoid too.
 * GELU (TensorFlow's tanh and exact forms): after a MatMul's bias and
 * after a dense-layer Einsum's, fused into the product's epilogue with the
 * bits of the separate kernels; the GEMM kernels and the row-by-row
 * epilogue match eng_vmath_powi, eng_vmath_tanh and eng_vmath_erfc on
 * edge values. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_dwconv.h"
#include "eng_gemm.h"
#include "eng_graph.h"
#include "eng_model.h"
#include "eng_plan.h"
#include "eng_vmath.h"
#include "td_opcase.h"

/* Values in [-6, 6], so that sigmoid's both tails and its middle occur. */
static float val(int64_t i, int salt) { return (float)((i * 37 + salt * 13) % 97) / 8.0f - 6.0f; }

static eng_tensor filled(int rank, const int64_t *dims, int salt, float scale) {
  eng_shape s = eng_shape_make(rank, dims);
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &s, NULL), TD_OK);
  float *v = eng_tensor_data(&t);
  for (int64_t i = 0; i < eng_tensor_numel(&t); i++) v[i] = val(i, salt) * scale;
  return t;
}

static void konst(eng_graph *g, const char *name, int rank, const int64_t *dims, int salt,
                  float scale) {
  int id = td_opcase_vnode(g, name, "Const", 1, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  a->tensor = filled(rank, dims, salt, scale);
}

static void str_attr(eng_graph *g, int id, const char *name, const char *v) {
  eng_attr *a = eng_graph_add_attr(g, id, name);
  a->kind = ENG_ATTR_S;
  a->s.data = strdup(v);
  a->s.len = strlen(v);
}

static void ones_attr(eng_graph *g, int id, const char *name) {
  eng_attr *a = eng_graph_add_attr(g, id, name);
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_I;
  a->n = 4;
  a->li = calloc(4, sizeof *a->li);
  for (int i = 0; i < 4; i++) a->li[i] = 1;
}

enum { CONV, DEPTHWISE, MATMUL };

/* x -> op(W) -> * s + b = v -> silu(v); with_beta: Keras's form (Mul by
 * beta, IdentityN), else Sigmoid(v) * v. */
static eng_graph *silu_graph(int kind, const int64_t *wd, int wrank, float beta, bool with_beta) {
  eng_graph *g = eng_graph_create();
  int x = td_opcase_vnode(g, "x", "Placeholder", 1, NULL);
  eng_attr *a = eng_graph_add_attr(g, x, "dtype");
  a->kind = ENG_ATTR_TYPE;
  a->type = ENG_DT_FLOAT;
  konst(g, "W", wrank, wd, 1, 0.05f);
  int64_t ch = kind == CONV ? wd[3] : kind == DEPTHWISE ? wd[2] * wd[3] : wd[1];
  konst(g, "s", 1, &ch, 2, 0.1f);
  konst(g, "b", 1, &ch, 3, 0.5f);
  int c = td_opcase_vnode(g, "op",
                          kind == CONV        ? "Conv2D"
                          : kind == DEPTHWISE ? "DepthwiseConv2dNative"
                                              : "MatMul",
                          1, "x", "W", NULL);
  if (kind != MATMUL) {
    ones_attr(g, c, "strides");
    str_attr(g, c, "padding", "SAME");
  }
  td_opcase_vnode(g, "bn_mul", "Mul", 1, "op", "s", NULL);
  td_opcase_vnode(g, "v", "AddV2", 1, "bn_mul", "b", NULL);
  if (with_beta) {
    int id = td_opcase_vnode(g, "beta", "Const", 1, NULL);
    a = eng_graph_add_attr(g, id, "value");
    a->kind = ENG_ATTR_TENSOR;
    ck_assert_int_eq(eng_tensor_alloc(&a->tensor, ENG_DT_FLOAT, &(eng_shape){.rank = 0}, NULL),
                     TD_OK);
    *(float *)eng_tensor_data(&a->tensor) = beta;
    td_opcase_vnode(g, "t", "Mul", 1, "beta", "v", NULL);
    td_opcase_vnode(g, "sig", "Sigmoid", 1, "t", NULL);
    td_opcase_vnode(g, "y", "Mul", 1, "v", "sig", NULL);
    td_opcase_vnode(g, "out", "IdentityN", 3, "y", "v", "beta", NULL);
  } else {
    td_opcase_vnode(g, "sig", "Sigmoid", 1, "v", NULL);
    td_opcase_vnode(g, "y", "Mul", 1, "sig", "v", NULL);
    td_opcase_vnode(g, "out", "Identity", 1, "y", NULL);
  }
  return g;
}

static eng_tensor run_plan(eng_graph *g, const char *out, const eng_tensor *x, bool unfused,
                           eng_plan_info *info);

static eng_tensor run_silu(int kind, const int64_t *wd, int wrank, float beta, bool with_beta,
                           const eng_tensor *x, bool unfused, eng_plan_info *info) {
  return run_plan(silu_graph(kind, wd, wrank, beta, with_beta), "out:0", x, unfused, info);
}

static void silu_case(const char *what, int kind, int xrank, const int64_t *xd, int wrank,
                      const int64_t *wd, float beta, bool with_beta) {
  eng_tensor x = filled(xrank, xd, 5, 1.0f);
  eng_plan_info fi, ui;
  eng_tensor yf = run_silu(kind, wd, wrank, beta, with_beta, &x, false, &fi);
  eng_tensor yu = run_silu(kind, wd, wrank, beta, with_beta, &x, true, &ui);
  /* Fused: the producer and nothing else (the Identity aside). */
  ck_assert_msg(fi.steps == (with_beta ? 1 : 2), "%s: %d steps", what, fi.steps);
  ck_assert_msg(ui.steps > fi.steps, "%s: the fetched value did not cut the chain", what);
  ck_assert_int_eq(eng_tensor_numel(&yf), eng_tensor_numel(&yu));
  const float *a = eng_tensor_data(&yf), *b = eng_tensor_data(&yu);
  for (int64_t i = 0; i < eng_tensor_numel(&yf); i++)
    ck_assert_msg(!memcmp(&a[i], &b[i], sizeof *a), "%s: y[%lld] = %.9g fused, %.9g unfused", what,
                  (long long)i, a[i], b[i]);
  eng_tensor_release(&yf);
  eng_tensor_release(&yu);
  eng_tensor_release(&x);
}

START_TEST(swish_fuses_with_the_same_bits) {
  /* 40 output channels: a full panel and an 8-wide one (AVX2's kernel on
   * an AVX-512 CPU). */
  silu_case("1x1 conv", CONV, 4, (int64_t[]){2, 5, 3, 24}, 4, (int64_t[]){1, 1, 24, 40}, 1, true);
  silu_case("3x3 conv", CONV, 4, (int64_t[]){1, 6, 7, 5}, 4, (int64_t[]){3, 3, 5, 21}, 1, true);
  silu_case("depthwise", DEPTHWISE, 4, (int64_t[]){1, 7, 9, 20}, 4, (int64_t[]){3, 3, 20, 1}, 1,
            true);
  silu_case("depthwise x2", DEPTHWISE, 4, (int64_t[]){1, 4, 5, 6}, 4, (int64_t[]){3, 3, 6, 2}, 1,
            true);
  silu_case("dense", MATMUL, 2, (int64_t[]){13, 30}, 2, (int64_t[]){30, 19}, 1, true);
  silu_case("beta 1.5", CONV, 4, (int64_t[]){1, 4, 4, 8}, 4, (int64_t[]){1, 1, 8, 17}, 1.5f, true);
  silu_case("x * sigmoid(x)", CONV, 4, (int64_t[]){1, 4, 4, 8}, 4, (int64_t[]){1, 1, 8, 17}, 1,
            false);
}
END_TEST

/* The kernels directly, on every instruction set this CPU runs: epilogue
 * swish against the product stored, then eng_vmath_sigmoid and a multiply. */
START_TEST(kernels_match_vmath_sigmoid) {
  enum { M = 29, K = 11, N = 45 };
  eng_tensor a = filled(2, (int64_t[]){M, K}, 1, 0.7f), b = filled(2, (int64_t[]){K, N}, 2, 0.7f);
  float want[M * N], got[M * N], sg[M * N];
  eng_gemm_epi swish = {.n = 1, .op = {{.kind = ENG_GEMM_SWISH, .s = 1.0f}}};
  const eng_isa isas[] = {ENG_ISA_AVX512, ENG_ISA_AVX2};
  for (int i = 0; i < 2; i++) {
    eng_packed *pk = eng_gemm_pack_isa(isas[i], eng_tensor_data(&b), K, N, false, NULL, 0);
    if (!pk) continue;
    eng_gemm_run(eng_tensor_data(&a), K, M, pk, want, N, NULL);
    eng_vmath_sigmoid(want, sg, M * N);
    for (int j = 0; j < M * N; j++) want[j] = want[j] * sg[j];
    eng_gemm_run(eng_tensor_data(&a), K, M, pk, got, N, &swish);
    ck_assert_msg(!memcmp(want, got, sizeof want), "gemm %s", eng_isa_name(isas[i]));
    eng_gemm_free(pk);
  }
  eng_conv_geom g = {.n = 1,
                     .h = 5,
                     .w = 9,
                     .c = 19,
                     .kh = 3,
                     .kw = 3,
                     .sh = 1,
                     .sw = 1,
                     .dh = 1,
                     .dw = 1,
                     .oh = 5,
                     .ow = 9,
                     .pt = 1,
                     .pl = 1};
  eng_tensor x = filled(4, (int64_t[]){1, 5, 9, 19}, 3, 1.0f);
  eng_tensor f = filled(3, (int64_t[]){3, 3, 19}, 4, 0.3f);
  const eng_isa dw_isas[] = {ENG_ISA_AVX512, ENG_ISA_AVX2, ENG_ISA_GENERIC};
  for (int i = 0; i < 3; i++) {
    if (!eng_dwconv_run_isa(dw_isas[i], &g, eng_tensor_data(&x), eng_tensor_data(&f), want, NULL))
      continue;
    eng_vmath_sigmoid(want, sg, 5 * 9 * 19);
    for (int j = 0; j < 5 * 9 * 19; j++) want[j] = want[j] * sg[j];
    ck_assert(
        eng_dwconv_run_isa(dw_isas[i], &g, eng_tensor_data(&x), eng_tensor_data(&f), got, &swish));
    ck_assert_msg(!memcmp(want, got, sizeof(float) * 5 * 9 * 19), "depthwise %s", eng_isa_name(dw_isas[i]));
  }
  eng_tensor_release(&a);
  eng_tensor_release(&b);
  eng_tensor_release(&x);
  eng_tensor_release(&f);
}
END_TEST

/* --- GELU's tanh form ------------------------------------------------------ */

static void scalar(eng_graph *g, const char *name, float v) {
  int id = td_opcase_vnode(g, name, "Const", 1, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  ck_assert_int_eq(eng_tensor_alloc(&a->tensor, ENG_DT_FLOAT, &(eng_shape){.rank = 0}, NULL),
                   TD_OK);
  *(float *)eng_tensor_data(&a->tensor) = v;
}

/* x -> MatMul(W) (or a dense-layer Einsum) -> bias = v -> TensorFlow's
 * gelu(v, approximate=True) as its graph has it (tests/fixtures' BERT):
 * 0.5 * v * (1 + tanh(0.7978846 * (v + 0.044715 * v^3))). */
static eng_graph *gelu_graph(bool einsum, bool exact, const int64_t *wd, int wrank,
                             const int64_t *bd, int brank) {
  eng_graph *g = eng_graph_create();
  int x = td_opcase_vnode(g, "x", "Placeholder", 1, NULL);
  eng_attr *a = eng_graph_add_attr(g, x, "dtype");
  a->kind = ENG_ATTR_TYPE;
  a->type = ENG_DT_FLOAT;
  konst(g, "W", wrank, wd, 1, 0.1f);
  konst(g, "b", brank, bd, 3, 0.3f);
  int op = td_opcase_vnode(g, "op", einsum ? "Einsum" : "MatMul", 1, "x", "W", NULL);
  if (einsum) str_attr(g, op, "equation", "abc,cde->abde");
  td_opcase_vnode(g, "v", einsum ? "AddV2" : "BiasAdd", 1, "op", "b", NULL);
  scalar(g, "half", 0.5f);
  td_opcase_vnode(g, "mul", "Mul", 1, "half", "v", NULL);
  if (exact) { /* 0.5 * v * erfc(-v * 0.70710677) */
    scalar(g, "s", 0.7071067811865476f);
    td_opcase_vnode(g, "neg", "Neg", 1, "v", NULL);
    td_opcase_vnode(g, "q", "Mul", 1, "neg", "s", NULL);
    td_opcase_vnode(g, "erfc", "Erfc", 1, "q", NULL);
    td_opcase_vnode(g, "y", "Mul", 1, "mul", "erfc", NULL);
    return g;
  }
  scalar(g, "three", 3.0f);
  scalar(g, "a", 0.044715f);
  scalar(g, "bb", 0.7978845608028654f);
  scalar(g, "one", 1.0f);
  td_opcase_vnode(g, "pow", "Pow", 1, "v", "three", NULL);
  td_opcase_vnode(g, "mul_1", "Mul", 1, "a", "pow", NULL);
  td_opcase_vnode(g, "add", "AddV2", 1, "v", "mul_1", NULL);
  td_opcase_vnode(g, "mul_2", "Mul", 1, "bb", "add", NULL);
  td_opcase_vnode(g, "tanh", "Tanh", 1, "mul_2", NULL);
  td_opcase_vnode(g, "add_1", "AddV2", 1, "one", "tanh", NULL);
  td_opcase_vnode(g, "y", "Mul", 1, "mul", "add_1", NULL);
  return g;
}

/* Runs g's product fetched as `out` (fused), or with its input value v:0
 * fetched too, which keeps the epilogue from fusing (unfused). */
static eng_tensor run_plan(eng_graph *g, const char *out, const eng_tensor *x, bool unfused,
                           eng_plan_info *info) {
  eng_model *m;
  td_err err;
  ck_assert_int_eq(eng_model_create(g, NULL, NULL, &m, &err), TD_OK);
  const char *in[] = {"x:0"}, *outs[] = {out, "v:0"};
  eng_plan *p;
  ck_assert_msg(eng_plan_create(m, 1, in, unfused ? 2 : 1, outs, 0, NULL, &p, &err) == TD_OK, "%s",
                err.msg);
  *info = eng_plan_get_info(p);
  eng_tensor y[2] = {0};
  ck_assert_msg(eng_plan_run(p, x, y, &err) == TD_OK, "%s", err.msg);
  eng_tensor_release(&y[1]);
  eng_plan_destroy(p);
  eng_model_destroy(m);
  return y[0];
}

static void gelu_case(const char *what, bool einsum, bool exact, int xrank, const int64_t *xd,
                      int wrank, const int64_t *wd, int brank, const int64_t *bd) {
  eng_tensor x = filled(xrank, xd, 5, 0.5f);
  eng_plan_info fi, ui;
  eng_tensor yf = run_plan(gelu_graph(einsum, exact, wd, wrank, bd, brank), "y:0", &x, false, &fi);
  eng_tensor yu = run_plan(gelu_graph(einsum, exact, wd, wrank, bd, brank), "y:0", &x, true, &ui);
  /* Fused: the product alone, its bias and the eight (five) GELU ops inside. */
  ck_assert_msg(fi.steps == 1, "%s: %d steps", what, fi.steps);
  ck_assert_msg(ui.steps == (exact ? 6 : 9), "%s: unfused, %d steps", what, ui.steps);
  ck_assert_int_eq(eng_tensor_numel(&yf), eng_tensor_numel(&yu));
  const float *a = eng_tensor_data(&yf), *b = eng_tensor_data(&yu);
  for (int64_t i = 0; i < eng_tensor_numel(&yf); i++)
    ck_assert_msg(!memcmp(&a[i], &b[i], sizeof *a), "%s: y[%lld] = %.9g fused, %.9g unfused", what,
                  (long long)i, a[i], b[i]);
  eng_tensor_release(&yf);
  eng_tensor_release(&yu);
  eng_tensor_release(&x);
}

START_TEST(gelu_fuses_with_the_same_bits) {
  /* 45 columns: a full panel, an 8-wide one and a masked edge. */
  for (int exact = 0; exact < 2; exact++) {
    gelu_case("dense", false, exact, 2, (int64_t[]){29, 30}, 2, (int64_t[]){30, 45}, 1,
              (int64_t[]){45});
    gelu_case("dense, one row", false, exact, 2, (int64_t[]){1, 16}, 2, (int64_t[]){16, 3}, 1,
              (int64_t[]){3});
    /* EinsumDense's query/key/value form, a bias over its two last dims. */
    gelu_case("einsum", true, exact, 3, (int64_t[]){2, 7, 12}, 3, (int64_t[]){12, 3, 10}, 2,
              (int64_t[]){3, 10});
  }
}
END_TEST

/* GELU applied by the row-by-row epilogue and by the GEMM kernels of every
 * instruction set this CPU runs, on inputs that reach tanh's tails, its
 * middle, zeros, infinities, NaN, subnormals and cubes that overflow:
 * each against the product stored, then eng_vmath_powi, eng_vmath_tanh
 * and one multiply or add per op, as the separate kernels compute it. */
static void gelu_ref(const float *x, float *y, int64_t n, const float *c) {
  float *t = calloc((size_t)n, sizeof *t);
  eng_vmath_powi(x, t, n, 3);
  for (int64_t i = 0; i < n; i++) t[i] = c[0] * t[i];
  for (int64_t i = 0; i < n; i++) t[i] = x[i] + t[i];
  for (int64_t i = 0; i < n; i++) t[i] = c[1] * t[i];
  eng_vmath_tanh(t, t, n);
  for (int64_t i = 0; i < n; i++) t[i] = c[2] + t[i];
  for (int64_t i = 0; i < n; i++) y[i] = (c[3] * x[i]) * t[i];
  free(t);
}

static void gelu_erfc_ref(const float *x, float *y, int64_t n, const float *c) {
  float *t = calloc((size_t)n, sizeof *t);
  for (int64_t i = 0; i < n; i++) t[i] = -x[i];
  for (int64_t i = 0; i < n; i++) t[i] = t[i] * c[0];
  eng_vmath_erfc(t, t, n);
  for (int64_t i = 0; i < n; i++) y[i] = (c[1] * x[i]) * t[i];
  free(t);
}

static void same_or_nan(const char *what, const float *want, const float *got, int64_t n) {
  for (int64_t i = 0; i < n; i++)
    ck_assert_msg(!memcmp(&want[i], &got[i], sizeof *got) || (want[i] != want[i] && got[i] != got[i]),
                  "%s: [%lld] = %.9g, want %.9g", what, (long long)i, got[i], want[i]);
}

START_TEST(gelu_kernels_match_the_separate_ops) {
  enum { M = 27, N = 45 };
  static const float ct[4] = {0.044715f, 0.7978845608028654f, 1.0f, 0.5f};
  static const float ce[4] = {0.7071067811865476f, 0.5f, 0, 0};
  static const float edge[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -1e-40f, 1e30f,
                               -1e30f, 3e12f, -3e12f, 1e-20f, 5.0f, -5.0f, 9.5f, -9.5f, 0.5f};
  const int ne = (int)(sizeof edge / sizeof *edge);
  /* A [M, 1] times a row of ones: the product is A's value in every column. */
  float a[M], ones[N], want[M * N], got[M * N], prod[M * N];
  for (int i = 0; i < M; i++) a[i] = i < ne ? edge[i] : val(i, 7) * 0.9f;
  for (int j = 0; j < N; j++) ones[j] = 1.0f;
  for (int exact = 0; exact < 2; exact++) {
  const float *c = exact ? ce : ct;
  void (*ref)(const float *, float *, int64_t, const float *) = exact ? gelu_erfc_ref : gelu_ref;
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) prod[i * N + j] = a[i];
  ref(prod, want, M * N, c);
  /* The row-by-row epilogue (eng_epilogue_apply). */
  eng_epilogue e = {.n = 1};
  e.op[0].kind = exact ? EPI_GELU_ERFC : EPI_GELU_TANH;
  memcpy(e.op[0].c, c, sizeof e.op[0].c);
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &(eng_shape){.rank = 2, .dim = {M, N}}, NULL),
                   TD_OK);
  memcpy(eng_tensor_data(&t), prod, sizeof prod);
  eng_epilogue_apply(&e, &t, NULL);
  same_or_nan("rows", want, eng_tensor_data(&t), M * N);
  eng_tensor_release(&t);
  eng_gemm_epi gelu = {.n = 1,
                       .op = {{.kind = exact ? ENG_GEMM_GELU_ERFC : ENG_GEMM_GELU_TANH, .k = c}}};
  const eng_isa isas[] = {ENG_ISA_AVX512, ENG_ISA_AVX2};
  for (int i = 0; i < 2; i++) {
    eng_packed *pk = eng_gemm_pack_isa(isas[i], ones, 1, N, false, NULL, 0);
    if (!pk) continue;
    /* The product as stored (it sums from +0: -0 comes out +0). */
    eng_gemm_run(a, 1, M, pk, prod, N, NULL);
    ref(prod, want, M * N, c);
    eng_gemm_run(a, 1, M, pk, got, N, &gelu);
    same_or_nan(eng_isa_name(isas[i]), want, got, M * N);
    eng_gemm_free(pk);
  }
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_epilogue");
  TCase *tc = tcase_create("swish");
  tcase_add_test(tc, swish_fuses_with_the_same_bits);
  tcase_add_test(tc, kernels_match_vmath_sigmoid);
  suite_add_tcase(s, tc);
  TCase *tg = tcase_create("gelu");
  tcase_add_test(tg, gelu_fuses_with_the_same_bits);
  tcase_add_test(tg, gelu_kernels_match_the_separate_ops);
  suite_add_tcase(s, tg);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
