/* eng_devapi: the primitives an accelerator offers the engine.
 *
 * The GPU executor (eng_gpu.c) runs a plan's steps by composing these few
 * primitives (a batched GEMM, broadcasting elementwise maps, a strided copy,
 * im2col, depthwise convolution, pooling, softmax, reductions); everything
 * else runs on the CPU with explicit copies. One table implements them:
 *
 *   - the CUDA backend (engine/device/cuda/, built by nvcc into the
 *     plug-in libtensord_cuda.so, which eng_device.c loads with dlopen, so the
 *     daemon itself never links a CUDA library);
 *   - the reference device (eng_devref.c): plain C on host memory, with the
 *     same contract, so the executor, the plug-in loading and the op
 *     lowering are tested on machines without a GPU.
 *
 * This header includes no CUDA header and is the plug-in's whole ABI: the
 * plug-in exports `const eng_devapi *tensord_devapi(void)` returning a
 * table whose `version` is ENG_DEVAPI_VERSION.
 *
 * Conventions: pointers named d* are device memory; tensors are dense and
 * row-major; float means IEEE float32; strides count elements. Every call
 * taking a stream `st` is ordered on that stream and may return before the
 * work is done; `download` and `sync` wait. Calls return 0 on success, or
 * non-zero with `error()` describing the failure (per thread). A stream is
 * used by one thread at a time. */
#ifndef ENG_DEVAPI_H
#define ENG_DEVAPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ENG_DEVAPI_VERSION 4
#define ENG_DEVAPI_SYMBOL "tensord_devapi"
#define ENG_DEV_MAX_RANK 8

/* Elementwise binary maps, y = a OP b. */
enum {
  ENG_DB_ADD,
  ENG_DB_SUB,
  ENG_DB_MUL,
  ENG_DB_DIV,
  ENG_DB_MAX,
  ENG_DB_MIN,
  ENG_DB_SQDIFF, /* (a - b)^2 */
  ENG_DB_POW,
  ENG_DB_COUNT
};

/* Elementwise unary maps, y = f(x) (alpha: LeakyRelu's slope). */
enum {
  ENG_DU_RELU,
  ENG_DU_RELU6,
  ENG_DU_SIGMOID,
  ENG_DU_TANH,
  ENG_DU_EXP,
  ENG_DU_LOG,
  ENG_DU_SQRT,
  ENG_DU_RSQRT,
  ENG_DU_NEG,
  ENG_DU_ABS,
  ENG_DU_SQUARE,
  ENG_DU_ERF,
  ENG_DU_ERFC,
  ENG_DU_SOFTPLUS,
  ENG_DU_ELU,
  ENG_DU_SELU,
  ENG_DU_LEAKY_RELU,
  ENG_DU_RECIPROCAL,
  ENG_DU_SIN,
  ENG_DU_COS,
  ENG_DU_FLOOR,
  ENG_DU_CEIL,
  ENG_DU_ROUND, /* half to even, as TensorFlow rounds */
  ENG_DU_SIGN,
  ENG_DU_EXPM1,
  ENG_DU_LOG1P,
  ENG_DU_SOFTSIGN,
  ENG_DU_COUNT
};

/* Comparisons (operands of one dtype: float, int32 or int64) and logic
 * (bool operands, one byte each); results are bool bytes, 1 or 0. */
enum {
  ENG_DC_LESS,
  ENG_DC_LESS_EQUAL,
  ENG_DC_GREATER,
  ENG_DC_GREATER_EQUAL,
  ENG_DC_EQUAL,
  ENG_DC_NOT_EQUAL,
  ENG_DC_AND,
  ENG_DC_OR,
  ENG_DC_COUNT
};

/* Reductions over the middle axis of [outer, r, inner]. */
enum { ENG_DR_SUM, ENG_DR_MEAN, ENG_DR_MAX, ENG_DR_MIN, ENG_DR_PROD, ENG_DR_COUNT };

/* A fused per-channel chain applied in place to y[rows, ch]: op by op,
 * y = y + k, y - k, y * k (k: ch device floats, or the scalar s when k is
 * NULL), relu, relu6. Bias, batch norm and activation after a convolution
 * or matrix product in one pass instead of one launch each. */
enum { ENG_DE_ADD, ENG_DE_SUB, ENG_DE_MUL, ENG_DE_RELU, ENG_DE_RELU6 };
#define ENG_DEV_EPI_MAX 8
typedef struct eng_dev_epi {
  int n;
  struct {
    int kind;
    const float *k;
    float s;
  } op[ENG_DEV_EPI_MAX];
} eng_dev_epi;

/* A 2-D window over an NHWC input: convolution, depthwise convolution and
 * pooling share it. pad_t / pad_l are the zero rows / columns before the
 * input (SAME's split already applied); window taps outside the input are
 * skipped (pooling) or read as zero (convolution). */
typedef struct eng_dev_window {
  int64_t n, h, w, c;   /* input */
  int64_t kh, kw;       /* window */
  int64_t oh, ow;       /* output */
  int64_t sh, sw;       /* strides */
  int64_t dh, dw;       /* dilations (1 for pooling) */
  int64_t pad_t, pad_l;
  int64_t mult;         /* depthwise channel multiplier */
} eng_dev_window;

