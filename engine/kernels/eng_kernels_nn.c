/* Neural-network ops on NHWC float32: Conv2D (Winograd F(2x2, 3x3) when the
 * plan packed its filter so, eng_wino.h; the packed GEMM reading the input
 * in place when the weights were packed at load, else im2col + sgemm;
 * grouped convolutions one sgemm per group), DepthwiseConv2dNative (eng_dwconv for
 * multiplier 1, a plain loop otherwise), MaxPool and AvgPool (SAME averages
 * over the valid cells only),
 * FusedBatchNorm{,V2,V3} and Softmax/LogSoftmax over the last axis.
 * Window geometry: eng_window.h. */
#include <cblas.h>
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_dwconv.h"
#include "eng_epilogue.h"
#include "eng_gemm.h"
#include "eng_isa.h"
#include "eng_kernels.h"
#include "eng_model.h"
#include "eng_pool.h"
#include "eng_vmath.h"
#include "eng_window.h"
#include "eng_wino.h"

typedef eng_conv_geom geom;

/* The window along one dim (eng_window.h), or an error in TensorFlow's
 * words. */
static td_code window_1d(eng_kctx *c, const char *pad, int64_t in, int64_t k, int64_t s, int64_t d,
                         const int64_t *explicit_pad, int64_t *out, int64_t *before) {
  switch (eng_window_1d(pad, in, k, s, d, explicit_pad, out, before)) {
  case ENG_WINDOW_OK:
    return TD_OK;
  case ENG_WINDOW_BAD_STEP:
    return eng_kfail(c, TD_INVALID_ARGUMENT, "window, stride and dilation must be positive");
  case ENG_WINDOW_BAD_EXPLICIT:
    return eng_kfail(c, TD_INVALID_ARGUMENT, "explicit paddings must be non-negative");
  case ENG_WINDOW_BAD_PADDING:
    return eng_kfail(c, TD_INVALID_ARGUMENT, "padding '%s' is not supported", pad);
  case ENG_WINDOW_NEGATIVE:
    break;
  }
  return eng_kfail(c, TD_INVALID_ARGUMENT,
                   "Computed output size would be negative: %lld [input: %lld, window: %lld, "
                   "stride: %lld]",
                   (long long)*out, (long long)in, (long long)((k - 1) * d + 1), (long long)s);
}

/* Reads strides/dilations/padding of a conv or pool over x (NHWC). pads,
 * when not NULL, is (top, bottom, left, right) zero padding applied before
 * a VALID window (a folded Pad): the geometry is then EXPLICIT. */
static td_code get_geom_pad(eng_kctx *c, const eng_tensor *x, int64_t kh, int64_t kw,
                            const int64_t *pads, geom *g) {
  const char *fmt = eng_attr_str(c->node, "data_format", "NHWC");
  if (strcmp(fmt, "NHWC"))
    return eng_kfail(c, TD_UNIMPLEMENTED, "data_format %s is not supported on CPU (NHWC only)", fmt);
  if (x->shape.rank != 4)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be 4-dimensional, got rank %d",
                     x->shape.rank);
  int64_t st[4] = {1, 1, 1, 1}, dl[4] = {1, 1, 1, 1}, ep[8] = {0};
  int nst = eng_attr_ints(c->node, "strides", st, 4);
  int ndl = eng_attr_ints(c->node, "dilations", dl, 4);
  int nep = eng_attr_ints(c->node, "explicit_paddings", ep, 8);
  if (nst != 4 || (ndl && ndl != 4))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "strides and dilations must have 4 elements");
  if (st[0] != 1 || st[3] != 1 || dl[0] != 1 || dl[3] != 1)
    return eng_kfail(c, TD_UNIMPLEMENTED, "strides or dilations in the batch or depth dimension");
  const char *pad = eng_attr_str(c->node, "padding", "VALID");
  if (!strcmp(pad, "EXPLICIT") && nep != 8)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "explicit_paddings must have 8 elements");
  if (pads) {
    if (strcmp(pad, "VALID"))
      return eng_kfail(c, TD_INTERNAL, "a folded Pad needs a VALID window");
    pad = "EXPLICIT";
    for (int i = 0; i < 4; i++) ep[2 + i] = pads[i];
  }
  *g = (geom){.n = x->shape.dim[0], .h = x->shape.dim[1], .w = x->shape.dim[2],
              .c = x->shape.dim[3], .kh = kh, .kw = kw, .sh = st[1], .sw = st[2],
              .dh = dl[1], .dw = dl[2]};
  td_code rc = window_1d(c, pad, g->h, kh, g->sh, g->dh, ep + 2, &g->oh, &g->pt);
  if (!rc) rc = window_1d(c, pad, g->w, kw, g->sw, g->dw, ep + 4, &g->ow, &g->pl);
  return rc;
}

static td_code get_geom(eng_kctx *c, const eng_tensor *x, int64_t kh, int64_t kw, geom *g) {
  return get_geom_pad(c, x, kh, kw, NULL, g);
}

static td_code out_nhwc(eng_kctx *c, const geom *g, int64_t ch, bool zero) {
  int64_t d[4] = {g->n, g->oh, g->ow, ch};
  eng_shape s = eng_shape_make(4, d);
  return zero ? eng_kout(c, 0, ENG_DT_FLOAT, &s) : eng_kout_raw(c, 0, ENG_DT_FLOAT, &s);
}

