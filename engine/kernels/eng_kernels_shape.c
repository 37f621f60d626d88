/* Ops that restate a shape or build small index tensors: Reshape, Shape,
 * Squeeze, ExpandDims (which share their input's buffer: tensors are
 * immutable), Fill, Range, LinSpace, BroadcastTo and BroadcastArgs.
 * Dynamic-shape Keras graphs run these on tiny int32 tensors for every
 * request unless folded at load.
 *
 * LinSpace computes in its own type, as TensorFlow's CPU kernel does: one
 * step (stop - start) / (num - 1), element i = start + step * i, and the
 * last element stop itself, so the end point is exact. */
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
  /* A strided copy whose source strides are 0 on the broadcast dims (x's
   * dims aligned to the right, missing ones leading). */
  int64_t xst[ENG_MAX_RANK], sst[ENG_MAX_RANK], dst[ENG_MAX_RANK];
  eng_contig_strides(&x->shape, xst);
  eng_contig_strides(&want, dst);
  for (int d = 0; d < want.rank; d++) {
    int xd = d - (want.rank - x->shape.rank);
    sst[d] = xd < 0 || x->shape.dim[xd] == 1 ? 0 : xst[xd];
  }
  eng_copy_nd(want.rank, want.dim, es, eng_tensor_data(x), sst, eng_tensor_data(&c->out[0]), dst);
  return TD_OK;
}

static int64_t int_at(const eng_tensor *t, int64_t i) {
  return t->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(t))[i]
                                  : ((const int64_t *)eng_tensor_data(t))[i];
}

/* "[2,3]", cut short with "..." when the buffer fills. */
static const char *ints_str(const eng_tensor *t, char *buf, size_t cap) {
  size_t k = 0;
  int64_t n = eng_tensor_numel(t);
  buf[k++] = '[';
  for (int64_t i = 0; i < n && k + 24 < cap; i++)
    k += (size_t)snprintf(buf + k, cap - k, "%s%lld", i ? "," : "", (long long)int_at(t, i));
  if (k + 24 >= cap) k += (size_t)snprintf(buf + k, cap - k, "...");
  snprintf(buf + k, cap - k, "]");
  return buf;
}

/* The broadcast of the shape vectors s0 and s1, aligned on the right: equal
 * sizes stay, a 1 takes the other side's size (0 included), a missing
 * leading dim counts as 1. Checked in full before the output exists. */
td_code eng_k_broadcast_args(eng_kctx *c) {
  const eng_tensor *s0 = &c->in[0], *s1 = &c->in[1];
  eng_dtype dt = s0->dtype;
  if ((dt != ENG_DT_INT32 && dt != ENG_DT_INT64) || s1->dtype != dt)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "s0 and s1 must both be int32 or both int64");
  for (int k = 0; k < 2; k++)
    if (c->in[k].shape.rank != 1) {
      char sb[128];
      return eng_kfail(c, TD_INVALID_ARGUMENT, "In[%d] must be a vector, got shape %s", k,
                       eng_shape_str(&c->in[k].shape, sb, sizeof sb));
    }
  int64_t n0 = eng_tensor_numel(s0), n1 = eng_tensor_numel(s1), n = n0 > n1 ? n0 : n1;
  for (int64_t i = 0; i < n; i++) {
    int64_t a = i < n0 ? int_at(s0, n0 - 1 - i) : 1, b = i < n1 ? int_at(s1, n1 - 1 - i) : 1;
    if (a != b && a != 1 && b != 1) {
      char x[160], y[160];
      return eng_kfail(c, TD_INVALID_ARGUMENT, "Incompatible shapes: %s vs. %s",
                       ints_str(s0, x, sizeof x), ints_str(s1, y, sizeof y));
    }
  }
  eng_shape s = eng_shape_make(1, &n);
  td_code rc = eng_kout_raw(c, 0, dt, &s);
  if (rc) return rc;
  void *d = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) {
    int64_t a = i < n0 ? int_at(s0, n0 - 1 - i) : 1, b = i < n1 ? int_at(s1, n1 - 1 - i) : 1;
    int64_t v = a == 1 ? b : a;
    if (dt == ENG_DT_INT32)
      ((int32_t *)d)[n - 1 - i] = (int32_t)v;
    else
      ((int64_t *)d)[n - 1 - i] = v;
  }
  return TD_OK;
}

td_code eng_k_lin_space(eng_kctx *c) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  eng_dtype dt = a->dtype;
  if ((dt != ENG_DT_FLOAT && dt != ENG_DT_DOUBLE) || b->dtype != dt)
    return eng_kfail(c, TD_UNIMPLEMENTED, "start and stop must both be float32 or both float64");
  static const char *what[3] = {"start", "stop", "num"};
  for (int k = 0; k < 3; k++)
    if (c->in[k].shape.rank != 0) {
      char sb[128];
      return eng_kfail(c, TD_INVALID_ARGUMENT, "%s must be a scalar, not shape %s", what[k],
                       eng_shape_str(&c->in[k].shape, sb, sizeof sb));
    }
  int64_t num;
  td_code rc = eng_karg_int(c, 2, &num);
  if (rc) return rc;
  if (num <= 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "Requires num > 0: %lld", (long long)num);
  eng_shape s = eng_shape_make(1, &num);
  rc = eng_kout_raw(c, 0, dt, &s);
  if (rc) return rc;
  void *d = eng_tensor_data(&c->out[0]);
  if (dt == ENG_DT_FLOAT) {
    float st = *(const float *)eng_tensor_data(a), sp = *(const float *)eng_tensor_data(b);
    float *y = d;
    if (num > 1) {
      float step = (sp - st) / (float)(num - 1);
      for (int64_t i = 0; i < num - 1; i++) y[i] = st + step * (float)i;
    }
    y[num - 1] = num > 1 ? sp : st;
  } else {
    double st = *(const double *)eng_tensor_data(a), sp = *(const double *)eng_tensor_data(b);
    double *y = d;
    if (num > 1) {
      double step = (sp - st) / (double)(num - 1);
      for (int64_t i = 0; i < num - 1; i++) y[i] = st + step * (double)i;
    }
    y[num - 1] = num > 1 ? sp : st;
  }
  return TD_OK;
}
