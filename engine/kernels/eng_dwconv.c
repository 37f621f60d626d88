/* Depthwise convolution: one vector kernel written once (eng_dwconv_body.h)
 * and instantiated for AVX-512 and AVX2+FMA, plus a scalar loop in the same
 * summation order for the generic case. The instruction set is eng_isa's. */
#include "eng_dwconv.h"

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <string.h>

#include "eng_isa.h"
#include "eng_pool.h"
#include "eng_vmath.h"

/* --- AVX-512 ----------------------------------------------------------------- */

#define DW_FN(name) name##_512
#define DW_TARGET "avx512f"
#define DW_W 16
#define DW_PX 4 /* pixels per row of the two-row kernel: 9 + 8 + 1 of 32 zmm */
#define DW_WHELD 1
#define DW_NB 2 /* channel blocks of the one-row kernel: 2 x 8 accumulators */
#define DW_EB 4 /* channel blocks of a pixel in the padding */
typedef __m512 dw_v512;
typedef __mmask16 dw_m512;
#define dw_v dw_v512
#define dw_m dw_m512
#define DW_MASK(cw) ((__mmask16)((1u << (cw)) - 1))
#define DW_ZERO() _mm512_setzero_ps()
#define DW_SET1(s) _mm512_set1_ps(s)
#define DW_LOAD(p, m) _mm512_maskz_loadu_ps((m), (p))
#define DW_LOADU(p) _mm512_loadu_ps(p)
#define DW_STOREU(p, v) _mm512_storeu_ps((p), (v))
#define DW_STORE(p, m, v) _mm512_mask_storeu_ps((p), (m), (v))
#define DW_FMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#define DW_EPI(kind, v, k) epi512((kind), (v), (k))

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

#include "eng_dwconv_body.h"

#undef DW_FN
#undef DW_TARGET
#undef DW_W
#undef DW_PX
#undef DW_WHELD
#undef DW_NB
#undef DW_EB
#undef dw_v
#undef dw_m
#undef DW_MASK
#undef DW_ZERO
#undef DW_SET1
#undef DW_LOAD
#undef DW_LOADU
#undef DW_STOREU
#undef DW_STORE
#undef DW_FMA
#undef DW_EPI

/* --- AVX2 + FMA ------------------------------------------------------------- */

#define DW_FN(name) name##_256
#define DW_TARGET "avx2,fma"
#define DW_W 8
#define DW_PX 4 /* 8 accumulators + 6 weights + 1 input of 16 ymm */
#define DW_WHELD 0
#define DW_NB 1
#define DW_EB 8
typedef __m256 dw_v256;
typedef __m256i dw_m256;
#define dw_v dw_v256
#define dw_m dw_m256
#define DW_MASK(cw) mask256(cw)
#define DW_ZERO() _mm256_setzero_ps()
#define DW_SET1(s) _mm256_set1_ps(s)
#define DW_LOAD(p, m) _mm256_maskload_ps((p), (m))
#define DW_LOADU(p) _mm256_loadu_ps(p)
#define DW_STOREU(p, v) _mm256_storeu_ps((p), (v))
#define DW_STORE(p, m, v) _mm256_maskstore_ps((p), (m), (v))
#define DW_FMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#define DW_EPI(kind, v, k) epi256((kind), (v), (k))

__attribute__((target("avx2,fma"))) static inline __m256i mask256(int64_t cw) {
  /* Lane l is on when l < cw: the sign bit of (l - cw). */
  return _mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)cw));
}

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

#include "eng_dwconv_body.h"

/* --- scalar ------------------------------------------------------------------ */

static float epi1(int kind, float v, float k) {
  switch (kind) {
    case ENG_GEMM_ADD: return v + k;
    case ENG_GEMM_SUB: return v - k;
    case ENG_GEMM_MUL: return v * k;
    case ENG_GEMM_RELU: return v > 0 ? v : 0;
    case ENG_GEMM_SWISH: return v * eng_vmath_sigmoid1(v * k); /* the Sigmoid kernel's bits */
    default: return v > 0 ? (v < 6 ? v : 6) : 0;
  }
}

