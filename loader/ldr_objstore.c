/* Object-store base paths: the generic part (URLs, grouping a listing into
 * versions, completeness, the download into the cache and its checks). The
 * backends only list and sign. */
#include "ldr_objstore.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ldr_bundle.h"
#include "ldr_crc32c.h"
#include "ldr_gcs.h"
#include "ldr_http.h"
#include "ldr_s3.h"
#include "ldr_scan.h"
#include "ldr_sha256.h"
#include "td_log.h"

#define PART_BYTES (8 << 20)
#define PARALLEL 8
#define RETRIES 4

/* Lists the objects under dir + "/" ("" for the bucket's root) by asking
 * the store for prefix `ask` (dir or a parent of it, without a trailing
 * slash) and dropping keys outside dir/ here. A prefix holding characters
 * S3 percent-encodes in its query string ("/") is where S3-compatible
 * stores differ in checking SigV4 signatures (moto compares the decoded
 * form), so what is asked for is the base path's prefix only: for a base
 * path one level under the bucket there is nothing to encode. */
static td_code list_dir(const ldr_os_backend *be, const char *bucket, const char *ask,
                        const char *dir, ldr_obj **out, int *n_out, td_err *err) {
  ldr_obj *o = NULL;
  int n = 0;
  td_code rc = be->list(bucket, ask, &o, &n, err);
  if (rc) return rc;
  size_t dl = strlen(dir);
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (!dl || (!strncmp(o[i].key, dir, dl) && o[i].key[dl] == '/'))
      o[k++] = o[i];
    else
      free(o[i].key);
  }
  *out = o;
  *n_out = k;
  return TD_OK;
}

void ldr_obj_free(ldr_obj *o, int n) {
  for (int i = 0; o && i < n; i++) free(o[i].key);
  free(o);
}

void ldr_os_get_free(ldr_os_get *g) {
  free(g->url);
  for (int i = 0; i < g->n_headers; i++) free(g->headers[i]);
  *g = (ldr_os_get){0};
}

bool ldr_objstore_is_remote(const char *path) {
  return path && (!strncmp(path, "s3://", 5) || !strncmp(path, "gs://", 5));
}

