#include "td_log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static atomic_int min_level = TD_LOG_INFO;

void td_log_set_level(td_log_level level) { atomic_store(&min_level, (int)level); }

void td_log(td_log_level level, const char *fmt, ...) {
  if ((int)level < atomic_load(&min_level)) return;
  static const char tag[] = "DIWE";
  char line[2048];
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  int n = snprintf(line, sizeof line, "%c%02d%02d %02d:%02d:%02d.%06ld tensord] ", tag[level],
                   tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                   ts.tv_nsec / 1000);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
  va_end(ap);
  fprintf(stderr, "%s\n", line);
}
