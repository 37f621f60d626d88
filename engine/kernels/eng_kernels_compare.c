/* Broadcasting ops beyond plain arithmetic: comparisons and logic (bool
 * results), Select/SelectV2, Pow, SquaredDifference, plus AddN and BiasAdd.
 * They walk the output with eng_bcast a row at a time (per-input strides, 0
 * where an input is broadcast); the loops are macros instantiated per dtype.
 * Select, Pow, SquaredDifference and BiasAdd split their output rows over
 * the engine's pool (eng_pool_for); each element is computed alike in any
 * range, so the thread count changes no bits. Float Pow by a scalar 2 or
 * 3 (GELU's tanh form) takes eng_vmath_powi's vector loop instead of powf
 * per element. */
#include <math.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_pool.h"
#include "eng_vmath.h"

typedef enum { C_LT, C_LE, C_GT, C_GE, C_EQ, C_NE } cmpop;

static td_code bshape(eng_kctx *c, int n, eng_shape *out) {
  *out = c->in[0].shape;
  for (int k = 1; k < n; k++) {
    eng_shape s = *out;
    td_code rc = eng_broadcast_shape(&s, &c->in[k].shape, out, c->err);
    if (rc) return td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  }
  return TD_OK;
}

static void bcast2(eng_bcast *it, const eng_shape *o, const eng_tensor *a, const eng_tensor *b) {
  const eng_shape *in[2] = {&a->shape, &b->shape};
  eng_bcast_init(it, o, 2, in);
}

/* Rows of the broadcast walk (eng_bcast_next_row): in a row, input k moves
 * by sk (1, or 0 where it repeats one element). */
#define CMP_ROW(EXPR)                                                                \
  for (int64_t k = 0; k < len; k++) {                                                \
    __typeof__(*xr) u = xr[k * sa], v = yr[k * sb];                                  \
    zr[k] = (EXPR);                                                                  \
  }

#define CMP_LOOP(T, NAME)                                                            \
  static void NAME(cmpop op, const eng_tensor *a, const eng_tensor *b, eng_tensor *o) { \
    const T *x = eng_tensor_data(a), *y = eng_tensor_data(b);                        \
    uint8_t *z = eng_tensor_data(o);                                                 \
    int64_t n = eng_tensor_numel(o);                                                 \
    eng_bcast it;                                                                    \
    bcast2(&it, &o->shape, a, b);                                                    \
    int64_t len = eng_bcast_row_len(&it);                                            \
    int64_t sa = eng_bcast_row_stride(&it, 0), sb = eng_bcast_row_stride(&it, 1);    \
    for (int64_t i = 0; i < n; i += len, eng_bcast_next_row(&it)) {                  \
      const T *xr = x + it.off[0], *yr = y + it.off[1];                              \
      uint8_t *zr = z + i;                                                           \
      switch (op) {                                                                  \
        case C_LT: CMP_ROW(u < v) break;                                             \
        case C_LE: CMP_ROW(u <= v) break;                                            \
        case C_GT: CMP_ROW(u > v) break;                                             \
        case C_GE: CMP_ROW(u >= v) break;                                            \
        case C_EQ: CMP_ROW(u == v) break;                                            \
        default: CMP_ROW(u != v) break;                                              \
      }                                                                              \
    }                                                                                \
  }

CMP_LOOP(float, cmp_f32)
CMP_LOOP(double, cmp_f64)
CMP_LOOP(int32_t, cmp_i32)
CMP_LOOP(int64_t, cmp_i64)
CMP_LOOP(uint8_t, cmp_u8)

