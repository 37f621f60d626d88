/* eng_threads: the kernels that split their work over the engine's pool
 * give the same bits at one and two threads (and three, an odd count) on
 * fixed inputs: the packed GEMM (plain, row pointers with segments, the
 * fused epilogue, B packed per call), depthwise convolution on every code
 * path, and the Conv2D, DepthwiseConv2dNative, MatMul, BatchMatMulV2,
 * Einsum, Pow, elementwise arithmetic (and its trailing-block broadcast
 * against an element-by-element reference), strided copy (Transpose, Pad
 * (its border fill also against an element-by-element reference),
 * Slice, BroadcastTo), Softmax, reduction, BiasAdd, SelectV2 and unary
 * kernels at sizes that take each of their split paths; and a plan whose
 * batch runs as slices side by side (with its classifier run once over the
 * batch after them, or not) gives its whole-batch run's bits. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_dwconv.h"
#include "eng_gemm.h"
#include "eng_graph.h"
#include "eng_model.h"
#include "eng_op.h"
#include "eng_plan.h"
#include "eng_pool.h"
#include "eng_slice.h"
#include "eng_threads.h"
#include "td_opcase.h"

static const int counts[] = {2, 3};

static float val(int64_t i, int salt) {
  return (float)((i * 7919 + salt * 104729) % 2001) / 1000.0f - 1.0f;
}

static float *filled(int64_t n, int salt) {
  float *p = malloc(sizeof *p * (size_t)n);
  for (int64_t i = 0; i < n; i++) p[i] = val(i, salt);
  return p;
}

START_TEST(gemm_same_bits) {
  /* m x n x k: many row blocks; few rows and many panels; one row. */
  const int64_t shapes[][3] = {{500, 96, 64}, {20, 1024, 300}, {1, 2048, 700}, {49, 130, 200}};
  for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
    int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
    float *a = filled(m * k, 1), *b = filled(k * n, 2), *bias = filled(n, 3);
    eng_packed *p = eng_gemm_pack(b, k, n, false);
    if (!p) { /* no vector unit: the packed kernels do not exist here */
      free(a), free(b), free(bias);
      return;
    }
    eng_gemm_epi epi = {2, {{ENG_GEMM_ADD, bias, 0, 0}, {ENG_GEMM_RELU, NULL, 0, 0}}};
    /* A by row pointers, two segments of k/2 each, k/2 apart (overlapping
     * rows, as a convolution's windows overlap). */
    const float **rows = malloc(sizeof *rows * (size_t)m);
    for (int64_t r = 0; r < m; r++) rows[r] = a + r * (k / 2);
    eng_packed *p2 = eng_gemm_pack(b, k / 2 * 2, n, false);
    float *want[3], *got[3];
    for (int v = 0; v < 3; v++) {
      want[v] = malloc(sizeof(float) * (size_t)(m * n));
      got[v] = malloc(sizeof(float) * (size_t)(m * n));
    }
    for (int pass = 0; pass < 3; pass++) {
      eng_threads_set(pass == 0 ? 1 : counts[pass - 1]);
      float **out = pass == 0 ? want : got;
      eng_gemm_run(a, k, m, p, out[0], n, &epi);
      eng_gemm_run_rows(rows, m, 2, k / 2, k / 2, p2, out[1], n, NULL);
      ck_assert(eng_gemm_dynamic(a, k, m, b, n, false, k, n, out[2], n));
      if (pass == 0) continue;
      for (int v = 0; v < 3; v++)
        ck_assert_msg(!memcmp(want[v], got[v], sizeof(float) * (size_t)(m * n)),
                      "variant %d of %lldx%lldx%lld differs at %d threads", v, (long long)m,
                      (long long)n, (long long)k, counts[pass - 1]);
    }
    for (int v = 0; v < 3; v++) free(want[v]), free(got[v]);
    eng_gemm_free(p);
    eng_gemm_free(p2);
    free(rows), free(a), free(b), free(bias);
  }
  eng_threads_set(1);
}
END_TEST

