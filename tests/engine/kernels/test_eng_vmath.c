/* eng_vmath: each function against libm's scalar version over a sweep of
 * arguments (both tails, zeros, infinities, NaN), at every length from 0 to
 * 40 so that full vectors and every partial last vector are covered, in
 * place and out of place; softmax and log-softmax against double precision. */
#include <check.h>
#include <math.h>
#include <stdlib.h>

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
                        "%s d%lld [%lld,%lld] = %.9g, want %.9g", lg ? "log" : "soft",
                        (long long)d, (long long)r, (long long)k, got, want);
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
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
