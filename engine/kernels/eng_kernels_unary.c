/* Elementwise unary ops. One kernel serves every math op: the op name picks
 * a function from a sorted table once per call, then one tight loop per
 * dtype applies it. float and double use the C library's functions (TF's
 * Eigen versions agree to an ulp or two); int32/int64 take the ops that make
 * sense on integers (Neg, Abs, Square, Sign). A large input splits into
 * element ranges over the engine's pool (eng_pool_for). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_pool.h"
#include "eng_vmath.h"

typedef enum {
  U_ABS, U_CEIL, U_COS, U_ELU, U_ERF, U_ERFC, U_EXP, U_EXPM1, U_FLOOR, U_LOG, U_LOG1P, U_NEG,
  U_RECIPROCAL, U_RELU, U_RELU6, U_ROUND, U_RSQRT, U_SELU, U_SIGMOID, U_SIGN, U_SIN, U_SOFTPLUS,
  U_SOFTSIGN, U_SQRT, U_SQUARE, U_TANH
} unop;

static const struct {
  const char *name;
  unop op;
  bool ints; /* defined on int32/int64 too */
} unops[] = {
    {"Abs", U_ABS, true},       {"Ceil", U_CEIL, false},    {"Cos", U_COS, false},
    {"Elu", U_ELU, false},      {"Erf", U_ERF, false},      {"Erfc", U_ERFC, false},
    {"Exp", U_EXP, false},      {"Expm1", U_EXPM1, false},  {"Floor", U_FLOOR, false},
    {"Log", U_LOG, false},      {"Log1p", U_LOG1P, false},  {"Neg", U_NEG, true},
    {"Reciprocal", U_RECIPROCAL, false}, {"Relu", U_RELU, true}, {"Relu6", U_RELU6, true},
    {"Round", U_ROUND, false},  {"Rsqrt", U_RSQRT, false},  {"Selu", U_SELU, false},
    {"Sigmoid", U_SIGMOID, false}, {"Sign", U_SIGN, true},  {"Sin", U_SIN, false},
    {"Softplus", U_SOFTPLUS, false}, {"Softsign", U_SOFTSIGN, false}, {"Sqrt", U_SQRT, false},
    {"Square", U_SQUARE, true}, {"Tanh", U_TANH, false},
};

static int find_unop(const char *name) {
  int lo = 0, hi = (int)(sizeof unops / sizeof unops[0]) - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2, c = strcmp(name, unops[mid].name);
    if (!c) return mid;
    if (c < 0)
      hi = mid - 1;
    else
      lo = mid + 1;
  }
  return -1;
}

#define SELU_SCALE 1.0507009873554804934193349852946
#define SELU_ALPHA 1.6732632423543772848170429916717

