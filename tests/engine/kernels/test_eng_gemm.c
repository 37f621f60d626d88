/* eng_gemm: packed-weight products against a plain triple loop, over sizes
 * that cover every micro-kernel row count, every panel width (32, 16, 8,
 * and their partial forms), both B layouts, A given by row pointers and
 * segments (as convolutions read their input), columns scaled as they are
 * packed, and the in-register epilogue (per-column vector, scalar, ReLU6);
 * on the AVX-512 and the AVX2 kernels, where the CPU has them; and the
 * products of a B packed per call (eng_gemm_dynamic). */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "eng_gemm.h"

static float val(int64_t i, int salt) { return (float)((i * 37 + salt * 11) % 17) / 8.0f - 1.0f; }

/* Both instruction sets where eng_isa allows them (an AVX-512 CPU runs the
 * AVX2 kernels too). */
static const eng_isa isas[] = {ENG_ISA_AVX512, ENG_ISA_AVX2};

START_TEST(matches_naive) {
  const int64_t ms[] = {1, 2, 5, 6, 7, 13, 25, 49, 50, 53, 100}, ns[] = {1, 8, 15, 16, 17, 24, 32, 33, 56, 70},
                ks[] = {1, 3, 40};
  for (int ii = 0; ii < 2; ii++)
  for (int tb = 0; tb < 2; tb++)
    for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
      for (size_t in = 0; in < sizeof ns / sizeof *ns; in++)
        for (size_t ik = 0; ik < sizeof ks / sizeof *ks; ik++) {
          int64_t m = ms[im], n = ns[in], k = ks[ik];
          float *a = malloc(sizeof *a * (size_t)(m * k)), *b = malloc(sizeof *b * (size_t)(k * n));
          float *c = malloc(sizeof *c * (size_t)(m * n));
          for (int64_t i = 0; i < m * k; i++) a[i] = val(i, 1);
          for (int64_t i = 0; i < k * n; i++) b[i] = val(i, 2);
          eng_packed *p = eng_gemm_pack_isa(isas[ii], b, k, n, tb, NULL, 0);
          if (!p) { /* this CPU lacks the instruction set: nothing to test */
            free(a), free(b), free(c);
            continue;
          }
          ck_assert_int_eq(eng_gemm_k(p), k);
          ck_assert_int_eq(eng_gemm_n(p), n);
          /* Every other case with an epilogue: + bias[j], * 0.5, relu6. */
          float *bias = malloc(sizeof *bias * (size_t)n);
          for (int64_t j = 0; j < n; j++) bias[j] = val(j, 3);
          eng_gemm_epi epi = {3,
                              {{ENG_GEMM_ADD, bias, 0, 0},
                               {ENG_GEMM_MUL, NULL, 0.5f, 0},
                               {ENG_GEMM_RELU6, NULL, 0, 0}}};
          bool with_epi = (m + n + k) % 2;
          eng_gemm_run(a, k, m, p, c, n, with_epi ? &epi : NULL);
          for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
              double want = 0;
              for (int64_t kk = 0; kk < k; kk++)
                want += (double)a[i * k + kk] * (tb ? b[j * k + kk] : b[kk * n + j]);
              if (with_epi) {
                want = (want + bias[j]) * 0.5;
                want = want > 0 ? (want < 6 ? want : 6) : 0;
              }
              ck_assert_msg(fabs(c[i * n + j] - want) <= 1e-4 * (1 + fabs(want)),
                            "%s m%lld n%lld k%lld tb%d: c[%lld,%lld] = %g, want %g",
                            eng_isa_name(isas[ii]), (long long)m, (long long)n, (long long)k, tb,
                            (long long)i, (long long)j, c[i * n + j], want);
            }
          eng_gemm_free(p);
          free(bias);
          free(a);
          free(b);
          free(c);
        }
}
END_TEST

