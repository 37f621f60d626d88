/* Packed-B GEMM micro-kernels. Each kernel computes an R x NR block of C
 * with R*NR/W accumulators held in vector registers (W = floats per
 * vector) across the whole k loop: per k step it loads NR/W vectors of the
 * packed panel and broadcasts R values of A. Kernels come in four shapes:
 * NR 32 and 16 on AVX-512 (two or one zmm per row), NR 16 and 8 with AVX2
 * (two or one ymm per row; the 8-wide one also serves AVX-512 CPUs for the
 * last few columns). A block is 12 rows (6 for AVX2's two-ymm rows, which
 * have only 16 registers); edge rows use the same kernel with a smaller R
 * (instantiated for every R) or, on AVX-512, one row more (13) for the
 * last calls of a product; edge columns masked loads and stores. Panels
 * are zero-padded to NR columns so loads never read past the end.
 *
 * A row of A is read through a pointer per row and a list of segments, so
 * one kernel serves both a plain matrix (one segment of k) and a
 * convolution's input read in place (one segment per window row). The
 * fused epilogue runs op by op over the whole block once the k loop is
 * done (one dispatch per op and block), with separate
 * add/sub/mul/max/min instructions (no contraction), and swish's sigmoid
 * and GELU's cube, tanh and erfc as eng_vmath computes them, so it rounds
 * exactly as the separate kernels would. */
#include "eng_gemm.h"

#include <immintrin.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "eng_isa.h"
#include "eng_mem.h"
#include "eng_pool.h"
#include "eng_vmath.h"

#define MAX_PANEL_KINDS 4
enum { P512_32, P512_16, P256_16, P256_8 };

struct eng_packed {
  int64_t k, n, panels;
  int isa;
  bool prescaled;
  int64_t *col0;  /* per panel: first column */
  int *kind;      /* per panel: P512_32 ... */
  int64_t *off;   /* per panel: offset of its k x nr block in data */
  float *data;    /* 64-byte aligned */
  int64_t nparts; /* a set of products (eng_gemm_pack_parts): 0 for one */
  struct eng_packed *part;
};

static const int64_t kind_nr[MAX_PANEL_KINDS] = {32, 16, 16, 8};

/* Splits n columns into panels: full-width ones, then the remainder r in a
 * masked full-width panel when it nearly fills one, else in a half-width
 * panel and/or an 8-wide one. Returns the count; fills kind[] when given. */
static int64_t split_panels(int v, int64_t n, int *kind) {
  int full = v == ENG_ISA_AVX512 ? P512_32 : P256_16, half = v == ENG_ISA_AVX512 ? P512_16 : P256_8;
  int64_t w = kind_nr[full], cnt = 0, r = n % w;
  for (int64_t i = 0; i < n / w; i++) {
    if (kind) kind[cnt] = full;
    cnt++;
  }
  if (v == ENG_ISA_AVX512) {
    if (r > 24) {
      if (kind) kind[cnt] = full;
      cnt++;
    } else {
      if (r > 8) {
        if (kind) kind[cnt] = P512_16;
        cnt++;
        r = r > 16 ? r - 16 : 0;
      }
      if (r > 0) {
        if (kind) kind[cnt] = P256_8;
        cnt++;
      }
    }
  } else if (r > 0) {
    if (kind) kind[cnt] = r > 8 ? full : half;
    cnt++;
  }
  return cnt;
}

eng_packed *eng_gemm_pack(const float *b, int64_t k, int64_t n, bool trans_b) {
  return eng_gemm_pack_scaled(b, k, n, trans_b, NULL, 0);
}

bool eng_gemm_prescaled(const eng_packed *p) { return p->prescaled; }

static eng_packed *pack(int v, const float *b, int64_t k, int64_t n, bool trans_b,
                        const float *scale, int64_t nscale);

eng_packed *eng_gemm_pack_scaled(const float *b, int64_t k, int64_t n, bool trans_b,
                                 const float *scale, int64_t nscale) {
  return pack(eng_isa_active(), b, k, n, trans_b, scale, nscale);
}

eng_packed *eng_gemm_pack_isa(eng_isa want, const float *b, int64_t k, int64_t n, bool trans_b,
                              const float *scale, int64_t nscale) {
  /* pack refuses ENG_ISA_GENERIC: there is no generic packed kernel. */
  return eng_isa_allows(want) ? pack(want, b, k, n, trans_b, scale, nscale) : NULL;
}

/* Lays out the panels of a k x n matrix in p (p->panels sized by the
 * caller: split_panels(v, n, NULL)); returns the floats of packed data. */
static int64_t layout(eng_packed *p, int v, int64_t k, int64_t n) {
  p->k = k;
  p->n = n;
  p->isa = v;
  split_panels(v, n, p->kind);
  int64_t col = 0, off = 0;
  for (int64_t pn = 0; pn < p->panels; pn++) {
    p->col0[pn] = col;
    p->off[pn] = off;
    col += kind_nr[p->kind[pn]];
    off += k * kind_nr[p->kind[pn]];
  }
  return off;
}

/* Copies B (rows ldb apart: [k,n], or [n,k] when trans_b) into p's panels,
 * zero past column n, each column scaled when scale is given. */
