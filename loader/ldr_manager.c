/* The manager's threads and public calls: the manager thread (scan,
 * decide, free), the load workers (each load on a short-lived thread), and
 * the config, wait and shutdown entry points. The decisions themselves are
 * in ldr_manager_decide.c; the design note is in ldr_manager_int.h. */
#include <fcntl.h>
#include <ftw.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "ldr_manager_int.h"
#include "ldr_metrics.h"
#include "ldr_objstore.h"
#include "ldr_warmup.h"
#include "td_clock.h"
#include "td_log.h"

/* --- loading ------------------------------------------------------------------- */

void ldr_mgr_queue_load(ldr_manager *m, mmodel *mm, mver *x) {
  job *j = calloc(1, sizeof *j);
  if (j && (j->model = strdup(mm->name)) && (j->path = strdup(x->path))) {
    j->version = x->version;
    if (m->jobs_tail)
      m->jobs_tail->next = j;
    else
      m->jobs = j;
    m->jobs_tail = j;
    x->st = V_QUEUED;
    /* A retry stays LOADING with the last error, as in TF Serving, whose
     * harness retries within one load: a status read between attempts
     * must not see the version start over. */
    if (x->attempts)
      ldr_mgr_set_reg(m, mm, x, LDR_STATE_LOADING, &x->last_err);
    else
      ldr_mgr_set_reg(m, mm, x, LDR_STATE_START, NULL);
    uv_cond_signal(&m->work);
    return;
  }
  if (j) free(j->model);
  free(j);
  td_log_error("out of memory queueing a load of %s version %lld", mm->name, (long long)x->version);
}

/* Drops a queued job for (model, version); true when one was queued. */
bool ldr_mgr_unqueue(ldr_manager *m, const char *model, int64_t version) {
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
typedef struct load_task {
  ldr_manager *m;
  const job *j;
  ldr_servable *sv;
  td_code rc;
  bool has_batching; /* the version's batching_params.pbtxt */
  cfg_batching batching;
  bool incomplete; /* the store's listing at download time lacked files */
  bool lower;      /* a version is serving: the load yields to its requests */
  td_err err;
} load_task;

static void finish_load(ldr_manager *m, const job *j, ldr_servable *sv, td_code rc,
                        const td_err *lerr, const load_task *lt) {
  mmodel *mm = find_model(m, j->model);
  mver *x = mm ? find_version(mm, j->version) : NULL;
  if (!x || x->st != V_LOADING) {
    ldr_servable_unref(sv);
    return;
  }
  if (!rc && (!ldr_mgr_is_aspired(mm, x) || m->closing)) {
    /* No longer wanted (the directory went, the policy changed): never
     * serve it. */
    ldr_servable_unref(sv);
    ldr_mgr_evict(m, x);
    x->st = V_UNLOADED;
    ldr_mgr_set_reg(m, mm, x, LDR_STATE_END, NULL);
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
    if (m->opt.per_model_batching && j->version >= mm->file_batching_version) {
      mm->file_batching_version = j->version;
      mm->has_file_batching = lt->has_batching;
      if (lt->has_batching) mm->file_batching = lt->batching;
    }
    td_logm(TD_LOG_INFO, mm->name, x->version,
            "Successfully loaded servable version {name: %s version: %lld}", mm->name,
            (long long)x->version);
    return;
  }
  if (lt && lt->incomplete) {
    /* The upload was still going on when the download listed it (a scan
     * saw saved_model.pb alone, then the index arrived without its shard):
     * not a failed load, a version to check again at the next scan. */
    x->st = V_WAITING;
    x->complete = false;
    x->last_err = *lerr;
    ldr_mgr_set_reg(m, mm, x, LDR_STATE_START, lerr);
    td_logm(TD_LOG_WARN, mm->name, x->version,
            "Not loading servable {name: %s version: %lld} yet: %s", mm->name,
            (long long)x->version, lerr->msg);
    return;
  }
  x->attempts++;
  x->last_err = *lerr;
  if (x->attempts <= m->opt.max_num_load_retries && !m->closing) {
    int64_t us = m->opt.load_retry_interval_micros > 0 ? m->opt.load_retry_interval_micros : 0;
    x->retry_at_ns = td_now_ns() + (uint64_t)us * 1000u;
    x->st = V_RETRY;
    ldr_mgr_set_reg(m, mm, x, LDR_STATE_LOADING, lerr);
    td_logm(TD_LOG_ERROR, mm->name, x->version,
            "Loading servable: {name: %s version: %lld} failed: %s. Retrying (%d of %d) in "
            "%.3f s",
            mm->name, (long long)x->version, lerr->msg, x->attempts, m->opt.max_num_load_retries,
            us / 1e6);
  } else {
    x->st = V_FAILED;
    ldr_mgr_set_reg(m, mm, x, LDR_STATE_END, lerr);
    td_logm(TD_LOG_ERROR, mm->name, x->version,
            "Loading servable: {name: %s version: %lld} failed: %s", mm->name,
            (long long)x->version, lerr->msg);
  }
}

/* While a version is serving, the short-lived threads that load others
 * yield the CPU to request threads: SCHED_IDLE, so that a waking request
 * thread preempts a load at once (a nice value only shrinks the load's
 * share, and a request could wait out its time slice), or nice LOAD_NICE
 * where SCHED_IDLE is refused. On a saturated machine such a load waits for
 * idle time. While nothing serves (start-up, or every version gone) a load
 * keeps normal priority: there is no request to protect, and at SCHED_IDLE
 * it would share the CPU with any other idle-class work on the machine.
 * Only threads that take no lock a request also takes are lowered: a
 * low-priority thread holding the registry's mutex would stall every
 * request behind it. */
static void lower_priority(void) {
  struct sched_param sp = {0};
  if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp))
    setpriority(PRIO_PROCESS, (id_t)gettid(), LOAD_NICE);
}