typedef struct eng_devapi {
  int version;
  const char *name;
  /* 0 when a device is usable: desc names it, *total its memory in bytes.
   * Otherwise non-zero and `why` says why (no driver, no device, ...). */
  int (*probe)(char *desc, size_t desc_len, size_t *total, char *why, size_t why_len);
  /* Called once after a successful probe. allow_tf32: GEMMs may use TF32
   * tensor cores (otherwise exact FP32 math). */
  int (*init)(bool allow_tf32);
  void *(*alloc)(size_t bytes); /* NULL when out of memory */
  void (*free)(void *d);
  void *(*stream_create)(void);
  void (*stream_destroy)(void *st);
  /* Host to device. The host buffer may be reused as soon as this returns. */
  int (*upload)(void *st, void *d, const void *host, size_t bytes);
  /* Device to host; complete when it returns. */
  int (*download)(void *st, void *host, const void *d, size_t bytes);
  int (*sync)(void *st);

  /* C_i = op(A_i) op(B_i) for i < batch; op transposes when ta / tb.
   * A_i = a + i*sa with rows lda apart (stored shape [m,k], or [k,m] when
   * ta), likewise B (ldb, sb; [k,n] or [n,k]) and C ([m,n], ldc, sc).
   * A stride of 0 repeats one matrix for every i. */
  int (*gemm)(void *st, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
              int64_t lda, int64_t sa, const float *b, int64_t ldb, int64_t sb, float *c,
              int64_t ldc, int64_t sc, int64_t batch);
  /* y[idx] = a[idx . sa] OP b[idx . sb] over the dense output dims; a
   * stride of 0 broadcasts. y may equal a when sa is y's own layout. */
  int (*binary)(void *st, int op, int rank, const int64_t *dims, const float *a,
                const int64_t *sa, const float *b, const int64_t *sb, float *y);
  int (*unary)(void *st, int op, int64_t n, const float *x, float *y, float alpha);
  /* dst[idx . ds] = src[idx . ss] over dims, elements of es bytes (1, 2,
   * 4 or 8); source strides may be 0 or negative. */
  int (*copy)(void *st, int rank, const int64_t *dims, size_t es, const void *src,
              const int64_t *ss, void *dst, const int64_t *ds);
  /* n elements of es bytes, each a copy of *value (host memory). */
  int (*fill)(void *st, int64_t n, size_t es, const void *value, void *dst);
  /* col[(b*oh + y)*ow + x][(i*kw + j)*c + ch]: the conv window of output
   * pixel (b, y, x), zeros outside the input. */
  int (*im2col)(void *st, const eng_dev_window *wd, const float *x, float *col);
  /* y[b,y,x,ch*mult+q] = sum_{i,j} x[b, y*sh+i*dh-pad_t, x*sw+j*dw-pad_l, ch]
   *                                 * w[i, j, ch, q] */
  int (*depthwise)(void *st, const eng_dev_window *wd, const float *x, const float *w, float *y);
  /* Max or average over the window's taps inside the input (the average
   * divides by their count, as TensorFlow's AvgPool does). */
  int (*pool)(void *st, const eng_dev_window *wd, bool max, const float *x, float *y);
  /* Row-wise softmax (or log-softmax) of [rows, cols]. */
  int (*softmax)(void *st, int64_t rows, int64_t cols, bool log, const float *x, float *y);
  /* y[o, i] = reduce_r x[o, r, i]. r may be 0 (identity of the reduction). */
  int (*reduce)(void *st, int op, int64_t outer, int64_t r, int64_t inner, const float *x,
                float *y);
  int (*epilogue)(void *st, int64_t rows, int64_t ch, const eng_dev_epi *e, float *y);
  /* y[o, i, :] = params[o, idx[i], :] with params [outer, limit, inner] of
   * es-byte elements and idx n int64 (device) already checked to lie in
   * [0, limit). */
  int (*gather)(void *st, int64_t outer, int64_t n, int64_t limit, int64_t inner, size_t es,
                const void *params, const int64_t *idx, void *y);
  /* y[idx] = a[idx . sa] OP b[idx . sb] as bool bytes; dt is the
   * operands' dtype (TensorFlow's number: 1 float, 3 int32, 9 int64, 10
   * bool for AND / OR). */
  int (*compare)(void *st, int op, int dt, int rank, const int64_t *dims, const void *a,
                 const int64_t *sa, const void *b, const int64_t *sb, uint8_t *y);
  /* y[idx] = c[idx . sc] ? a[idx . sa] : b[idx . sb], es-byte elements. */
  int (*select)(void *st, int rank, const int64_t *dims, const uint8_t *c, const int64_t *sc,
                size_t es, const void *a, const int64_t *sa, const void *b, const int64_t *sb,
                void *y);
  /* n elements from dtype src to dtype dst (float, int32, int64, bool):
   * float to integer truncates toward zero, NaN gives 0 and values out of
   * range saturate; anything to bool is "not zero". */
  int (*cast)(void *st, int64_t n, int src, int dst, const void *x, void *y);
  const char *(*error)(void);
} eng_devapi;

typedef const eng_devapi *(*eng_devapi_fn)(void);

#endif