static void fill_panels(eng_packed *p, const float *b, int64_t ldb, bool trans_b,
                        const float *scale, int64_t nscale, int64_t p0, int64_t p1) {
  int64_t k = p->k, n = p->n;
  for (int64_t pn = p0; pn < p1; pn++) {
    int64_t nr = kind_nr[p->kind[pn]], c0 = p->col0[pn];
    int64_t cols = n - c0 < nr ? n - c0 : nr;
    float *dst = p->data + p->off[pn];
    if (!trans_b && !scale) {
      for (int64_t kk = 0; kk < k; kk++) {
        memcpy(dst + kk * nr, b + kk * ldb + c0, sizeof *dst * (size_t)cols);
        if (cols < nr) memset(dst + kk * nr + cols, 0, sizeof *dst * (size_t)(nr - cols));
      }
      continue;
    }
    if (!trans_b) { /* scaled: row by row, each column times its scale */
      for (int64_t kk = 0; kk < k; kk++) {
        const float *src = b + kk * ldb + c0;
        float *d = dst + kk * nr;
        if (nscale == 1)
          for (int64_t j = 0; j < cols; j++) d[j] = src[j] * scale[0];
        else
          for (int64_t j = 0; j < cols; j++) d[j] = src[j] * scale[c0 + j];
        for (int64_t j = cols; j < nr; j++) d[j] = 0.0f;
      }
      continue;
    }
    for (int64_t kk = 0; kk < k; kk++)
      for (int64_t j = 0; j < nr; j++) {
        int64_t c = c0 + j;
        float w = c >= n ? 0.0f : trans_b ? b[c * ldb + kk] : b[kk * ldb + c];
        if (scale && c < n) w = w * scale[nscale == 1 ? 0 : c];
        dst[kk * nr + j] = w;
      }
  }
}

static void fill(eng_packed *p, const float *b, int64_t ldb, bool trans_b, const float *scale,
                 int64_t nscale) {
  fill_panels(p, b, ldb, trans_b, scale, nscale, 0, p->panels);
}

static eng_packed *pack(int v, const float *b, int64_t k, int64_t n, bool trans_b,
                        const float *scale, int64_t nscale) {
  if (scale && nscale != 1 && nscale != n) return NULL;
  if (v == ENG_ISA_GENERIC || k <= 0 || n <= 0 || k > (1 << 24) || n > (1 << 24)) return NULL;
  eng_packed *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->prescaled = scale != NULL;
  p->panels = split_panels(v, n, NULL);
  p->col0 = malloc(sizeof *p->col0 * (size_t)p->panels);
  p->kind = malloc(sizeof *p->kind * (size_t)p->panels);
  p->off = malloc(sizeof *p->off * (size_t)p->panels);
  if (!p->col0 || !p->kind || !p->off) goto fail;
  int64_t off = layout(p, v, k, n);
  size_t bytes = sizeof(float) * (size_t)off;
  if (!(p->data = eng_mem_alloc(64, bytes, bytes))) goto fail;
  fill(p, b, trans_b ? k : n, trans_b, scale, nscale);
  return p;
fail:
  eng_gemm_free(p);
  return NULL;
}

eng_packed *eng_gemm_pack_parts(int64_t parts, int64_t k, int64_t n, eng_gemm_part_fn fn, void *arg,
                                const float *scale, int64_t nscale) {
  int v = eng_isa_active();
  if (parts <= 0 || parts > 64 || k <= 0 || n <= 0 || k > (1 << 24) || n > (1 << 24) ||
      (scale && nscale != 1 && nscale != n))
    return NULL;
  eng_packed *p = calloc(1, sizeof *p);
  float *b = malloc(sizeof *b * (size_t)k * (size_t)n);
  if (!p || !b) goto fail;
  p->k = k;
  p->n = n;
  p->isa = v;
  p->prescaled = scale != NULL;
  if (!(p->part = calloc((size_t)parts, sizeof *p->part))) goto fail;
  p->nparts = parts;
  for (int64_t t = 0; t < parts; t++) {
    fn(arg, t, b);
    eng_packed *one = pack(v, b, k, n, false, scale, nscale);
    if (!one) goto fail;
    p->part[t] = *one; /* the arrays move into the set */
    free(one);
  }
  free(b);
  return p;
fail:
  free(b);
  eng_gemm_free(p);
  return NULL;
}

int64_t eng_gemm_parts(const eng_packed *p) { return p->nparts; }

const eng_packed *eng_gemm_part(const eng_packed *p, int64_t i) {
  return i >= 0 && i < p->nparts ? &p->part[i] : NULL;
}

void eng_gemm_free(eng_packed *p) {
  if (!p) return;
  for (int64_t t = 0; t < p->nparts; t++) {
    free(p->part[t].data);
    free(p->part[t].col0);
    free(p->part[t].kind);
    free(p->part[t].off);
  }
  free(p->part);
  free(p->data);
  free(p->col0);
  free(p->kind);
  free(p->off);
  free(p);
}

int64_t eng_gemm_k(const eng_packed *p) { return p->k; }
int64_t eng_gemm_n(const eng_packed *p) { return p->n; }

/* Most rows per register block: 12 for the one-vector-per-row panels and
 * for AVX-512's two-zmm panels (24 accumulators of 32 registers), 6 for
 * AVX2's two-ymm panels (12 of 16). */
#define MR 12

/* Fully unrolled, so that accumulator arrays indexed by row and vector
 * number are register variables. */
#define UNROLL _Pragma("GCC unroll 13")

/* How far ahead in the packed panel the k loop prefetches: B is read
 * once per row call and, inside a model, arrives from memory (the other
 * layers' weights pushed it out). Each k step touches the line(s) this far
 * ahead, which runs into the next panel at a panel's end. 8 KiB measured
 * best of 0, 1, 4 and 8 KiB with caches evicted before each call
 * (gemm_bench's GEMM_BENCH_EVICT) on the real-size models' shapes. */
#define GEMM_PF_BYTES 8192

/* The micro-kernel, for one vector type (VT, W floats) and NV vectors per
 * row, over R rows. `cols` (1..NR) columns of the block are real. ahead,
 * when not NULL, is a later panel whose lines at the same offsets as this
 * call's are fetched into L2 as the k loop goes (see block). */
