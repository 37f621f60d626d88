#include "eng_tensor.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENG_ALIGN 64

/* The header sits in the first ENG_ALIGN bytes of the allocation, so the data
 * that follows is aligned for any vector width the kernels use. */
struct eng_buffer {
  atomic_int refs;
  size_t size;
};

static void *buf_data(const eng_buffer *b) { return (char *)b + ENG_ALIGN; }

static eng_buffer *buf_new(size_t size) {
  void *p = NULL;
  if (size > SIZE_MAX - ENG_ALIGN) return NULL;
  if (posix_memalign(&p, ENG_ALIGN, ENG_ALIGN + size) != 0) return NULL;
  eng_buffer *b = p;
  atomic_init(&b->refs, 1);
  b->size = size;
  return b;
}

eng_shape eng_shape_make(int rank, const int64_t *dims) {
  if (rank < 0 || rank > ENG_MAX_RANK) return eng_shape_unknown();
  eng_shape s = {.rank = rank};
  for (int i = 0; i < rank && i < ENG_MAX_RANK; i++) s.dim[i] = dims[i];
  return s;
}

eng_shape eng_shape_scalar(void) { return (eng_shape){.rank = 0}; }
eng_shape eng_shape_unknown(void) { return (eng_shape){.rank = -1}; }

int64_t eng_shape_numel(const eng_shape *s) {
  if (s->rank < 0) return -1;
  int64_t n = 1;
  for (int i = 0; i < s->rank; i++) {
    if (s->dim[i] < 0) return -1;
    n *= s->dim[i];
  }
  return n;
}

bool eng_shape_equal(const eng_shape *a, const eng_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

bool eng_shape_fits(const eng_shape *declared, const eng_shape *actual) {
  if (declared->rank < 0) return true;
  if (declared->rank != actual->rank) return false;
  for (int i = 0; i < declared->rank; i++)
    if (declared->dim[i] >= 0 && declared->dim[i] != actual->dim[i]) return false;
  return true;
}

const char *eng_shape_str(const eng_shape *s, char *buf, size_t n) {
  if (s->rank < 0) {
    snprintf(buf, n, "<unknown>");
    return buf;
  }
  size_t off = 0;
  off += (size_t)snprintf(buf, n, "[");
  for (int i = 0; i < s->rank && off < n; i++) {
    if (s->dim[i] < 0)
      off += (size_t)snprintf(buf + off, n - off, "%s?", i ? "," : "");
    else
      off += (size_t)snprintf(buf + off, n - off, "%s%lld", i ? "," : "", (long long)s->dim[i]);
  }
  if (off < n) snprintf(buf + off, n - off, "]");
  return buf;
}

static td_code check_shape(const eng_shape *shape, int64_t *numel, td_err *err) {
  char sb[128];
  if (shape->rank < 0 || shape->rank > ENG_MAX_RANK)
    return td_err_set(err, TD_INVALID_ARGUMENT, "cannot allocate a tensor of rank %d", shape->rank);
  int64_t n = 1;
  for (int i = 0; i < shape->rank; i++) {
    if (shape->dim[i] < 0)
      return td_err_set(err, TD_INVALID_ARGUMENT, "cannot allocate a tensor of shape %s",
                        eng_shape_str(shape, sb, sizeof sb));
    if (shape->dim[i] && n > INT64_MAX / shape->dim[i])
      return td_err_set(err, TD_INVALID_ARGUMENT, "tensor shape %s is too large",
                        eng_shape_str(shape, sb, sizeof sb));
    n *= shape->dim[i];
  }
  *numel = n;
  return TD_OK;
}

td_code eng_tensor_alloc(eng_tensor *t, eng_dtype dt, const eng_shape *shape, td_err *err) {
  int64_t n;
  td_code rc = check_shape(shape, &n, err);
  if (rc) return rc;
  if (dt == ENG_DT_STRING) {
    size_t *lens = calloc((size_t)(n ? n : 1), sizeof *lens);
    if (!lens) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    rc = eng_tensor_alloc_strings(t, shape, lens, err);
    free(lens);
    return rc;
  }
  size_t es = eng_dtype_size(dt);
  if (!es)
    return td_err_set(err, TD_UNIMPLEMENTED, "tensors of type %s are not supported",
                      eng_dtype_name(dt));
  if ((uint64_t)n > SIZE_MAX / es)
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "tensor of %lld elements is too large",
                      (long long)n);
  eng_buffer *b = buf_new((size_t)n * es);
  if (!b) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory allocating %lld bytes",
                            (long long)((size_t)n * es));
  memset(buf_data(b), 0, b->size);
  *t = (eng_tensor){.dtype = dt, .shape = *shape, .buf = b};
  return TD_OK;
}

