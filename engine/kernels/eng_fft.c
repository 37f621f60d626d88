/* Radix-2 for powers of two; Bluestein's chirp convolution for the rest:
 * with c[j] = exp(s i pi j^2 / n) (s = -1 forward, +1 inverse) and
 * 2jk = j^2 + k^2 - (k - j)^2, X[k] = c[k] * sum_j (x[j] c[j]) conj(c[k - j]),
 * a linear convolution done as a cyclic one of power-of-two length m >= 2n - 1.
 * The filter's transform is computed once, in the plan. Chirp angles reduce
 * j^2 modulo 2n first so that long transforms keep their precision. */
#include "eng_fft.h"

#include <math.h>
#include <stdlib.h>

struct eng_fft_plan {
  int64_t n;
  bool inverse;
  int64_t m;                      /* the radix-2 length (n itself for powers of two) */
  double complex *tw;             /* m / 2 forward twiddles exp(-2 pi i k / m) */
  double complex *buf;            /* m scratch */
  double complex *chirp, *filter; /* Bluestein only: n and m values */
};

static bool is_pow2(int64_t n) { return n > 0 && !(n & (n - 1)); }

/* In-place iterative radix-2 transform of x[0..m). */
static void radix2(double complex *x, int64_t m, const double complex *tw, bool inverse) {
  for (int64_t i = 1, j = 0; i < m; i++) {
    int64_t bit = m >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j |= bit;
    if (i < j) {
      double complex t = x[i];
      x[i] = x[j];
      x[j] = t;
    }
  }
  for (int64_t len = 2; len <= m; len <<= 1) {
    int64_t half = len >> 1, step = m / len;
    for (int64_t s = 0; s < m; s += len) {
      for (int64_t k = 0; k < half; k++) {
        double complex w = inverse ? conj(tw[k * step]) : tw[k * step];
        double complex u = x[s + k], v = x[s + k + half] * w;
        x[s + k] = u + v;
        x[s + k + half] = u - v;
      }
    }
  }
}

eng_fft_plan *eng_fft_plan_create(int64_t n, bool inverse) {
  if (n < 1) return NULL;
  eng_fft_plan *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->n = n;
  p->inverse = inverse;
  p->m = n;
  if (!is_pow2(n)) {
    p->m = 1;
    while (p->m < 2 * n - 1) p->m <<= 1;
  }
  int64_t m = p->m;
  p->tw = malloc((size_t)(m / 2 + 1) * sizeof *p->tw);
  p->buf = malloc((size_t)m * sizeof *p->buf);
  if (!p->tw || !p->buf) goto oom;
  for (int64_t k = 0; k < m / 2 + 1; k++) {
    double a = -2.0 * M_PI * (double)k / (double)m;
    p->tw[k] = cos(a) + I * sin(a);
  }
  if (m == n) return p;
  p->chirp = malloc((size_t)n * sizeof *p->chirp);
  p->filter = calloc((size_t)m, sizeof *p->filter);
  if (!p->chirp || !p->filter) goto oom;
  double s = inverse ? 1.0 : -1.0;
  for (int64_t j = 0; j < n; j++) {
    int64_t q =
        (int64_t)(((unsigned __int128)j * (unsigned __int128)j) % (unsigned __int128)(2 * n));
    double a = s * M_PI * (double)q / (double)n;
    p->chirp[j] = cos(a) + I * sin(a);
  }
  p->filter[0] = conj(p->chirp[0]);
  for (int64_t j = 1; j < n; j++) p->filter[j] = p->filter[m - j] = conj(p->chirp[j]);
  radix2(p->filter, m, p->tw, false);
  return p;
oom:
  eng_fft_plan_destroy(p);
  return NULL;
}

void eng_fft_plan_destroy(eng_fft_plan *p) {
  if (!p) return;
  free(p->tw);
  free(p->buf);
  free(p->chirp);
  free(p->filter);
  free(p);
}

int64_t eng_fft_plan_len(const eng_fft_plan *p) { return p->n; }

void eng_fft_run(eng_fft_plan *p, double complex *x, int64_t stride) {
  int64_t n = p->n, m = p->m;
  double complex *b = p->buf;
  if (n == 1) return;
  if (m == n) {
    if (stride == 1) {
      radix2(x, n, p->tw, p->inverse);
      return;
    }
    for (int64_t j = 0; j < n; j++) b[j] = x[j * stride];
    radix2(b, n, p->tw, p->inverse);
    for (int64_t j = 0; j < n; j++) x[j * stride] = b[j];
    return;
  }
  for (int64_t j = 0; j < n; j++) b[j] = x[j * stride] * p->chirp[j];
  for (int64_t j = n; j < m; j++) b[j] = 0;
  radix2(b, m, p->tw, false);
  for (int64_t j = 0; j < m; j++) b[j] *= p->filter[j];
  radix2(b, m, p->tw, true);
  double scale = 1.0 / (double)m;
  for (int64_t k = 0; k < n; k++) x[k * stride] = b[k] * scale * p->chirp[k];
}
