/* eng_dwconv: every code path (AVX-512, AVX2, scalar; those eng_isa allows)
 * against a plain loop in double, over odd image sizes, batch 1 and 2,
 * channel counts around the vector widths, 1x1 / 3x3 / 5x5 / 2x3 windows,
 * strides 1 and 2, dilation 2, SAME / VALID / asymmetric padding, rows
 * whose interior pixels end in groups of 8, 4, 2 and 1, and the in-register
 * epilogue; and every vector path bit for bit against the scalar loop,
 * which sums the same taps in the same order; and the banded expansion
 * and depthwise pair bit for bit against the two calls apart. */
#include <check.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_dwconv.h"
#include "eng_pool.h"

static float val(int64_t i, int salt) { return (float)((i * 37 + salt * 11) % 23) / 8.0f - 1.3f; }

/* TF's SAME padding for one dimension: output count and padding before. */
static void same(int64_t in, int64_t k, int64_t s, int64_t d, int64_t *out, int64_t *before) {
  int64_t eff = (k - 1) * d + 1;
  *out = (in + s - 1) / s;
  int64_t total = (*out - 1) * s + eff - in;
  *before = total > 0 ? total / 2 : 0;
}

static void check_case(eng_isa isa, int64_t n, int64_t h, int64_t w, int64_t c, int64_t kh,
                       int64_t kw, int64_t s, int64_t d, int pad, bool with_epi) {
  eng_conv_geom g = {.n = n, .h = h, .w = w, .c = c, .kh = kh, .kw = kw, .sh = s, .sw = s,
                     .dh = d, .dw = d};
  if (pad == 0) { /* VALID */
    g.oh = (h - ((kh - 1) * d + 1) + s) / s;
    g.ow = (w - ((kw - 1) * d + 1) + s) / s;
  } else if (pad == 1) { /* SAME */
    same(h, kh, s, d, &g.oh, &g.pt);
    same(w, kw, s, d, &g.ow, &g.pl);
  } else { /* EXPLICIT, lopsided: 2 before, 0 after */
    g.pt = g.pl = 2;
    g.oh = (h + 2 - ((kh - 1) * d + 1) + s) / s;
    g.ow = (w + 2 - ((kw - 1) * d + 1) + s) / s;
  }
  if (g.oh <= 0 || g.ow <= 0) return;
  int64_t nx = n * h * w * c, nf = kh * kw * c, ny = n * g.oh * g.ow * c;
  float *x = malloc(sizeof *x * (size_t)nx), *f = malloc(sizeof *f * (size_t)nf);
  float *y = malloc(sizeof *y * (size_t)ny), *bias = malloc(sizeof *bias * (size_t)c);
  for (int64_t i = 0; i < nx; i++) x[i] = val(i, 1);
  for (int64_t i = 0; i < nf; i++) f[i] = val(i, 2);
  for (int64_t i = 0; i < c; i++) bias[i] = val(i, 3);
  for (int64_t i = 0; i < ny; i++) y[i] = NAN; /* every element must be written */
  eng_gemm_epi epi = {
      3, {{ENG_GEMM_MUL, NULL, 1.5f, 0}, {ENG_GEMM_ADD, bias, 0, 0}, {ENG_GEMM_RELU6, NULL, 0, 0}}};
  if (!eng_dwconv_run_isa(isa, &g, x, f, y, with_epi ? &epi : NULL)) goto out;
  for (int64_t b = 0; b < n; b++)
    for (int64_t oh = 0; oh < g.oh; oh++)
      for (int64_t ow = 0; ow < g.ow; ow++)
        for (int64_t ch = 0; ch < c; ch++) {
          double want = 0;
          for (int64_t i = 0; i < kh; i++)
            for (int64_t j = 0; j < kw; j++) {
              int64_t ih = oh * s - g.pt + i * d, iw = ow * s - g.pl + j * d;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              want += (double)x[((b * h + ih) * w + iw) * c + ch] * f[(i * kw + j) * c + ch];
            }
          if (with_epi) {
            want = want * 1.5 + bias[ch];
            want = want > 0 ? (want < 6 ? want : 6) : 0;
          }
          float got = y[((b * g.oh + oh) * g.ow + ow) * c + ch];
          /* Asserted only on a mismatch: check records every assertion it
           * passes, which for each element costs more than the kernel. */
          if (!(fabs(got - want) <= 1e-5 * (1 + fabs(want))))
            ck_abort_msg("%s n%lld %lldx%lld c%lld k%lldx%lld s%lld d%lld pad%d epi%d: "
                         "y[%lld,%lld,%lld,%lld] = %g, want %g",
                         eng_isa_name(isa), (long long)n, (long long)h, (long long)w,
                         (long long)c, (long long)kh, (long long)kw, (long long)s, (long long)d,
                         pad, with_epi, (long long)b, (long long)oh, (long long)ow, (long long)ch,
                         got, want);
        }
out:
  free(x);
  free(f);
  free(y);
  free(bias);
}

