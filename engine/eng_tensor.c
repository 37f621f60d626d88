#include "eng_tensor.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "eng_mem.h"

#define ENG_ALIGN 64

/* The header sits in the first ENG_ALIGN bytes of the allocation, so the data
 * that follows is aligned for any vector width the kernels use. */
struct eng_buffer {
  atomic_int refs;
  int cls;           /* size class, or -1 when too large to recycle */
  size_t size;       /* bytes in use */
  size_t cap;        /* bytes allocated */
  eng_buffer *next;  /* free-list link while cached */
  void (*dtor)(void *data); /* variants: releases what the payload holds */
};

static void *buf_data(const eng_buffer *b) { return (char *)b + ENG_ALIGN; }

/* Recycling: a freed buffer goes to a small cache owned by the freeing
 * thread, by size class (four classes per power of two, so at most 25%
 * slack), and the next allocation of that class on that thread takes it
 * back. A serving thread running the same plan again and again therefore
 * stops calling malloc after its first request. The cache holds at most
 * CACHE_DEPTH buffers per class and CACHE_BYTES in all; the rest is freed.
 * A thread's cache is freed when the thread exits. */
#define CACHE_CLASSES 120
#define CACHE_DEPTH 16
#define CACHE_BYTES ((size_t)256 << 20)

typedef struct buf_cache {
  eng_buffer *head[CACHE_CLASSES];
  int depth[CACHE_CLASSES];
  size_t bytes;
} buf_cache;

static tss_t cache_key;
static once_flag cache_once = ONCE_FLAG_INIT;

static void cache_free(void *arg) {
  buf_cache *c = arg;
  for (int k = 0; c && k < CACHE_CLASSES; k++)
    for (eng_buffer *b = c->head[k], *n; b; b = n) {
      n = b->next;
      free(b);
    }
  free(c);
}

static void cache_init(void) { tss_create(&cache_key, cache_free); }

void eng_tensor_cache_flush(void) {
  call_once(&cache_once, cache_init);
  buf_cache *c = tss_get(cache_key);
  if (!c) return;
  tss_set(cache_key, NULL);
  cache_free(c);
}

static buf_cache *cache_get(void) {
  call_once(&cache_once, cache_init);
  buf_cache *c = tss_get(cache_key);
  if (!c && (c = calloc(1, sizeof *c)) && tss_set(cache_key, c) != thrd_success) {
    free(c);
    c = NULL;
  }
  return c;
}

/* Class of a byte count and its capacity; -1 past the last class. */
static int size_class(size_t size, size_t *cap) {
  if (size <= 64) {
    *cap = 64;
    return 0;
  }
  int e = 63 - __builtin_clzll((unsigned long long)(size - 1)); /* 2^e < size <= 2^(e+1) */
  size_t sub = ((size - 1) >> (e - 2)) & 3;
  int cls = (e - 6) * 4 + (int)sub + 1;
  if (cls >= CACHE_CLASSES) return -1;
  *cap = (4 + sub + 1) << (e - 2);
  return cls;
}

static eng_buffer *buf_new(size_t size) {
  void *p = NULL;
  if (size > SIZE_MAX / 2 - ENG_ALIGN) return NULL;
  size_t cap = size;
  int cls = size_class(size, &cap);
  if (cls >= 0) {
    buf_cache *c = cache_get();
    eng_buffer *b = c ? c->head[cls] : NULL;
    if (b) {
      c->head[cls] = b->next;
      c->depth[cls]--;
      c->bytes -= b->cap;
      atomic_init(&b->refs, 1);
      b->size = size;
      b->dtor = NULL;
      return b;
    }
  }
  if (!(p = eng_mem_alloc(ENG_ALIGN, ENG_ALIGN + cap, ENG_ALIGN + size))) return NULL;
  eng_buffer *b = p;
  atomic_init(&b->refs, 1);
  b->cls = cls;
  b->size = size;
  b->cap = cap;
  b->dtor = NULL;
  return b;
}

