/* eng_gpu (internal to engine/): the GPU executor and the device state it
 * shares with eng_device.c.
 *
 * The executor runs a plan step by step like the CPU loop (eng_run in
 * eng_plan.h), keeping a second value table of device buffers. A step
 * whose op has a device lowering (eng_gpu.c's table) runs there, reading
 * inputs from the device (uploading host values, or taking the model's
 * cached copy of a constant); any other step runs its CPU kernel after its
 * inputs are downloaded. Outputs are downloaded at the end. Device buffers
 * of one run come from the calling thread's arena and live until the run
 * ends. */
#ifndef ENG_GPU_H
#define ENG_GPU_H

#include "eng_devapi.h"
#include "eng_model.h"
#include "eng_plan.h"

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
eng_dev_model *eng_model_dev(const eng_model *m);
void eng_model_set_dev(eng_model *m, eng_dev_model *dm);

/* Runs p (a plan of a model attached to the device). */
td_code eng_gpu_run(eng_dev_model *dm, const eng_plan *p, const eng_tensor *in, eng_tensor *out,
                    td_err *err);
/* Whether step s of p has a device lowering (for inspect; a lowering may
 * still decline at run time for shapes or dtypes it does not handle). */
bool eng_gpu_step_supported(const eng_plan *p, int s);
/* Arithmetic on values that live only on the host stays there below this
 * many elements (default 4096); tests set 0 to send every op they can to
 * the device. */
void eng_gpu_set_host_small(int64_t n);
/* The ops with a device lowering (tests walk them). */
int eng_gpu_op_count(void);
const char *eng_gpu_op_name(int i);

#endif
