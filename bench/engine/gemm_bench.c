/* gemm_bench: GFLOP/s of the engine's packed GEMM (eng_gemm_run, and
 * eng_gemm_run_rows for convolution shapes) on the shapes of the real-size
 * models, on GEMM_BENCH_THREADS threads of the engine's pool (default 1).
 * GEMM_BENCH_COLD=1 gives each call a freshly allocated C (as a model's
 * output buffers are: first-touch page faults included in the time).
 * GEMM_BENCH_EVICT=MB reads and writes MB megabytes of other memory
 * before each call, outside the timing, so that A, B and C start out of
 * cache, as they do inside a model whose other layers ran in between.
 *
 * usage: gemm_bench [SECONDS] [SHAPE...]
 *   SHAPE is MxKxN (plain A, rows k apart) or conv:MxSEGxLENxN (A read in
 *   place as a 3x3 convolution reads it: SEG segments of LEN floats per row,
 *   k = SEG * LEN). Without shapes it runs the built-in list (BERT, ResNet50,
 *   wide MLP). Each shape runs for about SECONDS (default 0.5) after one
 *   warm-up call; the median of 5 timed repetitions is printed as one JSON
 *   line per shape. bench/engine/gemm_peers.py runs the same shapes on
 *   onnxruntime and OpenVINO. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gemm.h"
#include "eng_pool.h"
#include "kbench.h"

/* One call of the product as kbench times it. */
typedef struct gemm_call {
  const float *a, **rows;
  long long m, k, n, seg, sst, len;
  const eng_packed *p;
  float *c;
  bool conv, cold, oom;
} gemm_call;

static void run_call(void *arg) {
  gemm_call *g = arg;
  if (g->cold) { /* a fresh C, as a model's output buffers are: page faults counted */
    free(g->c);
    if (!(g->c = malloc(sizeof *g->c * (size_t)(g->m * g->n)))) {
      g->oom = true;
      return;
    }
  }
  if (g->conv)
    eng_gemm_run_rows(g->rows, g->m, g->seg, g->sst, g->len, g->p, g->c, g->n, NULL);
  else
    eng_gemm_run(g->a, g->k, g->m, g->p, g->c, g->n, NULL);
}

static const char *const builtin[] = {
    /* BERT 4x768, sequence 128: batch 1 and 32 (m = 128 and 4096) */
    "128x768x768", "128x768x2304", "128x768x3072", "128x3072x768",
    "4096x768x768", "4096x768x2304", "4096x768x3072", "4096x3072x768",
    /* ResNet50 at 224, batch 1: 1x1 convolutions (plain) and 3x3 (in place) */
    "3136x64x256", "3136x256x64", "784x512x128", "196x1024x256", "49x2048x512",
    "conv:3136x3x192x64", "conv:784x3x384x128", "conv:196x3x768x256", "conv:49x3x1536x512",
    /* wide MLP: batch 1 and 32 */
    "1x2048x2048", "32x2048x2048",
};

static int one(const char *shape, double secs) {
  long long m, k, n, seg = 1, len;
  bool conv = !strncmp(shape, "conv:", 5);
  if (conv) {
    if (sscanf(shape + 5, "%lldx%lldx%lldx%lld", &m, &seg, &len, &n) != 4) goto bad;
    k = seg * len;
  } else {
    if (sscanf(shape, "%lldx%lldx%lld", &m, &k, &n) != 3) goto bad;
    len = k;
  }
  if (m <= 0 || k <= 0 || n <= 0 || seg <= 0 || m * k > (1LL << 30) || k * n > (1LL << 30)) goto bad;
  /* conv: each row of A starts one float after the previous (as a stride-1
   * convolution's window does), segments LEN * 4 floats apart. */
  long long sst = conv ? len * 4 : 0, asz = conv ? m + (seg - 1) * sst + len : m * k;
  float *a = malloc(sizeof *a * (size_t)asz), *b = malloc(sizeof *b * (size_t)(k * n));
  float *c = malloc(sizeof *c * (size_t)(m * n));
  const float **rows = malloc(sizeof *rows * (size_t)m);
  if (!a || !b || !c || !rows) {
    fprintf(stderr, "gemm_bench: out of memory for %s\n", shape);
    return 1;
  }
  for (long long i = 0; i < asz; i++) a[i] = (float)(i % 13) * 0.01f;
  for (long long i = 0; i < k * n; i++) b[i] = (float)(i % 7) * 0.01f;
  for (long long i = 0; i < m; i++) rows[i] = a + i;
  eng_packed *p = eng_gemm_pack(b, k, n, false);
  if (!p) {
    fprintf(stderr, "gemm_bench: no packed kernel on this CPU / ISA cap\n");
    return 1;
  }
  const char *ce = getenv("GEMM_BENCH_COLD");
  gemm_call call = {a, rows, m, k, n, seg, sst, len, p, c, conv, ce && atoi(ce), false};
  double t = kbench_time(run_call, &call, secs, kbench_env_mib("GEMM_BENCH_EVICT"));
  c = call.c;
  if (t < 0 || call.oom) {
    fprintf(stderr, "gemm_bench: out of memory for %s\n", shape);
    return 1;
  }
  double flops = 2.0 * (double)m * (double)k * (double)n;
  printf("{\"shape\": \"%s\", \"m\": %lld, \"k\": %lld, \"n\": %lld, \"us\": %.1f, "
         "\"gflops\": %.2f}\n",
         shape, m, k, n, t * 1e6, flops / t * 1e-9);
  fflush(stdout);
  eng_gemm_free(p);
  free(a), free(b), free(c), free(rows);
  return 0;
bad:
  fprintf(stderr, "gemm_bench: bad shape '%s' (MxKxN or conv:MxSEGxLENxN)\n", shape);
  return 2;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 0.5;
  if (secs <= 0) secs = 0.5;
  const char *th = getenv("GEMM_BENCH_THREADS");
  eng_pool_set_threads(th ? atoi(th) : 1);
  int rc = 0;
  if (argc > 2)
    for (int i = 2; i < argc; i++) rc |= one(argv[i], secs);
  else
    for (size_t i = 0; i < sizeof builtin / sizeof *builtin; i++) rc |= one(builtin[i], secs);
  return rc;
}
