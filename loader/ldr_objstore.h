/* ldr_objstore: model base paths in object storage (s3://bucket/prefix,
 * gs://bucket/prefix), seen by the manager as it sees directories.
 *
 * ldr_objstore_scan lists the base path's prefix in one paged listing per
 * call (every key under it, with sizes) and groups the keys by their first
 * path component: a component whose whole name is a version number is a
 * version, as for local paths. A version is complete when saved_model.pb
 * (or .pbtxt) is listed and, when any variables/ file is, the checkpoint
 * index and every data shard variables.data-SSSSS-of-NNNNN for S in 0..N-1;
 * otherwise its status says what is missing, and the version is checked
 * again at the next scan.
 *
 * ldr_objstore_fetch downloads one version into the cache directory: it
 * lists the base path again (the same request as a scan) for the version's
 * objects, downloads every object (large ones in 8 MiB
 * parts, up to 8 transfers at once, each retried with backoff) into
 * <cache>/<name>.partial, checks each file's size against the listing (and
 * its CRC32C where the store lists one: GCS), checks the checkpoint (index
 * block CRCs, every tensor's CRC, every shard present), and only then
 * renames the directory to <cache>/<name> and returns that path for
 * ldr_servable_load. Nothing is left under <name> on failure, so a failed
 * download never touches what is loaded. <name> is the version number
 * followed by a hash of the version's URL, so that models and versions
 * never share a directory. One process per cache directory. Requests are
 * signed when the download starts: a part that starts more than 15 minutes
 * later is refused by S3 (the signature's validity) and the load is retried
 * whole.
 *
 * Backends (ldr_s3, ldr_gcs) list, and prepare authenticated GETs; this
 * module does the rest. Credentials are found by the backends (see their
 * headers) and never appear in logs, errors or statuses.
 *
 * Threads: every call is thread-safe; scans run on the manager thread,
 * fetches on load threads. Failure: a status naming the URL and the cause
 * (NOT_FOUND for a missing bucket, PERMISSION_DENIED / UNAUTHENTICATED for
 * refused credentials, UNAVAILABLE when the store cannot be reached; a
 * cache directory that cannot be written gives its errno's code,
 * td_code_from_errno). */
#ifndef LDR_OBJSTORE_H
#define LDR_OBJSTORE_H

#include <stdbool.h>
#include <stdint.h>

#include "td_status.h"

/* One listed object. */
typedef struct ldr_obj {
  char *key;
  int64_t size;
  bool has_crc32c;
  uint32_t crc32c; /* of the whole object, unmasked */
} ldr_obj;

void ldr_obj_free(ldr_obj *o, int n);

/* A GET prepared by a backend: URL and headers (which may hold a token:
 * never log them). */
typedef struct ldr_os_get {
  char *url;
  char *headers[8];
  int n_headers;
  bool insecure;
} ldr_os_get;

void ldr_os_get_free(ldr_os_get *g);

/* The interface a backend implements. `url_prefix` is "s3://bucket" or
 * "gs://bucket" for messages. */
typedef struct ldr_os_backend {
  const char *scheme; /* "s3", "gs" */
  /* Every object whose key starts with prefix, all pages. */
  td_code (*list)(const char *bucket, const char *prefix, ldr_obj **out, int *n, td_err *err);
  td_code (*prepare_get)(const char *bucket, const char *key, ldr_os_get *out, td_err *err);
} ldr_os_backend;

/* True for "s3://" and "gs://" paths. */
bool ldr_objstore_is_remote(const char *path);

typedef struct ldr_os_version {
  int64_t version;
  char *path; /* base URL + "/" + the name as listed */
  td_code rc; /* TD_OK: complete */
  td_err err; /* why not, when rc != TD_OK */
} ldr_os_version;

/* Sorted by version; duplicates ("3" and "003") keep the later name, as
 * ldr_scan does. An empty listing is TD_OK with *n = 0. */
td_code ldr_objstore_scan(const char *base_url, ldr_os_version **out, int *n, td_err *err);
void ldr_objstore_scan_free(ldr_os_version *v, int n);

/* cache_dir NULL or "": ${TMPDIR:-/tmp}/tensord-cache-<pid>, made on first
 * use. *local_dir (caller frees) is the verified copy. */
td_code ldr_objstore_fetch(const char *version_url, const char *cache_dir, char **local_dir,
                           td_err *err);
/* Removes the cache copy of version_url (after its unload). */
void ldr_objstore_evict(const char *version_url, const char *cache_dir);

/* Splits "s3://bucket/a/b" into its backend, bucket and key prefix "a/b"
 * (no trailing slash; "" for the bucket's root). The caller frees both
 * strings. INVALID_ARGUMENT for a bad URL. */
td_code ldr_objstore_parse(const char *url, const ldr_os_backend **be, char **bucket, char **prefix,
                           td_err *err);

#endif