#define FLOAT_LOOP(T, NAME, SUF)                                                           \
  static void NAME(unop op, const T *x, T *y, int64_t n) {                              \
    switch (op) {                                                                       \
      case U_ABS: for (int64_t i = 0; i < n; i++) y[i] = fabs##SUF(x[i]); break;        \
      case U_CEIL: for (int64_t i = 0; i < n; i++) y[i] = ceil##SUF(x[i]); break;       \
      case U_COS: for (int64_t i = 0; i < n; i++) y[i] = cos##SUF(x[i]); break;         \
      case U_ELU:                                                                       \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? expm1##SUF(x[i]) : x[i];      \
        break;                                                                          \
      case U_ERF: for (int64_t i = 0; i < n; i++) y[i] = erf##SUF(x[i]); break;         \
      case U_ERFC: for (int64_t i = 0; i < n; i++) y[i] = erfc##SUF(x[i]); break;       \
      case U_EXP: for (int64_t i = 0; i < n; i++) y[i] = exp##SUF(x[i]); break;         \
      case U_EXPM1: for (int64_t i = 0; i < n; i++) y[i] = expm1##SUF(x[i]); break;     \
      case U_FLOOR: for (int64_t i = 0; i < n; i++) y[i] = floor##SUF(x[i]); break;     \
      case U_LOG: for (int64_t i = 0; i < n; i++) y[i] = log##SUF(x[i]); break;         \
      case U_LOG1P: for (int64_t i = 0; i < n; i++) y[i] = log1p##SUF(x[i]); break;     \
      case U_NEG: for (int64_t i = 0; i < n; i++) y[i] = -x[i]; break;                  \
      case U_RECIPROCAL: for (int64_t i = 0; i < n; i++) y[i] = (T)1 / x[i]; break;     \
      case U_RELU: for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? x[i] : 0; break;   \
      case U_RELU6:                                                                     \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? (x[i] < 6 ? x[i] : 6) : 0;    \
        break;                                                                          \
      case U_ROUND: for (int64_t i = 0; i < n; i++) y[i] = nearbyint##SUF(x[i]); break; \
      case U_RSQRT: for (int64_t i = 0; i < n; i++) y[i] = (T)1 / sqrt##SUF(x[i]); break; \
      case U_SELU:                                                                      \
        for (int64_t i = 0; i < n; i++)                                                 \
          y[i] = x[i] > 0 ? (T)SELU_SCALE * x[i]                                        \
                          : (T)(SELU_SCALE * SELU_ALPHA) * expm1##SUF(x[i]);            \
        break;                                                                          \
      case U_SIGMOID:                                                                   \
        for (int64_t i = 0; i < n; i++) y[i] = (T)1 / ((T)1 + exp##SUF(-x[i]));         \
        break;                                                                          \
      case U_SIGN:                                                                      \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] > 0 ? 1 : x[i] < 0 ? -1 : x[i];     \
        break;                                                                          \
      case U_SIN: for (int64_t i = 0; i < n; i++) y[i] = sin##SUF(x[i]); break;         \
      case U_SOFTPLUS:                                                                  \
        for (int64_t i = 0; i < n; i++)                                                 \
          y[i] = (x[i] > 0 ? x[i] : 0) + log1p##SUF(exp##SUF(-fabs##SUF(x[i])));        \
        break;                                                                          \
      case U_SOFTSIGN:                                                                  \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] / ((T)1 + fabs##SUF(x[i]));         \
        break;                                                                          \
      case U_SQRT: for (int64_t i = 0; i < n; i++) y[i] = sqrt##SUF(x[i]); break;       \
      case U_SQUARE: for (int64_t i = 0; i < n; i++) y[i] = x[i] * x[i]; break;         \
      case U_TANH: for (int64_t i = 0; i < n; i++) y[i] = tanh##SUF(x[i]); break;       \
    }                                                                                   \
  }

FLOAT_LOOP(float, loop_scalar_f, f)
FLOAT_LOOP(double, loop_, )

/* float: the transcendental functions libmvec has go a vector at a time
 * (eng_vmath), the rest through the scalar loops. */
static void loop_f(unop op, const float *x, float *y, int64_t n) {
  switch (op) {
    case U_ERF: eng_vmath_erf(x, y, n); break;
    case U_ERFC: eng_vmath_erfc(x, y, n); break;
    case U_EXP: eng_vmath_exp(x, y, n); break;
    case U_TANH: eng_vmath_tanh(x, y, n); break;
    case U_SIGMOID:
      eng_vmath_sigmoid(x, y, n);
      break;
    default: loop_scalar_f(op, x, y, n); break;
  }
}

#define INT_LOOP(T, NAME)                                                               \
  static void NAME(unop op, const T *x, T *y, int64_t n) {                              \
    for (int64_t i = 0; i < n; i++) {                                                   \
      T v = x[i];                                                                       \
      switch (op) {                                                                     \
        case U_ABS: y[i] = v < 0 ? (T)(0 - (uint64_t)v) : v; break;                     \
        case U_NEG: y[i] = (T)(0 - (uint64_t)v); break;                                 \
        case U_SQUARE: y[i] = (T)((uint64_t)v * (uint64_t)v); break;                    \
        case U_SIGN: y[i] = v > 0 ? 1 : v < 0 ? -1 : 0; break;                          \
        case U_RELU: y[i] = v > 0 ? v : 0; break;                                       \
        default: y[i] = v > 0 ? (v < 6 ? v : 6) : 0; break; /* U_RELU6 */               \
      }                                                                                 \
    }                                                                                   \
  }

