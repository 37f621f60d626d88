/* td_log: one line per event on stderr, with a UTC timestamp and a level.
 * Thread-safe (each line is written with a single fprintf on an unbuffered
 * stream). The level can be raised with td_log_set_level. */
#ifndef TD_LOG_H
#define TD_LOG_H

typedef enum { TD_LOG_DEBUG, TD_LOG_INFO, TD_LOG_WARN, TD_LOG_ERROR } td_log_level;

void td_log_set_level(td_log_level level);
void td_log(td_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define td_log_info(...) td_log(TD_LOG_INFO, __VA_ARGS__)
#define td_log_warn(...) td_log(TD_LOG_WARN, __VA_ARGS__)
#define td_log_error(...) td_log(TD_LOG_ERROR, __VA_ARGS__)
#define td_log_debug(...) td_log(TD_LOG_DEBUG, __VA_ARGS__)

#endif