td_code eng_s_conv2d(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  out[0] = eng_shape_unknown();
  if (in[0].rank >= 0 && in[0].rank != 4)
    return td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (%s): input must be 4-dimensional",
                      n->name, n->op);
  return TD_OK;
}

td_code eng_s_pool(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  return eng_s_conv2d(n, in, out, err);
}

/* --- Conv2D ------------------------------------------------------------------- */

#define IM2COL_MAX_FLOATS ((int64_t)4 << 20)
/* Output rows per block when an epilogue is fused: small enough that the
 * block is still in L2 when the epilogue runs over it. */
#define EPI_BLOCK_ROWS 256

static void im2col_rows(const geom *g, const float *x, int64_t row0, int64_t rows, float *col) {
  int64_t kdim = g->kh * g->kw * g->c, span = g->kw * g->c;
  int64_t ow = row0 % g->ow, oh = (row0 / g->ow) % g->oh, n = row0 / (g->ow * g->oh);
  for (int64_t r = 0; r < rows; r++) {
    float *dst = col + r * kdim;
    int64_t iw0 = ow * g->sw - g->pl;
    bool inside = g->dw == 1 && iw0 >= 0 && iw0 + g->kw <= g->w;
    for (int64_t i = 0; i < g->kh; i++, dst += span) {
      int64_t ih = oh * g->sh - g->pt + i * g->dh;
      if (ih < 0 || ih >= g->h) {
        memset(dst, 0, sizeof *dst * (size_t)span);
        continue;
      }
      const float *src = x + ((n * g->h + ih) * g->w) * g->c;
      if (inside) { /* the window's row is contiguous in the input */
        memcpy(dst, src + iw0 * g->c, sizeof *dst * (size_t)span);
        continue;
      }
      for (int64_t j = 0; j < g->kw; j++) {
        int64_t iw = iw0 + j * g->dw;
        if (iw < 0 || iw >= g->w)
          memset(dst + j * g->c, 0, sizeof *dst * (size_t)g->c);
        else
          memcpy(dst + j * g->c, src + iw * g->c, sizeof *dst * (size_t)g->c);
      }
    }
    if (++ow == g->ow) {
      ow = 0;
      if (++oh == g->oh) {
        oh = 0;
        n++;
      }
    }
  }
}

/* Output pixels per call of eng_gemm_run_rows (a multiple of its row
 * block), and the smaller chunk used when that leaves too few chunks to
 * share among the pool's threads. */
#define ROWS_CHUNK 240
#define ROWS_CHUNK_SMALL 48

/* A Conv2D read in place, as conv_in_place's chunks see it: src is the
 * (padded) input, hp x wp pixels per image. */
typedef struct inplace_args {
  const geom *g;
  const float *x;   /* unpadded input (pad rows) */
  float *pad;       /* padded copy (pad rows) */
  const float *src; /* what the product reads */
  int64_t hp, wp, cout, total, chunk;
  const eng_packed *packed;
  float *y;
  const eng_gemm_epi *epi;
} inplace_args;

/* Row r of the padded copy, r in [0, n * hp). */
static void pad_row(void *arg, int64_t row) {
  const inplace_args *a = arg;
  const geom *g = a->g;
  int64_t n = row / a->hp, r = row % a->hp, wpc = a->wp * g->c;
  float *dst = a->pad + row * wpc;
  int64_t ih = r - g->pt;
  if (ih < 0 || ih >= g->h) {
    memset(dst, 0, sizeof *dst * (size_t)wpc);
    return;
  }
  int64_t left = g->pl * g->c, mid = g->w * g->c;
  if (left > wpc) left = wpc;
  if (left + mid > wpc) mid = wpc - left;
  memset(dst, 0, sizeof *dst * (size_t)left);
  memcpy(dst + left, a->x + (n * g->h + ih) * g->w * g->c, sizeof *dst * (size_t)mid);
  memset(dst + left + mid, 0, sizeof *dst * (size_t)(wpc - left - mid));
}

/* Output pixels [i * chunk, (i + 1) * chunk): their windows' row pointers,
 * then one product. */
static void inplace_chunk(void *arg, int64_t i) {
  const inplace_args *a = arg;
  const geom *g = a->g;
  const float *rows[ROWS_CHUNK];
  int64_t p0 = i * a->chunk, m = a->total - p0 < a->chunk ? a->total - p0 : a->chunk;
  int64_t per = g->oh * g->ow, n = p0 / per, oh = p0 % per / g->ow, ow = p0 % g->ow;
  int64_t step = g->sw * g->c;
  const float *rp = a->src + ((n * a->hp + oh * g->sh) * a->wp + ow * g->sw) * g->c;
  for (int64_t k = 0; k < m; k++) {
    rows[k] = rp;
    rp += step;
    if (++ow == g->ow) {
      ow = 0;
      if (++oh == g->oh) {
        oh = 0;
        n++;
      }
      if (n < g->n) rp = a->src + (n * a->hp + oh * g->sh) * a->wp * g->c;
    }
  }
  eng_gemm_run_rows(rows, m, g->kh, g->dh * a->wp * g->c, g->kw * g->c, a->packed,
                    a->y + p0 * a->cout, a->cout, a->epi);
}

