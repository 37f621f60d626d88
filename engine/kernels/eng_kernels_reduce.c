/* Reductions: Sum, Mean, Prod, Max, Min (float, double, int32, int64) and
 * All, Any (bool), over the axes in input 1 (scalar or vector, negative
 * allowed, repeats ignored), with keep_dims.
 *
 * Adjacent dims that are both reduced or both kept are merged first, so the
 * common cases (LayerNorm's last axis, global pooling's middle axes) become a
 * [outer, reduce, inner] walk. The walk visits the input once in order and
 * accumulates into the output through per-dim output strides (0 on reduced
 * dims). Float sums accumulate in the output's own type, as TF's CPU kernels
 * do. A sum over a contiguous run (LayerNorm's last axis) adds the run in
 * SUM_LANES interleaved partial sums, then the partials pairwise: one chain
 * of dependent adds would wait on the adder's latency at every element.
 * The order depends on the run's length alone (not the ISA or the thread
 * count), and TensorFlow's own sums are not serial either. When the
 * outermost merged dim is kept (LayerNorm's rows, pooling's batch), its
 * items split over the engine's pool: every output is summed by one
 * thread, in the same order as on one, so no bits change. A float sum
 * whose reduced rows lie one after the other over a kept contiguous run
 * (global pooling's [pixels, channels]) adds blocks of rows into a block
 * of outputs held in registers (sum_rows), each output still adding its
 * rows in order. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "eng_epilogue.h"
#include "eng_kernels.h"
#include "eng_pool.h"

typedef enum { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_ALL, R_ANY } redop;

/* Partial sums of a contiguous run: lane j takes elements j, j + SUM_LANES,
 * ... (a whole number of vectors at every ISA). */
#define SUM_LANES 16

#define SUM_RUN(T, NAME)                                                  \
  static T NAME(const T *x, int64_t n) {                                  \
    T p[SUM_LANES] = {0};                                                 \
    int64_t k = 0;                                                        \
    for (; k + SUM_LANES <= n; k += SUM_LANES)                            \
      for (int j = 0; j < SUM_LANES; j++) p[j] += x[k + j];               \
    for (int j = 0; k < n; k++, j++) p[j] += x[k];                        \
    for (int w = SUM_LANES / 2; w >= 1; w /= 2)                           \
      for (int j = 0; j < w; j++) p[j] += p[j + w];                       \
    return p[0];                                                          \
  }
SUM_RUN(float, sum_run_f32)
SUM_RUN(double, sum_run_f64)

/* y[k] += x[r * inner + k] for r in [0, rows), k in [0, inner), each y[k]
 * adding its rows in order as the row-by-row walk would: up to
 * ROWS_COLS outputs stay in registers while ROWS_BYTES of rows pass. */
#define ROWS_COLS 32
#define ROWS_BYTES (32 << 10)

#define SUM_ROWS(T, NAME)                                                      \
  static void NAME(const T *x, int64_t rows, int64_t inner, T *y) {            \
    int64_t per = ROWS_BYTES / (inner * (int64_t)sizeof(T));                   \
    if (per < 1) per = 1;                                                      \
    for (int64_t r0 = 0; r0 < rows; r0 += per) {                               \
      int64_t r1 = r0 + per < rows ? r0 + per : rows, k0 = 0;                  \
      for (; k0 + ROWS_COLS <= inner; k0 += ROWS_COLS) {                       \
        T acc[ROWS_COLS];                                                      \
        for (int j = 0; j < ROWS_COLS; j++) acc[j] = y[k0 + j];                \
        for (int64_t r = r0; r < r1; r++)                                      \
          for (int j = 0; j < ROWS_COLS; j++) acc[j] += x[r * inner + k0 + j]; \
        for (int j = 0; j < ROWS_COLS; j++) y[k0 + j] = acc[j];                \
      }                                                                        \
      for (int64_t r = r0; r < r1; r++)                                        \
        for (int64_t k = k0; k < inner; k++) y[k] += x[r * inner + k];         \
    }                                                                          \
  }
SUM_ROWS(float, sum_rows_f32)
SUM_ROWS(double, sum_rows_f64)

/* Integer sums are exact in any order: the plain loop. */
#define SUM_SERIAL(T, NAME)                                   \
  static T NAME(const T *x, int64_t n) {                      \
    T acc = 0;                                                \
    for (int64_t k = 0; k < n; k++) acc += x[k];              \
    return acc;                                               \
  }
