/* Packed-B GEMM micro-kernels. Each kernel computes an MR x NR block of C
 * with MR*NR/W accumulators held in vector registers (W = floats per
 * vector) across the whole k loop: per k step it loads NR/W vectors of the
 * packed panel and broadcasts MR values of A. Edge rows use the same kernel
 * with a smaller MR (instantiated for every MR), edge columns a masked
 * store (AVX-512) or a bounce buffer (AVX2). Panels are zero-padded to NR
 * columns so loads never read past the end. A fused epilogue is applied to
 * the accumulators with separate add/sub/mul/max/min instructions (no
 * contraction), so it rounds exactly as the separate kernels would. */
#include "eng_gemm.h"

#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

enum { ISA_NONE, ISA_AVX2, ISA_AVX512 };

struct eng_packed {
  int64_t k, n, nr, panels;
  int isa;
  float *data; /* panels x k x nr, 64-byte aligned */
};

static int isa(void) {
  static int cached = -1;
  if (cached >= 0) return cached;
  __builtin_cpu_init();
  int v = ISA_NONE;
  if (__builtin_cpu_supports("avx512f"))
    v = ISA_AVX512;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    v = ISA_AVX2;
  cached = v;
  return v;
}

eng_packed *eng_gemm_pack(const float *b, int64_t k, int64_t n, bool trans_b) {
  int v = isa();
  if (v == ISA_NONE || k <= 0 || n <= 0 || k > (1 << 24) || n > (1 << 24)) return NULL;
  eng_packed *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->k = k;
  p->n = n;
  p->isa = v;
  p->nr = v == ISA_AVX512 && n > 16 ? 32 : 16;
  p->panels = (n + p->nr - 1) / p->nr;
  size_t bytes = sizeof(float) * (size_t)(p->panels * k * p->nr);
  void *mem = NULL;
  if (posix_memalign(&mem, 64, bytes ? bytes : 64)) {
    free(p);
    return NULL;
  }
  p->data = mem;
  for (int64_t pn = 0; pn < p->panels; pn++) {
    float *dst = p->data + pn * k * p->nr;
    for (int64_t kk = 0; kk < k; kk++)
      for (int64_t j = 0; j < p->nr; j++) {
        int64_t col = pn * p->nr + j;
        dst[kk * p->nr + j] = col >= n ? 0.0f : trans_b ? b[col * k + kk] : b[kk * n + col];
      }
  }
  return p;
}

void eng_gemm_free(eng_packed *p) {
  if (!p) return;
  free(p->data);
  free(p);
}

int64_t eng_gemm_k(const eng_packed *p) { return p->k; }
int64_t eng_gemm_n(const eng_packed *p) { return p->n; }

#define MR 6

/* --- AVX-512: NR = 32 (two zmm per row) ----------------------------------- */

__attribute__((target("avx512f"))) static inline __m512 epi512(int kind, __m512 v, __m512 k) {
  switch (kind) {
    case ENG_GEMM_ADD: return _mm512_add_ps(v, k);
    case ENG_GEMM_SUB: return _mm512_sub_ps(v, k);
    case ENG_GEMM_MUL: return _mm512_mul_ps(v, k);
    case ENG_GEMM_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
    default: return _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), _mm512_set1_ps(6.0f));
  }
}

