/* eng_vmath: float math functions over arrays, a vector at a time, for the
 * elementwise kernels whose scalar libm calls dominated a profile (GELU's
 * erfc, softmax's exp, swish's sigmoid).
 *
 * Except the sigmoid (below), the vector bodies are glibc's libmvec (x86-64
 * glibc 2.35 and later; -lm already brings it in as needed), reached through
 * its vector-function ABI names: AVX-512 (16 floats) or AVX2 (8 floats) as
 * eng_isa_active says, the last partial vector through a zero-padded copy,
 * and plain libm where it says generic. libmvec documents at most 4 ulp of
 * error for these (libm's scalar versions: 1 to 2), well inside the 1e-5
 * relative bound the op tests and the zoo's 1e-4 hold the engine to.
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

/* Sigmoid: y = 1 / (1 + exp(-x)), the exp our own, not libmvec's, so that
 * kernels applying swish (x * sigmoid(x)) in registers inline it (a call
 * into libmvec made the GEMM spill its accumulators around every vector).
 * exp(v): v clamped to [-87, 89] (NaN kept); n, the nearest integer to
 * v log2(e) (ties to even), comes from one FMA that adds 1.5 * 2^23 + 127,
 * whose low mantissa bits are then n + 127 (shifted into the exponent field
 * they are 2^n: +inf for n = 128, so that 1 / (1 + e) is 0 there); r =
 * v - n ln2 by two fused steps (ln2 split in a short high part and the
 * rest), exp(r) by a degree-6 polynomial fitted to it on |r| <= ln2 / 2
 * (Horner form, one FMA per term), times 2^n. At most 1.7e-7 relative
 * error against the exact sigmoid where the result is a normal float (every
 * float input checked); results below 4.2e-39 come out 0, and +inf, -inf,
 * +-0 and NaN give 1, 0, 0.5 and NaN. Every form below (16 lanes, 8 lanes,
 * one float) performs the same IEEE operations lane by lane, so all give
 * the same bits on any CPU: a fused swish matches the Sigmoid kernel, and
 * the instruction set changes nothing. */
#define ENG_VMATH_EXP_LO -87.0f
#define ENG_VMATH_EXP_HI 89.0f
#define ENG_VMATH_LOG2E 1.44269504088896341f
#define ENG_VMATH_EXP_SHIFT 12583039.0f /* 1.5 * 2^23 + 127 */
#define ENG_VMATH_LN2_HI 0.693145751953125f
#define ENG_VMATH_LN2_LO 1.428606820309417232e-6f
#define ENG_VMATH_EXP_C6 0.00138436537f
#define ENG_VMATH_EXP_C5 0.0083741555f
#define ENG_VMATH_EXP_C4 0.0416680016f
#define ENG_VMATH_EXP_C3 0.166664317f
#define ENG_VMATH_EXP_C2 0.49999994f

__attribute__((target("avx512f"))) static inline __m512 eng_vmath_sigmoid16(__m512 x) {
  __m512 v = _mm512_sub_ps(_mm512_setzero_ps(), x);
  /* min/max return their second operand when one is NaN: NaN goes through. */
  v = _mm512_max_ps(_mm512_set1_ps(ENG_VMATH_EXP_LO),
                    _mm512_min_ps(_mm512_set1_ps(ENG_VMATH_EXP_HI), v));
  __m512 t =
      _mm512_fmadd_ps(v, _mm512_set1_ps(ENG_VMATH_LOG2E), _mm512_set1_ps(ENG_VMATH_EXP_SHIFT));
  __m512 n = _mm512_sub_ps(t, _mm512_set1_ps(ENG_VMATH_EXP_SHIFT));
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ENG_VMATH_LN2_HI), v);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(ENG_VMATH_LN2_LO), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(ENG_VMATH_EXP_C6), r, _mm512_set1_ps(ENG_VMATH_EXP_C5));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ENG_VMATH_EXP_C4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ENG_VMATH_EXP_C3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(ENG_VMATH_EXP_C2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  __m512 s = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_castps_si512(t), 23));
  __m512 e = _mm512_mul_ps(p, s), one = _mm512_set1_ps(1.0f);
  return _mm512_div_ps(one, _mm512_add_ps(one, e));
}

__attribute__((target("avx2,fma"))) static inline __m256 eng_vmath_sigmoid8(__m256 x) {
  __m256 v = _mm256_sub_ps(_mm256_setzero_ps(), x);
  v = _mm256_max_ps(_mm256_set1_ps(ENG_VMATH_EXP_LO),
                    _mm256_min_ps(_mm256_set1_ps(ENG_VMATH_EXP_HI), v));
  __m256 t =
      _mm256_fmadd_ps(v, _mm256_set1_ps(ENG_VMATH_LOG2E), _mm256_set1_ps(ENG_VMATH_EXP_SHIFT));
  __m256 n = _mm256_sub_ps(t, _mm256_set1_ps(ENG_VMATH_EXP_SHIFT));
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(ENG_VMATH_LN2_HI), v);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(ENG_VMATH_LN2_LO), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(ENG_VMATH_EXP_C6), r, _mm256_set1_ps(ENG_VMATH_EXP_C5));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ENG_VMATH_EXP_C4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ENG_VMATH_EXP_C3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(ENG_VMATH_EXP_C2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  __m256 s = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castps_si256(t), 23));
  __m256 e = _mm256_mul_ps(p, s), one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, e));
}

/* One float, for the generic kernels (eng_vmath.c). */
float eng_vmath_sigmoid1(float x);

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