td_code ldr_objstore_parse(const char *url, const ldr_os_backend **be, char **bucket, char **prefix,
                           td_err *err) {
  if (!strncmp(url, "s3://", 5))
    *be = &ldr_s3_backend;
  else if (!strncmp(url, "gs://", 5))
    *be = &ldr_gcs_backend;
  else
    return td_err_set(err, TD_INVALID_ARGUMENT, "%s: not an s3:// or gs:// URL", url);
  const char *b = url + 5, *slash = strchr(b, '/');
  size_t blen = slash ? (size_t)(slash - b) : strlen(b);
  if (!blen) return td_err_set(err, TD_INVALID_ARGUMENT, "%s: no bucket name", url);
  const char *p = slash ? slash + 1 : "";
  size_t plen = strlen(p);
  while (plen && p[plen - 1] == '/') plen--;
  *bucket = strndup(b, blen);
  *prefix = strndup(p, plen);
  if (!*bucket || !*prefix) {
    free(*bucket);
    free(*prefix);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  return TD_OK;
}

/* --- completeness ----------------------------------------------------------- */

/* Parses "variables.data-SSSSS-of-NNNNN". */
static bool parse_shard(const char *name, long *s, long *nn) {
  const char *p = "variables.data-";
  if (strncmp(name, p, strlen(p))) return false;
  char *end;
  *s = strtol(name + strlen(p), &end, 10);
  if (strncmp(end, "-of-", 4)) return false;
  *nn = strtol(end + 4, &end, 10);
  return !*end && *nn > 0 && *s >= 0 && *s < *nn && *nn <= 100000;
}

/* files: keys relative to the version directory. */
static td_code check_files(const char *url, char **files, int n, td_err *err) {
  bool pb = false, index = false, anyvar = false;
  long shards = -1;
  for (int i = 0; i < n; i++) {
    const char *f = files[i];
    pb |= !strcmp(f, "saved_model.pb") || !strcmp(f, "saved_model.pbtxt");
    if (strncmp(f, "variables/", 10)) continue;
    const char *v = f + 10;
    index |= !strcmp(v, "variables.index");
    long s, nn;
    if (parse_shard(v, &s, &nn)) {
      anyvar = true;
      if (shards >= 0 && shards != nn)
        return td_err_set(err, TD_DATA_LOSS, "%s: data shards disagree on their count", url);
      shards = nn;
    }
  }
  if (!pb) return td_err_set(err, TD_NOT_FOUND, "%s: no saved_model.pb", url);
  if (!index && !anyvar) return TD_OK;
  if (!index) return td_err_set(err, TD_NOT_FOUND, "%s: variables/variables.index missing", url);
  if (shards < 0)
    return td_err_set(err, TD_NOT_FOUND, "%s: the checkpoint index has no data shard yet", url);
  char want[64];
  for (long s = 0; s < shards; s++) {
    snprintf(want, sizeof want, "variables/variables.data-%05ld-of-%05ld", s, shards);
    bool have = false;
    for (int i = 0; i < n && !have; i++) have = !strcmp(files[i], want);
    if (!have) return td_err_set(err, TD_NOT_FOUND, "%s: %s missing", url, want);
  }
  return TD_OK;
}

/* --- scan ----------------------------------------------------------------------- */

void ldr_objstore_scan_free(ldr_os_version *v, int n) {
  for (int i = 0; v && i < n; i++) free(v[i].path);
  free(v);
}

static int cmp_obj(const void *a, const void *b) {
  return strcmp(((const ldr_obj *)a)->key, ((const ldr_obj *)b)->key);
}
static int cmp_ver(const void *a, const void *b) {
  int64_t x = ((const ldr_os_version *)a)->version, y = ((const ldr_os_version *)b)->version;
  return x < y ? -1 : x > y;
}

td_code ldr_objstore_scan(const char *base_url, ldr_os_version **out, int *n_out, td_err *err) {
  const ldr_os_backend *be;
  char *bucket = NULL, *prefix = NULL;
  td_code rc = ldr_objstore_parse(base_url, &be, &bucket, &prefix, err);
  if (rc) return rc;
  size_t plen = strlen(prefix);
  char *lp = malloc(plen + 2);
  ldr_obj *o = NULL;
  int no = 0;
  if (!lp) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (!rc) {
    snprintf(lp, plen + 2, "%s%s", prefix, plen ? "/" : "");
    rc = list_dir(be, bucket, prefix, prefix, &o, &no, err);
  }
  ldr_os_version *v = NULL;
  int nv = 0;
  char **files = NULL;
  if (!rc && no) {
    qsort(o, (size_t)no, sizeof *o, cmp_obj); /* a version's keys become one run */
    v = calloc((size_t)no, sizeof *v);
    files = calloc((size_t)no, sizeof *files);
    if (!v || !files) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  size_t llen = lp ? strlen(lp) : 0;
  for (int i = 0; !rc && i < no;) {
    const char *rel = o[i].key + llen, *slash = strchr(rel, '/');
    size_t nlen = slash ? (size_t)(slash - rel) : strlen(rel);
    int j = i, nf = 0;
    while (j < no && !strncmp(o[j].key + llen, rel, nlen) && o[j].key[llen + nlen] == '/') {
      if (o[j].key[llen + nlen + 1]) files[nf++] = o[j].key + llen + nlen + 1;
      j++;
    }
    if (j == i) j++; /* a plain object directly under the prefix */
    char name[32];
    int64_t ver;
    if (slash && nlen < sizeof name && nf) {
      memcpy(name, rel, nlen);
      name[nlen] = 0;
      if (ldr_scan_parse_version(name, &ver)) {
        size_t ulen = strlen(base_url) + nlen + 2;
        char *path = malloc(ulen);
        if (!path) {
          rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
          break;
        }
        const char *bu = base_url;
        size_t bl = strlen(bu);
        while (bl > 5 && bu[bl - 1] == '/') bl--;
        snprintf(path, ulen, "%.*s/%s", (int)bl, bu, name);
        int dup = -1;
        for (int k = 0; k < nv; k++)
          if (v[k].version == ver) dup = k;
        ldr_os_version *x = dup >= 0 ? &v[dup] : &v[nv++];
        if (dup >= 0) {
          td_log_warn("version %lld of %s appears twice; using %s", (long long)ver, base_url, path);
          free(x->path);
        }
        x->version = ver;
        x->path = path;
        td_err_clear(&x->err);
        x->rc = check_files(path, files, nf, &x->err);
      }
    }
    i = j;
  }
  free(files);
  ldr_obj_free(o, no);
  free(lp);
  free(bucket);
  free(prefix);
  if (rc) {
    ldr_objstore_scan_free(v, nv);
    return rc;
  }
  if (nv) qsort(v, (size_t)nv, sizeof *v, cmp_ver);
  *out = v;
  *n_out = nv;
  return TD_OK;
}

/* --- the cache ----------------------------------------------------------------- */

static char default_cache[4096];
static pthread_once_t default_once = PTHREAD_ONCE_INIT;
static void make_default_cache(void) {
  const char *t = getenv("TMPDIR");
  snprintf(default_cache, sizeof default_cache, "%s/tensord-cache-%d", t && *t ? t : "/tmp",
           (int)getpid());
}

static const char *cache_root(const char *cache_dir) {
  if (cache_dir && *cache_dir) return cache_dir;
  pthread_once(&default_once, make_default_cache);
  return default_cache;
}

/* mkdir -p */
static int mkdirs(const char *path) {
  char tmp[4096];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
    *p = '/';
  }
  return mkdir(tmp, 0755) && errno != EEXIST ? -1 : 0;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
  return remove(p);
}
static void rm_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st)) return;
  nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* <cache>/<version>-<hash of the URL>: one directory per model version. */
