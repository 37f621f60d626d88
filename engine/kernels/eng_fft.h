/* eng_fft: one-dimensional discrete Fourier transforms of any length, in
 * double precision, for the FFT kernels (eng_kernels_fft.c).
 *
 * A plan fixes a length n and a direction. Forward computes
 *   X[k] = sum_j x[j] exp(-2 pi i j k / n),
 * inverse the same with +i and no scaling (callers divide by n, as
 * TensorFlow's IFFT does). Powers of two run an iterative radix-2
 * transform; every other length runs Bluestein's algorithm (the transform
 * as a convolution, done with a power-of-two transform of at least
 * 2n - 1 points), so prime lengths cost O(n log n) too. Accumulation is in
 * double: float32 results stay well within 1e-6 relative of an exact DFT.
 *
 * Ownership: eng_fft_plan_create allocates the plan (twiddles and its own
 * scratch); eng_fft_plan_destroy frees it. A plan is used by one thread at
 * a time (its scratch is inside); create one per kernel call or per
 * thread. Failure: create returns NULL when out of memory or n < 1. */
#ifndef ENG_FFT_H
#define ENG_FFT_H

#include <complex.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct eng_fft_plan eng_fft_plan;

/* re + i im, exact for infinities and NaN too (C11's CMPLX is missing
 * from some compilers' headers; re + im * I is not exact for them). */
static inline double complex eng_cx(double re, double im) {
  double complex z;
  __real__ z = re;
  __imag__ z = im;
  return z;
}

eng_fft_plan *eng_fft_plan_create(int64_t n, bool inverse);
void eng_fft_plan_destroy(eng_fft_plan *p);

/* Transforms n values in place (x[0], x[stride], ... x[(n-1)*stride]). */
void eng_fft_run(eng_fft_plan *p, double complex *x, int64_t stride);

int64_t eng_fft_plan_len(const eng_fft_plan *p);

#endif
