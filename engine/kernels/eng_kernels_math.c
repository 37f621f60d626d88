/* Elementwise ops beyond plain arithmetic, one element at a time (they are
 * rare in a model's hot path): FloorDiv, FloorMod and Atan2 with NumPy
 * broadcasting, IsFinite, Bucketize, and Cumprod along an axis. Integer
 * results follow TensorFlow exactly: FloorDiv rounds towards minus
 * infinity, FloorMod takes the divisor's sign, an integer division by zero
 * is INVALID_ARGUMENT as TensorFlow's CPU kernel reports it. */
#include <math.h>
#include <stdlib.h>

#include "eng_kernels.h"

typedef enum { FLOOR_DIV, FLOOR_MOD, ATAN2 } fop;

static double floor_mod_f(double x, double y) {
  double r = fmod(x, y);
  return r != 0 && (r < 0) != (y < 0) ? r + y : r;
}

#define INT_FLOOR(T)                                         \
  static T floor_div_##T(T x, T y) {                         \
    T q = x / y;                                             \
    return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q; \
  }                                                          \
  static T floor_mod_##T(T x, T y) {                         \
    T r = x % y;                                             \
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;       \
  }
INT_FLOOR(int32_t)
INT_FLOOR(int64_t)

#define WALK(T, EXPR)                                         \
  do {                                                        \
    const T *x = eng_tensor_data(a), *y = eng_tensor_data(b); \
    T *z = eng_tensor_data(&c->out[0]);                       \
    for (int64_t i = 0; i < n; i++, eng_bcast_next(&it)) {    \
      T u = x[it.off[0]], v = y[it.off[1]];                   \
      z[i] = (EXPR);                                          \
    }                                                         \
  } while (0)

#define WALK_INT(T)                                                                    \
  do {                                                                                 \
    const T *y = eng_tensor_data(b);                                                   \
    for (int64_t i = 0; i < nb; i++)                                                   \
      if (!y[i]) return eng_kfail(c, TD_INVALID_ARGUMENT, "Integer division by zero"); \
    if (op == FLOOR_DIV)                                                               \
      WALK(T, floor_div_##T(u, v));                                                    \
    else                                                                               \
      WALK(T, floor_mod_##T(u, v));                                                    \
  } while (0)

static td_code run_fop(eng_kctx *c, fop op) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  if (a->dtype != b->dtype)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "operands are %s and %s", eng_dtype_name(a->dtype),
                     eng_dtype_name(b->dtype));
  bool is_int = a->dtype == ENG_DT_INT32 || a->dtype == ENG_DT_INT64;
  if ((op == ATAN2 || !is_int) && a->dtype != ENG_DT_FLOAT && a->dtype != ENG_DT_DOUBLE)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s operands are not supported",
                     eng_dtype_name(a->dtype));
  eng_shape s;
  td_code rc = eng_broadcast_shape(&a->shape, &b->shape, &s, c->err);
  if (rc) return td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  if ((rc = eng_kout_raw(c, 0, a->dtype, &s))) return rc;
  int64_t n = eng_shape_numel(&s), nb = eng_tensor_numel(b);
  eng_bcast it;
  const eng_shape *in[2] = {&a->shape, &b->shape};
  eng_bcast_init(&it, &s, 2, in);
  switch (a->dtype) {
    case ENG_DT_INT32:
      WALK_INT(int32_t);
      break;
    case ENG_DT_INT64:
      WALK_INT(int64_t);
      break;
    case ENG_DT_FLOAT:
      if (op == FLOOR_DIV)
        WALK(float, floorf(u / v));
      else if (op == FLOOR_MOD)
        WALK(float, (float)floor_mod_f(u, v));
      else
        WALK(float, atan2f(u, v));
      break;
    default:
      if (op == FLOOR_DIV)
        WALK(double, floor(u / v));
      else if (op == FLOOR_MOD)
        WALK(double, floor_mod_f(u, v));
      else
        WALK(double, atan2(u, v));
      break;
  }
  return TD_OK;
}

td_code eng_k_floor_div(eng_kctx *c) { return run_fop(c, FLOOR_DIV); }
td_code eng_k_floor_mod(eng_kctx *c) { return run_fop(c, FLOOR_MOD); }
td_code eng_k_atan2(eng_kctx *c) { return run_fop(c, ATAN2); }

td_code eng_k_is_finite(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  if (x->dtype != ENG_DT_FLOAT && x->dtype != ENG_DT_DOUBLE)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  td_code rc = eng_kout_raw(c, 0, ENG_DT_BOOL, &x->shape);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(x);
  uint8_t *z = eng_tensor_data(&c->out[0]);
  if (x->dtype == ENG_DT_FLOAT) {
    const float *v = eng_tensor_data(x);
    for (int64_t i = 0; i < n; i++) z[i] = isfinite(v[i]);
  } else {
    const double *v = eng_tensor_data(x);
    for (int64_t i = 0; i < n; i++) z[i] = isfinite(v[i]);
  }
  return TD_OK;
}

/* Bucketize: the number of boundaries <= x (TensorFlow's upper_bound). */
td_code eng_k_bucketize(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  const eng_attr *ba = eng_node_attr(c->node, "boundaries");
  int nbnd = ba && ba->kind == ENG_ATTR_LIST && ba->list_kind == ENG_ATTR_F ? ba->n : 0;
  const float *bnd = nbnd ? ba->lf : NULL;
  for (int i = 1; i < nbnd; i++)
    if (bnd[i] < bnd[i - 1]) return eng_kfail(c, TD_INVALID_ARGUMENT, "Expected sorted boundaries");
  if (x->dtype != ENG_DT_FLOAT && x->dtype != ENG_DT_DOUBLE && x->dtype != ENG_DT_INT32 &&
      x->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  td_code rc = eng_kout_raw(c, 0, ENG_DT_INT32, &x->shape);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(x);
  int32_t *z = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) {
    double v;
    switch (x->dtype) {
      case ENG_DT_FLOAT:
        v = ((const float *)eng_tensor_data(x))[i];
        break;
      case ENG_DT_DOUBLE:
        v = ((const double *)eng_tensor_data(x))[i];
        break;
      case ENG_DT_INT32:
        v = ((const int32_t *)eng_tensor_data(x))[i];
        break;
      default:
        v = (double)((const int64_t *)eng_tensor_data(x))[i];
        break;
    }
    /* value < boundary in C's promoted type, as TensorFlow's upper_bound
     * over float boundaries compares: in float, in double for doubles. */
    int lo = 0, hi = nbnd;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      bool lt = x->dtype == ENG_DT_DOUBLE ? v < (double)bnd[mid] : (float)v < bnd[mid];
      if (lt)
        hi = mid;
      else
        lo = mid + 1;
    }
    z[i] = lo;
  }
  return TD_OK;
}

