#include "ldr_scan.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ldr_bundle.h"
#include "td_log.h"
#include "ldr_savedmodel.h"


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
    if (!ldr_scan_parse_version(e->d_name, &ver)) continue;
    size_t len = strlen(base_path) + strlen(e->d_name) + 2;
    char *path = malloc(len);
    if (!path) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      break;
    }
    snprintf(path, len, "%s/%s", base_path, e->d_name);
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode)) {
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
  td_code rc = check_saved_model(version_dir, &has_saver, err);
  if (rc) return rc;
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
