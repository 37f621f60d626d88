/* Load and unload read the manager's config, change one entry and set the
 * result, then wait for the ticket: the manager does the rest as for any
 * config change. Remembered entries are a small cfg_model_config of their
 * own. */
#include "srv_v2repo.h"

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "td_log.h"

#define UNLOAD_WAIT_MS 30000

struct srv_v2repo {
  ldr_manager *mgr;
  ldr_registry *reg;
  uv_mutex_t mu;
  cfg_model_config gone; /* unloaded through the repository */
};

td_code srv_v2repo_create(ldr_manager *m, ldr_registry *r, srv_v2repo **out, td_err *err) {
  srv_v2repo *p = calloc(1, sizeof *p);
  if (!p || uv_mutex_init(&p->mu)) {
    free(p);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  p->mgr = m;
  p->reg = r;
  *out = p;
  return TD_OK;
}

void srv_v2repo_destroy(srv_v2repo *p) {
  if (!p) return;
  cfg_model_config_free(&p->gone);
  uv_mutex_destroy(&p->mu);
  free(p);
}

/* A config of src's models, less the one named `drop` (NULL: none), plus
 * `add` (NULL: none), deep-copied. */
static td_code rebuild(const cfg_model_config *src, const char *drop, const cfg_model *add,
                       cfg_model_config *out, td_err *err) {
  cfg_model_config view = {.n_models = 0,
                           .models = calloc((size_t)src->n_models + 2, sizeof(cfg_model))};
  if (!view.models) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < src->n_models; i++)
    if (!drop || strcmp(src->models[i].name, drop)) view.models[view.n_models++] = src->models[i];
  if (add) view.models[view.n_models++] = *add;
  td_code rc = cfg_model_config_copy(&view, out, err); /* shallow view, deep copy */
  free(view.models);
  return rc;
}

/* Under p->mu; the wait happens after it is released (index must not
 * wait for a load). */
static td_code apply(srv_v2repo *p, const cfg_model_config *c, uint64_t *ticket, td_err *err) {
  return ldr_manager_set_config(p->mgr, c, ticket, err);
}

static td_code settle(srv_v2repo *p, uint64_t ticket, td_err *err) {
  return ldr_manager_wait(p->mgr, ticket, -1, err);
}

td_code srv_v2repo_load(srv_v2repo *p, const char *name, const char *base_path, td_err *err) {
  if (!name || !*name) return td_err_set(err, TD_INVALID_ARGUMENT, "a model name is required");
  uv_mutex_lock(&p->mu);
  cfg_model_config cur, next = {0};
  uint64_t ticket = 0;
  bool added = false; /* this request put the model into the config */
  td_code rc = ldr_manager_get_config(p->mgr, &cur, err);
  if (rc) goto out_unlocked_cur;
  const cfg_model *known = cfg_model_config_find(&cur, name);
  const cfg_model *gone = cfg_model_config_find(&p->gone, name);
  cfg_model fresh;
  if (known && (!base_path || !strcmp(base_path, known->base_path))) {
    /* Already configured: look for new versions, then report as a load. */
    ticket = ldr_manager_request_scan(p->mgr);
    goto out;
  }
  const cfg_model *add = NULL;
  if (base_path) {
    memset(&fresh, 0, sizeof fresh);
    if (known)
      fresh = *known;
    else if (gone)
      fresh = *gone;
    else
      fresh.policy = (cfg_version_policy){.kind = CFG_POLICY_LATEST, .num_versions = 1};
    fresh.name = (char *)name;
    fresh.base_path = (char *)base_path;
    add = &fresh;
  } else if (gone) {
    add = gone;
  } else {
    rc = td_err_set(err, TD_NOT_FOUND,
                    "model '%s' is not in the model repository (give a base_path parameter to "
                    "add it)",
                    name);
    goto out;
  }
  rc = rebuild(&cur, name, add, &next, err);
  if (rc) goto out;
  td_log_info("v2 repository: loading model %s from %s", name, add->base_path);
  rc = apply(p, &next, &ticket, err);
  added = !rc && !known;
  if (!rc) {
    /* In the config now, whatever its versions do. */
    cfg_model_config rest;
    if (!rebuild(&p->gone, name, NULL, &rest, NULL)) {
      cfg_model_config_free(&p->gone);
      p->gone = rest;
    }
  }
out:
  cfg_model_config_free(&next);
  cfg_model_config_free(&cur);
out_unlocked_cur:
  uv_mutex_unlock(&p->mu);
  if (!rc && ticket) rc = settle(p, ticket, err);
  if (!rc && !ldr_registry_available(p->reg, name))
    rc = td_err_set(err, TD_UNAVAILABLE, "model '%s' has no available version", name);
  /* A model this load added that did not become available goes back out
   * (remembered, so a later load retries it): a failed load must not leave
   * the server unready. */
  if (rc && added) srv_v2repo_unload(p, name, NULL);
  return rc;
}

