// The CUDA backend: eng_devapi (engine/device/eng_devapi.h) on one NVIDIA GPU,
// built by nvcc into the plug-in libtensord_cuda.so, which the daemon
// dlopens (engine/device/eng_device.c). The CUDA runtime is linked statically;
// cuBLAS is opened with dlopen only once a GPU has been found, so probing a
// machine without one costs a few hundred kilobytes, not the ~150 MB that
// mapping and relocating cuBLAS takes.
//
// GEMMs go to cuBLAS (strided-batched for attention), with TF32 tensor
// cores only when asked for; every other primitive is a CUDA C kernel
// below. Each stream owns a cuBLAS handle (handles are not shared across
// threads) and a pinned staging buffer through which uploads and downloads
// pass, so copies overlap with the host's work and need no allocation.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <dlfcn.h>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>

extern "C" {
#include "eng_devapi.h"
}

// TensorFlow's DataType numbers for the dtypes compare / cast take.
enum { DT_FLOAT = 1, DT_INT32 = 3, DT_INT64 = 9, DT_BOOL = 10 };

namespace {

thread_local char g_err[512];
bool g_tf32 = false;
const size_t kStaging = size_t(8) << 20;
const int kThreads = 256;

int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(g_err, sizeof g_err, fmt, ap);
  va_end(ap);
  return 1;
}

int cuda_fail(const char *what, cudaError_t e) {
  return fail("%s: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

#define CK(call, what)                          \
  do {                                          \
    cudaError_t e_ = (call);                    \
    if (e_ != cudaSuccess) return cuda_fail(what, e_); \
  } while (0)

#define LAUNCHED(what)                                  \
  do {                                                  \
    cudaError_t e_ = cudaGetLastError();                \
    if (e_ != cudaSuccess) return cuda_fail(what, e_);  \
  } while (0)

// The cuBLAS entry points used, resolved from libcublas.so.<major>.
struct Blas {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetStream_v2) set_stream;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
  decltype(&cublasSgemmStridedBatched) sgemm_batched;
} blas;

#define CU_STR2(x) #x
#define CU_STR(x) CU_STR2(x)

int load_blas() {
  if (blas.sgemm) return 0;
  const char *name = "libcublas.so." CU_STR(CUBLAS_VER_MAJOR);
  void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (!h) return fail("cannot load %s: %s", name, dlerror());
  Blas b;
  *(void **)&b.create = dlsym(h, "cublasCreate_v2");
  *(void **)&b.destroy = dlsym(h, "cublasDestroy_v2");
  *(void **)&b.set_stream = dlsym(h, "cublasSetStream_v2");
  *(void **)&b.set_math_mode = dlsym(h, "cublasSetMathMode");
  *(void **)&b.sgemm = dlsym(h, "cublasSgemm_v2");
  *(void **)&b.sgemm_batched = dlsym(h, "cublasSgemmStridedBatched");
  if (!b.create || !b.destroy || !b.set_stream || !b.set_math_mode || !b.sgemm || !b.sgemm_batched) {
    dlclose(h);
    return fail("%s lacks a cuBLAS function tensord uses", name);
  }
  blas = b;
  return 0;
}

struct Stream {
  cudaStream_t s;
  cublasHandle_t blas;
  char *staging;  // pinned
  size_t used;    // staging bytes holding uploads not yet known complete
};

unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return (unsigned)(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

struct Dims {
  int rank;
  int64_t d[ENG_DEV_MAX_RANK];
  int64_t a[ENG_DEV_MAX_RANK];
  int64_t b[ENG_DEV_MAX_RANK];
};

__device__ float bin(int op, float a, float b) {
  switch (op) {
    case ENG_DB_ADD: return a + b;
    case ENG_DB_SUB: return a - b;
    case ENG_DB_MUL: return a * b;
    case ENG_DB_DIV: return a / b;
    case ENG_DB_MAX: return (isnan(a) || isnan(b)) ? nanf("") : fmaxf(a, b);
    case ENG_DB_MIN: return (isnan(a) || isnan(b)) ? nanf("") : fminf(a, b);
    case ENG_DB_SQDIFF: return (a - b) * (a - b);
    case ENG_DB_POW: return powf(a, b);
  }
  return nanf("");
}

__global__ void k_binary(int op, Dims dm, int64_t n, const float *a, const float *b, float *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t rest = i, oa = 0, ob = 0;
    for (int d = dm.rank - 1; d >= 0; d--) {
      int64_t idx = rest % dm.d[d];
      rest /= dm.d[d];
      oa += idx * dm.a[d];
      ob += idx * dm.b[d];
    }
    y[i] = bin(op, a[oa], b[ob]);
  }
}

__device__ float un(int op, float x, float alpha) {
  switch (op) {
    case ENG_DU_RELU: return x > 0.f ? x : 0.f;
    case ENG_DU_RELU6: return x > 0.f ? (x < 6.f ? x : 6.f) : 0.f;
    case ENG_DU_SIGMOID: return 1.f / (1.f + expf(-x));
    case ENG_DU_TANH: return tanhf(x);
    case ENG_DU_EXP: return expf(x);
    case ENG_DU_LOG: return logf(x);
    case ENG_DU_SQRT: return sqrtf(x);
    case ENG_DU_RSQRT: return 1.f / sqrtf(x);
    case ENG_DU_NEG: return -x;
    case ENG_DU_ABS: return fabsf(x);
    case ENG_DU_SQUARE: return x * x;
    case ENG_DU_ERF: return erff(x);
    case ENG_DU_ERFC: return erfcf(x);
    case ENG_DU_SOFTPLUS: return x > 0.f ? x + log1pf(expf(-x)) : log1pf(expf(x));
    case ENG_DU_ELU: return x > 0.f ? x : expm1f(x);
    case ENG_DU_SELU: return 1.0507009873554805f * (x > 0.f ? x : 1.6732632423543772f * expm1f(x));
    case ENG_DU_LEAKY_RELU: return x > 0.f ? x : x * alpha;
    case ENG_DU_RECIPROCAL: return 1.f / x;
    case ENG_DU_SIN: return sinf(x);
    case ENG_DU_COS: return cosf(x);
    case ENG_DU_FLOOR: return floorf(x);
    case ENG_DU_CEIL: return ceilf(x);
    case ENG_DU_ROUND: return rintf(x);
    case ENG_DU_SIGN: return x > 0.f ? 1.f : (x < 0.f ? -1.f : x);
    case ENG_DU_EXPM1: return expm1f(x);
    case ENG_DU_LOG1P: return log1pf(x);
    case ENG_DU_SOFTSIGN: return x / (1.f + fabsf(x));
  }
  return nanf("");
}

__global__ void k_unary(int op, int64_t n, const float *x, float *y, float alpha) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    y[i] = un(op, x[i], alpha);
}

