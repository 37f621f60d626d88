/* Winograd F(2x2, 3x3) convolutions (see eng_wino.h). */
#include "eng_wino.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "eng_epilogue.h"
#include "eng_isa.h"
#include "eng_kernels.h"
#include "eng_pool.h"

static bool enabled = true;
static once_flag enabled_once = ONCE_FLAG_INIT;

static void read_enabled(void) {
  const char *e = getenv("TENSORD_ENGINE_WINOGRAD");
  enabled = !(e && !strcmp(e, "0"));
}

bool eng_wino_enabled(void) {
  call_once(&enabled_once, read_enabled);
  return enabled;
}

/* Most channel pairs (cin x cout) a filter may have. Wider 3x3 layers sit
 * where the feature map is small (ResNet50's 512-channel ones at 7x7):
 * there the tiles past the edge waste a third of the work and the
 * transformed filter, 16/9 of the original, streams from memory for few
 * tiles, so the gain measured 1.1-1.2x for 22 MB more weights. */
#define WINO_MAX_PAIRS (256 * 256)

bool eng_wino_suits(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                    int64_t cin, int64_t cout) {
  return kh == 3 && kw == 3 && sh == 1 && sw == 1 && dh == 1 && dw == 1 && cin >= 16 &&
         cout >= 16 && cin * cout <= WINO_MAX_PAIRS;
}

/* G, the filter's transform: U = G g G^T. */
static const double wg[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

typedef struct wino_filter {
  const float *f; /* [3, 3, cin, cout] */
  int64_t cin, cout;
} wino_filter;

/* Part t = 4r + q of U: U[r][q] = sum over taps (a, b) of G[r][a] G[q][b]
 * g[a][b], in double and rounded once, over the taps whose weight is not
 * zero (1 to 9 of them), output channels innermost. */
static void wino_part(void *arg, int64_t t, float *u) {
  const wino_filter *w = arg;
  size_t plane = (size_t)w->cin * (size_t)w->cout;
  int r = (int)(t / 4), q = (int)(t % 4), nz = 0;
  double coef[9];
  size_t tap[9];
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 3; b++)
      if (wg[r][a] * wg[q][b] != 0) {
        coef[nz] = wg[r][a] * wg[q][b];
        tap[nz++] = (size_t)(a * 3 + b) * plane;
      }
  /* A block of the plane at a time, tap by tap (a loop the compiler
   * vectorises), each element's sum in the same order. */
  double acc[1024];
  for (size_t i0 = 0; i0 < plane; i0 += 1024) {
    size_t len = plane - i0 < 1024 ? plane - i0 : 1024;
    for (size_t i = 0; i < len; i++) acc[i] = 0;
    for (int k = 0; k < nz; k++) {
      const float *src = w->f + tap[k] + i0;
      double c = coef[k];
      for (size_t i = 0; i < len; i++) acc[i] += c * (double)src[i];
    }
    for (size_t i = 0; i < len; i++) u[i0 + i] = (float)acc[i];
  }
}

eng_packed *eng_wino_pack(const float *f, int64_t cin, int64_t cout, const float *scale,
                          int64_t nscale) {
  wino_filter w = {f, cin, cout};
  return eng_gemm_pack_parts(16, cin, cout, wino_part, &w, scale, nscale);
}

bool eng_wino_form(const eng_packed *p, int64_t cin, int64_t cout) {
  return p && eng_gemm_parts(p) == 16 && eng_gemm_k(p) == cin && eng_gemm_n(p) == cout;
}

