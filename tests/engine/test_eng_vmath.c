/* eng_vmath: each function against libm's scalar version over a sweep of
 * arguments (both tails, zeros, infinities, NaN), at every length from 0 to
 * 40 so that full vectors and every partial last vector are covered, in
 * place and out of place. */
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

START_TEST(matches_libm) {
  sweep("erf", eng_vmath_erf, erff, -6, 6);
  sweep("erfc", eng_vmath_erfc, erfcf, -6, 11);
  sweep("exp", eng_vmath_exp, expf, -110, 90);
  sweep("tanh", eng_vmath_tanh, tanhf, -12, 12);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_vmath");
  TCase *tc = tcase_create("vmath");
  tcase_add_test(tc, matches_libm);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
