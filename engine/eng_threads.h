/* eng_threads: the engine's intra-op parallelism (TensorFlow's
 * --tensorflow_intra_op_parallelism): how many threads one op may use. It
 * sizes the engine's thread pool (eng_pool), which the kernels split their
 * work over, and keeps OpenBLAS at one thread so that its threads never
 * stack on top of the pool's (see eng_pool.h). Call it from main before
 * serving; 0 means one per online core (the default). */
#ifndef ENG_THREADS_H
#define ENG_THREADS_H

void eng_threads_set(int n);
/* The current count (>= 1). */
int eng_threads(void);

#endif
