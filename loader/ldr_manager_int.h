/* ldr_manager_int.h: the lifecycle manager's private state, shared by
 * ldr_manager.c (threads, load queue, public calls) and
 * ldr_manager_decide.c (version records, scans, what to load and unload,
 * labels, settling). Not a public header: nothing outside these two files
 * includes it.
 *
 * Design note. All decisions happen under one mutex (mu), on the manager
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
#ifndef LDR_MANAGER_INT_H
#define LDR_MANAGER_INT_H

#include <time.h>
#include <uv.h>

#include "ldr_manager.h"
#include "td_clock.h"

#define LOAD_NICE 10 /* load threads, where SCHED_IDLE is refused: below request threads */

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
  /* --enable_per_model_batching_parameters: the newest loaded version's
   * batching_params.pbtxt (file_batching_version -1: none seen). */
  bool has_file_batching;
  int64_t file_batching_version;
  cfg_batching file_batching;
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
  char cache_dir[4096]; /* opt.object_cache_dir, copied; "" for the default */
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

typedef struct freelist {
  int n, cap;
  ldr_servable **sv;
} freelist;

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

static inline mmodel *find_model(ldr_manager *m, const char *name) {
  for (int i = 0; i < m->n_models; i++)
    if (!strcmp(m->models[i]->name, name)) return m->models[i];
  return NULL;
}

static inline mver *find_version(mmodel *mm, int64_t v) {
  for (int i = 0; i < mm->n; i++)
    if (mm->v[i].version == v) return &mm->v[i];
  return NULL;
}

/* ldr_manager_decide.c: records, scans, decisions (mu held unless noted). */
void ldr_mgr_free_model(mmodel *mm);
void ldr_mgr_set_reg(ldr_manager *m, mmodel *mm, mver *x, ldr_state st, const td_err *status);
bool ldr_mgr_is_aspired(const mmodel *mm, const mver *x);
scan_model *ldr_mgr_scan_prepare(ldr_manager *m, int *n_out);
void ldr_mgr_scan_run(scan_model *s, int n); /* mu NOT held */
void ldr_mgr_scan_merge(ldr_manager *m, scan_model *s, int n, uint64_t gen);
void ldr_mgr_scan_free(scan_model *s, int n);
uint64_t ldr_mgr_reconcile(ldr_manager *m, mmodel *mm, freelist *fl, bool *draining);
bool ldr_mgr_model_busy(const mmodel *mm);
void ldr_mgr_evict(ldr_manager *m, const mver *x);
void ldr_mgr_reap_models(ldr_manager *m);
void ldr_mgr_check_settled(ldr_manager *m);

/* ldr_manager.c: the load queue (mu held). */
void ldr_mgr_queue_load(ldr_manager *m, mmodel *mm, mver *x);
bool ldr_mgr_unqueue(ldr_manager *m, const char *model, int64_t version);

#endif
