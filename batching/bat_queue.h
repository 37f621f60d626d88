/* bat_queue: the bridge between transports and the engine.
 *
 * A transport thread decodes a request into a bat_task (signature + input
 * tensors) and submits it; one of the queue's worker threads runs the
 * signature's plan and calls task->done on that worker thread with the
 * outputs or the error.
 *
 * Running here, on the calling thread. Handing a run to a worker costs two
 * thread switches (the worker wakes, then the transport thread wakes to
 * answer), which for a plan of a few microseconds is most of a request's
 * CPU time, and on a busy core a context switch each. So, as TF Serving does with batching
 * off (it runs the session on the thread that handles the request), a
 * transport may first offer the task to bat_queue_try_run_here, which runs it
 * on the calling thread when that is known to be cheap and fair:
 *   - an engine worker is idle: no task is waiting, so nothing queued is
 *     overtaken, and fewer runs are in progress (on workers and callers)
 *     than there are workers, so the run here takes an idle worker's
 *     place and no more runs compute at once than n_workers (running
 *     models on every transport thread of a small machine would have them
 *     preempt each other, and long waits follow);
 *   - the signature's runs are known to be short: their measured average is
 *     within the run-here limit (bat_queue_set_run_here_limit, default
 *     BAT_RUN_HERE_LIMIT_NS) and this task's input is no larger than one seen
 *     to run within it (bat_runcost). A signature not yet measured runs on
 *     the workers first, which measure every run;
 *   - the queue is not stopping;
 *   - the plan runs on the host (eng_plan_on_host): a thread that runs
 *     plans on a device keeps its own stream and a scratch arena in device
 *     memory, which the engine workers bound and transport threads must
 *     not grow.
 * The bound keeps a transport thread (which also drives network I/O for
 * other connections) from being held for long. Otherwise the task is
 * submitted as usual. With dynamic batching on, srv_api offers a task to
 * bat_batcher_try_run_here instead, which runs a lone request here as a
 * batch of one under these same conditions (bat_batcher.h).
 *
 * Submission never blocks: a full queue answers RESOURCE_EXHAUSTED at once,
 * a stopping queue UNAVAILABLE. Tasks run in submission order. A task whose
 * deadline has passed when a worker picks it up (or when it would run
 * here) is not run: it gets DEADLINE_EXCEEDED (the client has given up;
 * the work is abandoned). (Dynamic batching, merging queued tasks along
 * dimension 0, builds on this queue.)
 *
 * Ownership: the task and everything it points to belong to the submitter;
 * they must stay valid until done() is called, which happens exactly once
 * for every accepted task (bat_queue_destroy runs what is still queued). The
 * submitter holds a reference to the servable owning `sig` for that time.
 * All functions are thread-safe except create/destroy. */
#ifndef BAT_QUEUE_H
#define BAT_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "eng_tensor.h"
#include "ldr_signature.h"
#include "td_status.h"

typedef struct bat_task bat_task;
struct bat_task {
  const ldr_signature *sig;
  eng_tensor *inputs;  /* sig->n_inputs, in signature order */
  eng_tensor *outputs; /* sig->n_outputs, filled on success */
  td_code code;        /* result, set before done() */
  void (*done)(bat_task *t);
  /* Optional: the worker calls run(t) instead of running sig's plan on
   * inputs/outputs (the batcher runs a merged batch this way). */
  td_code (*run)(bat_task *t);
  /* Optional: td_now_ns() value (CLOCK_MONOTONIC ns, as uv_hrtime) after which the task
   * is abandoned instead of run; 0 = no deadline. */
  uint64_t deadline_ns;
  /* Optional: called on the running thread just before the task's run
   * starts (not for a task abandoned at its deadline); the batcher calls it
   * for each task of a batch, once per piece of a split task. */
  void (*started)(bat_task *t);
  /* Optional: the model's name, for per-model batching parameters. */
  const char *model;
  /* Optional, for tasks with a run hook and no inputs: units of input the
   * run handled (bytes), set by run() for the run-cost table. */
  uint64_t run_units;
  void *user;
  bat_task *next; /* queue link; owned by the queue while queued */
  /* Set with code. Last, and need not be zeroed by the submitter: it is 2
   * KiB, and zeroing it per request showed in profiles; the queue clears
   * it before the run. */
  td_err err;
};

typedef struct bat_queue bat_queue;

/* n_workers >= 1; max_queued >= 1 bounds tasks waiting (not running). */
td_code bat_queue_create(int n_workers, int max_queued, bat_queue **out, td_err *err);
td_code bat_queue_submit(bat_queue *q, bat_task *t, td_err *err);
/* Runs t on the calling thread if the conditions above hold and returns
 * true: t->code, t->err and the outputs are set, and done() is NOT called
 * (the caller has the result in hand). Returns false, having done nothing,
 * when t should be submitted instead. */
bool bat_queue_try_run_here(bat_queue *q, bat_task *t);

/* Runs measured to take at most this long on average may run here; 0
 * turns runs here off (--tensord_inline_run_max_micros). */
#define BAT_RUN_HERE_LIMIT_NS 100000u
void bat_queue_set_run_here_limit(bat_queue *q, uint64_t limit_ns);

/* Stops accepting, finishes queued and running tasks, joins the workers. */
void bat_queue_destroy(bat_queue *q);

#endif