#define KERNEL(NAME, TGT, VT, MT, W, NV, R, ZERO, LOAD, BCAST, FMA, MASK, MLOAD, STOREU, MSTORE, \
               SET1, EPI, GELU, GELUE)                                                           \
  __attribute__((target(TGT))) static void NAME(                                                 \
      const float *const *arow, int64_t nseg, int64_t sst, int64_t slen, const float *bp,        \
      const float *ahead, float *c, int64_t ldc, int64_t cols, const eng_gemm_epi *epi,          \
      int64_t col0) {                                                                            \
    VT acc[R][NV];                                                                               \
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int v = 0; v < NV; v++) acc[r][v] = ZERO();   \
    /* A run-time addend (a residual's shortcut, mostly cold): its tile is                       \
     * fetched while the k loop runs. */                                                         \
    for (int i = 0; epi && i < epi->n; i++)                                                      \
      if (epi->op[i].kind == ENG_GEMM_ADD_AT)                                                    \
        UNROLL for (int r = 0; r < R; r++)                                                       \
            UNROLL for (int v = 0; v < NV; v++) if (v * W * 4 % 64 == 0) _mm_prefetch(           \
                (const char *)((intptr_t)(c + r * ldc + v * W) + epi->op[i].off), _MM_HINT_T0);  \
    for (int64_t s = 0; s < nseg; s++) {                                                         \
      const float *ap[R];                                                                        \
      UNROLL for (int r = 0; r < R; r++) ap[r] = arow[r] + s * sst;                              \
      for (int64_t kk = 0; kk < slen; kk++, bp += W * NV) {                                      \
        VT b[NV];                                                                                \
        UNROLL for (int v = 0; v < NV; v++) if (v * W * 4 % 64 == 0)                             \
            _mm_prefetch((const char *)(bp + v * W) + GEMM_PF_BYTES, _MM_HINT_T0);               \
        if (ahead) {                                                                             \
          UNROLL for (int v = 0; v < NV; v++) if (v * W * 4 % 64 == 0)                           \
              _mm_prefetch((const char *)(ahead + v * W), _MM_HINT_T1);                          \
          ahead += W * NV;                                                                       \
        }                                                                                        \
        UNROLL for (int v = 0; v < NV; v++) b[v] = LOAD(bp + v * W);                             \
        UNROLL for (int r = 0; r < R; r++) {                                                     \
          VT av = BCAST(ap[r] + kk);                                                             \
          UNROLL for (int v = 0; v < NV; v++) acc[r][v] = FMA(av, b[v], acc[r][v]);              \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
    MT m[NV];                                                                                    \
    UNROLL for (int v = 0; v < NV; v++) m[v] = MASK(cols - v * W);                               \
    for (int i = 0; epi && i < epi->n; i++) {                                                    \
      int kind = epi->op[i].kind;                                                                \
      VT kv[NV];                                                                                 \
      UNROLL for (int v = 0; v < NV; v++) kv[v] = kind <= ENG_GEMM_MUL && epi->op[i].k           \
                                                      ? MLOAD(epi->op[i].k + col0 + v * W, m[v]) \
                                                      : SET1(epi->op[i].s);                      \
      switch (kind) {                                                                            \
        case ENG_GEMM_ADD:                                                                       \
          EPI_ALL(EPI, ENG_GEMM_ADD, R, NV);                                                     \
          break;                                                                                 \
        case ENG_GEMM_SUB:                                                                       \
          EPI_ALL(EPI, ENG_GEMM_SUB, R, NV);                                                     \
          break;                                                                                 \
        case ENG_GEMM_MUL:                                                                       \
          EPI_ALL(EPI, ENG_GEMM_MUL, R, NV);                                                     \
          break;                                                                                 \
        case ENG_GEMM_RELU:                                                                      \
          EPI_ALL(EPI, ENG_GEMM_RELU, R, NV);                                                    \
          break;                                                                                 \
        case ENG_GEMM_SWISH:                                                                     \
          EPI_ALL(EPI, ENG_GEMM_SWISH, R, NV);                                                   \
          break;                                                                                 \
        case ENG_GEMM_GELU_TANH: {                                                               \
          const float *gc = epi->op[i].k;                                                        \
          UNROLL for (int r = 0; r < R; r++) UNROLL for (int v = 0; v < NV; v++) acc[r][v] =     \
              GELU(acc[r][v], gc);                                                               \
          break;                                                                                 \
        }                                                                                        \
        case ENG_GEMM_GELU_ERFC: {                                                               \
          const float *gc = epi->op[i].k;                                                        \
          UNROLL for (int r = 0; r < R; r++) UNROLL for (int v = 0; v < NV; v++) acc[r][v] =     \
              GELUE(acc[r][v], gc);                                                              \
          break;                                                                                 \
        }                                                                                        \
        case ENG_GEMM_ADD_AT: {                                                                  \
          intptr_t off = epi->op[i].off;                                                         \
          UNROLL for (int r = 0; r < R; r++) UNROLL for (int v = 0; v < NV; v++) {               \
            const float *at = (const float *)((intptr_t)(c + r * ldc + v * W) + off);            \
            acc[r][v] = EPI(ENG_GEMM_ADD, acc[r][v], MLOAD(at, m[v]));                           \
          }                                                                                      \
          break;                                                                                 \
        }                                                                                        \
        default:                                                                                 \
          EPI_ALL(EPI, ENG_GEMM_RELU6, R, NV);                                                   \
          break;                                                                                 \
      }                                                                                          \
    }                                                                                            \
    bool full = cols == W * NV;                                                                  \
    UNROLL for (int r = 0; r < R; r++) UNROLL for (int v = 0; v < NV; v++) {                     \
      if (full)                                                                                  \
        STOREU(c + r * ldc + v * W, acc[r][v]);                                                  \
      else                                                                                       \
        MSTORE(c + r * ldc + v * W, m[v], acc[r][v]);                                            \
    }                                                                                            \
  }

/* One epilogue op (a constant kind, so the switch folds away) on every
 * accumulator of the block. */
#define EPI_ALL(EPI, KIND, R, NV)                                                                 \
  UNROLL for (int r = 0; r < R; r++)                                                              \
    UNROLL for (int v = 0; v < NV; v++) acc[r][v] = EPI(KIND, acc[r][v], kv[v])

typedef void (*kern_fn)(const float *const *, int64_t, int64_t, int64_t, const float *,
                        const float *, float *, int64_t, int64_t, const eng_gemm_epi *, int64_t);

/* --- AVX-512 ------------------------------------------------------------------ */

__attribute__((target("avx512f"))) static inline __m512 epi512(int kind, __m512 v, __m512 k) {
  switch (kind) {
    case ENG_GEMM_ADD: return _mm512_add_ps(v, k);
    case ENG_GEMM_SUB: return _mm512_sub_ps(v, k);
    case ENG_GEMM_MUL: return _mm512_mul_ps(v, k);
    case ENG_GEMM_RELU: return _mm512_max_ps(v, _mm512_setzero_ps());
    case ENG_GEMM_SWISH:
      return _mm512_mul_ps(v, eng_vmath_sigmoid16(_mm512_mul_ps(v, k)));
    default: return _mm512_min_ps(_mm512_max_ps(v, _mm512_setzero_ps()), _mm512_set1_ps(6.0f));
  }
}

/* GELU's tanh form, operation by operation as eng_epilogue.h says. */
__attribute__((target("avx512f"))) static inline __m512 gelu512(__m512 x, const float *c) {
  __m512 t = _mm512_mul_ps(eng_vmath_cube16(x), _mm512_set1_ps(c[0]));
  t = _mm512_mul_ps(_mm512_add_ps(x, t), _mm512_set1_ps(c[1]));
  t = _mm512_add_ps(eng_vmath_tanh16(t), _mm512_set1_ps(c[2]));
  return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(c[3])), t);
}