START_TEST(matches_naive) {
  static const eng_isa isas[] = {ENG_ISA_AVX512, ENG_ISA_AVX2, ENG_ISA_GENERIC};
  /* 64 and 72: whole steps of the padded edges' eight AVX2 blocks, alone and
   * with a masked block after them. */
  const int64_t cs[] = {1, 3, 8, 16, 17, 40, 64, 72};
  const int64_t wins[][2] = {{3, 3}, {1, 1}, {5, 5}, {2, 3}};
  int cases = 0;
  for (size_t ii = 0; ii < 3; ii++)
    for (size_t ic = 0; ic < sizeof cs / sizeof *cs; ic++)
      for (size_t iw = 0; iw < sizeof wins / sizeof *wins; iw++)
        for (int64_t s = 1; s <= 2; s++)
          for (int pad = 0; pad < 3; pad++) {
            int64_t d = (ic + iw + (size_t)pad) % 4 == 3 ? 2 : 1;
            bool epi = (ic + iw + (size_t)s + (size_t)pad) % 2;
            int64_t n = ic % 2 ? 2 : 1;
            check_case(isas[ii], n, 13, 21, cs[ic], wins[iw][0], wins[iw][1], s, d, pad, epi);
            cases++;
          }
  /* Interior runs that end in groups of four, two and one (12, 6, 15
   * interior pixels). */
  for (size_t ii = 0; ii < 3; ii++)
    for (int64_t w = 14; w <= 17; w += 3) {
      check_case(isas[ii], 1, 5, w, 24, 3, 3, 1, 1, 1, true);
      check_case(isas[ii], 2, 4, w - 6, 16, 3, 3, 1, 1, 1, false);
    }
  /* A row just wide enough for one group of eight interior pixels, and a
   * tiny image where no pixel is interior. */
  check_case(ENG_ISA_AVX512, 1, 3, 10, 16, 3, 3, 1, 1, 1, true);
  check_case(ENG_ISA_AVX2, 1, 3, 10, 16, 3, 3, 1, 1, 1, true);
  check_case(ENG_ISA_AVX512, 1, 2, 2, 5, 3, 3, 1, 1, 1, false);
  check_case(ENG_ISA_AVX2, 1, 2, 2, 5, 3, 3, 1, 1, 1, false);
  ck_assert_int_gt(cases, 0);
}
END_TEST

/* Same bits from every path: the vector kernels (two-row, weights-stationary
 * and per-pixel rows, padded edges over whole and masked steps of channel
 * blocks, full and masked channel blocks) against the scalar loop, with a
 * swish epilogue. */
