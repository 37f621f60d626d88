/* What to load and unload: version records, folding scans in, the
 * availability-preserving decisions, labels and settling. Everything here
 * runs with the manager's mutex held, except ldr_mgr_scan_run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_manager_int.h"
#include "ldr_objstore.h"
#include "ldr_scan.h"
#include "td_log.h"

/* --- models and versions (mu held) ----------------------------------------- */

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

void ldr_mgr_free_model(mmodel *mm) {
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

void ldr_mgr_set_reg(ldr_manager *m, mmodel *mm, mver *x, ldr_state st, const td_err *status) {
  td_err err;
  if (ldr_registry_set_state(m->reg, mm->name, x->version, st, status, &err))
    td_log_warn("registry: %s", err.msg);
}

/* The versions the policy wants, among the complete ones on disk. */
bool ldr_mgr_is_aspired(const mmodel *mm, const mver *x) {
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

/* --- scanning ------------------------------------------------------------------ */

void ldr_mgr_scan_free(scan_model *s, int n) {
  for (int i = 0; s && i < n; i++) {
    for (int d = 0; d < s[i].n; d++) free(s[i].dirs[d].path);
    free(s[i].dirs);
    free(s[i].known);
    free(s[i].name);
    free(s[i].base_path);
  }
  free(s);
}

/* An object-store base path: one listing says what is there and what is
 * complete (mu NOT held). */
static void scan_remote(scan_model *s) {
  ldr_os_version *v = NULL;
  int nv = 0;
  s->rc = ldr_objstore_scan(s->base_path, &v, &nv, &s->err);
  if (s->rc) return;
  s->dirs = nv ? calloc((size_t)nv, sizeof *s->dirs) : NULL;
  if (nv && !s->dirs) {
    s->rc = td_err_set(&s->err, TD_RESOURCE_EXHAUSTED, "out of memory");
    ldr_objstore_scan_free(v, nv);
    return;
  }
  for (int d = 0; d < nv; d++) {
    scan_dir *sd = &s->dirs[s->n++];
    sd->version = v[d].version;
    sd->path = v[d].path;
    v[d].path = NULL;
    sd->rc = v[d].rc;
    sd->err = v[d].err;
  }
  ldr_objstore_scan_free(v, nv);
}

/* Lists and checks every configured base path (mu NOT held). */
void ldr_mgr_scan_run(scan_model *s, int n) {
  for (int i = 0; i < n; i++) {
    if (ldr_objstore_is_remote(s[i].base_path)) {
      scan_remote(&s[i]);
      continue;
    }
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
scan_model *ldr_mgr_scan_prepare(ldr_manager *m, int *n_out) {
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
void ldr_mgr_scan_merge(ldr_manager *m, scan_model *s, int n, uint64_t gen) {
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
      ldr_registry_set_source_error(m->reg, mm->name, s[i].err.msg);
      continue;
    }
    if (mm->scan_state == 2) ldr_registry_set_source_error(m->reg, mm->name, NULL);
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
          td_logm(TD_LOG_WARN, mm->name, x->version,
                  "Not loading servable {name: %s version: %lld} yet: %s", mm->name,
                  (long long)x->version, sd->err.msg);
        x->st = V_WAITING;
        x->last_err = sd->err;
        ldr_mgr_set_reg(m, mm, x, LDR_STATE_START, &sd->err);
      }
    }
  }
}

/* An object-store version's cache copy goes with its unload (a few
 * unlinks, under mu). */
void ldr_mgr_evict(ldr_manager *m, const mver *x) {
  if (ldr_objstore_is_remote(x->path)) ldr_objstore_evict(x->path, m->cache_dir);
}

/* --- decisions (mu held) ---------------------------------------------------------- */

static void retire(ldr_manager *m, mmodel *mm, mver *x) {
  td_logm(TD_LOG_INFO, mm->name, x->version, "Unloading servable version {name: %s version: %lld}",
          mm->name, (long long)x->version);
  x->held = ldr_registry_retire(m->reg, mm->name, x->version);
  x->st = V_DRAINING;
}

/* Returns the earliest retry deadline among the model's versions (0: none). */
uint64_t ldr_mgr_reconcile(ldr_manager *m, mmodel *mm, freelist *fl, bool *draining) {
  uint64_t now = td_now_ns(), next = 0;
  int n_aspired = 0, aspired_ready = 0;
  for (int i = 0; i < mm->n; i++) {
    bool a = ldr_mgr_is_aspired(mm, &mm->v[i]);
    n_aspired += a;
    aspired_ready += a && mm->v[i].st == V_READY;
  }
  /* Loads, retries, cancellations. Highest versions first. */
  for (int i = mm->n - 1; i >= 0; i--) {
    mver *x = &mm->v[i];
    bool a = ldr_mgr_is_aspired(mm, x) && !m->closing;
    switch (x->st) {
      case V_IDLE:
      case V_UNLOADED:
        if (a) {
          x->attempts = 0;
          ldr_mgr_queue_load(m, mm, x);
        }
        break;
      case V_QUEUED:
        if (!a && ldr_mgr_unqueue(m, mm->name, x->version)) {
          x->st = V_IDLE;
          ldr_registry_forget(m->reg, mm->name, x->version);
        }
        break;
      case V_RETRY:
        if (!a) {
          x->st = V_FAILED;
          ldr_mgr_set_reg(m, mm, x, LDR_STATE_END, &x->last_err);
        } else if (now >= x->retry_at_ns) {
          ldr_mgr_queue_load(m, mm, x);
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
    if (x->st != V_READY || (ldr_mgr_is_aspired(mm, x) && !m->closing)) continue;
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
    ldr_mgr_evict(m, x);
    ldr_mgr_set_reg(m, mm, x, LDR_STATE_END, NULL);
    td_logm(TD_LOG_INFO, mm->name, x->version,
            "Done unloading servable version {name: %s version: %lld}", mm->name,
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

bool ldr_mgr_model_busy(const mmodel *mm) {
  for (int i = 0; i < mm->n; i++) {
    vstate s = mm->v[i].st;
    if (s == V_QUEUED || s == V_LOADING || s == V_READY || s == V_DRAINING || s == V_RETRY)
      return true;
  }
  return false;
}

/* Removes unconfigured models once nothing of them is loaded. */
void ldr_mgr_reap_models(ldr_manager *m) {
  for (int i = m->n_models - 1; i >= 0; i--) {
    mmodel *mm = m->models[i];
    if (mm->configured || ldr_mgr_model_busy(mm)) continue;
    td_err err;
    ldr_registry_remove_model(m->reg, mm->name, &err);
    td_log_info("Removed model %s", mm->name);
    ldr_mgr_free_model(mm);
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
void ldr_mgr_check_settled(ldr_manager *m) {
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
