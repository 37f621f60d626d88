/* Ops that move elements without arithmetic: StridedSlice, Slice, Pack,
 * Unpack, ConcatV2, GatherV2, Transpose, Pad/PadV2 and Tile. They work on
 * any fixed-size dtype by element size. Most reduce to eng_copy_nd
 * (eng_kernels_copy.c), an n-dimensional copy with element strides on both
 * sides. StridedSlice follows TensorFlow's mask rules
 * (tensorflow/core/util/strided_slice_op.cc): an implicit trailing
 * ellipsis, new axes, shrink axes, and clamping of masked/out-of-range
 * bounds. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "eng_kernels.h"

static td_code want_fixed(eng_kctx *c, int i) {
  if (!eng_dtype_size(c->in[i].dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input %d is not supported",
                     eng_dtype_name(c->in[i].dtype), i);
  return TD_OK;
}

/* --- StridedSlice ---------------------------------------------------------- */

#define NEW_AXIS (-1)
#define SHRINK_AXIS (-2)

td_code eng_strided_slice_plan(eng_kctx *c, eng_slice *sl) {
  const eng_tensor *x = &c->in[0];
  td_code rc = want_fixed(c, 0);
  if (rc) return rc;
  int64_t sb[ENG_MAX_RANK * 2], se[ENG_MAX_RANK * 2], ss[ENG_MAX_RANK * 2];
  int nb, ne, ns;
  if ((rc = eng_karg_ints(c, 1, sb, ENG_MAX_RANK * 2 - 1, &nb)) ||
      (rc = eng_karg_ints(c, 2, se, ENG_MAX_RANK * 2 - 1, &ne)) ||
      (rc = eng_karg_ints(c, 3, ss, ENG_MAX_RANK * 2 - 1, &ns)))
    return rc;
  if (nb != ne || nb != ns)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "begin, end and strides differ in length");
  int64_t bmask = eng_node_attr_int(c->node, "begin_mask", 0);
  int64_t emask = eng_node_attr_int(c->node, "end_mask", 0);
  int64_t ellipsis = eng_node_attr_int(c->node, "ellipsis_mask", 0);
  int64_t newax = eng_node_attr_int(c->node, "new_axis_mask", 0);
  int64_t shrink = eng_node_attr_int(c->node, "shrink_axis_mask", 0);
  if (ellipsis & (ellipsis - 1))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Multiple ellipses in slice spec not allowed");
  int sparse = nb;
  if (!ellipsis) { /* an implicit ellipsis at the end */
    ellipsis = (int64_t)1 << sparse;
    sb[sparse] = se[sparse] = 0;
    ss[sparse] = 1;
    sparse++;
  }
  int after = 0; /* new axes after the ellipsis */
  bool seen = false;
  for (int i = 0; i < sparse; i++) {
    if (seen && (newax >> i & 1)) after++;
    if (ellipsis >> i & 1) seen = true;
  }
  int rank = x->shape.rank;
  int64_t db[ENG_MAX_RANK], de[ENG_MAX_RANK], ds[ENG_MAX_RANK];
  bool dbm[ENG_MAX_RANK] = {0}, dem[ENG_MAX_RANK] = {0}, dshr[ENG_MAX_RANK] = {0};
  int gather[ENG_MAX_RANK * 2 + 2], ng = 0, full = 0;
  for (int i = 0; i < sparse; i++) {
    if (ellipsis >> i & 1) {
      int next = rank - (sparse - i) + 1 + after;
      if (next > rank) next = rank;
      for (; full < next; full++) {
        db[full] = de[full] = 0;
        ds[full] = 1;
        dbm[full] = dem[full] = true;
        gather[ng++] = full;
      }
    } else if (newax >> i & 1) {
      gather[ng++] = NEW_AXIS;
    } else {
      if (full >= rank)
        return eng_kfail(c, TD_INVALID_ARGUMENT,
                         "Index out of range using input dim %d; input has only %d dims", full,
                         rank);
      db[full] = sb[i];
      de[full] = se[i];
      ds[full] = ss[i];
      dbm[full] = bmask >> i & 1;
      dem[full] = emask >> i & 1;
      if (shrink >> i & 1) {
        gather[ng++] = SHRINK_AXIS;
        dshr[full] = true;
      } else {
        gather[ng++] = full;
      }
      full++;
    }
    if (ng > ENG_MAX_RANK * 2) return eng_kfail(c, TD_INVALID_ARGUMENT, "slice spec too long");
  }
  int64_t size[ENG_MAX_RANK], st_in[ENG_MAX_RANK], in_st[ENG_MAX_RANK];
  eng_contig_strides(&x->shape, in_st);
  int64_t off = 0;
  for (int d = 0; d < rank; d++) {
    int64_t dim = x->shape.dim[d], stride = ds[d];
    if (stride == 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "strides[%d] must be non-zero", d);
    int64_t b, e;
    if (dshr[d]) {
      b = db[d] < 0 ? dim + db[d] : db[d];
      if (b < 0 || b >= dim)
        return eng_kfail(c, TD_INVALID_ARGUMENT, "slice index %lld of dimension %d out of bounds.",
                         (long long)db[d], d);
      size[d] = 1;
      stride = 1;
    } else {
      int64_t lo = stride > 0 ? 0 : -1, hi = stride > 0 ? dim : dim - 1;
      if (dbm[d]) {
        b = stride > 0 ? lo : hi;
      } else {
        b = db[d] < 0 ? dim + db[d] : db[d];
        b = b < lo ? lo : b > hi ? hi : b;
      }
      if (dem[d]) {
        e = stride > 0 ? hi : lo;
      } else {
        e = de[d] < 0 ? dim + de[d] : de[d];
        e = e < lo ? lo : e > hi ? hi : e;
      }
      int64_t len = e - b;
      if (len == 0 || ((len < 0) != (stride < 0)))
        size[d] = 0;
      else
        size[d] = len / stride + (len % stride != 0);
    }
    st_in[d] = in_st[d] * stride;
    if (size[d] > 0) off += b * in_st[d];
  }
  eng_shape out = {.rank = 0};
  for (int k = 0; k < ng; k++) {
    if (gather[k] == SHRINK_AXIS) continue;
    if (out.rank == ENG_MAX_RANK)
      return eng_kfail(c, TD_UNIMPLEMENTED, "result rank above %d", ENG_MAX_RANK);
    out.dim[out.rank++] = gather[k] == NEW_AXIS ? 1 : size[gather[k]];
  }
  sl->rank = rank;
  sl->offset = off;
  for (int d = 0; d < rank; d++) {
    sl->size[d] = size[d];
    sl->src_stride[d] = st_in[d];
  }
  sl->out = out;
  return TD_OK;
}

