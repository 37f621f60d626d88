/* dw_bench: the engine's depthwise convolution alone (eng_dwconv_run, the
 * instruction set eng_isa chose, capped by TENSORD_ENGINE_ISA) on the
 * depthwise layers of the real-size models, one image, SAME padding, with
 * the epilogue those models fuse into it: bias and ReLU6 (MobileNetV2) or
 * bias and swish (EfficientNetB0). One thread (the engine's pool at 1).
 *
 * usage: dw_bench [SECONDS] [SHAPE...]
 *   SHAPE is HxCxKsS[:swish]: an H x H x C input, a K x K window, stride S
 *   (e.g. 56x144x3s1, 14x672x5s2:swish). Without shapes it runs the
 *   built-in list (MobileNetV2 224 and EfficientNetB0 224's layers, each
 *   once). Each shape runs for about SECONDS (default 0.3) after one
 *   warm-up call; the median of 5 timed repetitions is printed as one JSON
 *   line per shape, with multiply-adds per second (GFMA/s).
 *   DW_BENCH_EVICT=MB reads and writes MB megabytes of other memory before
 *   each call, outside the timing, so that input and output start out of
 *   cache. bench/engine/dw_compare.py runs several builds' dw_bench
 *   interleaved. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_dwconv.h"
#include "eng_pool.h"
#include "kbench.h"

/* One call of the kernel as kbench times it. */
typedef struct dw_call {
  const eng_conv_geom *g;
  const float *x, *f;
  float *y;
  const eng_gemm_epi *epi;
} dw_call;

static void run_call(void *arg) {
  const dw_call *d = arg;
  eng_dwconv_run(d->g, d->x, d->f, d->y, d->epi);
}

static const char *const builtin[] = {
    /* MobileNetV2 (alpha 1.0) at 224 */
    "112x32x3s1", "112x96x3s2", "56x144x3s1", "56x144x3s2", "28x192x3s1", "28x192x3s2",
    "14x384x3s1", "14x576x3s1", "14x576x3s2", "7x960x3s1",
    /* EfficientNetB0 at 224 */
    "112x32x3s1:swish", "112x96x3s2:swish", "56x144x3s1:swish", "56x144x5s2:swish",
    "28x240x5s1:swish", "28x240x3s2:swish", "14x480x3s1:swish", "14x480x5s1:swish",
    "14x672x5s1:swish", "14x672x5s2:swish", "7x1152x5s1:swish", "7x1152x3s1:swish",
};

/* TF's SAME padding along one dimension. */
static void same(int64_t in, int64_t k, int64_t s, int64_t *out, int64_t *before) {
  *out = (in + s - 1) / s;
  int64_t total = (*out - 1) * s + k - in;
  *before = total > 0 ? total / 2 : 0;
}

static int one(const char *shape, double secs) {
  long long h, c, k, s;
  int used = 0;
  if (sscanf(shape, "%lldx%lldx%llds%lld%n", &h, &c, &k, &s, &used) != 4) goto bad;
  bool swish = !strcmp(shape + used, ":swish");
  if ((shape[used] && !swish) || h <= 0 || c <= 0 || k <= 0 || s <= 0 || h > 4096 ||
      c > 65536 || h * h * c > (1LL << 28) || k > h)
    goto bad;
  eng_conv_geom g = {.n = 1, .h = h, .w = h, .c = c, .kh = k, .kw = k, .sh = s, .sw = s,
                     .dh = 1, .dw = 1};
  same(h, k, s, &g.oh, &g.pt);
  same(h, k, s, &g.ow, &g.pl);
  size_t nx = (size_t)(h * h * c), ny = (size_t)(g.oh * g.ow * c);
  float *x = malloc(sizeof *x * nx), *y = malloc(sizeof *y * ny);
  float *f = malloc(sizeof *f * (size_t)(k * k * c)), *bias = malloc(sizeof *bias * (size_t)c);
  if (!x || !y || !f || !bias) {
    fprintf(stderr, "dw_bench: out of memory for %s\n", shape);
    return 1;
  }
  for (size_t i = 0; i < nx; i++) x[i] = (float)(i % 17) * 0.1f - 0.8f;
  for (long long i = 0; i < k * k * c; i++) f[i] = (float)(i % 7) * 0.1f - 0.3f;
  for (long long i = 0; i < c; i++) bias[i] = 0.01f * (float)(i % 11);
  eng_gemm_epi epi = {2, {{ENG_GEMM_ADD, bias, 0, 0}, {ENG_GEMM_RELU6, NULL, 0, 0}}};
  if (swish) epi.op[1].kind = ENG_GEMM_SWISH, epi.op[1].s = 1.0f; /* x * sigmoid(1 * x) */
  dw_call call = {&g, x, f, y, &epi};
  double t = kbench_time(run_call, &call, secs, kbench_env_mib("DW_BENCH_EVICT"));
  if (t < 0) {
    fprintf(stderr, "dw_bench: out of memory for %s\n", shape);
    return 1;
  }
  double fma = (double)g.oh * (double)g.ow * (double)c * (double)(k * k);
  printf("{\"shape\": \"%s\", \"us\": %.1f, \"gfma\": %.2f, \"isa\": \"%s\"}\n", shape, t * 1e6,
         fma / t * 1e-9, eng_isa_name(eng_isa_active()));
  fflush(stdout);
  free(x), free(y), free(f), free(bias);
  return 0;
bad:
  fprintf(stderr, "dw_bench: bad shape '%s' (HxCxKsS or HxCxKsS:swish)\n", shape);
  return 2;
}

int main(int argc, char **argv) {
  double secs = argc > 1 ? atof(argv[1]) : 0.3;
  if (secs <= 0) secs = 0.3;
  eng_pool_set_threads(1);
  int rc = 0;
  if (argc > 2)
    for (int i = 2; i < argc; i++) rc |= one(argv[i], secs);
  else
    for (size_t i = 0; i < sizeof builtin / sizeof *builtin; i++) rc |= one(builtin[i], secs);
  return rc;
}
