/* srv_v2repo: the v2 model repository extension (index, load, unload) on
 * top of the lifecycle manager.
 *
 * The repository is the set of models the server knows: those in the
 * serving config (from --model_config_file, --model_name or a config
 * reload) and those a v2 unload took out of it (remembered with their whole
 * config entry: base path, version policy, labels, batching).
 *   load M     M in the config: a rescan of its base path, then waits as a
 *              config change does. M remembered: its entry goes back into
 *              the config. M unknown: with a "base_path" parameter (tensord's
 *              own), a new entry with the default policy (latest 1); else
 *              NOT_FOUND. Returns once the change has settled: OK when M has
 *              an AVAILABLE version, else the manager's verdict (UNKNOWN
 *              "1 model(s) did not become available: {M}"), as
 *              HandleReloadConfigRequest answers; a model this load added
 *              then leaves the config again (remembered, as by unload), so
 *              a failed load never leaves the server unready.
 *   unload M   M leaves the config (TF Serving's rules: its versions unload
 *              once requests on them are done, other models are not
 *              touched) and is remembered; returns once its versions are
 *              gone from the registry (at most 30 s: a request holding a
 *              version longer delays the freeing, not the answer).
 *              Unloading a remembered model is OK; an unknown one NOT_FOUND.
 *   index      every known model, one entry per version the registry
 *              reports (state READY for AVAILABLE, LOADING for START and
 *              LOADING, UNLOADING, UNAVAILABLE for END with the load error as
 *              reason), one version-less UNAVAILABLE entry ("unloaded") per
 *              remembered model; `ready_only` keeps the READY entries.
 *              Sorted by name, then version.
 * Edits are serialised by the repository's own mutex; a concurrent
 * HandleReloadConfigRequest is not, and the last writer wins.
 *
 * Threads: load and unload block while models load: call them off I/O
 * loops. Everything is thread-safe. The manager and registry outlive the
 * repository. */
#ifndef SRV_V2REPO_H
#define SRV_V2REPO_H

#include <stdbool.h>
#include <stdint.h>

#include "ldr_manager.h"
#include "ldr_registry.h"
#include "td_status.h"

typedef struct srv_v2repo srv_v2repo;

typedef struct srv_v2repo_entry {
  char *name;
  bool has_version;
  int64_t version;
  const char *state; /* static */
  char *reason;      /* "" when none */
} srv_v2repo_entry;

td_code srv_v2repo_create(ldr_manager *m, ldr_registry *r, srv_v2repo **out, td_err *err);
void srv_v2repo_destroy(srv_v2repo *p);

/* base_path: NULL unless the request gave one. */
td_code srv_v2repo_load(srv_v2repo *p, const char *name, const char *base_path, td_err *err);
td_code srv_v2repo_unload(srv_v2repo *p, const char *name, td_err *err);
/* Returns the count; free with srv_v2repo_index_free. */
int srv_v2repo_index(srv_v2repo *p, bool ready_only, srv_v2repo_entry **out);
void srv_v2repo_index_free(srv_v2repo_entry *e, int n);

#endif