START_TEST(paths_agree_bitwise) {
  const int64_t cs[] = {16, 24, 40, 72, 136};
  const int64_t ks[] = {3, 5};
  int compared = 0;
  for (size_t ic = 0; ic < sizeof cs / sizeof *cs; ic++)
    for (size_t ik = 0; ik < 2; ik++)
      for (int64_t s = 1; s <= 2; s++)
        for (int64_t w = 19; w <= 37; w += 18) {
          int64_t c = cs[ic], k = ks[ik], h = 9;
          eng_conv_geom g = {.n = 1, .h = h, .w = w, .c = c, .kh = k, .kw = k, .sh = s,
                             .sw = s, .dh = 1, .dw = 1};
          same(h, k, s, 1, &g.oh, &g.pt);
          same(w, k, s, 1, &g.ow, &g.pl);
          int64_t nx = h * w * c, ny = g.oh * g.ow * c;
          float *x = malloc(sizeof *x * (size_t)nx), *f = malloc(sizeof *f * (size_t)(k * k * c));
          float *want = malloc(sizeof *want * (size_t)ny), *got = malloc(sizeof *got * (size_t)ny);
          for (int64_t i = 0; i < nx; i++) x[i] = val(i, 4) * 0.37f;
          for (int64_t i = 0; i < k * k * c; i++) f[i] = val(i, 5) * 0.21f;
          eng_gemm_epi epi = {1, {{ENG_GEMM_SWISH, NULL, 1.0f, 0}}};
          ck_assert(eng_dwconv_run_isa(ENG_ISA_GENERIC, &g, x, f, want, &epi));
          static const eng_isa isas[] = {ENG_ISA_AVX512, ENG_ISA_AVX2};
          for (size_t ii = 0; ii < 2; ii++) {
            memset(got, 0xff, sizeof *got * (size_t)ny);
            if (!eng_dwconv_run_isa(isas[ii], &g, x, f, got, &epi)) continue;
            for (int64_t i = 0; i < ny; i++)
              if (memcmp(&got[i], &want[i], sizeof *got))
                ck_abort_msg("%s %lldx%lld c%lld k%lld s%lld: y[%lld] = %a, scalar %a",
                             eng_isa_name(isas[ii]), (long long)h, (long long)w, (long long)c,
                             (long long)k, (long long)s, (long long)i, got[i], want[i]);
            compared++;
          }
          free(x);
          free(f);
          free(want);
          free(got);
        }
  /* Every vector path this CPU allows was compared. */
  ck_assert_int_eq(compared, 40 * (eng_isa_allows(ENG_ISA_AVX512) + eng_isa_allows(ENG_ISA_AVX2)));
}
END_TEST

START_TEST(default_path_runs) {
  eng_conv_geom g = {.n = 1, .h = 4, .w = 4, .c = 2, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                     .dh = 1, .dw = 1, .oh = 2, .ow = 2};
  float x[32], f[18], y[8];
  for (int i = 0; i < 32; i++) x[i] = 1;
  for (int i = 0; i < 18; i++) f[i] = 0.5f;
  eng_dwconv_run(&g, x, f, y, NULL);
  for (int i = 0; i < 8; i++) ck_assert_float_eq(y[i], 4.5f);
}
END_TEST

/* One banded case: n images of h x w x k, a 1x1 expansion to c channels
 * with a bias and ReLU6, then a kh x kh depthwise window at stride s with
 * padding (pt, pl) before and `after` after, a bias and swish. */