td_code eng_k_compare(eng_kctx *c) {
  const char *name = c->node->op;
  cmpop op = !strcmp(name, "Less")           ? C_LT
             : !strcmp(name, "LessEqual")    ? C_LE
             : !strcmp(name, "Greater")      ? C_GT
             : !strcmp(name, "GreaterEqual") ? C_GE
             : !strcmp(name, "Equal")        ? C_EQ
                                             : C_NE;
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  if (a->dtype != b->dtype)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "operands are %s and %s", eng_dtype_name(a->dtype),
                     eng_dtype_name(b->dtype));
  eng_shape s;
  td_code rc = bshape(c, 2, &s);
  if (rc) return rc;
  bool eq = op == C_EQ || op == C_NE;
  switch (a->dtype) {
    case ENG_DT_FLOAT: case ENG_DT_DOUBLE: case ENG_DT_INT32: case ENG_DT_INT64: break;
    case ENG_DT_BOOL: case ENG_DT_UINT8:
      if (eq || a->dtype == ENG_DT_UINT8) break;
      /* fall through */
    default:
      return eng_kfail(c, TD_UNIMPLEMENTED, "%s operands are not supported",
                       eng_dtype_name(a->dtype));
  }
  rc = eng_kout_raw(c, 0, ENG_DT_BOOL, &s);
  if (rc) return rc;
  switch (a->dtype) {
    case ENG_DT_FLOAT: cmp_f32(op, a, b, &c->out[0]); break;
    case ENG_DT_DOUBLE: cmp_f64(op, a, b, &c->out[0]); break;
    case ENG_DT_INT32: cmp_i32(op, a, b, &c->out[0]); break;
    case ENG_DT_INT64: cmp_i64(op, a, b, &c->out[0]); break;
    default: cmp_u8(op, a, b, &c->out[0]); break;
  }
  return TD_OK;
}

td_code eng_k_logical(eng_kctx *c) {
  bool is_and = !strcmp(c->node->op, "LogicalAnd");
  td_code rc = eng_kwant(c, 0, ENG_DT_BOOL);
  if (!rc) rc = eng_kwant(c, 1, ENG_DT_BOOL);
  eng_shape s;
  if (!rc) rc = bshape(c, 2, &s);
  if (!rc) rc = eng_kout_raw(c, 0, ENG_DT_BOOL, &s);
  if (rc) return rc;
  const uint8_t *x = eng_tensor_data(&c->in[0]), *y = eng_tensor_data(&c->in[1]);
  uint8_t *z = eng_tensor_data(&c->out[0]);
  int64_t n = eng_tensor_numel(&c->out[0]);
  eng_bcast it;
  bcast2(&it, &s, &c->in[0], &c->in[1]);
  int64_t len = eng_bcast_row_len(&it);
  int64_t sa = eng_bcast_row_stride(&it, 0), sb = eng_bcast_row_stride(&it, 1);
  for (int64_t i = 0; i < n; i += len, eng_bcast_next_row(&it)) {
    const uint8_t *xr = x + it.off[0], *yr = y + it.off[1];
    if (is_and)
      for (int64_t k = 0; k < len; k++) z[i + k] = xr[k * sa] && yr[k * sb];
    else
      for (int64_t k = 0; k < len; k++) z[i + k] = xr[k * sa] || yr[k * sb];
  }
  return TD_OK;
}

/* Elements below which a loop runs on one thread. */
#define PAR_MIN_ELEMS (1 << 14)

/* out[i] = cond ? t : e, element size es, a row of the walk at a time
 * (typed copies for 4- and 8-byte elements), as masks rather than branches
 * (a mask of mixed bits mispredicts no branch). Rows where each operand is
 * contiguous or one repeated element (an attention mask over a row of
 * scores, a constant for the masked places) run the loop with those
 * strides fixed, which the compiler vectorises; any other mix the strided
 * loop. */
#define SELECT_ROW(T, SC, ST, SE)                     \
  for (int64_t k = 0; k < len; k++) {                 \
    T m = (T)0 - (T)(cr[k * (SC)] != 0);              \
    zr[k] = (tr[k * (ST)] & m) | (er[k * (SE)] & ~m); \
  }