/* V = B^T d B over a 4x4 window x (row-major), into o. */
#define WINO_IN(x, o)                                    \
  do {                                                   \
    __typeof__((x)[0]) t_[16];                           \
    for (int j_ = 0; j_ < 4; j_++) {                     \
      t_[j_] = (x)[j_] - (x)[8 + j_];                    \
      t_[4 + j_] = (x)[4 + j_] + (x)[8 + j_];            \
      t_[8 + j_] = (x)[8 + j_] - (x)[4 + j_];            \
      t_[12 + j_] = (x)[4 + j_] - (x)[12 + j_];          \
    }                                                    \
    for (int i_ = 0; i_ < 4; i_++) {                     \
      (o)[i_ * 4] = t_[i_ * 4] - t_[i_ * 4 + 2];         \
      (o)[i_ * 4 + 1] = t_[i_ * 4 + 1] + t_[i_ * 4 + 2]; \
      (o)[i_ * 4 + 2] = t_[i_ * 4 + 2] - t_[i_ * 4 + 1]; \
      (o)[i_ * 4 + 3] = t_[i_ * 4 + 1] - t_[i_ * 4 + 3]; \
    }                                                    \
  } while (0)

/* Y = A^T m A over a 4x4 product x (row-major), into the 2x2 o. */
#define WINO_OUT(x, o)                                                    \
  do {                                                                    \
    __typeof__((x)[0]) z_[8];                                             \
    for (int j_ = 0; j_ < 4; j_++) {                                      \
      z_[j_] = (x)[j_] + (x)[4 + j_] + (x)[8 + j_];                       \
      z_[4 + j_] = (x)[4 + j_] - (x)[8 + j_] - (x)[12 + j_];              \
    }                                                                     \
    for (int i_ = 0; i_ < 2; i_++) {                                      \
      (o)[i_ * 2] = z_[i_ * 4] + z_[i_ * 4 + 1] + z_[i_ * 4 + 2];         \
      (o)[i_ * 2 + 1] = z_[i_ * 4 + 1] - z_[i_ * 4 + 2] - z_[i_ * 4 + 3]; \
    }                                                                     \
  } while (0)

#define WN_FN(name) name##_512
#define WN_TARGET "avx512f"
#define WN_W 16
#include "eng_wino_body.h"
#undef WN_FN
#undef WN_TARGET
#undef WN_W

#define WN_FN(name) name##_256
#define WN_TARGET "avx2,fma"
#define WN_W 8
#include "eng_wino_body.h"
#undef WN_FN
#undef WN_TARGET
#undef WN_W

/* Floats of a block's two transforms (16 x tiles x (cin + cout)) that
 * stay in L2 while its 16 products run. */
#define BLOCK_FLOATS (192 << 10)
/* Fewest tiles a block's products get (a row of B panels per 48 rows of A
 * in eng_gemm), unless the whole output has fewer. */
#define MIN_BLOCK_TILES 48

typedef struct wino_args {
  const eng_conv_geom *g;
  const float *x;
  float *y;
  int64_t cout;
  const eng_packed *u;
  const eng_kepi *epi;
  int64_t th, tw; /* tiles down and across one image */
  int64_t per;    /* tile rows per block */
  bool wide;      /* AVX-512 transforms */
  atomic_bool short_of_memory;
} wino_args;