/* GELU's exact form; -x flips the sign bit, as the Neg kernel's -x does. */
__attribute__((target("avx512f"))) static inline __m512 gelue512(__m512 x, const float *c) {
  __m512 n = _mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)));
  __m512 t = eng_vmath_erfc16(_mm512_mul_ps(n, _mm512_set1_ps(c[0])));
  return _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps(c[1])), t);
}

__attribute__((target("avx512f"))) static inline __mmask16 mask512(int64_t cw) {
  return cw >= 16 ? (__mmask16)0xFFFF : cw <= 0 ? (__mmask16)0 : (__mmask16)((1u << cw) - 1);
}

#define K512(NAME, NV, R)                                                                         \
  KERNEL(NAME, "avx512f", __m512, __mmask16, 16, NV, R, _mm512_setzero_ps, _mm512_load_ps,        \
         bcast512, _mm512_fmadd_ps, mask512, mload512, _mm512_storeu_ps,   \
         _mm512_mask_storeu_ps, _mm512_set1_ps, epi512, gelu512, gelue512)
#define bcast512(p) _mm512_set1_ps(*(p))
#define mload512(p, m) _mm512_maskz_loadu_ps((m), (p))

K512(k512_1, 2, 1)
K512(k512_2, 2, 2)
K512(k512_3, 2, 3)
K512(k512_4, 2, 4)
K512(k512_5, 2, 5)
K512(k512_6, 2, 6)
K512(k512_7, 2, 7)
K512(k512_8, 2, 8)
K512(k512_9, 2, 9)
K512(k512_10, 2, 10)
K512(k512_11, 2, 11)
K512(k512_12, 2, 12)
K512(k512_13, 2, 13)
K512(k512h_1, 1, 1)
K512(k512h_2, 1, 2)
K512(k512h_3, 1, 3)
K512(k512h_4, 1, 4)
K512(k512h_5, 1, 5)
K512(k512h_6, 1, 6)
K512(k512h_7, 1, 7)
K512(k512h_8, 1, 8)
K512(k512h_9, 1, 9)
K512(k512h_10, 1, 10)
K512(k512h_11, 1, 11)
K512(k512h_12, 1, 12)
K512(k512h_13, 1, 13)

/* --- AVX2 ---------------------------------------------------------------------- */

__attribute__((target("avx2,fma"))) static inline __m256 epi256(int kind, __m256 v, __m256 k) {
  switch (kind) {
    case ENG_GEMM_ADD: return _mm256_add_ps(v, k);
    case ENG_GEMM_SUB: return _mm256_sub_ps(v, k);
    case ENG_GEMM_MUL: return _mm256_mul_ps(v, k);
    case ENG_GEMM_RELU: return _mm256_max_ps(v, _mm256_setzero_ps());
    case ENG_GEMM_SWISH:
      return _mm256_mul_ps(v, eng_vmath_sigmoid8(_mm256_mul_ps(v, k)));
    default: return _mm256_min_ps(_mm256_max_ps(v, _mm256_setzero_ps()), _mm256_set1_ps(6.0f));
  }
}

__attribute__((target("avx2,fma"))) static inline __m256 gelu256(__m256 x, const float *c) {
  __m256 t = _mm256_mul_ps(eng_vmath_cube8(x), _mm256_set1_ps(c[0]));
  t = _mm256_mul_ps(_mm256_add_ps(x, t), _mm256_set1_ps(c[1]));
  t = _mm256_add_ps(eng_vmath_tanh8(t), _mm256_set1_ps(c[2]));
  return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(c[3])), t);
}

