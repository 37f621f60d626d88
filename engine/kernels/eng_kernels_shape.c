/* Ops that restate a shape or build small index tensors: Reshape, Shape,
 * Squeeze, ExpandDims (which share their input's buffer: tensors are
 * immutable), Fill, Range and BroadcastTo. Dynamic-shape Keras graphs run
 * these on tiny int32 tensors for every request unless folded at load. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eng_kernels.h"

td_code eng_s_unknown(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  for (int i = 0; i < n->n_out; i++) out[i] = eng_shape_unknown();
  return TD_OK;
}

static td_code alias(eng_kctx *c, const eng_shape *s) {
  c->out[0] = eng_tensor_share(&c->in[0]);
  c->out[0].shape = *s;
  return TD_OK;
}

td_code eng_k_reshape(eng_kctx *c) {
  int64_t dims[ENG_MAX_RANK + 1];
  int n;
  td_code rc = eng_karg_ints(c, 1, dims, ENG_MAX_RANK, &n);
  if (rc) return rc;
  int64_t have = eng_tensor_numel(&c->in[0]), known = 1;
  int unknown = -1;
  for (int d = 0; d < n; d++) {
    if (dims[d] == -1 && unknown < 0) {
      unknown = d;
    } else if (dims[d] < 0) {
      return eng_kfail(c, TD_INVALID_ARGUMENT, "size %d of the new shape is %lld", d,
                       (long long)dims[d]);
    } else {
      if (dims[d] && known > INT64_MAX / dims[d])
        return eng_kfail(c, TD_INVALID_ARGUMENT, "the new shape is too large");
      known *= dims[d];
    }
  }
  if (unknown >= 0) {
    if (known == 0 || have % known)
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "Input to reshape is a tensor with %lld values, but the requested shape "
                       "cannot hold them",
                       (long long)have);
    dims[unknown] = have / known;
  } else if (known != have) {
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "Input to reshape is a tensor with %lld values, but the requested shape has "
                     "%lld",
                     (long long)have, (long long)known);
  }
  eng_shape s = eng_shape_make(n, dims);
  return alias(c, &s);
}

td_code eng_s_shape(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  int64_t r = in[0].rank < 0 ? -1 : in[0].rank;
  out[0] = eng_shape_make(1, &r);
  return TD_OK;
}

td_code eng_k_shape(eng_kctx *c) {
  eng_dtype dt = eng_node_attr_type(c->node, "out_type", ENG_DT_INT32);
  if (dt != ENG_DT_INT32 && dt != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "out_type must be int32 or int64");
  int64_t r = c->in[0].shape.rank;
  eng_shape s = eng_shape_make(1, &r);
  td_code rc = eng_kout_raw(c, 0, dt, &s);
  if (rc) return rc;
  void *d = eng_tensor_data(&c->out[0]);
  for (int i = 0; i < r; i++) {
    if (dt == ENG_DT_INT32)
      ((int32_t *)d)[i] = (int32_t)c->in[0].shape.dim[i];
    else
      ((int64_t *)d)[i] = c->in[0].shape.dim[i];
  }
  return TD_OK;
}

/* Squeeze: drop the listed size-1 dims (negative allowed), or all of them. */
static td_code squeeze_shape(const eng_node *nd, const eng_shape *in, eng_shape *out, char *why,
                             size_t wn) {
  int64_t ax[ENG_MAX_RANK];
  int na = eng_attr_ints(nd, "squeeze_dims", ax, ENG_MAX_RANK);
  if (!na) na = eng_attr_ints(nd, "axis", ax, ENG_MAX_RANK);
  if (na > ENG_MAX_RANK) na = ENG_MAX_RANK;
  bool drop[ENG_MAX_RANK] = {0};
  for (int k = 0; k < na; k++) {
    int64_t a = ax[k] < 0 ? ax[k] + in->rank : ax[k];
    if (a < 0 || a >= in->rank) {
      snprintf(why, wn, "squeeze axis %lld is out of range for rank %d", (long long)ax[k],
               in->rank);
      return TD_INVALID_ARGUMENT;
    }
    if (in->dim[a] >= 0 && in->dim[a] != 1) {
      snprintf(why, wn, "cannot squeeze dim %lld of size %lld", (long long)a,
               (long long)in->dim[a]);
      return TD_INVALID_ARGUMENT;
    }
    drop[a] = true;
  }
  out->rank = 0;
  for (int d = 0; d < in->rank; d++)
    if (!(na ? drop[d] : in->dim[d] == 1)) out->dim[out->rank++] = in->dim[d];
  return TD_OK;
}

