#include "ldr_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "ldr_scan.h"
#include "td_log.h"

/* Entries outlive their versions (END stays reported), one per version a
 * model ever had, so the status is kept compact: a code and a copy of the
 * message, not a whole td_err. */
typedef struct version_entry {
  int64_t version;
  ldr_state state;
  td_code code;
  char *msg;              /* NULL when empty */
  ldr_servable *servable; /* set while AVAILABLE */
} version_entry;

static void set_status(version_entry *e, const td_err *st) {
  free(e->msg);
  e->msg = NULL;
  e->code = st ? st->code : TD_OK;
  if (st && st->msg[0]) e->msg = strdup(st->msg); /* out of memory: no message */
}

typedef struct label_entry {
  char *label;
  int64_t version;
} label_entry;

typedef struct model_entry {
  char *name;
  char *base_path;
  char *source_error; /* why the base path could not be listed; NULL: it could */
  int n, cap;
  version_entry *versions; /* sorted by version */
  int n_labels;
  label_entry *labels;
} model_entry;

struct ldr_registry {
  uv_mutex_t mu;
  char *tags;
  bool closed;
  int n_models;
  model_entry *models;
};

const char *ldr_state_name(ldr_state s) {
  switch (s) {
    case LDR_STATE_START: return "START";
    case LDR_STATE_LOADING: return "LOADING";
    case LDR_STATE_AVAILABLE: return "AVAILABLE";
    case LDR_STATE_UNLOADING: return "UNLOADING";
    case LDR_STATE_END: return "END";
    default: return "UNKNOWN";
  }
}

td_code ldr_registry_create(const char *tags, ldr_registry **out, td_err *err) {
  ldr_registry *r = calloc(1, sizeof *r);
  if (!r || !(r->tags = strdup(tags)) || uv_mutex_init(&r->mu)) {
    if (r) free(r->tags);
    free(r);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "cannot create the model registry");
  }
  *out = r;
  return TD_OK;
}

static void free_labels(model_entry *m) {
  for (int i = 0; i < m->n_labels; i++) free(m->labels[i].label);
  free(m->labels);
  m->labels = NULL;
  m->n_labels = 0;
}

static void free_model(model_entry *m) {
  for (int v = 0; v < m->n; v++) {
    ldr_servable_unref(m->versions[v].servable);
    free(m->versions[v].msg);
  }
  free(m->versions);
  free(m->name);
  free(m->base_path);
  free(m->source_error);
  free_labels(m);
}

void ldr_registry_destroy(ldr_registry *r) {
  if (!r) return;
  for (int i = 0; i < r->n_models; i++) free_model(&r->models[i]);
  free(r->models);
  free(r->tags);
  uv_mutex_destroy(&r->mu);
  free(r);
}

static model_entry *find_model(ldr_registry *r, const char *name) {
  for (int i = 0; i < r->n_models; i++)
    if (!strcmp(r->models[i].name, name)) return &r->models[i];
  return NULL;
}

td_code ldr_registry_add_model(ldr_registry *r, const char *name, const char *base_path,
                               td_err *err) {
  td_code rc = TD_OK;
  uv_mutex_lock(&r->mu);
  if (find_model(r, name)) {
    rc = td_err_set(err, TD_ALREADY_EXISTS, "model '%s' is already configured", name);
  } else {
    model_entry *ms = realloc(r->models, sizeof *ms * (size_t)(r->n_models + 1));
    if (!ms) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      r->models = ms;
      model_entry *m = &ms[r->n_models];
      *m = (model_entry){.name = strdup(name), .base_path = strdup(base_path)};
      if (!m->name || !m->base_path) {
        free(m->name);
        free(m->base_path);
        rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      } else {
        r->n_models++;
      }
    }
  }
  uv_mutex_unlock(&r->mu);
  return rc;
}

/* Finds or inserts the entry for version v (mutex held). */
static version_entry *version_slot(model_entry *m, int64_t v) {
  int i = 0;
  while (i < m->n && m->versions[i].version < v) i++;
  if (i < m->n && m->versions[i].version == v) return &m->versions[i];
  if (m->n == m->cap) {
    int cap = m->cap ? m->cap * 2 : 4;
    version_entry *nv = realloc(m->versions, sizeof *nv * (size_t)cap);
    if (!nv) return NULL;
    m->versions = nv;
    m->cap = cap;
  }
  memmove(&m->versions[i + 1], &m->versions[i], sizeof *m->versions * (size_t)(m->n - i));
  m->n++;
  m->versions[i] = (version_entry){.version = v, .state = LDR_STATE_START};
  return &m->versions[i];
}

