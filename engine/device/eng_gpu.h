/* eng_gpu (internal to engine/): the GPU executor.
 *
 * The executor runs a plan step by step like the CPU loop (eng_run.h), keeping a second value table
 * of device buffers. A step whose op has a device lowering (eng_gpu.c's table) runs there, reading
 * inputs from the device (uploading host values, or taking the model's
 * cached copy of a constant); any other step runs its CPU kernel after its
 * inputs are downloaded (the CPU loop's own step, eng_run.h). Outputs are
 * downloaded at the end. Device buffers of one run come from the calling
 * thread's arena (eng_device_int.h) and live until the run ends. A run
 * nested in another on the same thread (a While or If body), and a plan
 * holding TF1 Switch / Merge, run on the CPU loop. Any thread. */
#ifndef ENG_GPU_H
#define ENG_GPU_H

#include "eng_plan.h"

typedef struct eng_dev_model eng_dev_model;

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
