/* eng_bench: times the engine alone on one zoo model, in process, the way
 * bench/engine/run.py times TensorFlow and onnxruntime: load the SavedModel
 * with ldr_servable_load, build the zoo inputs at one batch size (the
 * formula of scripts/make_fixtures.py), run the serving_default plan
 * `warmup` times, then `iters` timed runs. Prints one JSON line: latency
 * p50/p99/mean in microseconds, inferences per second, load time, peak
 * RSS and the RSS held after the runs (the loaded version, its plans and
 * their reused buffers), and the CPU time the process used during the
 * timed runs over their wall time (cpu_per_wall: up to THREADS when every
 * thread the engine uses had a core of its own; less on a busy machine),
 * and the kernels' instruction set (eng_isa: CPUID, lowered by the
 * TENSORD_ENGINE_ISA cap when the environment sets one).
 *
 *   eng_bench ZOO_JSON MODEL BATCH ITERS THREADS [MODE]
 *
 * TD_BENCH_WARMUP sets the warm-up runs; TD_BENCH_SHAPES_BEFORE=N runs the
 * model once at each batch size 1..N other than BATCH before them.
 *
 * MODE "sgemm" ignores the model and times OpenBLAS on a large square sgemm
 * (2048^3) for the GFLOP/s reference. MODE "profile" also counts the timed
 * runs node by node (eng_profile.h) and prints, after the summary line, one
 * JSON line per node that ran: its name, op, microseconds per run, runs per
 * run (batch slices run a node once each), fused epilogue ops, and the
 * shapes of its first two inputs and its output (bench/engine/profile.py
 * reads them). */
#include <cJSON.h>
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "eng_isa.h"
#include "eng_model.h"
#include "eng_profile.h"
#include "eng_threads.h"
#include "ldr_servable.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static long peak_rss_kb(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

/* User + system CPU time of the whole process so far. */
static double cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
         ru.ru_stime.tv_usec;
}

static long rss_kb(void) {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f && fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  if (f) fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
  if (b) b[n] = '\0';
  fclose(f);
  return b;
}

static int fill(const cJSON *spec, int batch, eng_tensor *t) {
  int64_t dims[ENG_MAX_RANK];
  int r = 0;
  dims[r++] = batch;
  const cJSON *d;
  cJSON_ArrayForEach(d, cJSON_GetObjectItem(spec, "shape")) dims[r++] = (int64_t)d->valuedouble;
  eng_shape s = eng_shape_make(r, dims);
  const char *dt = cJSON_GetObjectItem(spec, "dtype")->valuestring;
  bool is_f = !strcmp(dt, "float32");
  if (eng_tensor_alloc(t, is_f ? ENG_DT_FLOAT : ENG_DT_INT32, &s, NULL)) return -1;
  const char *gen = cJSON_GetObjectItem(spec, "gen")->valuestring;
  const cJSON *sj = cJSON_GetObjectItem(spec, "seed"), *mj = cJSON_GetObjectItem(spec, "mod");
  int64_t seed = sj ? (int64_t)sj->valuedouble : 0, mod = mj ? (int64_t)mj->valuedouble : 1;
  int64_t n = eng_tensor_numel(t), last = dims[r - 1];
  for (int64_t i = 0; i < n; i++) {
    if (is_f)
      ((float *)eng_tensor_data(t))[i] = (float)((i * 7919 + seed) % 2001) / 1000.0f - 1.0f;
    else if (!strcmp(gen, "int"))
      ((int32_t *)eng_tensor_data(t))[i] = (int32_t)((i * 31 + seed) % mod);
    else
      ((int32_t *)eng_tensor_data(t))[i] = (i % last) < last - 3 * ((i / last) % 4);
  }
  return 0;
}

