/* The reference device: eng_devapi implemented in plain C on host memory.
 *
 * It is what the GPU executor runs against on machines without a GPU (the
 * tests, and `--device=reference`), so it is strict where a real device
 * would fail in ways the host cannot see: every pointer a primitive is
 * given must lie inside a block this device allocated (a host pointer
 * passed as device memory is the executor bug a GPU would crash on), and
 * each stream counts the calls made on it. Speed is not a goal. */
#include "eng_devref.h"

#include "eng_dtype.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

typedef struct blk {
  char *p;
  size_t n;
  struct blk *next;
} blk;

static mtx_t g_lock;
static once_flag g_once = ONCE_FLAG_INIT;
static blk *g_blocks;
static _Thread_local char g_err[256];

static void lock_init(void) { mtx_init(&g_lock, mtx_plain); }

static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_err, sizeof g_err, fmt, ap);
  va_end(ap);
  return 1;
}

/* True when [p, p+bytes) lies in one allocated block. */
static bool owned(const void *p, size_t bytes) {
  if (!p) return bytes == 0;
  call_once(&g_once, lock_init);
  mtx_lock(&g_lock);
  bool ok = false;
  for (blk *b = g_blocks; b && !ok; b = b->next)
    ok = (const char *)p >= b->p && (const char *)p + bytes <= b->p + b->n;
  mtx_unlock(&g_lock);
  return ok;
}

#define NEED(p, bytes)                                                                   \
  do {                                                                                   \
    if (!owned((p), (bytes))) return fail("%s: %s is not device memory", __func__, #p); \
  } while (0)

static int probe(char *desc, size_t dl, size_t *total, char *why, size_t wl) {
  snprintf(desc, dl, "reference device (host memory)");
  *total = (size_t)1 << 34;
  return 0;
}

static int init(bool allow_tf32) { return 0; }

static void *dalloc(size_t bytes) {
  call_once(&g_once, lock_init);
  blk *b = malloc(sizeof *b);
  char *p = aligned_alloc(64, (bytes + 63) / 64 * 64 + 64);
  if (!b || !p) {
    free(b);
    free(p);
    return NULL;
  }
  /* Poison fresh memory, as a device gives no zeroed blocks either. */
  memset(p, 0xA5, bytes);
  b->p = p;
  b->n = bytes;
  mtx_lock(&g_lock);
  b->next = g_blocks;
  g_blocks = b;
  mtx_unlock(&g_lock);
  return p;
}

static void dfree(void *d) {
  if (!d) return;
  mtx_lock(&g_lock);
  for (blk **pp = &g_blocks; *pp; pp = &(*pp)->next)
    if ((*pp)->p == d) {
      blk *b = *pp;
      *pp = b->next;
      free(b);
      break;
    }
  mtx_unlock(&g_lock);
  free(d);
}

typedef struct ref_stream {
  long calls;
} ref_stream;

static _Atomic long g_stream_calls;

static void *stream_create(void) { return calloc(1, sizeof(ref_stream)); }
static void stream_destroy(void *st) { free(st); }

static void count(void *st) {
  ((ref_stream *)st)->calls++;
  g_stream_calls++;
}

long eng_devref_calls(void) { return g_stream_calls; }

static int upload(void *st, void *d, const void *host, size_t n) {
  NEED(d, n);
  count(st);
  memcpy(d, host, n);
  return 0;
}

static int download(void *st, void *host, const void *d, size_t n) {
  NEED(d, n);
  count(st);
  memcpy(host, d, n);
  return 0;
}

static int sync_(void *st) { return 0; }

static int gemm(void *st, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                int64_t lda, int64_t sa, const float *b, int64_t ldb, int64_t sb, float *c,
                int64_t ldc, int64_t sc, int64_t batch) {
  if (batch <= 0 || m <= 0 || n <= 0) return 0;
  NEED(c, sizeof(float) * (size_t)((batch - 1) * sc + (m - 1) * ldc + n));
  if (k > 0) {
    NEED(a, sizeof(float) * (size_t)((batch - 1) * sa + (ta ? (k - 1) * lda + m : (m - 1) * lda + k)));
    NEED(b, sizeof(float) * (size_t)((batch - 1) * sb + (tb ? (n - 1) * ldb + k : (k - 1) * ldb + n)));
  }
  count(st);
  for (int64_t z = 0; z < batch; z++) {
    const float *A = a + z * sa, *B = b + z * sb;
    float *C = c + z * sc;
    for (int64_t i = 0; i < m; i++)
      for (int64_t j = 0; j < n; j++) {
        double acc = 0;
        for (int64_t p = 0; p < k; p++)
          acc += (double)(ta ? A[p * lda + i] : A[i * lda + p]) *
                 (double)(tb ? B[j * ldb + p] : B[p * ldb + j]);
        C[i * ldc + j] = (float)acc;
      }
  }
  return 0;
}

/* Walks the dense index space of dims, calling back with the offsets of up
 * to three strided operands. */
static int64_t span(int rank, const int64_t *dims, const int64_t *st) {
  int64_t hi = 0;
  for (int d = 0; d < rank; d++)
    if (st[d] > 0) hi += (dims[d] - 1) * st[d];
  return hi + 1;
}

static int64_t lo_off(int rank, const int64_t *dims, const int64_t *st) {
  int64_t lo = 0;
  for (int d = 0; d < rank; d++)
    if (st[d] < 0) lo += (dims[d] - 1) * st[d];
  return lo;
}

static int64_t numel(int rank, const int64_t *dims) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= dims[d];
  return n;
}