#define SELECT_ROWS(T)                                                      \
  for (int64_t i = r0 * len; i < n; i += len, eng_bcast_next_row(&it)) {    \
    const uint8_t *cr = cond + it.off[0];                                   \
    const T *tr = (const T *)t + it.off[1], *er = (const T *)e + it.off[2]; \
    T *zr = (T *)out + i;                                                   \
    switch (fixed) {                                                        \
      case 0x110: SELECT_ROW(T, 1, 1, 0) break;                             \
      case 0x101: SELECT_ROW(T, 1, 0, 1) break;                             \
      case 0x111: SELECT_ROW(T, 1, 1, 1) break;                             \
      case 0x011: SELECT_ROW(T, 0, 1, 1) break;                             \
      default: SELECT_ROW(T, sc, st, se) break;                             \
    }                                                                       \
  }

typedef struct select_args {
  eng_bcast it0;
  size_t es;
  const uint8_t *cond;
  const char *t, *e;
  char *out;
} select_args;

/* Rows [r0, r1) of the walk: a split over rows copies the same elements. */
static void select_rows(void *arg, int64_t r0, int64_t r1) {
  const select_args *a = arg;
  eng_bcast it = a->it0;
  eng_bcast_seek_row(&it, r0);
  int64_t len = eng_bcast_row_len(&it), n = r1 * len;
  int64_t sc = eng_bcast_row_stride(&it, 0), st = eng_bcast_row_stride(&it, 1),
          se = eng_bcast_row_stride(&it, 2);
  /* The strides as three hex digits when each is 0 or 1, else -1. */
  int fixed = (sc | st | se) & ~(int64_t)1 ? -1 : (int)(sc << 8 | st << 4 | se);
  size_t es = a->es;
  const uint8_t *cond = a->cond;
  const char *t = a->t, *e = a->e;
  char *out = a->out;
  if (es == 4) {
    SELECT_ROWS(uint32_t)
  } else if (es == 8) {
    SELECT_ROWS(uint64_t)
  } else {
    for (int64_t i = r0 * len; i < n; i += len, eng_bcast_next_row(&it))
      for (int64_t k = 0; k < len; k++)
        memcpy(out + (size_t)(i + k) * es,
               cond[it.off[0] + k * sc] ? t + (size_t)(it.off[1] + k * st) * es
                                        : e + (size_t)(it.off[2] + k * se) * es,
               es);
  }
}

td_code eng_s_select(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  eng_shape s;
  td_code rc = eng_broadcast_shape(&in[1], &in[2], &s, err);
  if (rc) return rc;
  if (!strcmp(n->op, "Select")) {
    out[0] = s;
    return TD_OK;
  }
  return eng_broadcast_shape(&in[0], &s, &out[0], err);
}

static td_code select_common(eng_kctx *c, const eng_shape *cond_shape) {
  const eng_tensor *t = &c->in[1], *e = &c->in[2];
  td_code rc = eng_kwant(c, 0, ENG_DT_BOOL);
  if (rc) return rc;
  if (t->dtype != e->dtype)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "then/else are %s and %s", eng_dtype_name(t->dtype),
                     eng_dtype_name(e->dtype));
  size_t es = eng_dtype_size(t->dtype);
  if (!es) return eng_kfail(c, TD_UNIMPLEMENTED, "%s values", eng_dtype_name(t->dtype));
  eng_shape s, te;
  rc = eng_broadcast_shape(&t->shape, &e->shape, &te, c->err);
  if (!rc) rc = eng_broadcast_shape(cond_shape, &te, &s, c->err);
  if (rc) return td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  rc = eng_kout_raw(c, 0, t->dtype, &s);
  if (rc) return rc;
  const eng_shape *in[3] = {cond_shape, &t->shape, &e->shape};
  select_args a = {.es = es,
                   .cond = eng_tensor_data(&c->in[0]),
                   .t = eng_tensor_data(t),
                   .e = eng_tensor_data(e),
                   .out = eng_tensor_data(&c->out[0])};
  eng_bcast_init(&a.it0, &s, 3, in);
  int64_t len = eng_bcast_row_len(&a.it0), n = eng_tensor_numel(&c->out[0]);
  if (n) eng_pool_for(NULL, n / len, PAR_MIN_ELEMS / len + 1, 1, select_rows, &a);
  return TD_OK;
}

td_code eng_k_select_v2(eng_kctx *c) { return select_common(c, &c->in[0].shape); }