template <typename T>
__global__ void k_copy(Dims dm, int64_t n, const T *src, T *dst) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t rest = i, os = 0, od = 0;
    for (int d = dm.rank - 1; d >= 0; d--) {
      int64_t idx = rest % dm.d[d];
      rest /= dm.d[d];
      os += idx * dm.a[d];
      od += idx * dm.b[d];
    }
    dst[od] = src[os];
  }
}

template <typename T>
__global__ void k_fill(int64_t n, T v, T *dst) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x)
    dst[i] = v;
}

__global__ void k_im2col(eng_dev_window w, int64_t n, const float *x, float *col) {
  int64_t kk = w.kh * w.kw * w.c;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t r = i / kk, q = i % kk;
    int64_t ch = q % w.c, j = (q / w.c) % w.kw, t = q / (w.c * w.kw);
    int64_t ox = r % w.ow, oy = (r / w.ow) % w.oh, b = r / (w.ow * w.oh);
    int64_t iy = oy * w.sh + t * w.dh - w.pad_t, ix = ox * w.sw + j * w.dw - w.pad_l;
    col[i] = (iy < 0 || iy >= w.h || ix < 0 || ix >= w.w) ? 0.f
                                                          : x[((b * w.h + iy) * w.w + ix) * w.c + ch];
  }
}

