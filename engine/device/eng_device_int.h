/* eng_device_int (internal to engine/device/): the device state that the
 * device layer (eng_device.c) keeps and the GPU executor (eng_gpu.c) uses:
 * the selected device's primitives, the memory budget, each engine
 * thread's stream and scratch arena, and each model's device copies of its
 * constants.
 *
 * Threads: everything here is thread-safe; an eng_dev_thread belongs to
 * the thread that got it. */
#ifndef ENG_DEVICE_INT_H
#define ENG_DEVICE_INT_H

#include "eng_devapi.h"
#include "eng_device.h"

typedef struct eng_dev_model eng_dev_model;

/* The selected device's primitives; NULL on the CPU. */
const eng_devapi *eng_dev_api(void);

/* Device memory through the budget: NULL with RESOURCE_EXHAUSTED naming
 * `what` and the sizes when it would exceed the limit. */
void *eng_dev_alloc(size_t bytes, const char *what, td_err *err);
void eng_dev_free(void *d, size_t bytes);

/* One engine thread's device state. */
typedef struct eng_dev_val {
  void *d;
  eng_dtype dtype;
  eng_shape shape;
} eng_dev_val;

/* Scratch comes from chunks: a run bumps through the current one and opens
 * a bigger one when it is full; a run that needed more than one leaves a
 * single chunk of the whole run's size for the next. */
#define ENG_DEV_CHUNKS 32
typedef struct eng_dev_thread {
  const eng_devapi *api; /* the device this state belongs to */
  unsigned gen;          /* and the selection (eng_device_select) */
  void *stream;
  char *chunk[ENG_DEV_CHUNKS];
  size_t chunk_cap[ENG_DEV_CHUNKS];
  int n_chunks;
  size_t used; /* in the last chunk */
  size_t want; /* this run's total */
  eng_dev_val *dv;
  size_t dv_cap;
} eng_dev_thread;

eng_dev_thread *eng_dev_thread_get(td_err *err);
/* Scratch device memory valid until eng_dev_thread_end. */
void *eng_dev_scratch(eng_dev_thread *t, size_t bytes, td_err *err);
/* Ends a run: waits for the stream, recycles the scratch (growing the
 * arena when the run overflowed it). */
void eng_dev_thread_end(eng_dev_thread *t);

/* The model's device copy of constant tensor t (uploaded on first use). */
td_code eng_dev_model_const(eng_dev_model *dm, eng_dev_thread *t, const eng_tensor *c, void **d,
                            td_err *err);
eng_dev_model *eng_dev_model_new(void);
void eng_dev_model_free(eng_dev_model *dm);

#endif
