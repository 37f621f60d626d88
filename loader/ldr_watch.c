/* Handles: one poll timer, one config timer, and a list of fs_event
 * watches, each freed by its own close callback; the watch itself is freed
 * by the last close. */
#include "ldr_watch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cfg_model_config.h"
#include "ldr_objstore.h"
#include "td_log.h"

#define MAX_CONFIG_BYTES ((size_t)64 << 20)
#define REARM_MS 100

typedef struct fs_watch {
  uv_fs_event_t h;
  struct ldr_watch *w;
  char *path;
  ino_t ino;
  dev_t dev;
  bool dead;
  struct fs_watch *next;
} fs_watch;

struct ldr_watch {
  uv_loop_t *loop;
  ldr_manager *m;
  ldr_watch_options opt;
  char *config_path;
  char *config_text; /* the file's contents last applied or rejected */
  size_t config_len;
  uv_timer_t poll, config_timer, rearm;
  bool poll_on, config_on, rearm_on, rearm_running;
  int open_handles;
  bool stopping;
  fs_watch *watches;
};

static uint64_t ms_of(double seconds) {
  double ms = seconds * 1000.0;
  return ms < 1 ? 1 : (uint64_t)(ms + 0.5);
}

static void maybe_free(ldr_watch *w) {
  if (!w->stopping || w->open_handles) return;
  free(w->config_path);
  free(w->config_text);
  free(w);
}

static void on_handle_closed(uv_handle_t *h) {
  ldr_watch *w = h->data;
  w->open_handles--;
  maybe_free(w);
}

static void on_watch_closed(uv_handle_t *h) {
  fs_watch *fw = (fs_watch *)h;
  ldr_watch *w = fw->w;
  free(fw->path);
  free(fw);
  w->open_handles--;
  maybe_free(w);
}

static void start_rearm(ldr_watch *w);

static void on_fs_event(uv_fs_event_t *h, const char *filename, int events, int status) {
  fs_watch *fw = (fs_watch *)h;
  /* The watched directory itself went away (its own name is reported, or
   * an error): this watch is dead; it is re-armed as soon as the
   * directory exists again. */
  const char *base = strrchr(fw->path, '/');
  base = base ? base + 1 : fw->path;
  if (status < 0 || (filename && *base && !strcmp(filename, base))) {
    fw->dead = true;
    start_rearm(fw->w);
  }
  ldr_manager_request_scan(fw->w->m);
}

/* --- base-path watches ---------------------------------------------------- */

static void close_watch(fs_watch *fw) {
  uv_fs_event_stop(&fw->h);
  uv_close((uv_handle_t *)&fw->h, on_watch_closed);
}

static bool arm(ldr_watch *w, const char *path) {
  struct stat st;
  if (stat(path, &st) || !S_ISDIR(st.st_mode)) return false; /* not there (yet) */
  fs_watch *fw = calloc(1, sizeof *fw);
  if (!fw || !(fw->path = strdup(path))) {
    free(fw);
    return false;
  }
  fw->w = w;
  fw->ino = st.st_ino;
  fw->dev = st.st_dev;
  if (uv_fs_event_init(w->loop, &fw->h)) {
    free(fw->path);
    free(fw);
    return false;
  }
  w->open_handles++;
  int rc = uv_fs_event_start(&fw->h, on_fs_event, path, 0);
  if (rc) {
    td_log_warn("cannot watch %s for changes (%s); polling only", path, uv_strerror(rc));
    uv_close((uv_handle_t *)&fw->h, on_watch_closed);
    return true; /* inotify unavailable here: nothing to retry */
  }
  fw->next = w->watches;
  w->watches = fw;
  return true;
}

/* Returns true when every configured base path has a live watch. */
static bool resync_watches(ldr_watch *w) {
  char **paths = NULL;
  int n = ldr_manager_base_paths(w->m, &paths);
  fs_watch **pp = &w->watches;
  while (*pp) {
    fs_watch *fw = *pp;
    bool wanted = false;
    for (int i = 0; i < n && !wanted; i++) wanted = paths[i] && !strcmp(paths[i], fw->path);
    struct stat st;
    bool same = !stat(fw->path, &st) && st.st_ino == fw->ino && st.st_dev == fw->dev;
    if (wanted && same && !fw->dead) {
      pp = &fw->next;
      continue;
    }
    *pp = fw->next;
    close_watch(fw);
  }
  bool all = true;
  for (int i = 0; i < n; i++) {
    bool have = false;
    for (fs_watch *fw = w->watches; fw && !have; fw = fw->next) have = !strcmp(fw->path, paths[i]);
    if (!have) have = ldr_objstore_is_remote(paths[i]) || arm(w, paths[i]); /* polled only */
    all &= have;
    free(paths[i]);
  }
  free(paths);
  return all;
}

/* While a watched directory is gone, look for it every REARM_MS rather
 * than only at the next poll, and rescan once it is back. */