__global__ void k_depthwise(eng_dev_window w, int64_t n, const float *x, const float *f, float *y) {
  int64_t oc = w.c * w.mult;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = i % oc, ox = (i / oc) % w.ow, oy = (i / (oc * w.ow)) % w.oh, b = i / (oc * w.ow * w.oh);
    int64_t ch = o / w.mult;
    float acc = 0.f;
    for (int64_t t = 0; t < w.kh; t++) {
      int64_t iy = oy * w.sh + t * w.dh - w.pad_t;
      if (iy < 0 || iy >= w.h) continue;
      for (int64_t j = 0; j < w.kw; j++) {
        int64_t ix = ox * w.sw + j * w.dw - w.pad_l;
        if (ix < 0 || ix >= w.w) continue;
        acc = fmaf(x[((b * w.h + iy) * w.w + ix) * w.c + ch], f[(t * w.kw + j) * oc + o], acc);
      }
    }
    y[i] = acc;
  }
}

__global__ void k_pool(eng_dev_window w, int64_t n, bool mx, const float *x, float *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t ch = i % w.c, ox = (i / w.c) % w.ow, oy = (i / (w.c * w.ow)) % w.oh,
            b = i / (w.c * w.ow * w.oh);
    float acc = mx ? -INFINITY : 0.f;
    int64_t taps = 0;
    for (int64_t t = 0; t < w.kh; t++) {
      int64_t iy = oy * w.sh + t * w.dh - w.pad_t;
      if (iy < 0 || iy >= w.h) continue;
      for (int64_t j = 0; j < w.kw; j++) {
        int64_t ix = ox * w.sw + j * w.dw - w.pad_l;
        if (ix < 0 || ix >= w.w) continue;
        float v = x[((b * w.h + iy) * w.w + ix) * w.c + ch];
        acc = mx ? (v > acc ? v : acc) : acc + v;
        taps++;
      }
    }
    y[i] = mx ? acc : acc / (float)(taps ? taps : 1);
  }
}

// One block per row: max, then the sum of exponentials, then the outputs.
__global__ void k_softmax(int64_t rows, int64_t cols, bool lg, const float *x, float *y) {
  __shared__ float red[kThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *xr = x + r * cols;
    float *yr = y + r * cols;
    float m = -INFINITY;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    red[threadIdx.x] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if ((int)threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
      __syncthreads();
    }
    m = red[0];
    __syncthreads();
    float sum = 0.f;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
    red[threadIdx.x] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
      if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
      __syncthreads();
    }
    sum = red[0];
    __syncthreads();
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
      yr[c] = lg ? (xr[c] - m) - logf(sum) : expf(xr[c] - m) / sum;
  }
}

__global__ void k_reduce(int op, int64_t outer, int64_t r, int64_t inner, const float *x, float *y) {
  int64_t n = outer * inner;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t o = i / inner, in = i % inner;
    float acc = op == ENG_DR_MAX ? -INFINITY : op == ENG_DR_MIN ? INFINITY : op == ENG_DR_PROD ? 1.f : 0.f;
    for (int64_t k = 0; k < r; k++) {
      float v = x[(o * r + k) * inner + in];
      if (op == ENG_DR_MAX) acc = v > acc ? v : acc;
      else if (op == ENG_DR_MIN) acc = v < acc ? v : acc;
      else if (op == ENG_DR_PROD) acc *= v;
      else acc += v;
    }
    y[i] = op == ENG_DR_MEAN ? acc / (float)(r ? r : 1) : acc;
  }
}

__global__ void k_epilogue(int64_t rows, int64_t ch, eng_dev_epi e, float *y) {
  int64_t n = rows * ch;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t c = i % ch;
    float v = y[i];
    for (int j = 0; j < e.n; j++) {
      float k = e.op[j].k ? e.op[j].k[c] : e.op[j].s;
      switch (e.op[j].kind) {
        case ENG_DE_ADD: v = v + k; break;
        case ENG_DE_SUB: v = v - k; break;
        case ENG_DE_MUL: v = v * k; break;
        case ENG_DE_RELU: v = v > 0.f ? v : 0.f; break;
        case ENG_DE_RELU6: v = v > 0.f ? (v < 6.f ? v : 6.f) : 0.f; break;
      }
    }
    y[i] = v;
  }
}

template <typename T>
__global__ void k_gather(int64_t outer, int64_t n, int64_t limit, int64_t inner, const T *p,
                         const int64_t *idx, T *y) {
  int64_t total = outer * n * inner;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t j = i % inner, r = i / inner, k = r % n, o = r / n;
    y[i] = p[(o * limit + idx[k]) * inner + j];
  }
}