/* Block i: tile rows [i * per, (i + 1) * per) over all images. */
static void wino_block(void *arg, int64_t bi) {
  wino_args *a = arg;
  const eng_conv_geom *g = a->g;
  int64_t rows = a->g->n * a->th, r0 = bi * a->per, r1 = r0 + a->per < rows ? r0 + a->per : rows;
  int64_t tiles = (r1 - r0) * a->tw, cin = g->c, cout = a->cout;
  int64_t vs = tiles * cin, ms = tiles * cout;
  /* V, M, a row of zeros for windows past the input's edge and a row for
   * outputs past the output's edge. */
  int64_t numel = 16 * vs + 16 * ms + cin + cout;
  eng_shape sh = eng_shape_make(1, &numel);
  eng_tensor scratch = {0};
  if (eng_tensor_alloc_raw(&scratch, ENG_DT_FLOAT, &sh, NULL)) {
    atomic_store(&a->short_of_memory, true);
    return;
  }
  float *v = eng_tensor_data(&scratch), *m = v + 16 * vs, *zeros = m + 16 * ms;
  float *sink = zeros + cin;
  memset(zeros, 0, sizeof *zeros * (size_t)cin);
  for (int64_t r = r0, t = 0; r < r1; r++) {
    int64_t b = r / a->th, iy0 = r % a->th * 2 - g->pt;
    for (int64_t tx = 0; tx < a->tw; tx++, t++) {
      const float *d[16];
      int64_t ix0 = tx * 2 - g->pl;
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
          int64_t iy = iy0 + i, ix = ix0 + j;
          d[i * 4 + j] = iy < 0 || iy >= g->h || ix < 0 || ix >= g->w
                             ? zeros
                             : a->x + ((b * g->h + iy) * g->w + ix) * cin;
        }
      if (a->wide)
        tin_512(d, v + t * cin, vs, cin);
      else
        tin_256(d, v + t * cin, vs, cin);
    }
  }
  for (int64_t k = 0; k < 16; k++)
    eng_gemm_run(v + k * vs, cin, tiles, eng_gemm_part(a->u, k), m + k * ms, cout, NULL);
  for (int64_t r = r0, t = 0; r < r1; r++) {
    int64_t b = r / a->th, oy0 = r % a->th * 2;
    for (int64_t tx = 0; tx < a->tw; tx++, t++) {
      float *y[4];
      for (int i = 0; i < 2; i++)
        for (int j = 0; j < 2; j++) {
          int64_t oy = oy0 + i, ox = tx * 2 + j;
          y[i * 2 + j] =
              oy < g->oh && ox < g->ow ? a->y + ((b * g->oh + oy) * g->ow + ox) * cout : sink;
        }
      if (a->wide)
        tout_512(m + t * cout, ms, y, cout);
      else
        tout_256(m + t * cout, ms, y, cout);
    }
    /* This tile row's output rows, while they are in cache. */
    int64_t nrow = g->oh - oy0 < 2 ? g->oh - oy0 : 2;
    eng_kepilogue_rows(a->epi, a->y + (b * g->oh + oy0) * g->ow * cout, nrow * g->ow, cout);
  }
  eng_tensor_release(&scratch);
}

td_code eng_wino_run(eng_kctx *c, const eng_conv_geom *g, const float *x, float *y, int64_t cout) {
  eng_kepi epi;
  eng_kepilogue_take(c, &epi);
  wino_args a = {.g = g,
                 .x = x,
                 .y = y,
                 .cout = cout,
                 .u = c->packed,
                 .epi = &epi,
                 .th = (g->oh + 1) / 2,
                 .tw = (g->ow + 1) / 2,
                 .wide = eng_isa_active() == ENG_ISA_AVX512};
  atomic_init(&a.short_of_memory, false);
  int64_t rows = g->n * a.th;
  if (rows <= 0 || a.tw <= 0) return TD_OK;
  /* Tile rows per block: as many as keep the transforms in L2, at least
   * MIN_BLOCK_TILES tiles, and enough blocks for every pool thread. */
  int64_t per = BLOCK_FLOATS / (16 * a.tw * (g->c + cout));
  int64_t least = (MIN_BLOCK_TILES + a.tw - 1) / a.tw;
  if (per < least) per = least;
  int threads = eng_pool_threads(NULL);
  if (threads > 1 && (rows + per - 1) / per < 2 * threads) {
    per = rows / (2 * threads);
    if (per < 1) per = 1;
  }
  if (per > rows) per = rows;
  a.per = per;
  int64_t blocks = (rows + per - 1) / per;
  if (blocks == 1)
    wino_block(&a, 0); /* its products then split over the pool themselves */
  else
    eng_pool_run(NULL, blocks, wino_block, &a);
  if (atomic_load(&a.short_of_memory))
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for the Winograd transforms");
  return TD_OK;
}