/* Conv2D through the packed GEMM reading the input in place: row p of the
 * implicit im2col matrix is kh segments of kw * c contiguous floats (one per
 * window row), so no patch matrix is built. A window that reaches into the
 * padding reads a zero-padded copy of the input instead. Same products in
 * the same order as im2col + GEMM. Needs dilation 1 along the width.
 * The padded copy and the chunks of output pixels are shared over the
 * engine's pool; with fewer pixels than that pays for, each chunk's product
 * is split over the pool instead (eng_gemm_run_rows). */
static td_code conv_in_place(eng_kctx *c, const geom *g, const float *x, float *y, int64_t cout,
                             const eng_gemm_epi *epi) {
  int64_t hp = (g->oh - 1) * g->sh + (g->kh - 1) * g->dh + 1, wp = (g->ow - 1) * g->sw + g->kw;
  inplace_args a = {.g = g, .x = x, .src = x, .cout = cout, .packed = c->packed, .y = y,
                    .epi = epi};
  eng_tensor scratch = {0}; /* from the engine's recycled buffers: no page faults when warm */
  if (g->pt || g->pl || hp > g->h || wp > g->w) {
    if (hp < g->h) hp = g->h;
    if (wp < g->w) wp = g->w;
    int64_t numel = g->n * hp * wp * g->c;
    eng_shape ps = eng_shape_make(1, &numel);
    if (eng_tensor_alloc_raw(&scratch, ENG_DT_FLOAT, &ps, NULL))
      return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for padding");
    a.pad = eng_tensor_data(&scratch);
    a.hp = hp;
    a.wp = wp;
    eng_pool_run(NULL, g->n * hp, pad_row, &a);
    a.src = a.pad;
  } else {
    hp = g->h;
    wp = g->w;
  }
  a.hp = hp;
  a.wp = wp;
  a.total = g->n * g->oh * g->ow;
  int64_t want = 4 * (int64_t)eng_pool_threads(NULL);
  a.chunk = ROWS_CHUNK;
  if ((a.total + ROWS_CHUNK - 1) / ROWS_CHUNK < want) a.chunk = ROWS_CHUNK_SMALL;
  int64_t chunks = (a.total + a.chunk - 1) / a.chunk;
  if (chunks >= want) {
    eng_pool_run(NULL, chunks, inplace_chunk, &a);
  } else { /* few pixels: products as large as the row array allows, each split */
    a.chunk = a.total < ROWS_CHUNK ? a.total : ROWS_CHUNK;
    for (int64_t i = 0; i * a.chunk < a.total; i++) inplace_chunk(&a, i);
  }
  eng_tensor_release(&scratch);
  return TD_OK;
}

/* Grouped Conv2D (filter depth cg < input depth): group k convolves
 * input channels [k*cg, (k+1)*cg) with output channels [k*og, (k+1)*og).
 * Each row block is unfolded once over all channels, then each group's
 * columns are gathered into a patch matrix of its own for one sgemm whose
 * result lands in the group's output columns. */
static td_code conv_grouped(eng_kctx *c, const geom *g, int64_t cg, int64_t cout) {
  const float *xd = eng_tensor_data(&c->in[0]), *fd = eng_tensor_data(&c->in[1]);
  float *y = eng_tensor_data(&c->out[0]);
  int64_t groups = g->c / cg, og = cout / groups, taps = g->kh * g->kw;
  int64_t rows = g->n * g->oh * g->ow, kfull = taps * g->c, kdim = taps * cg;
  if (!rows || !cout) return TD_OK;
  if (!kdim) {
    memset(y, 0, sizeof *y * (size_t)(rows * cout));
    return TD_OK;
  }
  if (rows > INT32_MAX || kfull > INT32_MAX || cout > INT32_MAX)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "convolution too large");
  int64_t chunk = IM2COL_MAX_FLOATS / kfull;
  if (chunk < 1) chunk = 1;
  if (chunk > EPI_BLOCK_ROWS) chunk = EPI_BLOCK_ROWS;
  if (chunk > rows) chunk = rows;
  float *col = malloc(sizeof *col * (size_t)(chunk * (kfull + kdim)));
  if (!col) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for im2col");
  float *gcol = col + chunk * kfull;
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
    im2col_rows(g, xd, r0, nr, col);
    for (int64_t k = 0; k < groups; k++) {
      for (int64_t r = 0; r < nr; r++)
        for (int64_t t = 0; t < taps; t++)
          memcpy(gcol + r * kdim + t * cg, col + r * kfull + t * g->c + k * cg,
                 sizeof *gcol * (size_t)cg);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)og, (int)kdim, 1.0f,
                  gcol, (int)kdim, fd + k * og, (int)cout, 0.0f, y + r0 * cout + k * og,
                  (int)cout);
    }
    eng_kepilogue(c, y + r0 * cout, nr, cout);
  }
  free(col);
  return TD_OK;
}

/* The filter's original was released after packing (eng_model.h) and this
 * call cannot use the packed form. */
static td_code hollow_filter(eng_kctx *c) {
  return eng_kfail(c, TD_INTERNAL, "the filter is held only in packed form, which this input's "
                                   "geometry cannot use");
}