td_code eng_k_strided_slice(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  eng_slice sl;
  td_code rc = eng_strided_slice_plan(c, &sl);
  if (!rc) rc = eng_kout_raw(c, 0, x->dtype, &sl.out);
  if (rc) return rc;
  size_t es = eng_dtype_size(x->dtype);
  eng_shape dense = eng_shape_make(sl.rank, sl.size);
  int64_t dst_st[ENG_MAX_RANK];
  eng_contig_strides(&dense, dst_st);
  eng_copy_nd(sl.rank, sl.size, es, (const char *)eng_tensor_data(x) + (size_t)sl.offset * es,
              sl.src_stride, eng_tensor_data(&c->out[0]), dst_st);
  return TD_OK;
}

/* --- Slice ------------------------------------------------------------------ */

td_code eng_k_slice(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  int64_t b[ENG_MAX_RANK], sz[ENG_MAX_RANK];
  int nb, ns;
  td_code rc = want_fixed(c, 0);
  if (!rc) rc = eng_karg_ints(c, 1, b, ENG_MAX_RANK, &nb);
  if (!rc) rc = eng_karg_ints(c, 2, sz, ENG_MAX_RANK, &ns);
  if (rc) return rc;
  int rank = x->shape.rank;
  if (nb != rank || ns != rank)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "begin and size must have %d elements", rank);
  int64_t in_st[ENG_MAX_RANK], off = 0;
  eng_contig_strides(&x->shape, in_st);
  for (int d = 0; d < rank; d++) {
    int64_t dim = x->shape.dim[d];
    if (sz[d] == -1) sz[d] = dim - b[d];
    if (b[d] < 0 || sz[d] < 0 || b[d] > dim || sz[d] > dim - b[d])
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "Expected begin[%d] = %lld and size[%d] = %lld to fit dimension %lld", d,
                       (long long)b[d], d, (long long)sz[d], (long long)dim);
    off += b[d] * in_st[d];
  }
  eng_shape out = eng_shape_make(rank, sz);
  rc = eng_kout_raw(c, 0, x->dtype, &out);
  if (rc) return rc;
  int64_t dst_st[ENG_MAX_RANK];
  eng_contig_strides(&out, dst_st);
  size_t es = eng_dtype_size(x->dtype);
  if (eng_shape_numel(&out) > 0)
    eng_copy_nd(rank, sz, es, (const char *)eng_tensor_data(x) + (size_t)off * es, in_st,
            eng_tensor_data(&c->out[0]), dst_st);
  return TD_OK;
}

