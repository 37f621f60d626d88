/* eng_threads: the engine's intra-op parallelism (TensorFlow's
 * --tensorflow_intra_op_parallelism): how many threads one op may use. It
 * sets OpenBLAS's thread count, which the matrix kernels run on. Call it
 * from main before serving; 0 means one per online core (the default). */
#ifndef ENG_THREADS_H
#define ENG_THREADS_H

void eng_threads_set(int n);
/* The current count (>= 1). */
int eng_threads(void);

#endif
