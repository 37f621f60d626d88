/* ldr_manager: decides which model versions to load and unload, and does it
 * without dropping a request (TF Serving's AspiredVersionsManager with its
 * AvailabilityPreservingPolicy, FileSystemStoragePathSource and ServerCore
 * label rules, in one place).
 *
 * Input: a cfg_model_config (models, base paths, version policies, labels)
 * and scans of the base paths. A scan lists the numeric version directories
 * and checks each new one for completeness (ldr_scan_check_complete); a
 * directory still being copied is reported (state START with the reason as
 * its status) and checked again on the next scan, never loaded half-written.
 * The version policy picks the aspired versions among the complete ones:
 * latest {num_versions}, all, or specific {versions}.
 *
 * Output, into the ldr_registry: aspired versions are loaded on the load
 * threads (off the request path), warmed up (ldr_warmup) and only then
 * published AVAILABLE, so Latest requests switch to a new version once it
 * can answer. A version that leaves the policy or the disk is unloaded once
 * an aspired version is AVAILABLE (or none is aspired any more): it is
 * retired from the registry (state UNLOADING), requests already running on
 * it finish on it (they hold references), and when the last one is done it
 * is freed, the heap is trimmed so the memory goes back to the system, and
 * its state becomes END. A failed load is retried max_num_load_retries
 * times, load_retry_interval_micros apart (state LOADING with the error as
 * status meanwhile), then ends in END with the error; the version serving
 * before keeps serving; nothing stops the process. A base path that cannot
 * be read is logged, its reason is kept for the status API
 * (ldr_registry_set_source_error), and the model's versions stay as they
 * are (TF Serving emits nothing then); an empty one logs TF Serving's "No versions
 * of servable M found under base path P..." once and unloads nothing new.
 *
 * Base paths in object storage (s3://, gs://; ldr_objstore) are scanned by
 * listing their prefix; a version's load first downloads it into the cache
 * directory (a failed download is a failed load, retried like one, except
 * that a download whose listing finds files missing - an upload still under
 * way - puts the version back to waiting for the next scan, state START with
 * what is missing), and its cache copy is removed when it is unloaded or its
 * load fails.
 *
 * Config changes (set_config) add models, remove models (all their versions
 * unload, then the model disappears from the registry) and change policies.
 * Labels are applied when the config has settled (see ldr_manager_wait),
 * all or nothing, with TF Serving's rule (ldr_registry_check_label) and
 * --allow_version_labels_for_unavailable_models. TF Serving checks labels
 * before loading, so labels in a config read at start-up can never pass
 * there (tensorflow/serving#1608); checking after the config's loads is
 * what makes them usable.
 *
 * Threads: one manager thread runs scans and decisions; num_load_threads
 * workers load. Each load runs on a short-lived thread; while any version
 * (of any model) serves when the load starts, that thread runs under
 * SCHED_IDLE (nice +10 where that is refused), so that on a busy machine a
 * load takes longer rather than slowing the requests being served; with
 * nothing serving yet it keeps normal priority. The worker then trims the
 * heap (malloc_trim), at normal priority, so the pages the load freed go
 * back to the system; unloaded versions
 * are freed on a short-lived thread of normal priority (it trims the heap,
 * which locks the arenas request threads use). Every public function is
 * thread-safe. The manager holds
 * its mutex while it updates the registry, never the other way round. */
#ifndef LDR_MANAGER_H
#define LDR_MANAGER_H

#include <stdbool.h>
#include <stdint.h>

#include "cfg_batching.h"
#include "cfg_model_config.h"

#define LDR_BATCHING_FILE "batching_params.pbtxt"
#include "ldr_registry.h"
#include "td_status.h"

