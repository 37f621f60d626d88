/* Design note. All decisions happen under one mutex (mu), on the manager
 * thread (reconcile) or at the end of a load (finish_load); the slow parts
 * (scanning and completeness checks, loading, warmup, freeing a servable)
 * run without it. Each version carries one state (vstate) from which the
 * registry's TF Serving state follows:
 *   WAITING (incomplete on disk)   -> START + reason
 *   IDLE    (complete, not wanted) -> not reported
 *   QUEUED  -> START, LOADING -> LOADING, RETRY -> LOADING + last error
 *   READY   -> AVAILABLE, DRAINING -> UNLOADING
 *   FAILED  -> END + error, UNLOADED -> END
 * A "ticket" counts config changes and scan requests; settled_gen is the
 * newest ticket whose effects have finished (see ldr_manager_wait). */
#include "ldr_manager.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "ldr_scan.h"
#include "ldr_warmup.h"
#include "td_log.h"

#define LOAD_NICE 10 /* load and scan threads: below request threads */

typedef enum {
  V_WAITING,
  V_IDLE,
  V_QUEUED,
  V_LOADING,
  V_RETRY,
  V_READY,
  V_DRAINING,
  V_FAILED,
  V_UNLOADED,
} vstate;

typedef struct mver {
  int64_t version;
  char *path;
  vstate st;
  bool on_disk;
  bool complete;
  int attempts;         /* failed load attempts so far */
  uint64_t retry_at_ns; /* RETRY */
  td_err last_err;      /* WAITING reason or last load error */
  ldr_servable *held;   /* DRAINING: the reference taken from the registry */
} mver;

typedef struct mmodel {
  char *name;
  char *base_path;
  cfg_version_policy policy; /* versions owned */
  bool configured;
  uint64_t added_gen; /* ticket of the config change that added it */
  uint64_t scan_gen;  /* ticket current when its last scan started */
  int scan_state;     /* 0 ok, 1 no versions, 2 base path unreadable: logged on change */
  int n, cap;
  mver *v; /* sorted by version */
} mmodel;

typedef struct job {
  char *model;
  int64_t version;
  char *path;
  struct job *next;
} job;