static float bin(int op, float a, float b) {
  switch (op) {
    case ENG_DB_ADD: return a + b;
    case ENG_DB_SUB: return a - b;
    case ENG_DB_MUL: return a * b;
    case ENG_DB_DIV: return a / b;
    case ENG_DB_MAX: return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
    case ENG_DB_MIN: return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
    case ENG_DB_SQDIFF: return (a - b) * (a - b);
    case ENG_DB_POW: return powf(a, b);
  }
  return NAN;
}

static int binary(void *st, int op, int rank, const int64_t *dims, const float *a,
                  const int64_t *sa, const float *b, const int64_t *sb, float *y) {
  if (rank < 0 || rank > ENG_DEV_MAX_RANK || op < 0 || op >= ENG_DB_COUNT)
    return fail("binary: bad rank or op");
  int64_t n = numel(rank, dims);
  if (n == 0) return 0;
  NEED(a, sizeof(float) * (size_t)span(rank, dims, sa));
  NEED(b, sizeof(float) * (size_t)span(rank, dims, sb));
  NEED(y, sizeof(float) * (size_t)n);
  count(st);
  int64_t idx[ENG_DEV_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t oa = 0, ob = 0;
    for (int d = 0; d < rank; d++) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    y[i] = bin(op, a[oa], b[ob]);
    for (int d = rank - 1; d >= 0; d--) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return 0;
}

static float un(int op, float x, float alpha) {
  switch (op) {
    case ENG_DU_RELU: return x > 0 ? x : 0;
    case ENG_DU_RELU6: return x > 0 ? (x < 6 ? x : 6) : 0;
    case ENG_DU_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ENG_DU_TANH: return tanhf(x);
    case ENG_DU_EXP: return expf(x);
    case ENG_DU_LOG: return logf(x);
    case ENG_DU_SQRT: return sqrtf(x);
    case ENG_DU_RSQRT: return 1.0f / sqrtf(x);
    case ENG_DU_NEG: return -x;
    case ENG_DU_ABS: return fabsf(x);
    case ENG_DU_SQUARE: return x * x;
    case ENG_DU_ERF: return erff(x);
    case ENG_DU_ERFC: return erfcf(x);
    case ENG_DU_SOFTPLUS: return x > 0 ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case ENG_DU_ELU: return x > 0 ? x : expm1f(x);
    case ENG_DU_SELU:
      return 1.0507009873554805f * (x > 0 ? x : 1.6732632423543772f * expm1f(x));
    case ENG_DU_LEAKY_RELU: return x > 0 ? x : x * alpha;
    case ENG_DU_RECIPROCAL: return 1.0f / x;
    case ENG_DU_SIN: return sinf(x);
    case ENG_DU_COS: return cosf(x);
    case ENG_DU_FLOOR: return floorf(x);
    case ENG_DU_CEIL: return ceilf(x);
    case ENG_DU_ROUND: return nearbyintf(x);
    case ENG_DU_SIGN: return x > 0 ? 1.0f : x < 0 ? -1.0f : x;
    case ENG_DU_EXPM1: return expm1f(x);
    case ENG_DU_LOG1P: return log1pf(x);
    case ENG_DU_SOFTSIGN: return x / (1.0f + fabsf(x));
  }
  return NAN;
}

static int unary(void *st, int op, int64_t n, const float *x, float *y, float alpha) {
  if (op < 0 || op >= ENG_DU_COUNT) return fail("unary: bad op %d", op);
  if (n <= 0) return 0;
  NEED(x, sizeof(float) * (size_t)n);
  NEED(y, sizeof(float) * (size_t)n);
  count(st);
  for (int64_t i = 0; i < n; i++) y[i] = un(op, x[i], alpha);
  return 0;
}

static int copy(void *st, int rank, const int64_t *dims, size_t es, const void *src,
                const int64_t *ss, void *dst, const int64_t *ds) {
  if (rank < 0 || rank > ENG_DEV_MAX_RANK) return fail("copy: bad rank");
  int64_t n = numel(rank, dims);
  if (n == 0) return 0;
  const char *s0 = (const char *)src + lo_off(rank, dims, ss) * (int64_t)es;
  if (!owned(s0, es * (size_t)(span(rank, dims, ss) - lo_off(rank, dims, ss))))
    return fail("copy: src is not device memory");
  NEED(dst, es * (size_t)span(rank, dims, ds));
  count(st);
  int64_t idx[ENG_DEV_MAX_RANK] = {0};
  for (int64_t i = 0; i < n; i++) {
    int64_t os = 0, od = 0;
    for (int d = 0; d < rank; d++) {
      os += idx[d] * ss[d];
      od += idx[d] * ds[d];
    }
    memcpy((char *)dst + od * (int64_t)es, (const char *)src + os * (int64_t)es, es);
    for (int d = rank - 1; d >= 0; d--) {
      if (++idx[d] < dims[d]) break;
      idx[d] = 0;
    }
  }
  return 0;
}

static int fill(void *st, int64_t n, size_t es, const void *value, void *dst) {
  if (n <= 0) return 0;
  NEED(dst, es * (size_t)n);
  count(st);
  for (int64_t i = 0; i < n; i++) memcpy((char *)dst + i * (int64_t)es, value, es);
  return 0;
}

static int im2col(void *st, const eng_dev_window *w, const float *x, float *col) {
  int64_t kk = w->kh * w->kw * w->c;
  NEED(x, sizeof(float) * (size_t)(w->n * w->h * w->w * w->c));
  NEED(col, sizeof(float) * (size_t)(w->n * w->oh * w->ow * kk));
  count(st);
  for (int64_t b = 0; b < w->n; b++)
    for (int64_t oy = 0; oy < w->oh; oy++)
      for (int64_t ox = 0; ox < w->ow; ox++) {
        float *row = col + ((b * w->oh + oy) * w->ow + ox) * kk;
        for (int64_t i = 0; i < w->kh; i++)
          for (int64_t j = 0; j < w->kw; j++) {
            int64_t iy = oy * w->sh + i * w->dh - w->pad_t, ix = ox * w->sw + j * w->dw - w->pad_l;
            float *dst = row + (i * w->kw + j) * w->c;
            if (iy < 0 || iy >= w->h || ix < 0 || ix >= w->w)
              memset(dst, 0, sizeof(float) * (size_t)w->c);
            else
              memcpy(dst, x + ((b * w->h + iy) * w->w + ix) * w->c, sizeof(float) * (size_t)w->c);
          }
      }
  return 0;
}

static int depthwise(void *st, const eng_dev_window *w, const float *x, const float *f, float *y) {
  int64_t oc = w->c * w->mult;
  NEED(x, sizeof(float) * (size_t)(w->n * w->h * w->w * w->c));
  NEED(f, sizeof(float) * (size_t)(w->kh * w->kw * oc));
  NEED(y, sizeof(float) * (size_t)(w->n * w->oh * w->ow * oc));
  count(st);
  for (int64_t b = 0; b < w->n; b++)
    for (int64_t oy = 0; oy < w->oh; oy++)
      for (int64_t ox = 0; ox < w->ow; ox++)
        for (int64_t o = 0; o < oc; o++) {
          int64_t ch = o / w->mult;
          float acc = 0;
          for (int64_t i = 0; i < w->kh; i++)
            for (int64_t j = 0; j < w->kw; j++) {
              int64_t iy = oy * w->sh + i * w->dh - w->pad_t, ix = ox * w->sw + j * w->dw - w->pad_l;
              if (iy < 0 || iy >= w->h || ix < 0 || ix >= w->w) continue;
              acc += x[((b * w->h + iy) * w->w + ix) * w->c + ch] * f[(i * w->kw + j) * oc + o];
            }
          y[((b * w->oh + oy) * w->ow + ox) * oc + o] = acc;
        }
  return 0;
}

static int pool(void *st, const eng_dev_window *w, bool max, const float *x, float *y) {
  NEED(x, sizeof(float) * (size_t)(w->n * w->h * w->w * w->c));
  NEED(y, sizeof(float) * (size_t)(w->n * w->oh * w->ow * w->c));
  count(st);
  for (int64_t b = 0; b < w->n; b++)
    for (int64_t oy = 0; oy < w->oh; oy++)
      for (int64_t ox = 0; ox < w->ow; ox++)
        for (int64_t ch = 0; ch < w->c; ch++) {
          float acc = max ? -INFINITY : 0;
          int64_t taps = 0;
          for (int64_t i = 0; i < w->kh; i++)
            for (int64_t j = 0; j < w->kw; j++) {
              int64_t iy = oy * w->sh + i * w->dh - w->pad_t, ix = ox * w->sw + j * w->dw - w->pad_l;
              if (iy < 0 || iy >= w->h || ix < 0 || ix >= w->w) continue;
              float v = x[((b * w->h + iy) * w->w + ix) * w->c + ch];
              if (max)
                acc = v > acc ? v : acc;
              else
                acc += v;
              taps++;
            }
          y[((b * w->oh + oy) * w->ow + ox) * w->c + ch] = max ? acc : acc / (float)(taps ? taps : 1);
        }
  return 0;
}

static int softmax(void *st, int64_t rows, int64_t cols, bool lg, const float *x, float *y) {
  if (rows <= 0 || cols <= 0) return 0;
  NEED(x, sizeof(float) * (size_t)(rows * cols));
  NEED(y, sizeof(float) * (size_t)(rows * cols));
  count(st);
  for (int64_t r = 0; r < rows; r++) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float mx = xr[0];
    for (int64_t c = 1; c < cols; c++) mx = xr[c] > mx ? xr[c] : mx;
    float sum = 0;
    for (int64_t c = 0; c < cols; c++) sum += expf(xr[c] - mx);
    for (int64_t c = 0; c < cols; c++)
      yr[c] = lg ? (xr[c] - mx) - logf(sum) : expf(xr[c] - mx) / sum;
  }
  return 0;
}