td_code srv_v2repo_unload(srv_v2repo *p, const char *name, td_err *err) {
  if (!name || !*name) return td_err_set(err, TD_INVALID_ARGUMENT, "a model name is required");
  uv_mutex_lock(&p->mu);
  cfg_model_config cur, next = {0}, remembered = {0};
  td_code rc = ldr_manager_get_config(p->mgr, &cur, err);
  if (rc) {
    uv_mutex_unlock(&p->mu);
    return rc;
  }
  const cfg_model *known = cfg_model_config_find(&cur, name);
  if (!known) {
    if (!cfg_model_config_find(&p->gone, name))
      rc = td_err_set(err, TD_NOT_FOUND, "model '%s' is not in the model repository", name);
    goto out;
  }
  rc = rebuild(&p->gone, name, known, &remembered, err);
  if (!rc) rc = rebuild(&cur, name, NULL, &next, err);
  if (rc) goto out;
  td_log_info("v2 repository: unloading model %s", name);
  uint64_t ticket = 0;
  rc = apply(p, &next, &ticket, err);
  if (!rc) {
    cfg_model_config_free(&p->gone);
    p->gone = remembered;
    memset(&remembered, 0, sizeof remembered);
  }
out:
  cfg_model_config_free(&remembered);
  cfg_model_config_free(&next);
  cfg_model_config_free(&cur);
  uv_mutex_unlock(&p->mu);
  /* The removal's verdict on other models (a failed label, say) is not this
   * request's: only the wait itself can fail it. */
  if (!rc && ticket) {
    td_err werr;
    td_code w = settle(p, ticket, &werr);
    if (w == TD_CANCELLED || w == TD_DEADLINE_EXCEEDED) rc = td_err_set(err, w, "%s", werr.msg);
  }
  /* Settling does not wait for the versions to be freed; a load right
   * after must not meet them still unloading. Wait until the registry has
   * forgotten the model (requests holding a version finish first), up to
   * UNLOAD_WAIT_MS; past it the model is out of the config all the same. */
  for (int waited = 0; !rc && waited < UNLOAD_WAIT_MS; waited += 10) {
    ldr_version_status *st = NULL;
    int n = 0;
    if (ldr_registry_status(p->reg, name, -1, &st, &n, NULL)) break;
    free(st);
    uv_sleep(10);
  }
  return rc;
}

static const char *state_word(ldr_state s) {
  switch (s) {
    case LDR_STATE_AVAILABLE:
      return "READY";
    case LDR_STATE_START:
    case LDR_STATE_LOADING:
      return "LOADING";
    case LDR_STATE_UNLOADING:
      return "UNLOADING";
    default:
      return "UNAVAILABLE";
  }
}

static int cmp_entry(const void *pa, const void *pb) {
  const srv_v2repo_entry *a = pa, *b = pb;
  int c = strcmp(a->name, b->name);
  if (c) return c;
  return a->version < b->version ? -1 : a->version > b->version;
}

int srv_v2repo_index(srv_v2repo *p, bool ready_only, srv_v2repo_entry **out) {
  *out = NULL;
  uv_mutex_lock(&p->mu);
  char **names = NULL;
  int n_names = ldr_registry_model_names(p->reg, &names);
  int cap = 16, n = 0;
  srv_v2repo_entry *e = malloc(sizeof *e * (size_t)cap);
  for (int i = 0; e && i < n_names; i++) {
    ldr_version_status *st = NULL;
    int k = 0;
    if (ldr_registry_status(p->reg, names[i], -1, &st, &k, NULL)) k = 0;
    for (int j = 0; e && j < k; j++) {
      if (ready_only && st[j].state != LDR_STATE_AVAILABLE) continue;
      if (n == cap) {
        srv_v2repo_entry *g = realloc(e, sizeof *e * (size_t)(cap *= 2));
        if (!g) break;
        e = g;
      }
      e[n] = (srv_v2repo_entry){.name = strdup(names[i]),
                                .has_version = true,
                                .version = st[j].version,
                                .state = state_word(st[j].state),
                                .reason = strdup(st[j].status.code ? st[j].status.msg : "")};
      n++;
    }
    free(st);
  }
  for (int i = 0; e && !ready_only && i < p->gone.n_models; i++) {
    if (n == cap) {
      srv_v2repo_entry *g = realloc(e, sizeof *e * (size_t)(cap *= 2));
      if (!g) break;
      e = g;
    }
    e[n++] = (srv_v2repo_entry){.name = strdup(p->gone.models[i].name),
                                .version = -1,
                                .state = "UNAVAILABLE",
                                .reason = strdup("unloaded")};
  }
  uv_mutex_unlock(&p->mu);
  for (int i = 0; i < n_names; i++) free(names[i]);
  free(names);
  if (!e) return 0;
  int k = 0; /* drop entries whose strings did not fit */
  for (int i = 0; i < n; i++) {
    if (e[i].name && e[i].reason)
      e[k++] = e[i];
    else
      free(e[i].name), free(e[i].reason);
  }
  qsort(e, (size_t)k, sizeof *e, cmp_entry);
  *out = e;
  return k;
}

void srv_v2repo_index_free(srv_v2repo_entry *e, int n) {
  for (int i = 0; i < n; i++) free(e[i].name), free(e[i].reason);
  free(e);
}