td_code eng_k_conv2d(eng_kctx *c) {
  const eng_tensor *x = &c->in[0], *f = &c->in[1];
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (!rc) rc = eng_kwant(c, 1, ENG_DT_FLOAT);
  if (rc) return rc;
  if (f->shape.rank != 4)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "filter must be 4-dimensional, got rank %d",
                     f->shape.rank);
  geom g;
  if ((rc = get_geom(c, x, f->shape.dim[0], f->shape.dim[1], &g))) return rc;
  int64_t cout = f->shape.dim[3];
  if (f->shape.dim[2] != g.c) {
    int64_t cg = f->shape.dim[2];
    if (!cg || g.c % cg)
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "input depth must be evenly divisible by filter depth: %lld vs %lld",
                       (long long)g.c, (long long)cg);
    if (cout % (g.c / cg))
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "output depth %lld is not a multiple of the number of groups %lld",
                       (long long)cout, (long long)(g.c / cg));
    if (eng_tensor_hollow(f) && g.n * g.oh * g.ow > 0) return hollow_filter(c);
    if ((rc = out_nhwc(c, &g, cout, false))) return rc;
    return conv_grouped(c, &g, cg, cout);
  }
  if ((rc = out_nhwc(c, &g, cout, g.kh * g.kw * g.c == 0))) return rc;
  const float *xd = eng_tensor_data(x), *fd = eng_tensor_data(f);
  float *y = eng_tensor_data(&c->out[0]);
  int64_t rows = g.n * g.oh * g.ow, kdim = g.kh * g.kw * g.c;
  if (!rows || !cout) return TD_OK;
  if (!kdim) return TD_OK; /* zero-filled */
  if (rows > INT32_MAX || kdim > INT32_MAX || cout > INT32_MAX)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "convolution too large");
  if (eng_wino_form(c->packed, g.c, cout) && g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 &&
      g.dh == 1 && g.dw == 1)
    return eng_wino_run(c, &g, xd, y, cout);
  bool packed = c->packed && !eng_gemm_parts(c->packed) && eng_gemm_k(c->packed) == kdim &&
                eng_gemm_n(c->packed) == cout;
  if (!packed && eng_tensor_hollow(f)) return hollow_filter(c);
  if (g.kh == 1 && g.kw == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 &&
      g.oh == g.h && g.ow == g.w) {
    /* 1x1: the input is already the [pixels, channels] matrix. Row blocks
     * keep each block's output in cache for the fused epilogue. */
    if (packed) {
      eng_gemm_epi ge;
      eng_gemm_run(xd, kdim, rows, c->packed, y, cout, eng_kgemm_epi(c, &ge));
      return TD_OK;
    }
    int64_t blk = c->epi ? EPI_BLOCK_ROWS : rows;
    for (int64_t r0 = 0; r0 < rows; r0 += blk) {
      int64_t nr = rows - r0 < blk ? rows - r0 : blk;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)cout, (int)kdim, 1.0f,
                  xd + r0 * kdim, (int)kdim, fd, (int)cout, 0.0f, y + r0 * cout, (int)cout);
      eng_kepilogue(c, y + r0 * cout, nr, cout);
    }
    return TD_OK;
  }
  if (packed && g.dw == 1) {
    eng_gemm_epi ge;
    return conv_in_place(c, &g, xd, y, cout, eng_kgemm_epi(c, &ge));
  }
  int64_t chunk = IM2COL_MAX_FLOATS / kdim;
  if (chunk < 1) chunk = 1;
  if (c->epi && chunk > EPI_BLOCK_ROWS) chunk = EPI_BLOCK_ROWS;
  if (chunk > rows) chunk = rows;
  float *col = malloc(sizeof *col * (size_t)(chunk * kdim));
  if (!col) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for im2col");
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
    im2col_rows(&g, xd, r0, nr, col);
    if (packed) {
      eng_gemm_epi ge;
      eng_gemm_run(col, kdim, nr, c->packed, y + r0 * cout, cout, eng_kgemm_epi(c, &ge));
      continue;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)cout, (int)kdim, 1.0f,
                col, (int)kdim, fd, (int)cout, 0.0f, y + r0 * cout, (int)cout);
    eng_kepilogue(c, y + r0 * cout, nr, cout);
  }
  free(col);
  return TD_OK;
}

/* --- DepthwiseConv2dNative --------------------------------------------------- */

static td_code depthwise(eng_kctx *c, const int64_t *pads) {
  const eng_tensor *x = &c->in[0], *f = &c->in[1];
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (!rc) rc = eng_kwant(c, 1, ENG_DT_FLOAT);
  if (rc) return rc;
  if (f->shape.rank != 4)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "filter must be 4-dimensional, got rank %d",
                     f->shape.rank);
  geom g;
  if ((rc = get_geom_pad(c, x, f->shape.dim[0], f->shape.dim[1], pads, &g))) return rc;
  int64_t mult = f->shape.dim[3];
  if (f->shape.dim[2] != g.c)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input depth %lld does not match the filter's %lld",
                     (long long)g.c, (long long)f->shape.dim[2]);
  if ((rc = out_nhwc(c, &g, g.c * mult, mult != 1))) return rc;
  const float *xd = eng_tensor_data(x), *fd = eng_tensor_data(f);
  float *y = eng_tensor_data(&c->out[0]);
  int64_t oc = g.c * mult;
  if (mult == 1) {
    eng_gemm_epi ge;
    eng_dwconv_run(&g, xd, fd, y, eng_kgemm_epi(c, &ge));
    return TD_OK;
  }
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t oh = 0; oh < g.oh; oh++)
      for (int64_t ow = 0; ow < g.ow; ow++) {
        float *restrict o = y + ((n * g.oh + oh) * g.ow + ow) * oc;
        for (int64_t i = 0; i < g.kh; i++) {
          int64_t ih = oh * g.sh - g.pt + i * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          for (int64_t j = 0; j < g.kw; j++) {
            int64_t iw = ow * g.sw - g.pl + j * g.dw;
            if (iw < 0 || iw >= g.w) continue;
            const float *restrict ip = xd + ((n * g.h + ih) * g.w + iw) * g.c;
            const float *restrict fp = fd + (i * g.kw + j) * oc;
            for (int64_t ch = 0; ch < g.c; ch++)
              for (int64_t m = 0; m < mult; m++) o[ch * mult + m] += ip[ch] * fp[ch * mult + m];
          }
        }
        eng_kepilogue(c, o, 1, oc);
      }
  return TD_OK;
}

