/* Volumetric and transposed convolutions on float32, channels last:
 * Conv3D (NDHWC; NCDHW, like the 3-D pools, runs on a channels-last copy), Conv2DBackpropInput
 * (Keras Conv2DTranspose, NHWC), Conv3DBackpropInputV2 (Conv3DTranspose), MaxPool3D and AvgPool3D.
 *
 * Every op here is a window over up to three spatial dims; a 2-D op is
 * the 3-D one with a depth of 1, so there is one geometry (vol) and one
 * pair of lowerings:
 *  - forward (Conv3D): im2col over blocks of output cells, then one sgemm
 *    per block against the filter read as [taps * cin, cout];
 *  - transposed (the BackpropInput ops): one sgemm per block of dy cells
 *    against the filter transposed, [cout] -> [taps * cin] per cell, and a
 *    col2im that adds each tap's cin values to the input cell it came
 *    from. The geometry is the forward conv's from input_sizes, as
 *    TensorFlow derives it, and dy must have the shape that conv gives.
 * Pools walk their windows directly (no arithmetic to share); AvgPool3D
 * divides by the window cells inside the input, as TensorFlow does. */
#include <cblas.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_window.h"

#define COL_MAX_FLOATS ((int64_t)4 << 20)

typedef struct vol {
  int64_t n, c;                    /* batch, channels of the input */
  int64_t in[3], k[3], s[3], d[3]; /* per spatial dim: input, window, stride, dilation */
  int64_t out[3], before[3];
} vol;

/* [N, C, D, H, W] -> [N, D, H, W, C], in place. */
static void to_channels_last(int64_t *v) {
  int64_t ch = v[1];
  memmove(v + 1, v + 2, 3 * sizeof *v);
  v[4] = ch;
}

static bool channels_first(const eng_node *n) {
  return !strcmp(eng_attr_str(n, "data_format", "NDHWC"), "NCDHW");
}

/* Runs a channels-last kernel on an NCDHW node: input 0 moved to NDHWC,
 * output 0 moved back (the attributes are permuted by vol_geom). */
static td_code via_channels_last(eng_kctx *c, eng_kernel_fn fn) {
  const eng_tensor *x = &c->in[0];
  if (x->shape.rank != 5) return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be 5-dimensional");
  if (x->dtype != ENG_DT_FLOAT) return eng_kwant(c, 0, ENG_DT_FLOAT);
  const int64_t *d = x->shape.dim;
  int64_t nd[5] = {d[0], d[2], d[3], d[4], d[1]}, xst[5], dst[5];
  eng_shape xs = eng_shape_make(5, nd);
  eng_contig_strides(&x->shape, xst);
  int64_t sst[5] = {xst[0], xst[2], xst[3], xst[4], xst[1]};
  eng_tensor in[3] = {{0}}, out[1] = {{0}};
  td_code rc = eng_tensor_alloc_raw(&in[0], ENG_DT_FLOAT, &xs, c->err);
  if (rc) return rc;
  eng_contig_strides(&xs, dst);
  eng_copy_nd(5, nd, sizeof(float), eng_tensor_data(x), sst, eng_tensor_data(&in[0]), dst);
  for (int i = 1; i < c->n_in && i < 3; i++) in[i] = eng_tensor_share(&c->in[i]);
  eng_kctx sub = *c;
  sub.in = in;
  sub.out = out;
  sub.n_out = 1;
  sub.epi = NULL;
  rc = fn(&sub);
  if (!rc) {
    const int64_t *o = out[0].shape.dim; /* [N, D, H, W, C] */
    int64_t od[5] = {o[0], o[4], o[1], o[2], o[3]}, ost[5], yst[5];
    eng_shape ys = eng_shape_make(5, od);
    rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &ys);
    if (!rc) {
      eng_contig_strides(&out[0].shape, ost);
      int64_t from[5] = {ost[0], ost[4], ost[1], ost[2], ost[3]};
      eng_contig_strides(&ys, yst);
      eng_copy_nd(5, od, sizeof(float), eng_tensor_data(&out[0]), from, eng_tensor_data(&c->out[0]),
                  yst);
    }
  }
  for (int i = 0; i < 3; i++) eng_tensor_release(&in[i]);
  eng_tensor_release(&out[0]);
  return rc;
}