struct Dims3 {
  int rank;
  int64_t d[ENG_DEV_MAX_RANK];
  int64_t s[3][ENG_DEV_MAX_RANK];
};

__device__ void offsets3(const Dims3 &dm, int n, int64_t i, int64_t *off) {
  for (int k = 0; k < n; k++) off[k] = 0;
  for (int d = dm.rank - 1; d >= 0; d--) {
    int64_t idx = i % dm.d[d];
    i /= dm.d[d];
    for (int k = 0; k < n; k++) off[k] += idx * dm.s[k][d];
  }
}

template <typename T>
__global__ void k_compare(int op, Dims3 dm, int64_t n, const T *a, const T *b, uint8_t *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[2];
    offsets3(dm, 2, i, off);
    T x = a[off[0]], z = b[off[1]];
    bool r;
    switch (op) {
      case ENG_DC_LESS: r = x < z; break;
      case ENG_DC_LESS_EQUAL: r = x <= z; break;
      case ENG_DC_GREATER: r = x > z; break;
      case ENG_DC_GREATER_EQUAL: r = x >= z; break;
      case ENG_DC_EQUAL: r = x == z; break;
      case ENG_DC_NOT_EQUAL: r = x != z; break;
      case ENG_DC_AND: r = x && z; break;
      default: r = x || z; break;
    }
    y[i] = r;
  }
}

template <typename T>
__global__ void k_select(Dims3 dm, int64_t n, const uint8_t *c, const T *a, const T *b, T *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    int64_t off[3];
    offsets3(dm, 3, i, off);
    y[i] = c[off[0]] ? a[off[1]] : b[off[2]];
  }
}

template <typename S>
__device__ int64_t to_int(S v) {
  return (int64_t)v;
}
template <>
__device__ int64_t to_int<float>(float f) {
  if (f != f) return 0;
  if (f >= 9223372036854775807.0f) return INT64_MAX;
  if (f <= -9223372036854775808.0f) return INT64_MIN;
  return (int64_t)f;
}

template <typename S, typename D>
__global__ void k_cast(int64_t n, bool to_bool, bool to_float, const S *x, D *y) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    S v = x[i];
    if (to_bool) y[i] = (D)(v != (S)0);
    else if (to_float) y[i] = (D)(float)v;
    else y[i] = (D)to_int<S>(v);
  }
}

// --- the table's functions -----------------------------------------------

int probe(char *desc, size_t dl, size_t *total, char *why, size_t wl) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    snprintf(why, wl, "cudaGetDeviceCount: %s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
    return 1;
  }
  if (n == 0) {
    snprintf(why, wl, "the CUDA driver sees no GPU");
    return 1;
  }
  cudaDeviceProp p;
  e = cudaGetDeviceProperties(&p, 0);
  if (e != cudaSuccess) {
    snprintf(why, wl, "cudaGetDeviceProperties: %s", cudaGetErrorString(e));
    return 1;
  }
  int rt = 0, drv = 0;
  cudaRuntimeGetVersion(&rt);
  cudaDriverGetVersion(&drv);
  snprintf(desc, dl, "GPU 0: %s (sm_%d%d, %zu MiB, CUDA runtime %d.%d, driver %d.%d)", p.name, p.major,
           p.minor, (size_t)(p.totalGlobalMem >> 20), rt / 1000, (rt % 1000) / 10, drv / 1000,
           (drv % 1000) / 10);
  size_t free_b = 0, total_b = 0;
  e = cudaMemGetInfo(&free_b, &total_b);
  *total = e == cudaSuccess ? free_b : p.totalGlobalMem;
  return 0;
}

int init(bool allow_tf32) {
  g_tf32 = allow_tf32;
  CK(cudaSetDevice(0), "cudaSetDevice");
  return load_blas();
}

void *dalloc(size_t bytes) {
  void *d = nullptr;
  cudaError_t e = cudaMalloc(&d, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    cuda_fail("cudaMalloc", e);
    return nullptr;
  }
  return d;
}

void dfree(void *d) { cudaFree(d); }