/* TF1 Select: then and else have one shape; cond is that shape, a scalar,
 * or a vector over dimension 0. */
td_code eng_k_select(eng_kctx *c) {
  const eng_shape *cs = &c->in[0].shape, *ts = &c->in[1].shape;
  if (!eng_shape_equal(ts, &c->in[2].shape))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "then and else must have the same shape");
  if (cs->rank == 0 || eng_shape_equal(cs, ts)) return select_common(c, cs);
  if (cs->rank == 1 && ts->rank >= 1 && cs->dim[0] == ts->dim[0]) {
    eng_shape col = *ts; /* [n,1,1,...] broadcasts over the rest */
    for (int d = 1; d < col.rank; d++) col.dim[d] = 1;
    return select_common(c, &col);
  }
  return eng_kfail(c, TD_INVALID_ARGUMENT, "condition must be a scalar, a vector over dim 0, or "
                                           "the shape of then/else");
}

/* A broadcasting binary loop, as the pool's chunks see it: chunk i is
 * output elements [i * per, (i + 1) * per), walked a broadcast row (len
 * elements) at a time from an iterator of the chunk's own. */
typedef struct bin_args {
  const void *x, *y;
  void *z;
  eng_bcast it0;
  int64_t n, len, sa, sb, per;
} bin_args;

/* The iterator at the row holding element e0 of the output. */
static eng_bcast bin_seek(const bin_args *a, int64_t e0) {
  eng_bcast it = a->it0;
  for (int64_t r = 0; r < e0 / a->len; r++) eng_bcast_next_row(&it);
  return it;
}