START_TEST(dwconv_same_bits) {
  /* 3x3 stride 1 SAME (the two-row kernel), 5x5 stride 2, an odd height. */
  const eng_conv_geom geoms[] = {{.n = 2,
                                  .h = 30,
                                  .w = 30,
                                  .c = 40,
                                  .kh = 3,
                                  .kw = 3,
                                  .sh = 1,
                                  .sw = 1,
                                  .dh = 1,
                                  .dw = 1,
                                  .oh = 30,
                                  .ow = 30,
                                  .pt = 1,
                                  .pl = 1},
                                 {.n = 1,
                                  .h = 57,
                                  .w = 41,
                                  .c = 24,
                                  .kh = 5,
                                  .kw = 5,
                                  .sh = 2,
                                  .sw = 2,
                                  .dh = 1,
                                  .dw = 1,
                                  .oh = 29,
                                  .ow = 21,
                                  .pt = 2,
                                  .pl = 2},
                                 {.n = 3,
                                  .h = 25,
                                  .w = 25,
                                  .c = 32,
                                  .kh = 3,
                                  .kw = 3,
                                  .sh = 1,
                                  .sw = 1,
                                  .dh = 1,
                                  .dw = 1,
                                  .oh = 23,
                                  .ow = 23,
                                  .pt = 0,
                                  .pl = 0}};
  const eng_isa isas[] = {ENG_ISA_AVX512, ENG_ISA_AVX2, ENG_ISA_GENERIC};
  for (size_t gi = 0; gi < sizeof geoms / sizeof *geoms; gi++) {
    const eng_conv_geom *g = &geoms[gi];
    int64_t nx = g->n * g->h * g->w * g->c, ny = g->n * g->oh * g->ow * g->c;
    float *x = filled(nx, 4), *f = filled(g->kh * g->kw * g->c, 5), *bias = filled(g->c, 6);
    float *want = malloc(sizeof *want * (size_t)ny), *got = malloc(sizeof *got * (size_t)ny);
    eng_gemm_epi epi = {2, {{ENG_GEMM_ADD, bias, 0, 0}, {ENG_GEMM_RELU6, NULL, 0, 0}}};
    for (int ii = 0; ii < 3; ii++) {
      eng_threads_set(1);
      if (!eng_dwconv_run_isa(isas[ii], g, x, f, want, &epi)) continue;
      for (int t = 0; t < 2; t++) {
        eng_threads_set(counts[t]);
        memset(got, 0xff, sizeof *got * (size_t)ny);
        ck_assert(eng_dwconv_run_isa(isas[ii], g, x, f, got, &epi));
        ck_assert_msg(!memcmp(want, got, sizeof *got * (size_t)ny),
                      "depthwise %zu on %s differs at %d threads", gi, eng_isa_name(isas[ii]),
                      counts[t]);
      }
    }
    free(x), free(f), free(bias), free(want), free(got);
  }
  eng_threads_set(1);
}
END_TEST

/* One op on the CPU kernel, input 1 packed for eng_gemm as the compiler
 * packs a constant weight when `pack_k` > 0 (a [pack_k, n] matrix). */
static void run_op(const char *op, const char *attrs, int n_in, const eng_tensor *in,
                   int64_t pack_k, eng_tensor *out) {
  eng_graph *g = eng_graph_create();
  int id = eng_graph_add_node(g, "n", op, NULL);
  td_opcase_attrs(g, id, attrs);
  eng_packed *p = NULL;
  if (pack_k > 0) {
    int64_t n = eng_tensor_numel(&in[1]) / pack_k;
    p = eng_gemm_pack(eng_tensor_data(&in[1]), pack_k, n, false);
  }
  td_err err;
  td_err_clear(&err);
  eng_kctx ctx = {.node = eng_graph_node(g, id),
                  .node_id = id,
                  .n_in = n_in,
                  .in = in,
                  .n_out = 1,
                  .out = out,
                  .err = &err,
                  .packed = p};
  td_code rc = eng_op_find(op)->cpu(&ctx);
  ck_assert_msg(rc == TD_OK, "%s %s: %s", op, attrs, err.msg);
  eng_gemm_free(p);
  eng_graph_destroy(g);
}

static void tensor(eng_tensor *t, int rank, const int64_t *dims, int salt) {
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert_int_eq(eng_tensor_alloc(t, ENG_DT_FLOAT, &s, NULL), TD_OK);
  float *d = eng_tensor_data(t);
  for (int64_t i = 0; i < eng_tensor_numel(t); i++) d[i] = val(i, salt);
}

/* The op at one thread, then at two and three: same shape, same bits. */
static void same_bits(const char *op, const char *attrs, int n_in, const eng_tensor *in,
                      int64_t pack_k) {
  eng_tensor want = {0};
  eng_threads_set(1);
  run_op(op, attrs, n_in, in, pack_k, &want);
  for (int t = 0; t < 2; t++) {
    eng_tensor got = {0};
    eng_threads_set(counts[t]);
    run_op(op, attrs, n_in, in, pack_k, &got);
    ck_assert(eng_shape_equal(&want.shape, &got.shape));
    ck_assert_msg(!memcmp(eng_tensor_data(&want), eng_tensor_data(&got),
                          sizeof(float) * (size_t)eng_tensor_numel(&want)),
                  "%s %s differs at %d threads", op, attrs, counts[t]);
    eng_tensor_release(&got);
  }
  eng_tensor_release(&want);
  eng_threads_set(1);
}