#define K512(R)                                                                                   \
  __attribute__((target("avx512f"))) static void k512_##R(                                      \
      const float *a, int64_t lda, const float *bp, int64_t k, float *c, int64_t ldc,             \
      int64_t cols, const eng_gemm_epi *epi, int64_t col0) {                                      \
    __m512 acc0[R], acc1[R];                                                                      \
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = _mm512_setzero_ps();                          \
    for (int64_t kk = 0; kk < k; kk++) {                                                          \
      __m512 b0 = _mm512_load_ps(bp + kk * 32), b1 = _mm512_load_ps(bp + kk * 32 + 16);           \
      for (int r = 0; r < R; r++) {                                                               \
        __m512 av = _mm512_set1_ps(a[r * lda + kk]);                                              \
        acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);                                               \
        acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);                                               \
      }                                                                                           \
    }                                                                                             \
    __mmask16 m0 = cols >= 16 ? 0xFFFF : (__mmask16)((1u << cols) - 1);                           \
    __mmask16 m1 = cols >= 32 ? 0xFFFF : cols <= 16 ? 0 : (__mmask16)((1u << (cols - 16)) - 1);   \
    for (int i = 0; epi && i < epi->n; i++) {                                                     \
      int kind = epi->op[i].kind;                                                                 \
      __m512 k0 = _mm512_set1_ps(epi->op[i].s), k1 = k0;                                          \
      if (kind <= ENG_GEMM_MUL && epi->op[i].k) {                                                 \
        k0 = _mm512_maskz_loadu_ps(m0, epi->op[i].k + col0);                                      \
        k1 = _mm512_maskz_loadu_ps(m1, epi->op[i].k + col0 + 16);                                 \
      }                                                                                           \
      for (int r = 0; r < R; r++) {                                                               \
        acc0[r] = epi512(kind, acc0[r], k0);                                                      \
        acc1[r] = epi512(kind, acc1[r], k1);                                                      \
      }                                                                                           \
    }                                                                                             \
    for (int r = 0; r < R; r++) {                                                                 \
      _mm512_mask_storeu_ps(c + r * ldc, m0, acc0[r]);                                            \
      _mm512_mask_storeu_ps(c + r * ldc + 16, m1, acc1[r]);                                       \
    }                                                                                             \
  }

K512(1)
K512(2)
K512(3)
K512(4)
K512(5)
K512(6)

/* AVX-512 with NR = 16 (one zmm per row), for narrow outputs (n <= 16:
 * early CNN layers), where a 32-wide panel would be at least half padding. */
#define K512H(R)                                                                                  \
  __attribute__((target("avx512f"))) static void k512h_##R(                                     \
      const float *a, int64_t lda, const float *bp, int64_t k, float *c, int64_t ldc,             \
      int64_t cols, const eng_gemm_epi *epi, int64_t col0) {                                      \
    __m512 acc[R];                                                                                \
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();                                     \
    for (int64_t kk = 0; kk < k; kk++) {                                                          \
      __m512 b0 = _mm512_load_ps(bp + kk * 16);                                                   \
      for (int r = 0; r < R; r++)                                                                 \
        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(a[r * lda + kk]), b0, acc[r]);                    \
    }                                                                                             \
    __mmask16 m0 = cols >= 16 ? 0xFFFF : (__mmask16)((1u << cols) - 1);                           \
    for (int i = 0; epi && i < epi->n; i++) {                                                     \
      int kind = epi->op[i].kind;                                                                 \
      __m512 k0 = _mm512_set1_ps(epi->op[i].s);                                                   \
      if (kind <= ENG_GEMM_MUL && epi->op[i].k) k0 = _mm512_maskz_loadu_ps(m0, epi->op[i].k + col0); \
      for (int r = 0; r < R; r++) acc[r] = epi512(kind, acc[r], k0);                              \
    }                                                                                             \
    for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(c + r * ldc, m0, acc[r]);                   \
  }

K512H(1)
K512H(2)
K512H(3)
K512H(4)
K512H(5)
K512H(6)

typedef void (*kern_fn)(const float *, int64_t, const float *, int64_t, float *, int64_t, int64_t,
                        const eng_gemm_epi *, int64_t);
static const kern_fn k512[MR + 1] = {NULL, k512_1, k512_2, k512_3, k512_4, k512_5, k512_6};
static const kern_fn k512h[MR + 1] = {NULL, k512h_1, k512h_2, k512h_3, k512h_4, k512h_5, k512h_6};

/* --- AVX2: NR = 16 (two ymm per row) ------------------------------------------ */

__attribute__((target("avx2,fma"))) static inline __m256 epi256(int kind, __m256 v, __m256 k) {
  switch (kind) {
    case ENG_GEMM_ADD: return _mm256_add_ps(v, k);
    case ENG_GEMM_SUB: return _mm256_sub_ps(v, k);
    case ENG_GEMM_MUL: return _mm256_mul_ps(v, k);
    case ENG_GEMM_RELU: return _mm256_max_ps(v, _mm256_setzero_ps());
    default: return _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(6.0f));
  }
}