/* Reads the window of a rank-(nsp + 2) channels-last op over input dims
 * idim (batch, spatial..., channels) with window k (nsp values): strides,
 * dilations, padding, and for pools ksize (k NULL). Fills g. */
static td_code vol_geom(eng_kctx *c, int nsp, const int64_t *idim, const int64_t *k, vol *g) {
  int r = nsp + 2;
  const char *fmt = eng_attr_str(c->node, "data_format", nsp == 3 ? "NDHWC" : "NHWC");
  bool first = nsp == 3 && !strcmp(fmt, "NCDHW");
  if (strcmp(fmt, nsp == 3 ? "NDHWC" : "NHWC") && !first)
    return eng_kfail(c, TD_UNIMPLEMENTED, "data_format %s is not supported", fmt);
  int64_t st[5] = {1, 1, 1, 1, 1}, dl[5] = {1, 1, 1, 1, 1}, ks[5] = {1, 1, 1, 1, 1};
  int nst = eng_attr_ints(c->node, "strides", st, 5);
  int ndl = eng_attr_ints(c->node, "dilations", dl, 5);
  if (nst != r || (ndl && ndl != r))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "strides and dilations must have %d elements", r);
  if (!k && eng_attr_ints(c->node, "ksize", ks, 5) != r)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "ksize must have %d elements", r);
  if (first) { /* NCDHW attributes, read in the NDHWC order of the tensors */
    to_channels_last(st);
    to_channels_last(dl);
    to_channels_last(ks);
  }
  if (!k) {
    if (ks[0] != 1 || ks[r - 1] != 1)
      return eng_kfail(c, TD_UNIMPLEMENTED, "pooling across the batch or depth dimension");
  }
  if (st[0] != 1 || st[r - 1] != 1 || dl[0] != 1 || dl[r - 1] != 1)
    return eng_kfail(c, TD_UNIMPLEMENTED, "strides or dilations in the batch or channel dimension");
  const char *pad = eng_attr_str(c->node, "padding", "VALID");
  if (strcmp(pad, "VALID") && strcmp(pad, "SAME"))
    return eng_kfail(c, TD_UNIMPLEMENTED, "padding '%s' is not supported", pad);
  *g = (vol){.n = idim[0], .c = idim[r - 1]};
  int off = 3 - nsp; /* a 2-D op: depth 1 */
  for (int i = 0; i < 3; i++) g->in[i] = g->k[i] = g->s[i] = g->d[i] = g->out[i] = 1;
  for (int i = 0; i < nsp; i++) {
    int j = off + i;
    g->in[j] = idim[1 + i];
    g->k[j] = k ? k[i] : ks[1 + i];
    g->s[j] = st[1 + i];
    g->d[j] = dl[1 + i];
    switch (
        eng_window_1d(pad, g->in[j], g->k[j], g->s[j], g->d[j], NULL, &g->out[j], &g->before[j])) {
      case ENG_WINDOW_OK:
        break;
      case ENG_WINDOW_NEGATIVE:
        return eng_kfail(c, TD_INVALID_ARGUMENT,
                         "Computed output size would be negative: %lld [input: %lld, window: "
                         "%lld, stride: %lld]",
                         (long long)g->out[j], (long long)g->in[j],
                         (long long)((g->k[j] - 1) * g->d[j] + 1), (long long)g->s[j]);
      default:
        return eng_kfail(c, TD_INVALID_ARGUMENT, "window, stride and dilation must be positive");
    }
  }
  return TD_OK;
}

static int64_t vol_cells(const vol *g) { return g->n * g->out[0] * g->out[1] * g->out[2]; }
static int64_t vol_taps(const vol *g) { return g->k[0] * g->k[1] * g->k[2]; }

/* Calls fn(arg, cell, tap, input offset in floats or -1 when padding) for
 * every tap of output cells [r0, r0 + nr). */