td_code eng_s_squeeze(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  if (in[0].rank < 0) {
    out[0] = in[0];
    return TD_OK;
  }
  char why[160];
  td_code rc = squeeze_shape(n, &in[0], &out[0], why, sizeof why);
  if (rc) return td_err_set(err, rc, "node '%s' (Squeeze): %s", n->name, why);
  return TD_OK;
}

td_code eng_k_squeeze(eng_kctx *c) {
  eng_shape s;
  char why[160];
  td_code rc = squeeze_shape(c->node, &c->in[0].shape, &s, why, sizeof why);
  if (rc) return eng_kfail(c, rc, "%s", why);
  return alias(c, &s);
}

td_code eng_k_expand_dims(eng_kctx *c) {
  int64_t axis;
  td_code rc = eng_karg_int(c, 1, &axis);
  if (rc) return rc;
  const eng_shape *in = &c->in[0].shape;
  if (in->rank >= ENG_MAX_RANK)
    return eng_kfail(c, TD_UNIMPLEMENTED, "rank above %d", ENG_MAX_RANK);
  if (axis < -in->rank - 1 || axis > in->rank)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "dim %lld is out of range for rank %d",
                     (long long)axis, in->rank);
  int a = (int)(axis < 0 ? axis + in->rank + 1 : axis);
  eng_shape s = {.rank = in->rank + 1};
  for (int d = 0, k = 0; d < s.rank; d++) s.dim[d] = d == a ? 1 : in->dim[k++];
  return alias(c, &s);
}

/* Replicates `es` bytes of value over n elements. */
static void splat(void *dst, const void *v, size_t es, int64_t n) {
  char *d = dst;
  for (int64_t i = 0; i < n; i++) memcpy(d + (size_t)i * es, v, es);
}

td_code eng_k_fill(eng_kctx *c) {
  int64_t dims[ENG_MAX_RANK + 1];
  int n;
  td_code rc = eng_karg_ints(c, 0, dims, ENG_MAX_RANK, &n);
  if (rc) return rc;
  for (int d = 0; d < n; d++)
    if (dims[d] < 0)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "dims[%d] is negative (%lld)", d,
                       (long long)dims[d]);
  const eng_tensor *v = &c->in[1];
  size_t es = eng_dtype_size(v->dtype);
  if (eng_tensor_numel(v) != 1 || !es)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "value must be a numeric scalar");
  eng_shape s = eng_shape_make(n, dims);
  rc = eng_kout_raw(c, 0, v->dtype, &s);
  if (rc) return rc;
  splat(eng_tensor_data(&c->out[0]), eng_tensor_data(v), es, eng_tensor_numel(&c->out[0]));
  return TD_OK;
}

static double scalar_f(const eng_tensor *t) {
  const void *d = eng_tensor_data(t);
  switch (t->dtype) {
    case ENG_DT_FLOAT: return *(const float *)d;
    case ENG_DT_DOUBLE: return *(const double *)d;
    case ENG_DT_INT32: return *(const int32_t *)d;
    default: return (double)*(const int64_t *)d;
  }
}