#define BIN_LOOP(T, NAME, EXPR)                                                       \
  static void NAME##_chunk(void *arg, int64_t chunk) {                                \
    const bin_args *a = arg;                                                          \
    const T *x = a->x, *y = a->y;                                                     \
    T *z = a->z;                                                                      \
    int64_t i = chunk * a->per, e1 = i + a->per < a->n ? i + a->per : a->n;           \
    eng_bcast it = bin_seek(a, i);                                                    \
    for (; i < e1; eng_bcast_next_row(&it)) {                                         \
      const T *xr = x + it.off[0], *yr = y + it.off[1];                               \
      int64_t k0 = i % a->len, k1 = k0 + (e1 - i) < a->len ? k0 + (e1 - i) : a->len;  \
      for (int64_t k = k0; k < k1; k++) {                                             \
        T u = xr[k * a->sa], v = yr[k * a->sb];                                       \
        z[i - k0 + k] = (EXPR);                                                       \
      }                                                                               \
      i += k1 - k0;                                                                   \
    }                                                                                 \
  }                                                                                   \
  static void NAME(const eng_tensor *a, const eng_tensor *b, eng_tensor *o) {         \
    bin_args g = {.x = eng_tensor_data(a), .y = eng_tensor_data(b), .z = eng_tensor_data(o)}; \
    g.n = eng_tensor_numel(o);                                                        \
    bcast2(&g.it0, &o->shape, a, b);                                                  \
    g.len = eng_bcast_row_len(&g.it0);                                                \
    g.sa = eng_bcast_row_stride(&g.it0, 0);                                           \
    g.sb = eng_bcast_row_stride(&g.it0, 1);                                           \
    g.per = g.n;                                                                      \
    bin_run(&g, NAME##_chunk);                                                        \
  }

/* Runs a binary loop on the engine's pool, split into chunks of whole
 * broadcast rows (or of one long row): each element is computed the same
 * way at any thread count. */
static void bin_run(bin_args *g, eng_pool_fn fn) {
  int64_t threads = eng_pool_threads(NULL);
  if (g->n <= 0) return;
  if (threads < 2 || g->n < PAR_MIN_ELEMS || g->len <= 0) {
    fn(g, 0);
    return;
  }
  int64_t want = 4 * threads, per = (g->n + want - 1) / want;
  if (g->len < g->n) per = (per + g->len - 1) / g->len * g->len; /* whole rows */
  g->per = per;
  eng_pool_run(NULL, (g->n + per - 1) / per, fn, g);
}

static int64_t ipow(int64_t b, int64_t e) {
  int64_t r = 1;
  if (e < 0) return b == 1 ? 1 : b == -1 ? (e & 1 ? -1 : 1) : 0;
  while (e) {
    if (e & 1) r = (int64_t)((uint64_t)r * (uint64_t)b);
    b = (int64_t)((uint64_t)b * (uint64_t)b);
    e >>= 1;
  }
  return r;
}

BIN_LOOP(float, pow_f32, powf(u, v))
BIN_LOOP(double, pow_f64, pow(u, v))
BIN_LOOP(int32_t, pow_i32, (int32_t)ipow(u, v))
BIN_LOOP(int64_t, pow_i64, ipow(u, v))
BIN_LOOP(float, sqd_f32, (u - v) * (u - v))
BIN_LOOP(double, sqd_f64, (u - v) * (u - v))
BIN_LOOP(int32_t, sqd_i32, (int32_t)((uint32_t)(u - v) * (uint32_t)(u - v)))
BIN_LOOP(int64_t, sqd_i64, (int64_t)((uint64_t)(u - v) * (uint64_t)(u - v)))

/* Pow by a constant 2 or 3 (eng_vmath_powi), over the pool's threads in
 * chunks of elements. */
typedef struct powi_args {
  const float *x;
  float *z;
  int64_t n, per;
  int e;
} powi_args;

static void powi_chunk(void *arg, int64_t chunk) {
  const powi_args *a = arg;
  int64_t i = chunk * a->per, e1 = i + a->per < a->n ? i + a->per : a->n;
  eng_vmath_powi(a->x + i, a->z + i, e1 - i, a->e);
}

static void powi_run(const eng_tensor *x, eng_tensor *o, int e) {
  powi_args g = {eng_tensor_data(x), eng_tensor_data(o), eng_tensor_numel(o), 0, e};
  int64_t threads = eng_pool_threads(NULL);
  g.per = g.n;
  if (g.n <= 0) return;
  if (threads < 2 || g.n < PAR_MIN_ELEMS) {
    powi_chunk(&g, 0);
    return;
  }
  int64_t want = 4 * threads;
  g.per = (g.n + want - 1) / want;
  eng_pool_run(NULL, (g.n + g.per - 1) / g.per, powi_chunk, &g);
}

static td_code binary(eng_kctx *c, bool is_pow) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  if (a->dtype != b->dtype)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "operands are %s and %s", eng_dtype_name(a->dtype),
                     eng_dtype_name(b->dtype));
  eng_shape s;
  td_code rc = bshape(c, 2, &s);
  if (rc) return rc;
  if (a->dtype != ENG_DT_FLOAT && a->dtype != ENG_DT_DOUBLE && a->dtype != ENG_DT_INT32 &&
      a->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s operands are not supported",
                     eng_dtype_name(a->dtype));
  rc = eng_kout_raw(c, 0, a->dtype, &s);
  if (rc) return rc;
  eng_tensor *o = &c->out[0];
  if (is_pow && a->dtype == ENG_DT_FLOAT && eng_tensor_numel(b) == 1 &&
      eng_tensor_numel(a) == eng_tensor_numel(o)) {
    float e = *(const float *)eng_tensor_data(b);
    if (e == 2.0f || e == 3.0f) {
      powi_run(a, o, (int)e);
      return TD_OK;
    }
  }
  switch (a->dtype) {
    case ENG_DT_FLOAT: is_pow ? pow_f32(a, b, o) : sqd_f32(a, b, o); break;
    case ENG_DT_DOUBLE: is_pow ? pow_f64(a, b, o) : sqd_f64(a, b, o); break;
    case ENG_DT_INT32: is_pow ? pow_i32(a, b, o) : sqd_i32(a, b, o); break;
    default: is_pow ? pow_i64(a, b, o) : sqd_i64(a, b, o); break;
  }
  return TD_OK;
}

td_code eng_k_pow(eng_kctx *c) { return binary(c, true); }
td_code eng_k_squared_difference(eng_kctx *c) { return binary(c, false); }