#define FOR_TAPS(g, r0, nr, BODY)                                                                \
  for (int64_t r_ = 0; r_ < (nr); r_++) {                                                        \
    int64_t cell_ = (r0) + r_, q_ = cell_;                                                       \
    int64_t ow_ = q_ % (g)->out[2];                                                              \
    q_ /= (g)->out[2];                                                                           \
    int64_t oh_ = q_ % (g)->out[1];                                                              \
    q_ /= (g)->out[1];                                                                           \
    int64_t od_ = q_ % (g)->out[0], n_ = q_ / (g)->out[0];                                       \
    int64_t tap_ = 0;                                                                            \
    for (int64_t a_ = 0; a_ < (g)->k[0]; a_++) {                                                 \
      int64_t id_ = od_ * (g)->s[0] - (g)->before[0] + a_ * (g)->d[0];                           \
      for (int64_t b_ = 0; b_ < (g)->k[1]; b_++) {                                               \
        int64_t ih_ = oh_ * (g)->s[1] - (g)->before[1] + b_ * (g)->d[1];                         \
        for (int64_t e_ = 0; e_ < (g)->k[2]; e_++, tap_++) {                                     \
          int64_t iw_ = ow_ * (g)->s[2] - (g)->before[2] + e_ * (g)->d[2];                       \
          bool in_ = id_ >= 0 && id_ < (g)->in[0] && ih_ >= 0 && ih_ < (g)->in[1] && iw_ >= 0 && \
                     iw_ < (g)->in[2];                                                           \
          int64_t src =                                                                          \
              in_ ? (((n_ * (g)->in[0] + id_) * (g)->in[1] + ih_) * (g)->in[2] + iw_) * (g)->c   \
                  : -1;                                                                          \
          int64_t row = r_, tap = tap_;                                                          \
          BODY                                                                                   \
        }                                                                                        \
      }                                                                                          \
    }                                                                                            \
  }

static int64_t block_rows(int64_t rows, int64_t width) {
  int64_t chunk = width ? COL_MAX_FLOATS / width : rows;
  if (chunk < 1) chunk = 1;
  return chunk > rows ? rows : chunk;
}

/* --- Conv3D ---------------------------------------------------------------- */

static td_code conv3d(eng_kctx *c) {
  const eng_tensor *x = &c->in[0], *f = &c->in[1];
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (!rc) rc = eng_kwant(c, 1, ENG_DT_FLOAT);
  if (rc) return rc;
  if (x->shape.rank != 5 || f->shape.rank != 5)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input and filter must be 5-dimensional");
  vol g;
  if ((rc = vol_geom(c, 3, x->shape.dim, f->shape.dim, &g))) return rc;
  int64_t cin = f->shape.dim[3], cout = f->shape.dim[4];
  if (cin != g.c)
    return eng_kfail(c, TD_UNIMPLEMENTED,
                     "input depth %lld and filter depth %lld differ (grouped Conv3D)",
                     (long long)g.c, (long long)cin);
  int64_t od[5] = {g.n, g.out[0], g.out[1], g.out[2], cout};
  eng_shape os = eng_shape_make(5, od);
  if ((rc = eng_kout(c, 0, ENG_DT_FLOAT, &os))) return rc;
  int64_t rows = vol_cells(&g), kdim = vol_taps(&g) * cin;
  if (!rows || !cout || !kdim) return TD_OK;
  if (rows > INT32_MAX || kdim > INT32_MAX || cout > INT32_MAX)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "convolution too large");
  const float *xd = eng_tensor_data(x), *fd = eng_tensor_data(f);
  float *y = eng_tensor_data(&c->out[0]);
  int64_t chunk = block_rows(rows, kdim);
  float *col = malloc(sizeof *col * (size_t)(chunk * kdim));
  if (!col) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for im2col");
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
    FOR_TAPS(&g, r0, nr, {
      float *dst = col + row * kdim + tap * cin;
      if (src < 0)
        memset(dst, 0, sizeof *dst * (size_t)cin);
      else
        memcpy(dst, xd + src, sizeof *dst * (size_t)cin);
    })
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, (int)cout, (int)kdim, 1.0f, col,
                (int)kdim, fd, (int)cout, 0.0f, y + r0 * cout, (int)cout);
  }
  free(col);
  return TD_OK;
}

/* --- Conv2DBackpropInput, Conv3DBackpropInputV2 ------------------------------ */

