/* eng_vmath: each function against libm's scalar version over a sweep of
 * arguments (both tails, zeros, infinities, NaN), at every length from 0 to
 * 40 so that full vectors and every partial last vector are covered, in
 * place and out of place; softmax and log-softmax against double precision;
 * Pow by 2 and 3 against powf. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eng_vmath.h"

typedef void (*vfn)(const float *, float *, int64_t);

static void sweep(const char *name, vfn f, float (*ref)(float), float lo, float hi) {
  enum { N = 4001 };
  static float x[N + 8], y[N + 8];
  for (int i = 0; i < N; i++) x[i] = lo + (hi - lo) * (float)i / (N - 1);
  x[0] = 0.0f;
  x[1] = -0.0f;
  x[2] = INFINITY;
  x[3] = -INFINITY;
  x[4] = NAN;
  f(x, y, N);
  for (int i = 0; i < N; i++) {
    float want = ref(x[i]);
    if (isnan(want)) {
      ck_assert_msg(isnan(y[i]), "%s(%g) = %g, want NaN", name, x[i], y[i]);
      continue;
    }
    ck_assert_msg(y[i] == want || fabsf(y[i] - want) <= 1e-6f * fabsf(want) + 1e-37f,
                  "%s(%.9g) = %.9g, want %.9g", name, x[i], y[i], want);
  }
  /* Every length up to 40, out of place then in place, guard cells untouched. */
  for (int n = 0; n <= 40; n++) {
    float a[48], b[48];
    for (int i = 0; i < 48; i++) a[i] = lo + (hi - lo) * (float)((i * 7) % 41) / 40, b[i] = -7;
    f(a, b, n);
    for (int i = 0; i < 48; i++) {
      if (i >= n) {
        ck_assert_float_eq(b[i], -7);
        continue;
      }
      float want = ref(a[i]);
      ck_assert_msg(b[i] == want || fabsf(b[i] - want) <= 1e-6f * fabsf(want) + 1e-37f,
                    "%s n%d [%d]", name, n, i);
    }
    f(a, a, n);
    for (int i = 0; i < n; i++) ck_assert_float_eq(a[i], b[i]);
  }
}

static float rsigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

START_TEST(matches_libm) {
  sweep("erf", eng_vmath_erf, erff, -6, 6);
  sweep("erfc", eng_vmath_erfc, erfcf, -6, 11);
  sweep("exp", eng_vmath_exp, expf, -110, 90);
  sweep("tanh", eng_vmath_tanh, tanhf, -12, 12);
  sweep("sigmoid", eng_vmath_sigmoid, rsigmoid, -100, 100);
}
END_TEST

static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

static float of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

/* Pow by 2 and 3: the specials (signed zeros, infinities, NaN, subnormals,
 * underflow and overflow at the edges) bit for bit as powf, and a sweep
 * of every 65521st float: x^2 bit for bit as powf (both are the correctly
 * rounded x * x), x^3 as the long double cube rounded to float and within
 * one ulp of powf; every length 0..40 (partial vectors) and in place. */
