/* Array wrappers over libmvec's vector functions (see eng_vmath.h). The
 * prototypes below are the x86-64 vector-function ABI names glibc exports
 * ('e' = AVX-512, 16 lanes; 'd' = AVX2, 8 lanes); their argument and result
 * travel in one vector register. */
#include "eng_vmath.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "eng_isa.h"

/* The target attributes say which registers carry the vectors; clang
 * refuses a vector-ABI declaration without them. */
#define V512 __attribute__((target("avx512f"))) __m512
#define V256 __attribute__((target("avx2,fma"))) __m256
V512 _ZGVeN16v_erff(__m512);
V512 _ZGVeN16v_erfcf(__m512);
V512 _ZGVeN16v_expf(__m512);
V512 _ZGVeN16v_tanhf(__m512);
V256 _ZGVdN8v_erff(__m256);
V256 _ZGVdN8v_erfcf(__m256);
V256 _ZGVdN8v_expf(__m256);
V256 _ZGVdN8v_tanhf(__m256);
#undef V512
#undef V256

typedef __m512 (*f512)(__m512);
typedef __m256 (*f256)(__m256);

__attribute__((target("avx512f"))) static void map512(f512 f, const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

__attribute__((target("avx2,fma"))) static void map256(f256 f, const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, f(_mm256_loadu_ps(x + i)));
  if (i < n) {
    float buf[8] = {0};
    memcpy(buf, x + i, sizeof *buf * (size_t)(n - i));
    _mm256_storeu_ps(buf, f(_mm256_loadu_ps(buf)));
    memcpy(y + i, buf, sizeof *buf * (size_t)(n - i));
  }
}

#define VMATH(NAME, LIBM, V512, V256)                      \
  void NAME(const float *x, float *y, int64_t n) {         \
    switch (eng_isa_active()) {                            \
      case ENG_ISA_AVX512:                                 \
        map512(V512, x, y, n);                             \
        return;                                            \
      case ENG_ISA_AVX2:                                   \
        map256(V256, x, y, n);                             \
        return;                                            \
      default:                                             \
        for (int64_t i = 0; i < n; i++) y[i] = LIBM(x[i]); \
    }                                                      \
  }

VMATH(eng_vmath_erf, erff, _ZGVeN16v_erff, _ZGVdN8v_erff)
VMATH(eng_vmath_erfc, erfcf, _ZGVeN16v_erfcf, _ZGVdN8v_erfcf)
VMATH(eng_vmath_exp, expf, _ZGVeN16v_expf, _ZGVdN8v_expf)
VMATH(eng_vmath_tanh, tanhf, _ZGVeN16v_tanhf, _ZGVdN8v_tanhf)

/* The sigmoid of eng_vmath.h on one float: the vector forms' operations
 * in the same order (fmaf is the fused multiply-add), so the same bits. */
float eng_vmath_sigmoid1(float x) {
  float v = 0.0f - x;
  if (isnan(v)) return v;
  v = ENG_VMATH_EXP_HI < v ? ENG_VMATH_EXP_HI : v;
  v = ENG_VMATH_EXP_LO > v ? ENG_VMATH_EXP_LO : v;
  float t = fmaf(v, ENG_VMATH_LOG2E, ENG_VMATH_EXP_SHIFT), n = t - ENG_VMATH_EXP_SHIFT;
  float r = fmaf(-n, ENG_VMATH_LN2_HI, v);
  r = fmaf(-n, ENG_VMATH_LN2_LO, r);
  float p = fmaf(ENG_VMATH_EXP_C6, r, ENG_VMATH_EXP_C5);
  p = fmaf(p, r, ENG_VMATH_EXP_C4);
  p = fmaf(p, r, ENG_VMATH_EXP_C3);
  p = fmaf(p, r, ENG_VMATH_EXP_C2);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  uint32_t bits;
  memcpy(&bits, &t, sizeof bits);
  bits <<= 23; /* the exponent field: n + 127, from t's low mantissa bits */
  float s;
  memcpy(&s, &bits, sizeof s);
  return 1.0f / (1.0f + p * s);
}

__attribute__((target("avx512f"))) static void sigmoid512(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, eng_vmath_sigmoid16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, eng_vmath_sigmoid16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

__attribute__((target("avx2,fma"))) static void sigmoid256(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, eng_vmath_sigmoid8(_mm256_loadu_ps(x + i)));
  for (; i < n; i++) y[i] = eng_vmath_sigmoid1(x[i]);
}

void eng_vmath_sigmoid(const float *x, float *y, int64_t n) {
  switch (eng_isa_active()) {
    case ENG_ISA_AVX512:
      sigmoid512(x, y, n);
      return;
    case ENG_ISA_AVX2:
      sigmoid256(x, y, n);
      return;
    default:
      for (int64_t i = 0; i < n; i++) y[i] = eng_vmath_sigmoid1(x[i]);
  }
}

__attribute__((target("avx512f"))) __m512 eng_vmath_tanh16(__m512 x) { return _ZGVeN16v_tanhf(x); }

/* On an AVX-512 CPU eng_vmath_tanh runs 16 lanes, so the 8-lane form does
 * too, its upper lanes zero (off the vector tanh's slow path). */