static int drop_cached(const char *path, const struct stat *st, int type, struct FTW *ftw) {
  if (type != FTW_F) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }
  return 0;
}

/* One load and its warmup, on a thread of its own that exits afterwards,
 * so that per-thread caches filled while loading (the engine recycles
 * tensor buffers per thread) do not outlive the load. */
static void load_main(void *arg) {
  load_task *lt = arg;
  if (lt->lower) lower_priority();
  const char *dir = lt->j->path;
  char *local = NULL;
  bool remote = ldr_objstore_is_remote(dir);
  if (remote) {
    lt->rc = ldr_objstore_fetch(dir, lt->m->cache_dir, &local, &lt->err);
    lt->incomplete = lt->rc == TD_NOT_FOUND;
    if (lt->rc) return;
    dir = local;
  }
  uint64_t t0 = td_now_ns();
  lt->rc = ldr_servable_load(dir, lt->j->version, lt->m->tags, &lt->sv, &lt->err);
  if (!lt->rc && lt->m->opt.per_model_batching) {
    char path[4096];
    snprintf(path, sizeof path, "%s/" LDR_BATCHING_FILE, dir);
    if (!access(path, F_OK)) {
      lt->rc = cfg_batching_load(path, lt->m->opt.cpus > 0 ? lt->m->opt.cpus : 1, &lt->batching,
                                 &lt->err);
      lt->has_batching = !lt->rc;
      if (lt->rc) {
        ldr_servable_unref(lt->sv);
        lt->sv = NULL;
      }
    }
  }
  uint64_t t1 = td_now_ns();
  ldr_metrics_load(lt->j->path, !lt->rc, (t1 - t0) / 1000);
  if (!lt->rc && lt->m->opt.enable_warmup) {
    int records = 0;
    lt->rc = ldr_warmup_run(lt->sv, dir, lt->m->opt.warmup_iterations, &records, &lt->err);
    if (records || lt->rc) ldr_metrics_warmup(lt->j->path, lt->rc, (td_now_ns() - t1) / 1000);
    if (lt->rc) {
      ldr_servable_unref(lt->sv);
      lt->sv = NULL;
    }
  }
  if (!lt->rc && lt->m->opt.flush_caches) nftw(dir, drop_cached, 16, FTW_PHYS);
  if (remote && lt->rc) ldr_objstore_evict(lt->j->path, lt->m->cache_dir);
  free(local);
}

