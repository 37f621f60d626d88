/* Ops that pick elements by position: ArgMax / ArgMin (the first index of
 * the extreme, as TensorFlow), TopKV2 (along the last axis; equal values
 * keep the lower index first), Where with one argument (coordinates of the
 * true / non-zero elements in row-major order), GatherNd, ReverseV2, Roll
 * and MatrixBandPart. The element-moving ones copy fixed-size elements of
 * any dtype (strings go through eng_kmove_strings). Out-of-range indices
 * are INVALID_ARGUMENT in TensorFlow's words, never a read outside. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"

/* Value i of a numeric tensor as a double (argmax over any real type). */
static double num_at(const eng_tensor *t, int64_t i) {
  const void *d = eng_tensor_data(t);
  switch (t->dtype) {
    case ENG_DT_FLOAT:
      return ((const float *)d)[i];
    case ENG_DT_DOUBLE:
      return ((const double *)d)[i];
    case ENG_DT_INT32:
      return ((const int32_t *)d)[i];
    case ENG_DT_INT64:
      return (double)((const int64_t *)d)[i];
    case ENG_DT_UINT8:
      return ((const uint8_t *)d)[i];
    case ENG_DT_INT8:
      return ((const int8_t *)d)[i];
    case ENG_DT_INT16:
      return ((const int16_t *)d)[i];
    case ENG_DT_BOOL:
      return ((const uint8_t *)d)[i] != 0;
    default:
      return 0;
  }
}

static bool numeric(eng_dtype dt) {
  return dt == ENG_DT_FLOAT || dt == ENG_DT_DOUBLE || dt == ENG_DT_INT32 || dt == ENG_DT_INT64 ||
         dt == ENG_DT_UINT8 || dt == ENG_DT_INT8 || dt == ENG_DT_INT16 || dt == ENG_DT_BOOL;
}

static td_code arg_extreme(eng_kctx *c, bool is_max) {
  const eng_tensor *x = &c->in[0];
  int64_t axis;
  int a;
  td_code rc = eng_karg_int(c, 1, &axis);
  if (!rc) rc = eng_kaxis(c, axis, x->shape.rank, &a);
  if (rc) return rc;
  if (!numeric(x->dtype) || x->dtype == ENG_DT_BOOL)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  int64_t len = x->shape.dim[a];
  if (len == 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Reduction axis %d is empty in shape [...]", a);
  eng_dtype ot = eng_node_attr_type(c->node, "output_type", ENG_DT_INT64);
  if (ot != ENG_DT_INT32 && ot != ENG_DT_INT64)
    return eng_kfail(c, TD_UNIMPLEMENTED, "output_type %s", eng_dtype_name(ot));
  eng_shape s = {.rank = x->shape.rank - 1};
  int64_t outer = 1, inner = 1;
  for (int d = 0, k = 0; d < x->shape.rank; d++) {
    if (d == a) continue;
    s.dim[k++] = x->shape.dim[d];
    if (d < a)
      outer *= x->shape.dim[d];
    else
      inner *= x->shape.dim[d];
  }
  if ((rc = eng_kout_raw(c, 0, ot, &s))) return rc;
  void *z = eng_tensor_data(&c->out[0]);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      int64_t best = 0, base = o * len * inner + i;
      double bv = num_at(x, base);
      for (int64_t k = 1; k < len; k++) {
        double v = num_at(x, base + k * inner);
        /* NaN never wins unless it came first (Eigen's comparisons). */
        if (is_max ? v > bv : v < bv) {
          bv = v;
          best = k;
        }
      }
      if (ot == ENG_DT_INT32)
        ((int32_t *)z)[o * inner + i] = (int32_t)best;
      else
        ((int64_t *)z)[o * inner + i] = best;
    }
  return TD_OK;
}

td_code eng_k_arg_max(eng_kctx *c) { return arg_extreme(c, true); }
td_code eng_k_arg_min(eng_kctx *c) { return arg_extreme(c, false); }

td_code eng_k_top_k(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  int64_t k;
  td_code rc = eng_karg_int(c, 1, &k);
  if (rc) return rc;
  if (!numeric(x->dtype) || x->dtype == ENG_DT_BOOL)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  int r = x->shape.rank;
  if (r < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be at least rank 1");
  int64_t len = x->shape.dim[r - 1];
  if (k < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "Need k >= 0, got %lld", (long long)k);
  if (k > len)
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "input must have at least k columns. Had %lld, needed %lld", (long long)len,
                     (long long)k);
  eng_shape s = x->shape;
  s.dim[r - 1] = k;
  if ((rc = eng_kout_raw(c, 0, x->dtype, &s)) || (rc = eng_kout_raw(c, 1, ENG_DT_INT32, &s)))
    return rc;
  int64_t rows = len ? eng_tensor_numel(x) / len : 0;
  size_t es = eng_dtype_size(x->dtype);
  int64_t *top = malloc(sizeof *top * (size_t)(k + 1));
  if (!top) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  const char *src = eng_tensor_data(x);
  char *vals = eng_tensor_data(&c->out[0]);
  int32_t *idx = eng_tensor_data(&c->out[1]);
  for (int64_t row = 0; row < rows && k; row++) {
    int64_t n = 0, base = row * len;
    /* Insertion into the k best so far, in index order: an equal value
     * later in the row goes after the earlier one. */
    for (int64_t j = 0; j < len; j++) {
      double v = num_at(x, base + j);
      if (n == k && !(v > num_at(x, base + top[k - 1]))) continue;
      int64_t at = n < k ? n++ : k - 1;
      while (at > 0 && v > num_at(x, base + top[at - 1])) {
        top[at] = top[at - 1];
        at--;
      }
      top[at] = j;
    }
    for (int64_t j = 0; j < k; j++) {
      memcpy(vals + (size_t)(row * k + j) * es, src + (size_t)(base + top[j]) * es, es);
      idx[row * k + j] = (int32_t)top[j];
    }
  }
  free(top);
  return TD_OK;
}

