/* kbench: the timing loop the kernel benchmarks (gemm_bench, dw_bench)
 * share. A call is timed as: one warm-up run that sizes the repetitions to
 * about secs / 5 each, then 5 timed repetitions of that many runs; the
 * median repetition's time per run is the result. With evict > 0, each run
 * is preceded by a read and write of that many bytes of other memory,
 * outside the timing, so that the call's operands start out of cache.
 * Single-threaded caller; the callee may use the engine's pool. */
#ifndef KBENCH_H
#define KBENCH_H

#include <stddef.h>

/* Seconds of the monotonic clock. */
double kbench_now(void);

/* Median seconds per run of fn(arg) as above; a negative value when the
 * eviction buffer cannot be allocated. Whatever fn does is counted (a
 * fresh output buffer per run, say). */
double kbench_time(void (*fn)(void *arg), void *arg, double secs, size_t evict);

/* The byte count in environment variable `name`, given in MiB (0 when
 * unset or not positive). */
size_t kbench_env_mib(const char *name);

#endif
