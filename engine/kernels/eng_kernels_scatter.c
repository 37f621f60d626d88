/* Scatters and segment reductions (the combiners of embeddings and
 * tf.function pipelines):
 *  - ScatterNd (into zeros, duplicates summed) and TensorScatterUpdate /
 *    Add / Sub / Max / Min (into a copy of the tensor), indices int32/int64
 *    over the leading dims, each index naming a slice;
 *  - SegmentSum / Mean / Max / Min / Prod (sorted ids, empty segments 0,
 *    Prod 1), UnsortedSegmentSum / Max / Min / Prod (ids of any leading
 *    shape, negative ids dropped, empty segments the reduction's identity:
 *    lowest for Max, highest for Min), SparseSegmentSum / Mean / SqrtN
 *    (rows picked by indices first; *WithNumSegments give the count).
 * XlaDynamicUpdateSlice (a block written into a copy at start indices
 * clamped into [0, dim - update_dim], as XLA clamps them) moves bytes.
 * Every combining loop is typed (float32/64, int32/64, and uint8 / int8 /
 * int16 for the scatters' moves), so integers stay exact. Bad indices and
 * ids are INVALID_ARGUMENT naming the offending value, as TensorFlow's CPU
 * kernels report them. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_model.h"

enum { K_SET, K_ADD, K_SUB, K_MAX, K_MIN, K_PROD, K_MEAN, K_SQRTN };

static int64_t ix_at(const eng_tensor *t, int64_t i) {
  return t->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(t))[i]
                                  : ((const int64_t *)eng_tensor_data(t))[i];
}

static td_code want_ix(eng_kctx *c, int i, const char *what) {
  eng_dtype dt = c->in[i].dtype;
  if (dt == ENG_DT_INT32 || dt == ENG_DT_INT64) return TD_OK;
  return eng_kfail(c, TD_INVALID_ARGUMENT, "%s must be int32 or int64, got %s", what,
                   eng_dtype_name(dt));
}

/* o[i] = o[i] (kind) u[i] for i < n, in dtype dt; false for a dtype with
 * no arithmetic here. */
#define COMBINE(T)                                  \
  do {                                              \
    T *o_ = (T *)o;                                 \
    const T *u_ = (const T *)u;                     \
    for (int64_t i = 0; i < n; i++) switch (kind) { \
        case K_ADD:                                 \
          o_[i] = (T)(o_[i] + u_[i]);               \
          break;                                    \
        case K_SUB:                                 \
          o_[i] = (T)(o_[i] - u_[i]);               \
          break;                                    \
        case K_MAX:                                 \
          o_[i] = u_[i] > o_[i] ? u_[i] : o_[i];    \
          break;                                    \
        case K_MIN:                                 \
          o_[i] = u_[i] < o_[i] ? u_[i] : o_[i];    \
          break;                                    \
        case K_PROD:                                \
          o_[i] = (T)(o_[i] * u_[i]);               \
          break;                                    \
        default:                                    \
          o_[i] = u_[i];                            \
          break;                                    \
      }                                             \
    return true;                                    \
  } while (0)

static bool combine(eng_dtype dt, int kind, void *o, const void *u, int64_t n) {
  switch (dt) {
    case ENG_DT_FLOAT:
      COMBINE(float);
    case ENG_DT_DOUBLE:
      COMBINE(double);
    case ENG_DT_INT32:
      COMBINE(int32_t);
    case ENG_DT_INT64:
      COMBINE(int64_t);
    case ENG_DT_UINT8:
      COMBINE(uint8_t);
    case ENG_DT_INT8:
      COMBINE(int8_t);
    case ENG_DT_INT16:
      COMBINE(int16_t);
    default:
      if (kind != K_SET) return false;
      memcpy(o, u, n * eng_dtype_size(dt));
      return true;
  }
}

static bool arith_dtype(eng_dtype dt) {
  return dt == ENG_DT_FLOAT || dt == ENG_DT_DOUBLE || dt == ENG_DT_INT32 || dt == ENG_DT_INT64 ||
         dt == ENG_DT_UINT8 || dt == ENG_DT_INT8 || dt == ENG_DT_INT16;
}