SUM_SERIAL(int32_t, sum_run_i32)
SUM_SERIAL(int64_t, sum_run_i64)

/* Integer types keep the row-by-row walk (ROWS NULL). */
#define sum_rows_i32 NULL
#define sum_rows_i64 NULL

#define RED_LOOP(T, NAME, LOWEST, HIGHEST, SUM, ROWS)                                        \
  static void NAME(redop op, const T *x, T *y, int g, const int64_t *dims,               \
                   const int64_t *ost, int64_t nout, int64_t count) {                    \
    T init = op == R_PROD ? (T)1 : op == R_MAX ? (LOWEST) : op == R_MIN ? (HIGHEST) : (T)0; \
    for (int64_t i = 0; i < nout; i++) y[i] = init;                                      \
    int64_t total = 1;                                                                   \
    for (int d = 0; d < g; d++) total *= dims[d];                                        \
    if (!total) goto finish;                                                             \
    int64_t idx[ENG_MAX_RANK] = {0}, oo = 0, inner = dims[g - 1], is = ost[g - 1];       \
    /* Reduced rows over a kept run: a whole block of them per step. */                  \
    void (*rows_fn)(const T *, int64_t, int64_t, T *) = ROWS;                            \
    int64_t rows = rows_fn && (op == R_SUM || op == R_MEAN) && is && g >= 2 && !ost[g - 2] \
                       ? dims[g - 2]                                                     \
                       : 1;                                                              \
    int top = rows > 1 ? g - 3 : g - 2;                                                  \
    for (int64_t done = 0; done < total; done += inner * rows) {                         \
      const T *xs = x + done;                                                            \
      if (rows > 1) {                                                                    \
        rows_fn(xs, rows, inner, y + oo);                                                \
      } else if (is == 0) {                                                              \
        T acc = y[oo];                                                                   \
        switch (op) {                                                                    \
          case R_SUM: case R_MEAN: acc += SUM(xs, inner); break;                        \
          case R_PROD: for (int64_t k = 0; k < inner; k++) acc *= xs[k]; break;          \
          case R_MAX: for (int64_t k = 0; k < inner; k++) acc = xs[k] > acc ? xs[k] : acc; break; \
          default: for (int64_t k = 0; k < inner; k++) acc = xs[k] < acc ? xs[k] : acc; break; \
        }                                                                                \
        y[oo] = acc;                                                                     \
      } else {                                                                           \
        T *ys = y + oo;                                                                  \
        switch (op) {                                                                    \
          case R_SUM: case R_MEAN: for (int64_t k = 0; k < inner; k++) ys[k] += xs[k]; break; \
          case R_PROD: for (int64_t k = 0; k < inner; k++) ys[k] *= xs[k]; break;        \
          case R_MAX: for (int64_t k = 0; k < inner; k++) ys[k] = xs[k] > ys[k] ? xs[k] : ys[k]; break; \
          default: for (int64_t k = 0; k < inner; k++) ys[k] = xs[k] < ys[k] ? xs[k] : ys[k]; break; \
        }                                                                                \
      }                                                                                  \
      for (int d = top; d >= 0; d--) {                                                   \
        if (++idx[d] < dims[d]) {                                                        \
          oo += ost[d];                                                                  \
          break;                                                                         \
        }                                                                                \
        oo -= ost[d] * (idx[d] - 1);                                                     \
        idx[d] = 0;                                                                      \
      }                                                                                  \
    }                                                                                    \
  finish:                                                                                \
    if (op == R_MEAN)                                                                    \
      for (int64_t i = 0; i < nout; i++) y[i] = (T)(y[i] / (T)count);                     \
  }

RED_LOOP(float, red_f32, -INFINITY, INFINITY, sum_run_f32, sum_rows_f32)
RED_LOOP(double, red_f64, -INFINITY, INFINITY, sum_run_f64, sum_rows_f64)
RED_LOOP(int32_t, red_i32, INT32_MIN, INT32_MAX, sum_run_i32, sum_rows_i32)
RED_LOOP(int64_t, red_i64, INT64_MIN, INT64_MAX, sum_run_i64, sum_rows_i64)

/* Below this many input elements a reduction runs on one thread. */
#define PAR_MIN_ELEMS ((int64_t)1 << 14)