/* --- AddN ------------------------------------------------------------------ */

td_code eng_s_add_n(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  out[0] = n->n_in ? in[0] : eng_shape_unknown();
  return TD_OK;
}

td_code eng_k_add_n(eng_kctx *c) {
  if (c->n_in < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "needs at least one input");
  const eng_tensor *a = &c->in[0];
  for (int k = 1; k < c->n_in; k++)
    if (c->in[k].dtype != a->dtype || !eng_shape_equal(&c->in[k].shape, &a->shape))
      return eng_kfail(c, TD_INVALID_ARGUMENT, "input %d differs in dtype or shape from input 0",
                       k);
  if (a->dtype != ENG_DT_FLOAT && a->dtype != ENG_DT_INT32 && a->dtype != ENG_DT_INT64 &&
      a->dtype != ENG_DT_DOUBLE)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s inputs are not supported", eng_dtype_name(a->dtype));
  td_code rc = eng_tensor_copy(&c->out[0], a, c->err);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(a);
  void *z = eng_tensor_data(&c->out[0]);
  for (int k = 1; k < c->n_in; k++) {
    const void *x = eng_tensor_data(&c->in[k]);
    switch (a->dtype) {
      case ENG_DT_FLOAT: for (int64_t i = 0; i < n; i++) ((float *)z)[i] += ((const float *)x)[i]; break;
      case ENG_DT_DOUBLE: for (int64_t i = 0; i < n; i++) ((double *)z)[i] += ((const double *)x)[i]; break;
      case ENG_DT_INT32: for (int64_t i = 0; i < n; i++) ((int32_t *)z)[i] += ((const int32_t *)x)[i]; break;
      default: for (int64_t i = 0; i < n; i++) ((int64_t *)z)[i] += ((const int64_t *)x)[i]; break;
    }
  }
  return TD_OK;
}

/* --- BiasAdd ----------------------------------------------------------------- */

typedef struct bias_args {
  const float *x, *b;
  float *y;
  int64_t ch, inner;
} bias_args;

/* Outer items [o0, o1), ch * inner elements each. */
static void bias_rows(void *arg, int64_t o0, int64_t o1) {
  const bias_args *a = arg;
  const float *restrict xs = a->x, *restrict bs = a->b;
  float *restrict y = a->y;
  int64_t ch = a->ch, inner = a->inner;
  for (int64_t i = o0 * ch * inner, e = o1 * ch * inner; i < e;) {
    for (int64_t k = 0; k < ch; k++) {
      float v = bs[k];
      for (int64_t j = 0; j < inner; j++, i++) y[i] = xs[i] + v;
    }
  }
}

td_code eng_k_bias_add(eng_kctx *c) {
  const eng_tensor *x = &c->in[0], *b = &c->in[1];
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (!rc) rc = eng_kwant(c, 1, ENG_DT_FLOAT);
  if (rc) return rc;
  bool nchw = !strcmp(eng_attr_str(c->node, "data_format", "NHWC"), "NCHW");
  if (x->shape.rank < 2 || b->shape.rank != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be at least rank 2 and bias rank 1");
  int cdim = nchw ? 1 : x->shape.rank - 1;
  int64_t ch = x->shape.dim[cdim];
  if (b->shape.dim[0] != ch)
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "bias has %lld elements but the input's channel dimension is %lld",
                     (long long)b->shape.dim[0], (long long)ch);
  rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &x->shape);
  if (rc) return rc;
  int64_t inner = 1, n = eng_tensor_numel(x);
  for (int d = cdim + 1; d < x->shape.rank; d++) inner *= x->shape.dim[d];
  const float *xs = eng_tensor_data(x), *bs = eng_tensor_data(b);
  float *y = eng_tensor_data(&c->out[0]);
  if (ch == 0 || inner == 0) return TD_OK;
  bias_args a = {xs, bs, y, ch, inner};
  eng_pool_for(NULL, n / (ch * inner), PAR_MIN_ELEMS / (ch * inner) + 1, 1, bias_rows, &a);
  return TD_OK;
}
