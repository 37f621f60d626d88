/* Elementwise binary arithmetic with NumPy broadcasting.
 *
 * Equal shapes and a single-element side take one flat loop; everything
 * else (a bias over the last axis, a per-row scale, masks) walks the output
 * a row at a time with eng_bcast (dims merged where both inputs allow; in a
 * row each input is contiguous or one repeated element). */
#include <complex.h>
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

/* One function per (type, op): op is a constant inside, so APPLY folds to
 * one operation and the flat loops vectorize. */
#define DEFINE_LOOP(T, NAME, OPC) DEFINE_LOOP_WITH(T, NAME, OPC, APPLY)
#define DEFINE_LOOP_WITH(T, NAME, OPC, APPLYF)                                           \
  static void NAME(const eng_tensor *a, const eng_tensor *b, eng_tensor *o) {            \
    const binop op = OPC;                                                                \
    const T *x = eng_tensor_data(a), *y = eng_tensor_data(b);                            \
    T *z = eng_tensor_data(o);                                                           \
    int64_t n = eng_tensor_numel(o), na = eng_tensor_numel(a), nb = eng_tensor_numel(b); \
    if (na == n && nb == n && eng_shape_equal(&a->shape, &b->shape)) {                   \
      for (int64_t i = 0; i < n; i++) z[i] = APPLYF(op, x[i], y[i]);                     \
      return;                                                                            \
    }                                                                                    \
    if (nb == 1 && na == n) {                                                            \
      T v = y[0];                                                                        \
      for (int64_t i = 0; i < n; i++) z[i] = APPLYF(op, x[i], v);                        \
      return;                                                                            \
    }                                                                                    \
    if (na == 1 && nb == n) {                                                            \
      T v = x[0];                                                                        \
      for (int64_t i = 0; i < n; i++) z[i] = APPLYF(op, v, y[i]);                        \
      return;                                                                            \
    }                                                                                    \
    /* General broadcasting, a row (the innermost merged dim) at a time. */              \
    eng_bcast it;                                                                        \
    const eng_shape *in[2] = {&a->shape, &b->shape};                                     \
    eng_bcast_init(&it, &o->shape, 2, in);                                               \
    int64_t len = eng_bcast_row_len(&it);                                                \
    bool ra = eng_bcast_row_stride(&it, 0) != 0, rb = eng_bcast_row_stride(&it, 1) != 0; \
    for (int64_t i = 0; i < n; i += len, eng_bcast_next_row(&it)) {                      \
      const T *xr = x + it.off[0], *yr = y + it.off[1];                                  \
      T *zr = z + i;                                                                     \
      if (ra && rb) {                                                                    \
        for (int64_t k = 0; k < len; k++) zr[k] = APPLYF(op, xr[k], yr[k]);              \
      } else if (ra) {                                                                   \
        T v = yr[0];                                                                     \
        for (int64_t k = 0; k < len; k++) zr[k] = APPLYF(op, xr[k], v);                  \
      } else if (rb) {                                                                   \
        T u = xr[0];                                                                     \
        for (int64_t k = 0; k < len; k++) zr[k] = APPLYF(op, u, yr[k]);                  \
      } else {                                                                           \
        T w = APPLYF(op, xr[0], yr[0]);                                                  \
        for (int64_t k = 0; k < len; k++) zr[k] = w;                                     \
      }                                                                                  \
    }                                                                                    \
  }

#define DEFINE_TYPE(T, NAME)                                                                  \
  DEFINE_LOOP(T, NAME##_add, OP_ADD)                                                          \
  DEFINE_LOOP(T, NAME##_sub, OP_SUB)                                                          \
  DEFINE_LOOP(T, NAME##_mul, OP_MUL)                                                          \
  DEFINE_LOOP(T, NAME##_div, OP_DIV)                                                          \
  DEFINE_LOOP(T, NAME##_max, OP_MAX)                                                          \
  DEFINE_LOOP(T, NAME##_min, OP_MIN)                                                          \
  static void NAME(binop op, const eng_tensor *a, const eng_tensor *b, eng_tensor *o) {       \
    switch (op) {                                                                             \
      case OP_ADD: NAME##_add(a, b, o); break;                                                \
      case OP_SUB: NAME##_sub(a, b, o); break;                                                \
      case OP_MUL: NAME##_mul(a, b, o); break;                                                \
      case OP_DIV: NAME##_div(a, b, o); break;                                                \
      case OP_MAX: NAME##_max(a, b, o); break;                                                \
      default: NAME##_min(a, b, o); break;                                                    \
    }                                                                                         \
  }

/* Complex operands (Add/Sub/Mul/RealDiv; TensorFlow has no complex Maximum
 * or Minimum): the same loops with C99 complex arithmetic. */
#define APPLY_CX(op, x, y) \
  ((op) == OP_ADD ? (x) + (y) : (op) == OP_SUB ? (x) - (y) : (op) == OP_MUL ? (x) * (y) : (x) / (y))
#define DEFINE_CX(T, NAME)                                                              \
  DEFINE_LOOP_WITH(T, NAME##_add, OP_ADD, APPLY_CX)                                     \
  DEFINE_LOOP_WITH(T, NAME##_sub, OP_SUB, APPLY_CX)                                     \
  DEFINE_LOOP_WITH(T, NAME##_mul, OP_MUL, APPLY_CX)                                     \
  DEFINE_LOOP_WITH(T, NAME##_div, OP_DIV, APPLY_CX)                                     \
  static void NAME(binop op, const eng_tensor *a, const eng_tensor *b, eng_tensor *o) { \
    switch (op) {                                                                       \
      case OP_ADD:                                                                      \
        NAME##_add(a, b, o);                                                            \
        break;                                                                          \
      case OP_SUB:                                                                      \
        NAME##_sub(a, b, o);                                                            \
        break;                                                                          \
      case OP_MUL:                                                                      \
        NAME##_mul(a, b, o);                                                            \
        break;                                                                          \
      default:                                                                          \
        NAME##_div(a, b, o);                                                            \
        break;                                                                          \
    }                                                                                   \
  }

DEFINE_CX(float complex, loop_c64)
DEFINE_CX(double complex, loop_c128)

DEFINE_TYPE(float, loop_f32)
DEFINE_TYPE(double, loop_f64)
DEFINE_TYPE(int32_t, loop_i32)
DEFINE_TYPE(int64_t, loop_i64)

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
  bool cx = a->dtype == ENG_DT_COMPLEX64 || a->dtype == ENG_DT_COMPLEX128;
  if (int_div || (cx && (op == OP_MAX || op == OP_MIN)) ||
      (!cx && a->dtype != ENG_DT_FLOAT && a->dtype != ENG_DT_DOUBLE && a->dtype != ENG_DT_INT32 &&
       a->dtype != ENG_DT_INT64))
    return td_err_set(c->err, TD_UNIMPLEMENTED, "node '%s' (%s): %s operands are not supported",
                      c->node->name, c->node->op, eng_dtype_name(a->dtype));
  rc = eng_tensor_alloc_raw(&c->out[0], a->dtype, &s, c->err);
  if (rc) return rc;
  switch (a->dtype) {
    case ENG_DT_FLOAT: loop_f32(op, a, b, &c->out[0]); break;
    case ENG_DT_DOUBLE: loop_f64(op, a, b, &c->out[0]); break;
    case ENG_DT_INT32: loop_i32(op, a, b, &c->out[0]); break;
    case ENG_DT_COMPLEX64:
      loop_c64(op, a, b, &c->out[0]);
      break;
    case ENG_DT_COMPLEX128:
      loop_c128(op, a, b, &c->out[0]);
      break;
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