td_code eng_k_range(eng_kctx *c) {
  eng_dtype dt = c->in[0].dtype;
  for (int k = 0; k < 3; k++) {
    if (eng_tensor_numel(&c->in[k]) != 1 || c->in[k].dtype != dt ||
        (dt != ENG_DT_FLOAT && dt != ENG_DT_DOUBLE && dt != ENG_DT_INT32 && dt != ENG_DT_INT64))
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "start, limit and delta must be scalars of one numeric type");
  }
  int64_t n;
  if (dt == ENG_DT_INT32 || dt == ENG_DT_INT64) {
    int64_t st, lim, dl;
    eng_karg_int(c, 0, &st);
    eng_karg_int(c, 1, &lim);
    eng_karg_int(c, 2, &dl);
    if (dl == 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "Requires delta != 0");
    if ((dl > 0 && st > lim) || (dl < 0 && st < lim))
      return eng_kfail(c, TD_INVALID_ARGUMENT, "start and limit do not agree with delta's sign");
    uint64_t span = dl > 0 ? (uint64_t)lim - (uint64_t)st : (uint64_t)st - (uint64_t)lim;
    uint64_t step = dl > 0 ? (uint64_t)dl : (uint64_t)0 - (uint64_t)dl;
    n = (int64_t)((span + step - 1) / step);
    eng_shape s = eng_shape_make(1, &n);
    td_code rc = eng_kout_raw(c, 0, dt, &s);
    if (rc) return rc;
    void *d = eng_tensor_data(&c->out[0]);
    for (int64_t i = 0; i < n; i++) {
      int64_t v = (int64_t)((uint64_t)st + (uint64_t)i * (uint64_t)dl);
      if (dt == ENG_DT_INT32)
        ((int32_t *)d)[i] = (int32_t)v;
      else
        ((int64_t *)d)[i] = v;
    }
    return TD_OK;
  }
  double st = scalar_f(&c->in[0]), lim = scalar_f(&c->in[1]), dl = scalar_f(&c->in[2]);
  if (dl == 0 || st != st || lim != lim || dl != dl)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Requires delta != 0 and finite bounds");
  if ((dl > 0 && st > lim) || (dl < 0 && st < lim))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "start and limit do not agree with delta's sign");
  double cnt = ceil(fabs((lim - st) / dl));
  if (cnt > 1e12) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "range of %g elements", cnt);
  n = (int64_t)cnt;
  eng_shape s = eng_shape_make(1, &n);
  td_code rc = eng_kout_raw(c, 0, dt, &s);
  if (rc) return rc;
  void *d = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) {
    if (dt == ENG_DT_FLOAT)
      ((float *)d)[i] = (float)st + (float)i * (float)dl;
    else
      ((double *)d)[i] = st + (double)i * dl;
  }
  return TD_OK;
}

td_code eng_k_broadcast_to(eng_kctx *c) {
  int64_t dims[ENG_MAX_RANK + 1];
  int n;
  td_code rc = eng_karg_ints(c, 1, dims, ENG_MAX_RANK, &n);
  if (rc) return rc;
  const eng_tensor *x = &c->in[0];
  size_t es = eng_dtype_size(x->dtype);
  if (!es) return eng_kfail(c, TD_UNIMPLEMENTED, "%s input", eng_dtype_name(x->dtype));
  for (int d = 0; d < n; d++)
    if (dims[d] < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "negative size in shape");
  eng_shape want = eng_shape_make(n, dims), s;
  rc = eng_broadcast_shape(&x->shape, &want, &s, c->err);
  if (rc || !eng_shape_equal(&s, &want)) {
    char a[128], b[128];
    return eng_kfail(c, TD_INVALID_ARGUMENT, "cannot broadcast %s to %s",
                     eng_shape_str(&x->shape, a, sizeof a), eng_shape_str(&want, b, sizeof b));
  }
  if (eng_shape_equal(&x->shape, &want)) return alias(c, &want);
  rc = eng_kout_raw(c, 0, x->dtype, &want);
  if (rc) return rc;
  const eng_shape *in[1] = {&x->shape};
  eng_bcast it;
  eng_bcast_init(&it, &want, 1, in);
  const char *src = eng_tensor_data(x);
  char *dst = eng_tensor_data(&c->out[0]);
  int64_t total = eng_tensor_numel(&c->out[0]);
  for (int64_t i = 0; i < total; i++, eng_bcast_next(&it))
    memcpy(dst + (size_t)i * es, src + (size_t)it.off[0] * es, es);
  return TD_OK;
}