struct ldr_manager {
  ldr_registry *reg;
  ldr_manager_options opt;
  char *tags;
  uv_mutex_t mu;
  uv_cond_t wake;    /* manager thread */
  uv_cond_t work;    /* load workers */
  uv_cond_t settled; /* ldr_manager_wait */
  uv_thread_t thread;
  uv_thread_t *workers;
  int n_workers;
  bool stopping;      /* threads exit */
  bool closing;       /* shutdown: no new loads */
  bool scan_wanted;
  bool dirty;
  int loading;        /* workers inside a load */
  uint64_t gen;       /* latest ticket */
  uint64_t cfg_gen;   /* ticket of the latest set_config */
  uint64_t labels_gen;
  uint64_t settled_gen;
  td_err settle_result;
  cfg_model_config config;
  int n_models;
  mmodel **models;
  job *jobs, *jobs_tail;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- models and versions (mu held) ----------------------------------------- */

static mmodel *find_model(ldr_manager *m, const char *name) {
  for (int i = 0; i < m->n_models; i++)
    if (!strcmp(m->models[i]->name, name)) return m->models[i];
  return NULL;
}

static mver *find_version(mmodel *mm, int64_t v) {
  for (int i = 0; i < mm->n; i++)
    if (mm->v[i].version == v) return &mm->v[i];
  return NULL;
}

static mver *add_version(mmodel *mm, int64_t v, const char *path) {
  int i = 0;
  while (i < mm->n && mm->v[i].version < v) i++;
  if (mm->n == mm->cap) {
    int cap = mm->cap ? mm->cap * 2 : 4;
    mver *nv = realloc(mm->v, sizeof *nv * (size_t)cap);
    if (!nv) return NULL;
    mm->v = nv;
    mm->cap = cap;
  }
  char *p = strdup(path);
  if (!p) return NULL;
  memmove(&mm->v[i + 1], &mm->v[i], sizeof *mm->v * (size_t)(mm->n - i));
  mm->n++;
  mm->v[i] = (mver){.version = v, .path = p, .st = V_IDLE};
  return &mm->v[i];
}

static void remove_version(mmodel *mm, mver *x) {
  int i = (int)(x - mm->v);
  free(x->path);
  memmove(&mm->v[i], &mm->v[i + 1], sizeof *mm->v * (size_t)(mm->n - i - 1));
  mm->n--;
}

static void free_model(mmodel *mm) {
  for (int i = 0; i < mm->n; i++) {
    free(mm->v[i].path);
    ldr_servable_unref(mm->v[i].held);
  }
  free(mm->v);
  free(mm->name);
  free(mm->base_path);
  free(mm->policy.versions);
  free(mm);
}

static void set_reg(ldr_manager *m, mmodel *mm, mver *x, ldr_state st, const td_err *status) {
  td_err err;
  if (ldr_registry_set_state(m->reg, mm->name, x->version, st, status, &err))
    td_log_warn("registry: %s", err.msg);
}

/* The versions the policy wants, among the complete ones on disk. */
static bool is_aspired(const mmodel *mm, const mver *x) {
  if (!mm->configured || !x->on_disk || !x->complete) return false;
  switch (mm->policy.kind) {
    case CFG_POLICY_ALL:
      return true;
    case CFG_POLICY_SPECIFIC:
      for (int i = 0; i < mm->policy.n_versions; i++)
        if (mm->policy.versions[i] == x->version) return true;
      return false;
    case CFG_POLICY_LATEST: {
      uint32_t higher = 0;
      for (int i = 0; i < mm->n; i++)
        higher += mm->v[i].on_disk && mm->v[i].complete && mm->v[i].version > x->version;
      return higher < mm->policy.num_versions;
    }
  }
  return false;
}

/* --- loading ------------------------------------------------------------------- */

static void queue_load(ldr_manager *m, mmodel *mm, mver *x) {
  job *j = calloc(1, sizeof *j);
  if (j && (j->model = strdup(mm->name)) && (j->path = strdup(x->path))) {
    j->version = x->version;
    if (m->jobs_tail)
      m->jobs_tail->next = j;
    else
      m->jobs = j;
    m->jobs_tail = j;
    x->st = V_QUEUED;
    set_reg(m, mm, x, LDR_STATE_START, NULL);
    uv_cond_signal(&m->work);
    return;
  }
  if (j) free(j->model);
  free(j);
  td_log_error("out of memory queueing a load of %s version %lld", mm->name,
               (long long)x->version);
}

/* Drops a queued job for (model, version); true when one was queued. */
static bool unqueue(ldr_manager *m, const char *model, int64_t version) {
  job **pp = &m->jobs, *prev = NULL;
  while (*pp) {
    job *j = *pp;
    if (j->version == version && !strcmp(j->model, model)) {
      *pp = j->next;
      if (m->jobs_tail == j) m->jobs_tail = prev;
      free(j->model);
      free(j->path);
      free(j);
      return true;
    }
    prev = j;
    pp = &j->next;
  }
  return false;
}

/* Records the result of a load (mu held). Takes over sv. */
static void finish_load(ldr_manager *m, const job *j, ldr_servable *sv, td_code rc,
                        const td_err *lerr) {
  mmodel *mm = find_model(m, j->model);
  mver *x = mm ? find_version(mm, j->version) : NULL;
  if (!x || x->st != V_LOADING) {
    ldr_servable_unref(sv);
    return;
  }
  if (!rc && (!is_aspired(mm, x) || m->closing)) {
    /* No longer wanted (the directory went, the policy changed): never
     * serve it. */
    ldr_servable_unref(sv);
    x->st = V_UNLOADED;
    set_reg(m, mm, x, LDR_STATE_END, NULL);
    return;
  }
  if (!rc) {
    td_err err;
    if (ldr_registry_publish(m->reg, mm->name, sv, &err)) {
      td_log_error("%s", err.msg);
      x->st = V_FAILED;
      return;
    }
    x->st = V_READY;
    x->attempts = 0;
    td_log_info("Successfully loaded servable version {name: %s version: %lld}", mm->name,
                (long long)x->version);
    return;
  }
  x->attempts++;
  x->last_err = *lerr;
  if (x->attempts <= m->opt.max_num_load_retries && !m->closing) {
    int64_t us = m->opt.load_retry_interval_micros > 0 ? m->opt.load_retry_interval_micros : 0;
    x->retry_at_ns = now_ns() + (uint64_t)us * 1000u;
    x->st = V_RETRY;
    set_reg(m, mm, x, LDR_STATE_LOADING, lerr);
    td_log_error("Loading servable: {name: %s version: %lld} failed: %s. Retrying (%d of %d) in "
                 "%.3f s",
                 mm->name, (long long)x->version, lerr->msg, x->attempts,
                 m->opt.max_num_load_retries, us / 1e6);
  } else {
    x->st = V_FAILED;
    set_reg(m, mm, x, LDR_STATE_END, lerr);
    td_log_error("Loading servable: {name: %s version: %lld} failed: %s", mm->name,
                 (long long)x->version, lerr->msg);
  }
}

/* Loads and scans yield the CPU to request threads: Linux gives each
 * thread its own nice value. Best effort. */
static void lower_priority(void) { setpriority(PRIO_PROCESS, (id_t)gettid(), LOAD_NICE); }

typedef struct load_task {
  ldr_manager *m;
  const job *j;
  ldr_servable *sv;
  td_code rc;
  td_err err;
} load_task;

/* One load and its warmup, on a thread of its own that exits afterwards,
 * so that per-thread caches filled while loading (the engine recycles
 * tensor buffers per thread) do not outlive the load. */
static void load_main(void *arg) {
  load_task *lt = arg;
  lower_priority();
  lt->rc = ldr_servable_load(lt->j->path, lt->j->version, lt->m->tags, &lt->sv, &lt->err);
  if (!lt->rc && lt->m->opt.enable_warmup) {
    lt->rc = ldr_warmup_run(lt->sv, lt->j->path, lt->m->opt.warmup_iterations, NULL, &lt->err);
    if (lt->rc) {
      ldr_servable_unref(lt->sv);
      lt->sv = NULL;
    }
  }
}

static void worker_main(void *arg) {
  ldr_manager *m = arg;
  lower_priority();
  uv_mutex_lock(&m->mu);
  for (;;) {
    while (!m->stopping && !m->jobs) uv_cond_wait(&m->work, &m->mu);
    if (m->stopping) break;
    job *j = m->jobs;
    m->jobs = j->next;
    if (!m->jobs) m->jobs_tail = NULL;
    mmodel *mm = find_model(m, j->model);
    mver *x = mm ? find_version(mm, j->version) : NULL;
    if (!x || x->st != V_QUEUED) {
      free(j->model);
      free(j->path);
      free(j);
      continue;
    }
    x->st = V_LOADING;
    set_reg(m, mm, x, LDR_STATE_LOADING, x->attempts ? &x->last_err : NULL);
    m->loading++;
    uv_mutex_unlock(&m->mu);

    td_log_info("Loading servable: {name: %s version: %lld} from %s", j->model,
                (long long)j->version, j->path);
    load_task lt = {.m = m, .j = j};
    td_err_clear(&lt.err);
    uv_thread_t t;
    if (uv_thread_create(&t, load_main, &lt) == 0)
      uv_thread_join(&t);
    else
      load_main(&lt);

    uv_mutex_lock(&m->mu);
    m->loading--;
    finish_load(m, j, lt.sv, lt.rc, &lt.err);
    free(j->model);
    free(j->path);
    free(j);
    m->dirty = true;
    uv_cond_signal(&m->wake);
  }
  uv_mutex_unlock(&m->mu);
}

/* --- scanning ------------------------------------------------------------------ */

typedef struct scan_dir {
  int64_t version;
  char *path;
  bool known; /* already complete: not checked again */
  td_code rc;
  td_err err;
} scan_dir;

typedef struct scan_model {
  char *name;
  char *base_path;
  int n_known;
  int64_t *known; /* versions known complete */
  td_code rc;     /* listing the base path */
  td_err err;
  int n;
  scan_dir *dirs;
} scan_model;

static void scan_free(scan_model *s, int n) {
  for (int i = 0; s && i < n; i++) {
    for (int d = 0; d < s[i].n; d++) free(s[i].dirs[d].path);
    free(s[i].dirs);
    free(s[i].known);
    free(s[i].name);
    free(s[i].base_path);
  }
  free(s);
}

/* Lists and checks every configured base path (mu NOT held). */
static void scan_run(scan_model *s, int n) {
  for (int i = 0; i < n; i++) {
    ldr_version_dir *dirs = NULL;
    int nd = 0;
    s[i].rc = ldr_scan_versions(s[i].base_path, &dirs, &nd, &s[i].err);
    if (s[i].rc) continue;
    s[i].dirs = nd ? calloc((size_t)nd, sizeof *s[i].dirs) : NULL;
    if (nd && !s[i].dirs) {
      s[i].rc = td_err_set(&s[i].err, TD_RESOURCE_EXHAUSTED, "out of memory");
      ldr_scan_free(dirs, nd);
      continue;
    }
    for (int d = 0; d < nd; d++) {
      scan_dir *sd = &s[i].dirs[s[i].n++];
      sd->version = dirs[d].version;
      sd->path = dirs[d].path;
      dirs[d].path = NULL;
      for (int k = 0; k < s[i].n_known && !sd->known; k++) sd->known = s[i].known[k] == sd->version;
      if (!sd->known) sd->rc = ldr_scan_check_complete(sd->path, &sd->err);
    }
    ldr_scan_free(dirs, nd);
  }
}

/* Snapshot of what to scan (mu held). */
static scan_model *scan_prepare(ldr_manager *m, int *n_out) {
  scan_model *s = m->n_models ? calloc((size_t)m->n_models, sizeof *s) : NULL;
  int n = 0;
  for (int i = 0; s && i < m->n_models; i++) {
    mmodel *mm = m->models[i];
    if (!mm->configured) continue;
    scan_model *sm = &s[n];
    sm->name = strdup(mm->name);
    sm->base_path = strdup(mm->base_path);
    sm->known = mm->n ? calloc((size_t)mm->n, sizeof *sm->known) : NULL;
    if (!sm->name || !sm->base_path || (mm->n && !sm->known)) {
      free(sm->name);
      free(sm->base_path);
      free(sm->known);
      *sm = (scan_model){0};
      continue;
    }
    for (int k = 0; k < mm->n; k++)
      if (mm->v[k].complete && mm->v[k].on_disk) sm->known[sm->n_known++] = mm->v[k].version;
    n++;
  }
  *n_out = n;
  return s;
}

/* Folds a scan into the models (mu held). */
static void scan_merge(ldr_manager *m, scan_model *s, int n, uint64_t gen) {
  for (int i = 0; i < n; i++) {
    mmodel *mm = find_model(m, s[i].name);
    if (!mm || !mm->configured || strcmp(mm->base_path, s[i].base_path)) continue;
    mm->scan_gen = gen;
    if (s[i].rc) {
      /* TF Serving emits nothing then: the versions stay as they are. */
      if (mm->scan_state != 2)
        td_log_error("FileSystemStoragePathSource encountered a filesystem access error: %s "
                     "(servable %s); its versions stay as they are",
                     s[i].err.msg, mm->name);
      mm->scan_state = 2;
      continue;
    }
    if (!s[i].n && mm->scan_state != 1)
      td_log_warn("No versions of servable %s found under base path %s. Did you forget to name "
                  "your leaf directory as a number (eg. '/1/')?",
                  mm->name, mm->base_path);
    mm->scan_state = s[i].n ? 0 : 1;
    for (int k = 0; k < mm->n; k++) mm->v[k].on_disk = false;
    for (int d = 0; d < s[i].n; d++) {
      scan_dir *sd = &s[i].dirs[d];
      mver *x = find_version(mm, sd->version);
      if (!x && !(x = add_version(mm, sd->version, sd->path))) continue;
      x->on_disk = true;
      bool idle = x->st == V_IDLE || x->st == V_WAITING || x->st == V_UNLOADED ||
                  x->st == V_FAILED;
      if (idle && strcmp(x->path, sd->path)) {
        char *p = strdup(sd->path);
        if (p) {
          free(x->path);
          x->path = p;
        }
      }
      if (sd->known) continue;
      if (!sd->rc) {
        x->complete = true;
        if (x->st == V_WAITING) {
          td_log_info("version %lld of %s is complete now", (long long)x->version, mm->name);
          x->st = V_IDLE;
          ldr_registry_forget(m->reg, mm->name, x->version);
        }
      } else if (x->st == V_IDLE || x->st == V_WAITING) {
        x->complete = false;
        if (x->st != V_WAITING || strcmp(x->last_err.msg, sd->err.msg))
          td_log_warn("Not loading servable {name: %s version: %lld} yet: %s", mm->name,
                      (long long)x->version, sd->err.msg);
        x->st = V_WAITING;
        x->last_err = sd->err;
        set_reg(m, mm, x, LDR_STATE_START, &sd->err);
      }
    }
  }
}

/* --- decisions (mu held) ---------------------------------------------------------- */

typedef struct freelist {
  int n, cap;
  ldr_servable **sv;
} freelist;

static void retire(ldr_manager *m, mmodel *mm, mver *x) {
  td_log_info("Unloading servable version {name: %s version: %lld}", mm->name,
              (long long)x->version);
  x->held = ldr_registry_retire(m->reg, mm->name, x->version);
  x->st = V_DRAINING;
}

/* Returns the earliest retry deadline among the model's versions (0: none). */
static uint64_t reconcile(ldr_manager *m, mmodel *mm, freelist *fl, bool *draining) {
  uint64_t now = now_ns(), next = 0;
  int n_aspired = 0, aspired_ready = 0;
  for (int i = 0; i < mm->n; i++) {
    bool a = is_aspired(mm, &mm->v[i]);
    n_aspired += a;
    aspired_ready += a && mm->v[i].st == V_READY;
  }
  /* Loads, retries, cancellations. Highest versions first. */
  for (int i = mm->n - 1; i >= 0; i--) {
    mver *x = &mm->v[i];
    bool a = is_aspired(mm, x) && !m->closing;
    switch (x->st) {
      case V_IDLE:
      case V_UNLOADED:
        if (a) {
          x->attempts = 0;
          queue_load(m, mm, x);
        }
        break;
      case V_QUEUED:
        if (!a && unqueue(m, mm->name, x->version)) {
          x->st = V_IDLE;
          ldr_registry_forget(m->reg, mm->name, x->version);
        }
        break;
      case V_RETRY:
        if (!a) {
          x->st = V_FAILED;
          set_reg(m, mm, x, LDR_STATE_END, &x->last_err);
        } else if (now >= x->retry_at_ns) {
          queue_load(m, mm, x);
        } else if (!next || x->retry_at_ns < next) {
          next = x->retry_at_ns;
        }
        break;
      default:
        break;
    }
  }
  /* Unloads, availability first: an un-aspired version goes once an
   * aspired one serves, or when nothing is aspired; otherwise the newest
   * un-aspired one stays until its successor is AVAILABLE. */
  bool keep_one = n_aspired > 0 && aspired_ready == 0 && !m->closing;
  for (int i = mm->n - 1; i >= 0; i--) {
    mver *x = &mm->v[i];
    if (x->st != V_READY || (is_aspired(mm, x) && !m->closing)) continue;
    if (keep_one) {
      keep_one = false;
      continue;
    }
    retire(m, mm, x);
  }
  /* Drained versions are freed (outside mu, by the caller). */
  for (int i = 0; i < mm->n; i++) {
    mver *x = &mm->v[i];
    if (x->st != V_DRAINING) continue;
    if (x->held && ldr_servable_refs(x->held) > 1) {
      *draining = true;
      continue;
    }
    if (x->held) {
      if (fl->n == fl->cap) {
        int cap = fl->cap ? fl->cap * 2 : 8;
        ldr_servable **nv = realloc(fl->sv, sizeof *nv * (size_t)cap);
        if (!nv) {
          *draining = true;
          continue;
        }
        fl->sv = nv;
        fl->cap = cap;
      }
      fl->sv[fl->n++] = x->held;
      x->held = NULL;
    }
    x->st = V_UNLOADED;
    set_reg(m, mm, x, LDR_STATE_END, NULL);
    td_log_info("Done unloading servable version {name: %s version: %lld}", mm->name,
                (long long)x->version);
  }
  /* Versions gone from disk and holding nothing are forgotten here; the
   * registry keeps reporting those that reached END. */
  for (int i = mm->n - 1; i >= 0; i--) {
    mver *x = &mm->v[i];
    if (x->on_disk) continue;
    if (x->st == V_WAITING) ldr_registry_forget(m->reg, mm->name, x->version);
    if (x->st == V_WAITING || x->st == V_IDLE || x->st == V_UNLOADED || x->st == V_FAILED)
      remove_version(mm, x);
  }
  return next;
}

static bool model_busy(const mmodel *mm) {
  for (int i = 0; i < mm->n; i++) {
    vstate s = mm->v[i].st;
    if (s == V_QUEUED || s == V_LOADING || s == V_READY || s == V_DRAINING || s == V_RETRY)
      return true;
  }
  return false;
}

/* Removes unconfigured models once nothing of them is loaded. */
static void reap_models(ldr_manager *m) {
  for (int i = m->n_models - 1; i >= 0; i--) {
    mmodel *mm = m->models[i];
    if (mm->configured || model_busy(mm)) continue;
    td_err err;
    ldr_registry_remove_model(m->reg, mm->name, &err);
    td_log_info("Removed model %s", mm->name);
    free_model(mm);
    memmove(&m->models[i], &m->models[i + 1], sizeof *m->models * (size_t)(m->n_models - i - 1));
    m->n_models--;
  }
}

/* Applies the config's labels, all or nothing. */
static td_code apply_labels(ldr_manager *m, td_err *err) {
  const cfg_model_config *c = &m->config;
  for (int i = 0; i < c->n_models; i++)
    for (int k = 0; k < c->models[i].n_labels; k++) {
      td_code rc = ldr_registry_check_label(m->reg, c->models[i].name, c->models[i].labels[k].label,
                                            c->models[i].labels[k].version,
                                            m->opt.allow_labels_for_unavailable, err);
      if (rc) return rc;
    }
  for (int i = 0; i < c->n_models; i++) {
    const cfg_model *cm = &c->models[i];
    ldr_label *l = cm->n_labels ? calloc((size_t)cm->n_labels, sizeof *l) : NULL;
    if (cm->n_labels && !l) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    for (int k = 0; k < cm->n_labels; k++) l[k] = (ldr_label){cm->labels[k].label, cm->labels[k].version};
    td_code rc = ldr_registry_set_labels(m->reg, cm->name, l, cm->n_labels, err);
    free(l);
    if (rc) return rc;
  }
  return TD_OK;
}

/* When the newest ticket has settled, records its verdict and wakes waiters. */
static void check_settled(ldr_manager *m) {
  if (m->settled_gen >= m->gen || m->scan_wanted) return;
  for (int i = 0; i < m->n_models; i++) {
    mmodel *mm = m->models[i];
    if (!mm->configured) continue;
    if (mm->scan_gen < m->gen) return;
    for (int k = 0; k < mm->n; k++) {
      const mver *x = &mm->v[k];
      if ((x->st == V_QUEUED || x->st == V_LOADING) && !x->attempts) return;
    }
  }
  td_err res;
  td_err_clear(&res);
  if (m->labels_gen < m->cfg_gen) {
    m->labels_gen = m->cfg_gen;
    if (apply_labels(m, &res)) td_log_error("Version labels not applied: %s", res.msg);
  }
  if (!res.code) {
    char list[TD_ERR_MSG_MAX] = "";
    size_t len = 0;
    int missing = 0;
    for (int i = 0; i < m->n_models; i++) {
      mmodel *mm = m->models[i];
      if (!mm->configured || mm->added_gen <= m->settled_gen) continue;
      bool ready = false;
      const mver *bad = NULL;
      for (int k = 0; k < mm->n; k++) {
        ready |= mm->v[k].st == V_READY;
        if (mm->v[k].last_err.code && (mm->v[k].st == V_FAILED || mm->v[k].st == V_RETRY ||
                                       mm->v[k].st == V_WAITING))
          bad = &mm->v[k];
      }
      if (ready) continue;
      missing++;
      if (len < sizeof list)
        len += (size_t)snprintf(list + len, sizeof list - len, "{name: %s%s%s}, ", mm->name,
                                bad ? " due to error: " : "", bad ? bad->last_err.msg : "");
    }
    if (missing)
      td_err_set(&res, TD_UNKNOWN, "%d model(s) did not become available: {%s}", missing, list);
  }
  m->settled_gen = m->gen;
  m->settle_result = res;
  uv_cond_broadcast(&m->settled);
}

static void unref_all(void *arg) {
  freelist *fl = arg;
  for (int i = 0; i < fl->n; i++) ldr_servable_unref(fl->sv[i]);
}

/* Frees unloaded servables on a thread of their own that then exits: any
 * per-thread cache the freeing fills (the engine recycles tensor buffers
 * per thread) goes with it instead of holding the old version's memory.
 * Then the heap is trimmed so the pages go back to the system. */
static void free_servables(freelist *fl) {
  uv_thread_t t;
  if (uv_thread_create(&t, unref_all, fl) == 0)
    uv_thread_join(&t);
  else
    unref_all(fl);
  fl->n = 0;
  malloc_trim(0);
}

static void manager_main(void *arg) {
  ldr_manager *m = arg;
  lower_priority();
  freelist fl = {0};
  uv_mutex_lock(&m->mu);
  while (!m->stopping) {
    if (m->scan_wanted) {
      m->scan_wanted = false;
      uint64_t gen = m->gen;
      int n = 0;
      scan_model *s = scan_prepare(m, &n);
      uv_mutex_unlock(&m->mu);
      scan_run(s, n);
      uv_mutex_lock(&m->mu);
      scan_merge(m, s, n, gen);
      uv_mutex_unlock(&m->mu);
      scan_free(s, n);
      uv_mutex_lock(&m->mu);
    }
    m->dirty = false;
    uint64_t next = 0;
    bool draining = false;
    for (int i = 0; i < m->n_models; i++) {
      uint64_t t = reconcile(m, m->models[i], &fl, &draining);
      if (t && (!next || t < next)) next = t;
    }
    reap_models(m);
    check_settled(m);
    if (fl.n) {
      uv_mutex_unlock(&m->mu);
      free_servables(&fl);
      uv_mutex_lock(&m->mu);
      continue;
    }
    if (m->scan_wanted || m->dirty || m->stopping) continue;
    uint64_t wait_ns = 0;
    if (draining) wait_ns = 2000000; /* in-flight requests end within ms */
    if (next) {
      uint64_t now = now_ns(), d = next > now ? next - now : 0;
      if (!wait_ns || d < wait_ns) wait_ns = d;
    }
    if (!wait_ns && (draining || next)) continue;
    if (wait_ns)
      uv_cond_timedwait(&m->wake, &m->mu, wait_ns);
    else
      uv_cond_wait(&m->wake, &m->mu);
  }
  uv_mutex_unlock(&m->mu);
  free(fl.sv);
}

/* --- public ---------------------------------------------------------------------- */

td_code ldr_manager_create(ldr_registry *r, const ldr_manager_options *opt, ldr_manager **out,
                           td_err *err) {
  ldr_manager *m = calloc(1, sizeof *m);
  if (!m) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  m->reg = r;
  m->opt = *opt;
  m->tags = strdup(opt->tags && *opt->tags ? opt->tags : "serve");
  m->n_workers = opt->num_load_threads > 0 ? opt->num_load_threads : 1;
  m->workers = calloc((size_t)m->n_workers, sizeof *m->workers);
  if (!m->tags || !m->workers || uv_mutex_init(&m->mu)) {
    free(m->tags);
    free(m->workers);
    free(m);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "cannot create the model manager");
  }
  m->opt.tags = m->tags;
  uv_cond_init(&m->wake);
  uv_cond_init(&m->work);
  uv_cond_init(&m->settled);
  if (uv_thread_create(&m->thread, manager_main, m)) {
    uv_cond_destroy(&m->wake);
    uv_cond_destroy(&m->work);
    uv_cond_destroy(&m->settled);
    uv_mutex_destroy(&m->mu);
    free(m->tags);
    free(m->workers);
    free(m);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "cannot start the model manager's thread");
  }
  for (int i = 0; i < m->n_workers; i++)
    if (uv_thread_create(&m->workers[i], worker_main, m)) {
      m->n_workers = i; /* destroy joins those that started */
      ldr_manager_destroy(m);
      return td_err_set(err, TD_RESOURCE_EXHAUSTED, "cannot start the model load threads");
    }
  *out = m;
  return TD_OK;
}