#define K256(R)                                                                                   \
  __attribute__((target("avx2,fma"))) static void k256_##R(                                     \
      const float *a, int64_t lda, const float *bp, int64_t k, float *c, int64_t ldc,             \
      int64_t cols, const eng_gemm_epi *epi, int64_t col0) {                                      \
    __m256 acc0[R], acc1[R];                                                                      \
    for (int r = 0; r < R; r++) acc0[r] = acc1[r] = _mm256_setzero_ps();                          \
    for (int64_t kk = 0; kk < k; kk++) {                                                          \
      __m256 b0 = _mm256_load_ps(bp + kk * 16), b1 = _mm256_load_ps(bp + kk * 16 + 8);            \
      for (int r = 0; r < R; r++) {                                                               \
        __m256 av = _mm256_broadcast_ss(a + r * lda + kk);                                        \
        acc0[r] = _mm256_fmadd_ps(av, b0, acc0[r]);                                               \
        acc1[r] = _mm256_fmadd_ps(av, b1, acc1[r]);                                               \
      }                                                                                           \
    }                                                                                             \
    for (int i = 0; epi && i < epi->n; i++) {                                                     \
      int kind = epi->op[i].kind;                                                                 \
      __m256 k0 = _mm256_set1_ps(epi->op[i].s), k1 = k0;                                          \
      if (kind <= ENG_GEMM_MUL && epi->op[i].k) {                                                 \
        float kb[16] = {0};                                                                       \
        memcpy(kb, epi->op[i].k + col0, sizeof(float) * (size_t)cols);                            \
        k0 = _mm256_loadu_ps(kb);                                                                 \
        k1 = _mm256_loadu_ps(kb + 8);                                                             \
      }                                                                                           \
      for (int r = 0; r < R; r++) {                                                               \
        acc0[r] = epi256(kind, acc0[r], k0);                                                      \
        acc1[r] = epi256(kind, acc1[r], k1);                                                      \
      }                                                                                           \
    }                                                                                             \
    for (int r = 0; r < R; r++) {                                                                 \
      if (cols == 16) {                                                                           \
        _mm256_storeu_ps(c + r * ldc, acc0[r]);                                                   \
        _mm256_storeu_ps(c + r * ldc + 8, acc1[r]);                                               \
      } else {                                                                                    \
        float tmp[16];                                                                            \
        _mm256_storeu_ps(tmp, acc0[r]);                                                           \
        _mm256_storeu_ps(tmp + 8, acc1[r]);                                                       \
        memcpy(c + r * ldc, tmp, sizeof(float) * (size_t)cols);                                   \
      }                                                                                           \
    }                                                                                             \
  }

K256(1)
K256(2)
K256(3)
K256(4)
K256(5)
K256(6)

static const kern_fn k256[MR + 1] = {NULL, k256_1, k256_2, k256_3, k256_4, k256_5, k256_6};

/* Rows of A per block: the block stays in L2 while every panel of B passes
 * over it. */
#define ROW_BLOCK 48

void eng_gemm_run(const float *a, int64_t lda, int64_t m, const eng_packed *b, float *c,
                  int64_t ldc, const eng_gemm_epi *epi) {
  const kern_fn *kern = b->isa != ISA_AVX512 ? k256 : b->nr == 32 ? k512 : k512h;
  if (epi && !epi->n) epi = NULL;
  for (int64_t r0 = 0; r0 < m; r0 += ROW_BLOCK) {
    int64_t rows = m - r0 < ROW_BLOCK ? m - r0 : ROW_BLOCK;
    for (int64_t pn = 0; pn < b->panels; pn++) {
      const float *bp = b->data + pn * b->k * b->nr;
      int64_t col0 = pn * b->nr, cols = b->n - col0 < b->nr ? b->n - col0 : b->nr;
      for (int64_t r = 0; r < rows; r += MR) {
        int64_t mr = rows - r < MR ? rows - r : MR;
        kern[mr](a + (r0 + r) * lda, lda, bp, b->k, c + (r0 + r) * ldc + col0, ldc, cols, epi,
                 col0);
      }
    }
  }
}