/* --- Pack / Unpack / ConcatV2 -------------------------------------------------- */

td_code eng_s_pack(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  if (!n->n_in || in[0].rank < 0 || in[0].rank >= ENG_MAX_RANK) {
    out[0] = eng_shape_unknown();
    return TD_OK;
  }
  int64_t axis = eng_node_attr_int(n, "axis", 0);
  int r = in[0].rank + 1;
  if (axis < -r || axis >= r)
    return td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (Pack): axis %lld out of range",
                      n->name, (long long)axis);
  int a = (int)(axis < 0 ? axis + r : axis);
  out[0].rank = r;
  for (int d = 0, k = 0; d < r; d++) out[0].dim[d] = d == a ? n->n_in : in[0].dim[k++];
  return TD_OK;
}

td_code eng_k_pack(eng_kctx *c) {
  if (c->n_in < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "needs at least one input");
  const eng_tensor *x = &c->in[0];
  td_code rc = want_fixed(c, 0);
  if (rc) return rc;
  for (int k = 1; k < c->n_in; k++)
    if (c->in[k].dtype != x->dtype || !eng_shape_equal(&c->in[k].shape, &x->shape)) {
      char a[128], b[128];
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "Shapes of all inputs must match: values[0].shape = %s != values[%d].shape "
                       "= %s",
                       eng_shape_str(&x->shape, a, sizeof a), k,
                       eng_shape_str(&c->in[k].shape, b, sizeof b));
    }
  int r = x->shape.rank + 1, a;
  if (r > ENG_MAX_RANK) return eng_kfail(c, TD_UNIMPLEMENTED, "rank above %d", ENG_MAX_RANK);
  rc = eng_kaxis(c, eng_node_attr_int(c->node, "axis", 0), r, &a);
  if (rc) return rc;
  eng_shape s = {.rank = r};
  for (int d = 0, k = 0; d < r; d++) s.dim[d] = d == a ? c->n_in : x->shape.dim[k++];
  rc = eng_kout_raw(c, 0, x->dtype, &s);
  if (rc) return rc;
  size_t es = eng_dtype_size(x->dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; d++) outer *= x->shape.dim[d];
  for (int d = a; d < x->shape.rank; d++) inner *= x->shape.dim[d];
  char *dst = eng_tensor_data(&c->out[0]);
  size_t chunk = (size_t)inner * es;
  for (int64_t o = 0; o < outer; o++)
    for (int k = 0; k < c->n_in; k++, dst += chunk)
      memcpy(dst, (const char *)eng_tensor_data(&c->in[k]) + (size_t)o * chunk, chunk);
  return TD_OK;
}

td_code eng_s_unpack(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  for (int i = 0; i < n->n_out; i++) out[i] = eng_shape_unknown();
  if (in[0].rank <= 0) return TD_OK;
  int64_t axis = eng_node_attr_int(n, "axis", 0);
  int r = in[0].rank;
  if (axis < -r || axis >= r)
    return td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (Unpack): axis %lld out of range",
                      n->name, (long long)axis);
  int a = (int)(axis < 0 ? axis + r : axis);
  for (int i = 0; i < n->n_out; i++) {
    out[i].rank = r - 1;
    for (int d = 0, k = 0; d < r; d++)
      if (d != a) out[i].dim[k++] = in[0].dim[d];
  }
  return TD_OK;
}