td_code ldr_manager_set_config(ldr_manager *m, const cfg_model_config *c, uint64_t *ticket,
                               td_err *err) {
  cfg_model_config copy;
  td_code rc = cfg_model_config_copy(c, &copy, err);
  if (rc) return rc;
  /* Everything that can fail is allocated before the swap. */
  mmodel **fresh = c->n_models ? calloc((size_t)c->n_models, sizeof *fresh) : NULL;
  if (c->n_models && !fresh) {
    cfg_model_config_free(&copy);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  uv_mutex_lock(&m->mu);
  mmodel **grown = realloc(m->models, sizeof *grown * (size_t)(m->n_models + c->n_models + 1));
  if (grown) m->models = grown;
  for (int i = 0; grown && i < c->n_models; i++) {
    if (find_model(m, c->models[i].name)) continue;
    mmodel *mm = calloc(1, sizeof *mm);
    if (!mm || !(mm->name = strdup(c->models[i].name))) {
      free(mm);
      grown = NULL;
      break;
    }
    fresh[i] = mm;
  }
  if (!grown) {
    for (int i = 0; i < c->n_models; i++)
      if (fresh[i]) free_model(fresh[i]);
    uv_mutex_unlock(&m->mu);
    free(fresh);
    cfg_model_config_free(&copy);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  uint64_t gen = ++m->gen;
  m->cfg_gen = gen;
  for (int i = 0; i < m->n_models; i++)
    m->models[i]->configured = cfg_model_config_find(c, m->models[i]->name) &&
                               m->models[i]->configured;
  for (int i = 0; i < c->n_models; i++) {
    const cfg_model *cm = &copy.models[i];
    mmodel *mm = fresh[i] ? fresh[i] : find_model(m, cm->name);
    if (fresh[i]) {
      m->models[m->n_models++] = mm;
      td_err aerr;
      if (ldr_registry_add_model(m->reg, cm->name, cm->base_path, &aerr) &&
          aerr.code != TD_ALREADY_EXISTS)
        td_log_error("%s", aerr.msg);
    }
    if (!mm->configured && (fresh[i] || !model_busy(mm))) mm->added_gen = gen;
    mm->configured = true;
    char *bp = strdup(cm->base_path);
    int64_t *vs = cm->policy.n_versions
                      ? malloc(sizeof *vs * (size_t)cm->policy.n_versions)
                      : NULL;
    if (bp && (vs || !cm->policy.n_versions)) {
      free(mm->base_path);
      mm->base_path = bp;
      free(mm->policy.versions);
      mm->policy = cm->policy;
      mm->policy.versions = vs;
      if (vs) memcpy(vs, cm->policy.versions, sizeof *vs * (size_t)cm->policy.n_versions);
    } else {
      free(bp);
      free(vs);
      td_log_error("out of memory updating model %s", cm->name);
    }
    char pol[256];
    cfg_version_policy_describe(&mm->policy, pol, sizeof pol);
    td_log_info("(Re-)adding model: %s (base path %s, policy %s)", mm->name, mm->base_path, pol);
  }
  cfg_model_config_free(&m->config);
  m->config = copy;
  m->scan_wanted = true;
  uv_cond_signal(&m->wake);
  uv_mutex_unlock(&m->mu);
  free(fresh);
  if (ticket) *ticket = gen;
  return TD_OK;
}

uint64_t ldr_manager_request_scan(ldr_manager *m) {
  uv_mutex_lock(&m->mu);
  uint64_t gen = ++m->gen;
  m->scan_wanted = true;
  uv_cond_signal(&m->wake);
  uv_mutex_unlock(&m->mu);
  return gen;
}

td_code ldr_manager_wait(ldr_manager *m, uint64_t ticket, int64_t timeout_ms, td_err *err) {
  uint64_t deadline = timeout_ms >= 0 ? now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
  td_code rc = TD_OK;
  uv_mutex_lock(&m->mu);
  while (m->settled_gen < ticket && !m->stopping) {
    if (!deadline) {
      uv_cond_wait(&m->settled, &m->mu);
      continue;
    }
    uint64_t now = now_ns();
    if (now >= deadline) break;
    uv_cond_timedwait(&m->settled, &m->mu, deadline - now);
  }
  if (m->settled_gen >= ticket) {
    if (m->settle_result.code) {
      rc = m->settle_result.code;
      if (err) *err = m->settle_result;
    }
  } else if (m->stopping) {
    rc = td_err_set(err, TD_CANCELLED, "the model manager is stopping");
  } else {
    rc = td_err_set(err, TD_DEADLINE_EXCEEDED, "models still loading after %lld ms",
                    (long long)timeout_ms);
  }
  uv_mutex_unlock(&m->mu);
  return rc;
}

int ldr_manager_base_paths(ldr_manager *m, char ***paths) {
  uv_mutex_lock(&m->mu);
  char **out = m->n_models ? calloc((size_t)m->n_models, sizeof *out) : NULL;
  int n = 0;
  for (int i = 0; out && i < m->n_models; i++)
    if (m->models[i]->configured && (out[n] = strdup(m->models[i]->base_path))) n++;
  uv_mutex_unlock(&m->mu);
  *paths = out;
  return n;
}

bool ldr_manager_shutdown(ldr_manager *m, double grace_seconds) {
  ldr_registry_close(m->reg);
  uint64_t deadline = now_ns() + (uint64_t)(grace_seconds > 0 ? grace_seconds * 1e9 : 0);
  uv_mutex_lock(&m->mu);
  m->closing = true;
  while (m->jobs) {
    job *j = m->jobs;
    mmodel *mm = find_model(m, j->model);
    mver *x = mm ? find_version(mm, j->version) : NULL;
    unqueue(m, j->model, j->version);
    if (x) x->st = V_IDLE;
  }
  m->dirty = true;
  uv_cond_signal(&m->wake); /* reconcile retires every version now */
  bool clean = false;
  for (;;) {
    bool busy = m->loading > 0;
    for (int i = 0; i < m->n_models && !busy; i++)
      for (int k = 0; k < m->models[i]->n && !busy; k++)
        busy = m->models[i]->v[k].st == V_READY || m->models[i]->v[k].st == V_DRAINING;
    if (!busy) {
      clean = true;
      break;
    }
    uint64_t now = now_ns();
    if (now >= deadline) break;
    uv_mutex_unlock(&m->mu);
    uv_sleep(2);
    uv_mutex_lock(&m->mu);
  }
  uv_mutex_unlock(&m->mu);
  if (!clean) td_log_warn("shutdown: a load or a request was still running after %.1f s",
                          grace_seconds);
  return clean;
}

void ldr_manager_destroy(ldr_manager *m) {
  if (!m) return;
  uv_mutex_lock(&m->mu);
  m->stopping = true;
  uv_cond_broadcast(&m->wake);
  uv_cond_broadcast(&m->work);
  uv_cond_broadcast(&m->settled);
  uv_mutex_unlock(&m->mu);
  uv_thread_join(&m->thread);
  for (int i = 0; i < m->n_workers; i++) uv_thread_join(&m->workers[i]);
  while (m->jobs) {
    job *j = m->jobs;
    m->jobs = j->next;
    free(j->model);
    free(j->path);
    free(j);
  }
  for (int i = 0; i < m->n_models; i++) free_model(m->models[i]);
  free(m->models);
  cfg_model_config_free(&m->config);
  uv_cond_destroy(&m->wake);
  uv_cond_destroy(&m->work);
  uv_cond_destroy(&m->settled);
  uv_mutex_destroy(&m->mu);
  free(m->workers);
  free(m->tags);
  free(m);
}