static void dw_scalar(const eng_conv_geom *g, const float *x, const float *f, float *y,
                      const eng_gemm_epi *epi, int64_t q0, int64_t q1) {
  for (int64_t q = q0; q < q1; q++) {
    int64_t n = q / g->oh, oh = q % g->oh;
    for (int64_t ow = 0; ow < g->ow; ow++) {
        float *o = y + ((n * g->oh + oh) * g->ow + ow) * g->c;
        for (int64_t ch = 0; ch < g->c; ch++) {
          float acc = 0;
          for (int64_t i = 0; i < g->kh; i++) {
            int64_t ih = oh * g->sh - g->pt + i * g->dh;
            if (ih < 0 || ih >= g->h) continue;
            for (int64_t j = 0; j < g->kw; j++) {
              int64_t iw = ow * g->sw - g->pl + j * g->dw;
              if (iw < 0 || iw >= g->w) continue;
              acc = fmaf(x[((n * g->h + ih) * g->w + iw) * g->c + ch],
                         f[(i * g->kw + j) * g->c + ch], acc);
            }
          }
          for (int e = 0; epi && e < epi->n; e++)
            acc = epi1(epi->op[e].kind, acc, epi->op[e].k ? epi->op[e].k[ch] : epi->op[e].s);
          o[ch] = acc;
        }
    }
  }
}

typedef void (*dw_fn)(const eng_conv_geom *, const float *, const float *, float *,
                      const eng_gemm_epi *, int64_t, int64_t);

static dw_fn pick(eng_isa isa) {
  switch (isa) {
    case ENG_ISA_AVX512:
      return dw_512;
    case ENG_ISA_AVX2:
      return dw_256;
    default:
      return dw_scalar;
  }
}

/* One call, as the pool's chunks see it: chunk i is output rows
 * [i * rows, (i + 1) * rows) of the n * oh. */
typedef struct dw_args {
  dw_fn fn;
  const eng_conv_geom *g;
  const float *x, *f;
  float *y;
  const eng_gemm_epi *epi;
  int64_t rows;
} dw_args;

static void dw_chunk(void *arg, int64_t i) {
  const dw_args *a = arg;
  int64_t q0 = i * a->rows, q1 = q0 + a->rows, all = a->g->n * a->g->oh;
  a->fn(a->g, a->x, a->f, a->y, a->epi, q0, q1 < all ? q1 : all);
}

/* Below this many multiply-adds a call runs on one thread. */
#define PAR_MIN_MACS (1 << 18)

/* Splits the output rows over the engine's pool, in chunks of an even
 * number of rows (the two-row kernel's pairs stay as on one thread). */
static void dispatch(dw_fn fn, const eng_conv_geom *g, const float *x, const float *f, float *y,
                     const eng_gemm_epi *epi) {
  if (epi && !epi->n) epi = NULL;
  int64_t all = g->n * g->oh, threads = eng_pool_threads(NULL);
  if (threads < 2 || all < 2 || all * g->ow * g->c * g->kh * g->kw < PAR_MIN_MACS) {
    fn(g, x, f, y, epi, 0, all);
    return;
  }
  int64_t want = 4 * threads, rows = (all + want - 1) / want;
  rows += rows & 1;
  dw_args a = {fn, g, x, f, y, epi, rows};
  eng_pool_run(NULL, (all + rows - 1) / rows, dw_chunk, &a);
}

void eng_dwconv_run(const eng_conv_geom *g, const float *x, const float *f, float *y,
                    const eng_gemm_epi *epi) {
  dispatch(pick(eng_isa_active()), g, x, f, y, epi);
}

bool eng_dwconv_run_isa(eng_isa isa, const eng_conv_geom *g, const float *x, const float *f,
                        float *y, const eng_gemm_epi *epi) {
  if (!eng_isa_allows(isa)) return false;
  dispatch(pick(isa), g, x, f, y, epi);
  return true;
}

/* --- expansion and depthwise, band by band ---------------------------------- */

/* The expanded rows one band may hold: about half of L2, so that the band,
 * the depthwise rows it feeds and the expansion's weights stay there. */
static int64_t band_budget(void) { return eng_isa_l2_bytes() / 2; }

/* Output rows per band: as many as the budget holds the input rows of (at
 * least one), even where more than one so that the two-row kernel's pairs
 * stay whole. */
static int64_t band_rows(const eng_conv_geom *g) {
  int64_t row = g->w * g->c * (int64_t)sizeof(float), span = (g->kh - 1) * g->dh + 1;
  int64_t fit = row > 0 ? band_budget() / row : 0, ob = fit > span ? (fit - span) / g->sh + 1 : 1;
  if (ob > g->oh) ob = g->oh;
  if (ob > 1) ob &= ~(int64_t)1;
  return ob < 1 ? 1 : ob;
}

/* Input rows a band of ob output rows reads at most. */
static int64_t band_cap(const eng_conv_geom *g, int64_t ob) {
  int64_t cap = (ob - 1) * g->sh + (g->kh - 1) * g->dh + 1;
  return cap < g->h ? cap : g->h;
}

/* How the output rows are cut into jobs (one image's contiguous rows) and
 * how many workers take them. */
typedef struct band_plan {
  int64_t ob, cap, parts, per, jobs, workers;
} band_plan;

