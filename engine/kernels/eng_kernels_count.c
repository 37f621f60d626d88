/* Counting: Size (the element count, as int32 or int64) and DenseBincount
 * (Keras CategoryEncoding's count / multi-hot): per row of a rank-1 or
 * rank-2 int input, how often each value in [0, size) occurs, or the sum
 * of the matching weights, or 1 where it occurs (binary_output). Values at
 * or above size are dropped and negative ones are INVALID_ARGUMENT, as
 * TensorFlow's CPU kernel does. */
#include <string.h>

#include "eng_kernels.h"

td_code eng_k_size(eng_kctx *c) {
  eng_dtype ot = eng_node_attr_type(c->node, "out_type", ENG_DT_INT32);
  if (ot != ENG_DT_INT32 && ot != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "out_type %s", eng_dtype_name(ot));
  eng_shape s = eng_shape_scalar();
  td_code rc = eng_kout_raw(c, 0, ot, &s);
  if (rc) return rc;
  int64_t n = eng_shape_numel(&c->in[0].shape);
  if (ot == ENG_DT_INT32) {
    if (n > INT32_MAX)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "size %lld exceeds int32", (long long)n);
    *(int32_t *)eng_tensor_data(&c->out[0]) = (int32_t)n;
  } else {
    *(int64_t *)eng_tensor_data(&c->out[0]) = n;
  }
  return TD_OK;
}

static int64_t int_at(const eng_tensor *t, int64_t i) {
  return t->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(t))[i]
                                  : ((const int64_t *)eng_tensor_data(t))[i];
}

static double num_at(const eng_tensor *t, int64_t i) {
  switch (t->dtype) {
    case ENG_DT_FLOAT:
      return ((const float *)eng_tensor_data(t))[i];
    case ENG_DT_DOUBLE:
      return ((const double *)eng_tensor_data(t))[i];
    default:
      return (double)int_at(t, i);
  }
}

static void put(eng_tensor *t, int64_t i, double v) {
  switch (t->dtype) {
    case ENG_DT_FLOAT:
      ((float *)eng_tensor_data(t))[i] = (float)v;
      break;
    case ENG_DT_DOUBLE:
      ((double *)eng_tensor_data(t))[i] = v;
      break;
    case ENG_DT_INT32:
      ((int32_t *)eng_tensor_data(t))[i] = (int32_t)v;
      break;
    default:
      ((int64_t *)eng_tensor_data(t))[i] = (int64_t)v;
      break;
  }
}

td_code eng_k_dense_bincount(eng_kctx *c) {
  const eng_tensor *x = &c->in[0], *w = &c->in[2];
  int64_t size;
  td_code rc = eng_karg_int(c, 1, &size);
  if (rc) return rc;
  if (x->dtype != ENG_DT_INT32 && x->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input", eng_dtype_name(x->dtype));
  if (w->dtype != ENG_DT_FLOAT && w->dtype != ENG_DT_DOUBLE && w->dtype != ENG_DT_INT32 &&
      w->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s weights", eng_dtype_name(w->dtype));
  if (size < 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "size (%lld) must be non-negative", (long long)size);
  int r = x->shape.rank;
  if (r > 2)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Shape must be at most rank 2 but is rank %d", r);
  bool weighted = eng_tensor_numel(w) > 0,
       binary = eng_node_attr_bool(c->node, "binary_output", false);
  if (weighted && !eng_shape_equal(&w->shape, &x->shape))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input and weights must have the same shape");
  int64_t rows = r == 2 ? x->shape.dim[0] : 1, len = r == 0 ? 1 : x->shape.dim[r - 1];
  eng_shape s = r == 2 ? eng_shape_make(2, (int64_t[]){rows, size}) : eng_shape_make(1, &size);
  if ((rc = eng_kout(c, 0, w->dtype, &s))) return rc;
  for (int64_t i = 0; i < rows * len; i++)
    if (int_at(x, i) < 0)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "Input arr must be non-negative!");
  for (int64_t i = 0; i < rows * len; i++) {
    int64_t v = int_at(x, i), at = (i / len) * size + v;
    if (v >= size) continue;
    double cur = num_at(&c->out[0], at);
    put(&c->out[0], at, binary ? 1 : cur + (weighted ? num_at(w, i) : 1));
  }
  return TD_OK;
}