td_code eng_k_unpack(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  int a;
  td_code rc = want_fixed(c, 0);
  if (!rc) rc = eng_kaxis(c, eng_node_attr_int(c->node, "axis", 0), x->shape.rank, &a);
  if (rc) return rc;
  if (x->shape.dim[a] != c->n_out)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Input shape axis %d must equal %d, got shape %lld",
                     a, c->n_out, (long long)x->shape.dim[a]);
  eng_shape s = {.rank = x->shape.rank - 1};
  for (int d = 0, k = 0; d < x->shape.rank; d++)
    if (d != a) s.dim[k++] = x->shape.dim[d];
  size_t es = eng_dtype_size(x->dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; d++) outer *= x->shape.dim[d];
  for (int d = a + 1; d < x->shape.rank; d++) inner *= x->shape.dim[d];
  size_t chunk = (size_t)inner * es;
  for (int k = 0; k < c->n_out; k++) {
    rc = eng_kout_raw(c, k, x->dtype, &s);
    if (rc) return rc;
    char *dst = eng_tensor_data(&c->out[k]);
    for (int64_t o = 0; o < outer; o++)
      memcpy(dst + (size_t)o * chunk,
             (const char *)eng_tensor_data(x) + ((size_t)o * (size_t)c->n_out + (size_t)k) * chunk,
             chunk);
  }
  return TD_OK;
}

td_code eng_k_concat_v2(eng_kctx *c) {
  int n = c->n_in - 1;
  if (n < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "needs at least one value and the axis");
  int64_t axis;
  td_code rc = eng_karg_int(c, n, &axis);
  if (rc) return rc;
  const eng_tensor *x = &c->in[0];
  if ((rc = want_fixed(c, 0))) return rc;
  int r = x->shape.rank, a;
  if ((rc = eng_kaxis(c, axis, r, &a))) return rc;
  eng_shape s = x->shape;
  s.dim[a] = 0;
  for (int k = 0; k < n; k++) {
    const eng_tensor *t = &c->in[k];
    bool ok = t->dtype == x->dtype && t->shape.rank == r;
    for (int d = 0; ok && d < r; d++) ok = d == a || t->shape.dim[d] == x->shape.dim[d];
    if (!ok) {
      char sa[128], sb[128];
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "ConcatOp : Dimension mismatch: input 0 is %s %s, input %d is %s %s",
                       eng_dtype_name(x->dtype), eng_shape_str(&x->shape, sa, sizeof sa), k,
                       eng_dtype_name(t->dtype), eng_shape_str(&t->shape, sb, sizeof sb));
    }
    s.dim[a] += t->shape.dim[a];
  }
  rc = eng_kout_raw(c, 0, x->dtype, &s);
  if (rc) return rc;
  size_t es = eng_dtype_size(x->dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; d++) outer *= s.dim[d];
  for (int d = a + 1; d < r; d++) inner *= s.dim[d];
  char *dst = eng_tensor_data(&c->out[0]);
  for (int64_t o = 0; o < outer; o++)
    for (int k = 0; k < n; k++) {
      size_t chunk = (size_t)(c->in[k].shape.dim[a] * inner) * es;
      memcpy(dst, (const char *)eng_tensor_data(&c->in[k]) + (size_t)o * chunk, chunk);
      dst += chunk;
    }
  return TD_OK;
}

/* --- GatherV2 ------------------------------------------------------------- */