/* However a product's rows are cut into kernel calls (12 rows, 13 for the
 * last calls on AVX-512, the last row block absorbing a short tail, up to
 * 144 rows whose A fits in L2 as one block), each row comes out bit for
 * bit as the same row computed alone. */
START_TEST(row_split_bit_exact) {
  const int64_t ms[] = {13, 25, 49, 52, 100, 128, 144, 145, 196}, n = 70, k = 40;
  float *a = malloc(sizeof *a * (size_t)(196 * k)), *b = malloc(sizeof *b * (size_t)(k * n));
  float *c = malloc(sizeof *c * (size_t)(196 * n)), *one = malloc(sizeof *one * (size_t)n);
  for (int64_t i = 0; i < 196 * k; i++) a[i] = val(i, 4);
  for (int64_t i = 0; i < k * n; i++) b[i] = val(i, 5);
  float bias[70];
  for (int64_t j = 0; j < n; j++) bias[j] = val(j, 6);
  eng_gemm_epi epi = {2, {{ENG_GEMM_ADD, bias, 0, 0}, {ENG_GEMM_RELU, NULL, 0, 0}}};
  for (int ii = 0; ii < 2; ii++) {
    eng_packed *p = eng_gemm_pack_isa(isas[ii], b, k, n, false, NULL, 0);
    if (!p) continue;
    for (size_t im = 0; im < sizeof ms / sizeof *ms; im++) {
      eng_gemm_run(a, k, ms[im], p, c, n, &epi);
      for (int64_t i = 0; i < ms[im]; i++) {
        eng_gemm_run(a + i * k, k, 1, p, one, n, &epi);
        ck_assert_msg(!memcmp(one, c + i * n, sizeof *one * (size_t)n), "%s m%lld row %lld",
                      eng_isa_name(isas[ii]), (long long)ms[im], (long long)i);
      }
    }
    eng_gemm_free(p);
  }
  free(a);
  free(b);
  free(c);
  free(one);
}
END_TEST

/* Run-time B, rows ldb apart: bit for bit what packing it once gives (the
 * same kernels and order), for growing then shrinking sizes (the thread's
 * buffer is reused), both layouts. */
START_TEST(dynamic_matches_packed) {
  const int64_t shapes[][3] = {{2, 16, 16}, {13, 70, 40}, {50, 33, 3}, {7, 8, 1}, {64, 130, 24}};
  for (int tb = 0; tb < 2; tb++)
    for (size_t is = 0; is < sizeof shapes / sizeof *shapes; is++) {
      int64_t m = shapes[is][0], n = shapes[is][1], k = shapes[is][2];
      int64_t rows = tb ? n : k, cols = tb ? k : n, ldb = cols + 5;
      float *a = malloc(sizeof *a * (size_t)(m * k)), *b = malloc(sizeof *b * (size_t)(rows * ldb));
      float *dense = malloc(sizeof *dense * (size_t)(rows * cols));
      float *c = malloc(sizeof *c * (size_t)(m * n)),
            *want = malloc(sizeof *want * (size_t)(m * n));
      for (int64_t i = 0; i < m * k; i++) a[i] = val(i, 4);
      for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < ldb; j++) {
          b[r * ldb + j] = j < cols ? val(r * cols + j, 5) : NAN; /* padding never read */
          if (j < cols) dense[r * cols + j] = b[r * ldb + j];
        }
      eng_packed *p = eng_gemm_pack(dense, k, n, tb);
      bool ran = eng_gemm_dynamic(a, k, m, b, ldb, tb, k, n, c, n);
      ck_assert_int_eq(ran, p != NULL);
      if (p) {
        eng_gemm_run(a, k, m, p, want, n, NULL);
        for (int64_t i = 0; i < m * n; i++)
          ck_assert_msg(c[i] == want[i], "m%lld n%lld k%lld tb%d: c[%lld] = %g, packed %g",
                        (long long)m, (long long)n, (long long)k, tb, (long long)i, c[i], want[i]);
        eng_gemm_free(p);
      } else {
        ck_assert_int_eq(eng_isa_active(), ENG_ISA_GENERIC);
      }
      free(a), free(b), free(dense), free(c), free(want);
    }
}
END_TEST