static void buf_free(eng_buffer *b) {
  buf_cache *c = b->cls >= 0 ? cache_get() : NULL;
  if (c && c->depth[b->cls] < CACHE_DEPTH && c->bytes + b->cap <= CACHE_BYTES) {
    b->next = c->head[b->cls];
    c->head[b->cls] = b;
    c->depth[b->cls]++;
    c->bytes += b->cap;
    return;
  }
  free(b);
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
  bool huge = false, empty = false;
  for (int i = 0; i < s->rank; i++) {
    if (s->dim[i] < 0) return -1;
    /* A count past int64 (a shape from a request) saturates: allocating
     * it fails cleanly in check_shape. The wrapped product may be 0
     * ([2^62, 2^62]), so only a zero dim makes the tensor empty. */
    empty |= s->dim[i] == 0;
    if (__builtin_mul_overflow(n, s->dim[i], &n)) huge = true;
  }
  return empty ? 0 : huge ? INT64_MAX : n;
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

static td_code alloc_numeric(eng_tensor *t, eng_dtype dt, const eng_shape *shape, bool zero,
                             td_err *err);

td_code eng_tensor_alloc_raw(eng_tensor *t, eng_dtype dt, const eng_shape *shape, td_err *err) {
  if (dt == ENG_DT_STRING) return eng_tensor_alloc(t, dt, shape, err);
  return alloc_numeric(t, dt, shape, false, err);
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
  return alloc_numeric(t, dt, shape, true, err);
}

static td_code alloc_numeric(eng_tensor *t, eng_dtype dt, const eng_shape *shape, bool zero,
                             td_err *err) {
  int64_t n;
  td_code rc = check_shape(shape, &n, err);
  if (rc) return rc;
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
  if (zero) memset(buf_data(b), 0, b->size);
  *t = (eng_tensor){.dtype = dt, .shape = *shape, .buf = b};
  return TD_OK;
}

size_t eng_tensor_strings_size(int64_t n, size_t total) {
  if (n < 0) n = 0;
  unsigned __int128 b = (unsigned __int128)(uint64_t)n * (sizeof(eng_str) + 1) + total;
  return b > SIZE_MAX ? SIZE_MAX : (size_t)b;
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

td_code eng_tensor_alloc_hollow(eng_tensor *t, eng_dtype dt, const eng_shape *shape, td_err *err) {
  int64_t n;
  td_code rc = check_shape(shape, &n, err);
  if (rc) return rc;
  if (dt == ENG_DT_STRING || !eng_dtype_size(dt))
    return td_err_set(err, TD_INVALID_ARGUMENT, "a hollow tensor must be numeric");
  /* Not from the recycling cache: this buffer must stay distinct (and
   * empty) for as long as the tensor lives. */
  eng_buffer *b = NULL;
  if (posix_memalign((void **)&b, ENG_ALIGN, ENG_ALIGN) != 0)
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  atomic_init(&b->refs, 1);
  b->cls = -1;
  b->size = 0;
  b->cap = 0;
  b->dtor = NULL;
  *t = (eng_tensor){.dtype = dt, .shape = *shape, .buf = b};
  return TD_OK;
}

int eng_tensor_refs(const eng_tensor *t) {
  return t->buf ? atomic_load_explicit(&t->buf->refs, memory_order_acquire) : 0;
}

bool eng_tensor_hollow(const eng_tensor *t) {
  return t->buf && t->dtype != ENG_DT_STRING && t->buf->size < eng_tensor_nbytes(t);
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
  if (t->buf && atomic_fetch_sub_explicit(&t->buf->refs, 1, memory_order_acq_rel) == 1) {
    if (t->buf->dtor) t->buf->dtor(buf_data(t->buf));
    buf_free(t->buf);
  }
  t->buf = NULL;
}

td_code eng_tensor_alloc_variant(eng_tensor *t, size_t bytes, void (*dtor)(void *data),
                                 td_err *err) {
  eng_buffer *b = buf_new(bytes ? bytes : 1);
  if (!b) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  memset(buf_data(b), 0, b->size);
  b->dtor = dtor;
  *t = (eng_tensor){.dtype = ENG_DT_VARIANT, .shape = eng_shape_scalar(), .buf = b};
  return TD_OK;
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

eng_dtype eng_dtype_widened(eng_dtype dt) {
  return dt == ENG_DT_HALF || dt == ENG_DT_BFLOAT16 ? ENG_DT_FLOAT : dt;
}

/* IEEE binary16 to binary32, exactly (subnormals, infinities, NaN). */
static float half_to_float(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (man << 13);
  } else if (exp) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (!man) {
    bits = sign;
  } else { /* subnormal: normalise */
    int e = -1;
    do {
      e++;
      man <<= 1;
    } while (!(man & 0x400));
    bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3FF) << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

td_code eng_tensor_widen(eng_tensor *t, td_err *err) {
  if (t->dtype != ENG_DT_HALF && t->dtype != ENG_DT_BFLOAT16) return TD_OK;
  eng_tensor w;
  td_code rc = eng_tensor_alloc_raw(&w, ENG_DT_FLOAT, &t->shape, err);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(t);
  const uint16_t *src = eng_tensor_data(t);
  float *dst = eng_tensor_data(&w);
  for (int64_t i = 0; i < n; i++) {
    if (t->dtype == ENG_DT_HALF) {
      dst[i] = half_to_float(src[i]);
    } else {
      uint32_t bits = (uint32_t)src[i] << 16;
      memcpy(&dst[i], &bits, sizeof bits);
    }
  }
  eng_tensor_release(t);
  *t = w;
  return TD_OK;
}
