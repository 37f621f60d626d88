/* Image ops over NHWC images, in float32 arithmetic as TensorFlow's CPU
 * kernels compute them:
 *  - ResizeBicubic: Keys' cubic convolution from a 1024-step table
 *    (a = -0.75, borders clamped; with half_pixel_centers a = -0.5 and
 *    taps outside the image dropped, the rest renormalised), rows first;
 *  - ResizeArea: each output cell averages the input area it covers, cells
 *    weighted by their overlap (coordinates scaled as ResizeBilinear's);
 *  - CropAndResize: boxes in normalised coordinates sampled bilinearly or
 *    at the nearest cell, extrapolation_value outside the image;
 *  - RGBToHSV / HSVToRGB, AdjustSaturation / AdjustHue (through HSV),
 *    AdjustContrastv2 ((x - mean) * factor + mean over each image's cells).
 * Resizes and crops read float32/64, int32/64 and uint8 images and return
 * float32; the colour ops take float32. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"

static bool px_ok(eng_dtype dt) {
  return dt == ENG_DT_FLOAT || dt == ENG_DT_DOUBLE || dt == ENG_DT_INT32 || dt == ENG_DT_INT64 ||
         dt == ENG_DT_UINT8;
}

static float px(const eng_tensor *x, int64_t i) {
  const void *d = eng_tensor_data(x);
  switch (x->dtype) {
    case ENG_DT_FLOAT:
      return ((const float *)d)[i];
    case ENG_DT_DOUBLE:
      return (float)((const double *)d)[i];
    case ENG_DT_INT32:
      return (float)((const int32_t *)d)[i];
    case ENG_DT_INT64:
      return (float)((const int64_t *)d)[i];
    default:
      return ((const uint8_t *)d)[i];
  }
}

/* Input 0 an image batch of a supported dtype, input 1 the output size. */
static td_code resize_args(eng_kctx *c, int64_t *oh, int64_t *ow) {
  const eng_tensor *x = &c->in[0];
  if (!px_ok(x->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s images are not supported", eng_dtype_name(x->dtype));
  td_code rc = eng_resize_size(c, oh, ow);
  if (rc) return rc;
  int64_t d[4] = {x->shape.dim[0], *oh, *ow, x->shape.dim[3]};
  eng_shape s = eng_shape_make(4, d);
  return eng_kout(c, 0, ENG_DT_FLOAT, &s);
}

static int64_t bound(int64_t v, int64_t limit) { return v < 0 ? 0 : v >= limit ? limit - 1 : v; }

/* --- ResizeBicubic ------------------------------------------------------------ */

#define CUBIC_STEPS 1024

typedef struct cubic {
  int64_t i[4];
  float w[4];
} cubic;

/* table[2k] = the weight of the near tap at distance k / STEPS, table[2k+1]
 * of the far one (distance 1 + k / STEPS). */
static void cubic_table(double a, float *t) {
  for (int i = 0; i <= CUBIC_STEPS; i++) {
    float x = (float)(i * 1.0 / CUBIC_STEPS);
    t[i * 2] = (float)(((a + 2) * x - (a + 3)) * x * x + 1);
    x += 1.0f;
    t[i * 2 + 1] = (float)(((a * x - 5 * a) * x + 8 * a) * x - 4 * a);
  }
}

static void cubic_weights(int64_t in, int64_t out, float scale, bool half, const float *t,
                          cubic *cw) {
  for (int64_t o = 0; o < out; o++) {
    float src = half ? ((float)o + 0.5f) * scale - 0.5f : (float)o * scale;
    int64_t loc = (int64_t)floorf(src);
    int64_t off = lrintf((src - (float)loc) * CUBIC_STEPS);
    float w[4] = {t[off * 2 + 1], t[off * 2], t[(CUBIC_STEPS - off) * 2],
                  t[(CUBIC_STEPS - off) * 2 + 1]};
    float sum = 0;
    for (int k = 0; k < 4; k++) {
      cw[o].i[k] = bound(loc - 1 + k, in);
      cw[o].w[k] = w[k];
      if (half && cw[o].i[k] != loc - 1 + k) cw[o].w[k] = 0;
      sum += cw[o].w[k];
    }
    if (half && fabsf(sum) >= 1000.0f * 1.17549435e-38f)
      for (int k = 0; k < 4; k++) cw[o].w[k] *= 1.0f / sum;
  }
}

td_code eng_k_resize_bicubic(eng_kctx *c) {
  int64_t oh, ow;
  td_code rc = resize_args(c, &oh, &ow);
  if (rc) return rc;
  const eng_tensor *x = &c->in[0];
  int64_t n = x->shape.dim[0], h = x->shape.dim[1], w = x->shape.dim[2], ch = x->shape.dim[3];
  bool align = eng_node_attr_bool(c->node, "align_corners", false);
  bool half = eng_node_attr_bool(c->node, "half_pixel_centers", false);
  float table[(CUBIC_STEPS + 1) * 2];
  cubic_table(half ? -0.5 : -0.75, table);
  cubic *cy = malloc(sizeof *cy * (size_t)(oh + ow));
  if (!cy) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for resize weights");
  cubic *cx = cy + oh;
  cubic_weights(h, oh, eng_resize_scale(h, oh, align), half, table, cy);
  cubic_weights(w, ow, eng_resize_scale(w, ow, align), half, table, cx);
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++)
        for (int64_t k = 0; k < ch; k++) {
          float row[4];
          for (int r = 0; r < 4; r++) {
            int64_t base = (b * h + cy[i].i[r]) * w;
            row[r] = 0;
            for (int q = 0; q < 4; q++) row[r] += px(x, (base + cx[j].i[q]) * ch + k) * cx[j].w[q];
          }
          float v = 0;
          for (int r = 0; r < 4; r++) v += row[r] * cy[i].w[r];
          *y++ = v;
        }
  free(cy);
  return TD_OK;
}

/* --- ResizeArea ----------------------------------------------------------------- */

/* The share of input cell v inside [lo, hi), clipped to one cell. */
static float area_share(int64_t v, float lo, float hi, float scale) {
  if ((float)v < lo) return (float)(v + 1) > hi ? scale : (float)(v + 1) - lo;
  return (float)(v + 1) > hi ? hi - (float)v : 1.0f;
}

td_code eng_k_resize_area(eng_kctx *c) {
  int64_t oh, ow;
  td_code rc = resize_args(c, &oh, &ow);
  if (rc) return rc;
  const eng_tensor *x = &c->in[0];
  int64_t n = x->shape.dim[0], h = x->shape.dim[1], w = x->shape.dim[2], ch = x->shape.dim[3];
  bool align = eng_node_attr_bool(c->node, "align_corners", false);
  float sh = eng_resize_scale(h, oh, align), sw = eng_resize_scale(w, ow, align);
  float norm = (float)(1.0 / ((double)sh * (double)sw));
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < oh; i++) {
      float y0 = (float)i * sh, y1 = (float)(i + 1) * sh;
      int64_t ys = (int64_t)floorf(y0), ye = (int64_t)ceilf(y1);
      for (int64_t j = 0; j < ow; j++) {
        float x0 = (float)j * sw, x1 = (float)(j + 1) * sw;
        int64_t xs = (int64_t)floorf(x0), xe = (int64_t)ceilf(x1);
        for (int64_t k = 0; k < ch; k++) {
          float sum_y = 0;
          for (int64_t u = ys; u < ye; u++) {
            int64_t base = (b * h + bound(u, h)) * w;
            float sum_x = 0;
            for (int64_t v = xs; v < xe; v++)
              sum_x += px(x, (base + bound(v, w)) * ch + k) * area_share(v, x0, x1, sw);
            sum_y += sum_x * area_share(u, y0, y1, sh);
          }
          *y++ = sum_y * norm;
        }
      }
    }
  return TD_OK;
}