static td_code backprop_input(eng_kctx *c, int nsp) {
  int r = nsp + 2;
  const eng_tensor *f = &c->in[1], *dy = &c->in[2];
  td_code rc = eng_kwant(c, 1, ENG_DT_FLOAT);
  if (!rc) rc = eng_kwant(c, 2, ENG_DT_FLOAT);
  if (rc) return rc;
  int64_t isz[5];
  int n_isz;
  if ((rc = eng_karg_ints(c, 0, isz, 5, &n_isz))) return rc;
  if (n_isz != r)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input_sizes must have %d elements, got %d", r, n_isz);
  for (int i = 0; i < r; i++)
    if (isz[i] < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "input_sizes must be non-negative");
  if (f->shape.rank != r || dy->shape.rank != r)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "filter and out_backprop must be %d-dimensional", r);
  vol g;
  if ((rc = vol_geom(c, nsp, isz, f->shape.dim, &g))) return rc;
  int64_t cin = f->shape.dim[nsp], cout = f->shape.dim[nsp + 1];
  if (cin != g.c)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input depth %lld does not match filter depth %lld",
                     (long long)g.c, (long long)cin);
  bool match = dy->shape.dim[0] == g.n && dy->shape.dim[r - 1] == cout;
  for (int i = 0; i < nsp; i++) match = match && dy->shape.dim[1 + i] == g.out[3 - nsp + i];
  if (!match) {
    char sb[96];
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "out_backprop has shape %s, which the forward convolution of input_sizes "
                     "does not produce",
                     eng_shape_str(&dy->shape, sb, sizeof sb));
  }
  eng_shape os = eng_shape_make(r, isz);
  if ((rc = eng_kout(c, 0, ENG_DT_FLOAT, &os))) return rc;
  int64_t rows = vol_cells(&g), kdim = vol_taps(&g) * cin;
  if (!rows || !cout || !kdim) return TD_OK;
  if (rows > INT32_MAX || kdim > INT32_MAX || cout > INT32_MAX)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "convolution too large");
  const float *fd = eng_tensor_data(f), *dyd = eng_tensor_data(dy);
  float *dx = eng_tensor_data(&c->out[0]);
  int64_t chunk = block_rows(rows, kdim);
  float *col = malloc(sizeof *col * (size_t)(chunk * kdim));
  if (!col) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for col2im");
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    int64_t nr = rows - r0 < chunk ? rows - r0 : chunk;
    /* col[cell, tap * cin + i] = sum_o dy[cell, o] * f[tap, i, o] */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, (int)kdim, (int)cout, 1.0f,
                dyd + r0 * cout, (int)cout, fd, (int)cout, 0.0f, col, (int)kdim);
    FOR_TAPS(&g, r0, nr, {
      if (src >= 0) {
        const float *s = col + row * kdim + tap * cin;
        float *d = dx + src;
        for (int64_t i = 0; i < cin; i++) d[i] += s[i];
      }
    })
  }
  free(col);
  return TD_OK;
}

td_code eng_k_conv2d_backprop_input(eng_kctx *c) { return backprop_input(c, 2); }
td_code eng_k_conv3d_backprop_input(eng_kctx *c) { return backprop_input(c, 3); }

/* --- MaxPool3D, AvgPool3D ---------------------------------------------------- */

static td_code pool3d(eng_kctx *c, bool is_max) {
  const eng_tensor *x = &c->in[0];
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (rc) return rc;
  if (x->shape.rank != 5)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be 5-dimensional, got rank %d",
                     x->shape.rank);
  vol g;
  if ((rc = vol_geom(c, 3, x->shape.dim, NULL, &g))) return rc;
  int64_t od[5] = {g.n, g.out[0], g.out[1], g.out[2], g.c};
  eng_shape os = eng_shape_make(5, od);
  if ((rc = eng_kout(c, 0, ENG_DT_FLOAT, &os))) return rc;
  int64_t rows = vol_cells(&g), ch = g.c;
  if (!rows || !ch) return TD_OK;
  const float *xd = eng_tensor_data(x);
  float *y = eng_tensor_data(&c->out[0]);
  int64_t taps = vol_taps(&g), cnt = 0;
  FOR_TAPS(&g, 0, rows, {
    float *o = y + (r_ + 0) * ch;
    if (tap == 0) {
      cnt = 0;
      for (int64_t i = 0; i < ch; i++) o[i] = is_max ? -FLT_MAX : 0.0f;
    }
    if (src >= 0) {
      const float *s = xd + src;
      cnt++;
      if (is_max)
        for (int64_t i = 0; i < ch; i++) o[i] = s[i] > o[i] ? s[i] : o[i];
      else
        for (int64_t i = 0; i < ch; i++) o[i] += s[i];
    }
    if (tap == taps - 1 && !is_max && cnt)
      for (int64_t i = 0; i < ch; i++) o[i] /= (float)cnt;
    (void)row;
  })
  return TD_OK;
}