td_code eng_k_gather_v2(eng_kctx *c) {
  const eng_tensor *p = &c->in[0], *ix = &c->in[1];
  int64_t axis = 0;
  td_code rc = want_fixed(c, 0);
  if (!rc && c->n_in > 2) rc = eng_karg_int(c, 2, &axis);
  if (rc) return rc;
  if (ix->dtype != ENG_DT_INT32 && ix->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "indices must be int32 or int64");
  int64_t bd = eng_node_attr_int(c->node, "batch_dims", 0);
  if (bd < 0) bd += ix->shape.rank;
  int a;
  if ((rc = eng_kaxis(c, axis, p->shape.rank, &a))) return rc;
  if (bd < 0 || bd > a || bd > ix->shape.rank)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "batch_dims %lld is out of range", (long long)bd);
  for (int d = 0; d < bd; d++)
    if (p->shape.dim[d] != ix->shape.dim[d])
      return eng_kfail(c, TD_INVALID_ARGUMENT, "params and indices differ in batch dim %d", d);
  eng_shape s = {.rank = p->shape.rank - 1 + ix->shape.rank - (int)bd};
  if (s.rank > ENG_MAX_RANK) return eng_kfail(c, TD_UNIMPLEMENTED, "rank above %d", ENG_MAX_RANK);
  int k = 0;
  for (int d = 0; d < a; d++) s.dim[k++] = p->shape.dim[d];
  for (int d = (int)bd; d < ix->shape.rank; d++) s.dim[k++] = ix->shape.dim[d];
  for (int d = a + 1; d < p->shape.rank; d++) s.dim[k++] = p->shape.dim[d];
  rc = eng_kout_raw(c, 0, p->dtype, &s);
  if (rc) return rc;
  size_t es = eng_dtype_size(p->dtype);
  int64_t batch = 1, outer = 1, inner = 1, nidx = 1, limit = p->shape.dim[a];
  for (int d = 0; d < bd; d++) batch *= p->shape.dim[d];
  for (int d = (int)bd; d < a; d++) outer *= p->shape.dim[d];
  for (int d = a + 1; d < p->shape.rank; d++) inner *= p->shape.dim[d];
  for (int d = (int)bd; d < ix->shape.rank; d++) nidx *= ix->shape.dim[d];
  size_t chunk = (size_t)inner * es;
  const char *src = eng_tensor_data(p);
  char *dst = eng_tensor_data(&c->out[0]);
  const void *iv = eng_tensor_data(ix);
  for (int64_t b = 0; b < batch; b++)
    for (int64_t o = 0; o < outer; o++)
      for (int64_t i = 0; i < nidx; i++) {
        int64_t j = b * nidx + i;
        int64_t v = ix->dtype == ENG_DT_INT32 ? ((const int32_t *)iv)[j] : ((const int64_t *)iv)[j];
        if (v < 0 || v >= limit)
          return eng_kfail(c, TD_INVALID_ARGUMENT, "indices[%lld] = %lld is not in [0, %lld)",
                           (long long)j, (long long)v, (long long)limit);
        memcpy(dst, src + (size_t)(((b * outer + o) * limit + v)) * chunk, chunk);
        dst += chunk;
      }
  return TD_OK;
}

/* --- Transpose -------------------------------------------------------------- */

td_code eng_k_transpose(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  int64_t perm[ENG_MAX_RANK];
  int n;
  td_code rc = want_fixed(c, 0);
  if (!rc) rc = eng_karg_ints(c, 1, perm, ENG_MAX_RANK, &n);
  if (rc) return rc;
  int r = x->shape.rank;
  if (n != r)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "transpose expects a vector of size %d, got %d", r, n);
  bool seen[ENG_MAX_RANK] = {0}, ident = true;
  for (int d = 0; d < r; d++) {
    if (perm[d] < 0) perm[d] += r;
    if (perm[d] < 0 || perm[d] >= r || seen[perm[d]])
      return eng_kfail(c, TD_INVALID_ARGUMENT, "perm is not a permutation of 0..%d", r - 1);
    seen[perm[d]] = true;
    ident &= perm[d] == d;
  }
  if (ident) {
    c->out[0] = eng_tensor_share(x);
    return TD_OK;
  }
  int64_t in_st[ENG_MAX_RANK], sst[ENG_MAX_RANK], dst_st[ENG_MAX_RANK];
  eng_shape s = {.rank = r};
  eng_contig_strides(&x->shape, in_st);
  for (int d = 0; d < r; d++) {
    s.dim[d] = x->shape.dim[perm[d]];
    sst[d] = in_st[perm[d]];
  }
  rc = eng_kout_raw(c, 0, x->dtype, &s);
  if (rc) return rc;
  eng_contig_strides(&s, dst_st);
  eng_copy_nd(r, s.dim, eng_dtype_size(x->dtype), eng_tensor_data(x), sst,
          eng_tensor_data(&c->out[0]), dst_st);
  return TD_OK;
}

/* --- Pad / PadV2 -------------------------------------------------------------- */