__attribute__((target("avx512f"))) static __m256 tanh8_512(__m256 x) {
  __m512 w = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_setzero_pd(), _mm256_castps_pd(x), 0));
  return _mm512_castps512_ps256(_ZGVeN16v_tanhf(w));
}

__attribute__((target("avx2,fma"))) __m256 eng_vmath_tanh8(__m256 x) {
  return eng_isa_active() == ENG_ISA_AVX512 ? tanh8_512(x) : _ZGVdN8v_tanhf(x);
}

__attribute__((target("avx512f"))) __m512 eng_vmath_erfc16(__m512 x) { return _ZGVeN16v_erfcf(x); }

__attribute__((target("avx512f"))) static __m256 erfc8_512(__m256 x) {
  __m512 w = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_setzero_pd(), _mm256_castps_pd(x), 0));
  return _mm512_castps512_ps256(_ZGVeN16v_erfcf(w));
}

__attribute__((target("avx2,fma"))) __m256 eng_vmath_erfc8(__m256 x) {
  return eng_isa_active() == ENG_ISA_AVX512 ? erfc8_512(x) : _ZGVdN8v_erfcf(x);
}

/* The compiler vectorises these loops (-O3) for each target: the
 * conversions and products are exact IEEE operations, so every variant
 * gives the same bits. */
#define POWI_LOOPS                    \
  if (e == 3)                         \
    for (int64_t i = 0; i < n; i++) { \
      double u = x[i];                \
      y[i] = (float)(u * u * u);      \
    }                                 \
  else                                \
    for (int64_t i = 0; i < n; i++) { \
      double u = x[i];                \
      y[i] = (float)(u * u);          \
    }

__attribute__((target("avx512f"))) static void powi512(const float *x, float *y, int64_t n, int e) {
  POWI_LOOPS
}
__attribute__((target("avx2,fma"))) static void powi256(const float *x, float *y, int64_t n,
                                                        int e) {
  POWI_LOOPS
}
static void powi_plain(const float *x, float *y, int64_t n, int e) { POWI_LOOPS }

void eng_vmath_powi(const float *x, float *y, int64_t n, int e) {
  switch (eng_isa_active()) {
    case ENG_ISA_AVX512:
      powi512(x, y, n, e);
      return;
    case ENG_ISA_AVX2:
      powi256(x, y, n, e);
      return;
    default:
      powi_plain(x, y, n, e);
  }
}

__attribute__((target("avx512f"))) static void softmax512(const float *x, float *y, int64_t rows,
                                                          int64_t d, bool log) {
  const __m512 lo = _mm512_set1_ps(-87.0f);
  for (int64_t r = 0; r < rows; r++, x += d, y += d) {
    __m512 vm = _mm512_set1_ps(-INFINITY);
    for (int64_t k = 0; k < d; k += 16) {
      __mmask16 m = d - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d - k)) - 1);
      vm = _mm512_max_ps(_mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), m, x + k), vm);
    }
    __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(vm)), vs = _mm512_setzero_ps();
    for (int64_t k = 0; k < d; k += 16) {
      __mmask16 m = d - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d - k)) - 1);
      /* max(lo, v) keeps a NaN v (the second operand when unordered). */
      /* Lanes past the row's end read mx, so their exp is exp(0): no slow path. */
      __m512 v = _mm512_max_ps(lo, _mm512_sub_ps(_mm512_mask_loadu_ps(mx, m, x + k), mx));
      __m512 e = _ZGVeN16v_expf(v);
      vs = _mm512_mask_add_ps(vs, m, vs, e);
      if (!log) _mm512_mask_storeu_ps(y + k, m, e);
    }
    float sum = _mm512_reduce_add_ps(vs);
    if (log) {
      __m512 sub = _mm512_add_ps(mx, _mm512_set1_ps(logf(sum)));
      for (int64_t k = 0; k < d; k += 16) {
        __mmask16 m = d - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d - k)) - 1);
        _mm512_mask_storeu_ps(y + k, m, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + k), sub));
      }
    } else {
      __m512 vsum = _mm512_set1_ps(sum);
      for (int64_t k = 0; k < d; k += 16) {
        __mmask16 m = d - k >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (d - k)) - 1);
        _mm512_mask_storeu_ps(y + k, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, y + k), vsum));
      }
    }
  }
}

void eng_vmath_softmax(const float *x, float *y, int64_t rows, int64_t d, bool log) {
  if (d <= 0) return;
  if (eng_isa_active() == ENG_ISA_AVX512) {
    softmax512(x, y, rows, d, log);
    return;
  }
  for (int64_t r = 0; r < rows; r++, x += d, y += d) {
    float mx = x[0];
    for (int64_t k = 1; k < d; k++) mx = x[k] > mx ? x[k] : mx;
    float sum = 0;
    if (log) {
      for (int64_t k = 0; k < d; k++) {
        float v = x[k] - mx;
        sum += expf(v < -87.0f ? -87.0f : v);
      }
      float ls = logf(sum);
      for (int64_t k = 0; k < d; k++) y[k] = x[k] - mx - ls;
      continue;
    }
    for (int64_t k = 0; k < d; k++) {
      float v = x[k] - mx;
      y[k] = v < -87.0f ? -87.0f : v;
    }
    eng_vmath_exp(y, y, d);
    for (int64_t k = 0; k < d; k++) sum += y[k];
    for (int64_t k = 0; k < d; k++) y[k] /= sum;
  }
}