/* A reduction as the pool's ranges see it: outer items [o0, o1) of the
 * merged walk, xper input and yper output elements each, when dims[0] is
 * kept; yper 0 when it is reduced, and the one range is the whole walk
 * into all nout outputs. */
typedef struct red_args {
  redop op;
  eng_dtype dt;
  const char *x;
  char *y;
  size_t es;
  int g;
  int64_t dims[ENG_MAX_RANK + 1], ost[ENG_MAX_RANK + 1];
  int64_t count, nout, xper, yper;
} red_args;

static void red_range(void *arg, int64_t o0, int64_t o1) {
  const red_args *a = arg;
  int64_t dims[ENG_MAX_RANK + 1];
  memcpy(dims, a->dims, sizeof dims);
  dims[0] = o1 - o0;
  const void *x = a->x + (size_t)(o0 * a->xper) * a->es;
  void *y = a->y + (size_t)(o0 * a->yper) * a->es;
  int64_t nout = a->yper ? (o1 - o0) * a->yper : a->nout;
  switch (a->dt) {
    case ENG_DT_FLOAT:
      red_f32(a->op, x, y, a->g, dims, a->ost, nout, a->count);
      break;
    case ENG_DT_DOUBLE:
      red_f64(a->op, x, y, a->g, dims, a->ost, nout, a->count);
      break;
    case ENG_DT_INT32:
      red_i32(a->op, x, y, a->g, dims, a->ost, nout, a->count);
      break;
    default:
      red_i64(a->op, x, y, a->g, dims, a->ost, nout, a->count);
      break;
  }
}

td_code eng_k_reduce(eng_kctx *c) {
  const char *name = c->node->op;
  redop op = !strcmp(name, "Sum")    ? R_SUM
             : !strcmp(name, "Mean") ? R_MEAN
             : !strcmp(name, "Prod") ? R_PROD
             : !strcmp(name, "Max")  ? R_MAX
             : !strcmp(name, "Min")  ? R_MIN
             : !strcmp(name, "All")  ? R_ALL
                                     : R_ANY;
  const eng_tensor *x = &c->in[0];
  bool logical = op == R_ALL || op == R_ANY;
  if (logical ? x->dtype != ENG_DT_BOOL
              : (x->dtype != ENG_DT_FLOAT && x->dtype != ENG_DT_DOUBLE &&
                 x->dtype != ENG_DT_INT32 && x->dtype != ENG_DT_INT64))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  int64_t axes[64];
  int na;
  td_code rc = eng_karg_ints(c, 1, axes, 64, &na);
  if (rc) return rc;
  int r = x->shape.rank;
  bool red[ENG_MAX_RANK] = {0};
  for (int k = 0; k < na; k++) {
    if (axes[k] < -r || axes[k] >= r)
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "Invalid reduction dimension (%lld for input with %d dimension(s))",
                       (long long)axes[k], r);
    red[axes[k] < 0 ? axes[k] + r : axes[k]] = true;
  }
  bool keep = eng_node_attr_bool(c->node, "keep_dims", false);
  eng_shape s = {.rank = 0};
  int64_t count = 1;
  for (int d = 0; d < r; d++) {
    if (red[d]) {
      count *= x->shape.dim[d];
      if (keep) s.dim[s.rank++] = 1;
    } else {
      s.dim[s.rank++] = x->shape.dim[d];
    }
  }
  eng_dtype odt = x->dtype;
  rc = eng_kout_raw(c, 0, odt, &s);
  if (rc) return rc;
  int64_t nout = eng_tensor_numel(&c->out[0]);
  /* Merge runs of dims with the same kind; size-1 dims merge with anything. */
  int64_t dims[ENG_MAX_RANK + 1], ost[ENG_MAX_RANK + 1];
  bool gred[ENG_MAX_RANK + 1];
  int g = 0;
  for (int d = 0; d < r; d++) {
    if (x->shape.dim[d] == 1 && r > 1) continue;
    if (g && gred[g - 1] == red[d]) {
      dims[g - 1] *= x->shape.dim[d];
    } else {
      dims[g] = x->shape.dim[d];
      gred[g++] = red[d];
    }
  }
  if (!g) {
    dims[0] = 1;
    gred[0] = false;
    g = 1;
  }
  int64_t st = 1;
  for (int d = g - 1; d >= 0; d--) {
    ost[d] = gred[d] ? 0 : st;
    if (!gred[d]) st *= dims[d];
  }
  const void *xd = eng_tensor_data(x);
  void *yd = eng_tensor_data(&c->out[0]);
  if (logical) {
    /* bool: reuse the int32-free path with bytes. */
    uint8_t *y = yd;
    const uint8_t *xs = xd;
    uint8_t init = op == R_ALL;
    for (int64_t i = 0; i < nout; i++) y[i] = init;
    int64_t total = eng_tensor_numel(x), idx[ENG_MAX_RANK + 1] = {0}, oo = 0;
    for (int64_t i = 0; i < total; i++) {
      if (op == R_ALL)
        y[oo] = y[oo] && xs[i];
      else
        y[oo] = y[oo] || xs[i];
      for (int d = g - 1; d >= 0; d--) {
        if (++idx[d] < dims[d]) {
          oo += ost[d];
          break;
        }
        oo -= ost[d] * (idx[d] - 1);
        idx[d] = 0;
      }
    }
    return TD_OK;
  }
  if (op == R_MEAN && !count && (odt == ENG_DT_INT32 || odt == ENG_DT_INT64))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "mean of nothing");
  red_args a = {op, odt, xd, yd, eng_dtype_size(odt), g, {0}, {0}, count, nout, 1, 0};
  memcpy(a.dims, dims, sizeof dims);
  memcpy(a.ost, ost, sizeof ost);
  for (int d = 1; d < g; d++) a.xper *= dims[d];
  if (gred[0] || !a.xper) {
    red_range(&a, 0, dims[0]);
  } else {
    /* The outer dim is kept: split it, each output computed by one range. */
    a.yper = ost[0];
    eng_pool_for(NULL, dims[0], PAR_MIN_ELEMS / a.xper + 1, 1, red_range, &a);
  }
  return TD_OK;
}

