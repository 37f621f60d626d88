// cu_gemm_bench: the engine's GPU matrix product (the plug-in's gemm
// primitive, as the executor calls it) against cuBLAS called directly, on
// the same device buffers and shapes. One JSON line per shape with both
// GFLOP/s and their ratio. Needs a GPU; exits 2 saying why without one.
//
//   cu_gemm_bench [ITERS]
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" {
#include "eng_devapi.h"
const eng_devapi *tensord_devapi(void);
}

namespace {

struct Shape {
  const char *name;
  int64_t m, n, k, batch;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 20;
  const eng_devapi *api = tensord_devapi();
  char desc[256], why[256];
  size_t total = 0;
  if (api->probe(desc, sizeof desc, &total, why, sizeof why)) {
    fprintf(stderr, "cu_gemm_bench: no GPU: %s\n", why);
    return 2;
  }
  api->init(false);
  fprintf(stderr, "cu_gemm_bench: %s\n", desc);
  const Shape shapes[] = {
      {"square 1024", 1024, 1024, 1024, 1},
      {"square 4096", 4096, 4096, 4096, 1},
      {"square 8192", 8192, 8192, 8192, 1},
      {"dense 8192x3072 by 3072x768", 8192, 768, 3072, 1},
      {"attention 768 x (128x64 by 64x128)", 128, 128, 64, 768},
  };
  void *st = api->stream_create();
  cublasHandle_t h;
  cudaStream_t s;
  cudaStreamCreate(&s);
  cublasCreate(&h);
  cublasSetStream(h, s);
  cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
  for (const Shape &sh : shapes) {
    size_t na = sh.batch * sh.m * sh.k, nb = sh.batch * sh.k * sh.n, nc = sh.batch * sh.m * sh.n;
    float *a = (float *)api->alloc(na * 4), *b = (float *)api->alloc(nb * 4), *c = (float *)api->alloc(nc * 4);
    if (!a || !b || !c) {
      fprintf(stderr, "%s: out of GPU memory\n", sh.name);
      return 1;
    }
    std::vector<float> host(na > nb ? na : nb);
    for (size_t i = 0; i < host.size(); i++) host[i] = (float)((i * 7919) % 2001) / 1000.f - 1.f;
    api->upload(st, a, host.data(), na * 4);
    api->upload(st, b, host.data(), nb * 4);
    api->sync(st);
    double flop = 2.0 * sh.m * sh.n * sh.k * sh.batch;
    // The engine's primitive.
    api->gemm(st, false, false, sh.m, sh.n, sh.k, a, sh.k, sh.m * sh.k, b, sh.n, sh.k * sh.n, c, sh.n,
              sh.m * sh.n, sh.batch);
    api->sync(st);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++)
      api->gemm(st, false, false, sh.m, sh.n, sh.k, a, sh.k, sh.m * sh.k, b, sh.n, sh.k * sh.n, c,
                sh.n, sh.m * sh.n, sh.batch);
    api->sync(st);
    double t_eng = seconds_since(t0) / iters;
    // cuBLAS directly: row-major C = A B as column-major C^T = B^T A^T.
    const float one = 1.f, zero = 0.f;
    auto direct = [&]() {
      if (sh.batch == 1)
        cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)sh.n, (int)sh.m, (int)sh.k, &one, b, (int)sh.n,
                    a, (int)sh.k, &zero, c, (int)sh.n);
      else
        cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, (int)sh.n, (int)sh.m, (int)sh.k, &one,
                                  b, (int)sh.n, sh.k * sh.n, a, (int)sh.k, sh.m * sh.k, &zero, c,
                                  (int)sh.n, sh.m * sh.n, (int)sh.batch);
    };
    direct();
    cudaStreamSynchronize(s);
    t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++) direct();
    cudaStreamSynchronize(s);
    double t_blas = seconds_since(t0) / iters;
    printf("{\"shape\": \"%s\", \"engine_gflops\": %.0f, \"cublas_gflops\": %.0f, \"ratio\": %.3f}\n",
           sh.name, flop / t_eng / 1e9, flop / t_blas / 1e9, t_blas / t_eng);
    fflush(stdout);
    api->free(a);
    api->free(b);
    api->free(c);
  }
  cublasDestroy(h);
  cudaStreamDestroy(s);
  api->stream_destroy(st);
  return 0;
}