void *stream_create(void) {
  Stream *st = new Stream();
  cudaSetDevice(0);
  if (cudaStreamCreateWithFlags(&st->s, cudaStreamNonBlocking) != cudaSuccess) {
    fail("cudaStreamCreate failed");
    delete st;
    return nullptr;
  }
  if (blas.create(&st->blas) != CUBLAS_STATUS_SUCCESS) {
    fail("cublasCreate failed");
    cudaStreamDestroy(st->s);
    delete st;
    return nullptr;
  }
  blas.set_stream(st->blas, st->s);
  blas.set_math_mode(st->blas, g_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
  if (cudaMallocHost(&st->staging, kStaging) != cudaSuccess) st->staging = nullptr;
  return st;
}

void stream_destroy(void *p) {
  Stream *st = static_cast<Stream *>(p);
  if (!st) return;
  cudaStreamSynchronize(st->s);
  blas.destroy(st->blas);
  cudaStreamDestroy(st->s);
  if (st->staging) cudaFreeHost(st->staging);
  delete st;
}

int sync_(void *p) {
  Stream *st = static_cast<Stream *>(p);
  CK(cudaStreamSynchronize(st->s), "cudaStreamSynchronize");
  st->used = 0;
  return 0;
}

int upload(void *p, void *d, const void *host, size_t n) {
  Stream *st = static_cast<Stream *>(p);
  if (!n) return 0;
  size_t need = (n + 255) / 256 * 256;
  if (st->staging && need <= kStaging) {
    if (st->used + need > kStaging && sync_(st)) return 1;
    char *stage = st->staging + st->used;
    memcpy(stage, host, n);
    st->used += need;
    CK(cudaMemcpyAsync(d, stage, n, cudaMemcpyHostToDevice, st->s), "upload");
    return 0;
  }
  // Larger than the staging buffer (weights at load): a plain copy, which
  // returns once the host buffer has been read.
  CK(cudaMemcpyAsync(d, host, n, cudaMemcpyHostToDevice, st->s), "upload");
  return sync_(st);
}

int download(void *p, void *host, const void *d, size_t n) {
  Stream *st = static_cast<Stream *>(p);
  if (!n) return 0;
  if (st->staging && n <= kStaging) {
    if (sync_(st)) return 1;  // frees the staging buffer for this copy
    CK(cudaMemcpyAsync(st->staging, d, n, cudaMemcpyDeviceToHost, st->s), "download");
    if (sync_(st)) return 1;
    memcpy(host, st->staging, n);
    return 0;
  }
  CK(cudaMemcpyAsync(host, d, n, cudaMemcpyDeviceToHost, st->s), "download");
  return sync_(st);
}

int gemm(void *p, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
         int64_t sa, const float *b, int64_t ldb, int64_t sb, float *c, int64_t ldc, int64_t sc,
         int64_t batch) {
  Stream *st = static_cast<Stream *>(p);
  if (m <= 0 || n <= 0 || batch <= 0) return 0;
  if (m > INT32_MAX || n > INT32_MAX || k > INT32_MAX || lda > INT32_MAX || ldb > INT32_MAX ||
      ldc > INT32_MAX || batch > INT32_MAX)
    return fail("gemm: a dimension exceeds cuBLAS's int range");
  const float one = 1.f, zero = 0.f;
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: swap
  // the operands and keep each one's transpose flag.
  cublasOperation_t ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N, oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasStatus_t s;
  if (batch == 1)
    s = blas.sgemm(st->blas, ob, oa, (int)n, (int)m, (int)k, &one, b, (int)ldb, a, (int)lda, &zero,
                    c, (int)ldc);
  else
    s = blas.sgemm_batched(st->blas, ob, oa, (int)n, (int)m, (int)k, &one, b, (int)ldb, sb, a,
                                  (int)lda, sa, &zero, c, (int)ldc, sc, (int)batch);
  if (s != CUBLAS_STATUS_SUCCESS) return fail("cuBLAS sgemm failed: status %d", (int)s);
  return 0;
}

// The dims and two operands' strides of an n-element strided walk.
int make_dims(int rank, const int64_t *dims, const int64_t *sa, const int64_t *sb, Dims *dm,
              int64_t *n) {
  if (rank < 0 || rank > ENG_DEV_MAX_RANK) return 1;
  *dm = Dims{};
  dm->rank = rank;
  *n = 1;
  for (int d = 0; d < rank; d++) {
    dm->d[d] = dims[d];
    dm->a[d] = sa[d];
    dm->b[d] = sb[d];
    *n *= dims[d];
  }
  return 0;
}

int binary(void *p, int op, int rank, const int64_t *dims, const float *a, const int64_t *sa,
           const float *b, const int64_t *sb, float *y) {
  Stream *st = static_cast<Stream *>(p);
  Dims dm;
  int64_t n;
  if (make_dims(rank, dims, sa, sb, &dm, &n)) return fail("binary: rank %d", rank);
  if (n == 0) return 0;
  k_binary<<<blocks_for(n), kThreads, 0, st->s>>>(op, dm, n, a, b, y);
  LAUNCHED("binary kernel");
  return 0;
}

int unary(void *p, int op, int64_t n, const float *x, float *y, float alpha) {
  Stream *st = static_cast<Stream *>(p);
  if (n <= 0) return 0;
  k_unary<<<blocks_for(n), kThreads, 0, st->s>>>(op, n, x, y, alpha);
  LAUNCHED("unary kernel");
  return 0;
}

int copy(void *p, int rank, const int64_t *dims, size_t es, const void *src, const int64_t *ss,
         void *dst, const int64_t *ds) {
  Stream *st = static_cast<Stream *>(p);
  Dims dm;
  int64_t n;
  if (make_dims(rank, dims, ss, ds, &dm, &n)) return fail("copy: rank %d", rank);
  if (n == 0) return 0;
  unsigned g = blocks_for(n);
  switch (es) {
    case 1: k_copy<uint8_t><<<g, kThreads, 0, st->s>>>(dm, n, (const uint8_t *)src, (uint8_t *)dst); break;
    case 2: k_copy<uint16_t><<<g, kThreads, 0, st->s>>>(dm, n, (const uint16_t *)src, (uint16_t *)dst); break;
    case 4: k_copy<uint32_t><<<g, kThreads, 0, st->s>>>(dm, n, (const uint32_t *)src, (uint32_t *)dst); break;
    case 8: k_copy<uint64_t><<<g, kThreads, 0, st->s>>>(dm, n, (const uint64_t *)src, (uint64_t *)dst); break;
    default: return fail("copy: element size %zu", es);
  }
  LAUNCHED("copy kernel");
  return 0;
}

int fill(void *p, int64_t n, size_t es, const void *value, void *dst) {
  Stream *st = static_cast<Stream *>(p);
  if (n <= 0) return 0;
  unsigned g = blocks_for(n);
  switch (es) {
    case 1: k_fill<uint8_t><<<g, kThreads, 0, st->s>>>(n, *(const uint8_t *)value, (uint8_t *)dst); break;
    case 2: k_fill<uint16_t><<<g, kThreads, 0, st->s>>>(n, *(const uint16_t *)value, (uint16_t *)dst); break;
    case 4: k_fill<uint32_t><<<g, kThreads, 0, st->s>>>(n, *(const uint32_t *)value, (uint32_t *)dst); break;
    case 8: k_fill<uint64_t><<<g, kThreads, 0, st->s>>>(n, *(const uint64_t *)value, (uint64_t *)dst); break;
    default: return fail("fill: element size %zu", es);
  }
  LAUNCHED("fill kernel");
  return 0;
}

int im2col(void *p, const eng_dev_window *w, const float *x, float *col) {
  Stream *st = static_cast<Stream *>(p);
  int64_t n = w->n * w->oh * w->ow * w->kh * w->kw * w->c;
  if (n <= 0) return 0;
  k_im2col<<<blocks_for(n), kThreads, 0, st->s>>>(*w, n, x, col);
  LAUNCHED("im2col kernel");
  return 0;
}

int depthwise(void *p, const eng_dev_window *w, const float *x, const float *f, float *y) {
  Stream *st = static_cast<Stream *>(p);
  int64_t n = w->n * w->oh * w->ow * w->c * w->mult;
  if (n <= 0) return 0;
  k_depthwise<<<blocks_for(n), kThreads, 0, st->s>>>(*w, n, x, f, y);
  LAUNCHED("depthwise kernel");
  return 0;
}

int pool(void *p, const eng_dev_window *w, bool mx, const float *x, float *y) {
  Stream *st = static_cast<Stream *>(p);
  int64_t n = w->n * w->oh * w->ow * w->c;
  if (n <= 0) return 0;
  k_pool<<<blocks_for(n), kThreads, 0, st->s>>>(*w, n, mx, x, y);
  LAUNCHED("pooling kernel");
  return 0;
}

int softmax(void *p, int64_t rows, int64_t cols, bool lg, const float *x, float *y) {
  Stream *st = static_cast<Stream *>(p);
  if (rows <= 0 || cols <= 0) return 0;
  unsigned g = (unsigned)(rows < 65535 ? rows : 65535);
  k_softmax<<<g, kThreads, 0, st->s>>>(rows, cols, lg, x, y);
  LAUNCHED("softmax kernel");
  return 0;
}

int reduce(void *p, int op, int64_t outer, int64_t r, int64_t inner, const float *x, float *y) {
  Stream *st = static_cast<Stream *>(p);
  int64_t n = outer * inner;
  if (n <= 0) return 0;
  k_reduce<<<blocks_for(n), kThreads, 0, st->s>>>(op, outer, r, inner, x, y);
  LAUNCHED("reduction kernel");
  return 0;
}

int epilogue(void *p, int64_t rows, int64_t ch, const eng_dev_epi *e, float *y) {
  Stream *st = static_cast<Stream *>(p);
  int64_t n = rows * ch;
  if (n <= 0) return 0;
  if (e->n < 0 || e->n > ENG_DEV_EPI_MAX) return fail("epilogue: %d ops", e->n);
  k_epilogue<<<blocks_for(n), kThreads, 0, st->s>>>(rows, ch, *e, y);
  LAUNCHED("epilogue kernel");
  return 0;
}

int gather(void *p, int64_t outer, int64_t n, int64_t limit, int64_t inner, size_t es,
           const void *params, const int64_t *idx, void *y) {
  Stream *st = static_cast<Stream *>(p);
  int64_t total = outer * n * inner;
  if (total <= 0) return 0;
  unsigned g = blocks_for(total);
  switch (es) {
    case 1: k_gather<uint8_t><<<g, kThreads, 0, st->s>>>(outer, n, limit, inner, (const uint8_t *)params, idx, (uint8_t *)y); break;
    case 2: k_gather<uint16_t><<<g, kThreads, 0, st->s>>>(outer, n, limit, inner, (const uint16_t *)params, idx, (uint16_t *)y); break;
    case 4: k_gather<uint32_t><<<g, kThreads, 0, st->s>>>(outer, n, limit, inner, (const uint32_t *)params, idx, (uint32_t *)y); break;
    case 8: k_gather<uint64_t><<<g, kThreads, 0, st->s>>>(outer, n, limit, inner, (const uint64_t *)params, idx, (uint64_t *)y); break;
    default: return fail("gather: element size %zu", es);
  }
  LAUNCHED("gather kernel");
  return 0;
}

int make_dims3(int rank, const int64_t *dims, const int64_t *const *st, int n, Dims3 *dm,
               int64_t *total) {
  if (rank < 0 || rank > ENG_DEV_MAX_RANK) return 1;
  *dm = Dims3{};
  dm->rank = rank;
  *total = 1;
  for (int d = 0; d < rank; d++) {
    dm->d[d] = dims[d];
    for (int k = 0; k < n; k++) dm->s[k][d] = st[k][d];
    *total *= dims[d];
  }
  return 0;
}

int compare(void *p, int op, int dt, int rank, const int64_t *dims, const void *a,
            const int64_t *sa, const void *b, const int64_t *sb, uint8_t *y) {
  Stream *st = static_cast<Stream *>(p);
  const int64_t *strides[2] = {sa, sb};
  Dims3 dm;
  int64_t n;
  if (make_dims3(rank, dims, strides, 2, &dm, &n)) return fail("compare: rank %d", rank);
  if (n == 0) return 0;
  unsigned g = blocks_for(n);
  switch (dt) {
    case DT_FLOAT: k_compare<float><<<g, kThreads, 0, st->s>>>(op, dm, n, (const float *)a, (const float *)b, y); break;
    case DT_INT32: k_compare<int32_t><<<g, kThreads, 0, st->s>>>(op, dm, n, (const int32_t *)a, (const int32_t *)b, y); break;
    case DT_INT64: k_compare<int64_t><<<g, kThreads, 0, st->s>>>(op, dm, n, (const int64_t *)a, (const int64_t *)b, y); break;
    case DT_BOOL: k_compare<uint8_t><<<g, kThreads, 0, st->s>>>(op, dm, n, (const uint8_t *)a, (const uint8_t *)b, y); break;
    default: return fail("compare: dtype %d", dt);
  }
  LAUNCHED("compare kernel");
  return 0;
}

int select_(void *p, int rank, const int64_t *dims, const uint8_t *c, const int64_t *sc, size_t es,
            const void *a, const int64_t *sa, const void *b, const int64_t *sb, void *y) {
  Stream *st = static_cast<Stream *>(p);
  const int64_t *strides[3] = {sc, sa, sb};
  Dims3 dm;
  int64_t n;
  if (make_dims3(rank, dims, strides, 3, &dm, &n)) return fail("select: rank %d", rank);
  if (n == 0) return 0;
  unsigned g = blocks_for(n);
  switch (es) {
    case 1: k_select<uint8_t><<<g, kThreads, 0, st->s>>>(dm, n, c, (const uint8_t *)a, (const uint8_t *)b, (uint8_t *)y); break;
    case 2: k_select<uint16_t><<<g, kThreads, 0, st->s>>>(dm, n, c, (const uint16_t *)a, (const uint16_t *)b, (uint16_t *)y); break;
    case 4: k_select<uint32_t><<<g, kThreads, 0, st->s>>>(dm, n, c, (const uint32_t *)a, (const uint32_t *)b, (uint32_t *)y); break;
    case 8: k_select<uint64_t><<<g, kThreads, 0, st->s>>>(dm, n, c, (const uint64_t *)a, (const uint64_t *)b, (uint64_t *)y); break;
    default: return fail("select: element size %zu", es);
  }
  LAUNCHED("select kernel");
  return 0;
}

template <typename S>
int cast_from(Stream *st, int64_t n, int dst, const S *x, void *y) {
  unsigned g = blocks_for(n);
  bool tb = dst == DT_BOOL, tf = dst == DT_FLOAT;
  switch (dst) {
    case DT_FLOAT: k_cast<S, float><<<g, kThreads, 0, st->s>>>(n, tb, tf, x, (float *)y); break;
    case DT_INT32: k_cast<S, int32_t><<<g, kThreads, 0, st->s>>>(n, tb, tf, x, (int32_t *)y); break;
    case DT_INT64: k_cast<S, int64_t><<<g, kThreads, 0, st->s>>>(n, tb, tf, x, (int64_t *)y); break;
    case DT_BOOL: k_cast<S, uint8_t><<<g, kThreads, 0, st->s>>>(n, tb, tf, x, (uint8_t *)y); break;
    default: return fail("cast: dtype %d", dst);
  }
  LAUNCHED("cast kernel");
  return 0;
}

int cast(void *p, int64_t n, int src, int dst, const void *x, void *y) {
  Stream *st = static_cast<Stream *>(p);
  if (n <= 0) return 0;
  switch (src) {
    case DT_FLOAT: return cast_from(st, n, dst, (const float *)x, y);
    case DT_INT32: return cast_from(st, n, dst, (const int32_t *)x, y);
    case DT_INT64: return cast_from(st, n, dst, (const int64_t *)x, y);
    case DT_BOOL: return cast_from(st, n, dst, (const uint8_t *)x, y);
  }
  return fail("cast: dtype %d", src);
}

const char *error(void) { return g_err; }

const eng_devapi g_api = {
    ENG_DEVAPI_VERSION, "cuda", probe, init, dalloc, dfree, stream_create, stream_destroy, upload,
    download, sync_, gemm, binary, unary, copy, fill, im2col, depthwise, pool, softmax, reduce,
    epilogue, gather, compare, select_, cast, error,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const eng_devapi *tensord_devapi(void) {
  return &g_api;
}
