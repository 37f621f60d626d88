#include "ldr_scan.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "ldr_bundle.h"
#include "ldr_savedmodel.h"
#include "td_log.h"

/* Skipped names are logged once per path: the base path is rescanned every
 * poll interval. The set is process-wide and bounded; past SKIPPED_MAX
 * paths, further ones are skipped without a word. */
#define SKIPPED_MAX 256
static uv_once_t skipped_once = UV_ONCE_INIT;
static uv_mutex_t skipped_mu;
static char *skipped[SKIPPED_MAX];
static int n_skipped;

static void skipped_init(void) { uv_mutex_init(&skipped_mu); }

static void log_skip_once(const char *path, const char *why) {
  uv_once(&skipped_once, skipped_init);
  uv_mutex_lock(&skipped_mu);
  bool seen = false;
  for (int i = 0; i < n_skipped && !seen; i++) seen = !strcmp(skipped[i], path);
  if (!seen && n_skipped < SKIPPED_MAX && (skipped[n_skipped] = strdup(path))) {
    n_skipped++;
    td_log_warn("Ignoring version directory %s: %s", path, why);
  }
  uv_mutex_unlock(&skipped_mu);
}

static bool all_digits(const char *s) {
  if (!*s) return false;
  for (; *s; s++)
    if (*s < '0' || *s > '9') return false;
  return true;
}

bool ldr_scan_parse_version(const char *name, int64_t *version) {
  if (!*name) return false;
  int64_t v = 0;
  for (const char *p = name; *p; p++) {
    if (*p < '0' || *p > '9') return false;
    if (v > (INT64_MAX - (*p - '0')) / 10) return false;
    v = v * 10 + (*p - '0');
  }
  *version = v;
  return true;
}

static int cmp_version(const void *a, const void *b) {
  int64_t x = ((const ldr_version_dir *)a)->version, y = ((const ldr_version_dir *)b)->version;
  return x < y ? -1 : x > y;
}

td_code ldr_scan_versions(const char *base_path, ldr_version_dir **out, int *n, td_err *err) {
  DIR *d = opendir(base_path);
  if (!d)
    return td_err_set(err, TD_NOT_FOUND, "Could not find base path %s (%s)", base_path,
                      strerror(errno));
  ldr_version_dir *v = NULL;
  int count = 0, cap = 0;
  struct dirent *e;
  td_code rc = TD_OK;
  while ((e = readdir(d))) {
    int64_t ver;
    bool is_version = ldr_scan_parse_version(e->d_name, &ver);
    if (!is_version && !all_digits(e->d_name)) continue;
    size_t len = strlen(base_path) + strlen(e->d_name) + 2;
    char *path = malloc(len);
    if (!path) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    snprintf(path, len, "%s/%s", base_path, e->d_name);
    if (!is_version) {
      log_skip_once(path, "the version number does not fit in 64 bits");
      free(path);
      continue;
    }
    struct stat st;
    int failed = stat(path, &st);
    if (failed || !S_ISDIR(st.st_mode)) {
      /* A name gone since the listing is not worth a word; a link loop or
       * a plain file named like a version is. */
      int e2 = failed ? errno : 0;
      if (!failed)
        log_skip_once(path, "not a directory");
      else if (e2 != ENOENT)
        log_skip_once(path, strerror(e2));
      free(path);
      continue;
    }
    int dup = -1;
    for (int i = 0; i < count; i++)
      if (v[i].version == ver) dup = i;
    if (dup >= 0) {
      td_log_warn("version %lld of %s appears twice; using %s", (long long)ver, base_path, path);
      free(v[dup].path);
      v[dup].path = path;
      continue;
    }
    if (count == cap) {
      cap = cap ? cap * 2 : 8;
      ldr_version_dir *nv = realloc(v, (size_t)cap * sizeof *nv);
      if (!nv) {
        free(path);
        rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
      v = nv;
    }
    v[count++] = (ldr_version_dir){ver, path};
  }
  closedir(d);
  if (rc) {
    ldr_scan_free(v, count);
    return rc;
  }
  if (count) qsort(v, (size_t)count, sizeof *v, cmp_version);
  *out = v;
  *n = count;
  return TD_OK;
}

void ldr_scan_free(ldr_version_dir *v, int n) {
  for (int i = 0; v && i < n; i++) free(v[i].path);
  free(v);
}

/* Reads and parses saved_model.pb (or .pbtxt); sets *has_saver when a
 * MetaGraph has a saver_def (so the graph has variables to restore). */
static td_code check_saved_model(const char *dir, bool *has_saver, td_err *err) {
  Tensorflow__SavedModel *sm = NULL;
  td_code rc = ldr_savedmodel_read(dir, &sm, NULL, NULL, err);
  if (rc) return rc;
  *has_saver = false;
  for (size_t i = 0; i < sm->n_meta_graphs; i++) *has_saver |= sm->meta_graphs[i]->saver_def != NULL;
  ldr_savedmodel_free(sm);
  return TD_OK;
}

td_code ldr_scan_check_complete(const char *version_dir, td_err *err) {
  bool has_saver = false;
  td_err e;
  td_err_clear(&e);
  td_code rc = check_saved_model(version_dir, &has_saver, &e);
  /* Nested past the protobuf depth bound: no later read will parse it, so
   * the version is as complete as it gets and its load reports the error
   * (a failed version rather than one waiting for its files). */
  if (rc == TD_RESOURCE_EXHAUSTED) return TD_OK;
  if (rc) {
    if (err) *err = e;
    return rc;
  }
  char prefix[4096], index[4200];
  snprintf(prefix, sizeof prefix, "%s/variables/variables", version_dir);
  snprintf(index, sizeof index, "%s.index", prefix);
  struct stat st;
  if (stat(index, &st)) {
    int e = errno;
    if (!has_saver && e == ENOENT) return TD_OK; /* a graph without variables */
    return td_err_set(err, td_code_from_errno(e), "%s: %s", index, strerror(e));
  }
  ldr_bundle *b = NULL;
  rc = ldr_bundle_open(prefix, &b, err);
  ldr_bundle_close(b);
  return rc;
}
