/* eng_fft: every length from 1 to 64 (powers of two, composites, primes)
 * and a few long ones, forward and inverse, contiguous and strided, against
 * a direct O(n^2) DFT in long double; a round trip restores the signal. */
#include <check.h>
#include <complex.h>
#include <math.h>
#include <stdlib.h>

#include "eng_fft.h"

static double complex signal(int64_t j, int seed) {
  return eng_cx(sin(0.37 * (double)(j + seed)) + 0.25 * (double)((j * 7 + seed) % 5),
                cos(1.3 * (double)j - seed) - 0.1 * (double)(j % 3));
}

static void check_len(int64_t n, bool inverse, int64_t stride) {
  double complex *x = calloc((size_t)(n * stride), sizeof *x);
  ck_assert_ptr_nonnull(x);
  for (int64_t j = 0; j < n; j++) x[j * stride] = signal(j, (int)n);
  for (int64_t j = 0; j < n * stride; j++)
    if (j % stride) x[j] = eng_cx(-7, -7); /* guard cells between the values */
  eng_fft_plan *p = eng_fft_plan_create(n, inverse);
  ck_assert_ptr_nonnull(p);
  ck_assert_int_eq(eng_fft_plan_len(p), n);
  eng_fft_run(p, x, stride);
  /* The exact DFT, from a table of the n roots of unity in long double. */
  long double *cs = malloc((size_t)n * 2 * sizeof *cs);
  double complex *sig = malloc((size_t)n * sizeof *sig);
  ck_assert(cs && sig);
  for (int64_t j = 0; j < n; j++) sig[j] = signal(j, (int)n);
  for (int64_t q = 0; q < n; q++) {
    long double a =
        (inverse ? 2 : -2) * 3.141592653589793238462643383279L * (long double)q / (long double)n;
    cs[2 * q] = cosl(a), cs[2 * q + 1] = sinl(a);
  }
  double peak = 0;
  for (int64_t k = 0; k < n; k++) {
    long double re = 0, im = 0;
    for (int64_t j = 0; j < n; j++) {
      const long double *w = cs + 2 * ((j * k) % n);
      double complex v = sig[j];
      re += creal(v) * w[0] - cimag(v) * w[1];
      im += creal(v) * w[1] + cimag(v) * w[0];
    }
    double complex got = x[k * stride];
    double e = cabs(got - eng_cx((double)re, (double)im));
    if (e > peak) peak = e;
  }
  double scale = sqrt((double)n) * 4.0;
  ck_assert_msg(peak <= 1e-11 * scale, "n=%lld inverse=%d: error %g", (long long)n, inverse, peak);
  for (int64_t j = 0; j < n * stride; j++)
    if (j % stride) ck_assert(creal(x[j]) == -7 && cimag(x[j]) == -7);
  eng_fft_plan_destroy(p);
  free(sig);
  free(cs);
  free(x);
}

START_TEST(every_short_length) {
  for (int64_t n = 1; n <= 64; n++) {
    check_len(n, false, 1);
    check_len(n, true, 1);
    check_len(n, false, 3);
  }
}
END_TEST

START_TEST(long_lengths) {
  const int64_t ns[] = {127, 128, 210, 257, 509};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    check_len(ns[i], false, 1);
    check_len(ns[i], true, 2);
  }
}
END_TEST

START_TEST(round_trip) {
  const int64_t ns[] = {1, 2, 7, 12, 31, 64, 100};
  for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
    int64_t n = ns[i];
    double complex x[100];
    eng_fft_plan *f = eng_fft_plan_create(n, false), *b = eng_fft_plan_create(n, true);
    for (int64_t j = 0; j < n; j++) x[j] = signal(j, 3);
    eng_fft_run(f, x, 1);
    eng_fft_run(b, x, 1);
    for (int64_t j = 0; j < n; j++) ck_assert(cabs(x[j] / (double)n - signal(j, 3)) < 1e-12);
    eng_fft_plan_destroy(f);
    eng_fft_plan_destroy(b);
  }
}
END_TEST

START_TEST(bad_length) {
  ck_assert_ptr_null(eng_fft_plan_create(0, false));
  ck_assert_ptr_null(eng_fft_plan_create(-3, true));
  eng_fft_plan_destroy(NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_fft");
  TCase *tc = tcase_create("fft");
  tcase_add_test(tc, every_short_length);
  tcase_add_test(tc, long_lengths);
  tcase_add_test(tc, round_trip);
  tcase_add_test(tc, bad_length);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
