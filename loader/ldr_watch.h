/* ldr_watch: the file-system side of the model lifecycle, on a libuv loop.
 *
 * Base paths: a timer asks the manager for a rescan every poll_seconds
 * (--file_system_poll_wait_seconds; the scan is the source of truth). Each
 * configured base path also gets an inotify watch (uv_fs_event) whose
 * events only trigger an early rescan: they are hints, never applied as
 * deltas, because they are not recursive, coalesce, and stop when the
 * watched directory is deleted. A watch that reports its own directory
 * gone is re-armed as soon as the directory exists again (checked every
 * 100 ms), followed by a rescan; on each tick the watches are also re-armed
 * for paths deleted and re-created unseen (another inode) or added by the
 * config, and closed for paths no longer configured. poll_seconds <= 0: no polling and
 * no inotify (TF Serving's "0 = poll once"; the manager scans on every
 * config change).
 *
 * Config file: with a config_path, the file is reread every
 * config_poll_seconds (--model_config_file_poll_wait_seconds; 0: never)
 * and on ldr_watch_reload_config (SIGHUP). A changed file that parses
 * replaces the manager's config (models added, removed, policies and labels
 * changed); one that does not is logged with its line and column and the
 * config in force stays.
 *
 * Threads: everything runs on the loop's thread; create, reload and stop
 * from it. ldr_watch_stop closes the handles: run the loop afterwards
 * (uv_run) to let the closes finish; the watch frees itself then. */
#ifndef LDR_WATCH_H
#define LDR_WATCH_H

#include <uv.h>

#include "ldr_manager.h"
#include "td_status.h"

typedef struct ldr_watch_options {
  double poll_seconds;        /* base paths; <= 0: off */
  const char *config_path;    /* NULL or "": no config file */
  double config_poll_seconds; /* <= 0: reread only on ldr_watch_reload_config */
} ldr_watch_options;

typedef struct ldr_watch ldr_watch;

/* The manager must outlive the watch. The caller has already given the
 * manager its first config; the watch reads the config file once at start
 * only to know what is in force, and applies it again only once it
 * changes. */
td_code ldr_watch_start(uv_loop_t *loop, ldr_manager *m, const ldr_watch_options *opt,
                        ldr_watch **out, td_err *err);
/* Rereads the config file now and applies it even when unchanged (which
 * also rescans every base path). INVALID_ARGUMENT with the parse error when
 * it does not parse; FAILED_PRECONDITION when there is no config file. */
td_code ldr_watch_reload_config(ldr_watch *w, td_err *err);
void ldr_watch_stop(ldr_watch *w);

#endif
