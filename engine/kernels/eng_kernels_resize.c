/* ResizeBilinear and ResizeNearestNeighbor over NHWC images, with
 * TensorFlow's coordinate rules in float32 arithmetic, as its CPU kernels
 * compute them:
 *   scale = align_corners && out > 1 ? (in - 1) / (out - 1) : in / out
 *   bilinear source  = half_pixel_centers ? (x + 0.5) * scale - 0.5 : x * scale,
 *     between floor (clamped at 0) and ceil (clamped at in - 1), weight
 *     source - floor; rows lerped first along x, then along y;
 *   nearest source   = half_pixel_centers ? (x + 0.5) * scale : x * scale,
 *     rounded when align_corners, else floored, clamped to [0, in - 1].
 * Bilinear reads float32, int32 and uint8 images and returns float32;
 * nearest keeps the dtype (any fixed-size one). */
#include <math.h>
#include <string.h>

#include "eng_kernels.h"

td_code eng_resize_size(eng_kctx *c, int64_t *oh, int64_t *ow) {
  const eng_tensor *x = &c->in[0];
  if (x->shape.rank != 4)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be 4-dimensional, got rank %d",
                     x->shape.rank);
  int64_t sz[2];
  int n;
  td_code rc = eng_karg_ints(c, 1, sz, 2, &n);
  if (rc) return rc;
  if (n != 2) return eng_kfail(c, TD_INVALID_ARGUMENT, "shape_t must have two elements");
  if (sz[0] <= 0 || sz[1] <= 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "output dimensions must be positive");
  if (x->shape.dim[1] <= 0 || x->shape.dim[2] <= 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input image must be of non-zero size");
  if (eng_node_attr_bool(c->node, "align_corners", false) &&
      eng_node_attr_bool(c->node, "half_pixel_centers", false))
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "If half_pixel_centers is True, align_corners must be False.");
  *oh = sz[0];
  *ow = sz[1];
  return TD_OK;
}

float eng_resize_scale(int64_t in, int64_t out, bool align) {
  return align && out > 1 ? (float)(in - 1) / (float)(out - 1) : (float)in / (float)out;
}

typedef struct lerp {
  int64_t lo, hi;
  float w;
} lerp;

static void bilinear_weights(int64_t in, int64_t out, float scale, bool half, lerp *l) {
  for (int64_t i = 0; i < out; i++) {
    float src = half ? ((float)i + 0.5f) * scale - 0.5f : (float)i * scale;
    float f = floorf(src);
    l[i].lo = (int64_t)f > 0 ? (int64_t)f : 0;
    int64_t up = (int64_t)ceilf(src);
    l[i].hi = up < in - 1 ? up : in - 1;
    l[i].w = src - f;
  }
}

static float pixel(const eng_tensor *x, int64_t i) {
  const void *d = eng_tensor_data(x);
  switch (x->dtype) {
    case ENG_DT_FLOAT:
      return ((const float *)d)[i];
    case ENG_DT_INT32:
      return (float)((const int32_t *)d)[i];
    default:
      return ((const uint8_t *)d)[i];
  }
}

td_code eng_k_resize_bilinear(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  if (x->dtype != ENG_DT_FLOAT && x->dtype != ENG_DT_INT32 && x->dtype != ENG_DT_UINT8)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s images are not supported", eng_dtype_name(x->dtype));
  int64_t oh, ow;
  td_code rc = eng_resize_size(c, &oh, &ow);
  if (rc) return rc;
  int64_t n = x->shape.dim[0], h = x->shape.dim[1], w = x->shape.dim[2], ch = x->shape.dim[3];
  eng_shape s = eng_shape_make(4, (int64_t[]){n, oh, ow, ch});
  if ((rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &s))) return rc;
  bool align = eng_node_attr_bool(c->node, "align_corners", false);
  bool half = eng_node_attr_bool(c->node, "half_pixel_centers", false);
  eng_tensor wt = {0};
  eng_shape ws = eng_shape_make(1, (int64_t[]){(oh + ow) * (int64_t)sizeof(lerp)});
  if ((rc = eng_tensor_alloc_raw(&wt, ENG_DT_UINT8, &ws, c->err))) return rc;
  lerp *ly = eng_tensor_data(&wt), *lx = ly + oh;
  bilinear_weights(h, oh, eng_resize_scale(h, oh, align), half, ly);
  bilinear_weights(w, ow, eng_resize_scale(w, ow, align), half, lx);
  float *y = eng_tensor_data(&c->out[0]);
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < oh; i++) {
      int64_t top = (b * h + ly[i].lo) * w, bot = (b * h + ly[i].hi) * w;
      for (int64_t j = 0; j < ow; j++)
        for (int64_t k = 0; k < ch; k++) {
          float tl = pixel(x, (top + lx[j].lo) * ch + k), tr = pixel(x, (top + lx[j].hi) * ch + k);
          float bl = pixel(x, (bot + lx[j].lo) * ch + k), br = pixel(x, (bot + lx[j].hi) * ch + k);
          float t = tl + (tr - tl) * lx[j].w, u = bl + (br - bl) * lx[j].w;
          *y++ = t + (u - t) * ly[i].w;
        }
    }
  eng_tensor_release(&wt);
  return TD_OK;
}

static int64_t nearest(int64_t i, int64_t in, float scale, bool align, bool half) {
  float src = half ? ((float)i + 0.5f) * scale : (float)i * scale;
  int64_t v = align ? (int64_t)roundf(src) : (int64_t)floorf(src);
  if (v > in - 1) v = in - 1;
  return v < 0 ? 0 : v;
}

td_code eng_k_resize_nearest(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  size_t es = eng_dtype_size(x->dtype);
  if (!es)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s images are not supported", eng_dtype_name(x->dtype));
  int64_t oh, ow;
  td_code rc = eng_resize_size(c, &oh, &ow);
  if (rc) return rc;
  int64_t n = x->shape.dim[0], h = x->shape.dim[1], w = x->shape.dim[2], ch = x->shape.dim[3];
  eng_shape s = eng_shape_make(4, (int64_t[]){n, oh, ow, ch});
  if ((rc = eng_kout_raw(c, 0, x->dtype, &s))) return rc;
  bool align = eng_node_attr_bool(c->node, "align_corners", false);
  bool half = eng_node_attr_bool(c->node, "half_pixel_centers", false);
  float sh = eng_resize_scale(h, oh, align), sw = eng_resize_scale(w, ow, align);
  const char *src = eng_tensor_data(x);
  char *dst = eng_tensor_data(&c->out[0]);
  size_t px = (size_t)ch * es;
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < oh; i++) {
      int64_t yi = nearest(i, h, sh, align, half);
      for (int64_t j = 0; j < ow; j++, dst += px) {
        int64_t xj = nearest(j, w, sw, align, half);
        memcpy(dst, src + (size_t)((b * h + yi) * w + xj) * px, px);
      }
    }
  return TD_OK;
}