td_code ldr_registry_load_latest(ldr_registry *r, const char *name, td_err *err) {
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  char *base = m ? strdup(m->base_path) : NULL;
  uv_mutex_unlock(&r->mu);
  if (!m) return td_err_set(err, TD_NOT_FOUND, "model '%s' is not configured", name);
  if (!base) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");

  ldr_version_dir *dirs = NULL;
  int n = 0;
  td_code rc = ldr_scan_versions(base, &dirs, &n, err);
  if (!rc && !n)
    rc = td_err_set(err, TD_NOT_FOUND,
                    "No versions of servable %s found under base path %s. Did you forget to name "
                    "your leaf directory as a number (eg. '/1/')?",
                    name, base);
  free(base);
  if (rc) {
    td_log_warn("%s", err ? err->msg : "no versions");
    ldr_scan_free(dirs, n);
    return rc;
  }
  const ldr_version_dir *latest = &dirs[n - 1];
  int64_t v = latest->version;

  uv_mutex_lock(&r->mu);
  m = find_model(r, name);
  version_entry *e = m ? version_slot(m, v) : NULL;
  /* A version already serving stays as it is: reloading it would take it
   * out of service meanwhile, and a failed reload would drop it. */
  bool serving = e && e->state == LDR_STATE_AVAILABLE;
  if (e && !serving) {
    e->state = LDR_STATE_LOADING;
    set_status(e, NULL);
  }
  uv_mutex_unlock(&r->mu);
  if (serving) {
    ldr_scan_free(dirs, n);
    return TD_OK;
  }
  if (!e) {
    ldr_scan_free(dirs, n);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }

  td_log_info("Loading servable: {name: %s version: %lld} from %s", name, (long long)v,
              latest->path);
  ldr_servable *sv = NULL;
  td_err lerr;
  td_err_clear(&lerr);
  rc = ldr_servable_load(latest->path, v, r->tags, &sv, &lerr);
  if (rc)
    td_log_error("Loading servable: {name: %s version: %lld} failed: %s", name, (long long)v,
                 lerr.msg);
  else
    td_log_info("Successfully loaded servable version {name: %s version: %lld}", name,
                (long long)v);
  ldr_scan_free(dirs, n);

  uv_mutex_lock(&r->mu);
  m = find_model(r, name);
  e = m ? version_slot(m, v) : NULL;
  if (e) {
    ldr_servable_unref(e->servable);
    e->servable = sv;
    e->state = rc ? LDR_STATE_END : LDR_STATE_AVAILABLE;
    set_status(e, rc ? &lerr : NULL);
  } else {
    ldr_servable_unref(sv);
  }
  uv_mutex_unlock(&r->mu);
  if (rc && err) *err = lerr;
  return rc;
}

td_code ldr_registry_acquire(ldr_registry *r, const char *name, int64_t version,
                             ldr_servable **out, td_err *err) {
  td_code rc = TD_OK;
  uv_mutex_lock(&r->mu);
  if (r->closed) {
    uv_mutex_unlock(&r->mu);
    return td_err_set(err, TD_UNAVAILABLE, "Server is shutting down");
  }
  model_entry *m = find_model(r, name);
  const version_entry *hit = NULL;
  if (m)
    for (int i = m->n - 1; i >= 0; i--) {
      const version_entry *e = &m->versions[i];
      if (e->state != LDR_STATE_AVAILABLE) continue;
      if (version < 0 || e->version == version) {
        hit = e;
        break;
      }
    }
  if (hit) {
    ldr_servable_ref(hit->servable);
    *out = hit->servable;
  } else {
    /* TF Serving's messages. The code differs in one case by design: a
     * configured model with no AVAILABLE version (still loading, or every
     * load failed) is UNAVAILABLE (HTTP 503), which tells clients to retry;
     * TF Serving says NOT_FOUND there too. */
    td_code code = version < 0 && m ? TD_UNAVAILABLE : TD_NOT_FOUND;
    rc = version < 0
             ? td_err_set(err, code, "Servable not found for request: Latest(%s)", name)
             : td_err_set(err, code, "Servable not found for request: Specific(%s, %lld)", name,
                          (long long)version);
  }
  uv_mutex_unlock(&r->mu);
  return rc;
}