INT_LOOP(int32_t, loop_i32)
INT_LOOP(int64_t, loop_i64)

td_code eng_s_unary(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  out[0] = in[0];
  return TD_OK;
}

typedef struct unary_args {
  unop op;
  eng_dtype dt;
  const char *x;
  char *y;
} unary_args;

/* Elements [i0, i1): every element is computed on its own (the vector
 * paths mask their tails with the same function), so a split over element
 * ranges changes no bits. */
static void unary_range(void *arg, int64_t i0, int64_t i1) {
  const unary_args *a = arg;
  size_t es = eng_dtype_size(a->dt);
  const void *x = a->x + (size_t)i0 * es;
  void *y = a->y + (size_t)i0 * es;
  switch (a->dt) {
    case ENG_DT_FLOAT:
      loop_f(a->op, x, y, i1 - i0);
      break;
    case ENG_DT_DOUBLE:
      loop_(a->op, x, y, i1 - i0);
      break;
    case ENG_DT_INT32:
      loop_i32(a->op, x, y, i1 - i0);
      break;
    default:
      loop_i64(a->op, x, y, i1 - i0);
      break;
  }
}

td_code eng_k_unary(eng_kctx *c) {
  int k = find_unop(c->node->op);
  if (k < 0) return eng_kfail(c, TD_INTERNAL, "no elementwise function for this op");
  const eng_tensor *x = &c->in[0];
  if (x->dtype == ENG_DT_COMPLEX64 || x->dtype == ENG_DT_COMPLEX128) return eng_unary_complex(c);
  bool is_int = x->dtype == ENG_DT_INT32 || x->dtype == ENG_DT_INT64;
  if (x->dtype != ENG_DT_FLOAT && x->dtype != ENG_DT_DOUBLE && !(is_int && unops[k].ints))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  td_code rc = eng_kout_raw(c, 0, x->dtype, &x->shape);
  if (rc) return rc;
  unary_args a = {unops[k].op, x->dtype, eng_tensor_data(x), eng_tensor_data(&c->out[0])};
  eng_pool_for(NULL, eng_tensor_numel(x), (int64_t)1 << 14, 64, unary_range, &a);
  return TD_OK;
}

td_code eng_k_leaky_relu(eng_kctx *c) {
  td_code rc = eng_kwant(c, 0, ENG_DT_FLOAT);
  if (!rc) rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &c->in[0].shape);
  if (rc) return rc;
  float alpha = eng_attr_float(c->node, "alpha", 0.2f);
  const float *x = eng_tensor_data(&c->in[0]);
  float *y = eng_tensor_data(&c->out[0]);
  int64_t n = eng_tensor_numel(&c->in[0]);
  for (int64_t i = 0; i < n; i++) y[i] = x[i] < 0 ? alpha * x[i] : x[i];
  return TD_OK;
}

td_code eng_k_logical_not(eng_kctx *c) {
  td_code rc = eng_kwant(c, 0, ENG_DT_BOOL);
  if (!rc) rc = eng_kout_raw(c, 0, ENG_DT_BOOL, &c->in[0].shape);
  if (rc) return rc;
  const uint8_t *x = eng_tensor_data(&c->in[0]);
  uint8_t *y = eng_tensor_data(&c->out[0]);
  int64_t n = eng_tensor_numel(&c->in[0]);
  for (int64_t i = 0; i < n; i++) y[i] = !x[i];
  return TD_OK;
}

/* --- Cast --------------------------------------------------------------- */

static bool castable(eng_dtype t) {
  switch (t) {
    case ENG_DT_FLOAT: case ENG_DT_DOUBLE: case ENG_DT_INT32: case ENG_DT_INT64:
    case ENG_DT_BOOL: case ENG_DT_UINT8: case ENG_DT_INT8: case ENG_DT_INT16:
    case ENG_DT_UINT16: case ENG_DT_UINT32: case ENG_DT_UINT64:
      return true;
    default:
      return false;
  }
}

static bool is_float(eng_dtype t) { return t == ENG_DT_FLOAT || t == ENG_DT_DOUBLE; }