static int reduce(void *st, int op, int64_t outer, int64_t r, int64_t inner, const float *x,
                  float *y) {
  if (op < 0 || op >= ENG_DR_COUNT) return fail("reduce: bad op %d", op);
  if (outer <= 0 || inner <= 0) return 0;
  if (r > 0) NEED(x, sizeof(float) * (size_t)(outer * r * inner));
  NEED(y, sizeof(float) * (size_t)(outer * inner));
  count(st);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      float acc = op == ENG_DR_MAX ? -INFINITY : op == ENG_DR_MIN ? INFINITY : op == ENG_DR_PROD ? 1 : 0;
      for (int64_t k = 0; k < r; k++) {
        float v = x[(o * r + k) * inner + i];
        switch (op) {
          case ENG_DR_MAX: acc = v > acc ? v : acc; break;
          case ENG_DR_MIN: acc = v < acc ? v : acc; break;
          case ENG_DR_PROD: acc *= v; break;
          default: acc += v;
        }
      }
      y[o * inner + i] = op == ENG_DR_MEAN ? acc / (float)(r ? r : 1) : acc;
    }
  return 0;
}

static int epilogue(void *st, int64_t rows, int64_t ch, const eng_dev_epi *e, float *y) {
  if (rows <= 0 || ch <= 0) return 0;
  if (e->n < 0 || e->n > ENG_DEV_EPI_MAX) return fail("epilogue: %d ops", e->n);
  NEED(y, sizeof(float) * (size_t)(rows * ch));
  for (int i = 0; i < e->n; i++)
    if (e->op[i].k) NEED(e->op[i].k, sizeof(float) * (size_t)ch);
  count(st);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < ch; c++) {
      float v = y[r * ch + c];
      for (int i = 0; i < e->n; i++) {
        float k = e->op[i].k ? e->op[i].k[c] : e->op[i].s;
        switch (e->op[i].kind) {
          case ENG_DE_ADD: v = v + k; break;
          case ENG_DE_SUB: v = v - k; break;
          case ENG_DE_MUL: v = v * k; break;
          case ENG_DE_RELU: v = v > 0 ? v : 0; break;
          case ENG_DE_RELU6: v = v > 0 ? (v < 6 ? v : 6) : 0; break;
          default: return fail("epilogue: op kind %d", e->op[i].kind);
        }
      }
      y[r * ch + c] = v;
    }
  return 0;
}