td_code ldr_registry_status(ldr_registry *r, const char *name, int64_t version,
                            ldr_version_status **out, int *n, td_err *err) {
  td_code rc = TD_OK;
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  int count = 0;
  if (m)
    for (int i = 0; i < m->n; i++) count += version < 0 || m->versions[i].version == version;
  if (!m || !count) {
    rc = version < 0 ? td_err_set(err, TD_NOT_FOUND, "Could not find any versions of model %s%s%s",
                                  name, m && m->source_error ? ": " : "",
                                  m && m->source_error ? m->source_error : "")
                     : td_err_set(err, TD_NOT_FOUND, "Could not find version %lld of model %s",
                                  (long long)version, name);
  } else {
    ldr_version_status *s = calloc((size_t)count, sizeof *s);
    if (!s) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      int k = 0;
      for (int i = 0; i < m->n; i++) {
        const version_entry *e = &m->versions[i];
        if (version >= 0 && e->version != version) continue;
        ldr_version_status *o = &s[k++];
        *o = (ldr_version_status){.version = e->version, .state = e->state};
        o->status.code = e->code;
        snprintf(o->status.msg, sizeof o->status.msg, "%s", e->msg ? e->msg : "");
      }
      *out = s;
      *n = count;
    }
  }
  uv_mutex_unlock(&r->mu);
  return rc;
}

static int cmp_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int ldr_registry_model_names(ldr_registry *r, char ***names) {
  uv_mutex_lock(&r->mu);
  int n = r->n_models;
  char **out = n ? calloc((size_t)n, sizeof *out) : NULL;
  int k = 0;
  for (int i = 0; out && i < n; i++)
    if ((out[k] = strdup(r->models[i].name))) k++;
  uv_mutex_unlock(&r->mu);
  if (out) qsort(out, (size_t)k, sizeof *out, cmp_name);
  *names = out;
  return k;
}

static bool any_available(const model_entry *m) {
  for (int v = 0; v < m->n; v++)
    if (m->versions[v].state == LDR_STATE_AVAILABLE) return true;
  return false;
}

bool ldr_registry_ready(ldr_registry *r) {
  uv_mutex_lock(&r->mu);
  bool ready = true;
  for (int i = 0; i < r->n_models && ready; i++) ready = any_available(&r->models[i]);
  uv_mutex_unlock(&r->mu);
  return ready;
}

bool ldr_registry_available(ldr_registry *r, const char *name) {
  uv_mutex_lock(&r->mu);
  const model_entry *m = find_model(r, name);
  bool ok = m && any_available(m);
  uv_mutex_unlock(&r->mu);
  return ok;
}

td_code ldr_registry_resolve_label(ldr_registry *r, const char *name, const char *label,
                                   int64_t *version, td_err *err) {
  td_code rc = TD_OK;
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  const label_entry *hit = NULL;
  for (int i = 0; m && i < m->n_labels && !hit; i++)
    if (!strcmp(m->labels[i].label, label)) hit = &m->labels[i];
  if (hit)
    *version = hit->version;
  else
    rc = td_err_set(err, TD_INVALID_ARGUMENT, "Unrecognized servable version label: %s", label);
  uv_mutex_unlock(&r->mu);
  return rc;
}

/* --- lifecycle ----------------------------------------------------------- */

static td_code no_model(const char *name, td_err *err) {
  return td_err_set(err, TD_NOT_FOUND, "model '%s' is not configured", name);
}

td_code ldr_registry_set_state(ldr_registry *r, const char *name, int64_t version,
                               ldr_state state, const td_err *status, td_err *err) {
  td_code rc = TD_OK;
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  version_entry *e = m ? version_slot(m, version) : NULL;
  if (!m) {
    rc = no_model(name, err);
  } else if (!e) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  } else if (e->servable && e->state == LDR_STATE_AVAILABLE) {
    rc = td_err_set(err, TD_FAILED_PRECONDITION, "version %lld of %s is serving; retire it first",
                    (long long)version, name);
  } else {
    e->state = state;
    set_status(e, status);
  }
  uv_mutex_unlock(&r->mu);
  return rc;
}

