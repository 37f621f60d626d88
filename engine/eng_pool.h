/* eng_pool: the engine's intra-op thread pool. One op (a GEMM, a
 * convolution, a depthwise convolution, a batched product, an elementwise
 * loop) splits its output into chunks that write disjoint memory and hands
 * them to eng_pool_run, which runs every chunk exactly once, on the calling
 * thread and the pool's helpers, and returns when all are done.
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

#endif