START_TEST(rows_and_segments) {
  /* A row r is nseg segments of len floats, seg_stride apart, starting at
   * base + r * 5 (rows overlap, as neighbouring convolution windows do). */
  const int64_t ms[] = {1, 6, 7, 31}, ns[] = {3, 8, 24, 40}, segs[][2] = {{1, 4}, {3, 9}, {2, 1}};
  for (int ii = 0; ii < 2; ii++)
  for (size_t im = 0; im < sizeof ms / sizeof *ms; im++)
    for (size_t in = 0; in < sizeof ns / sizeof *ns; in++)
      for (size_t is = 0; is < sizeof segs / sizeof *segs; is++) {
        int64_t m = ms[im], n = ns[in], nseg = segs[is][0], len = segs[is][1], stride = 50;
        int64_t k = nseg * len, span = (m - 1) * 5 + (nseg - 1) * stride + len;
        float *base = malloc(sizeof *base * (size_t)span), *b = malloc(sizeof *b * (size_t)(k * n));
        float *c = malloc(sizeof *c * (size_t)(m * n));
        const float **rows = malloc(sizeof *rows * (size_t)m);
        for (int64_t i = 0; i < span; i++) base[i] = val(i, 4);
        for (int64_t i = 0; i < k * n; i++) b[i] = val(i, 5);
        for (int64_t r = 0; r < m; r++) rows[r] = base + r * 5;
        eng_packed *p = eng_gemm_pack_isa(isas[ii], b, k, n, false, NULL, 0);
        if (!p) {
          free(base), free(b), free(c), free(rows);
          continue;
        }
        eng_gemm_run_rows(rows, m, nseg, stride, len, p, c, n, NULL);
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            double want = 0;
            for (int64_t sg = 0; sg < nseg; sg++)
              for (int64_t t = 0; t < len; t++)
                want += (double)rows[i][sg * stride + t] * b[(sg * len + t) * n + j];
            ck_assert_msg(fabs(c[i * n + j] - want) <= 1e-4 * (1 + fabs(want)),
                          "m%lld n%lld segs %lldx%lld: c[%lld,%lld] = %g, want %g", (long long)m,
                          (long long)n, (long long)nseg, (long long)len, (long long)i,
                          (long long)j, c[i * n + j], want);
          }
        eng_gemm_free(p);
        free(base);
        free(b);
        free(c);
        free(rows);
      }
}
END_TEST

START_TEST(prescaled_columns) {
  /* Scale per column and one scale for all, both B layouts, widths that
   * use every panel kind: C = (A B) diag(s) within rounding. */
  const int64_t ns[] = {5, 8, 24, 40}, m = 7, k = 9;
  for (int ii = 0; ii < 2; ii++)
  for (int tb = 0; tb < 2; tb++)
    for (size_t in = 0; in < sizeof ns / sizeof *ns; in++)
      for (int scalar = 0; scalar < 2; scalar++) {
        int64_t n = ns[in];
        float a[63], b[360], sc[40], c[280];
        for (int64_t i = 0; i < m * k; i++) a[i] = val(i, 6);
        for (int64_t i = 0; i < k * n; i++) b[i] = val(i, 7);
        for (int64_t j = 0; j < n; j++) sc[j] = val(j, 8) * 3;
        eng_packed *p = eng_gemm_pack_isa(isas[ii], b, k, n, tb, sc, scalar ? 1 : n);
        if (!p) continue;
        ck_assert(eng_gemm_prescaled(p));
        eng_gemm_run(a, k, m, p, c, n, NULL);
        for (int64_t i = 0; i < m; i++)
          for (int64_t j = 0; j < n; j++) {
            double want = 0;
            for (int64_t kk = 0; kk < k; kk++)
              want += (double)a[i * k + kk] * (tb ? b[j * k + kk] : b[kk * n + j]);
            want *= sc[scalar ? 0 : j];
            ck_assert_msg(fabs(c[i * n + j] - want) <= 1e-5 * (1 + fabs(want)),
                          "n%lld tb%d scalar%d: c[%lld,%lld] = %g, want %g", (long long)n, tb,
                          scalar, (long long)i, (long long)j, c[i * n + j], want);
          }
        eng_gemm_free(p);
      }
  ck_assert_ptr_null(eng_gemm_pack_scaled((float[]){1, 2}, 1, 2, false, (float[]){1, 2, 3}, 3));
}
END_TEST

