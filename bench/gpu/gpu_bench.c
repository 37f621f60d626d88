/* gpu_bench: zoo throughput on the GPU against the CPU engine, in one
 * process on one machine.
 *
 *   gpu_bench ZOO_JSON DEVICE MODEL[,MODEL...] BATCH[,BATCH...] [SECONDS]
 *
 * DEVICE is gpu (the CUDA plug-in beside the daemon, or TENSORD_CUDA_PLUGIN)
 * or reference (the host emulation: only to check the benchmark itself on
 * a machine without a GPU). For each model the serving_default plan is
 * loaded on the CPU, timed at each batch size, unloaded, loaded again on
 * the device (weights uploaded once) and timed again. Inputs are drawn
 * from zoo.json's input specs (float: uniform in [-1, 1); int: below the
 * spec's bound; masks: all ones). Each point runs for about SECONDS
 * (default 2) after a warm-up; one JSON line per point:
 *   {"model", "batch", "device", "p50_us", "p99_us", "inf_per_s"}
 * and a last line with the GPU / CPU throughput ratios. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_device.h"
#include "ldr_servable.h"
#include "td_file.h"

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static uint64_t rng = 88172645463325252ull;
static double unit(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (double)(rng >> 11) / 9007199254740992.0;
}

static int make_input(const cJSON *spec, int batch, eng_dtype dt, eng_tensor *t) {
  int64_t dims[ENG_MAX_RANK];
  int r = 0;
  dims[r++] = batch;
  const cJSON *d;
  cJSON_ArrayForEach(d, cJSON_GetObjectItem(spec, "shape")) {
    if (r == ENG_MAX_RANK) return -1;
    dims[r++] = (int64_t)d->valuedouble;
  }
  eng_shape s = eng_shape_make(r, dims);
  if (eng_tensor_alloc(t, dt, &s, NULL)) return -1;
  const char *gen = cJSON_GetStringValue(cJSON_GetObjectItem(spec, "gen"));
  const cJSON *mod = cJSON_GetObjectItem(spec, "mod");
  int64_t bound = mod ? (int64_t)mod->valuedouble : 2, n = eng_tensor_numel(t);
  for (int64_t i = 0; i < n; i++) {
    double v = gen && !strcmp(gen, "float") ? 2 * unit() - 1
               : gen && !strcmp(gen, "int") ? (double)(int64_t)(unit() * (double)bound)
                                            : 1;
    if (dt == ENG_DT_FLOAT) ((float *)eng_tensor_data(t))[i] = (float)v;
    else if (dt == ENG_DT_INT32) ((int32_t *)eng_tensor_data(t))[i] = (int32_t)v;
    else if (dt == ENG_DT_INT64) ((int64_t *)eng_tensor_data(t))[i] = (int64_t)v;
    else return -1;
  }
  return 0;
}

typedef struct point {
  double p50, p99, ips;
} point;

static int time_plan(const ldr_signature *sig, const cJSON *model, int batch, double seconds,
                     point *pt) {
  eng_tensor in[16] = {{0}}, out[16] = {{0}};
  if (sig->n_inputs > 16 || sig->n_outputs > 16) return -1;
  for (int i = 0; i < sig->n_inputs; i++) {
    const cJSON *spec = cJSON_GetObjectItem(cJSON_GetObjectItem(model, "inputs"), sig->inputs[i].alias);
    if (!spec || make_input(spec, batch, sig->inputs[i].dtype, &in[i])) {
      fprintf(stderr, "input %s: no usable spec in zoo.json\n", sig->inputs[i].alias);
      return -1;
    }
  }
  td_err err;
  td_err_clear(&err);
  size_t cap = 1 << 16, n = 0;
  double *lat = malloc(sizeof *lat * cap), t_end = 0;
  int rc = 0;
  for (int warm = 0; warm < 5 && !rc; warm++) {
    rc = eng_plan_run(sig->plan, in, out, &err) ? -1 : 0;
    for (int o = 0; o < sig->n_outputs; o++) eng_tensor_release(&out[o]);
  }
  double start = now_us();
  while (!rc && n < cap && (t_end = now_us()) - start < seconds * 1e6) {
    double t0 = now_us();
    rc = eng_plan_run(sig->plan, in, out, &err) ? -1 : 0;
    lat[n++] = now_us() - t0;
    for (int o = 0; o < sig->n_outputs; o++) eng_tensor_release(&out[o]);
  }
  if (rc) fprintf(stderr, "run failed: %s\n", err.msg);
  if (!rc && n) {
    qsort(lat, n, sizeof *lat, cmp_d);
    pt->p50 = lat[n / 2];
    pt->p99 = lat[(size_t)((double)(n - 1) * 0.99)];
    pt->ips = batch * (double)n / ((t_end - start) / 1e6);
  }
  free(lat);
  for (int i = 0; i < sig->n_inputs; i++) eng_tensor_release(&in[i]);
  return rc;
}

static int select_device(eng_device_mode mode) {
  eng_device_opts o = {.mode = mode, .plugin = getenv("TENSORD_CUDA_PLUGIN")};
  char note[512];
  td_err err;
  td_err_clear(&err);
  if (eng_device_select(&o, note, sizeof note, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  fprintf(stderr, "%s\n", note);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "usage: %s ZOO_JSON gpu|reference MODEL[,MODEL] BATCH[,BATCH] [SECONDS]\n", argv[0]);
    return 2;
  }
  eng_device_mode dev = !strcmp(argv[2], "reference") ? ENG_DEVICE_REFERENCE : ENG_DEVICE_GPU;
  double seconds = argc > 5 ? atof(argv[5]) : 2;
  uint8_t *text = NULL;
  size_t len = 0;
  td_err err;
  if (td_file_read(argv[1], 64 << 20, &text, &len, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  cJSON *zoo = cJSON_ParseWithLength((const char *)text, len);
  free(text);
  const cJSON *models = cJSON_GetObjectItem(zoo, "models");
  char root[4096];
  snprintf(root, sizeof root, "%s", argv[1]);
  char *slash = strrchr(root, '/');
  if (slash) *slash = 0; /* tests/fixtures */
  int nb = 0, batches[16];
  for (char *save = NULL, *b = strtok_r(argv[4], ",", &save); b && nb < 16; b = strtok_r(NULL, ",", &save))
    batches[nb++] = atoi(b);
  int status = 0;
  for (char *save = NULL, *name = strtok_r(argv[3], ",", &save); name; name = strtok_r(NULL, ",", &save)) {
    const cJSON *model = cJSON_GetObjectItem(models, name);
    const char *rel = cJSON_GetStringValue(cJSON_GetObjectItem(model, "dir"));
    if (!rel) {
      fprintf(stderr, "%s: not in zoo.json\n", name);
      return 1;
    }
    char dir[8192];
    /* zoo.json's dirs are relative to the repository root. */
    snprintf(dir, sizeof dir, "%s/../../%s", root, rel);
    point cpu[16] = {{0}}, gpu[16] = {{0}};
    for (int pass = 0; pass < 2; pass++) {
      if (select_device(pass ? dev : ENG_DEVICE_CPU)) return 1;
      ldr_servable *sv = NULL;
      td_err_clear(&err);
      if (ldr_servable_load(dir, 1, "serve", &sv, &err)) {
        fprintf(stderr, "%s on %s: %s\n", name, pass ? "the device" : "the CPU", err.msg);
        status = 1;
        break;
      }
      const ldr_signature *sig = ldr_servable_signature(sv, "serving_default");
      for (int b = 0; sig && sig->plan && b < nb; b++) {
        point *pt = pass ? &gpu[b] : &cpu[b];
        if (time_plan(sig, model, batches[b], seconds, pt)) {
          status = 1;
          continue;
        }
        printf("{\"model\": \"%s\", \"batch\": %d, \"device\": \"%s\", \"p50_us\": %.1f, "
               "\"p99_us\": %.1f, \"inf_per_s\": %.1f}\n",
               name, batches[b], pass ? eng_device_name() : "cpu", pt->p50, pt->p99, pt->ips);
        fflush(stdout);
      }
      ldr_servable_unref(sv);
    }
    printf("{\"model\": \"%s\", \"gpu_over_cpu\": {", name);
    for (int b = 0; b < nb; b++)
      printf("%s\"%d\": %.2f", b ? ", " : "", batches[b], cpu[b].ips > 0 ? gpu[b].ips / cpu[b].ips : 0);
    printf("}}\n");
  }
  select_device(ENG_DEVICE_CPU);
  cJSON_Delete(zoo);
  return status;
}