/* Fills n elements of es bytes at dst with v (NULL: zeros). */
static void fill_elems(char *dst, int64_t n, size_t es, const void *v) {
  if (!v) {
    memset(dst, 0, (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; i++) memcpy(dst + (size_t)i * es, v, es);
}

/* The padded border of dims d.. of an output block at dst: the rows of dim
 * d before and after the input's are filled whole, the ones between recurse
 * to dim d + 1, until no dim after has padding (the copy writes the rest). */
typedef struct pad_fill {
  int rank;
  const int64_t *dim, *st, *pads;
  bool pads_after[ENG_MAX_RANK + 1]; /* some dim from d on is padded */
  size_t es;
  const void *v;
} pad_fill;

static void fill_border(const pad_fill *f, int d, char *dst) {
  if (!f->pads_after[d]) return;
  int64_t lo = f->pads[2 * d], hi = f->pads[2 * d + 1], row = f->st[d];
  size_t rb = (size_t)row * f->es;
  fill_elems(dst, lo * row, f->es, f->v);
  fill_elems(dst + (size_t)(f->dim[d] - hi) * rb, hi * row, f->es, f->v);
  for (int64_t i = lo; i < f->dim[d] - hi && d + 1 < f->rank; i++)
    fill_border(f, d + 1, dst + (size_t)i * rb);
}

td_code eng_k_pad(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  int64_t pads[ENG_MAX_RANK * 2];
  int n;
  td_code rc = want_fixed(c, 0);
  if (!rc) rc = eng_karg_ints(c, 1, pads, ENG_MAX_RANK * 2, &n);
  if (rc) return rc;
  int r = x->shape.rank;
  if (n != 2 * r || (c->in[1].shape.rank != 2 && r))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "paddings must be a matrix of shape [%d,2]", r);
  eng_shape s = {.rank = r};
  int64_t off = 0, dst_st[ENG_MAX_RANK], in_st[ENG_MAX_RANK];
  for (int d = 0; d < r; d++) {
    if (pads[2 * d] < 0 || pads[2 * d + 1] < 0)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "paddings must be non-negative");
    s.dim[d] = x->shape.dim[d] + pads[2 * d] + pads[2 * d + 1];
  }
  size_t es = eng_dtype_size(x->dtype);
  const void *fill = NULL; /* the constant; NULL: zeros */
  if (c->n_in > 2) {
    const eng_tensor *v = &c->in[2];
    if (v->dtype != x->dtype || eng_tensor_numel(v) != 1)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "constant_values must be a scalar of the input type");
    bool zero = true;
    for (size_t b = 0; b < es; b++) zero &= ((const char *)eng_tensor_data(v))[b] == 0;
    if (!zero) fill = eng_tensor_data(v);
  }
  rc = eng_kout_raw(c, 0, x->dtype, &s);
  if (rc) return rc;
  char *dst = eng_tensor_data(&c->out[0]);
  eng_contig_strides(&s, dst_st);
  eng_contig_strides(&x->shape, in_st);
  /* Only the border is filled: the copy below writes every other element. */
  pad_fill pf = {.rank = r, .dim = s.dim, .st = dst_st, .pads = pads, .es = es, .v = fill};
  for (int d = r - 1; d >= 0; d--)
    pf.pads_after[d] = pf.pads_after[d + 1] || pads[2 * d] || pads[2 * d + 1];
  if (r > 0 && eng_tensor_numel(&c->out[0]) > 0) fill_border(&pf, 0, dst);
  for (int d = 0; d < r; d++) off += pads[2 * d] * dst_st[d];
  eng_copy_nd(r, x->shape.dim, es, eng_tensor_data(x), in_st, dst + (size_t)off * es, dst_st);
  return TD_OK;
}

/* --- Tile ------------------------------------------------------------------------ */

td_code eng_k_tile(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  int64_t mult[ENG_MAX_RANK];
  int n;
  td_code rc = want_fixed(c, 0);
  if (!rc) rc = eng_karg_ints(c, 1, mult, ENG_MAX_RANK, &n);
  if (rc) return rc;
  int r = x->shape.rank;
  if (n != r) return eng_kfail(c, TD_INVALID_ARGUMENT, "multiples must have %d elements", r);
  eng_shape s = {.rank = r};
  for (int d = 0; d < r; d++) {
    if (mult[d] < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "multiples must be non-negative");
    if (mult[d] && x->shape.dim[d] > INT64_MAX / 2 / mult[d])
      return eng_kfail(c, TD_INVALID_ARGUMENT, "tiled shape is too large");
    s.dim[d] = x->shape.dim[d] * mult[d];
  }
  rc = eng_kout_raw(c, 0, x->dtype, &s);
  if (rc) return rc;
  if (!eng_shape_numel(&s)) return TD_OK;
  size_t es = eng_dtype_size(x->dtype);
  int64_t in_st[ENG_MAX_RANK], dst_st[ENG_MAX_RANK], tidx[ENG_MAX_RANK] = {0};
  eng_contig_strides(&x->shape, in_st);
  eng_contig_strides(&s, dst_st);
  char *dst = eng_tensor_data(&c->out[0]);
  for (;;) {
    int64_t off = 0;
    for (int d = 0; d < r; d++) off += tidx[d] * x->shape.dim[d] * dst_st[d];
    eng_copy_nd(r, x->shape.dim, es, eng_tensor_data(x), in_st, dst + (size_t)off * es, dst_st);
    int d = r - 1;
    for (; d >= 0; d--) {
      if (++tidx[d] < mult[d]) break;
      tidx[d] = 0;
    }
    if (d < 0) break;
  }
  return TD_OK;
}