static void check_banded(int64_t n, int64_t h, int64_t w, int64_t k, int64_t c, int64_t kh,
                         int64_t s, int64_t pt, int64_t after) {
  eng_conv_geom g = {.n = n,
                     .h = h,
                     .w = w,
                     .c = c,
                     .kh = kh,
                     .kw = kh,
                     .sh = s,
                     .sw = s,
                     .dh = 1,
                     .dw = 1,
                     .pt = pt,
                     .pl = pt};
  g.oh = (h + pt + after - kh) / s + 1;
  g.ow = (w + pt + after - kh) / s + 1;
  int64_t nx = n * h * w * k, nm = n * h * w * c, ny = n * g.oh * g.ow * c;
  float *x = malloc(sizeof *x * (size_t)nx), *b = malloc(sizeof *b * (size_t)(k * c));
  float *f = malloc(sizeof *f * (size_t)(kh * kh * c)), *mid = malloc(sizeof *mid * (size_t)nm);
  float *bias = malloc(sizeof *bias * (size_t)c), *want = malloc(sizeof *want * (size_t)ny);
  float *got = malloc(sizeof *got * (size_t)ny);
  int64_t room = eng_dwconv_expand_scratch(&g);
  float *scratch = malloc(sizeof *scratch * (size_t)room + 1);
  ck_assert(x && b && f && mid && bias && want && got && scratch);
  for (int64_t i = 0; i < nx; i++) x[i] = val(i, 6) * 0.5f;
  for (int64_t i = 0; i < k * c; i++) b[i] = val(i, 7) * 0.3f;
  for (int64_t i = 0; i < kh * kh * c; i++) f[i] = val(i, 8) * 0.2f;
  for (int64_t i = 0; i < c; i++) bias[i] = val(i, 9) * 0.1f;
  eng_packed *pb = eng_gemm_pack(b, k, c, false);
  if (!pb) { /* generic: nothing packs, nothing fuses */
    free(x), free(b), free(f), free(mid), free(bias), free(want), free(got), free(scratch);
    return;
  }
  eng_gemm_epi ee = {2, {{ENG_GEMM_ADD, bias, 0, 0}, {ENG_GEMM_RELU6, NULL, 0, 0}}};
  eng_gemm_epi de = {2, {{ENG_GEMM_SUB, bias, 0, 0}, {ENG_GEMM_SWISH, NULL, 1.0f, 0}}};
  eng_gemm_run(x, k, n * h * w, pb, mid, c, &ee);
  eng_dwconv_run(&g, mid, f, want, &de);
  memset(got, 0xff, sizeof *got * (size_t)ny);
  eng_dwconv_expand_run(&g, x, pb, &ee, f, got, &de, scratch, room);
  for (int64_t i = 0; i < ny; i++)
    if (memcmp(&got[i], &want[i], sizeof *got))
      ck_abort_msg(
          "n%lld %lldx%lld k%lld c%lld window %lld s%lld pad %lld/%lld: y[%lld] = %a, "
          "apart %a",
          (long long)n, (long long)h, (long long)w, (long long)k, (long long)c, (long long)kh,
          (long long)s, (long long)pt, (long long)after, (long long)i, got[i], want[i]);
  eng_gemm_free(pb);
  free(x), free(b), free(f), free(mid), free(bias), free(want), free(got), free(scratch);
}

/* Bands from one to dozens (the tall images span at least six of this
 * machine's L2-sized bands), MobileNetV2's and EfficientNet's windows and
 * paddings (SAME at stride 1 and 2, Keras's ZeroPadding2D before a VALID
 * stride-2 window), one and two threads (each image's rows split). */
START_TEST(banded_matches_two_calls) {
  int64_t w = 24, c = 40, tall = 3 * eng_isa_l2_bytes() / (w * c * 4) + 5;
  for (int threads = 1; threads <= 2; threads++) {
    eng_pool_set_threads(threads);
    check_banded(1, tall, w, 12, c, 3, 1, 1, 1);      /* 3x3 SAME */
    check_banded(2, tall, w, 12, c, 3, 2, 0, 1);      /* ZeroPadding2D((0, 1), (0, 1)), VALID */
    check_banded(1, tall, w, 12, c, 5, 2, 1, 2);      /* 5x5 SAME at stride 2 */
    check_banded(3, 9, 11, 16, 24, 5, 1, 2, 2);       /* one band per image */
    check_banded(1, 2, 5, 8, 16, 3, 1, 1, 1);         /* fewer rows than the window */
    check_banded(2, tall / 2, 7, 5, 136, 3, 1, 1, 1); /* masked channel blocks */
  }
  eng_pool_set_threads(1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_dwconv");
  TCase *tc = tcase_create("dwconv");
  tcase_add_test(tc, matches_naive);
  tcase_add_test(tc, paths_agree_bitwise);
  tcase_add_test(tc, default_path_runs);
  tcase_add_test(tc, banded_matches_two_calls);
  tcase_set_timeout(tc, 60);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