static band_plan plan_bands(const eng_conv_geom *g) {
  band_plan b = {.ob = band_rows(g)};
  b.cap = band_cap(g, b.ob);
  int64_t threads = eng_pool_threads(NULL);
  /* Fewer images than threads: each image's rows in `threads` parts. */
  b.parts = g->n >= threads ? 1 : threads;
  if (b.parts > g->oh) b.parts = g->oh > 0 ? g->oh : 1;
  b.per = (g->oh + b.parts - 1) / b.parts;
  b.jobs = g->n * b.parts;
  b.workers = b.jobs < threads ? b.jobs : threads;
  if (b.workers < 1) b.workers = 1;
  return b;
}

int64_t eng_dwconv_expand_scratch(const eng_conv_geom *g) {
  band_plan b = plan_bands(g);
  return b.workers * b.cap * g->w * g->c;
}

typedef struct band_args {
  dw_fn fn;
  const eng_conv_geom *g;
  const float *x, *f;
  const eng_packed *b;
  const eng_gemm_epi *eepi, *epi;
  float *y, *scratch;
  band_plan bp;
  atomic_llong next; /* the next job to claim */
} band_args;

/* Job j: output rows [r0, r1) of image j / parts, band by band. buf holds
 * the expanded input rows [have0, have1) of that image. */
static void band_job(const band_args *a, int64_t j, float *buf) {
  const eng_conv_geom *g = a->g;
  int64_t img = j / a->bp.parts, r0 = j % a->bp.parts * a->bp.per;
  int64_t r1 = r0 + a->bp.per < g->oh ? r0 + a->bp.per : g->oh;
  int64_t k = eng_gemm_k(a->b), rowf = g->w * g->c, have0 = 0, have1 = 0;
  const float *xi = a->x + img * g->h * g->w * k;
  for (int64_t o0 = r0; o0 < r1; o0 += a->bp.ob) {
    int64_t o1 = o0 + a->bp.ob < r1 ? o0 + a->bp.ob : r1;
    int64_t lo = o0 * g->sh - g->pt, hi = (o1 - 1) * g->sh - g->pt + (g->kh - 1) * g->dh + 1;
    int64_t b0 = lo > 0 ? lo : 0, b1 = hi < g->h ? hi : g->h;
    if (b1 < b0) b1 = b0;
    int64_t keep = 0;
    if (have0 <= b0 && b0 < have1) { /* the rows this band shares with the last */
      keep = (have1 < b1 ? have1 : b1) - b0;
      if (b0 > have0) memmove(buf, buf + (b0 - have0) * rowf, sizeof *buf * (size_t)(keep * rowf));
    }
    if (b1 > b0 + keep)
      eng_gemm_run(xi + (b0 + keep) * g->w * k, k, (b1 - b0 - keep) * g->w, a->b, buf + keep * rowf,
                   g->c, a->eepi);
    have0 = b0;
    have1 = b1;
    eng_conv_geom band = *g;
    band.n = 1;
    band.h = b1 - b0;
    band.pt = b0 - lo;
    band.oh = o1 - o0;
    a->fn(&band, buf, a->f, a->y + (img * g->oh + o0) * g->ow * g->c, a->epi, 0, o1 - o0);
  }
}

/* Worker w: claims jobs until none are left, with band buffer w. */
static void band_worker(void *arg, int64_t w) {
  band_args *a = arg;
  float *buf = a->scratch + w * a->bp.cap * a->g->w * a->g->c;
  for (int64_t j; (j = atomic_fetch_add(&a->next, 1)) < a->bp.jobs;) band_job(a, j, buf);
}

void eng_dwconv_expand_run(const eng_conv_geom *g, const float *x, const eng_packed *b,
                           const eng_gemm_epi *eepi, const float *f, float *y,
                           const eng_gemm_epi *epi, float *scratch, int64_t room) {
  if (epi && !epi->n) epi = NULL;
  if (eepi && !eepi->n) eepi = NULL;
  if (g->n * g->oh * g->ow * g->c <= 0) return;
  band_args a = {.fn = pick(eng_isa_active()),
                 .g = g,
                 .x = x,
                 .f = f,
                 .b = b,
                 .eepi = eepi,
                 .epi = epi,
                 .y = y,
                 .scratch = scratch,
                 .bp = plan_bands(g)};
  /* The pool may have grown since the caller sized scratch. */
  int64_t each = a.bp.cap * g->w * g->c;
  if (each > 0 && a.bp.workers > room / each) a.bp.workers = room / each > 0 ? room / each : 1;
  atomic_init(&a.next, 0);
  eng_pool_run(NULL, a.bp.workers, band_worker, &a);
}