static int gather(void *st, int64_t outer, int64_t n, int64_t limit, int64_t inner, size_t es,
                  const void *params, const int64_t *idx, void *y) {
  if (outer <= 0 || n <= 0 || inner <= 0) return 0;
  NEED(params, es * (size_t)(outer * limit * inner));
  NEED(idx, sizeof(int64_t) * (size_t)n);
  NEED(y, es * (size_t)(outer * n * inner));
  count(st);
  size_t row = es * (size_t)inner;
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < n; i++) {
      if (idx[i] < 0 || idx[i] >= limit) return fail("gather: index %lld out of range", (long long)idx[i]);
      memcpy((char *)y + (size_t)(o * n + i) * row,
             (const char *)params + (size_t)(o * limit + idx[i]) * row, row);
    }
  return 0;
}

static double elem_d(int dt, const void *p, int64_t i) {
  switch (dt) {
    case ENG_DT_FLOAT: return ((const float *)p)[i];
    case ENG_DT_INT32: return ((const int32_t *)p)[i];
    case ENG_DT_INT64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i] != 0;
  }
}

static int64_t elem_i(int dt, const void *p, int64_t i) {
  return dt == ENG_DT_INT64 ? ((const int64_t *)p)[i] : (int64_t)elem_d(dt, p, i);
}