/* --- CropAndResize ------------------------------------------------------------- */

td_code eng_k_crop_and_resize(eng_kctx *c) {
  const eng_tensor *img = &c->in[0], *boxes = &c->in[1], *ind = &c->in[2];
  if (!px_ok(img->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s images are not supported",
                     eng_dtype_name(img->dtype));
  td_code rc = eng_kwant(c, 1, ENG_DT_FLOAT);
  if (rc) return rc;
  if (img->shape.rank != 4)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input image must be 4-D, got rank %d",
                     img->shape.rank);
  if (boxes->shape.rank != 2 || boxes->shape.dim[1] != 4)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "boxes must be 2-D [num_boxes, 4]");
  int64_t nb = boxes->shape.dim[0];
  if (ind->shape.rank != 1 || ind->shape.dim[0] != nb)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "box_index has incompatible shape");
  if (ind->dtype != ENG_DT_INT32 && ind->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "box_index must be int32");
  int64_t sz[2];
  int ns;
  if ((rc = eng_karg_ints(c, 3, sz, 2, &ns))) return rc;
  if (ns != 2) return eng_kfail(c, TD_INVALID_ARGUMENT, "crop_size must have two elements");
  if (sz[0] <= 0 || sz[1] <= 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "crop dimensions must be positive");
  const char *method = eng_attr_str(c->node, "method", "bilinear");
  bool nearest = !strcmp(method, "nearest");
  if (!nearest && strcmp(method, "bilinear"))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "method must be 'bilinear' or 'nearest'");
  float extra = eng_attr_float(c->node, "extrapolation_value", 0.0f);
  int64_t batch = img->shape.dim[0], h = img->shape.dim[1], w = img->shape.dim[2];
  int64_t ch = img->shape.dim[3], ch_ = sz[0], cw = sz[1];
  int64_t od[4] = {nb, ch_, cw, ch};
  eng_shape os = eng_shape_make(4, od);
  if ((rc = eng_kout(c, 0, ENG_DT_FLOAT, &os))) return rc;
  const float *bx = eng_tensor_data(boxes);
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t b = 0; b < nb; b++) {
    int64_t bi = ind->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(ind))[b]
                                            : ((const int64_t *)eng_tensor_data(ind))[b];
    if (bi < 0 || bi >= batch)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "box_index has values outside [0, %lld)",
                       (long long)batch);
    float y1 = bx[b * 4], x1 = bx[b * 4 + 1], y2 = bx[b * 4 + 2], x2 = bx[b * 4 + 3];
    float hs = ch_ > 1 ? (y2 - y1) * (float)(h - 1) / (float)(ch_ - 1) : 0;
    float ws = cw > 1 ? (x2 - x1) * (float)(w - 1) / (float)(cw - 1) : 0;
    for (int64_t i = 0; i < ch_; i++) {
      float iy = ch_ > 1 ? y1 * (float)(h - 1) + (float)i * hs : 0.5f * (y1 + y2) * (float)(h - 1);
      float *row = y + ((b * ch_ + i) * cw) * ch;
      if (iy < 0 || iy > (float)(h - 1)) {
        for (int64_t k = 0; k < cw * ch; k++) row[k] = extra;
        continue;
      }
      int64_t top = (int64_t)floorf(iy), bot = (int64_t)ceilf(iy);
      float ly = iy - (float)top;
      for (int64_t j = 0; j < cw; j++) {
        float ix = cw > 1 ? x1 * (float)(w - 1) + (float)j * ws : 0.5f * (x1 + x2) * (float)(w - 1);
        float *o = row + j * ch;
        if (ix < 0 || ix > (float)(w - 1)) {
          for (int64_t k = 0; k < ch; k++) o[k] = extra;
          continue;
        }
        if (nearest) {
          int64_t src = ((bi * h + (int64_t)roundf(iy)) * w + (int64_t)roundf(ix)) * ch;
          for (int64_t k = 0; k < ch; k++) o[k] = px(img, src + k);
          continue;
        }
        int64_t left = (int64_t)floorf(ix), right = (int64_t)ceilf(ix);
        float lx = ix - (float)left;
        int64_t t0 = (bi * h + top) * w, b0 = (bi * h + bot) * w;
        for (int64_t k = 0; k < ch; k++) {
          float tl = px(img, (t0 + left) * ch + k), tr = px(img, (t0 + right) * ch + k);
          float bl = px(img, (b0 + left) * ch + k), br = px(img, (b0 + right) * ch + k);
          float t = tl + (tr - tl) * lx, u = bl + (br - bl) * lx;
          o[k] = t + (u - t) * ly;
        }
      }
    }
  }
  return TD_OK;
}