td_code eng_tensor_alloc_strings(eng_tensor *t, const eng_shape *shape, const size_t *lens,
                                 td_err *err) {
  int64_t n;
  td_code rc = check_shape(shape, &n, err);
  if (rc) return rc;
  if ((uint64_t)n > (SIZE_MAX / 2) / sizeof(eng_str))
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "string tensor of %lld elements is too large",
                      (long long)n);
  size_t total = (size_t)n * sizeof(eng_str);
  for (int64_t i = 0; i < n; i++) {
    if (lens[i] > SIZE_MAX - total - 1)
      return td_err_set(err, TD_RESOURCE_EXHAUSTED, "string tensor too large");
    total += lens[i] + 1; /* keep each string NUL-terminated for convenience */
  }
  eng_buffer *b = buf_new(total);
  if (!b) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  eng_str *strs = buf_data(b);
  char *bytes = (char *)(strs + n);
  for (int64_t i = 0; i < n; i++) {
    strs[i].data = bytes;
    strs[i].len = lens[i];
    bytes[lens[i]] = '\0';
    bytes += lens[i] + 1;
  }
  *t = (eng_tensor){.dtype = ENG_DT_STRING, .shape = *shape, .buf = b};
  return TD_OK;
}

td_code eng_tensor_alloc_handle(eng_tensor *t, int64_t slot, bool is_ref, td_err *err) {
  eng_buffer *b = buf_new(sizeof(int64_t));
  if (!b) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  memcpy(buf_data(b), &slot, sizeof slot);
  *t = (eng_tensor){.dtype = ENG_DT_RESOURCE, .is_ref = is_ref, .shape = {0}, .buf = b};
  return TD_OK;
}

void *eng_tensor_data(const eng_tensor *t) { return t->buf ? buf_data(t->buf) : NULL; }

eng_str *eng_tensor_strs(const eng_tensor *t) {
  return t->dtype == ENG_DT_STRING ? eng_tensor_data(t) : NULL;
}

char *eng_tensor_str_bytes(const eng_tensor *t, int64_t i) {
  return (char *)eng_tensor_strs(t)[i].data;
}

int64_t eng_tensor_handle(const eng_tensor *t) {
  int64_t slot;
  memcpy(&slot, eng_tensor_data(t), sizeof slot);
  return slot;
}

int64_t eng_tensor_numel(const eng_tensor *t) { return eng_shape_numel(&t->shape); }

size_t eng_tensor_nbytes(const eng_tensor *t) {
  return (size_t)eng_tensor_numel(t) * eng_dtype_size(t->dtype);
}

eng_tensor eng_tensor_share(const eng_tensor *t) {
  if (t->buf) atomic_fetch_add_explicit(&t->buf->refs, 1, memory_order_relaxed);
  return *t;
}

void eng_tensor_release(eng_tensor *t) {
  if (t->buf && atomic_fetch_sub_explicit(&t->buf->refs, 1, memory_order_acq_rel) == 1)
    free(t->buf);
  t->buf = NULL;
}

td_code eng_tensor_copy(eng_tensor *dst, const eng_tensor *src, td_err *err) {
  td_code rc;
  if (src->dtype == ENG_DT_STRING) {
    int64_t n = eng_tensor_numel(src);
    size_t *lens = calloc((size_t)(n ? n : 1), sizeof *lens);
    if (!lens) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    eng_str *s = eng_tensor_strs(src);
    for (int64_t i = 0; i < n; i++) lens[i] = s[i].len;
    rc = eng_tensor_alloc_strings(dst, &src->shape, lens, err);
    free(lens);
    if (rc) return rc;
    for (int64_t i = 0; i < n; i++) memcpy(eng_tensor_str_bytes(dst, i), s[i].data, s[i].len);
    return TD_OK;
  }
  if (src->dtype == ENG_DT_RESOURCE)
    return eng_tensor_alloc_handle(dst, eng_tensor_handle(src), src->is_ref, err);
  rc = eng_tensor_alloc(dst, src->dtype, &src->shape, err);
  if (rc) return rc;
  memcpy(eng_tensor_data(dst), eng_tensor_data(src), eng_tensor_nbytes(src));
  return TD_OK;
}
