/* The kernel benchmarks' timing loop (see kbench.h). */
#define _POSIX_C_SOURCE 200809L
#include "kbench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPS 5

double kbench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmpd(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

double kbench_time(void (*fn)(void *arg), void *arg, double secs, size_t evict) {
  char *junk = evict ? malloc(evict) : NULL;
  if (evict && !junk) return -1;
  if (junk) memset(junk, 1, evict);
  double t[REPS];
  int iters = 1;
  for (int rep = -1; rep < REPS; rep++) {
    double t0 = kbench_now(), away = 0;
    for (int i = 0; i < iters; i++) {
      if (junk) { /* outside the timing */
        double e0 = kbench_now();
        for (size_t j = 0; j < evict; j += 64) junk[j]++;
        away += kbench_now() - e0;
      }
      fn(arg);
    }
    double dt = kbench_now() - t0 - away;
    if (rep < 0) { /* warm-up: size the repetitions to about secs / REPS each */
      iters = (int)(secs / REPS / (dt > 1e-7 ? dt : 1e-7)) + 1;
      continue;
    }
    t[rep] = dt / iters;
  }
  free(junk);
  qsort(t, REPS, sizeof *t, cmpd);
  return t[REPS / 2];
}

size_t kbench_env_mib(const char *name) {
  const char *e = getenv(name);
  int v = e ? atoi(e) : 0;
  return v > 0 ? (size_t)v << 20 : 0;
}
