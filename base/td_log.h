/* td_log: one line per event on stderr, with a UTC timestamp and a level.
 * Thread-safe (each line is written with a single fprintf on an unbuffered
 * stream).
 *
 * Verbosity follows TensorFlow's environment variables, read once by
 * td_log_init_from_env:
 *   TF_CPP_MIN_LOG_LEVEL   0 (default) all of INFO, WARNING, ERROR; 1 from
 *                          WARNING; 2 ERROR only; 3 nothing
 *   TF_CPP_MAX_VLOG_LEVEL  verbose lines up to this level (default 0: none);
 *                          level 1 is one line per Predict, Classify or
 *                          Regress request (model, API, transport, status,
 *                          microseconds)
 *   TF_CPP_VMODULE         per-module verbose levels, "srv_rest=1,ldr_*=2":
 *                          a module is a source file's name without its
 *                          extension; '*' and '?' are globs
 * Verbose lines are written at INFO (and so hidden by
 * TF_CPP_MIN_LOG_LEVEL >= 1). td_vlog costs one relaxed load when no
 * verbose level is set.
 *
 * td_log_set_json(true) (--tensord_log_json) writes each line as one JSON
 * object for log collectors: {"time": RFC 3339 UTC with microseconds,
 * "level": "INFO"|"WARNING"|"ERROR"|"DEBUG", "message": ..., and, for lines
 * about a model version (td_logm), "model" and "version"}. */
#ifndef TD_LOG_H
#define TD_LOG_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { TD_LOG_DEBUG, TD_LOG_INFO, TD_LOG_WARN, TD_LOG_ERROR } td_log_level;

void td_log_set_level(td_log_level level);
void td_log_set_json(bool on);
/* Reads TF_CPP_MIN_LOG_LEVEL, TF_CPP_MAX_VLOG_LEVEL and TF_CPP_VMODULE;
 * call once from main before other threads start. */
void td_log_init_from_env(void);
void td_log(td_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A line about one model version (version < 0: the model only). */
void td_logm(td_log_level level, const char *model, int64_t version, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* True when verbose lines of `level` from source file `file` are wanted. */
bool td_vlog_on(int level, const char *file);
extern int td_vlog_max; /* the largest level any module has; 0: none */

#define td_log_info(...) td_log(TD_LOG_INFO, __VA_ARGS__)
#define td_log_warn(...) td_log(TD_LOG_WARN, __VA_ARGS__)
#define td_log_error(...) td_log(TD_LOG_ERROR, __VA_ARGS__)
#define td_log_debug(...) td_log(TD_LOG_DEBUG, __VA_ARGS__)
#define td_vlog(level, ...)                                           \
  do {                                                                \
    if (__atomic_load_n(&td_vlog_max, __ATOMIC_RELAXED) >= (level) && \
        td_vlog_on((level), __FILE__))                                \
      td_log(TD_LOG_INFO, __VA_ARGS__);                               \
  } while (0)

#endif