__attribute__((target("avx2,fma"))) static inline __m256 gelue256(__m256 x, const float *c) {
  __m256 n = _mm256_xor_ps(x, _mm256_set1_ps(-0.0f));
  __m256 t = eng_vmath_erfc8(_mm256_mul_ps(n, _mm256_set1_ps(c[0])));
  return _mm256_mul_ps(_mm256_mul_ps(x, _mm256_set1_ps(c[1])), t);
}

/* Lane l on when l < cw (the sign bit of l - cw). */
__attribute__((target("avx2,fma"))) static inline __m256i mask256(int64_t cw) {
  int c = cw > 8 ? 8 : cw < 0 ? 0 : (int)cw;
  return _mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(c));
}

#define K256(NAME, NV, R)                                                                         \
  KERNEL(NAME, "avx2,fma", __m256, __m256i, 8, NV, R, _mm256_setzero_ps, _mm256_load_ps,          \
         _mm256_broadcast_ss, _mm256_fmadd_ps, mask256, _mm256_maskload_ps, _mm256_storeu_ps,     \
         _mm256_maskstore_ps, _mm256_set1_ps, epi256, gelu256, gelue256)

K256(k256_1, 2, 1)
K256(k256_2, 2, 2)
K256(k256_3, 2, 3)
K256(k256_4, 2, 4)
K256(k256_5, 2, 5)
K256(k256_6, 2, 6)
K256(k256h_1, 1, 1)
K256(k256h_2, 1, 2)
K256(k256h_3, 1, 3)
K256(k256h_4, 1, 4)
K256(k256h_5, 1, 5)
K256(k256h_6, 1, 6)
K256(k256h_7, 1, 7)
K256(k256h_8, 1, 8)
K256(k256h_9, 1, 9)
K256(k256h_10, 1, 10)
K256(k256h_11, 1, 11)
K256(k256h_12, 1, 12)

/* Index MR + 1: the AVX-512 kernels of one row more (29 of the 32 zmm
 * registers in the k loop), which take up a few rows left over at the end
 * of a product (see block) so that they do not cost a pass over every
 * panel of B of their own. */
static const kern_fn kernels[MAX_PANEL_KINDS][MR + 2] = {
    [P512_32] = {NULL, k512_1, k512_2, k512_3, k512_4, k512_5, k512_6, k512_7, k512_8, k512_9, k512_10, k512_11, k512_12, k512_13},
    [P512_16] = {NULL, k512h_1, k512h_2, k512h_3, k512h_4, k512h_5, k512h_6, k512h_7, k512h_8, k512h_9, k512h_10, k512h_11, k512h_12, k512h_13},
    [P256_16] = {NULL, k256_1, k256_2, k256_3, k256_4, k256_5, k256_6},
    [P256_8] = {NULL, k256h_1, k256h_2, k256h_3, k256h_4, k256h_5, k256h_6, k256h_7, k256h_8, k256h_9, k256h_10, k256h_11, k256h_12},
};
static const int64_t kind_mr[MAX_PANEL_KINDS] = {12, 12, 6, 12};

/* Rows of A per block: the block stays in L2 while every panel of B passes
 * over it. When a product's last block would have at most TAIL_ROWS rows,
 * the block before it takes them (up to ROW_BLOCK + TAIL_ROWS rows): with
 * the kernels of MR + 1 rows, 49 to 52 rows are four calls per panel
 * instead of five, the fifth for one to four rows (a 7x7 feature map is 49
 * rows, 14x14 is 4 x 48 + 4). */
#define ROW_BLOCK 48
#define TAIL_ROWS 4

static int64_t row_blocks(int64_t m) {
  int64_t blocks = (m + ROW_BLOCK - 1) / ROW_BLOCK;
  if (blocks > 1 && m - (blocks - 1) * ROW_BLOCK <= TAIL_ROWS) blocks--;
  return blocks;
}

/* A product of a few row blocks whose whole A fits in three quarters of L2
 * runs as one block instead: every block streams all of B, which in a
 * large model comes from memory, so a sequence of 128 tokens at k = 768
 * reads BERT's weights once instead of three times (its batch-1 run 66-67
 * -> 60-61 ms on the Xeon VM). Up to ONE_BLOCK_MAX rows. */
#define ONE_BLOCK_MAX 144

static int64_t product_row_blocks(int64_t m, int64_t k) {
  if (m > ROW_BLOCK + TAIL_ROWS && m <= ONE_BLOCK_MAX &&
      m * k * (int64_t)sizeof(float) <= eng_isa_l2_bytes() / 4 * 3)
    return 1;
  return row_blocks(m);
}

/* One product, as the pool's chunks see it. rows == NULL: row r of A is
 * a + r * lda. */
typedef struct gemm_args {
  const float *a;
  int64_t lda;
  const float *const *rows;
  int64_t m, nseg, sst, slen;
  const eng_packed *b;
  float *c;
  int64_t ldc;
  const eng_gemm_epi *epi;
  int64_t blocks;  /* row blocks (row_blocks) */
  int64_t pgroups; /* panel groups per row block (chunks: row blocks x groups) */
  bool rows_outer; /* block: rows outside, panels inside (rows_outer_ok) */
  bool prefetch;   /* block: prefetch_call before each call */
  bool ahead;      /* block: the later calls over a panel fetch the one two ahead */
} gemm_args;

/* Prefetches what the call after this one reads from memory, one call
 * ahead (a call of a short-k product is too short for the hardware's
 * prefetchers to catch up with its rows): rows [r, e) of A (every
 * segment, when a, the first panel pass) and of C over columns [c0, c1),
 * with the residual's rows when the epilogue adds one. */