/* --- scatters ------------------------------------------------------------------ */

/* out (already the base tensor, shape s) gets updates u at indices ix. */
static td_code scatter_into(eng_kctx *c, int kind, const eng_tensor *ix, const eng_tensor *u,
                            const eng_shape *s) {
  eng_tensor *out = &c->out[0];
  if (ix->shape.rank < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "indices must be at least 1-D");
  int64_t k = ix->shape.dim[ix->shape.rank - 1];
  if (k > s->rank)
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "index innermost dimension length %lld exceeds the output rank %d",
                     (long long)k, s->rank);
  /* updates: indices.shape[:-1] + shape[k:] */
  int lead = ix->shape.rank - 1;
  bool ok = u->shape.rank == lead + s->rank - (int)k;
  for (int d = 0; ok && d < lead; d++) ok = u->shape.dim[d] == ix->shape.dim[d];
  for (int d = (int)k; ok && d < s->rank; d++) ok = u->shape.dim[lead + d - k] == s->dim[d];
  if (!ok) {
    char a[96], b[96], e[96];
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "updates shape %s does not fit indices %s into shape %s",
                     eng_shape_str(&u->shape, a, sizeof a), eng_shape_str(&ix->shape, b, sizeof b),
                     eng_shape_str(s, e, sizeof e));
  }
  if (u->dtype != out->dtype)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "updates are %s, the tensor %s",
                     eng_dtype_name(u->dtype), eng_dtype_name(out->dtype));
  if (kind != K_SET && !arith_dtype(out->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s is not supported by its kernel",
                     eng_dtype_name(out->dtype));
  int64_t slice = 1, nidx = k ? eng_tensor_numel(ix) / k : 0;
  for (int d = (int)k; d < s->rank; d++) slice *= s->dim[d];
  if (!k) nidx = eng_shape_numel(&u->shape) / (slice ? slice : 1);
  size_t es = eng_dtype_size(out->dtype);
  char *od = eng_tensor_data(out);
  const char *ud = eng_tensor_data(u);
  for (int64_t j = 0; j < nidx; j++) {
    int64_t off = 0;
    for (int64_t d = 0; d < k; d++) {
      int64_t v = ix_at(ix, j * k + d);
      if (v < 0 || v >= s->dim[d])
        return eng_kfail(c, TD_INVALID_ARGUMENT,
                         "indices[%lld] = %lld does not index into dimension %lld of size %lld",
                         (long long)j, (long long)v, (long long)d, (long long)s->dim[d]);
      off = off * s->dim[d] + v;
    }
    combine(out->dtype, kind, od + (size_t)(off * slice) * es, ud + (size_t)(j * slice) * es,
            slice);
  }
  return TD_OK;
}

td_code eng_k_scatter_nd(eng_kctx *c) {
  td_code rc = want_ix(c, 0, "indices");
  if (!rc) rc = want_ix(c, 2, "shape");
  if (rc) return rc;
  int64_t dims[ENG_MAX_RANK];
  int n;
  if ((rc = eng_karg_ints(c, 2, dims, ENG_MAX_RANK, &n))) return rc;
  for (int i = 0; i < n; i++)
    if (dims[i] < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "shape must be non-negative");
  eng_shape s = eng_shape_make(n, dims);
  eng_dtype dt = c->in[1].dtype;
  if (!arith_dtype(dt))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s is not supported by its kernel", eng_dtype_name(dt));
  if ((rc = eng_kout(c, 0, dt, &s))) return rc;
  /* Duplicate indices add up. */
  return scatter_into(c, K_ADD, &c->in[0], &c->in[1], &s);
}