td_code eng_k_depthwise_conv2d(eng_kctx *c) { return depthwise(c, NULL); }

/* The paddings of a Pad node whose amounts are a Const node's value:
 * (top, bottom, left, right) of an NHWC tensor, false unless only H and W
 * are padded. */
td_code eng_k_depthwise_conv2d_padded(eng_kctx *c) {
  const eng_graph *g = eng_model_graph(c->model);
  int64_t pads[4];
  if (!eng_pad_hw(g, eng_graph_node(g, c->node->in[0].node), pads))
    return eng_kfail(c, TD_INTERNAL, "input 0 is not a foldable Pad");
  return depthwise(c, pads);
}

/* --- _ExpandDepthwise -------------------------------------------------------- */

td_code eng_k_expand_depthwise(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  const eng_epilogue *e = c->epi;
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (rc) return rc;
  int at = -1;
  for (int i = 0; e && i < e->n; i++)
    if (e->op[i].kind == EPI_DEPTHWISE) at = i;
  if (at < 0 || !c->packed || eng_gemm_parts(c->packed) || !e->op[at].k.buf)
    return eng_kfail(c, TD_INTERNAL, "not a fused expansion and depthwise step");
  int64_t cexp = eng_gemm_n(c->packed);
  if (x->shape.rank != 4)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be 4-dimensional, got rank %d",
                     x->shape.rank);
  if (x->shape.dim[3] != eng_gemm_k(c->packed))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input depth %lld does not match the filter's %lld",
                     (long long)x->shape.dim[3], (long long)eng_gemm_k(c->packed));
  /* The depthwise layer's geometry over the expansion's output (x's
   * pixels, cexp channels), from its own node's attributes. */
  const eng_graph *gr = eng_model_graph(c->model);
  const eng_node *dn = eng_graph_node(gr, e->op[at].node);
  const eng_tensor *f = &e->op[at].k;
  eng_tensor xe = {.dtype = ENG_DT_FLOAT, .shape = x->shape};
  xe.shape.dim[3] = cexp;
  int64_t pads[4];
  bool padded = eng_pad_hw(gr, eng_graph_node(gr, dn->in[0].node), pads);
  eng_kctx d = *c;
  d.node = dn;
  d.node_id = e->op[at].node;
  geom g;
  if ((rc = get_geom_pad(&d, &xe, f->shape.dim[0], f->shape.dim[1], padded ? pads : NULL, &g)))
    return rc;
  if (f->shape.rank != 4 || f->shape.dim[2] != cexp || f->shape.dim[3] != 1)
    return eng_kfail(c, TD_INTERNAL, "the fused depthwise filter does not match the expansion");
  if ((rc = out_nhwc(c, &g, cexp, false))) return rc;
  /* The two epilogues, as eng_gemm and eng_dwconv take them: the
   * expansion's (after a multiply the packed weights hold) and the
   * depthwise layer's. */
  eng_epilogue e1 = *e, e2 = {.n = e->n - at - 1};
  e1.n = at;
  for (int i = 0; i < e2.n; i++) e2.op[i] = e->op[at + 1 + i];
  eng_kctx k1 = *c, k2 = *c;
  k1.epi = &e1;
  k2.epi = &e2;
  k2.packed = NULL;
  eng_gemm_epi ge1, ge2;
  const eng_gemm_epi *p1 = e1.n ? eng_kgemm_epi(&k1, &ge1) : NULL;
  const eng_gemm_epi *p2 = e2.n ? eng_kgemm_epi(&k2, &ge2) : NULL;
  int64_t floats = eng_dwconv_expand_scratch(&g);
  eng_shape ss = eng_shape_make(1, &floats);
  eng_tensor scratch = {0}; /* recycled: no page faults when warm */
  if (floats > 0 && eng_tensor_alloc_raw(&scratch, ENG_DT_FLOAT, &ss, NULL))
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for the expansion's bands");
  eng_dwconv_expand_run(&g, eng_tensor_data(x), c->packed, p1, eng_tensor_data(f),
                        eng_tensor_data(&c->out[0]), p2,
                        floats > 0 ? eng_tensor_data(&scratch) : NULL, floats);
  eng_tensor_release(&scratch);
  c->epi_done = true;
  return TD_OK;
}

/* --- _ScaledConv1x1 ---------------------------------------------------------- */

/* Whether s scales x (4-D, k channels) one value per image and channel:
 * [n or 1, 1, 1, k], or k values along its only dim. */
static bool scales_channels(const eng_tensor *s, const eng_tensor *x, int64_t k) {
  const eng_shape *ss = &s->shape, *xs = &x->shape;
  if (s->dtype != ENG_DT_FLOAT || x->dtype != ENG_DT_FLOAT || xs->rank != 4 || xs->dim[3] != k)
    return false;
  if (ss->rank == 1) return ss->dim[0] == k;
  return ss->rank == 4 && (ss->dim[0] == 1 || ss->dim[0] == xs->dim[0]) && ss->dim[1] == 1 &&
         ss->dim[2] == 1 && ss->dim[3] == k;
}