static void prefetch_call(const gemm_args *g, int64_t r, int64_t e, bool a, int64_t c0,
                          int64_t c1) {
  intptr_t add = 0;
  for (int i = 0; g->epi && i < g->epi->n; i++)
    if (g->epi->op[i].kind == ENG_GEMM_ADD_AT) add = g->epi->op[i].off;
  for (; r < e; r++) {
    if (a) {
      const char *ap = (const char *)(g->rows ? g->rows[r] : g->a + r * g->lda);
      for (int64_t sg = 0; sg < g->nseg; sg++, ap += g->sst * (int64_t)sizeof(float))
        for (int64_t o = 0; o < g->slen * (int64_t)sizeof(float); o += 64)
          __builtin_prefetch(ap + o, 0, 3);
    }
    const char *cp = (const char *)(g->c + r * g->ldc + c0);
    for (int64_t o = 0; o < (c1 - c0) * (int64_t)sizeof(float); o += 64) {
      __builtin_prefetch(cp + o, 1, 3);
      if (add) __builtin_prefetch(cp + add + o, 0, 3);
    }
  }
}

/* Bytes a product touches: A (m rows of k floats), C (and the residual)
 * and the packed B. */
static int64_t product_bytes(int64_t m, int64_t k, const eng_packed *b, const eng_gemm_epi *epi) {
  int64_t cols = b->n;
  for (int i = 0; epi && i < epi->n; i++)
    if (epi->op[i].kind == ENG_GEMM_ADD_AT) cols += b->n;
  return (m * (k + cols) + b->k * b->n) * (int64_t)sizeof(float);
}

/* Row block rb (ROW_BLOCK rows from rb * ROW_BLOCK; the last one to the
 * end), panels [p0, p1). A block is cut into calls of the panel kind's
 * rows, except that where the rows left after the full calls are no more
 * than those calls, the last calls take one row more each instead (on the
 * kinds with such kernels). Which call computes a row never changes its
 * arithmetic. */
static void block(const gemm_args *g, int64_t rb, int64_t p0, int64_t p1) {
  const eng_packed *b = g->b;
  int64_t r0 = rb * ROW_BLOCK, nrows = rb == g->blocks - 1 ? g->m - r0 : ROW_BLOCK;
  /* Panel by panel, each over all the block's rows; or, when B is small
   * (rows_outer), call by call, each over all the panels, so that the
   * block's rows of C are written whole, one after the other. */
  int64_t q0 = g->rows_outer ? 0 : p0, q1 = g->rows_outer ? 1 : p1;
  for (int64_t q = q0; q < q1; q++) {
    int kind = b->kind[g->rows_outer ? p0 : q];
    int64_t kmr = kind_mr[kind], full = nrows / kmr, left = nrows % kmr;
    /* The first call of one row more, or none. */
    int64_t wide = left && left <= full && kernels[kind][kmr + 1] ? full - left : full + 1;
    for (int64_t r = 0, call = 0; r < nrows; call++) {
      int64_t mr = call >= wide ? kmr + 1 : nrows - r < kmr ? nrows - r : kmr;
      const float *ap[MR + 1];
      for (int64_t i = 0; i < mr; i++)
        ap[i] = g->rows ? g->rows[r0 + r + i] : g->a + (r0 + r + i) * g->lda;
      int64_t pa = g->rows_outer ? p0 : q, pb = g->rows_outer ? p1 : q + 1;
      if (g->prefetch && r + mr < nrows) {
        int64_t c1 = pb < b->panels ? b->col0[pb] : b->n;
        prefetch_call(g, r0 + r + mr, r0 + (r + mr + kmr + 1 < nrows ? r + mr + kmr + 1 : nrows),
                      q == q0, b->col0[pa], c1 < b->n ? c1 : b->n);
      }
      /* A B that streams from memory: its first call over a panel waits on
       * it, while the calls after read it from L2. The second and third
       * calls fetch the panel two ahead into L2 meanwhile, so that its first
       * call finds it there (the one ahead has too little time to arrive
       * and is mostly in flight already): wide MLP, 32 x 2048 x 2048 with
       * caches evicted, 86-102 -> 114-115 GFLOP/s. */
      const float *ahead =
          g->ahead && (call == 1 || call == 2) && q + 2 < p1 ? b->data + b->off[q + 2] : NULL;
      for (int64_t pn = pa; pn < pb; pn++) {
        int pk = b->kind[pn];
        const float *bp = b->data + b->off[pn];
        int64_t col0 = b->col0[pn], nr = kind_nr[pk];
        int64_t cols = b->n - col0 < nr ? b->n - col0 : nr;
        kernels[pk][mr](ap, g->nseg, g->sst, g->slen, bp, ahead,
                        g->c + (r0 + r) * g->ldc + col0, g->ldc, cols, g->epi, col0);
      }
      r += mr;
    }
  }
}

static void chunk(void *arg, int64_t i) {
  const gemm_args *g = arg;
  int64_t rb = i / g->pgroups, grp = i % g->pgroups, np = g->b->panels;
  block(g, rb, grp * np / g->pgroups, (grp + 1) * np / g->pgroups);
}

/* Whether block may run a product rows outside, panels inside: B small
 * enough to stay in L1 and L2 while the block's row calls pass over all of
 * it (then only the order of C's writes changes: a short-k product
 * writes whole rows one after the other rather than a strip of each per
 * panel), and every panel cut into the same calls (one row-block kind). */
#define ROWS_OUTER_MAX_B (96 << 10)

static bool rows_outer_ok(const eng_packed *b) {
  if (b->k * b->n * (int64_t)sizeof(float) > ROWS_OUTER_MAX_B) return false;
  int k0 = b->kind[0];
  for (int64_t pn = 1; pn < b->panels; pn++) {
    int k = b->kind[pn];
    if (kind_mr[k] != kind_mr[k0] || !kernels[k][kind_mr[k] + 1] != !kernels[k0][kind_mr[k0] + 1])
      return false;
  }
  return true;
}