START_TEST(powi_matches_powf) {
  static const float special[] = {0.0f,      -0.0f,    INFINITY, -INFINITY, 1.0f,     -1.0f,
                                  1e-45f,    -1e-45f,  1e-39f,   -1e-39f,   1.2e-38f, 3e-13f,
                                  -3e-13f,   4.9e-27f, 1.1e-15f, -1.1e-15f, 2e12f,    -2e12f,
                                  1.8e19f,   -1.8e19f, 7e12f,    -7e12f,    3e38f,    -3e38f,
                                  0.044715f, -2.5f,    6.5e-8f,  -6.5e-8f,  1e-30f,   -1e-30f};
  enum { NS = sizeof special / sizeof *special };
  float y[NS];
  for (int e = 2; e <= 3; e++) {
    eng_vmath_powi(special, y, NS, e);
    for (int i = 0; i < NS; i++)
      ck_assert_msg(bits(y[i]) == bits(powf(special[i], (float)e)), "%.9g^%d = %.9g, powf %.9g",
                    special[i], e, y[i], powf(special[i], (float)e));
    float nan = NAN, yn;
    eng_vmath_powi(&nan, &yn, 1, e);
    ck_assert(isnan(yn));
  }
  enum { N = 1 << 12 };
  static float x[N], y2[N], y3[N];
  for (uint32_t u = 0, i = 0;; u += 65521) {
    if (!isnan(of_bits(u))) x[i++] = of_bits(u);
    if (i == N || u > 0xFFFFFFFFu - 65521) {
      eng_vmath_powi(x, y2, i, 2);
      eng_vmath_powi(x, y3, i, 3);
      for (uint32_t j = 0; j < i; j++) {
        ck_assert_msg(bits(y2[j]) == bits(powf(x[j], 2.0f)), "%.9g^2", x[j]);
        long double c = (long double)x[j] * x[j] * x[j];
        ck_assert_msg(bits(y3[j]) == bits((float)c), "%.9g^3 = %.9g, want %.9g", x[j], y3[j],
                      (float)c);
        int64_t d = (int64_t)bits(y3[j]) - (int64_t)bits(powf(x[j], 3.0f));
        ck_assert_msg(d >= -1 && d <= 1, "%.9g^3 = %.9g, powf %.9g", x[j], y3[j], powf(x[j], 3.0f));
      }
      if (i < N) break;
      i = 0;
    }
  }
  for (int n = 0; n <= 40; n++) {
    float in[40], out[40];
    for (int i = 0; i < n; i++) in[i] = out[i] = (float)(i - 20) * 0.37f;
    eng_vmath_powi(in, out, n, 3);
    eng_vmath_powi(in, in, n, 3); /* in place */
    for (int i = 0; i < n; i++) {
      float v = (float)(i - 20) * 0.37f;
      ck_assert(bits(out[i]) == bits((float)((double)v * v * v)));
      ck_assert(bits(in[i]) == bits(out[i]));
    }
  }
}
END_TEST

/* The sigmoid is our own (eng_vmath.h): within 2e-7 of the double-precision
 * value where that is a normal float (a few ulp), the specials as the
 * formula gives them, and the 16-lane, 8-lane, one-float and array forms
 * bit for bit the same, so a fused swish equals the Sigmoid kernel on every
 * instruction set. */
__attribute__((target("avx512f"))) static void lanes16(const float *x, float *y) {
  _mm512_storeu_ps(y, eng_vmath_sigmoid16(_mm512_loadu_ps(x)));
}
__attribute__((target("avx2,fma"))) static void lanes8(const float *x, float *y) {
  _mm256_storeu_ps(y, eng_vmath_sigmoid8(_mm256_loadu_ps(x)));
}