static double get_f(const void *p, eng_dtype t, int64_t i) {
  return t == ENG_DT_FLOAT ? ((const float *)p)[i] : ((const double *)p)[i];
}

static int64_t get_i(const void *p, eng_dtype t, int64_t i) {
  switch (t) {
    case ENG_DT_INT32: return ((const int32_t *)p)[i];
    case ENG_DT_INT64: return ((const int64_t *)p)[i];
    case ENG_DT_BOOL: return ((const uint8_t *)p)[i] != 0;
    case ENG_DT_UINT8: return ((const uint8_t *)p)[i];
    case ENG_DT_INT8: return ((const int8_t *)p)[i];
    case ENG_DT_INT16: return ((const int16_t *)p)[i];
    case ENG_DT_UINT16: return ((const uint16_t *)p)[i];
    case ENG_DT_UINT32: return ((const uint32_t *)p)[i];
    default: return (int64_t)((const uint64_t *)p)[i];
  }
}

static void put_i(void *p, eng_dtype t, int64_t i, int64_t v) {
  switch (t) {
    case ENG_DT_INT32: ((int32_t *)p)[i] = (int32_t)v; break;
    case ENG_DT_INT64: ((int64_t *)p)[i] = v; break;
    case ENG_DT_BOOL: ((uint8_t *)p)[i] = v != 0; break;
    case ENG_DT_UINT8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case ENG_DT_INT8: ((int8_t *)p)[i] = (int8_t)v; break;
    case ENG_DT_INT16: ((int16_t *)p)[i] = (int16_t)v; break;
    case ENG_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case ENG_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((uint64_t *)p)[i] = (uint64_t)v; break;
  }
}

/* Float to integer truncates toward zero; out-of-range values (and NaN)
 * saturate instead of being undefined behaviour. */
static int64_t f_to_i(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

td_code eng_k_cast(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  eng_dtype to = eng_node_attr_type(c->node, "DstT", ENG_DT_INVALID);
  if (to == x->dtype) {
    c->out[0] = eng_tensor_share(x);
    return TD_OK;
  }
  if (eng_cast_complex_handles(x->dtype, to)) return eng_cast_complex(c, to);
  if (!castable(x->dtype) || !castable(to))
    return eng_kfail(c, TD_UNIMPLEMENTED, "casting %s to %s is not supported",
                     eng_dtype_name(x->dtype), eng_dtype_name(to));
  td_code rc = eng_kout_raw(c, 0, to, &x->shape);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(x);
  const void *s = eng_tensor_data(x);
  void *d = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) {
    if (is_float(x->dtype)) {
      double v = get_f(s, x->dtype, i);
      if (to == ENG_DT_FLOAT)
        ((float *)d)[i] = (float)v;
      else if (to == ENG_DT_DOUBLE)
        ((double *)d)[i] = v;
      else if (to == ENG_DT_BOOL)
        ((uint8_t *)d)[i] = v != 0;
      else
        put_i(d, to, i, f_to_i(v));
    } else {
      int64_t v = get_i(s, x->dtype, i);
      if (to == ENG_DT_FLOAT)
        ((float *)d)[i] = x->dtype == ENG_DT_UINT64 ? (float)(uint64_t)v : (float)v;
      else if (to == ENG_DT_DOUBLE)
        ((double *)d)[i] = x->dtype == ENG_DT_UINT64 ? (double)(uint64_t)v : (double)v;
      else
        put_i(d, to, i, v);
    }
  }
  return TD_OK;
}

/* --- ZerosLike / OnesLike ------------------------------------------------ */

td_code eng_k_zeros_like(eng_kctx *c) {
  return eng_kout(c, 0, c->in[0].dtype, &c->in[0].shape); /* allocation zero-fills */
}

td_code eng_k_ones_like(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  if (!castable(x->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  td_code rc = eng_kout_raw(c, 0, x->dtype, &x->shape);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(x);
  void *d = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) {
    if (x->dtype == ENG_DT_FLOAT)
      ((float *)d)[i] = 1;
    else if (x->dtype == ENG_DT_DOUBLE)
      ((double *)d)[i] = 1;
    else
      put_i(d, x->dtype, i, 1);
  }
  return TD_OK;
}