/* Whether any version of any model serves requests now. Under m->mu. */
static bool any_serving(const ldr_manager *m) {
  for (int i = 0; i < m->n_models; i++)
    for (int k = 0; k < m->models[i]->n; k++)
      if (m->models[i]->v[k].st == V_READY || m->models[i]->v[k].st == V_DRAINING) return true;
  return false;
}

static void worker_main(void *arg) {
  ldr_manager *m = arg;
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
    ldr_mgr_set_reg(m, mm, x, LDR_STATE_LOADING, x->attempts ? &x->last_err : NULL);
    m->loading++;
    bool serving = any_serving(m);
    uv_mutex_unlock(&m->mu);

    td_logm(TD_LOG_INFO, j->model, j->version, "Loading servable: {name: %s version: %lld} from %s",
            j->model, (long long)j->version, j->path);
    load_task lt = {.m = m, .j = j, .lower = serving};
    td_err_clear(&lt.err);
    uv_thread_t t;
    if (uv_thread_create(&t, load_main, &lt) == 0)
      uv_thread_join(&t);
    else
      load_main(&lt);
    /* A load frees much of what it allocated (the parsed SavedModel, the
     * function library, plan-building scratch) in the middle of the heap;
     * trimming gives those pages back. Here, at normal priority, as
     * unref_all does. */
    malloc_trim(0);

    uv_mutex_lock(&m->mu);
    m->loading--;
    finish_load(m, j, lt.sv, lt.rc, &lt.err, &lt);
    free(j->model);
    free(j->path);
    free(j);
    m->dirty = true;
    uv_cond_signal(&m->wake);
  }
  uv_mutex_unlock(&m->mu);
}

static void unref_all(void *arg) {
  freelist *fl = arg;
  /* Normal priority on purpose: malloc_trim locks every malloc arena in
   * turn, the request threads' too, and a lowered thread preempted while
   * holding one stalls those requests (priority inversion). */
  for (int i = 0; i < fl->n; i++) ldr_servable_unref(fl->sv[i]);
  malloc_trim(0); /* give the freed pages back to the system */
}

/* Frees unloaded servables on a thread of their own that then exits: any
 * per-thread cache the freeing fills (the engine recycles tensor buffers
 * per thread) goes with it instead of holding the old version's memory;
 * the heap is trimmed so the pages go back to the system. */
static void free_servables(freelist *fl) {
  uv_thread_t t;
  if (uv_thread_create(&t, unref_all, fl) == 0)
    uv_thread_join(&t);
  else
    unref_all(fl);
  fl->n = 0;
}