START_TEST(conv2d_same_bits) {
  /* {n, h, w, cin, kh, kw, cout, stride, SAME}: padded 3x3 with many
   * pixels (chunks of pixels), a 7x7 image (the products split), a 1x1, a
   * strided 1x1 (read in place), a 7x7 window with stride 2. */
  const int64_t cases[][9] = {{2, 20, 20, 16, 3, 3, 32, 1, 1},
                              {1, 7, 7, 64, 3, 3, 128, 1, 1},
                              {2, 14, 14, 64, 1, 1, 96, 1, 0},
                              {1, 28, 28, 32, 1, 1, 64, 2, 0},
                              {1, 40, 40, 3, 7, 7, 32, 2, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const int64_t *k = cases[i];
    eng_tensor in[2] = {0};
    int64_t xd[4] = {k[0], k[1], k[2], k[3]}, fd[4] = {k[4], k[5], k[3], k[6]};
    tensor(&in[0], 4, xd, 7);
    tensor(&in[1], 4, fd, 8);
    char attrs[128];
    snprintf(attrs, sizeof attrs, "strides=li:1,%lld,%lld,1;padding=s:%s", (long long)k[7],
             (long long)k[7], k[8] ? "SAME" : "VALID");
    same_bits("Conv2D", attrs, 2, in, k[4] * k[5] * k[3]);
    eng_tensor_release(&in[0]);
    eng_tensor_release(&in[1]);
  }
}
END_TEST

START_TEST(depthwise_op_same_bits) {
  eng_tensor in[2] = {0};
  int64_t xd[4] = {2, 28, 28, 48}, fd[4] = {3, 3, 48, 1};
  tensor(&in[0], 4, xd, 9);
  tensor(&in[1], 4, fd, 10);
  same_bits("DepthwiseConv2dNative", "strides=li:1,1,1,1;padding=s:SAME", 2, in, 0);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
}
END_TEST

START_TEST(matmul_same_bits) {
  eng_tensor in[2] = {0};
  /* A dense layer, weight packed: 128 rows (BERT's sequence) by 768. */
  int64_t ad[2] = {128, 256}, wd[2] = {256, 768};
  tensor(&in[0], 2, ad, 11);
  tensor(&in[1], 2, wd, 12);
  same_bits("MatMul", "", 2, in, 256);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
  /* Attention's batched products: 12 heads (chunks of the batch), and one
   * large product (split inside). */
  int64_t qd[3] = {12, 64, 32}, kd[3] = {12, 64, 32};
  tensor(&in[0], 3, qd, 13);
  tensor(&in[1], 3, kd, 14);
  same_bits("BatchMatMulV2", "adj_y=b:1", 2, in, 0);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
  int64_t bd1[3] = {1, 200, 64}, bd2[3] = {1, 64, 300};
  tensor(&in[0], 3, bd1, 15);
  tensor(&in[1], 3, bd2, 16);
  same_bits("BatchMatMulV2", "", 2, in, 0);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
  /* Einsum in place: attention scores, BTNH,BSNH->BNTS. */
  int64_t ed[4] = {2, 64, 6, 32};
  tensor(&in[0], 4, ed, 17);
  tensor(&in[1], 4, ed, 18);
  same_bits("Einsum", "equation=s:BTNH,BSNH->BNTS", 2, in, 0);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
}
END_TEST

START_TEST(pow_same_bits) {
  eng_tensor in[2] = {0};
  /* GELU's x^3 (a scalar exponent: one long row), then a row broadcast. */
  int64_t xd[2] = {128, 307}, sd[1] = {1}, rd[1] = {307};
  tensor(&in[0], 2, xd, 19);
  tensor(&in[1], 1, sd, 20);
  ((float *)eng_tensor_data(&in[1]))[0] = 3.0f;
  same_bits("Pow", "", 2, in, 0);
  eng_tensor_release(&in[1]);
  tensor(&in[1], 1, rd, 21);
  float *e = eng_tensor_data(&in[1]);
  for (int i = 0; i < 307; i++) e[i] = (float)(i % 5);
  same_bits("Pow", "", 2, in, 0);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
}
END_TEST

START_TEST(binary_same_bits) {
  eng_tensor in[2] = {0};
  /* Equal shapes, a scalar, a bias over the last axis, a per-row scale. */
  int64_t xd[3] = {4, 128, 200}, shapes[][3] = {{4, 128, 200}, {1, 1, 1}, {1, 1, 200}, {4, 128, 1}};
  const char *ops[] = {"AddV2", "Mul", "RealDiv", "Maximum"};
  tensor(&in[0], 3, xd, 22);
  for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) {
    tensor(&in[1], 3, shapes[i], 23 + (int)i);
    same_bits(ops[i], "", 2, in, 0);
    eng_tensor_release(&in[1]);
  }
  eng_tensor_release(&in[0]);
}
END_TEST