td_code eng_k_scaled_conv1x1(eng_kctx *c) {
  if (!c->packed || eng_gemm_parts(c->packed) || c->n_in != 2)
    return eng_kfail(c, TD_INTERNAL, "not a fused scale and 1x1 convolution step");
  int64_t k = eng_gemm_k(c->packed), n = eng_gemm_n(c->packed);
  const eng_tensor *x = &c->in[0], *s = &c->in[1];
  if (!scales_channels(s, x, k)) {
    x = &c->in[1];
    s = &c->in[0];
  }
  eng_tensor prod = {0};
  if (!scales_channels(s, x, k)) { /* the Mul as its own kernel; x is then its product */
    eng_kctx m = *c;
    m.n_out = 1;
    m.out = &prod;
    m.epi = NULL;
    m.epi_in = NULL;
    m.epi_part = 0;
    m.epi_done = false;
    m.packed = NULL;
    td_code rc = eng_k_mul(&m);
    if (rc) return rc;
    x = &prod;
    s = NULL;
  }
  td_code rc = TD_OK;
  if (x->dtype != ENG_DT_FLOAT)
    rc = eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  else if (x->shape.rank != 4)
    rc = eng_kfail(c, TD_INVALID_ARGUMENT, "input must be 4-dimensional, got rank %d",
                   x->shape.rank);
  else if (x->shape.dim[3] != k)
    rc = eng_kfail(c, TD_INVALID_ARGUMENT, "input depth %lld does not match the filter's %lld",
                   (long long)x->shape.dim[3], (long long)k);
  eng_shape os = x->shape;
  os.dim[3] = n;
  if (!rc) rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &os);
  if (rc) {
    eng_tensor_release(&prod);
    return rc;
  }
  eng_gemm_epi ge;
  const eng_gemm_epi *pe = eng_kgemm_epi(c, &ge);
  const float *xd = eng_tensor_data(x);
  float *yd = eng_tensor_data(&c->out[0]);
  if (!s) {
    eng_gemm_run(xd, k, eng_tensor_numel(x) / k, c->packed, yd, n, pe);
    eng_tensor_release(&prod);
    return TD_OK;
  }
  int64_t imgs = x->shape.dim[0], rows = x->shape.dim[1] * x->shape.dim[2];
  int64_t floats = eng_gemm_scaled_scratch(rows, c->packed);
  eng_shape ss = eng_shape_make(1, &floats);
  eng_tensor scratch = {0}; /* recycled: no page faults when warm */
  if (floats > 0 && eng_tensor_alloc_raw(&scratch, ENG_DT_FLOAT, &ss, NULL))
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for the scaled rows");
  const float *sd = eng_tensor_data(s);
  bool each = s->shape.rank == 4 && s->shape.dim[0] > 1; /* one scale per image */
  for (int64_t i = 0; i < imgs && floats > 0; i++)
    eng_gemm_run_scaled(xd + i * rows * k, k, rows, sd + (each ? i * k : 0), c->packed,
                        yd + i * rows * n, n, pe, eng_tensor_data(&scratch), floats);
  eng_tensor_release(&scratch);
  return TD_OK;
}

/* --- pools ------------------------------------------------------------------- */

/* One output pixel of a pool: channels in blocks of eight with a fixed
 * inner trip count (which the compiler turns into vector registers), the
 * rest one by one; off is the offset of the window's (0, 0) cell in x (which
 * may lie in the padding: only valid cells are read), rs the row step. */
#define POOL_BLK 8
static void pool_max_pixel(const float *x, int64_t off, int64_t rs, int64_t c, int64_t i0, int64_t i1,
                           int64_t j0, int64_t j1, float *restrict o) {
  int64_t ch = 0;
  for (; ch + POOL_BLK <= c; ch += POOL_BLK) {
    float m[POOL_BLK];
    for (int v = 0; v < POOL_BLK; v++) m[v] = -INFINITY;
    for (int64_t i = i0; i < i1; i++)
      for (int64_t j = j0; j < j1; j++) {
        const float *restrict ip = x + (off + i * rs + j * c + ch);
        for (int v = 0; v < POOL_BLK; v++) m[v] = ip[v] > m[v] ? ip[v] : m[v];
      }
    for (int v = 0; v < POOL_BLK; v++) o[ch + v] = m[v];
  }
  for (; ch < c; ch++) {
    float m = -INFINITY;
    for (int64_t i = i0; i < i1; i++)
      for (int64_t j = j0; j < j1; j++) {
        float v = x[off + i * rs + j * c + ch];
        m = v > m ? v : m;
      }
    o[ch] = m;
  }
}

/* The same for AvgPool: the sum over the valid cells in window order, then
 * one division by their count (TF's SAME averages count only those). */