td_code eng_k_where(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  if (!numeric(x->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  int64_t n = eng_tensor_numel(x), count = 0;
  for (int64_t i = 0; i < n; i++) count += num_at(x, i) != 0;
  int r = x->shape.rank;
  eng_shape s = eng_shape_make(2, (int64_t[]){count, r});
  td_code rc = eng_kout_raw(c, 0, ENG_DT_INT64, &s);
  if (rc) return rc;
  int64_t *z = eng_tensor_data(&c->out[0]), st[ENG_MAX_RANK];
  eng_contig_strides(&x->shape, st);
  for (int64_t i = 0; i < n; i++) {
    if (num_at(x, i) == 0) continue;
    for (int d = 0; d < r; d++) *z++ = (i / st[d]) % x->shape.dim[d];
  }
  return TD_OK;
}

td_code eng_k_gather_nd(eng_kctx *c) {
  const eng_tensor *p = &c->in[0], *ix = &c->in[1];
  size_t es = eng_dtype_size(p->dtype);
  if (!es) return eng_kfail(c, TD_UNIMPLEMENTED, "%s params", eng_dtype_name(p->dtype));
  if (ix->dtype != ENG_DT_INT32 && ix->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "indices must be int32 or int64");
  if (ix->shape.rank < 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "indices must be at least a vector");
  int q = (int)ix->shape.dim[ix->shape.rank - 1];
  if (q > p->shape.rank)
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "index innermost dimension length must be <= params "
                     "rank; saw: %d vs. %d",
                     q, p->shape.rank);
  eng_shape s = {.rank = ix->shape.rank - 1 + p->shape.rank - q};
  if (s.rank > ENG_MAX_RANK) return eng_kfail(c, TD_UNIMPLEMENTED, "rank above %d", ENG_MAX_RANK);
  for (int d = 0; d < ix->shape.rank - 1; d++) s.dim[d] = ix->shape.dim[d];
  int64_t slice = 1;
  for (int d = q; d < p->shape.rank; d++) {
    s.dim[ix->shape.rank - 1 + d - q] = p->shape.dim[d];
    slice *= p->shape.dim[d];
  }
  td_code rc = eng_kout_raw(c, 0, p->dtype, &s);
  if (rc) return rc;
  int64_t st[ENG_MAX_RANK],
      nsl = q ? eng_tensor_numel(ix) / q : eng_shape_numel(&s) / (slice ? slice : 1);
  eng_contig_strides(&p->shape, st);
  const char *src = eng_tensor_data(p);
  char *dst = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < nsl; i++) {
    int64_t off = 0;
    for (int d = 0; d < q; d++) {
      int64_t v = ix->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(ix))[i * q + d]
                                            : ((const int64_t *)eng_tensor_data(ix))[i * q + d];
      if (v < 0 || v >= p->shape.dim[d])
        return eng_kfail(c, TD_INVALID_ARGUMENT,
                         "indices[%lld] = %lld does not index into param "
                         "dimension %d of size %lld",
                         (long long)i, (long long)v, d, (long long)p->shape.dim[d]);
      off += v * st[d];
    }
    memcpy(dst + (size_t)(i * slice) * es, src + (size_t)off * es, (size_t)slice * es);
  }
  return TD_OK;
}

/* The axes named by input i (scalar or vector), normalised, into on[]. */
static td_code axes_of(eng_kctx *c, int i, int rank, bool *on) {
  int64_t ax[ENG_MAX_RANK];
  int n;
  td_code rc = eng_karg_ints(c, i, ax, ENG_MAX_RANK, &n);
  for (int d = 0; d < rank; d++) on[d] = false;
  for (int k = 0; !rc && k < n; k++) {
    int a;
    if ((rc = eng_kaxis(c, ax[k], rank, &a))) break;
    if (on[a]) return eng_kfail(c, TD_INVALID_ARGUMENT, "axis %d specified more than once", a);
    on[a] = true;
  }
  return rc;
}

