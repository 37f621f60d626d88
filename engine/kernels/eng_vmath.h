/* eng_vmath: float math functions over arrays, a vector at a time, for the
 * elementwise kernels whose scalar libm calls dominated a profile (GELU's
 * erfc, softmax's exp, swish's sigmoid).
 *
 * The vector bodies are glibc's libmvec (x86-64 glibc 2.35 and later; -lm
 * already brings it in as needed), reached through its vector-function ABI
 * names: AVX-512 (16 floats) or AVX2 (8 floats) as eng_isa_active says, the
 * last partial vector through a zero-padded copy, and plain libm where it
 * says generic. libmvec documents at most 4 ulp of error for these (libm's
 * scalar versions: 1 to 2), well inside the 1e-5 relative bound the op tests
 * and the zoo's 1e-4 hold the engine to.
 *
 * y may equal x. Pure functions; any thread may call them. */
#ifndef ENG_VMATH_H
#define ENG_VMATH_H

#include <immintrin.h>
#include <stdbool.h>
#include <stdint.h>

void eng_vmath_erf(const float *x, float *y, int64_t n);
void eng_vmath_erfc(const float *x, float *y, int64_t n);
void eng_vmath_exp(const float *x, float *y, int64_t n);
void eng_vmath_tanh(const float *x, float *y, int64_t n);
/* y = 1 / (1 + exp(-x)) (swish's gate: EfficientNet's activations). */
void eng_vmath_sigmoid(const float *x, float *y, int64_t n);

/* One vector's sigmoid, each lane exactly as eng_vmath_sigmoid computes it
 * on this CPU, for kernels that apply swish (x * sigmoid(x)) in registers
 * and must match the Sigmoid kernel bit for bit. The 8-lane form serves
 * AVX2 code on any CPU with AVX2: on an AVX-512 CPU it computes with the
 * 16-lane function eng_vmath_sigmoid uses there. The 16-lane form only on
 * CPUs with AVX-512. */
__attribute__((target("avx512f"))) __m512 eng_vmath_sigmoid16(__m512 x);
__attribute__((target("avx2,fma"))) __m256 eng_vmath_sigmoid8(__m256 x);
/* The same for tanh (GELU's tanh form in registers): each lane exactly as
 * eng_vmath_tanh computes it on this CPU. */
__attribute__((target("avx512f"))) __m512 eng_vmath_tanh16(__m512 x);
__attribute__((target("avx2,fma"))) __m256 eng_vmath_tanh8(__m256 x);
/* And for erfc (GELU's exact form). */
__attribute__((target("avx512f"))) __m512 eng_vmath_erfc16(__m512 x);
__attribute__((target("avx2,fma"))) __m256 eng_vmath_erfc8(__m256 x);

/* y = x^e for e 2 or 3 (Pow with a constant exponent: GELU's tanh form
 * cubes its input): x * x (* x) in double, rounded once to float. A
 * float's square is exact in double, so x^2 is the correctly rounded
 * x * x, which is what powf returns; x^3 rounds twice (to double, then to
 * float), which can matter only within 2^-53 of a float midpoint, against
 * powf's documented 0.82 ulp. 0, -0, inf, -inf, NaN, subnormal inputs,
 * underflow to (signed) zero and overflow to inf come out as powf's. The
 * same bits on every instruction set. */
void eng_vmath_powi(const float *x, float *y, int64_t n, int e);
/* One vector's x^3 as eng_vmath_powi computes it (for kernels). */
__attribute__((target("avx512f"))) static inline __m512 eng_vmath_cube16(__m512 x) {
  __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
  __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  lo = _mm512_mul_pd(_mm512_mul_pd(lo, lo), lo);
  hi = _mm512_mul_pd(_mm512_mul_pd(hi, hi), hi);
  __m512d r = _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)));
  return _mm512_castpd_ps(_mm512_insertf64x4(r, _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1));
}
__attribute__((target("avx2,fma"))) static inline __m256 eng_vmath_cube8(__m256 x) {
  __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(x));
  __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1));
  lo = _mm256_mul_pd(_mm256_mul_pd(lo, lo), lo);
  hi = _mm256_mul_pd(_mm256_mul_pd(hi, hi), hi);
  return _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
}

/* Softmax (or log-softmax when log) over each of `rows` rows of d floats:
 * y = exp(x - max) / sum, the exponent clamped below at -87 (exp(-87) is
 * 1.6e-38, nothing beside the max's 1 in the sum; this keeps masked logits
 * such as -1e9 off the vector exp's slow path for subnormal results, as
 * Eigen's exp clamps too). On AVX-512 a row is whole vectors (masked at
 * its end) and the sum a vector sum, in a different order from the plain
 * loop elsewhere; y may equal x only for softmax (not log). */
void eng_vmath_softmax(const float *x, float *y, int64_t rows, int64_t d, bool log);

#endif