static td_code tensor_scatter(eng_kctx *c, int kind) {
  td_code rc = want_ix(c, 1, "indices");
  if (rc) return rc;
  const eng_tensor *t = &c->in[0];
  if (!eng_dtype_size(t->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s tensors are not supported", eng_dtype_name(t->dtype));
  if ((rc = eng_kout_raw(c, 0, t->dtype, &t->shape))) return rc;
  memcpy(eng_tensor_data(&c->out[0]), eng_tensor_data(t), eng_tensor_nbytes(t));
  return scatter_into(c, kind, &c->in[1], &c->in[2], &t->shape);
}

td_code eng_k_tensor_scatter_update(eng_kctx *c) { return tensor_scatter(c, K_SET); }
td_code eng_k_tensor_scatter_add(eng_kctx *c) { return tensor_scatter(c, K_ADD); }
td_code eng_k_tensor_scatter_sub(eng_kctx *c) { return tensor_scatter(c, K_SUB); }
td_code eng_k_tensor_scatter_max(eng_kctx *c) { return tensor_scatter(c, K_MAX); }
td_code eng_k_tensor_scatter_min(eng_kctx *c) { return tensor_scatter(c, K_MIN); }

/* --- segment reductions -------------------------------------------------------- */

/* Segment reduction of rows of `inner` elements: row r of x (or row
 * pick[r] when pick is not NULL) goes to segment seg[r] (skipped when
 * negative). cnt gets the rows per segment. empty: the value of an empty
 * segment when zero_empty, else the reduction's identity stays. */
#define SEGMENT(T, LOW, HIGH)                                                             \
  do {                                                                                    \
    const T *x_ = (const T *)x;                                                           \
    T *y_ = (T *)y;                                                                       \
    T init_ = kind == K_MAX ? (LOW) : kind == K_MIN ? (HIGH) : kind == K_PROD ? 1 : 0;    \
    int acc_ = kind == K_MAX || kind == K_MIN || kind == K_PROD ? kind : K_ADD;           \
    for (int64_t i = 0; i < nseg * inner; i++) y_[i] = init_;                             \
    for (int64_t r = 0; r < rows; r++) {                                                  \
      int64_t s = seg[r];                                                                 \
      if (s < 0) continue;                                                                \
      const T *a_ = x_ + (pick ? pick[r] : r) * inner;                                    \
      T *b_ = y_ + s * inner;                                                             \
      cnt[s]++;                                                                           \
      combine(dt, acc_, b_, a_, inner);                                                   \
    }                                                                                     \
    for (int64_t s = 0; s < nseg; s++) {                                                  \
      T *b_ = y_ + s * inner;                                                             \
      if (!cnt[s]) {                                                                      \
        if (zero_empty)                                                                   \
          for (int64_t i = 0; i < inner; i++) b_[i] = kind == K_PROD ? 1 : 0;             \
        continue;                                                                         \
      }                                                                                   \
      if (kind == K_MEAN)                                                                 \
        for (int64_t i = 0; i < inner; i++) b_[i] = (T)(b_[i] / (T)cnt[s]);               \
      if (kind == K_SQRTN)                                                                \
        for (int64_t i = 0; i < inner; i++) b_[i] = (T)(b_[i] / (T)sqrt((double)cnt[s])); \
    }                                                                                     \
  } while (0)

static void segment(eng_dtype dt, int kind, const void *x, void *y, const int64_t *seg,
                    const int64_t *pick, int64_t rows, int64_t nseg, int64_t inner, int64_t *cnt,
                    bool zero_empty) {
  switch (dt) {
    case ENG_DT_FLOAT:
      SEGMENT(float, -FLT_MAX, FLT_MAX);
      break;
    case ENG_DT_DOUBLE:
      SEGMENT(double, -DBL_MAX, DBL_MAX);
      break;
    case ENG_DT_INT32:
      SEGMENT(int32_t, INT32_MIN, INT32_MAX);
      break;
    default:
      SEGMENT(int64_t, INT64_MIN, INT64_MAX);
      break;
  }
}

static bool seg_dtype(eng_dtype dt, int kind) {
  if (dt == ENG_DT_FLOAT || dt == ENG_DT_DOUBLE) return true;
  return kind != K_SQRTN && (dt == ENG_DT_INT32 || dt == ENG_DT_INT64);
}

/* Allocates output [nseg] + data.shape[lead:] and runs segment(). seg and
 * pick are scratch owned by the caller. */
static td_code run_segments(eng_kctx *c, int kind, int lead, const int64_t *seg,
                            const int64_t *pick, int64_t rows, int64_t nseg, bool zero_empty) {
  const eng_tensor *x = &c->in[0];
  int64_t od[ENG_MAX_RANK];
  od[0] = nseg;
  int64_t inner = 1;
  for (int d = lead; d < x->shape.rank; d++) {
    od[1 + d - lead] = x->shape.dim[d];
    inner *= x->shape.dim[d];
  }
  eng_shape os = eng_shape_make(1 + x->shape.rank - lead, od);
  td_code rc = eng_kout_raw(c, 0, x->dtype, &os);
  if (rc) return rc;
  eng_tensor ct = {0};
  eng_shape cs = eng_shape_make(1, (int64_t[]){nseg});
  if ((rc = eng_tensor_alloc(&ct, ENG_DT_INT64, &cs, c->err))) return rc;
  segment(x->dtype, kind, eng_tensor_data(x), eng_tensor_data(&c->out[0]), seg, pick, rows, nseg,
          inner, eng_tensor_data(&ct), zero_empty);
  eng_tensor_release(&ct);
  return TD_OK;
}

static td_code int_scratch(eng_kctx *c, eng_tensor *t, int64_t n) {
  eng_shape s = eng_shape_make(1, (int64_t[]){n > 0 ? n : 1});
  return eng_tensor_alloc_raw(t, ENG_DT_INT64, &s, c->err);
}

/* Segment*: ids 1-D, sorted, as long as data's dim 0. */
static td_code sorted_segments(eng_kctx *c, int kind) {
  const eng_tensor *x = &c->in[0], *ids = &c->in[1];
  td_code rc = want_ix(c, 1, "segment_ids");
  if (rc) return rc;
  if (!seg_dtype(x->dtype, kind))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s is not supported by its kernel",
                     eng_dtype_name(x->dtype));
  if (x->shape.rank < 1 || ids->shape.rank != 1 || ids->shape.dim[0] != x->shape.dim[0])
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "segment_ids should be a vector the size of data's first dimension");
  int64_t rows = ids->shape.dim[0], nseg = 0;
  eng_tensor st = {0};
  if ((rc = int_scratch(c, &st, rows))) return rc;
  int64_t *seg = eng_tensor_data(&st);
  for (int64_t r = 0; r < rows; r++) {
    seg[r] = ix_at(ids, r);
    if (seg[r] < 0 || (r && seg[r] < seg[r - 1])) {
      eng_tensor_release(&st);
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "segment ids are not increasing and non-negative "
                       "(segment_ids[%lld] = %lld)",
                       (long long)r, (long long)seg[r]);
    }
  }
  if (rows) nseg = seg[rows - 1] + 1;
  rc = run_segments(c, kind, 1, seg, NULL, rows, nseg, true);
  eng_tensor_release(&st);
  return rc;
}

