/* Elementwise binary arithmetic with NumPy broadcasting.
 *
 * Three loops cover the cases: equal shapes (one flat loop), one side a
 * single element (scalar loop), and general broadcasting, which walks the
 * output in row-major order keeping one running offset per input with
 * per-dimension strides (0 where that input is broadcast). */
#include <math.h>
#include <string.h>

#include "eng_kernels.h"

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN } binop;

td_code eng_broadcast_shape(const eng_shape *a, const eng_shape *b, eng_shape *out, td_err *err) {
  if (a->rank < 0 || b->rank < 0) {
    *out = eng_shape_unknown();
    return TD_OK;
  }
  int r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = r;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    int64_t d;
    if (da == db)
      d = da;
    else if (da == 1)
      d = db;
    else if (db == 1)
      d = da;
    else if (da < 0 || db < 0)
      d = da < 0 ? db : da; /* unknown vs known (not 1): the known one, if it runs at all */
    else {
      char sa[128], sb[128];
      return td_err_set(err, TD_INVALID_ARGUMENT, "Incompatible shapes: %s vs. %s",
                        eng_shape_str(a, sa, sizeof sa), eng_shape_str(b, sb, sizeof sb));
    }
    out->dim[i] = d;
  }
  return TD_OK;
}

td_code eng_s_binary(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  return eng_broadcast_shape(&in[0], &in[1], &out[0], err);
}

#define APPLY(op, x, y)                      \
  ((op) == OP_ADD   ? (x) + (y)              \
   : (op) == OP_SUB ? (x) - (y)              \
   : (op) == OP_MUL ? (x) * (y)              \
   : (op) == OP_DIV ? (x) / (y)              \
   : (op) == OP_MAX ? ((x) > (y) ? (x) : (y)) \
                    : ((x) < (y) ? (x) : (y)))

/* Strides of an input over the output's dims (0 where broadcast). */
static void bcast_strides(const eng_shape *in, const eng_shape *out, int64_t *st) {
  int64_t s = 1;
  for (int i = out->rank - 1; i >= 0; i--) {
    int ii = i - (out->rank - in->rank);
    int64_t d = ii >= 0 ? in->dim[ii] : 1;
    st[i] = d == 1 ? 0 : s;
    s *= d;
  }
}

#define DEFINE_LOOP(T, NAME)                                                                  \
  static void NAME(binop op, const eng_tensor *a, const eng_tensor *b, eng_tensor *o) {       \
    const T *x = eng_tensor_data(a), *y = eng_tensor_data(b);                                 \
    T *z = eng_tensor_data(o);                                                                \
    int64_t n = eng_tensor_numel(o), na = eng_tensor_numel(a), nb = eng_tensor_numel(b);      \
    if (na == n && nb == n && eng_shape_equal(&a->shape, &b->shape)) {                        \
      for (int64_t i = 0; i < n; i++) z[i] = APPLY(op, x[i], y[i]);                           \
      return;                                                                                 \
    }                                                                                         \
    if (nb == 1 && na == n) {                                                                 \
      T v = y[0];                                                                             \
      for (int64_t i = 0; i < n; i++) z[i] = APPLY(op, x[i], v);                              \
      return;                                                                                 \
    }                                                                                         \
    if (na == 1 && nb == n) {                                                                 \
      T v = x[0];                                                                             \
      for (int64_t i = 0; i < n; i++) z[i] = APPLY(op, v, y[i]);                              \
      return;                                                                                 \
    }                                                                                         \
    int r = o->shape.rank;                                                                    \
    int64_t sa[ENG_MAX_RANK], sb[ENG_MAX_RANK], idx[ENG_MAX_RANK] = {0};                      \
    bcast_strides(&a->shape, &o->shape, sa);                                                  \
    bcast_strides(&b->shape, &o->shape, sb);                                                  \
    int64_t oa = 0, ob = 0;                                                                   \
    for (int64_t i = 0; i < n; i++) {                                                         \
      z[i] = APPLY(op, x[oa], y[ob]);                                                         \
      for (int d = r - 1; d >= 0; d--) {                                                      \
        if (++idx[d] < o->shape.dim[d]) {                                                     \
          oa += sa[d];                                                                        \
          ob += sb[d];                                                                        \
          break;                                                                              \
        }                                                                                     \
        oa -= sa[d] * (idx[d] - 1);                                                           \
        ob -= sb[d] * (idx[d] - 1);                                                           \
        idx[d] = 0;                                                                           \
      }                                                                                       \
    }                                                                                         \
  }

DEFINE_LOOP(float, loop_f32)
DEFINE_LOOP(double, loop_f64)
DEFINE_LOOP(int32_t, loop_i32)
DEFINE_LOOP(int64_t, loop_i64)

static td_code run_binary(eng_kctx *c, binop op) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  if (a->dtype != b->dtype)
    return td_err_set(c->err, TD_INVALID_ARGUMENT, "node '%s' (%s): operands are %s and %s",
                      c->node->name, c->node->op, eng_dtype_name(a->dtype),
                      eng_dtype_name(b->dtype));
  eng_shape s;
  td_code rc = eng_broadcast_shape(&a->shape, &b->shape, &s, c->err);
  if (rc) return td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  bool int_div = op == OP_DIV && (a->dtype == ENG_DT_INT32 || a->dtype == ENG_DT_INT64);
  if (int_div || (a->dtype != ENG_DT_FLOAT && a->dtype != ENG_DT_DOUBLE &&
                  a->dtype != ENG_DT_INT32 && a->dtype != ENG_DT_INT64))
    return td_err_set(c->err, TD_UNIMPLEMENTED, "node '%s' (%s): %s operands are not supported",
                      c->node->name, c->node->op, eng_dtype_name(a->dtype));
  rc = eng_tensor_alloc(&c->out[0], a->dtype, &s, c->err);
  if (rc) return rc;
  switch (a->dtype) {
    case ENG_DT_FLOAT: loop_f32(op, a, b, &c->out[0]); break;
    case ENG_DT_DOUBLE: loop_f64(op, a, b, &c->out[0]); break;
    case ENG_DT_INT32: loop_i32(op, a, b, &c->out[0]); break;
    default: loop_i64(op, a, b, &c->out[0]); break;
  }
  return TD_OK;
}

td_code eng_k_add(eng_kctx *c) { return run_binary(c, OP_ADD); }
td_code eng_k_sub(eng_kctx *c) { return run_binary(c, OP_SUB); }
td_code eng_k_mul(eng_kctx *c) { return run_binary(c, OP_MUL); }
td_code eng_k_real_div(eng_kctx *c) { return run_binary(c, OP_DIV); }
td_code eng_k_maximum(eng_kctx *c) { return run_binary(c, OP_MAX); }
td_code eng_k_minimum(eng_kctx *c) { return run_binary(c, OP_MIN); }