/* --- Split / SplitV ------------------------------------------------------------- */

/* Splits x along axis a into c->n_out pieces of the given sizes. */
static td_code split_sizes(eng_kctx *c, const eng_tensor *x, int a, const int64_t *sizes) {
  size_t es = eng_dtype_size(x->dtype);
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; d++) outer *= x->shape.dim[d];
  for (int d = a + 1; d < x->shape.rank; d++) inner *= x->shape.dim[d];
  int64_t off = 0;
  for (int k = 0; k < c->n_out; k++) {
    eng_shape s = x->shape;
    s.dim[a] = sizes[k];
    td_code rc = eng_kout_raw(c, k, x->dtype, &s);
    if (rc) return rc;
    size_t chunk = (size_t)(sizes[k] * inner) * es, row = (size_t)(x->shape.dim[a] * inner) * es;
    char *dst = eng_tensor_data(&c->out[k]);
    for (int64_t o = 0; o < outer; o++)
      memcpy(dst + (size_t)o * chunk,
             (const char *)eng_tensor_data(x) + (size_t)o * row + (size_t)(off * inner) * es, chunk);
    off += sizes[k];
  }
  return TD_OK;
}

td_code eng_k_split(eng_kctx *c) {
  const eng_tensor *x = &c->in[1];
  int64_t axis;
  int a;
  td_code rc = eng_karg_int(c, 0, &axis);
  if (!rc) rc = want_fixed(c, 1);
  if (!rc) rc = eng_kaxis(c, axis, x->shape.rank, &a);
  if (rc) return rc;
  int n = c->n_out;
  if (n < 1 || x->shape.dim[a] % n)
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "Number of ways to split should evenly divide the split dimension, but got "
                     "split_dim %d (size = %lld) and num_split %d",
                     a, (long long)x->shape.dim[a], n);
  int64_t sizes[256];
  if (n > 256) return eng_kfail(c, TD_UNIMPLEMENTED, "more than 256 pieces");
  for (int k = 0; k < n; k++) sizes[k] = x->shape.dim[a] / n;
  return split_sizes(c, x, a, sizes);
}

td_code eng_k_split_v(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  int64_t axis, sizes[256];
  int a, n;
  td_code rc = want_fixed(c, 0);
  if (!rc) rc = eng_karg_int(c, 2, &axis);
  if (!rc) rc = eng_kaxis(c, axis, x->shape.rank, &a);
  if (!rc) rc = eng_karg_ints(c, 1, sizes, 256, &n);
  if (rc) return rc;
  if (n != c->n_out)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "size_splits has %d entries for %d outputs", n,
                     c->n_out);
  int64_t total = 0;
  int unknown = -1;
  for (int k = 0; k < n; k++) {
    if (sizes[k] == -1 && unknown < 0)
      unknown = k;
    else if (sizes[k] < 0)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "size_splits[%d] is %lld", k, (long long)sizes[k]);
    else
      total += sizes[k];
  }
  if (unknown >= 0) sizes[unknown] = x->shape.dim[a] - total;
  if ((unknown >= 0 && sizes[unknown] < 0) || (unknown < 0 && total != x->shape.dim[a]))
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "Determined shape must either match input shape along split_dim exactly if "
                     "fully specified, or be less than the size of the input along split_dim if "
                     "not fully specified");
  return split_sizes(c, x, a, sizes);
}

/* --- OneHot ------------------------------------------------------------------------ */