td_code eng_k_segment_sum(eng_kctx *c) { return sorted_segments(c, K_ADD); }
td_code eng_k_segment_mean(eng_kctx *c) { return sorted_segments(c, K_MEAN); }
td_code eng_k_segment_max(eng_kctx *c) { return sorted_segments(c, K_MAX); }
td_code eng_k_segment_min(eng_kctx *c) { return sorted_segments(c, K_MIN); }
td_code eng_k_segment_prod(eng_kctx *c) { return sorted_segments(c, K_PROD); }

/* UnsortedSegment*: ids of data's leading shape, num_segments input 2. */
static td_code unsorted_segments(eng_kctx *c, int kind) {
  const eng_tensor *x = &c->in[0], *ids = &c->in[1];
  td_code rc = want_ix(c, 1, "segment_ids");
  if (rc) return rc;
  if (!seg_dtype(x->dtype, kind))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s is not supported by its kernel",
                     eng_dtype_name(x->dtype));
  int64_t nseg;
  if ((rc = eng_karg_int(c, 2, &nseg))) return rc;
  if (nseg < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "num_segments must be non-negative");
  bool ok = ids->shape.rank <= x->shape.rank;
  for (int d = 0; ok && d < ids->shape.rank; d++) ok = ids->shape.dim[d] == x->shape.dim[d];
  if (!ok) {
    char a[96], b[96];
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "data.shape = %s does not start with "
                     "segment_ids.shape = %s",
                     eng_shape_str(&x->shape, a, sizeof a),
                     eng_shape_str(&ids->shape, b, sizeof b));
  }
  int64_t rows = eng_tensor_numel(ids);
  eng_tensor st = {0};
  if ((rc = int_scratch(c, &st, rows))) return rc;
  int64_t *seg = eng_tensor_data(&st);
  for (int64_t r = 0; r < rows; r++) {
    seg[r] = ix_at(ids, r);
    if (seg[r] >= nseg) {
      eng_tensor_release(&st);
      return eng_kfail(c, TD_INVALID_ARGUMENT, "segment_ids[%lld] = %lld is out of range [0, %lld)",
                       (long long)r, (long long)seg[r], (long long)nseg);
    }
  }
  rc = run_segments(c, kind, ids->shape.rank, seg, NULL, rows, nseg, false);
  eng_tensor_release(&st);
  return rc;
}