/* --- _LayerNorm (eng_merge.c's merge of Keras's LayerNormalization) --------- */

typedef struct ln_args {
  const float *x, *gamma, *beta;
  float *y, eps;
  int64_t c;
} ln_args;

/* Rows [r0, r1): each value as the kernel the fusion replaced computes it,
 * in the graph's order (the row of y holds the squared differences until
 * the variance is taken). */
static void ln_rows(void *arg, int64_t r0, int64_t r1) {
  const ln_args *a = arg;
  int64_t c = a->c;
  const float *g = a->gamma, *b = a->beta;
  for (int64_t r = r0; r < r1; r++) {
    const float *x = a->x + r * c;
    float *y = a->y + r * c;
    float acc = 0;
    acc += sum_run_f32(x, c);
    float mean = (float)(acc / (float)c);
    for (int64_t j = 0; j < c; j++) y[j] = (x[j] - mean) * (x[j] - mean);
    float vacc = 0;
    vacc += sum_run_f32(y, c);
    float var = (float)(vacc / (float)c);
    float rs = 1.0f / sqrtf(var + a->eps), nm = -mean;
    for (int64_t j = 0; j < c; j++) {
      float inv = rs * g[j], t = nm * inv, u = t + b[j], w = x[j] * inv;
      y[j] = w + u;
    }
  }
}

td_code eng_k_layer_norm(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  const eng_epilogue *e = c->epi;
  if (!e || e->n != 2 || e->op[0].kind != EPI_LAYER_NORM)
    return eng_kfail(c, TD_INTERNAL, "the fused LayerNorm lost its constants");
  if (x->dtype != ENG_DT_FLOAT || x->shape.rank < 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "the fused LayerNorm needs a float input of rank >= 1");
  int64_t axes[2];
  int na, r = x->shape.rank;
  td_code rc = eng_karg_ints(c, 1, axes, 2, &na);
  if (rc) return rc;
  const eng_tensor *gamma = &e->op[0].k, *beta = &e->op[1].k;
  int64_t ch = x->shape.dim[r - 1];
  if (na != 1 || (axes[0] != -1 && axes[0] != r - 1) || gamma->shape.rank > r ||
      eng_tensor_numel(gamma) != ch || eng_tensor_numel(beta) != ch)
    return eng_kfail(c, TD_UNIMPLEMENTED,
                     "the fused LayerNorm normalises the last axis of its input, whose %lld "
                     "channels its scale and offset must match",
                     (long long)ch);
  rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &x->shape);
  if (rc) return rc;
  c->epi_done = true;
  int64_t rows = ch ? eng_tensor_numel(x) / ch : 0;
  if (!rows) return TD_OK;
  ln_args a = {eng_tensor_data(x),          eng_tensor_data(gamma), eng_tensor_data(beta),
               eng_tensor_data(&c->out[0]), e->op[0].c[0],          ch};
  eng_pool_for(NULL, rows, PAR_MIN_ELEMS / ch + 1, 1, ln_rows, &a);
  return TD_OK;
}