/* --- colour -------------------------------------------------------------------- */

static td_code rgb_args(eng_kctx *c, int n_scalar_in) {
  const eng_tensor *x = &c->in[0];
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (rc) return rc;
  if (x->shape.rank < 1 || x->shape.dim[x->shape.rank - 1] != 3)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must have 3 channels in its last dimension");
  for (int i = 1; i <= n_scalar_in; i++) {
    if ((rc = eng_kwant(c, i, ENG_DT_FLOAT))) return rc;
    if (eng_tensor_numel(&c->in[i]) != 1)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "input %d must be a scalar", i);
  }
  return eng_kout_raw(c, 0, ENG_DT_FLOAT, &x->shape);
}

static void to_hsv(const float *p, float *h, float *s, float *v) {
  float r = p[0], g = p[1], b = p[2];
  float vv = fmaxf(r, fmaxf(g, b)), range = vv - fminf(r, fminf(g, b));
  *s = vv > 0 ? range / vv : 0;
  float norm = 1.0f / (6.0f * range), hh;
  if (r == vv)
    hh = norm * (g - b);
  else if (g == vv)
    hh = norm * (b - r) + 2.0f / 6.0f;
  else
    hh = norm * (r - g) + 4.0f / 6.0f;
  if (!(range > 0)) hh = 0;
  if (hh < 0) hh += 1;
  *h = hh;
  *v = vv;
}