td_code eng_k_unsorted_segment_sum(eng_kctx *c) { return unsorted_segments(c, K_ADD); }
td_code eng_k_unsorted_segment_max(eng_kctx *c) { return unsorted_segments(c, K_MAX); }
td_code eng_k_unsorted_segment_min(eng_kctx *c) { return unsorted_segments(c, K_MIN); }
td_code eng_k_unsorted_segment_prod(eng_kctx *c) { return unsorted_segments(c, K_PROD); }

/* SparseSegment*(data, indices, segment_ids[, num_segments]). */
static td_code sparse_segments(eng_kctx *c, int kind) {
  const eng_tensor *x = &c->in[0], *ix = &c->in[1], *ids = &c->in[2];
  td_code rc = want_ix(c, 1, "indices");
  if (!rc) rc = want_ix(c, 2, "segment_ids");
  if (rc) return rc;
  if (!seg_dtype(x->dtype, kind) || x->dtype == ENG_DT_INT32 || x->dtype == ENG_DT_INT64)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s is not supported by its kernel",
                     eng_dtype_name(x->dtype));
  if (x->shape.rank < 1 || ix->shape.rank != 1 || ids->shape.rank != 1 ||
      ix->shape.dim[0] != ids->shape.dim[0])
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "indices and segment_ids should be vectors of the same length");
  int64_t rows = ix->shape.dim[0], nseg = -1;
  if (c->n_in > 3) {
    if ((rc = eng_karg_int(c, 3, &nseg))) return rc;
    if (nseg < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "num_segments must be non-negative");
  }
  eng_tensor st = {0};
  if ((rc = int_scratch(c, &st, 2 * rows))) return rc;
  int64_t *seg = eng_tensor_data(&st), *pick = seg + rows;
  for (int64_t r = 0; r < rows; r++) {
    seg[r] = ix_at(ids, r);
    pick[r] = ix_at(ix, r);
    const char *bad = NULL;
    if (seg[r] < 0 || (r && seg[r] < seg[r - 1]))
      bad = "segment ids are not increasing";
    else if (nseg >= 0 && seg[r] >= nseg)
      bad = "segment id is out of range";
    else if (pick[r] < 0 || pick[r] >= x->shape.dim[0])
      bad = "index is out of range";
    if (bad) {
      eng_tensor_release(&st);
      return eng_kfail(c, TD_INVALID_ARGUMENT, "%s at position %lld (index %lld, segment %lld)",
                       bad, (long long)r, (long long)pick[r], (long long)seg[r]);
    }
  }
  if (nseg < 0) nseg = rows ? seg[rows - 1] + 1 : 0;
  rc = run_segments(c, kind, 1, seg, pick, rows, nseg, true);
  eng_tensor_release(&st);
  return rc;
}