/* Below this many multiply-adds a product runs on one thread: waking a
 * helper costs about as much. */
#define PAR_MIN_MACS (1 << 20)

/* How run() cuts a product of `blocks` row blocks into chunks for the
 * pool: row blocks times panel groups (*pgroups; more than one when there
 * are too few row blocks to keep the threads busy, several chunks per
 * thread, so that a thread that starts late or runs on a busy core leaves
 * its share to the others), and how many threads work on them (*workers;
 * 1 below PAR_MIN_MACS, where waking a helper costs about as much).
 * Returns the chunk count. */
static int64_t chunks_of(int64_t blocks, int64_t m, const eng_packed *b, int64_t *pgroups,
                         int64_t *workers) {
  int64_t threads = eng_pool_threads(NULL);
  *pgroups = 1;
  if (threads < 2 || m * b->n * b->k < PAR_MIN_MACS) {
    *workers = 1;
    return blocks;
  }
  int64_t want = 4 * threads;
  if (blocks < want) {
    *pgroups = (want + blocks - 1) / blocks;
    if (*pgroups > b->panels) *pgroups = b->panels;
  }
  *workers = blocks * *pgroups < threads ? blocks * *pgroups : threads;
  return blocks * *pgroups;
}

/* Splits C into row blocks (each as the serial loop does it: every panel
 * over one block of A held in L2) or, when there are too few of those to
 * keep the pool's threads busy, row blocks by groups of column panels.
 * Only C is split, never k: each element is computed exactly as on one
 * thread. */
static void run(const float *a, int64_t lda, const float *const *rows, int64_t m, int64_t nseg,
                int64_t sst, int64_t slen, const eng_packed *b, float *c, int64_t ldc,
                const eng_gemm_epi *epi) {
  if (epi && !epi->n) epi = NULL;
  int64_t blocks = product_row_blocks(m, nseg * slen);
  /* A product that fits in L2, weights included, is left to the caches:
   * inside a small model its operands are already there, and prefetching
   * them only costs instructions (the zoo's MobileNetV2 at batch 32: 0.88x
   * with it). In a large model the weights streaming through L2 push the
   * activations out, whatever the product's own size. */
  bool pf = product_bytes(m, nseg * slen, b, epi) > eng_isa_l2_bytes();
  gemm_args g = {a, lda, rows, m, nseg, sst, slen, b, c, ldc, epi, blocks, 1, rows_outer_ok(b), pf,
                 false};
  /* Fetching two panels ahead holds three in L2 beside the block of A:
   * only while they take at most three quarters of it (at k = 3072 and 48
   * rows they do not, and the fetched panels push A out). */
  int64_t block_rows = blocks == 1 ? m : ROW_BLOCK + TAIL_ROWS;
  g.ahead = pf && !g.rows_outer &&
            (block_rows + 3 * kind_nr[0]) * b->k * (int64_t)sizeof(float) <=
                eng_isa_l2_bytes() / 4 * 3;
  int64_t workers, jobs = chunks_of(blocks, m, b, &g.pgroups, &workers);
  if (workers < 2) {
    for (int64_t rb = 0; rb < blocks; rb++) block(&g, rb, 0, b->panels);
    return;
  }
  eng_pool_run(NULL, jobs, chunk, &g);
}

/* --- A scaled by column, a row block at a time --------------------------------- */

int64_t eng_gemm_scaled_scratch(int64_t m, const eng_packed *b) {
  int64_t pgroups, workers;
  if (m <= 0) return 0;
  chunks_of(row_blocks(m), m, b, &pgroups, &workers);
  return workers * (ROW_BLOCK + TAIL_ROWS) * b->k;
}

typedef struct scaled_args {
  gemm_args g;
  const float *scale;
  float *scratch;
  int64_t each, jobs;
  atomic_llong next; /* the next chunk to claim */
} scaled_args;

/* Chunk j (row block j / pgroups, its panel group j % pgroups): the block's
 * rows scaled into buf, then the block as run() computes it. */
static void scaled_chunk(const scaled_args *s, int64_t j, float *buf) {
  const gemm_args *g = &s->g;
  int64_t rb = j / g->pgroups, grp = j % g->pgroups, np = g->b->panels, k = g->slen;
  int64_t r0 = rb * ROW_BLOCK, nrows = rb == g->blocks - 1 ? g->m - r0 : ROW_BLOCK;
  for (int64_t r = 0; r < nrows; r++) {
    const float *src = g->a + (r0 + r) * g->lda;
    float *dst = buf + r * k;
    for (int64_t i = 0; i < k; i++) dst[i] = src[i] * s->scale[i];
  }
  gemm_args one = *g;
  one.a = buf;
  one.lda = k;
  one.m = nrows;
  one.blocks = 1;
  one.c = g->c + r0 * g->ldc;
  block(&one, 0, grp * np / g->pgroups, (grp + 1) * np / g->pgroups);
}

/* Worker w: claims chunks until none are left, with scratch block w. */
static void scaled_worker(void *arg, int64_t w) {
  scaled_args *s = arg;
  float *buf = s->scratch + w * s->each;
  for (int64_t j; (j = atomic_fetch_add(&s->next, 1)) < s->jobs;) scaled_chunk(s, j, buf);
}

