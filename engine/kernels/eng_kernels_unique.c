/* Unique and UniqueWithCounts over a 1-D tensor: the distinct values in
 * the order they first appear, each element's position among them
 * (out_idx int32 or int64), and with counts how often each occurs.
 *
 * Sorting positions by (value, position) groups equal values with their
 * first occurrence leading, in O(n log n) whatever the dtype; the groups
 * are then numbered in order of first occurrence. Floats compare by value
 * as TensorFlow's hash map does (0.0 and -0.0 are one value; every NaN is
 * its own); strings compare as bytes, bools as bytes. */
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"

typedef struct {
  const char *data;
  eng_dtype dt;
  size_t es;
} ukey;

/* -1, 0, 1 for value a against b; NaN never equal (ordered last, apart). */
static int value_cmp(const ukey *k, int64_t a, int64_t b) {
  if (k->dt == ENG_DT_STRING) {
    eng_str x = ((const eng_str *)k->data)[a], y = ((const eng_str *)k->data)[b];
    int c = memcmp(x.data, y.data, x.len < y.len ? x.len : y.len);
    return c ? c : (x.len < y.len ? -1 : x.len > y.len);
  }
  const char *pa = k->data + (size_t)a * k->es, *pb = k->data + (size_t)b * k->es;
  switch (k->dt) {
    case ENG_DT_FLOAT: {
      float x = *(const float *)pa, y = *(const float *)pb;
      if (x < y) return -1;
      if (x > y) return 1;
      if (x == y) return 0;
      return x == x ? -1 : y == y ? 1 : (a < b ? -1 : 1);
    }
    case ENG_DT_DOUBLE: {
      double x = *(const double *)pa, y = *(const double *)pb;
      if (x < y) return -1;
      if (x > y) return 1;
      if (x == y) return 0;
      return x == x ? -1 : y == y ? 1 : (a < b ? -1 : 1);
    }
    case ENG_DT_INT32: {
      int32_t x = *(const int32_t *)pa, y = *(const int32_t *)pb;
      return x < y ? -1 : x > y;
    }
    case ENG_DT_INT64: {
      int64_t x = *(const int64_t *)pa, y = *(const int64_t *)pb;
      return x < y ? -1 : x > y;
    }
    default:
      return memcmp(pa, pb, k->es);
  }
}

static int order_cmp(const void *a, const void *b, void *arg) {
  int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
  int c = value_cmp(arg, i, j);
  return c ? c : (i < j ? -1 : i > j);
}

static int first_cmp(const void *a, const void *b) {
  const int64_t *x = a, *y = b; /* (first position, group) pairs */
  return x[0] < y[0] ? -1 : x[0] > y[0];
}

td_code eng_c_unique(const eng_node *n, td_err *err) {
  const eng_attr *a = eng_node_attr(n, "T");
  if (a && a->kind == ENG_ATTR_TYPE && (a->type == ENG_DT_STRING || a->type == ENG_DT_BOOL))
    return TD_OK;
  return eng_c_numeric(n, err);
}

static td_code unique(eng_kctx *c, bool counts) {
  const eng_tensor *x = &c->in[0];
  bool str = x->dtype == ENG_DT_STRING;
  size_t es = str ? sizeof(eng_str) : eng_dtype_size(x->dtype);
  if (!es)
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s is not supported by its kernel",
                     eng_dtype_name(x->dtype));
  if (x->shape.rank != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "unique expects a 1D vector, got rank %d",
                     x->shape.rank);
  eng_dtype it = eng_node_attr_type(c->node, "out_idx", ENG_DT_INT32);
  if (it != ENG_DT_INT32 && it != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "out_idx must be int32 or int64");
  int64_t n = x->shape.dim[0];
  if (it == ENG_DT_INT32 && n > INT32_MAX)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "too many elements for int32 indices");
  /* scratch: order[n], group of each element[n], (first, group) pairs[2n] */
  eng_tensor st = {0};
  eng_shape ss = eng_shape_make(1, (int64_t[]){4 * n + 1});
  td_code rc = eng_tensor_alloc_raw(&st, ENG_DT_INT64, &ss, c->err);
  if (rc) return rc;
  int64_t *order = eng_tensor_data(&st), *grp = order + n, *first = grp + n;
  ukey k = {str ? (const char *)eng_tensor_strs(x) : eng_tensor_data(x), x->dtype, es};
  for (int64_t i = 0; i < n; i++) order[i] = i;
  qsort_r(order, (size_t)n, sizeof *order, order_cmp, &k);
  int64_t ng = 0;
  for (int64_t i = 0; i < n; i++) {
    if (!i || value_cmp(&k, order[i - 1], order[i])) {
      first[2 * ng] = order[i];
      first[2 * ng + 1] = ng;
      ng++;
    }
    grp[order[i]] = ng - 1;
  }
  qsort(first, (size_t)ng, 2 * sizeof *first, first_cmp);
  /* rank of each group by first occurrence, kept in order[] */
  for (int64_t g = 0; g < ng; g++) order[first[2 * g + 1]] = g;
  eng_shape ys = eng_shape_make(1, (int64_t[]){ng});
  if (str) {
    eng_strbuild b = {0};
    const eng_str *sv = eng_tensor_strs(x);
    for (int64_t g = 0; !rc && g < ng; g++)
      rc = eng_strbuild_add(c, &b, sv[first[2 * g]].data, sv[first[2 * g]].len);
    rc = rc ? (eng_strbuild_free(&b), rc) : eng_strbuild_finish(c, &b, 0, &ys);
  } else {
    rc = eng_kout_raw(c, 0, x->dtype, &ys);
  }
  if (rc || (rc = eng_kout_raw(c, 1, it, &x->shape)) ||
      (counts && (rc = eng_kout(c, 2, it, &ys)))) {
    eng_tensor_release(&st);
    return rc;
  }
  char *y = str ? NULL : eng_tensor_data(&c->out[0]);
  for (int64_t g = 0; y && g < ng; g++)
    memcpy(y + (size_t)g * es, k.data + (size_t)first[2 * g] * es, es);
  void *idx = eng_tensor_data(&c->out[1]), *cnt = counts ? eng_tensor_data(&c->out[2]) : NULL;
  for (int64_t i = 0; i < n; i++) {
    int64_t g = order[grp[i]];
    if (it == ENG_DT_INT32) {
      ((int32_t *)idx)[i] = (int32_t)g;
      if (cnt) ((int32_t *)cnt)[g]++;
    } else {
      ((int64_t *)idx)[i] = g;
      if (cnt) ((int64_t *)cnt)[g]++;
    }
  }
  eng_tensor_release(&st);
  return TD_OK;
}

td_code eng_k_unique(eng_kctx *c) { return unique(c, false); }
td_code eng_k_unique_with_counts(eng_kctx *c) { return unique(c, true); }