td_code eng_k_sparse_segment_sum(eng_kctx *c) { return sparse_segments(c, K_ADD); }
td_code eng_k_sparse_segment_mean(eng_kctx *c) { return sparse_segments(c, K_MEAN); }
td_code eng_k_sparse_segment_sqrt_n(eng_kctx *c) { return sparse_segments(c, K_SQRTN); }

/* --- ResourceGather ------------------------------------------------------------- */

/* tf.gather on a variable: GatherV2 (axis 0, the node's batch_dims) over
 * the variable's value, which it shares. */
td_code eng_k_resource_gather(eng_kctx *c) {
  if (c->in[0].dtype != ENG_DT_RESOURCE)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input 0 is %s, not a variable",
                     eng_dtype_name(c->in[0].dtype));
  eng_tensor in[2] = {{0}, c->in[1]};
  td_code rc = eng_model_slot_read(c->model, eng_tensor_handle(&c->in[0]), &in[0], c->err);
  if (rc) return rc;
  eng_kctx g = *c;
  g.in = in;
  g.n_in = 2;
  rc = eng_k_gather_v2_any(&g);
  eng_tensor_release(&in[0]);
  return rc;
}

/* XlaDynamicUpdateSlice: input with update written at indices, update of
 * input's rank and no larger in any dim; start d clamped into
 * [0, input_dim - update_dim], so the block always fits (XLA's rule: an
 * out-of-range start never fails). Copies input, then update row by row. */
td_code eng_k_xla_dynamic_update_slice(eng_kctx *c) {
  const eng_tensor *x = &c->in[0], *u = &c->in[1], *ix = &c->in[2];
  size_t es = eng_dtype_size(x->dtype);
  if (!es || u->dtype != x->dtype)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input and update must be one fixed-size type");
  if (ix->dtype != ENG_DT_INT32 && ix->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "indices must be int32 or int64");
  int r = x->shape.rank;
  char a[128], b[128];
  if (u->shape.rank != r)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "update %s must have the rank of input %s",
                     eng_shape_str(&u->shape, a, sizeof a), eng_shape_str(&x->shape, b, sizeof b));
  if (ix->shape.rank > 1 || eng_tensor_numel(ix) != r)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "indices must be a vector of %d values, got shape %s",
                     r, eng_shape_str(&ix->shape, a, sizeof a));
  int64_t start[ENG_MAX_RANK];
  for (int d = 0; d < r; d++) {
    int64_t room = x->shape.dim[d] - u->shape.dim[d];
    if (room < 0)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "update %s is larger than input %s in dim %d",
                       eng_shape_str(&u->shape, a, sizeof a), eng_shape_str(&x->shape, b, sizeof b),
                       d);
    int64_t v = ix_at(ix, d);
    start[d] = v < 0 ? 0 : v > room ? room : v;
  }
  td_code rc = eng_kout_raw(c, 0, x->dtype, &x->shape);
  if (rc) return rc;
  char *dst = eng_tensor_data(&c->out[0]);
  const char *src = eng_tensor_data(u);
  memcpy(dst, eng_tensor_data(x), (size_t)eng_tensor_numel(x) * es);
  int64_t un = eng_tensor_numel(u);
  if (!un) return TD_OK;
  /* Rows along the last dim; a scalar is one row of one element. */
  int64_t row = r ? u->shape.dim[r - 1] : 1, rows = un / row;
  for (int64_t k = 0; k < rows; k++) {
    int64_t rem = k, off = r ? start[r - 1] : 0, stride = r ? x->shape.dim[r - 1] : 1;
    for (int d = r - 2; d >= 0; d--) {
      off += (start[d] + rem % u->shape.dim[d]) * stride;
      rem /= u->shape.dim[d];
      stride *= x->shape.dim[d];
    }
    memcpy(dst + (size_t)off * es, src + (size_t)(k * row) * es, (size_t)row * es);
  }
  return TD_OK;
}