static size_t dt_size(int dt) {
  return dt == ENG_DT_FLOAT || dt == ENG_DT_INT32 ? 4 : dt == ENG_DT_INT64 ? 8 : 1;
}

/* Offsets of a dense index into up to three strided operands. */
static void offsets(int rank, const int64_t *dims, int64_t i, const int64_t *const *st, int n,
                    int64_t *off) {
  for (int k = 0; k < n; k++) off[k] = 0;
  for (int d = rank - 1; d >= 0; d--) {
    int64_t idx = i % dims[d];
    i /= dims[d];
    for (int k = 0; k < n; k++) off[k] += idx * st[k][d];
  }
}

static int compare(void *st, int op, int dt, int rank, const int64_t *dims, const void *a,
                   const int64_t *sa, const void *b, const int64_t *sb, uint8_t *y) {
  if (rank < 0 || rank > ENG_DEV_MAX_RANK || op < 0 || op >= ENG_DC_COUNT)
    return fail("compare: bad rank or op");
  int64_t n = numel(rank, dims);
  if (n == 0) return 0;
  NEED(a, dt_size(dt) * (size_t)span(rank, dims, sa));
  NEED(b, dt_size(dt) * (size_t)span(rank, dims, sb));
  NEED(y, (size_t)n);
  count(st);
  const int64_t *strides[2] = {sa, sb};
  for (int64_t i = 0; i < n; i++) {
    int64_t off[2];
    offsets(rank, dims, i, strides, 2, off);
    bool r;
    if (dt == ENG_DT_INT64 || dt == ENG_DT_INT32) {
      int64_t x = elem_i(dt, a, off[0]), z = elem_i(dt, b, off[1]);
      r = op == ENG_DC_LESS ? x < z : op == ENG_DC_LESS_EQUAL ? x <= z : op == ENG_DC_GREATER ? x > z
        : op == ENG_DC_GREATER_EQUAL ? x >= z : op == ENG_DC_EQUAL ? x == z : op == ENG_DC_NOT_EQUAL ? x != z
        : op == ENG_DC_AND ? (x && z) : (x || z);
    } else {
      double x = elem_d(dt, a, off[0]), z = elem_d(dt, b, off[1]);
      r = op == ENG_DC_LESS ? x < z : op == ENG_DC_LESS_EQUAL ? x <= z : op == ENG_DC_GREATER ? x > z
        : op == ENG_DC_GREATER_EQUAL ? x >= z : op == ENG_DC_EQUAL ? x == z : op == ENG_DC_NOT_EQUAL ? x != z
        : op == ENG_DC_AND ? (x != 0 && z != 0) : (x != 0 || z != 0);
    }
    y[i] = r;
  }
  return 0;
}