td_code ldr_registry_publish(ldr_registry *r, const char *name, ldr_servable *sv, td_err *err) {
  td_code rc = TD_OK;
  ldr_servable *drop = sv;
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  version_entry *e = m ? version_slot(m, ldr_servable_version(sv)) : NULL;
  if (!m) {
    rc = no_model(name, err);
  } else if (!e) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    drop = e->servable;
    e->servable = sv;
    e->state = LDR_STATE_AVAILABLE;
    set_status(e, NULL);
  }
  uv_mutex_unlock(&r->mu);
  ldr_servable_unref(drop);
  return rc;
}

ldr_servable *ldr_registry_retire(ldr_registry *r, const char *name, int64_t version) {
  ldr_servable *sv = NULL;
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  for (int i = 0; m && i < m->n; i++) {
    version_entry *e = &m->versions[i];
    if (e->version != version || !e->servable) continue;
    sv = e->servable;
    e->servable = NULL;
    e->state = LDR_STATE_UNLOADING;
    set_status(e, NULL);
  }
  uv_mutex_unlock(&r->mu);
  return sv;
}

void ldr_registry_set_source_error(ldr_registry *r, const char *name, const char *msg) {
  char *copy = msg ? strdup(msg) : NULL;
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  if (m) {
    free(m->source_error);
    m->source_error = copy;
    copy = NULL;
  }
  uv_mutex_unlock(&r->mu);
  free(copy);
}

void ldr_registry_forget(ldr_registry *r, const char *name, int64_t version) {
  ldr_servable *sv = NULL;
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  for (int i = 0; m && i < m->n; i++) {
    if (m->versions[i].version != version) continue;
    sv = m->versions[i].servable;
    free(m->versions[i].msg);
    memmove(&m->versions[i], &m->versions[i + 1], sizeof *m->versions * (size_t)(m->n - i - 1));
    m->n--;
    break;
  }
  uv_mutex_unlock(&r->mu);
  ldr_servable_unref(sv);
}

td_code ldr_registry_remove_model(ldr_registry *r, const char *name, td_err *err) {
  model_entry gone = {0};
  bool found = false;
  uv_mutex_lock(&r->mu);
  for (int i = 0; i < r->n_models && !found; i++) {
    if (strcmp(r->models[i].name, name)) continue;
    gone = r->models[i];
    memmove(&r->models[i], &r->models[i + 1], sizeof *r->models * (size_t)(r->n_models - i - 1));
    r->n_models--;
    found = true;
  }
  uv_mutex_unlock(&r->mu);
  if (!found) return no_model(name, err);
  free_model(&gone); /* outside the lock: a last unref frees a whole model */
  return TD_OK;
}

td_code ldr_registry_check_label(ldr_registry *r, const char *name, const char *label,
                                 int64_t version, bool allow_unavailable, td_err *err) {
  td_code rc = TD_OK;
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  bool available = false, moves = false;
  for (int i = 0; m && i < m->n; i++)
    if (m->versions[i].version == version)
      available = m->versions[i].state == LDR_STATE_AVAILABLE;
  for (int i = 0; m && i < m->n_labels; i++)
    if (!strcmp(m->labels[i].label, label)) moves = m->labels[i].version != version;
  if (!available && (!allow_unavailable || moves))
    rc = td_err_set(err, TD_FAILED_PRECONDITION,
                    "Request to assign label to version %lld of model %s, which is not currently "
                    "available for inference",
                    (long long)version, name);
  uv_mutex_unlock(&r->mu);
  return rc;
}

td_code ldr_registry_set_labels(ldr_registry *r, const char *name, const ldr_label *labels, int n,
                                td_err *err) {
  label_entry *fresh = n > 0 ? calloc((size_t)n, sizeof *fresh) : NULL;
  if (n > 0 && !fresh) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < n; i++) {
    fresh[i].version = labels[i].version;
    if (!(fresh[i].label = strdup(labels[i].label))) {
      for (int j = 0; j < i; j++) free(fresh[j].label);
      free(fresh);
      return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  model_entry old = {0};
  td_code rc = TD_OK;
  uv_mutex_lock(&r->mu);
  model_entry *m = find_model(r, name);
  if (m) {
    old.labels = m->labels;
    old.n_labels = m->n_labels;
    m->labels = fresh;
    m->n_labels = n;
  } else {
    old.labels = fresh;
    old.n_labels = n;
    rc = no_model(name, err);
  }
  uv_mutex_unlock(&r->mu);
  free_labels(&old);
  return rc;
}

void ldr_registry_close(ldr_registry *r) {
  uv_mutex_lock(&r->mu);
  r->closed = true;
  uv_mutex_unlock(&r->mu);
}