static void cache_path(const char *version_url, const char *cache_dir, char *out, size_t cap) {
  uint8_t h[LDR_SHA256_LEN];
  char hex[2 * LDR_SHA256_LEN + 1];
  ldr_sha256_digest(version_url, strlen(version_url), h);
  ldr_hex(h, 8, hex);
  const char *name = strrchr(version_url, '/');
  snprintf(out, cap, "%s/%s-%s", cache_root(cache_dir), name ? name + 1 : "v", hex);
}

void ldr_objstore_evict(const char *version_url, const char *cache_dir) {
  char dir[4200];
  cache_path(version_url, cache_dir, dir, sizeof dir);
  rm_tree(dir);
}

/* A key relative to the version must stay inside it. */
static bool safe_rel(const char *rel) {
  if (!*rel || rel[0] == '/') return false;
  for (const char *p = rel; *p;) {
    const char *e = strchr(p, '/');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) return false;
    if (!e) break;
    p = e + 1;
  }
  return true;
}

/* Reads every tensor once: each read checks its CRC32C. */
static td_code check_checkpoint(const char *dir, td_err *err) {
  td_code rc = ldr_scan_check_complete(dir, err);
  if (rc) return rc;
  char prefix[4400], index[4500];
  snprintf(prefix, sizeof prefix, "%s/variables/variables", dir);
  snprintf(index, sizeof index, "%s.index", prefix);
  struct stat st;
  if (stat(index, &st)) return TD_OK; /* no variables */
  ldr_bundle *b = NULL;
  if ((rc = ldr_bundle_open(prefix, &b, err))) return rc;
  for (int i = 0; !rc && i < ldr_bundle_count(b); i++) {
    eng_tensor t;
    rc = ldr_bundle_read(b, ldr_bundle_key(b, i), ENG_DT_INVALID, &t, err);
    /* Tensors the engine cannot hold are the loader's to report. */
    if (rc == TD_UNIMPLEMENTED) rc = TD_OK;
    if (!rc) eng_tensor_release(&t);
  }
  ldr_bundle_close(b);
  return rc;
}

static uint32_t file_crc32c(int fd, int64_t size) {
  static const size_t chunk = 1 << 20;
  char *buf = malloc(chunk);
  uint32_t crc = 0;
  for (int64_t off = 0; buf && off < size;) {
    ssize_t r = pread(fd, buf, chunk, off);
    if (r <= 0) break;
    crc = ldr_crc32c_extend(crc, buf, (size_t)r);
    off += r;
  }
  free(buf);
  return crc;
}

typedef struct fetch_file {
  const ldr_obj *o;
  int fd;
  ldr_os_get get;
} fetch_file;