td_code eng_k_reverse_v2(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  size_t es = eng_dtype_size(x->dtype);
  if (!es) return eng_kfail(c, TD_UNIMPLEMENTED, "%s input", eng_dtype_name(x->dtype));
  bool on[ENG_MAX_RANK];
  int r = x->shape.rank;
  td_code rc = axes_of(c, 1, r, on);
  if (!rc) rc = eng_kout_raw(c, 0, x->dtype, &x->shape);
  if (rc || !eng_tensor_numel(x)) return rc;
  int64_t st[ENG_MAX_RANK], sst[ENG_MAX_RANK], off = 0;
  eng_contig_strides(&x->shape, st);
  for (int d = 0; d < r; d++) {
    sst[d] = on[d] ? -st[d] : st[d];
    if (on[d]) off += (x->shape.dim[d] - 1) * st[d];
  }
  eng_copy_nd(r, x->shape.dim, es, (const char *)eng_tensor_data(x) + (size_t)off * es, sst,
              eng_tensor_data(&c->out[0]), st);
  return TD_OK;
}

td_code eng_k_roll(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  size_t es = eng_dtype_size(x->dtype);
  if (!es) return eng_kfail(c, TD_UNIMPLEMENTED, "%s input", eng_dtype_name(x->dtype));
  int64_t sh[ENG_MAX_RANK], ax[ENG_MAX_RANK];
  int ns, na, r = x->shape.rank;
  td_code rc = eng_karg_ints(c, 1, sh, ENG_MAX_RANK, &ns);
  if (!rc) rc = eng_karg_ints(c, 2, ax, ENG_MAX_RANK, &na);
  if (rc) return rc;
  if (ns != na) return eng_kfail(c, TD_INVALID_ARGUMENT, "shift and axis must have the same size");
  int64_t total[ENG_MAX_RANK] = {0};
  for (int k = 0; k < na; k++) {
    int a;
    if ((rc = eng_kaxis(c, ax[k], r, &a))) return rc;
    total[a] += sh[k]; /* shifts along one axis add up, as in TensorFlow */
  }
  if ((rc = eng_kout_raw(c, 0, x->dtype, &x->shape))) return rc;
  int64_t n = eng_tensor_numel(x), st[ENG_MAX_RANK];
  eng_contig_strides(&x->shape, st);
  for (int d = 0; d < r; d++)
    if (x->shape.dim[d])
      total[d] = ((total[d] % x->shape.dim[d]) + x->shape.dim[d]) % x->shape.dim[d];
  const char *src = eng_tensor_data(x);
  char *dst = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) {
    int64_t from = 0;
    for (int d = 0; d < r; d++) {
      int64_t k = (i / st[d]) % x->shape.dim[d] - total[d];
      if (k < 0) k += x->shape.dim[d];
      from += k * st[d];
    }
    memcpy(dst + (size_t)i * es, src + (size_t)from * es, es);
  }
  return TD_OK;
}

td_code eng_k_matrix_band_part(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  size_t es = eng_dtype_size(x->dtype);
  if (!es) return eng_kfail(c, TD_UNIMPLEMENTED, "%s input", eng_dtype_name(x->dtype));
  int r = x->shape.rank;
  if (r < 2)
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "input must be at least 2-dim, received shape with rank %d", r);
  int64_t lower, upper;
  td_code rc = eng_karg_int(c, 1, &lower);
  if (!rc) rc = eng_karg_int(c, 2, &upper);
  if (rc) return rc;
  int64_t m = x->shape.dim[r - 2], nn = x->shape.dim[r - 1];
  if (lower > m)
    return eng_kfail(
        c, TD_INVALID_ARGUMENT,
        "num_lower must be negative or less or equal to number of rows (%lld) got: %lld",
        (long long)m, (long long)lower);
  if (upper > nn)
    return eng_kfail(
        c, TD_INVALID_ARGUMENT,
        "num_upper must be negative or less or equal to number of columns (%lld) got: %lld",
        (long long)nn, (long long)upper);
  if ((rc = eng_kout(c, 0, x->dtype, &x->shape))) return rc;
  int64_t mats = m > 0 && nn > 0 ? eng_tensor_numel(x) / (m * nn) : 0;
  const char *src = eng_tensor_data(x);
  char *dst = eng_tensor_data(&c->out[0]);
  for (int64_t b = 0; b < mats; b++)
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < nn; j++)
        if ((lower < 0 || i - j <= lower) && (upper < 0 || j - i <= upper)) {
          size_t at = (size_t)((b * m + i) * nn + j) * es;
          memcpy(dst + at, src + at, es);
        }
  return TD_OK;
}

td_code eng_k_gather_nd_any(eng_kctx *c) { return eng_kmove_strings(c, eng_k_gather_nd); }
td_code eng_k_reverse_v2_any(eng_kctx *c) { return eng_kmove_strings(c, eng_k_reverse_v2); }
td_code eng_k_roll_any(eng_kctx *c) { return eng_kmove_strings(c, eng_k_roll); }
