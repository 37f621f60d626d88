/* bat_queue: the bridge between transports and the engine.
 *
 * A transport thread decodes a request into a bat_task (signature + input
 * tensors) and submits it; one of the queue's worker threads runs the
 * signature's plan and calls task->done on that worker thread with the
 * outputs or the error. Transport threads never run a model.
 *
 * Submission never blocks: a full queue answers RESOURCE_EXHAUSTED at once,
 * a stopping queue UNAVAILABLE. Tasks run in submission order. A task whose
 * deadline has passed when a worker picks it up is not run: done() gets
 * DEADLINE_EXCEEDED (the client has given up; the work is abandoned). (Dynamic
 * batching, merging queued tasks along dimension 0, builds on this queue.)
 *
 * Ownership: the task and everything it points to belong to the submitter;
 * they must stay valid until done() is called, which happens exactly once
 * for every accepted task (bat_queue_destroy runs what is still queued). The
 * submitter holds a reference to the servable owning `sig` for that time.
 * All functions are thread-safe except create/destroy. */
#ifndef BAT_QUEUE_H
#define BAT_QUEUE_H

#include "eng_tensor.h"
#include "ldr_signature.h"
#include "td_status.h"

typedef struct bat_task bat_task;
struct bat_task {
  const ldr_signature *sig;
  eng_tensor *inputs;  /* sig->n_inputs, in signature order */
  eng_tensor *outputs; /* sig->n_outputs, filled on success */
  td_code code;        /* result, set before done() */
  td_err err;
  void (*done)(bat_task *t);
  /* Optional: the worker calls run(t) instead of running sig's plan on
   * inputs/outputs (the batcher runs a merged batch this way). */
  td_code (*run)(bat_task *t);
  /* Optional: uv_hrtime() value (CLOCK_MONOTONIC ns) after which the task
   * is abandoned instead of run; 0 = no deadline. */
  uint64_t deadline_ns;
  /* Optional: the model's name, for per-model batching parameters. */
  const char *model;
  void *user;
  bat_task *next; /* queue link; owned by the queue while queued */
};

typedef struct bat_queue bat_queue;

/* n_workers >= 1; max_queued >= 1 bounds tasks waiting (not running). */
td_code bat_queue_create(int n_workers, int max_queued, bat_queue **out, td_err *err);
td_code bat_queue_submit(bat_queue *q, bat_task *t, td_err *err);
/* Stops accepting, finishes queued and running tasks, joins the workers. */
void bat_queue_destroy(bat_queue *q);

#endif