static td_code download(const char *url, const ldr_os_backend *be, const char *bucket,
                        const char *vprefix, ldr_obj *o, int no, const char *tmp, td_err *err) {
  fetch_file *ff = calloc((size_t)no + 1, sizeof *ff);
  int nparts = 0, nf = 0;
  for (int i = 0; i < no; i++) nparts += (int)((o[i].size + PART_BYTES - 1) / PART_BYTES);
  ldr_http_part *parts = calloc((size_t)nparts + 1, sizeof *parts);
  td_code rc = TD_OK;
  if (!ff || !parts) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  size_t vlen = strlen(vprefix);
  int np = 0;
  for (int i = 0; !rc && i < no; i++) {
    const char *rel = o[i].key + vlen;
    size_t rl = strlen(rel);
    if (rl && rel[rl - 1] == '/') continue; /* a "directory" marker */
    if (!safe_rel(rel)) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "%s: object name %s leaves its version", url,
                      o[i].key);
      break;
    }
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", tmp, rel);
    char *slash = strrchr(path, '/');
    *slash = 0;
    if (mkdirs(path)) {
      rc = td_err_set(err, td_code_from_errno(errno), "cache %s: %s", path, strerror(errno));
      break;
    }
    *slash = '/';
    fetch_file *f = &ff[nf++];
    f->o = &o[i];
    f->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0) {
      rc = td_err_set(err, td_code_from_errno(errno), "cache %s: %s", path, strerror(errno));
      break;
    }
    if ((rc = be->prepare_get(bucket, o[i].key, &f->get, err))) break;
    for (int64_t off = 0; off < o[i].size; off += PART_BYTES) {
      ldr_http_part *p = &parts[np++];
      p->req = (ldr_http_req){.url = f->get.url,
                              .headers = (const char *const *)f->get.headers,
                              .n_headers = f->get.n_headers,
                              .insecure = f->get.insecure};
      p->fd = f->fd;
      p->off = off;
      p->len = o[i].size - off < PART_BYTES ? o[i].size - off : PART_BYTES;
    }
  }
  if (!rc) rc = ldr_http_fetch(parts, np, PARALLEL, RETRIES, err);
  for (int i = 0; !rc && i < nf; i++) {
    struct stat st;
    if (fstat(ff[i].fd, &st) || st.st_size != ff[i].o->size)
      rc = td_err_set(err, TD_DATA_LOSS, "%s: %s has %lld bytes, the listing says %lld", url,
                      ff[i].o->key, (long long)st.st_size, (long long)ff[i].o->size);
    else if (ff[i].o->has_crc32c && file_crc32c(ff[i].fd, st.st_size) != ff[i].o->crc32c)
      rc = td_err_set(err, TD_DATA_LOSS, "%s: %s does not match its CRC32C", url, ff[i].o->key);
  }
  for (int i = 0; ff && i < nf; i++) {
    if (ff[i].fd >= 0 && close(ff[i].fd) && !rc)
      rc = td_err_set(err, td_code_from_errno(errno), "cache: %s", strerror(errno));
    ldr_os_get_free(&ff[i].get);
  }
  free(ff);
  free(parts);
  return rc;
}

td_code ldr_objstore_fetch(const char *version_url, const char *cache_dir, char **local_dir,
                           td_err *err) {
  const ldr_os_backend *be;
  char *bucket = NULL, *prefix = NULL;
  td_code rc = ldr_objstore_parse(version_url, &be, &bucket, &prefix, err);
  if (rc) return rc;
  char dir[4200], tmp[4300], vprefix[4200];
  cache_path(version_url, cache_dir, dir, sizeof dir);
  snprintf(tmp, sizeof tmp, "%s.partial", dir);
  snprintf(vprefix, sizeof vprefix, "%s/", prefix);
  ldr_obj *o = NULL;
  int no = 0;
  char parent[4200];
  snprintf(parent, sizeof parent, "%s", prefix);
  char *cut = strrchr(parent, '/');
  *(cut ? cut : parent) = 0;
  rc = list_dir(be, bucket, parent, prefix, &o, &no, err);
  if (!rc && !no) rc = td_err_set(err, TD_NOT_FOUND, "%s: the version is gone", version_url);
  if (!rc) {
    char **files = calloc((size_t)no, sizeof *files);
    if (!files) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    for (int i = 0; files && i < no; i++) files[i] = o[i].key + strlen(vprefix);
    if (files) rc = check_files(version_url, files, no, err);
    free(files);
  }
  if (!rc) {
    rm_tree(tmp);
    if (mkdirs(tmp))
      rc = td_err_set(err, td_code_from_errno(errno), "cache %s: %s", tmp, strerror(errno));
  }
  if (!rc) rc = download(version_url, be, bucket, vprefix, o, no, tmp, err);
  if (!rc) rc = check_checkpoint(tmp, err);
  if (!rc) {
    rm_tree(dir); /* a copy left by an earlier run */
    if (rename(tmp, dir))
      rc = td_err_set(err, td_code_from_errno(errno), "cache %s: %s", dir, strerror(errno));
  }
  if (rc) rm_tree(tmp);
  if (!rc && !(*local_dir = strdup(dir))) {
    rm_tree(dir);
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  ldr_obj_free(o, no);
  free(bucket);
  free(prefix);
  return rc;
}