static void manager_main(void *arg) {
  ldr_manager *m = arg;
  freelist fl = {0};
  uv_mutex_lock(&m->mu);
  while (!m->stopping) {
    if (m->scan_wanted) {
      m->scan_wanted = false;
      uint64_t gen = m->gen;
      int n = 0;
      scan_model *s = ldr_mgr_scan_prepare(m, &n);
      uv_mutex_unlock(&m->mu);
      ldr_mgr_scan_run(s, n);
      uv_mutex_lock(&m->mu);
      ldr_mgr_scan_merge(m, s, n, gen);
      uv_mutex_unlock(&m->mu);
      ldr_mgr_scan_free(s, n);
      uv_mutex_lock(&m->mu);
    }
    m->dirty = false;
    uint64_t next = 0;
    bool draining = false;
    for (int i = 0; i < m->n_models; i++) {
      uint64_t t = ldr_mgr_reconcile(m, m->models[i], &fl, &draining);
      if (t && (!next || t < next)) next = t;
    }
    ldr_mgr_reap_models(m);
    ldr_mgr_check_settled(m);
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
      uint64_t now = td_now_ns(), d = next > now ? next - now : 0;
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
  snprintf(m->cache_dir, sizeof m->cache_dir, "%s",
           opt->object_cache_dir ? opt->object_cache_dir : "");
  m->opt.object_cache_dir = m->cache_dir;
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
    if (mm) mm->file_batching_version = -1;
    if (!mm || !(mm->name = strdup(c->models[i].name))) {
      free(mm);
      grown = NULL;
      break;
    }
    fresh[i] = mm;
  }
  if (!grown) {
    for (int i = 0; i < c->n_models; i++)
      if (fresh[i]) ldr_mgr_free_model(fresh[i]);
    uv_mutex_unlock(&m->mu);
    free(fresh);
    cfg_model_config_free(&copy);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  uint64_t gen = ++m->gen;
  m->cfg_gen = gen;
  for (int i = 0; i < m->n_models; i++)
    m->models[i]->configured =
        cfg_model_config_find(c, m->models[i]->name) && m->models[i]->configured;
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
    if (!mm->configured && (fresh[i] || !ldr_mgr_model_busy(mm))) mm->added_gen = gen;
    mm->configured = true;
    char *bp = strdup(cm->base_path);
    int64_t *vs = cm->policy.n_versions ? malloc(sizeof *vs * (size_t)cm->policy.n_versions) : NULL;
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
  if (m->opt.on_config) m->opt.on_config(m->opt.on_config_ctx, c);
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
  uint64_t deadline = timeout_ms >= 0 ? td_now_ns() + (uint64_t)timeout_ms * 1000000u : 0;
  td_code rc = TD_OK;
  uv_mutex_lock(&m->mu);
  while (m->settled_gen < ticket && !m->stopping) {
    if (!deadline) {
      uv_cond_wait(&m->settled, &m->mu);
      continue;
    }
    uint64_t now = td_now_ns();
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
  uint64_t deadline = td_now_ns() + (uint64_t)(grace_seconds > 0 ? grace_seconds * 1e9 : 0);
  uv_mutex_lock(&m->mu);
  m->closing = true;
  while (m->jobs) {
    job *j = m->jobs;
    mmodel *mm = find_model(m, j->model);
    mver *x = mm ? find_version(mm, j->version) : NULL;
    ldr_mgr_unqueue(m, j->model, j->version);
    if (x) x->st = V_IDLE;
  }
  m->dirty = true;
  uv_cond_signal(&m->wake); /* ldr_mgr_reconcile retires every version now */
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
    uint64_t now = td_now_ns();
    if (now >= deadline) break;
    uv_mutex_unlock(&m->mu);
    uv_sleep(2);
    uv_mutex_lock(&m->mu);
  }
  uv_mutex_unlock(&m->mu);
  if (!clean)
    td_log_warn("shutdown: a load or a request was still running after %.1f s", grace_seconds);
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
  for (int i = 0; i < m->n_models; i++) ldr_mgr_free_model(m->models[i]);
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

bool ldr_manager_model_batching(ldr_manager *m, const char *name, cfg_batching *out,
                                int64_t *queue_timeout_micros) {
  uv_mutex_lock(&m->mu);
  const cfg_model *cm = cfg_model_config_find(&m->config, name);
  bool has = cm && cm->has_batching;
  if (has) *out = cm->batching;
  mmodel *mm = has || !m->opt.per_model_batching ? NULL : find_model(m, name);
  if (mm && mm->has_file_batching) {
    *out = mm->file_batching;
    has = true;
  }
  *queue_timeout_micros = cm ? cm->batch_queue_timeout_micros : 0;
  uv_mutex_unlock(&m->mu);
  return has;
}

td_code ldr_manager_get_config(ldr_manager *m, cfg_model_config *out, td_err *err) {
  uv_mutex_lock(&m->mu);
  td_code rc = cfg_model_config_copy(&m->config, out, err);
  uv_mutex_unlock(&m->mu);
  return rc;
}