START_TEST(binary_tiles_match_elementwise) {
  /* A side that is a block of the output's trailing dims (three channels,
   * with and without leading 1s, two trailing dims, one period longer
   * than the kernel's repeated copy) on either side: element i of the
   * output is x[i] op t[i % numel(t)], at one thread and at two. */
  static const struct {
    int xr, tr;
    int64_t xd[4], td[4];
  } cases[] = {
      {4, 1, {2, 30, 30, 3}, {3}},
      {4, 4, {2, 30, 30, 3}, {1, 1, 1, 3}},
      {4, 2, {2, 30, 30, 3}, {30, 3}},
      {3, 4, {2, 3, 1500}, {1, 1, 1, 1500}},
  };
  const char *ops[] = {"Sub", "RealDiv", "AddV2", "Mul"};
  for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
    for (int left = 0; left < 2; left++)
      for (size_t oi = 0; oi < sizeof ops / sizeof *ops; oi++) {
        eng_tensor x = {0}, t = {0}, in[2], got = {0};
        tensor(&x, cases[ci].xr, cases[ci].xd, 40 + (int)ci);
        tensor(&t, cases[ci].tr, cases[ci].td, 50 + (int)ci);
        const float *xv = eng_tensor_data(&x), *tv = eng_tensor_data(&t);
        for (float *p = eng_tensor_data(&t); p < tv + eng_tensor_numel(&t); p++)
          if (*p == 0) *p = 0.5f; /* no division by zero */
        in[0] = left ? t : x;
        in[1] = left ? x : t;
        int64_t n = eng_tensor_numel(&x), nt = eng_tensor_numel(&t);
        for (int th = 1; th <= 2; th++) {
          eng_threads_set(th);
          run_op(ops[oi], "", 2, in, 0, &got);
          ck_assert_int_eq(eng_tensor_numel(&got), n);
          const float *z = eng_tensor_data(&got);
          for (int64_t i = 0; i < n; i++) {
            float a = left ? tv[i % nt] : xv[i], b = left ? xv[i] : tv[i % nt];
            float want = oi == 0 ? a - b : oi == 1 ? a / b : oi == 2 ? a + b : a * b;
            ck_assert_msg(!memcmp(&want, &z[i], sizeof want),
                          "%s case %zu (%s) at %d threads: element %lld", ops[oi], ci,
                          left ? "tile on the left" : "tile on the right", th, (long long)i);
          }
          eng_tensor_release(&got);
        }
        eng_tensor_release(&x);
        eng_tensor_release(&t);
      }
  eng_threads_set(1);
}
END_TEST