void eng_gemm_run_scaled(const float *a, int64_t lda, int64_t m, const float *scale,
                         const eng_packed *b, float *c, int64_t ldc, const eng_gemm_epi *epi,
                         float *scratch, int64_t room) {
  if (m <= 0) return;
  if (epi && !epi->n) epi = NULL;
  int64_t pgroups, workers, jobs = chunks_of(row_blocks(m), m, b, &pgroups, &workers);
  /* The pool may have grown since the caller sized scratch. */
  int64_t each = (ROW_BLOCK + TAIL_ROWS) * b->k;
  if (workers > room / each) workers = room / each > 0 ? room / each : 1;
  bool pf = product_bytes(m, b->k, b, epi) > eng_isa_l2_bytes(); /* as run() */
  scaled_args s = {.g = {a, lda, NULL, m, 1, 0, b->k, b, c, ldc, epi, row_blocks(m), pgroups,
                         rows_outer_ok(b), pf, false},
                   .scale = scale,
                   .scratch = scratch,
                   .each = each,
                   .jobs = jobs};
  atomic_init(&s.next, 0);
  if (workers < 2)
    scaled_worker(&s, 0);
  else
    eng_pool_run(NULL, workers, scaled_worker, &s);
}

void eng_gemm_run(const float *a, int64_t lda, int64_t m, const eng_packed *b, float *c,
                  int64_t ldc, const eng_gemm_epi *epi) {
  run(a, lda, NULL, m, 1, 0, b->k, b, c, ldc, epi);
}

void eng_gemm_run_rows(const float *const *rows, int64_t m, int64_t nseg, int64_t seg_stride,
                       int64_t seg_len, const eng_packed *b, float *c, int64_t ldc,
                       const eng_gemm_epi *epi) {
  run(NULL, 0, rows, m, nseg, seg_stride, seg_len, b, c, ldc, epi);
}

/* --- products of two run-time operands ---------------------------------------- */

/* A thread's packing buffer for eng_gemm_dynamic: grown to the largest B
 * it has packed, freed with the thread. */
typedef struct dyn_scratch {
  eng_packed p;
  int64_t cap_panels, cap_floats;
} dyn_scratch;

static tss_t dyn_key;
static bool dyn_key_ok;
static once_flag dyn_once = ONCE_FLAG_INIT;

static void dyn_free(void *arg) {
  dyn_scratch *d = arg;
  if (!d) return;
  free(d->p.col0);
  free(d->p.kind);
  free(d->p.off);
  free(d->p.data);
  free(d);
}

static void dyn_init(void) { dyn_key_ok = tss_create(&dyn_key, dyn_free) == thrd_success; }

/* The calling thread's scratch with room for `panels` panels and `floats`
 * packed floats, or NULL. */
static eng_packed *dyn_get(int64_t panels, int64_t floats) {
  call_once(&dyn_once, dyn_init);
  if (!dyn_key_ok) return NULL;
  dyn_scratch *d = tss_get(dyn_key);
  if (!d) {
    if (!(d = calloc(1, sizeof *d))) return NULL;
    if (tss_set(dyn_key, d) != thrd_success) {
      free(d);
      return NULL;
    }
  }
  if (panels > d->cap_panels) {
    int64_t *c0 = realloc(d->p.col0, sizeof *c0 * (size_t)panels);
    if (c0) d->p.col0 = c0;
    int *kd = realloc(d->p.kind, sizeof *kd * (size_t)panels);
    if (kd) d->p.kind = kd;
    int64_t *of = realloc(d->p.off, sizeof *of * (size_t)panels);
    if (of) d->p.off = of;
    if (!c0 || !kd || !of) return NULL;
    d->cap_panels = panels;
  }
  if (floats > d->cap_floats) {
    size_t bytes = sizeof(float) * (size_t)floats;
    void *mem = eng_mem_alloc(64, bytes, bytes);
    if (!mem) return NULL;
    free(d->p.data);
    d->p.data = mem;
    d->cap_floats = floats;
  }
  d->p.panels = panels;
  d->p.prescaled = false;
  return &d->p;
}

/* Packing B per call, as the pool's chunks see it: chunk i is panels
 * [i * per, (i + 1) * per). A copy: which thread does it changes nothing. */
typedef struct fill_args {
  eng_packed *p;
  const float *b;
  int64_t ldb;
  bool trans_b;
  int64_t per;
} fill_args;

static void fill_chunk(void *arg, int64_t i) {
  const fill_args *f = arg;
  int64_t p0 = i * f->per, p1 = p0 + f->per < f->p->panels ? p0 + f->per : f->p->panels;
  fill_panels(f->p, f->b, f->ldb, f->trans_b, NULL, 0, p0, p1);
}

/* Floats of B below which packing it runs on one thread. */
#define PAR_MIN_FILL (1 << 16)

bool eng_gemm_dynamic(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb,
                      bool trans_b, int64_t k, int64_t n, float *c, int64_t ldc) {
  int v = eng_isa_active();
  if (v == ENG_ISA_GENERIC || m <= 0 || k <= 0 || n <= 0 || k > (1 << 24) || n > (1 << 24))
    return false;
  int64_t panels = split_panels(v, n, NULL), floats = 0;
  for (int64_t cols = 0, w = kind_nr[v == ENG_ISA_AVX512 ? P512_32 : P256_16]; cols < n; cols += w)
    floats += k * w; /* an upper bound: every panel as wide as the widest */
  eng_packed *p = dyn_get(panels, floats);
  if (!p) return false;
  layout(p, v, k, n);
  fill_args f = {p, b, ldb, trans_b, 1};
  int threads = eng_pool_threads(NULL);
  if (threads > 1 && k * n >= PAR_MIN_FILL && p->panels > 1) {
    f.per = (p->panels + 4 * threads - 1) / (4 * threads);
    eng_pool_run(NULL, (p->panels + f.per - 1) / f.per, fill_chunk, &f);
  } else {
    fill(p, b, ldb, trans_b, NULL, 0);
  }
  run(a, lda, NULL, m, 1, 0, k, p, c, ldc, NULL);
  return true;
}
