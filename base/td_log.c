/* The vmodule list is parsed once at start-up (td_log_init_from_env) into a
 * fixed table that is only read afterwards. */
#include "td_log.h"

#include <fnmatch.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_VMODULES 32

static atomic_int min_level = TD_LOG_INFO;
static atomic_bool quiet; /* TF_CPP_MIN_LOG_LEVEL >= 3 */
static atomic_bool json;
int td_vlog_max;
static int vlog_global;
static struct {
  char pattern[64];
  int level;
} vmodules[MAX_VMODULES];
static int n_vmodules;

void td_log_set_level(td_log_level level) { atomic_store(&min_level, (int)level); }
void td_log_set_json(bool on) { atomic_store(&json, on); }

static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end;
  long n = strtol(v, &end, 10);
  return *end || n < 0 || n > 1000 ? dflt : (int)n;
}

void td_log_init_from_env(void) {
  int min = env_int("TF_CPP_MIN_LOG_LEVEL", 0);
  atomic_store(&min_level, min >= 2 ? TD_LOG_ERROR : min == 1 ? TD_LOG_WARN : TD_LOG_INFO);
  atomic_store(&quiet, min >= 3);
  vlog_global = env_int("TF_CPP_MAX_VLOG_LEVEL", 0);
  int max = vlog_global;
  const char *vm = getenv("TF_CPP_VMODULE");
  n_vmodules = 0;
  while (vm && *vm && n_vmodules < MAX_VMODULES) {
    const char *comma = strchr(vm, ',');
    size_t len = comma ? (size_t)(comma - vm) : strlen(vm);
    const char *eq = memchr(vm, '=', len);
    if (eq && (size_t)(eq - vm) < sizeof vmodules[0].pattern) {
      char num[16] = "";
      size_t nl = len - (size_t)(eq - vm) - 1;
      if (nl < sizeof num) memcpy(num, eq + 1, nl);
      char *end;
      long lv = strtol(num, &end, 10);
      if (*num && !*end && lv >= 0 && lv <= 1000) {
        memcpy(vmodules[n_vmodules].pattern, vm, (size_t)(eq - vm));
        vmodules[n_vmodules].pattern[eq - vm] = '\0';
        vmodules[n_vmodules].level = (int)lv;
        if (lv > max) max = (int)lv;
        n_vmodules++;
      }
    }
    vm = comma ? comma + 1 : NULL;
  }
  __atomic_store_n(&td_vlog_max, max, __ATOMIC_RELAXED);
}

bool td_vlog_on(int level, const char *file) {
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  char module[64];
  size_t n = strcspn(base, ".");
  if (n >= sizeof module) n = sizeof module - 1;
  memcpy(module, base, n);
  module[n] = '\0';
  for (int i = 0; i < n_vmodules; i++)
    if (!fnmatch(vmodules[i].pattern, module, 0)) return level <= vmodules[i].level;
  return level <= vlog_global;
}

static void put_json_string(char *out, size_t cap, size_t *n, const char *s) {
  if (*n < cap) out[(*n)++] = '"';
  for (; *s && *n + 7 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      out[(*n)++] = '\\';
      out[(*n)++] = (char)c;
    } else if (c < 0x20) {
      *n += (size_t)snprintf(out + *n, cap - *n, "\\u%04x", c);
    } else {
      out[(*n)++] = (char)c;
    }
  }
  if (*n < cap) out[(*n)++] = '"';
}

static void emit(td_log_level level, const char *model, int64_t version, const char *fmt,
                 va_list ap) {
  if ((int)level < atomic_load(&min_level) || atomic_load(&quiet)) return;
  static const char tag[] = "DIWE";
  static const char *const names[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
  char msg[2048], line[4608];
  vsnprintf(msg, sizeof msg, fmt, ap);
  struct timespec ts;
  struct tm tm;
  clock_gettime(CLOCK_REALTIME, &ts);
  gmtime_r(&ts.tv_sec, &tm);
  if (!atomic_load(&json)) {
    fprintf(stderr, "%c%02d%02d %02d:%02d:%02d.%06ld tensord] %s\n", tag[level], tm.tm_mon + 1,
            tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000, msg);
    return;
  }
  size_t n = (size_t)snprintf(line, sizeof line,
                              "{\"time\": \"%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ\", \"level\": "
                              "\"%s\", \"message\": ",
                              tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                              tm.tm_sec, ts.tv_nsec / 1000, names[level]);
  put_json_string(line, sizeof line - 64, &n, msg);
  if (model) {
    n += (size_t)snprintf(line + n, sizeof line - n, ", \"model\": ");
    put_json_string(line, sizeof line - 48, &n, model);
    if (version >= 0)
      n += (size_t)snprintf(line + n, sizeof line - n, ", \"version\": %lld", (long long)version);
  }
  snprintf(line + n, sizeof line - n, "}");
  fprintf(stderr, "%s\n", line);
}

void td_log(td_log_level level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(level, NULL, -1, fmt, ap);
  va_end(ap);
}

void td_logm(td_log_level level, const char *model, int64_t version, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(level, model, version, fmt, ap);
  va_end(ap);
}