/* A vector of int32 values (a perm, axes, a shape). */
static void ints(eng_tensor *t, int n, const int32_t *v) {
  int64_t d[1] = {n};
  eng_shape s = eng_shape_make(1, d);
  ck_assert_int_eq(eng_tensor_alloc(t, ENG_DT_INT32, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(t), v, sizeof *v * (size_t)n);
}

START_TEST(copies_same_bits) {
  eng_tensor in[3] = {0};
  /* Attention's head split (BTNH -> BNTH) and a rank-2 transpose (strided
   * inner loop), both above the copy's split size. */
  int64_t hd[4] = {4, 128, 6, 32}, md[2] = {300, 257};
  tensor(&in[0], 4, hd, 30);
  ints(&in[1], 4, (const int32_t[]){0, 2, 1, 3});
  same_bits("Transpose", "", 2, in, 0);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
  tensor(&in[0], 2, md, 31);
  ints(&in[1], 2, (const int32_t[]){1, 0});
  same_bits("Transpose", "", 2, in, 0);
  eng_tensor_release(&in[1]);
  /* Pad of an image batch, then a slice of the matrix. */
  int64_t id[4] = {2, 56, 56, 16}, pd[2] = {4, 2};
  eng_tensor img = {0};
  tensor(&img, 4, id, 32);
  eng_shape ps = eng_shape_make(2, pd);
  ck_assert_int_eq(eng_tensor_alloc(&in[2], ENG_DT_INT32, &ps, NULL), TD_OK);
  memcpy(eng_tensor_data(&in[2]), (const int32_t[]){0, 0, 1, 2, 3, 1, 0, 0}, 8 * sizeof(int32_t));
  eng_tensor pin[2] = {img, in[2]};
  same_bits("Pad", "", 2, pin, 0);
  eng_tensor sin_[3] = {in[0]};
  ints(&sin_[1], 2, (const int32_t[]){3, 1});
  ints(&sin_[2], 2, (const int32_t[]){290, 250});
  same_bits("Slice", "", 3, sin_, 0);
  for (int i = 1; i < 3; i++) eng_tensor_release(&sin_[i]);
  eng_tensor_release(&img);
  eng_tensor_release(&in[2]);
  eng_tensor_release(&in[0]);
}
END_TEST

/* Pad and PadV2 fill only the border and copy the rest: each output element
 * is the input's or the constant, whatever the output buffer held before
 * (a recycled buffer of NaNs), with padding on every dim, the batch's and
 * the channels' included, and around an empty dim. */
static void pad_case(const int64_t *xd, int rank, const int32_t *pads, const float *cv) {
  eng_tensor in[3] = {0};
  tensor(&in[0], rank, xd, 33);
  int64_t pd[2] = {rank, 2}, od[ENG_MAX_RANK], n_out = 1;
  eng_shape ps = eng_shape_make(2, pd);
  ck_assert_int_eq(eng_tensor_alloc(&in[1], ENG_DT_INT32, &ps, NULL), TD_OK);
  memcpy(eng_tensor_data(&in[1]), pads, sizeof *pads * (size_t)(2 * rank));
  for (int d = 0; d < rank; d++) n_out *= od[d] = xd[d] + pads[2 * d] + pads[2 * d + 1];
  if (cv) {
    ck_assert_int_eq(eng_tensor_alloc(&in[2], ENG_DT_FLOAT, &(eng_shape){.rank = 0}, NULL), TD_OK);
    *(float *)eng_tensor_data(&in[2]) = *cv;
  }
  eng_tensor junk = {0}, out = {0};
  tensor(&junk, rank, od, 0);
  for (int64_t i = 0; i < n_out; i++) ((float *)eng_tensor_data(&junk))[i] = NAN;
  eng_tensor_release(&junk); /* the buffer the Pad's output is likely to get */
  run_op(cv ? "PadV2" : "Pad", "", cv ? 3 : 2, in, 0, &out);
  const float *y = eng_tensor_data(&out), *x = eng_tensor_data(&in[0]);
  for (int64_t i = 0; i < n_out; i++) {
    int64_t rem = i, xi = 0, xs = 1;
    bool inside = true;
    for (int d = rank - 1; d >= 0; d--) {
      int64_t o = rem % od[d], k = o - pads[2 * d];
      rem /= od[d];
      inside &= k >= 0 && k < xd[d];
      xi += k * xs;
      xs *= xd[d];
    }
    float want = inside ? x[xi] : cv ? *cv : 0.0f;
    ck_assert_msg(!memcmp(&y[i], &want, sizeof want), "pad y[%lld] = %g, want %g", (long long)i,
                  y[i], want);
  }
  eng_tensor_release(&out);
  for (int k = 0; k < 3; k++) eng_tensor_release(&in[k]);
}

START_TEST(pad_fills_the_border) {
  const int32_t p4[8] = {1, 0, 0, 2, 1, 1, 0, 3};
  pad_case((const int64_t[]){2, 3, 4, 5}, 4, p4, NULL);
  pad_case((const int64_t[]){2, 3, 4, 5}, 4, p4, &(float){7.5f});
  pad_case((const int64_t[]){2, 0, 3}, 3, (const int32_t[]){0, 1, 2, 0, 1, 1}, NULL);
  pad_case((const int64_t[]){1, 56, 56, 16}, 4, (const int32_t[]){0, 0, 1, 1, 1, 1, 0, 0}, NULL);
}
END_TEST

START_TEST(broadcast_to_matches_loop) {
  /* [h, 1, w] to [b, h, c, w]: a missing leading dim, a broadcast middle
   * dim, at a size that splits and one that does not. */
  const int64_t sizes[][4] = {{3, 2, 4, 5}, {8, 64, 40, 33}};
  for (int k = 0; k < 2; k++) {
    const int64_t *z = sizes[k];
    eng_tensor in[2] = {0};
    int64_t xd[3] = {z[1], 1, z[3]};
    tensor(&in[0], 3, xd, 40 + k);
    ints(&in[1], 4, (const int32_t[]){(int32_t)z[0], (int32_t)z[1], (int32_t)z[2], (int32_t)z[3]});
    eng_tensor out = {0};
    eng_threads_set(1);
    run_op("BroadcastTo", "", 2, in, 0, &out);
    ck_assert_int_eq(out.shape.rank, 4);
    const float *x = eng_tensor_data(&in[0]), *y = eng_tensor_data(&out);
    for (int64_t b = 0, i = 0; b < z[0]; b++)
      for (int64_t h = 0; h < z[1]; h++)
        for (int64_t c = 0; c < z[2]; c++)
          for (int64_t w = 0; w < z[3]; w++, i++)
            ck_assert_msg(y[i] == x[h * z[3] + w], "element %lld", (long long)i);
    eng_tensor_release(&out);
    same_bits("BroadcastTo", "", 2, in, 0);
    eng_tensor_release(&in[0]);
    eng_tensor_release(&in[1]);
  }
}
END_TEST

START_TEST(rows_same_bits) {
  eng_tensor in[3] = {0};
  /* Softmax over attention's rows; over one long row (one range). */
  int64_t sd[3] = {12, 64, 128}, ld[2] = {2, 20000};
  tensor(&in[0], 3, sd, 50);
  same_bits("Softmax", "", 1, in, 0);
  same_bits("LogSoftmax", "", 1, in, 0);
  same_bits("Tanh", "", 1, in, 0);
  same_bits("Erf", "", 1, in, 0);
  eng_tensor_release(&in[0]);
  tensor(&in[0], 2, ld, 51);
  same_bits("Softmax", "", 1, in, 0);
  eng_tensor_release(&in[0]);
  /* Reductions: LayerNorm's last axis, global pooling's middle axes, the
   * batch axis (reduced outermost: one range), with keep_dims. */
  int64_t rd[2] = {512, 96}, pd[4] = {8, 14, 14, 40};
  tensor(&in[0], 2, rd, 52);
  ints(&in[1], 1, (const int32_t[]){-1});
  same_bits("Mean", "keep_dims=b:1", 2, in, 0);
  same_bits("Max", "", 2, in, 0);
  eng_tensor_release(&in[1]);
  ints(&in[1], 1, (const int32_t[]){0});
  same_bits("Sum", "", 2, in, 0);
  eng_tensor_release(&in[1]);
  eng_tensor_release(&in[0]);
  tensor(&in[0], 4, pd, 53);
  ints(&in[1], 2, (const int32_t[]){1, 2});
  same_bits("Mean", "", 2, in, 0);
  eng_tensor_release(&in[1]);
  /* BiasAdd over channels. */
  int64_t bd[1] = {40};
  tensor(&in[1], 1, bd, 54);
  same_bits("BiasAdd", "", 2, in, 0);
  eng_tensor_release(&in[1]);
  eng_tensor_release(&in[0]);
  /* SelectV2: attention's mask [b, 1, 1, s] against scores [b, n, t, s]. */
  int64_t cd[4] = {4, 1, 1, 128}, vd[4] = {4, 6, 32, 128};
  eng_shape cs = eng_shape_make(4, cd);
  ck_assert_int_eq(eng_tensor_alloc(&in[0], ENG_DT_BOOL, &cs, NULL), TD_OK);
  uint8_t *m = eng_tensor_data(&in[0]);
  for (int64_t i = 0; i < eng_tensor_numel(&in[0]); i++) m[i] = (i * 7) % 5 != 0;
  tensor(&in[1], 4, vd, 55);
  tensor(&in[2], 0, NULL, 56);
  same_bits("SelectV2", "", 3, in, 0);
  for (int i = 0; i < 3; i++) eng_tensor_release(&in[i]);
}
END_TEST

/* Sums over rows that lie one after the other (global pooling's pixels):
 * each output is its rows added in order, as a plain loop adds them, bit for
 * bit, whatever the blocks of rows and columns the kernel walks them in:
 * more rows than one block (inner 70: two column blocks and a tail), the
 * kept batch split over threads, a middle axis with a trailing kept one. */
START_TEST(row_sums_add_in_order) {
  const int64_t shapes[][4] = {{1, 300, 70, 1}, {4, 9, 7, 40}, {3, 33, 5, 1}};
  const int32_t axes[][2] = {{1, 1}, {1, 2}, {1, 1}};
  const int naxes[] = {1, 2, 1};
  for (int k = 0; k < 3; k++) {
    const int64_t *z = shapes[k];
    int rank = z[3] == 1 ? 3 : 4;
    eng_tensor in[2] = {0};
    tensor(&in[0], rank, z, 70 + k);
    ints(&in[1], naxes[k], axes[k]);
    int64_t outer = z[0], rows = naxes[k] == 2 ? z[1] * z[2] : z[1],
            inner = naxes[k] == 2 ? z[3] : z[2];
    const float *x = eng_tensor_data(&in[0]);
    for (int t = 0; t < 3; t++) {
      eng_threads_set(t + 1);
      for (int mean = 0; mean < 2; mean++) {
        eng_tensor out = {0};
        run_op(mean ? "Mean" : "Sum", "", 2, in, 0, &out);
        ck_assert_int_eq(eng_tensor_numel(&out), outer * inner);
        const float *y = eng_tensor_data(&out);
        for (int64_t o = 0; o < outer; o++)
          for (int64_t i = 0; i < inner; i++) {
            float want = 0.0f;
            for (int64_t r = 0; r < rows; r++) want += x[(o * rows + r) * inner + i];
            if (mean) want = want / (float)rows;
            ck_assert_msg(
                y[o * inner + i] == want, "case %d %s at %lld, %d threads: %.9g, want %.9g", k,
                mean ? "Mean" : "Sum", (long long)(o * inner + i), t + 1, y[o * inner + i], want);
          }
        eng_tensor_release(&out);
      }
    }
    eng_tensor_release(&in[0]);
    eng_tensor_release(&in[1]);
  }
}
END_TEST

/* A Const node holding t (the graph takes it). */
static void gconst(eng_graph *g, const char *name, eng_tensor t) {
  int id = td_opcase_node(g, name, "Const", NULL, 0, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  a->tensor = t;
}

/* A rank-0 int32 tensor. */
static void scalar_int(eng_tensor *t, int32_t v) {
  eng_shape s = eng_shape_make(0, NULL);
  ck_assert_int_eq(eng_tensor_alloc(t, ENG_DT_INT32, &s, NULL), TD_OK);
  *(int32_t *)eng_tensor_data(t) = v;
}

/* x [b, 48, 48, 32] scaled by a squeeze-and-excitation gate as Keras
 * writes it: Mean over [1, 2], Reshape to [Shape(m)[0], 1, 1, 32] (the
 * batch read back from the run-time shape), Sigmoid, Mul. With
 * `scale_by_batch` the output is also multiplied by that batch size as a
 * float, which no slicing may change. */
static eng_graph *se_graph(bool scale_by_batch) {
  eng_graph *g = eng_graph_create();
  td_opcase_node(g, "x", "Placeholder", "dtype=t:1", 0, NULL);
  eng_tensor ax = {0}, b0 = {0}, e0 = {0}, st = {0}, one = {0}, ch = {0};
  ints(&ax, 2, (const int32_t[]){1, 2});
  ints(&b0, 1, (const int32_t[]){0});
  ints(&e0, 1, (const int32_t[]){1});
  ints(&st, 1, (const int32_t[]){1});
  scalar_int(&one, 1);
  scalar_int(&ch, 32);
  gconst(g, "ax", ax);
  gconst(g, "b0", b0);
  gconst(g, "e0", e0);
  gconst(g, "st", st);
  gconst(g, "one", one);
  gconst(g, "ch", ch);
  td_opcase_node(g, "m", "Mean", "keep_dims=b:0", 2, (const char *[]){"x", "ax"});
  td_opcase_node(g, "sh", "Shape", "out_type=t:3", 1, (const char *[]){"m"});
  td_opcase_node(g, "n", "StridedSlice", "shrink_axis_mask=i:1", 4,
        (const char *[]){"sh", "b0", "e0", "st"});
  td_opcase_node(g, "pk", "Pack", "N=i:4;axis=i:0", 4, (const char *[]){"n", "one", "one", "ch"});
  td_opcase_node(g, "r", "Reshape", NULL, 2, (const char *[]){"m", "pk"});
  td_opcase_node(g, "gate", "Sigmoid", NULL, 1, (const char *[]){"r"});
  td_opcase_node(g, "y", "Mul", NULL, 2, (const char *[]){"x", "gate"});
  if (scale_by_batch) {
    td_opcase_node(g, "nf", "Cast", "DstT=t:1", 1, (const char *[]){"n"});
    td_opcase_node(g, "z", "Mul", NULL, 2, (const char *[]){"y", "nf"});
  }
  return g;
}

/* Runs g's plan (x:0 -> out; g's x is [b, 48, 48, 32]) at batch 10,
 * whole, then at one to three threads: the first run gives a rank-`rank`
 * output and decides on `want_each` examples per slice, and every run
 * gives its bits. */
static void sliced_same_bits(eng_graph *g, const char *out, int rank, long long want_each,
                             int want_tail) {
  eng_model *m;
  eng_plan *p;
  td_err err;
  ck_assert_msg(eng_model_create(g, NULL, NULL, &m, &err) == TD_OK, "%s", err.msg);
  ck_assert_msg(eng_plan_create(m, 1, (const char *[]){"x:0"}, 1, (const char *[]){out}, 0, NULL,
                                &p, &err) == TD_OK,
                "%s", err.msg);
  eng_tensor x = {0}, want = {0};
  tensor(&x, 4, (const int64_t[]){10, 48, 48, 32}, 62);
  eng_threads_set(1);
  ck_assert_msg(eng_plan_run(p, &x, &want, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(eng_plan_get_info(p).slice_examples, want_each);
  ck_assert_int_eq(eng_plan_get_info(p).tail_steps, want_tail);
  ck_assert_int_eq(want.shape.rank, rank);
  ck_assert_int_eq(want.shape.dim[0], 10);
  for (int t = 1; t <= 3; t++) {
    eng_tensor got = {0};
    eng_threads_set(t);
    ck_assert_msg(eng_plan_run(p, &x, &got, &err) == TD_OK, "%s", err.msg);
    ck_assert(eng_shape_equal(&want.shape, &got.shape));
    ck_assert_msg(!memcmp(eng_tensor_data(&want), eng_tensor_data(&got),
                          sizeof(float) * (size_t)eng_tensor_numel(&want)),
                  "run at %d threads differs from the whole batch", t);
    eng_tensor_release(&got);
  }
  eng_threads_set(1);
  eng_tensor_release(&want);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}

START_TEST(batch_slices_same_bits) {
  /* x [b, 48, 48, 32] -> 3x3 Conv2D + ReLU -> Softmax -> Mean over
   * [1, 2]: no op mixes examples, and at 288 KiB per example a batch of 10
   * runs as slices of 3, 3, 3 and 1 examples, run side by side on the
   * pool's threads. */
  eng_graph *g = eng_graph_create();
  td_opcase_node(g, "x", "Placeholder", "dtype=t:1", 0, NULL);
  eng_tensor w = {0}, ax = {0};
  tensor(&w, 4, (const int64_t[]){3, 3, 32, 32}, 60);
  ints(&ax, 2, (const int32_t[]){1, 2});
  gconst(g, "w", w);
  gconst(g, "ax", ax);
  td_opcase_node(g, "conv", "Conv2D", "strides=li:1,1,1,1;padding=s:SAME", 2,
                 (const char *[]){"x", "w"});
  td_opcase_node(g, "relu", "Relu", NULL, 1, (const char *[]){"conv"});
  td_opcase_node(g, "sm", "Softmax", NULL, 1, (const char *[]){"relu"});
  td_opcase_node(g, "y", "Mean", NULL, 2, (const char *[]){"sm", "ax"});
  sliced_same_bits(g, "y:0", 2, 3, 0);
}
END_TEST

/* x [b, 48, 48, 32] -> the 3x3 Conv2D + ReLU above -> (with mid > 0) a
 * 3x3 Conv2D of stride 8 to mid channels + ReLU -> Mean over [1, 2] -> a
 * dense layer to `classes` (MatMul, BiasAdd) -> Softmax. */
static eng_graph *conv_classifier(int64_t mid, int64_t classes) {
  eng_graph *g = eng_graph_create();
  td_opcase_node(g, "x", "Placeholder", "dtype=t:1", 0, NULL);
  eng_tensor w = {0}, ax = {0}, dw = {0}, db = {0};
  tensor(&w, 4, (const int64_t[]){3, 3, 32, 32}, 60);
  ints(&ax, 2, (const int32_t[]){1, 2});
  tensor(&dw, 2, (const int64_t[]){mid > 0 ? mid : 32, classes}, 61);
  tensor(&db, 1, (const int64_t[]){classes}, 63);
  gconst(g, "w", w);
  gconst(g, "ax", ax);
  gconst(g, "dw", dw);
  gconst(g, "db", db);
  td_opcase_node(g, "conv", "Conv2D", "strides=li:1,1,1,1;padding=s:SAME", 2,
                 (const char *[]){"x", "w"});
  td_opcase_node(g, "relu", "Relu", NULL, 1, (const char *[]){"conv"});
  if (mid > 0) {
    eng_tensor w2 = {0};
    tensor(&w2, 4, (const int64_t[]){3, 3, 32, mid}, 64);
    gconst(g, "w2", w2);
    td_opcase_node(g, "conv2", "Conv2D", "strides=li:1,8,8,1;padding=s:SAME", 2,
                   (const char *[]){"relu", "w2"});
    td_opcase_node(g, "relu2", "Relu", NULL, 1, (const char *[]){"conv2"});
  }
  td_opcase_node(g, "m", "Mean", NULL, 2, (const char *[]){mid > 0 ? "relu2" : "relu", "ax"});
  td_opcase_node(g, "mm", "MatMul", NULL, 2, (const char *[]){"m", "dw"});
  td_opcase_node(g, "logits", "BiasAdd", NULL, 2, (const char *[]){"mm", "db"});
  td_opcase_node(g, "y", "Softmax", NULL, 1, (const char *[]){"logits"});
  return g;
}

START_TEST(batch_slices_run_the_classifier_whole) {
  /* The convolution, Mean over [1, 2], then a dense layer of 512 KiB
   * (MatMul, BiasAdd) and Softmax: the slices run up to the Mean, and
   * the two steps after it once over the batch, from the Means stacked. */
  sliced_same_bits(conv_classifier(0, 4096), "y:0", 2, 3, 2);
}
END_TEST

START_TEST(batch_slices_run_weight_heavy_layers_whole) {
  /* The convolution, then a 3x3 one of stride 8 to 2048 channels (2.4 MB
   * of weights, 288 KiB of output an example), Mean over [1, 2], a dense
   * layer and Softmax: slices of 3 would read that filter once each for
   * 6x6 outputs, so it runs once over the batch with the steps after it
   * (four steps: the ReLUs and the BiasAdd are fused). */
  sliced_same_bits(conv_classifier(2048, 64), "y:0", 2, 3, 4);
}
END_TEST

START_TEST(batch_slices_keras_reshape) {
  /* The gate's Reshape takes each slice's own batch from its run-time
   * shape: the plan slices (288 KiB per example: 3 per slice). */
  sliced_same_bits(se_graph(false), "y:0", 4, 3, 0);
  /* A value computed from that batch that is not such a Reshape keeps
   * the plan whole. */
  sliced_same_bits(se_graph(true), "z:0", 4, -1, 0);
}
END_TEST

START_TEST(slice_size_rule) {
  /* As many examples as fit 1 MiB of the largest activation... */
  ck_assert_int_eq(eng_slice_size(288 << 10, 36 << 10), 3);
  ck_assert_int_eq(eng_slice_size(1, 0), (int64_t)1 << 20);
  /* ...else two, or one where the weights are at most 8x that activation:
   * MobileNetV2 224^2 (a 112x112x96 expansion, 14 MB of weights) runs one
   * example per slice, ResNet50 224^2 (112x112x64, ~100 MB) two. */
  const int64_t mnv2 = 112 * 112 * 96 * 4, rn50 = 112 * 112 * 64 * 4;
  ck_assert_int_eq(eng_slice_size(mnv2, 14000000), 1);
  ck_assert_int_eq(eng_slice_size(rn50, 102000000), ENG_SLICE_MIN);
  ck_assert_int_eq(eng_slice_size(mnv2, ENG_SLICE_WEIGHT_RATIO * mnv2), 1);
  ck_assert_int_eq(eng_slice_size(mnv2, ENG_SLICE_WEIGHT_RATIO * mnv2 + 1), ENG_SLICE_MIN);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_threads");
  TCase *tc = tcase_create("same_bits");
  tcase_add_test(tc, gemm_same_bits);
  tcase_add_test(tc, dwconv_same_bits);
  tcase_add_test(tc, conv2d_same_bits);
  tcase_add_test(tc, depthwise_op_same_bits);
  tcase_add_test(tc, matmul_same_bits);
  tcase_add_test(tc, pow_same_bits);
  tcase_add_test(tc, binary_same_bits);
  tcase_add_test(tc, binary_tiles_match_elementwise);
  tcase_add_test(tc, copies_same_bits);
  tcase_add_test(tc, pad_fills_the_border);
  tcase_add_test(tc, broadcast_to_matches_loop);
  tcase_add_test(tc, rows_same_bits);
  tcase_add_test(tc, row_sums_add_in_order);
  tcase_add_test(tc, batch_slices_same_bits);
  tcase_add_test(tc, batch_slices_run_the_classifier_whole);
  tcase_add_test(tc, batch_slices_run_weight_heavy_layers_whole);
  tcase_add_test(tc, batch_slices_keras_reshape);
  tcase_add_test(tc, slice_size_rule);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