static void on_rearm(uv_timer_t *t) {
  ldr_watch *w = t->data;
  if (resync_watches(w)) {
    uv_timer_stop(&w->rearm);
    w->rearm_running = false;
    ldr_manager_request_scan(w->m); /* what changed while nothing watched */
  }
}

static void start_rearm(ldr_watch *w) {
  if (!w->rearm_on || w->rearm_running || w->stopping) return;
  w->rearm_running = true;
  uv_timer_start(&w->rearm, on_rearm, REARM_MS, REARM_MS);
}

static void on_poll(uv_timer_t *t) {
  ldr_watch *w = t->data;
  ldr_manager_request_scan(w->m);
  resync_watches(w);
}

/* --- config file ------------------------------------------------------------ */

static td_code read_text(const char *path, char **text, size_t *len, td_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return td_err_set(err, td_code_from_errno(errno), "%s: cannot open (%s)", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) || st.st_size < 0 || (size_t)st.st_size > MAX_CONFIG_BYTES) {
    fclose(f);
    return td_err_set(err, TD_INVALID_ARGUMENT, "%s: unreadable or larger than 64 MiB", path);
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n + 1);
  if (!buf) {
    fclose(f);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  size_t got = fread(buf, 1, n, f);
  fclose(f);
  buf[got] = '\0';
  *text = buf;
  *len = got;
  return TD_OK;
}

static td_code reload(ldr_watch *w, bool force, td_err *err) {
  char *text = NULL;
  size_t len = 0;
  td_code rc = read_text(w->config_path, &text, &len, err);
  if (rc) {
    td_log_error("model config file: %s", err->msg);
    return rc;
  }
  if (!force && w->config_text && len == w->config_len && !memcmp(text, w->config_text, len)) {
    free(text);
    return TD_OK;
  }
  free(w->config_text);
  w->config_text = text;
  w->config_len = len;
  cfg_model_config c;
  rc = cfg_model_config_parse(text, len, &c, err);
  if (rc) {
    td_err_prefix(err, "%s", w->config_path);
    td_log_error("%s; keeping the models configured before", err->msg);
    return rc;
  }
  td_log_info("Reloading model config from %s (%d model(s))", w->config_path, c.n_models);
  rc = ldr_manager_set_config(w->m, &c, NULL, err);
  cfg_model_config_free(&c);
  if (rc) td_log_error("%s", err->msg);
  resync_watches(w);
  return rc;
}

static void on_config_poll(uv_timer_t *t) {
  ldr_watch *w = t->data;
  td_err err;
  reload(w, false, &err);
}

td_code ldr_watch_reload_config(ldr_watch *w, td_err *err) {
  if (!w->config_path)
    return td_err_set(err, TD_FAILED_PRECONDITION, "no --model_config_file to reread");
  return reload(w, true, err);
}

/* --- lifetime ------------------------------------------------------------------ */

td_code ldr_watch_start(uv_loop_t *loop, ldr_manager *m, const ldr_watch_options *opt,
                        ldr_watch **out, td_err *err) {
  ldr_watch *w = calloc(1, sizeof *w);
  if (!w) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  w->loop = loop;
  w->m = m;
  w->opt = *opt;
  if (opt->config_path && *opt->config_path) {
    if (!(w->config_path = strdup(opt->config_path))) {
      free(w);
      return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    }
    td_err rerr;
    if (read_text(w->config_path, &w->config_text, &w->config_len, &rerr))
      td_log_warn("model config file: %s", rerr.msg);
  }
  w->opt.config_path = w->config_path;
  if (opt->poll_seconds > 0) {
    uv_timer_init(loop, &w->poll);
    w->poll.data = w;
    w->open_handles++;
    w->poll_on = true;
    uint64_t ms = ms_of(opt->poll_seconds);
    uv_timer_start(&w->poll, on_poll, ms, ms);
    uv_timer_init(loop, &w->rearm);
    w->rearm.data = w;
    w->open_handles++;
    w->rearm_on = true;
    resync_watches(w);
  }
  if (w->config_path && opt->config_poll_seconds > 0) {
    uv_timer_init(loop, &w->config_timer);
    w->config_timer.data = w;
    w->open_handles++;
    w->config_on = true;
    uint64_t ms = ms_of(opt->config_poll_seconds);
    uv_timer_start(&w->config_timer, on_config_poll, ms, ms);
  }
  *out = w;
  return TD_OK;
}

void ldr_watch_stop(ldr_watch *w) {
  if (!w) return;
  w->stopping = true;
  while (w->watches) {
    fs_watch *fw = w->watches;
    w->watches = fw->next;
    close_watch(fw);
  }
  if (w->poll_on) {
    uv_timer_stop(&w->poll);
    uv_close((uv_handle_t *)&w->poll, on_handle_closed);
  }
  if (w->rearm_on) {
    uv_timer_stop(&w->rearm);
    uv_close((uv_handle_t *)&w->rearm, on_handle_closed);
  }
  if (w->config_on) {
    uv_timer_stop(&w->config_timer);
    uv_close((uv_handle_t *)&w->config_timer, on_handle_closed);
  }
  maybe_free(w);
}
