/* ldr_scan: lists the version directories under a model's base path.
 *
 * A child is a version when its whole name parses as a non-negative int64
 * ("00000123" is 123); other names are skipped. An all-digit name that is
 * still skipped (a number past int64, a link loop, a plain file) is logged
 * once per path for the life of the process. When two names give the same
 * number the later one in the listing wins, with a warning, as in TF Serving.
 * File-system reads and that log; thread-safe. */
#ifndef LDR_SCAN_H
#define LDR_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "td_status.h"

typedef struct ldr_version_dir {
  int64_t version;
  char *path; /* base_path/<name as written> */
} ldr_version_dir;

/* Sorted by version, ascending. NOT_FOUND when base_path cannot be read. */
td_code ldr_scan_versions(const char *base_path, ldr_version_dir **out, int *n, td_err *err);
void ldr_scan_free(ldr_version_dir *v, int n);
/* Parses a version directory name; false when it is not a version. */
bool ldr_scan_parse_version(const char *name, int64_t *version);

/* Whether a version directory is complete enough to load: saved_model.pb
 * parses as a SavedModel, and when the MetaGraph has a saver (it has
 * variables) or variables/variables.index exists, the checkpoint's index
 * verifies and every data shard it names is present. A directory still
 * being copied fails here and is retried later instead of being loaded
 * half-written. The error names the file and the problem (NOT_FOUND,
 * DATA_LOSS, PERMISSION_DENIED, ...). A saved_model.pb whose messages nest
 * past TD_PB_MAX_DEPTH counts as complete, so that its load fails and
 * reports it as a failed version.
 * Reads the files; thread-safe. */
td_code ldr_scan_check_complete(const char *version_dir, td_err *err);

#endif