static void pool_avg_pixel(const float *x, int64_t off, int64_t rs, int64_t c, int64_t i0, int64_t i1,
                           int64_t j0, int64_t j1, int64_t cnt, float *restrict o) {
  int64_t ch = 0;
  for (; ch + POOL_BLK <= c; ch += POOL_BLK) {
    float s[POOL_BLK] = {0};
    for (int64_t i = i0; i < i1; i++)
      for (int64_t j = j0; j < j1; j++) {
        const float *restrict ip = x + (off + i * rs + j * c + ch);
        for (int v = 0; v < POOL_BLK; v++) s[v] += ip[v];
      }
    for (int v = 0; v < POOL_BLK; v++) o[ch + v] = cnt ? s[v] / (float)cnt : s[v];
  }
  for (; ch < c; ch++) {
    float s = 0;
    for (int64_t i = i0; i < i1; i++)
      for (int64_t j = j0; j < j1; j++) s += x[off + i * rs + j * c + ch];
    o[ch] = cnt ? s / (float)cnt : s;
  }
}

/* One output row of a pool on AVX2: eight channels a vector (masked at the
 * tail), max as (x > m ? x : m) like the scalar code, sums in window order;
 * rows [i0, i1) of the window are valid. The geometry is read into locals
 * first: the vector stores may alias anything, g included, and would make
 * the compiler read its fields again after each. Inlined with is_max
 * constant. */
__attribute__((target("avx2"), always_inline)) static inline void pool_row_avx2_k(
    const bool is_max, const geom *g, const float *x, int64_t n, int64_t ih0, int64_t i0,
    int64_t i1, float *o) {
  const int64_t c = g->c, w = g->w, rs = w * c, kw = g->kw, sw = g->sw, pl = g->pl, ow_n = g->ow;
  const int64_t full = c / 8 * 8, rows = i1 > i0 ? i1 - i0 : 0;
  const __m256i m = _mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                     _mm256_set1_epi32((int)(c - full)));
  const int64_t row0 = ((n * g->h + ih0) * w) * c; /* offset of (ih0, 0) */
  for (int64_t ow = 0; ow < ow_n; ow++, o += c) {
    int64_t iw0 = ow * sw - pl, j0 = iw0 < 0 ? -iw0 : 0;
    int64_t j1 = w - iw0 < kw ? w - iw0 : kw, cols = j1 > j0 ? j1 - j0 : 0;
    int64_t cnt = rows * cols;
    /* The window's first valid cell (only valid cells are read). */
    const float *xb = x + (row0 + i0 * rs + (iw0 + j0) * c);
    const __m256 div = _mm256_set1_ps((float)cnt);
    int64_t ch = 0;
    for (; ch < full; ch += 8) {
      __m256 acc = is_max ? _mm256_set1_ps(-INFINITY) : _mm256_setzero_ps();
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
          __m256 v = _mm256_loadu_ps(xb + i * rs + j * c + ch);
          acc = is_max ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
        }
      if (!is_max && cnt) acc = _mm256_div_ps(acc, div);
      _mm256_storeu_ps(o + ch, acc);
    }
    if (ch < c) {
      __m256 acc = is_max ? _mm256_set1_ps(-INFINITY) : _mm256_setzero_ps();
      for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
          __m256 v = _mm256_maskload_ps(xb + i * rs + j * c + ch, m);
          acc = is_max ? _mm256_max_ps(v, acc) : _mm256_add_ps(acc, v);
        }
      if (!is_max && cnt) acc = _mm256_div_ps(acc, div);
      _mm256_maskstore_ps(o + ch, m, acc);
    }
  }
}

__attribute__((target("avx2"))) static void pool_row_avx2(bool is_max, const geom *g,
                                                          const float *x, int64_t n, int64_t ih0,
                                                          int64_t i0, int64_t i1, float *o) {
  if (is_max)
    pool_row_avx2_k(true, g, x, n, ih0, i0, i1, o);
  else
    pool_row_avx2_k(false, g, x, n, ih0, i0, i1, o);
}

static td_code pool(eng_kctx *c, bool is_max) {
  const eng_tensor *x = &c->in[0];
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (rc) return rc;
  int64_t k[4] = {1, 1, 1, 1};
  if (eng_attr_ints(c->node, "ksize", k, 4) != 4)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "ksize must have 4 elements");
  if (k[0] != 1 || k[3] != 1)
    return eng_kfail(c, TD_UNIMPLEMENTED, "pooling across the batch or depth dimension");
  geom g;
  if ((rc = get_geom(c, x, k[1], k[2], &g))) return rc;
  if ((rc = out_nhwc(c, &g, g.c, false))) return rc;
  bool avx2 = eng_isa_allows(ENG_ISA_AVX2);
  const float *xd = eng_tensor_data(x);
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t n = 0; n < g.n; n++)
    for (int64_t oh = 0; oh < g.oh; oh++) {
      int64_t ih0 = oh * g.sh - g.pt, i0 = ih0 < 0 ? -ih0 : 0;
      int64_t i1 = g.h - ih0 < g.kh ? g.h - ih0 : g.kh;
      if (avx2) {
        pool_row_avx2(is_max, &g, xd, n, ih0, i0, i1, y + (n * g.oh + oh) * g.ow * g.c);
        continue;
      }
      for (int64_t ow = 0; ow < g.ow; ow++) {
        float *restrict o = y + ((n * g.oh + oh) * g.ow + ow) * g.c;
        int64_t iw0 = ow * g.sw - g.pl, j0 = iw0 < 0 ? -iw0 : 0;
        int64_t j1 = g.w - iw0 < g.kw ? g.w - iw0 : g.kw;
        /* Valid window cells [i0, i1) x [j0, j1), in window order. */
        int64_t cnt = i1 > i0 && j1 > j0 ? (i1 - i0) * (j1 - j0) : 0;
        int64_t off = ((n * g.h + ih0) * g.w + iw0) * g.c;
        if (is_max)
          pool_max_pixel(xd, off, g.w * g.c, g.c, i0, i1, j0, j1, o);
        else
          pool_avg_pixel(xd, off, g.w * g.c, g.c, i0, i1, j0, j1, cnt, o);
      }
    }
  return TD_OK;
}