static float clamp01(float v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

/* HSVToRGB's formula: each channel a clamped tent over 6 * h. */
static void from_hsv(float h, float s, float v, float *p) {
  float dh = h * 6.0f;
  float dr = clamp01(fabsf(dh - 3.0f) - 1.0f), dg = clamp01(2.0f - fabsf(dh - 2.0f));
  float db = clamp01(2.0f - fabsf(dh - 4.0f)), ms = 1.0f - s;
  p[0] = (ms + s * dr) * v;
  p[1] = (ms + s * dg) * v;
  p[2] = (ms + s * db) * v;
}

/* AdjustSaturation's / AdjustHue's way back: by hue sector. */
static void from_hsv_sector(float h, float s, float v, float *p) {
  float cc = s * v, m = v - cc, dh = h * 6.0f, f = dh;
  int sector = (int)dh;
  while (f <= 0) f += 2.0f;
  while (f >= 2.0f) f -= 2.0f;
  float xx = cc * (1 - fabsf(f - 1)), r = 0, g = 0, b = 0;
  switch (sector) {
    case 0:
      r = cc, g = xx;
      break;
    case 1:
      r = xx, g = cc;
      break;
    case 2:
      g = cc, b = xx;
      break;
    case 3:
      g = xx, b = cc;
      break;
    case 4:
      r = xx, b = cc;
      break;
    case 5:
      r = cc, b = xx;
      break;
    default:
      break;
  }
  p[0] = r + m;
  p[1] = g + m;
  p[2] = b + m;
}

td_code eng_k_rgb_to_hsv(eng_kctx *c) {
  td_code rc = rgb_args(c, 0);
  if (rc) return rc;
  const float *x = eng_tensor_data(&c->in[0]);
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0, n = eng_tensor_numel(&c->in[0]) / 3; i < n; i++)
    to_hsv(x + 3 * i, y + 3 * i, y + 3 * i + 1, y + 3 * i + 2);
  return TD_OK;
}

td_code eng_k_hsv_to_rgb(eng_kctx *c) {
  td_code rc = rgb_args(c, 0);
  if (rc) return rc;
  const float *x = eng_tensor_data(&c->in[0]);
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0, n = eng_tensor_numel(&c->in[0]) / 3; i < n; i++)
    from_hsv(x[3 * i], x[3 * i + 1], x[3 * i + 2], y + 3 * i);
  return TD_OK;
}

static td_code adjust_hsv(eng_kctx *c, bool hue) {
  td_code rc = rgb_args(c, 1);
  if (rc) return rc;
  float k = *(const float *)eng_tensor_data(&c->in[1]);
  const float *x = eng_tensor_data(&c->in[0]);
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0, n = eng_tensor_numel(&c->in[0]) / 3; i < n; i++) {
    float h, s, v;
    to_hsv(x + 3 * i, &h, &s, &v);
    if (hue) {
      h = fmodf(h + k, 1.0f);
      if (h < 0) h += 1.0f;
    } else {
      s = fminf(1.0f, fmaxf(0.0f, s * k));
    }
    from_hsv_sector(h, s, v, y + 3 * i);
  }
  return TD_OK;
}

td_code eng_k_adjust_saturation(eng_kctx *c) { return adjust_hsv(c, false); }
td_code eng_k_adjust_hue(eng_kctx *c) { return adjust_hsv(c, true); }

td_code eng_k_adjust_contrast_v2(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (!rc) rc = eng_kwant(c, 1, ENG_DT_FLOAT);
  if (rc) return rc;
  if (x->shape.rank < 3)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be at least 3-D, got rank %d",
                     x->shape.rank);
  if (eng_tensor_numel(&c->in[1]) != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "contrast_factor must be scalar");
  if ((rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &x->shape))) return rc;
  int r = x->shape.rank;
  int64_t ch = x->shape.dim[r - 1], cells = x->shape.dim[r - 2] * x->shape.dim[r - 3];
  int64_t imgs = cells > 0 && ch > 0 ? eng_tensor_numel(x) / (cells * ch) : 0;
  float f = *(const float *)eng_tensor_data(&c->in[1]);
  const float *xd = eng_tensor_data(x);
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t b = 0; b < imgs; b++) {
    const float *xi = xd + b * cells * ch;
    float *yi = y + b * cells * ch;
    for (int64_t k = 0; k < ch; k++) {
      double sum = 0;
      for (int64_t p = 0; p < cells; p++) sum += xi[p * ch + k];
      float mean = (float)(sum / (double)cells);
      for (int64_t p = 0; p < cells; p++) yi[p * ch + k] = (xi[p * ch + k] - mean) * f + mean;
    }
  }
  return TD_OK;
}

/* T (the image dtype of the resizes and CropAndResize) one px() reads. */
td_code eng_c_pixels(const eng_node *n, td_err *err) {
  const eng_attr *a = eng_node_attr(n, "T");
  if (!a || a->kind != ENG_ATTR_TYPE || px_ok(a->type)) return TD_OK;
  return td_err_set(err, TD_UNIMPLEMENTED, "node '%s' (%s): T %s is not supported by its kernel",
                    n->name, n->op, eng_dtype_name(a->type));
}