/* The summation contract to the bit at a large k, over several row
 * blocks and mixed panel widths: every element must equal the sum over k
 * in order from zero with one fmaf per term, then the epilogue in float;
 * for a plain A and for A read by row pointers in three segments. A change
 * of the kernel that reorders or splits the sum (blocking over k without
 * exact partial sums, a tree reduction) fails here. */
START_TEST(blocked_k_bit_exact) {
  const int64_t m = 50, n = 70, nseg = 3, slen = 1001, k = nseg * slen;
  float *a = malloc(sizeof *a * (size_t)(m * k)), *b = malloc(sizeof *b * (size_t)(k * n));
  float *c = malloc(sizeof *c * (size_t)(m * n)), *bias = malloc(sizeof *bias * (size_t)n);
  float *want = malloc(sizeof *want * (size_t)(m * n));
  const float **rows = malloc(sizeof *rows * (size_t)m);
  for (int64_t i = 0; i < m * k; i++) a[i] = val(i, 5) * 0.37f;
  for (int64_t i = 0; i < k * n; i++) b[i] = val(i, 6) * 1.13f;
  for (int64_t j = 0; j < n; j++) bias[j] = val(j, 7);
  eng_gemm_epi epi = {
      3, {{ENG_GEMM_ADD, bias, 0, 0}, {ENG_GEMM_MUL, NULL, 0.5f, 0}, {ENG_GEMM_RELU6, NULL, 0, 0}}};
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      float s = 0.0f;
      for (int64_t kk = 0; kk < k; kk++) s = fmaf(a[i * k + kk], b[kk * n + j], s);
      s = (s + bias[j]) * 0.5f;
      want[i * n + j] = fminf(fmaxf(s, 0.0f), 6.0f);
    }
  for (int ii = 0; ii < 2; ii++) {
    eng_packed *p = eng_gemm_pack_isa(isas[ii], b, k, n, false, NULL, 0);
    if (!p) continue;
    for (int mode = 0; mode < 2; mode++) {
      for (int64_t i = 0; i < m * n; i++) c[i] = -7.0f;
      if (mode == 0) {
        eng_gemm_run(a, k, m, p, c, n, &epi);
      } else { /* row i's segments slen apart: the same matrix, cut in three */
        for (int64_t i = 0; i < m; i++) rows[i] = a + i * k;
        eng_gemm_run_rows(rows, m, nseg, slen, slen, p, c, n, &epi);
      }
      for (int64_t i = 0; i < m * n; i++)
        ck_assert_msg(c[i] == want[i], "%s mode %d: c[%lld] = %.9g, want %.9g",
                      eng_isa_name(isas[ii]), mode, (long long)i, c[i], want[i]);
    }
    eng_gemm_free(p);
  }
  free(a), free(b), free(c), free(bias), free(want), free(rows);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_gemm");
  TCase *tc = tcase_create("gemm");
  tcase_add_test(tc, matches_naive);
  tcase_add_test(tc, row_split_bit_exact);
  tcase_add_test(tc, rows_and_segments);
  tcase_add_test(tc, prescaled_columns);
  tcase_add_test(tc, dynamic_matches_packed);
  tcase_add_test(tc, blocked_k_bit_exact);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