START_TEST(sigmoid_forms_agree) {
  enum { N = 1 << 16 };
  float *x = malloc(sizeof *x * N), *y = malloc(sizeof *y * N), *v = malloc(sizeof *v * N);
  ck_assert_ptr_nonnull(x);
  ck_assert_ptr_nonnull(y);
  ck_assert_ptr_nonnull(v);
  uint32_t h = 12345;
  for (int i = 0; i < N; i++) {
    h = h * 1664525u + 1013904223u;
    /* Most in [-20, 20], some across the whole range up to the clamps. */
    x[i] = i % 8 ? -20.0f + 40.0f * (float)(h >> 8) / 16777216.0f
                 : -120.0f + 240.0f * (float)(h >> 8) / 16777216.0f;
  }
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 88.72f, -88.72f, 103.9f,
                           -103.9f, 1e-30f, -1e-30f, 87.3f, -87.3f, 16.6f, -16.6f, 0.5f};
  for (int i = 0; i < 16; i++) x[i] = special[i];
  eng_vmath_sigmoid(x, y, N);
  for (int i = 0; i < N; i++) {
    double want = 1.0 / (1.0 + exp(-(double)x[i]));
    if (isnan(x[i])) {
      ck_assert_msg(isnan(y[i]), "sigmoid(NaN) = %g", y[i]);
      continue;
    }
    if (want >= 1.17549435e-38)
      ck_assert_msg(fabs(y[i] - want) <= 2e-7 * want, "sigmoid(%.9g) = %.9g, want %.9g", x[i], y[i],
                    want);
    else
      ck_assert_msg(fabs(y[i] - want) <= 1.2e-38, "sigmoid(%.9g) = %.9g", x[i], y[i]);
    ck_assert_msg(bits(eng_vmath_sigmoid1(x[i])) == bits(y[i]), "one float at %.9g", x[i]);
  }
  ck_assert_float_eq(y[0], 0.5f);
  ck_assert_float_eq(y[2], 1.0f);
  ck_assert_float_eq(y[3], 0.0f);
  /* The vector forms on the CPU's widths, whatever the engine's cap. */
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    for (int i = 0; i + 8 <= N; i += 8) lanes8(x + i, v + i);
  else
    memcpy(v, y, sizeof *v * N);
  for (int i = 0; i < N; i++)
    ck_assert_msg(isnan(y[i]) ? isnan(v[i]) : bits(v[i]) == bits(y[i]), "8 lanes at %.9g", x[i]);
  if (__builtin_cpu_supports("avx512f")) {
    for (int i = 0; i + 16 <= N; i += 16) lanes16(x + i, v + i);
    for (int i = 0; i < N; i++)
      ck_assert_msg(isnan(y[i]) ? isnan(v[i]) : bits(v[i]) == bits(y[i]), "16 lanes at %.9g",
                    x[i]);
  }
  free(x);
  free(y);
  free(v);
}
END_TEST

START_TEST(softmax_matches_double) {
  /* Rows shorter than, equal to and longer than a vector, with masked
   * logits (-1e9) and a -inf, softmax and log-softmax. */
  const int64_t ds[] = {1, 3, 16, 17, 40};
  for (size_t i = 0; i < sizeof ds / sizeof *ds; i++)
    for (int lg = 0; lg < 2; lg++) {
      int64_t d = ds[i], rows = 5;
      float x[200], y[200];
      for (int64_t j = 0; j < rows * d; j++) x[j] = (float)((j * 37) % 23) / 4.0f - 3.0f;
      if (d > 2) x[2] = -1e9f, x[d + 1] = -INFINITY;
      eng_vmath_softmax(x, y, rows, d, lg);
      for (int64_t r = 0; r < rows; r++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t k = 0; k < d; k++) mx = x[r * d + k] > mx ? x[r * d + k] : mx;
        for (int64_t k = 0; k < d; k++) sum += exp((double)x[r * d + k] - mx);
        for (int64_t k = 0; k < d; k++) {
          double e = (double)x[r * d + k] - mx;
          double want = lg ? e - log(sum) : exp(e) / sum;
          float got = y[r * d + k];
          if (lg && isinf(want)) {
            ck_assert_msg(got < -1e8f, "log d%lld [%lld,%lld] = %g", (long long)d, (long long)r,
                          (long long)k, got);
            continue;
          }
          ck_assert_msg(fabs(got - want) <= 1e-6 * fabs(want) + 1e-7,
                        "%s d%lld [%lld,%lld] = %.9g, want %.9g", lg ? "log" : "soft", (long long)d,
                        (long long)r, (long long)k, got, want);
        }
      }
    }
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_vmath");
  TCase *tc = tcase_create("vmath");
  tcase_add_test(tc, matches_libm);
  tcase_add_test(tc, softmax_matches_double);
  tcase_add_test(tc, powi_matches_powf);
  tcase_add_test(tc, sigmoid_forms_agree);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