/* --- Cumsum (float, double, int32, int64; exclusive, reverse) ------------------- */

/* Cumsum and Cumprod: one scan along the axis, with TensorFlow's
 * `exclusive` (each output leaves out its own element) and `reverse`. */
#define SCAN(T, IDENT, OP)                                                                \
  {                                                                                       \
    const T *x = eng_tensor_data(&c->in[0]);                                              \
    T *y = eng_tensor_data(&c->out[0]);                                                   \
    for (int64_t o = 0; o < outer; o++)                                                   \
      for (int64_t i = 0; i < inner; i++) {                                               \
        T acc = IDENT;                                                                    \
        for (int64_t k = 0; k < len; k++) {                                               \
          int64_t kk = reverse ? len - 1 - k : k, at = (o * len + kk) * inner + i;         \
          if (exclusive) {                                                                \
            y[at] = acc;                                                                  \
            acc OP x[at];                                                                 \
          } else {                                                                        \
            acc OP x[at];                                                                 \
            y[at] = acc;                                                                  \
          }                                                                               \
        }                                                                                 \
      }                                                                                   \
  }
#define SCAN_KIND(T) \
  if (product)       \
    SCAN(T, 1, *=)   \
  else               \
    SCAN(T, 0, +=)

static td_code scan(eng_kctx *c, bool product) {
  const eng_tensor *xt = &c->in[0];
  int64_t axis;
  int a;
  td_code rc = eng_karg_int(c, 1, &axis);
  if (!rc) rc = eng_kaxis(c, axis, xt->shape.rank, &a);
  if (rc) return rc;
  if (xt->dtype != ENG_DT_FLOAT && xt->dtype != ENG_DT_DOUBLE && xt->dtype != ENG_DT_INT32 &&
      xt->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(xt->dtype));
  if ((rc = eng_kout_raw(c, 0, xt->dtype, &xt->shape))) return rc;
  bool exclusive = eng_node_attr_bool(c->node, "exclusive", false);
  bool reverse = eng_node_attr_bool(c->node, "reverse", false);
  int64_t outer = 1, inner = 1, len = xt->shape.dim[a];
  for (int d = 0; d < a; d++) outer *= xt->shape.dim[d];
  for (int d = a + 1; d < xt->shape.rank; d++) inner *= xt->shape.dim[d];
  switch (xt->dtype) {
    case ENG_DT_FLOAT: SCAN_KIND(float) break;
    case ENG_DT_DOUBLE: SCAN_KIND(double) break;
    case ENG_DT_INT32: SCAN_KIND(int32_t) break;
    default: SCAN_KIND(int64_t) break;
  }
  return TD_OK;
}

td_code eng_k_cumsum(eng_kctx *c) { return scan(c, false); }
td_code eng_k_cumprod(eng_kctx *c) { return scan(c, true); }

/* L2Loss: sum(x^2) / 2 over every element, accumulated in double whatever
 * the type, so a large float32 tensor loses no low-order terms. */
td_code eng_k_l2_loss(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  if (x->dtype != ENG_DT_FLOAT && x->dtype != ENG_DT_DOUBLE)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input (float32 or float64 only)",
                     eng_dtype_name(x->dtype));
  int64_t n = eng_tensor_numel(x);
  double acc = 0;
  if (x->dtype == ENG_DT_FLOAT) {
    const float *v = eng_tensor_data(x);
    for (int64_t i = 0; i < n; i++) acc += (double)v[i] * (double)v[i];
  } else {
    const double *v = eng_tensor_data(x);
    for (int64_t i = 0; i < n; i++) acc += v[i] * v[i];
  }
  eng_shape s = {.rank = 0};
  td_code rc = eng_kout_raw(c, 0, x->dtype, &s);
  if (rc) return rc;
  if (x->dtype == ENG_DT_FLOAT)
    *(float *)eng_tensor_data(&c->out[0]) = (float)(acc * 0.5);
  else
    *(double *)eng_tensor_data(&c->out[0]) = acc * 0.5;
  return TD_OK;
}