static td_code max_pool3d(eng_kctx *c) { return pool3d(c, true); }
static td_code avg_pool3d(eng_kctx *c) { return pool3d(c, false); }

td_code eng_k_conv3d(eng_kctx *c) {
  return channels_first(c->node) ? via_channels_last(c, conv3d) : conv3d(c);
}
td_code eng_k_max_pool3d(eng_kctx *c) {
  return channels_first(c->node) ? via_channels_last(c, max_pool3d) : max_pool3d(c);
}
td_code eng_k_avg_pool3d(eng_kctx *c) {
  return channels_first(c->node) ? via_channels_last(c, avg_pool3d) : avg_pool3d(c);
}

/* --- load-time checks ------------------------------------------------------- */

/* T float32, channels last (or NCDHW for 3-D ops), strides / dilations (and ksize for pools) of
 * rank nsp + 2 with 1 on batch and channels, VALID or SAME. */
static td_code check_window(const eng_node *n, int nsp, bool pool, td_err *err) {
  int r = nsp + 2;
  const eng_attr *t = eng_node_attr(n, "T");
  const char *why = NULL;
  char m[128];
  int64_t st[5] = {1, 1, 1, 1, 1}, dl[5] = {1, 1, 1, 1, 1}, ks[5] = {1, 1, 1, 1, 1};
  const char *fmt = eng_attr_str(n, "data_format", nsp == 3 ? "NDHWC" : "NHWC");
  const char *pad = eng_attr_str(n, "padding", "VALID");
  int nst = eng_attr_ints(n, "strides", st, 5), ndl = eng_attr_ints(n, "dilations", dl, 5);
  bool first = nsp == 3 && !strcmp(fmt, "NCDHW");
  int nks = pool ? eng_attr_ints(n, "ksize", ks, 5) : r;
  if (first && nst == r && (!ndl || ndl == r)) {
    to_channels_last(st);
    to_channels_last(dl);
    to_channels_last(ks);
  }
  td_code code = TD_UNIMPLEMENTED;
  if (t && t->kind == ENG_ATTR_TYPE && t->type != ENG_DT_FLOAT) {
    snprintf(m, sizeof m, "T %s is not supported by its kernel", eng_dtype_name(t->type));
    why = m;
  } else if (strcmp(fmt, nsp == 3 ? "NDHWC" : "NHWC") && !first) {
    snprintf(m, sizeof m, "data_format %s is not supported", fmt);
    why = m;
  } else if (nst != r || (ndl && ndl != r)) {
    why = "strides and dilations have the wrong number of elements";
    code = TD_INVALID_ARGUMENT;
  } else if (st[0] != 1 || st[r - 1] != 1 || dl[0] != 1 || dl[r - 1] != 1) {
    why = "strides or dilations in the batch or channel dimension";
  } else if (pool && (nks != r || ks[0] != 1 || ks[r - 1] != 1)) {
    why = "ksize must have 1 on the batch and channel dimensions";
  } else if (strcmp(pad, "VALID") && strcmp(pad, "SAME")) {
    snprintf(m, sizeof m, "padding '%s' is not supported", pad);
    why = m;
  }
  if (!why) return TD_OK;
  return td_err_set(err, code, "node '%s' (%s): %s", n->name, n->op, why);
}

td_code eng_c_conv3d(const eng_node *n, td_err *err) { return check_window(n, 3, false, err); }
td_code eng_c_pool3d(const eng_node *n, td_err *err) { return check_window(n, 3, true, err); }
td_code eng_c_conv2d_backprop(const eng_node *n, td_err *err) {
  return check_window(n, 2, false, err);
}
