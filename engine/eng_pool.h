/* eng_pool: the engine's intra-op thread pool. One op (a GEMM, a
 * convolution, a depthwise convolution, a batched product, an elementwise
 * loop, a copy, a per-row reduction or softmax) splits its output into
 * chunks that write disjoint memory and hands them to eng_pool_run (or its
 * ranges to eng_pool_for), which runs every chunk exactly once, on the
 * calling thread and the pool's helpers, and returns when all are done.
 * The executor uses it the same way for the slices of a batch
 * (eng_exec.c): each chunk is then a whole run of the plan on a few
 * examples, whose ops find the pool busy and run on that chunk's thread.
 *
 * A pool of N threads has N - 1 helpers, started on first use; the caller
 * is the N-th. Chunks are claimed one at a time from a shared counter, so a
 * helper that is slow to wake (the core busy with another worker) leaves
 * its share to the others instead of holding up the op. Which thread runs a
 * chunk never changes what the chunk computes: a kernel that splits only
 * its output (rows, column panels, channels, never the terms of one sum)
 * gives bit-identical results at any thread count.
 *
 * No oversubscription: a pool serves one op at a time. A caller that finds
 * it busy (another engine worker's op, or an op nested inside a chunk)
 * runs all its chunks itself, at once, without waiting. So at most N
 * threads compute for the pool at any time however many workers call.
 * Idle helpers sleep on a condition variable (no spinning by default; see
 * ENG_POOL_SPIN in eng_pool.c): they never hold a core while no op runs.
 *
 * OpenBLAS: the pool owns intra-op parallelism. eng_threads_set keeps
 * OpenBLAS at one thread, so a BLAS call (the rare product the packed
 * kernels do not cover) runs on the thread that makes it, and a BLAS call
 * inside a chunk does not start threads of its own.
 *
 * Threads: eng_pool_run may be called from any number of threads at once,
 * and from inside a chunk (that call runs serially). eng_pool_create and
 * eng_pool_destroy are not concurrent with runs on the same pool. The
 * process pool (eng_pool_default) lives until exit; its size follows
 * eng_pool_set_threads (eng_threads_set), read when a run starts.
 *
 * Failure: none at run time. If a helper cannot be started the pool runs
 * with the helpers it has (down to none: every chunk on the caller). */
#ifndef ENG_POOL_H
#define ENG_POOL_H

#include <stdint.h>

#include "td_status.h"

typedef struct eng_pool eng_pool;

/* One chunk of an op: chunk is in [0, nchunks). Must not fail; writes only
 * memory no other chunk of the same run touches. */
typedef void (*eng_pool_fn)(void *arg, int64_t chunk);

/* A pool of `threads` (>= 1; the caller counts as one). NULL when memory is
 * short. */
eng_pool *eng_pool_create(int threads);
/* Stops and joins the helpers; no run may be in progress. NULL is a no-op. */
void eng_pool_destroy(eng_pool *p);
/* The pool the kernels use; its size is set by eng_pool_set_threads. */
eng_pool *eng_pool_default(void);
/* Size of the default pool, in threads (< 1 counts as 1; capped at 64). */
void eng_pool_set_threads(int threads);
/* The threads a run on p uses when the pool is free (its size, >= 1). */
int eng_pool_threads(const eng_pool *p);

/* Runs fn(arg, i) for every i in [0, nchunks) exactly once and returns when
 * all have returned. p NULL: the default pool. Serial, on the caller, when
 * nchunks < 2, the pool has one thread, or it is busy with another run. */
void eng_pool_run(eng_pool *p, int64_t nchunks, eng_pool_fn fn, void *arg);

/* A chunk that may fail: returns its status, its error in *err (a slot of
 * its own, cleared before the call). */
typedef td_code (*eng_pool_try_fn)(void *arg, int64_t chunk, td_err *err);

/* Runs fn over [0, nchunks) as eng_pool_run does and returns the status of
 * the first chunk, in chunk order, that failed, with its error in *err
 * (TD_OK when none did): what a serial loop stopping at its first failure
 * reports, though chunks after it may have run as well. RESOURCE_EXHAUSTED,
 * running nothing, when the per-chunk errors cannot be allocated. */
td_code eng_pool_try(eng_pool *p, int64_t nchunks, eng_pool_try_fn fn, void *arg, td_err *err);

/* One range [i0, i1) of the items an op split with eng_pool_for. */
typedef void (*eng_pool_range_fn)(void *arg, int64_t i0, int64_t i1);

/* Runs fn over [0, n) as contiguous ranges that together cover it once:
 * about four per thread, each at least `grain` items and, but for the
 * last, a multiple of `align` items (>= 1) long, claimed as eng_pool_run's
 * chunks. One range [0, n) on the caller when the pool has one thread or
 * n is below two grains. For kernels whose items (rows, element runs) are
 * computed alike wherever a range starts. */
void eng_pool_for(eng_pool *p, int64_t n, int64_t grain, int64_t align, eng_pool_range_fn fn,
                  void *arg);

#endif
