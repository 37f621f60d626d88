/* Device selection, the CUDA plug-in, the memory budget, per-thread device
 * state and the per-model weight cache. The executor is eng_gpu.c. */
#include "eng_device.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <unistd.h>

#include "eng_device_int.h"
#include "eng_devref.h"
#include "eng_plan.h"
#include "td_log.h"

#define PLUGIN_NAME "libtensord_cuda.so"
#define ARENA_ALIGN 256

static const eng_devapi *g_api;
static char g_name[256] = "cpu";
static atomic_size_t g_used;
static size_t g_limit;
static void *g_plugin;
static unsigned g_gen; /* bumped by every selection: older thread state is dropped */

const eng_devapi *eng_dev_api(void) { return g_api; }
bool eng_device_active(void) { return g_api != NULL; }
const char *eng_device_name(void) { return g_name; }
size_t eng_device_used(void) { return g_api ? atomic_load(&g_used) : 0; }
size_t eng_device_limit(void) { return g_api ? g_limit : 0; }

td_code eng_device_parse_mode(const char *s, eng_device_mode *out, td_err *err) {
  static const struct {
    const char *name;
    eng_device_mode mode;
  } modes[] = {{"auto", ENG_DEVICE_AUTO},
               {"cpu", ENG_DEVICE_CPU},
               {"gpu", ENG_DEVICE_GPU},
               {"reference", ENG_DEVICE_REFERENCE}};
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
    if (s && !strcmp(s, modes[i].name)) {
      *out = modes[i].mode;
      return TD_OK;
    }
  return td_err_set(err, TD_INVALID_ARGUMENT, "--device must be auto, cpu, gpu or reference, not '%s'",
                    s ? s : "");
}

/* dlopens the plug-in: the given path, else next to the executable, else
 * by name through the loader's search path. */
static const eng_devapi *load_plugin(const char *path, char *why, size_t wl) {
  char here[PATH_MAX];
  void *h = NULL;
  const char *tried = path;
  if (path && *path) {
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  } else {
    ssize_t n = readlink("/proc/self/exe", here, sizeof here - 1);
    if (n > 0) {
      here[n] = 0;
      char *slash = strrchr(here, '/');
      if (slash && (size_t)(slash - here) + sizeof PLUGIN_NAME + 2 < sizeof here) {
        strcpy(slash + 1, PLUGIN_NAME);
        if (access(here, F_OK) == 0) {
          tried = here;
          h = dlopen(here, RTLD_NOW | RTLD_LOCAL);
        }
      }
    }
    if (!h && tried != here) {
      tried = PLUGIN_NAME;
      h = dlopen(PLUGIN_NAME, RTLD_NOW | RTLD_LOCAL);
    }
  }
  if (!h) {
    const char *e = dlerror();
    snprintf(why, wl, "the CUDA backend plug-in (%.200s) cannot be loaded: %.250s", tried ? tried : PLUGIN_NAME,
             e ? e : "not found");
    return NULL;
  }
  eng_devapi_fn fn;
  *(void **)&fn = dlsym(h, ENG_DEVAPI_SYMBOL);
  const eng_devapi *api = fn ? fn() : NULL;
  if (!api || api->version != ENG_DEVAPI_VERSION) {
    snprintf(why, wl, "%.300s is not a tensord device plug-in of version %d", tried, ENG_DEVAPI_VERSION);
    dlclose(h);
    return NULL;
  }
  g_plugin = h;
  return api;
}