static int bench_sgemm(int threads) {
  const int n = 2048;
  float *a = malloc(sizeof *a * n * n), *b = malloc(sizeof *b * n * n),
        *c = malloc(sizeof *c * n * n);
  for (int i = 0; i < n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.1f;
  openblas_set_num_threads(threads); /* the reference is OpenBLAS's own threading */
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
  double us = 1e30; /* best of 5: the machine may be shared */
  for (int r = 0; r < 5; r++) {
    double t0 = now_us();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    double t = now_us() - t0;
    us = t < us ? t : us;
  }
  printf("{\"mode\": \"sgemm\", \"n\": %d, \"threads\": %d, \"us\": %.1f, \"gflops\": %.2f}\n", n,
         threads, us, 2.0 * n * n * (double)n / us / 1e3);
  free(a);
  free(b);
  free(c);
  return 0;
}

static void print_shape(const char *key, const eng_shape *s) {
  printf(", \"%s\": ", key);
  if (s->rank < 0) {
    printf("null");
    return;
  }
  printf("[");
  for (int d = 0; d < s->rank; d++) printf("%s%lld", d ? ", " : "", (long long)s->dim[d]);
  printf("]");
}

/* One profile line: node i of the profile, per timed run. */
static void print_node(const eng_profile *pf, int i, int iters) {
  const eng_profile_node *r = &pf->node[i];
  if (!r->calls) return;
  const eng_node *nd = eng_graph_node(pf->g, i);
  cJSON *name = cJSON_CreateString(nd->name), *op = cJSON_CreateString(nd->op);
  char *jn = cJSON_PrintUnformatted(name), *jo = cJSON_PrintUnformatted(op);
  printf("{\"profile\": %s, \"op\": %s, \"us\": %.2f, \"calls\": %.2f, \"fused\": %d", jn, jo,
         r->ns / 1e3 / iters, (double)r->calls / iters, r->fused);
  print_shape("in0", &r->in0);
  print_shape("in1", &r->in1);
  print_shape("out", &r->out);
  printf("}\n");
  free(jn);
  free(jo);
  cJSON_Delete(name);
  cJSON_Delete(op);
}

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: %s ZOO_JSON MODEL BATCH ITERS THREADS [sgemm|profile]\n", argv[0]);
    return 2;
  }
  int batch = atoi(argv[3]), iters = atoi(argv[4]), threads = atoi(argv[5]);
  if (argc > 6 && !strcmp(argv[6], "sgemm")) return bench_sgemm(threads);
  bool profile = argc > 6 && !strcmp(argv[6], "profile");
  eng_threads_set(threads);
  char *text = slurp(argv[1]);
  cJSON *zoo = text ? cJSON_Parse(text) : NULL;
  const cJSON *m = zoo ? cJSON_GetObjectItem(cJSON_GetObjectItem(zoo, "models"), argv[2]) : NULL;
  if (!m) {
    fprintf(stderr, "%s: no model %s\n", argv[1], argv[2]);
    return 1;
  }
  /* zoo.json sits in tests/fixtures; a relative "dir" is relative to the
   * repo root (the generated large models give absolute ones). */
  char dir[1024];
  const char *slash = strrchr(argv[1], '/');
  const char *rel = cJSON_GetObjectItem(m, "dir")->valuestring;
  if (rel[0] == '/')
    snprintf(dir, sizeof dir, "%s", rel);
  else
    snprintf(dir, sizeof dir, "%.*s/../../%s", slash ? (int)(slash - argv[1]) : 1,
             slash ? argv[1] : ".", rel);
  td_err err;
  td_err_clear(&err);
  ldr_servable *sv = NULL;
  double t0 = now_us();
  if (ldr_servable_load(dir, 1, "serve", &sv, &err)) {
    fprintf(stderr, "load %s: %s\n", dir, err.msg);
    return 1;
  }
  double load_ms = (now_us() - t0) / 1e3;
  const ldr_signature *sig = ldr_servable_signature(sv, "serving_default");
  if (!sig || !sig->plan) {
    fprintf(stderr, "no servable serving_default\n");
    return 1;
  }
  eng_tensor in[16] = {0}, out[16] = {0};
  for (int k = 0; k < sig->n_inputs; k++)
    if (fill(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "inputs"), sig->inputs[k].alias), batch,
             &in[k]))
      return 1;
  /* TD_BENCH_SHAPES_BEFORE=N: one run at each batch size 1..N (other than
   * BATCH) first, as a server with dynamic batching sees them, so that the
   * timed batch is a later shape for the plan's cache of shape plans. */
  const char *before = getenv("TD_BENCH_SHAPES_BEFORE");
  for (int b = 1; before && b <= atoi(before); b++) {
    if (b == batch) continue;
    eng_tensor bin[16] = {0};
    int k = 0;
    for (; k < sig->n_inputs; k++)
      if (fill(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "inputs"), sig->inputs[k].alias), b,
               &bin[k]))
        break;
    if (k < sig->n_inputs || eng_plan_run(sig->plan, bin, out, &err)) {
      fprintf(stderr, "run at batch %d: %s\n", b, err.msg);
      return 1;
    }
    for (k = 0; k < sig->n_outputs; k++) eng_tensor_release(&out[k]);
    for (k = 0; k < sig->n_inputs; k++) eng_tensor_release(&bin[k]);
  }
  double *lat = malloc(sizeof *lat * (size_t)iters);
  int warm = iters / 10 > 5 ? iters / 10 : 5;
  const char *w = getenv("TD_BENCH_WARMUP"); /* run.py --warmup */
  if (w && atoi(w) > 0) warm = atoi(w);
  double cpu0 = 0, wall0 = 0;
  /* The first two runs at this batch, warm-up or not: the first decides
   * slicing (batch >= 2), and a new shape's plan is built from one of them. */
  double first[2] = {0, 0};
  for (int i = 0; i < warm + iters; i++) {
    if (i == warm) {
      if (profile && eng_profile_begin(sig->plan, &err)) {
        fprintf(stderr, "profile: %s\n", err.msg);
        return 1;
      }
      cpu0 = cpu_us();
      wall0 = now_us();
    }
    double s = now_us();
    if (eng_plan_run(sig->plan, in, out, &err)) {
      fprintf(stderr, "run: %s\n", err.msg);
      return 1;
    }
    if (i >= warm) lat[i - warm] = now_us() - s;
    if (i < 2) first[i] = now_us() - s;
    for (int k = 0; k < sig->n_outputs; k++) eng_tensor_release(&out[k]);
  }
  double cpu_per_wall = (cpu_us() - cpu0) / (now_us() - wall0);
  eng_profile *pf = profile ? eng_profile_end() : NULL;
  eng_plan_info info = eng_plan_get_info(sig->plan);
  double sum = 0;
  for (int i = 0; i < iters; i++) sum += lat[i];
  qsort(lat, (size_t)iters, sizeof *lat, cmp_d);
  double mean = sum / iters;
  printf(
      "{\"engine\": \"tensord\", \"model\": \"%s\", \"batch\": %d, \"threads\": %d, "
      "\"p50_us\": %.1f, \"p99_us\": %.1f, \"mean_us\": %.1f, \"inf_per_s\": %.1f, "
      "\"load_ms\": %.1f, \"peak_rss_kb\": %ld, \"rss_kb\": %ld, \"steps\": %d, \"consts\": %d, "
      "\"fused\": %d, \"shape_plan_steps\": %d, \"slice\": %lld, \"tail\": %d, \"winograd\": %d, "
      "\"isa\": \"%s\", \"first_us\": [%.1f, %.1f], "
      "\"cpu_per_wall\": %.2f}\n",
      argv[2], batch, threads, lat[iters / 2], lat[(int)(iters * 0.99)], mean, batch * 1e6 / mean,
      load_ms, peak_rss_kb(), rss_kb(), info.steps, info.consts, info.fused_ops,
      info.shape_plan_steps, info.slice_examples, info.tail_steps, info.winograd_steps,
      eng_isa_name(eng_isa_active()), first[0], first[1], cpu_per_wall);
  for (int i = 0; pf && i < pf->n_nodes; i++) print_node(pf, i, iters);
  eng_profile_free(pf);
  for (int k = 0; k < 16; k++) eng_tensor_release(&in[k]);
  free(lat);
  ldr_servable_unref(sv);
  cJSON_Delete(zoo);
  free(text);
  return 0;
}
