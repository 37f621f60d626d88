/* ldr_registry: the models a server knows, their versions and states, and
 * the loaded servables requests run on.
 *
 * Each model has a name and a base path. Loading a version moves it through
 * TF Serving's states (START, LOADING, AVAILABLE, END); a failed load ends
 * in END with its error kept for the status API, and never disturbs a
 * version already serving. Requests resolve a model spec (name + version,
 * or the latest AVAILABLE version) to a servable and hold a reference to it
 * until they are done, so an unload never pulls a model from under a
 * running request.
 *
 * The registry is the serving map only: which versions exist in which
 * state, which servable each AVAILABLE version runs on, and each model's
 * labels. Deciding what to load and unload (version policies, retries,
 * config reloads) is ldr_manager's job, through the "lifecycle" calls
 * below; ldr_registry_load_latest is a one-shot shortcut that bypasses it.
 *
 * Thread-safe: one mutex guards the tables; loads run outside it, so
 * requests keep being served while a version loads. */
#ifndef LDR_REGISTRY_H
#define LDR_REGISTRY_H

#include <stdbool.h>
#include <stdint.h>

#include "ldr_servable.h"
#include "td_status.h"

typedef enum {
  LDR_STATE_UNKNOWN = 0,
  LDR_STATE_START = 10,
  LDR_STATE_LOADING = 20,
  LDR_STATE_AVAILABLE = 30,
  LDR_STATE_UNLOADING = 40,
  LDR_STATE_END = 50,
} ldr_state;

typedef struct ldr_version_status {
  int64_t version;
  ldr_state state;
  td_err status; /* code TD_OK and empty message unless the load failed */
} ldr_version_status;

typedef struct ldr_registry ldr_registry;

/* tags: the MetaGraph tags to load ("serve"). */
td_code ldr_registry_create(const char *tags, ldr_registry **out, td_err *err);
void ldr_registry_destroy(ldr_registry *r);

td_code ldr_registry_add_model(ldr_registry *r, const char *name, const char *base_path,
                               td_err *err);
/* Scans the model's base path and loads its highest version, blocking
 * until it is AVAILABLE or has failed. NOT_FOUND when there is no version
 * directory (logged with TF Serving's hint). */
td_code ldr_registry_load_latest(ldr_registry *r, const char *name, td_err *err);

/* version < 0: the latest AVAILABLE version. On success *out holds a new
 * reference (release with ldr_servable_unref). Failures carry TF Serving's
 * "Servable not found for request: Latest(m)" / "Specific(m, v)" messages:
 * NOT_FOUND, except UNAVAILABLE for the latest version of a configured model
 * that has none available (loading, or its loads failed). */
td_code ldr_registry_acquire(ldr_registry *r, const char *name, int64_t version,
                             ldr_servable **out, td_err *err);

/* Snapshot of a model's versions (all when version < 0), sorted by version;
 * the caller frees *out. NOT_FOUND for an unknown model or version. */
td_code ldr_registry_status(ldr_registry *r, const char *name, int64_t version,
                            ldr_version_status **out, int *n, td_err *err);

/* Names of every configured model, sorted; the caller frees each name and
 * the array. Returns the count (0 with *names NULL when none). */
int ldr_registry_model_names(ldr_registry *r, char ***names);

/* True when every configured model has an AVAILABLE version (readiness). */
bool ldr_registry_ready(ldr_registry *r);
/* True when model `name` has an AVAILABLE version (false for a model the
 * registry does not know). */
bool ldr_registry_available(ldr_registry *r, const char *name);

/* Resolves a version label of a model. INVALID_ARGUMENT "Unrecognized
 * servable version label: L" when the model has no such label. */
td_code ldr_registry_resolve_label(ldr_registry *r, const char *name, const char *label,
                                   int64_t *version, td_err *err);

const char *ldr_state_name(ldr_state s);

/* --- lifecycle (called by ldr_manager) -------------------------------------
 * A version entry is created by the first call that names it. */

/* Records a version's state and status (status NULL: OK). Never used for
 * AVAILABLE (see publish); a version holding a servable keeps it. */
td_code ldr_registry_set_state(ldr_registry *r, const char *name, int64_t version,
                               ldr_state state, const td_err *status, td_err *err);
/* Makes `sv` the AVAILABLE servable of its version (ldr_servable_version),
 * taking over the caller's reference, also on failure (then it is dropped).
 * From now on acquire may return it. */
td_code ldr_registry_publish(ldr_registry *r, const char *name, ldr_servable *sv, td_err *err);
/* Takes an AVAILABLE version out of service: acquire no longer returns it,
 * its state becomes UNLOADING, and the registry's reference is handed to
 * the caller (who drops it once in-flight requests are done). NULL when the
 * version holds no servable. */
ldr_servable *ldr_registry_retire(ldr_registry *r, const char *name, int64_t version);
/* Records why the model's base path could not be listed (NULL: it can be
 * now). While the model has no version entry, the status call's NOT_FOUND
 * message carries it: "Could not find any versions of model M: <why>". */
void ldr_registry_set_source_error(ldr_registry *r, const char *name, const char *msg);
/* Drops a version's entry (it is no longer reported), releasing any
 * servable it still holds. */
void ldr_registry_forget(ldr_registry *r, const char *name, int64_t version);
/* Removes a model with its entries and labels (servables still held by
 * requests live on until released). NOT_FOUND when it is not configured. */
td_code ldr_registry_remove_model(ldr_registry *r, const char *name, td_err *err);

/* TF Serving's label rule: a label may only point at an AVAILABLE version,
 * FAILED_PRECONDITION "Request to assign label to version V of model M,
 * which is not currently available for inference" otherwise. With
 * allow_unavailable (--allow_version_labels_for_unavailable_models) the
 * check is skipped for a label that is new or keeps its version; moving an
 * existing label to a version that is not AVAILABLE is still refused. */
td_code ldr_registry_check_label(ldr_registry *r, const char *name, const char *label,
                                 int64_t version, bool allow_unavailable, td_err *err);
typedef struct ldr_label {
  const char *label;
  int64_t version;
} ldr_label;
/* Replaces a model's label map (no checks; see check_label). */
td_code ldr_registry_set_labels(ldr_registry *r, const char *name, const ldr_label *labels, int n,
                                td_err *err);

/* Shutdown: from now on acquire answers UNAVAILABLE ("Server is shutting
 * down"); references already handed out stay valid. */
void ldr_registry_close(ldr_registry *r);

#endif
