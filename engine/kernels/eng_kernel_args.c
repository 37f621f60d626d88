/* Argument helpers for kernels: reading index inputs and axes with bounds
 * checked, and errors that name the node and its op. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "eng_kernels.h"

td_code eng_kfail(eng_kctx *c, td_code code, const char *fmt, ...) {
  char msg[TD_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return td_err_set(c->err, code, "node '%s' (%s): %s", c->node->name, c->node->op, msg);
}

td_code eng_karg_ints(eng_kctx *c, int i, int64_t *out, int max, int *n) {
  const eng_tensor *t = &c->in[i];
  if (t->dtype != ENG_DT_INT32 && t->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input %d must be int32 or int64, got %s", i,
                     eng_dtype_name(t->dtype));
  int64_t cnt = eng_tensor_numel(t);
  if (cnt > max)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input %d holds %lld values, at most %d allowed", i,
                     (long long)cnt, max);
  const void *d = eng_tensor_data(t);
  for (int64_t k = 0; k < cnt; k++)
    out[k] = t->dtype == ENG_DT_INT32 ? ((const int32_t *)d)[k] : ((const int64_t *)d)[k];
  *n = (int)cnt;
  return TD_OK;
}

td_code eng_karg_int(eng_kctx *c, int i, int64_t *out) {
  int n = 0;
  td_code rc = eng_karg_ints(c, i, out, 1, &n);
  if (rc) return rc;
  if (n != 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "input %d must be a scalar", i);
  return TD_OK;
}

/* Sizes computed from request data (Fill, Range, Tile, a batch of a
 * million) must not take the process down: refuse a single output above
 * this before touching memory. */
#define MAX_OUTPUT_BYTES ((int64_t)4 << 30)

static td_code kout(eng_kctx *c, int i, eng_dtype dt, const eng_shape *s, bool zero) {
  int64_t n = eng_shape_numel(s);
  int64_t es = (int64_t)eng_dtype_size(dt);
  if (n > 0 && es > 0 && n > MAX_OUTPUT_BYTES / es) {
    char sb[128];
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "output %d of shape %s is larger than %lld bytes",
                     i, eng_shape_str(s, sb, sizeof sb), (long long)MAX_OUTPUT_BYTES);
  }
  td_code rc = zero ? eng_tensor_alloc(&c->out[i], dt, s, c->err)
                    : eng_tensor_alloc_raw(&c->out[i], dt, s, c->err);
  if (rc) td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  return rc;
}

td_code eng_kout(eng_kctx *c, int i, eng_dtype dt, const eng_shape *s) {
  return kout(c, i, dt, s, true);
}

td_code eng_kout_raw(eng_kctx *c, int i, eng_dtype dt, const eng_shape *s) {
  return kout(c, i, dt, s, false);
}

td_code eng_kwant(eng_kctx *c, int i, eng_dtype dt) {
  if (c->in[i].dtype != dt)
    return eng_kfail(c, TD_UNIMPLEMENTED, "input %d is %s; only %s is supported", i,
                     eng_dtype_name(c->in[i].dtype), eng_dtype_name(dt));
  return TD_OK;
}

td_code eng_kaxis(eng_kctx *c, int64_t axis, int rank, int *out) {
  if (axis < -rank || axis >= rank || rank == 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "axis %lld is out of range for rank %d",
                     (long long)axis, rank);
  *out = (int)(axis < 0 ? axis + rank : axis);
  return TD_OK;
}

void eng_bcast_init(eng_bcast *it, const eng_shape *out, int n, const eng_shape *const *in) {
  memset(it, 0, sizeof *it);
  it->rank = out->rank;
  it->n = n;
  for (int d = 0; d < out->rank; d++) it->dim[d] = out->dim[d];
  for (int k = 0; k < n; k++) {
    int64_t s = 1;
    for (int d = out->rank - 1; d >= 0; d--) {
      int id = d - (out->rank - in[k]->rank);
      int64_t dd = id >= 0 ? in[k]->dim[id] : 1;
      it->st[k][d] = dd == 1 ? 0 : s;
      s *= dd;
    }
  }
  /* Merge a dim into the next one where every input continues across the
   * boundary as it would in one dim (contiguous, or broadcast on both):
   * the walk visits the same offsets in the same order, with fewer dims and
   * a longer innermost run for eng_bcast_next_row. */
  int r = 0;
  for (int d = 0; d < it->rank; d++) {
    if (it->dim[d] == 1) continue; /* a size-1 dim moves nothing */
    bool merge = r > 0;
    for (int k = 0; merge && k < n; k++)
      merge = it->st[k][r - 1] == it->st[k][d] * it->dim[d];
    if (merge) {
      it->dim[r - 1] *= it->dim[d];
      for (int k = 0; k < n; k++) it->st[k][r - 1] = it->st[k][d];
      continue;
    }
    it->dim[r] = it->dim[d];
    for (int k = 0; k < n; k++) it->st[k][r] = it->st[k][d];
    r++;
  }
  if (it->rank > 0 && r == 0) { /* every dim 1: one element */
    it->dim[0] = 1;
    for (int k = 0; k < n; k++) it->st[k][0] = 0;
    r = 1;
  }
  it->rank = r; /* dims and strides past it are stale and never read */
}

void eng_bcast_seek_row(eng_bcast *it, int64_t row) {
  for (int d = it->rank - 2; d >= 0 && row > 0; d--) {
    it->idx[d] = row % it->dim[d];
    row /= it->dim[d];
    for (int k = 0; k < it->n; k++) it->off[k] += it->idx[d] * it->st[k][d];
  }
}