td_code eng_device_select(const eng_device_opts *o, char *note, size_t nl, td_err *err) {
  char why[512] = "", desc[200] = "";
  g_api = NULL;
  g_gen++;
  snprintf(g_name, sizeof g_name, "cpu");
  atomic_store(&g_used, 0);
  g_limit = 0;
  if (o->memory_fraction < 0 || o->memory_fraction > 1)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--per_process_gpu_memory_fraction must be between 0 and 1, not %g",
                      o->memory_fraction);
  if (o->mode == ENG_DEVICE_CPU) {
    snprintf(note, nl, "device: CPU (--device=cpu)");
    return TD_OK;
  }
  const eng_devapi *api = NULL;
  if (o->mode == ENG_DEVICE_REFERENCE)
    api = eng_devref_api();
  else if (!g_plugin)
    api = load_plugin(o->plugin, why, sizeof why);
  else {
    eng_devapi_fn fn;
    *(void **)&fn = dlsym(g_plugin, ENG_DEVAPI_SYMBOL);
    api = fn();
  }
  size_t total = 0;
  if (api && api->probe(desc, sizeof desc, &total, why, sizeof why)) api = NULL;
  if (api && api->init(o->allow_tf32)) {
    snprintf(why, sizeof why, "initialising %.200s failed: %.250s", desc, api->error());
    api = NULL;
  }
  if (!api && g_plugin) { /* give its memory back: the CPU serves */
    dlclose(g_plugin);
    g_plugin = NULL;
  }
  if (!api) {
    if (o->mode == ENG_DEVICE_GPU)
      return td_err_set(err, TD_FAILED_PRECONDITION, "--device=gpu: no usable GPU: %s", why);
    snprintf(note, nl, "device: CPU (no usable GPU: %s)", why);
    return TD_OK;
  }
  g_api = api;
  g_limit = o->memory_fraction > 0 ? (size_t)((double)total * o->memory_fraction) : total;
  snprintf(g_name, sizeof g_name, "%s", desc);
  snprintf(note, nl, "device: %s, %zu MiB of %zu MiB usable, %s math", desc, g_limit >> 20,
           total >> 20, o->allow_tf32 ? "TF32" : "FP32");
  return TD_OK;
}

/* --- memory budget -------------------------------------------------------- */

void *eng_dev_alloc(size_t bytes, const char *what, td_err *err) {
  size_t used = atomic_fetch_add(&g_used, bytes) + bytes;
  if (used > g_limit) {
    atomic_fetch_sub(&g_used, bytes);
    td_err_set(err, TD_RESOURCE_EXHAUSTED,
               "%s needs %.1f MiB of GPU memory, but %.1f MiB of the %.1f MiB allowed are in use "
               "(--per_process_gpu_memory_fraction)",
               what, bytes / 1048576.0, (used - bytes) / 1048576.0, g_limit / 1048576.0);
    return NULL;
  }
  void *d = g_api->alloc(bytes ? bytes : 1);
  if (!d) {
    atomic_fetch_sub(&g_used, bytes);
    td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: the GPU could not allocate %.1f MiB: %s", what,
               bytes / 1048576.0, g_api->error());
  }
  return d;
}

void eng_dev_free(void *d, size_t bytes) {
  if (!d || !g_api) return;
  g_api->free(d);
  /* Saturating: memory counted before a re-selection (tests) is not. */
  size_t used = atomic_load(&g_used);
  while (!atomic_compare_exchange_weak(&g_used, &used, used > bytes ? used - bytes : 0)) {
  }
}

/* --- per-thread state -------------------------------------------------------- */

static tss_t g_thread_key;
static once_flag g_thread_once = ONCE_FLAG_INIT;

static void free_chunks(eng_dev_thread *t) {
  for (int i = 0; i < t->n_chunks; i++) eng_dev_free(t->chunk[i], t->chunk_cap[i]);
  t->n_chunks = 0;
  t->used = 0;
}

/* Releases a thread's state through the device it was made for; memory of
 * an earlier selection (tests switch devices) is outside today's budget. */
static void thread_free(void *arg) {
  eng_dev_thread *t = arg;
  if (!t) return;
  t->api->sync(t->stream);
  if (t->api == g_api && t->gen == g_gen)
    free_chunks(t);
  else
    for (int i = 0; i < t->n_chunks; i++) t->api->free(t->chunk[i]);
  t->api->stream_destroy(t->stream);
  free(t->dv);
  free(t);
}