static int select_(void *st, int rank, const int64_t *dims, const uint8_t *c, const int64_t *sc,
                   size_t es, const void *a, const int64_t *sa, const void *b, const int64_t *sb,
                   void *y) {
  if (rank < 0 || rank > ENG_DEV_MAX_RANK) return fail("select: bad rank");
  int64_t n = numel(rank, dims);
  if (n == 0) return 0;
  NEED(c, (size_t)span(rank, dims, sc));
  NEED(a, es * (size_t)span(rank, dims, sa));
  NEED(b, es * (size_t)span(rank, dims, sb));
  NEED(y, es * (size_t)n);
  count(st);
  const int64_t *strides[3] = {sc, sa, sb};
  for (int64_t i = 0; i < n; i++) {
    int64_t off[3];
    offsets(rank, dims, i, strides, 3, off);
    const char *src = c[off[0]] ? (const char *)a + off[1] * (int64_t)es : (const char *)b + off[2] * (int64_t)es;
    memcpy((char *)y + i * (int64_t)es, src, es);
  }
  return 0;
}

static int cast(void *st, int64_t n, int src, int dst, const void *x, void *y) {
  if (n <= 0) return 0;
  NEED(x, dt_size(src) * (size_t)n);
  NEED(y, dt_size(dst) * (size_t)n);
  count(st);
  for (int64_t i = 0; i < n; i++) {
    if (dst == ENG_DT_BOOL) {
      ((uint8_t *)y)[i] = src == ENG_DT_INT64 ? ((const int64_t *)x)[i] != 0 : elem_d(src, x, i) != 0;
    } else if (dst == ENG_DT_FLOAT) {
      ((float *)y)[i] = src == ENG_DT_INT64 ? (float)((const int64_t *)x)[i] : (float)elem_d(src, x, i);
    } else {
      int64_t v;
      if (src == ENG_DT_FLOAT) {
        double f = ((const float *)x)[i];
        v = f != f ? 0 : f >= 9223372036854775807.0 ? INT64_MAX : f <= -9223372036854775808.0 ? INT64_MIN : (int64_t)f;
      } else {
        v = elem_i(src, x, i);
      }
      if (dst == ENG_DT_INT32)
        ((int32_t *)y)[i] = (int32_t)v;
      else
        ((int64_t *)y)[i] = v;
    }
  }
  return 0;
}

static const char *error(void) { return g_err; }

static const eng_devapi g_api = {
    .version = ENG_DEVAPI_VERSION,
    .name = "reference",
    .probe = probe,
    .init = init,
    .alloc = dalloc,
    .free = dfree,
    .stream_create = stream_create,
    .stream_destroy = stream_destroy,
    .upload = upload,
    .download = download,
    .sync = sync_,
    .gemm = gemm,
    .binary = binary,
    .unary = unary,
    .copy = copy,
    .fill = fill,
    .im2col = im2col,
    .depthwise = depthwise,
    .pool = pool,
    .softmax = softmax,
    .reduce = reduce,
    .epilogue = epilogue,
    .gather = gather,
    .compare = compare,
    .select = select_,
    .cast = cast,
    .error = error,
};

const eng_devapi *eng_devref_api(void) { return &g_api; }
