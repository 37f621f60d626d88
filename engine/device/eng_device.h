/* eng_device: where serving plans run, CPU or an accelerator. The public
 * face of engine/device/: selection, the memory budget and per-thread
 * device state (eng_device.c, eng_device_int.h), the GPU executor
 * (eng_gpu.h), the reference device (eng_devref.h) and the plug-in ABI
 * (eng_devapi.h, cuda/).
 *
 * main selects the device once, before any model loads:
 *   - ENG_DEVICE_CPU: the CPU engine only.
 *   - ENG_DEVICE_GPU: the CUDA backend, or a startup error saying why not.
 *   - ENG_DEVICE_AUTO: the CUDA backend when the plug-in loads and finds a
 *     GPU, else the CPU, with the reason returned for one log line.
 *   - ENG_DEVICE_REFERENCE: the GPU executor against the reference device
 *     (eng_devref.h); for testing the GPU path on machines without a GPU.
 * The CUDA backend is the plug-in libtensord_cuda.so (engine/device/cuda/), looked
 * up next to the executable, then through the dynamic loader's path; a
 * daemon built without CUDA, or run where the plug-in or the driver is
 * missing, simply has no GPU.
 *
 * Memory: the device may use memory_fraction of its memory (TF Serving's
 * --per_process_gpu_memory_fraction; 0 means all of it). Weights are
 * uploaded once per loaded model (eng_device_attach), each engine thread
 * keeps its own stream and a scratch arena that grows to the largest
 * request it has run, so a warm request allocates nothing. A model whose
 * weights do not fit fails to attach with RESOURCE_EXHAUSTED giving the
 * sizes; other models keep serving.
 *
 * Threads: select and the setters are for main; everything else is
 * thread-safe. */
#ifndef ENG_DEVICE_H
#define ENG_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "eng_model.h"

typedef enum {
  ENG_DEVICE_AUTO,
  ENG_DEVICE_CPU,
  ENG_DEVICE_GPU,
  ENG_DEVICE_REFERENCE,
} eng_device_mode;

typedef struct eng_device_opts {
  eng_device_mode mode;
  double memory_fraction; /* (0, 1]; 0: all of the device's memory */
  bool allow_tf32;        /* GEMMs may use TF32 tensor cores */
  const char *plugin;     /* path of libtensord_cuda.so; NULL: the default lookup */
} eng_device_opts;

/* "auto", "cpu", "gpu", "reference"; INVALID_ARGUMENT otherwise. */
td_code eng_device_parse_mode(const char *s, eng_device_mode *out, td_err *err);

/* Chooses the device. On success *note says what was chosen and, when
 * auto fell back to the CPU, why. FAILED_PRECONDITION when gpu was asked
 * for and none is usable. May be called again (tests); models attached to
 * an earlier device must be destroyed first. */
td_code eng_device_select(const eng_device_opts *o, char *note, size_t note_len, td_err *err);
/* True when plans attached with eng_device_attach run on a device. */
bool eng_device_active(void);
/* "cpu", or the device's description. */
const char *eng_device_name(void);
/* Bytes of device memory in use and allowed (0 and 0 on the CPU). */
size_t eng_device_used(void);
size_t eng_device_limit(void);

/* Moves a loaded model's serving plans to the device: uploads every
 * constant they read (weights), once per model. After it, eng_plan_run on
 * these plans (and their shape specialisations) runs on the device, with
 * the ops the device lacks on the CPU. A no-op on the CPU. On failure the
 * model stays on the CPU and the error says why (RESOURCE_EXHAUSTED with
 * the sizes when it does not fit). */
td_code eng_device_attach(eng_model *m, int n_plans, eng_plan *const *plans, td_err *err);

/* For `tensord inspect`: how many of the plan's steps the device would
 * run, and the ops it would leave to the CPU, comma-separated, in cpu_ops
 * (empty when none). Answered from the GPU executor's lowering table
 * (eng_gpu.c). */
int eng_device_plan_report(const eng_plan *p, char *cpu_ops, size_t len);

#endif