static void thread_key_init(void) { tss_create(&g_thread_key, thread_free); }

eng_dev_thread *eng_dev_thread_get(td_err *err) {
  call_once(&g_thread_once, thread_key_init);
  eng_dev_thread *t = tss_get(g_thread_key);
  if (t && t->api == g_api && t->gen == g_gen) return t;
  if (t) { /* made for a device selected earlier */
    thread_free(t);
    tss_set(g_thread_key, NULL);
  }
  t = calloc(1, sizeof *t);
  if (t) {
    t->api = g_api;
    t->gen = g_gen;
  }
  if (!t || !(t->stream = g_api->stream_create())) {
    free(t);
    td_err_set(err, TD_RESOURCE_EXHAUSTED, "cannot create a GPU stream: %s", g_api->error());
    return NULL;
  }
  if (tss_set(g_thread_key, t) != thrd_success) {
    g_api->stream_destroy(t->stream);
    free(t);
    td_err_set(err, TD_INTERNAL, "cannot keep per-thread GPU state");
    return NULL;
  }
  return t;
}

void *eng_dev_scratch(eng_dev_thread *t, size_t bytes, td_err *err) {
  size_t n = (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
  if (n == 0) n = ARENA_ALIGN;
  t->want += n;
  if (t->n_chunks && t->used + n <= t->chunk_cap[t->n_chunks - 1]) {
    void *d = t->chunk[t->n_chunks - 1] + t->used;
    t->used += n;
    return d;
  }
  if (t->n_chunks == ENG_DEV_CHUNKS) {
    td_err_set(err, TD_RESOURCE_EXHAUSTED, "too many GPU scratch chunks in one run");
    return NULL;
  }
  size_t cap = t->n_chunks ? t->chunk_cap[t->n_chunks - 1] * 2 : (size_t)256 << 10;
  if (cap < n) cap = n;
  char *d = eng_dev_alloc(cap, "a request's intermediate tensors", err);
  if (!d && cap > n) { /* a tight budget: just what this tensor needs */
    cap = n;
    d = eng_dev_alloc(cap, "a request's intermediate tensors", err);
  }
  if (!d) return NULL;
  t->chunk[t->n_chunks] = d;
  t->chunk_cap[t->n_chunks++] = cap;
  t->used = n;
  return d;
}

void eng_dev_thread_end(eng_dev_thread *t) {
  g_api->sync(t->stream);
  if (t->n_chunks > 1) {
    size_t want = t->want;
    free_chunks(t);
    td_err e;
    td_err_clear(&e);
    char *d = eng_dev_alloc(want, "a request's intermediate tensors", &e);
    if (d) {
      t->chunk[0] = d;
      t->chunk_cap[0] = want;
      t->n_chunks = 1;
    }
  }
  t->used = 0;
  t->want = 0;
}

/* --- per-model constants ------------------------------------------------------- */

typedef struct dconst {
  const void *host;
  void *d;
  size_t bytes;
} dconst;

struct eng_dev_model {
  mtx_t lock;
  dconst *tab; /* open addressing by host pointer */
  size_t cap, n;
};

eng_dev_model *eng_dev_model_new(void) {
  eng_dev_model *dm = calloc(1, sizeof *dm);
  if (!dm) return NULL;
  mtx_init(&dm->lock, mtx_plain);
  return dm;
}

void eng_dev_model_free(eng_dev_model *dm) {
  if (!dm) return;
  for (size_t i = 0; i < dm->cap; i++)
    if (dm->tab[i].host) eng_dev_free(dm->tab[i].d, dm->tab[i].bytes);
  free(dm->tab);
  mtx_destroy(&dm->lock);
  free(dm);
}

static size_t slot_of(const eng_dev_model *dm, const void *host) {
  size_t h = (size_t)((uintptr_t)host >> 6) * 0x9E3779B97F4A7C15ull;
  size_t i = h & (dm->cap - 1);
  while (dm->tab[i].host && dm->tab[i].host != host) i = (i + 1) & (dm->cap - 1);
  return i;
}

static bool grow(eng_dev_model *dm) {
  size_t cap = dm->cap ? dm->cap * 2 : 64;
  dconst *old = dm->tab;
  size_t oldcap = dm->cap;
  dm->tab = calloc(cap, sizeof *dm->tab);
  if (!dm->tab) {
    dm->tab = old;
    return false;
  }
  dm->cap = cap;
  for (size_t i = 0; i < oldcap; i++)
    if (old[i].host) dm->tab[slot_of(dm, old[i].host)] = old[i];
  free(old);
  return true;
}

td_code eng_dev_model_const(eng_dev_model *dm, eng_dev_thread *t, const eng_tensor *c, void **d,
                            td_err *err) {
  const void *host = eng_tensor_data(c);
  size_t bytes = eng_tensor_nbytes(c);
  td_code rc = TD_OK;
  mtx_lock(&dm->lock);
  if (dm->cap) {
    dconst *e = &dm->tab[slot_of(dm, host)];
    if (e->host) {
      *d = e->d;
      mtx_unlock(&dm->lock);
      return TD_OK;
    }
  }
  if ((dm->n + 1) * 2 > dm->cap && !grow(dm)) {
    mtx_unlock(&dm->lock);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  void *dp = eng_dev_alloc(bytes, "the model's weights", err);
  if (!dp) {
    rc = err ? err->code : TD_RESOURCE_EXHAUSTED;
  } else if (bytes && (g_api->upload(t->stream, dp, host, bytes) || g_api->sync(t->stream))) {
    rc = td_err_set(err, TD_INTERNAL, "uploading a weight to the GPU: %s", g_api->error());
    eng_dev_free(dp, bytes);
  } else {
    dconst *e = &dm->tab[slot_of(dm, host)];
    *e = (dconst){.host = host, .d = dp, .bytes = bytes};
    dm->n++;
    *d = dp;
  }
  mtx_unlock(&dm->lock);
  return rc;
}

/* Constants keep their buffers for the plan's life, so a host pointer names
 * one weight for as long as the cache can be asked about it. */
static td_code attach_plan(eng_dev_model *dm, eng_dev_thread *t, const eng_plan *p, td_err *err) {
  td_code rc = TD_OK;
  for (int i = 0; i < p->n_consts && !rc; i++) {
    const eng_tensor *c = &p->const_tensor[i];
    if (c->buf && !c->is_ref && c->dtype == ENG_DT_FLOAT && eng_tensor_nbytes(c) > 0) {
      void *d;
      rc = eng_dev_model_const(dm, t, c, &d, err);
    }
  }
  for (int s = 0; p->epi && s < p->n_steps && !rc; s++)
    for (int k = 0; p->epi[s] && k < p->epi[s]->n && !rc; k++) {
      const eng_tensor *c = &p->epi[s]->op[k].k;
      void *d;
      if (c->buf) rc = eng_dev_model_const(dm, t, c, &d, err);
    }
  return rc;
}

/* The model's free hook for its device state. */
static void dev_model_free(void *dm) { eng_dev_model_free(dm); }

td_code eng_device_attach(eng_model *m, int n_plans, eng_plan *const *plans, td_err *err) {
  if (!g_api) return TD_OK;
  eng_dev_thread *t = eng_dev_thread_get(err);
  if (!t) return err ? err->code : TD_INTERNAL;
  eng_dev_model *dm = eng_dev_model_new();
  if (!dm) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  td_code rc = TD_OK;
  for (int i = 0; i < n_plans && !rc; i++)
    if (plans[i]) rc = attach_plan(dm, t, plans[i], err);
  if (rc) {
    eng_dev_model_free(dm);
    return rc;
  }
  eng_model_set_dev(m, dm, dev_model_free);
  return TD_OK;
}