td_code eng_k_one_hot(eng_kctx *c) {
  const eng_tensor *ix = &c->in[0], *on = &c->in[2], *off = &c->in[3];
  int64_t depth;
  td_code rc = eng_karg_int(c, 1, &depth);
  if (rc) return rc;
  if (ix->dtype != ENG_DT_INT32 && ix->dtype != ENG_DT_INT64 && ix->dtype != ENG_DT_UINT8)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "indices must be an integer tensor");
  size_t es = eng_dtype_size(on->dtype);
  if (!es || on->dtype != off->dtype || eng_tensor_numel(on) != 1 || eng_tensor_numel(off) != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "on_value and off_value must be scalars of one type");
  if (depth < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "depth must be non-negative, got %lld",
                                  (long long)depth);
  int r = ix->shape.rank;
  if (r + 1 > ENG_MAX_RANK) return eng_kfail(c, TD_UNIMPLEMENTED, "rank above %d", ENG_MAX_RANK);
  int64_t axis = eng_node_attr_int(c->node, "axis", -1);
  if (axis < -1 || axis > r) return eng_kfail(c, TD_INVALID_ARGUMENT, "axis %lld out of range",
                                              (long long)axis);
  int a = axis == -1 ? r : (int)axis;
  eng_shape s = {.rank = r + 1};
  for (int d = 0, k = 0; d <= r; d++) s.dim[d] = d == a ? depth : ix->shape.dim[k++];
  if ((rc = eng_kout_raw(c, 0, on->dtype, &s))) return rc;
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < a; d++) outer *= ix->shape.dim[d];
  for (int d = a; d < r; d++) inner *= ix->shape.dim[d];
  char *dst = eng_tensor_data(&c->out[0]);
  const void *iv = eng_tensor_data(ix);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t dd = 0; dd < depth; dd++)
      for (int64_t i = 0; i < inner; i++) {
        int64_t j = o * inner + i;
        int64_t v = ix->dtype == ENG_DT_INT32   ? ((const int32_t *)iv)[j]
                    : ix->dtype == ENG_DT_INT64 ? ((const int64_t *)iv)[j]
                                                : ((const uint8_t *)iv)[j];
        memcpy(dst + (size_t)((o * depth + dd) * inner + i) * es,
               eng_tensor_data(v == dd ? on : off), es);
      }
  return TD_OK;
}

/* --- MirrorPad ------------------------------------------------------------------------ */

td_code eng_k_mirror_pad(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  int64_t pads[ENG_MAX_RANK * 2];
  int n;
  td_code rc = want_fixed(c, 0);
  if (!rc) rc = eng_karg_ints(c, 1, pads, ENG_MAX_RANK * 2, &n);
  if (rc) return rc;
  int r = x->shape.rank;
  bool sym = !strcmp(eng_attr_str(c->node, "mode", "REFLECT"), "SYMMETRIC");
  if (n != 2 * r) return eng_kfail(c, TD_INVALID_ARGUMENT, "paddings must be [%d,2]", r);
  eng_shape s = {.rank = r};
  for (int d = 0; d < r; d++) {
    int64_t lim = x->shape.dim[d] - (sym ? 0 : 1);
    if (pads[2 * d] < 0 || pads[2 * d + 1] < 0 || pads[2 * d] > lim || pads[2 * d + 1] > lim)
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "paddings must be no greater than the dimension size: %lld, %lld greater "
                       "than %lld",
                       (long long)pads[2 * d], (long long)pads[2 * d + 1], (long long)lim);
    s.dim[d] = x->shape.dim[d] + pads[2 * d] + pads[2 * d + 1];
  }
  if ((rc = eng_kout_raw(c, 0, x->dtype, &s))) return rc;
  size_t es = eng_dtype_size(x->dtype);
  int64_t total = eng_shape_numel(&s), in_st[ENG_MAX_RANK], idx[ENG_MAX_RANK] = {0};
  eng_contig_strides(&x->shape, in_st);
  char *dst = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < total; i++) {
    int64_t src = 0;
    for (int d = 0; d < r; d++) {
      int64_t p = idx[d] - pads[2 * d], dim = x->shape.dim[d];
      if (p < 0) p = sym ? -p - 1 : -p;
      else if (p >= dim) p = sym ? 2 * dim - p - 1 : 2 * dim - p - 2;
      src += p * in_st[d];
    }
    memcpy(dst + (size_t)i * es, (const char *)eng_tensor_data(x) + (size_t)src * es, es);
    for (int d = r - 1; d >= 0; d--) {
      if (++idx[d] < s.dim[d]) break;
      idx[d] = 0;
    }
  }
  return TD_OK;
}
