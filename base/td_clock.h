/* td_clock: the one monotonic clock, in nanoseconds.
 *
 * CLOCK_MONOTONIC, the clock uv_hrtime reads: deadlines, timeouts, batch
 * windows, retry times and run timings all come from it, so a value taken
 * in one module compares with one taken in another. Any thread; never
 * fails. */
#ifndef TD_CLOCK_H
#define TD_CLOCK_H

#include <stdint.h>

uint64_t td_now_ns(void);
/* CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID): what a
 * piece of work cost on a machine whose other load stretches its wall
 * time. */
uint64_t td_thread_cpu_ns(void);

#endif