typedef struct ldr_manager_options {
  const char *tags;                   /* MetaGraph tags ("serve") */
  int num_load_threads;               /* 0 is taken as 1 */
  int max_num_load_retries;           /* retries after the first failure */
  int64_t load_retry_interval_micros; /* negative: retry at once */
  bool enable_warmup;
  int warmup_iterations;             /* per record; 0 is taken as 1 */
  bool allow_labels_for_unavailable; /* --allow_version_labels_for_unavailable_models */
  /* --enable_per_model_batching_parameters: a version directory's
   * batching_params.pbtxt (text BatchingParameters) is read at its load (a
   * malformed one fails the load) and, for a model whose config entry has
   * no batching_parameters, the newest loaded version's file answers
   * ldr_manager_model_batching. cpus: for the parameters' defaults. */
  bool per_model_batching;
  int cpus;
  /* --flush_filesystem_caches: after a version loads (and warms up), the
   * kernel is told the page cache of its files may go
   * (POSIX_FADV_DONTNEED): the bytes now live in the engine's own memory,
   * and keeping a second copy cached only crowds out other pages. */
  bool flush_caches;
  /* Optional: told of every config ldr_manager_set_config accepts (after
   * the swap, on the calling thread, without the manager's lock), so a
   * module above can follow per-model settings such as request logging. */
  void (*on_config)(void *ctx, const cfg_model_config *c);
  void *on_config_ctx;
  const char *object_cache_dir; /* s3:// and gs:// versions; NULL: see ldr_objstore.h */
} ldr_manager_options;

typedef struct ldr_manager ldr_manager;

/* The registry must outlive the manager. Starts the threads. */
td_code ldr_manager_create(ldr_registry *r, const ldr_manager_options *opt, ldr_manager **out,
                           td_err *err);
/* Unloads everything (waiting for requests that hold versions), joins the
 * threads and frees the manager. */
void ldr_manager_destroy(ldr_manager *m);

/* Replaces the served models with a copy of `c` and schedules a scan;
 * returns at once. *ticket (optional) names this change for
 * ldr_manager_wait. */
td_code ldr_manager_set_config(ldr_manager *m, const cfg_model_config *c, uint64_t *ticket,
                               td_err *err);
/* A deep copy of the current config (what the last set_config gave), for
 * callers that change one model and set the result (the v2 repository
 * extension). Free it with cfg_model_config_free. */
td_code ldr_manager_get_config(ldr_manager *m, cfg_model_config *out, td_err *err);
/* Asks for a rescan of every base path; requests made while a scan runs
 * coalesce into one more scan. Returns a ticket for ldr_manager_wait. */
uint64_t ldr_manager_request_scan(ldr_manager *m);
/* Waits until the change named by `ticket` has settled: every configured
 * model was scanned after it, and every aspired version found then has had
 * its first load attempt (AVAILABLE, or failed; retries go on afterwards).
 * Returns the labels' verdict (FAILED_PRECONDITION, see
 * ldr_registry_check_label) or, for models the change added that have no
 * AVAILABLE version, UNKNOWN "N model(s) did not become available: {...}"
 * as TF Serving words it; TD_OK otherwise. timeout_ms < 0 waits for ever;
 * DEADLINE_EXCEEDED on timeout, CANCELLED when the manager stops. */
td_code ldr_manager_wait(ldr_manager *m, uint64_t ticket, int64_t timeout_ms, td_err *err);

/* The configured base paths (for the watcher); the caller frees each
 * string and the array. Returns the count. */
int ldr_manager_base_paths(ldr_manager *m, char ***paths);

/* The current config's per-model batching for `name` (tensord's
 * ModelConfig extensions): true with *out set when the model has its own
 * parameters; *queue_timeout_micros is set either way (0: none). */
bool ldr_manager_model_batching(ldr_manager *m, const char *name, cfg_batching *out,
                                int64_t *queue_timeout_micros);

/* Shutdown, step one: the registry stops handing out versions
 * (ldr_registry_close), queued loads are dropped, and the call waits up to
 * grace_seconds for running loads and for requests in flight to finish,
 * then unloads every version. Returns false when something was still
 * running at the deadline (a load cannot be interrupted): the caller should
 * then exit without destroying the manager. */
bool ldr_manager_shutdown(ldr_manager *m, double grace_seconds);

#endif