td_code eng_k_max_pool(eng_kctx *c) { return pool(c, true); }
td_code eng_k_avg_pool(eng_kctx *c) { return pool(c, false); }

/* --- FusedBatchNorm ------------------------------------------------------------ */

td_code eng_k_fused_batch_norm(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  td_code rc = TD_OK;
  for (int i = 0; i < 5 && !rc; i++) rc = eng_kwant(c, i, ENG_DT_FLOAT);
  if (rc) return rc;
  const char *fmt = eng_attr_str(c->node, "data_format", "NHWC");
  if (strcmp(fmt, "NHWC"))
    return eng_kfail(c, TD_UNIMPLEMENTED, "data_format %s is not supported (NHWC only)", fmt);
  if (x->shape.rank != 4)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be 4-dimensional, got rank %d",
                     x->shape.rank);
  int64_t ch = x->shape.dim[3], n = eng_tensor_numel(x), rows = ch ? n / ch : 0;
  bool training = eng_node_attr_bool(c->node, "is_training", true);
  for (int i = 1; i < 5; i++) {
    if (i >= 3 && training) break;
    if (c->in[i].shape.rank != 1 || c->in[i].shape.dim[0] != ch)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "input %d must be a vector of %lld channels", i,
                       (long long)ch);
  }
  float eps = eng_attr_float(c->node, "epsilon", 1e-4f);
  int64_t vs = ch;
  eng_shape vshape = eng_shape_make(1, &vs);
  for (int o = 0; o < c->n_out && !rc; o++) {
    eng_shape s = o == 0 ? x->shape : vshape;
    rc = eng_kout_raw(c, o, ENG_DT_FLOAT, &s);
  }
  if (rc) return rc;
  const float *xd = eng_tensor_data(x), *scale = eng_tensor_data(&c->in[1]),
              *offset = eng_tensor_data(&c->in[2]);
  float *mean = c->n_out > 1 ? eng_tensor_data(&c->out[1]) : NULL;
  float *var = c->n_out > 2 ? eng_tensor_data(&c->out[2]) : NULL;
  float *tmp = calloc((size_t)(2 * ch + 1), sizeof *tmp);
  if (!tmp) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  float *m = tmp, *v = tmp + ch;
  if (training) {
    /* Batch statistics, as TF does when is_training is true. */
    for (int64_t r = 0; r < rows; r++)
      for (int64_t k = 0; k < ch; k++) m[k] += xd[r * ch + k];
    for (int64_t k = 0; k < ch; k++) m[k] = rows ? m[k] / (float)rows : 0;
    for (int64_t r = 0; r < rows; r++)
      for (int64_t k = 0; k < ch; k++) {
        float d = xd[r * ch + k] - m[k];
        v[k] += d * d;
      }
    for (int64_t k = 0; k < ch; k++) v[k] = rows ? v[k] / (float)rows : 0;
  } else {
    memcpy(m, eng_tensor_data(&c->in[3]), sizeof *m * (size_t)ch);
    memcpy(v, eng_tensor_data(&c->in[4]), sizeof *v * (size_t)ch);
  }
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t k = 0; k < ch; k++) {
    float s = scale[k] / sqrtf(v[k] + eps);
    for (int64_t r = 0; r < rows; r++) y[r * ch + k] = (xd[r * ch + k] - m[k]) * s + offset[k];
  }
  if (mean) memcpy(mean, m, sizeof *m * (size_t)ch);
  if (var) memcpy(var, v, sizeof *v * (size_t)ch);
  for (int o = 3; o < c->n_out; o++) /* reserve spaces: the statistics again */
    memcpy(eng_tensor_data(&c->out[o]), o == 4 ? v : m, sizeof *m * (size_t)ch);
  free(tmp);
  return TD_OK;
}

/* --- Softmax / LogSoftmax -------------------------------------------------------- */

typedef struct softmax_args {
  const float *x;
  float *y;
  int64_t d;
  bool log;
} softmax_args;

/* Rows [r0, r1): each row is normalised on its own, so a split over rows
 * changes no bits. */
static void softmax_rows(void *arg, int64_t r0, int64_t r1) {
  const softmax_args *a = arg;
  eng_vmath_softmax(a->x + r0 * a->d, a->y + r0 * a->d, r1 - r0, a->d, a->log);
}

td_code eng_k_softmax(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (rc) return rc;
  if (x->shape.rank < 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "logits must have at least one dimension");
  bool logsm = !strcmp(c->node->op, "LogSoftmax");
  if ((rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &x->shape))) return rc;
  int64_t d = x->shape.dim[x->shape.rank - 1], n = eng_tensor_numel(x);
  if (!d) return TD_OK;
  const float *xd = eng_tensor_data(x);
  float *y = eng_tensor_data(&c->out[0]);
  softmax_args a = {xd, y, d, logsm};
  /* Ranges of at least 16 Ki elements: below that a helper's wake-up costs
   * about what it saves. */
  eng_pool_for(NULL, n / d, ((int64_t)1 << 14) / d + 1, 1, softmax_rows, &a);
  return TD_OK;
}
