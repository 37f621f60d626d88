/* srv_api: TF Serving's request semantics, shared by every transport.
 *
 * A transport decodes its wire format, then drives a srv_call:
 *   srv_call_begin   resolve the model spec (name; version, label or the
 *                    latest AVAILABLE version; signature, default
 *                    "serving_default") to a servable reference and a
 *                    signature, with TF Serving's error codes and messages;
 *   (fill c->inputs[i] for c->sig->inputs[i], in signature order)
 *   srv_call_try_run_here  optionally first: run the call on this thread when
 *                    that is cheaper than a hand-off (a worker idle, the
 *                    signature's runs known to be short; see bat_queue.h;
 *                    with batching on, also nothing to merge with: see
 *                    bat_batcher_try_run_here). True: the result is in
 *                    c->task.code / c->task.err and c->outputs, and done()
 *                    is not called. False: submit it;
 *   srv_call_submit  queue the call for an engine worker (through the
 *                    dynamic batcher when one is configured);
 *   done(c)          called once, on the worker thread, with c->task.code /
 *                    c->task.err and c->outputs[i] for c->sig->outputs[i];
 *   srv_call_end     release tensors and the servable reference.
 * With api->stats set, every run that finishes (done() or an inline run) is
 * recorded there (srv_stats.h: total time and its queue / compute split)
 * before the transport sees its result.
 * REST and gRPC thus report the same failure with the same code and
 * message, from one place.
 *
 * A srv_call is owned by the transport (usually embedded in its request
 * context). srv_api is a plain struct of shared services that must outlive
 * every call. All functions are thread-safe for distinct calls. */
#ifndef SRV_API_H
#define SRV_API_H

#include <stdbool.h>
#include <stdint.h>

#include "bat_queue.h"
#include "ldr_registry.h"
#include "td_status.h"

#define SRV_DEFAULT_SIGNATURE "serving_default"

struct ldr_manager;

struct bat_batcher;
struct srv_stats;
struct srv_v2repo;

typedef struct srv_api {
  ldr_registry *registry;
  bat_queue *queue;
  struct bat_batcher *batcher; /* --enable_batching; NULL: calls go to the queue directly */
  struct ldr_manager *manager; /* for srv_api_reload_config; NULL: reloads refused */
  struct srv_stats *stats;     /* every finished run is recorded here; NULL: none */
  struct srv_v2repo *repo;     /* the v2 repository extension; NULL: refused */
  size_t max_input_bytes;      /* most bytes one request's decoded inputs may take; 0: no bound */
} srv_api;

/* TF Serving words a missing signature differently per API; the call
 * reports it the way the API that asked does. */
typedef enum {
  SRV_SIG_ERRORS_PREDICT = 0, /* gRPC Predict: FAILED_PRECONDITION
                                 "Serving signature key \"k\" not found." */
  SRV_SIG_ERRORS_REST_PREDICT, /* REST :predict: INVALID_ARGUMENT
                                  "Serving signature name: \"k\" not found in signature def" */
  SRV_SIG_ERRORS_INFER,        /* Classify/Regress/MultiInference: INVALID_ARGUMENT
                                  "No signature was found with the name: k" */
} srv_sig_errors;

typedef struct srv_model_spec {
  const char *name;
  bool has_version;
  int64_t version;
  const char *label;          /* NULL when none */
  const char *signature_name; /* NULL or "" selects serving_default */
  srv_sig_errors sig_errors;  /* zero (Predict) unless set */
} srv_model_spec;

typedef struct srv_call srv_call;
struct srv_call {
  srv_api *api;
  ldr_servable *servable;   /* reference held from begin to end */
  const ldr_signature *sig; /* owned by servable */
  int64_t version;          /* the version actually served */
  char *model;              /* the model's name, kept when batching (per-model
                               parameters) or counting (api->stats) */
  uint64_t begin_ns;        /* td_now_ns() at srv_call_begin, with api->stats */
  uint64_t submit_ns;       /* at the hand-off (submit or try_run_here), with api->stats */
  eng_tensor *inputs;       /* sig->n_inputs, filled by the transport */
  eng_tensor *outputs;      /* sig->n_outputs, filled by the engine */
  uint64_t deadline_ns;     /* set after begin; copied to task.deadline_ns (0 = none) */
  void (*done)(srv_call *c);
  void *user;
  /* Metrics (srv_metrics; only while td_metrics_enabled()): the model's
   * name as asked (kept after srv_call_end, cut at 127 bytes). The run's
   * start and time (set once the run is over) serve the metrics and the
   * statistics. */
  char metric_model[128];
  struct srv_mstats *mstats; /* the model's series; NULL: metrics off */
  uint64_t run_ns;
  uint64_t run_start_ns;
  bool metered; /* queue depth / in-flight accounting is on for this call */
  bool queued, started;
  size_t input_bytes; /* charged so far against api->max_input_bytes (srv_call_charge) */
  /* task.code / task.err hold the run's result. Last, with task.err last
   * in it: srv_call_begin zeroes the call up to task.err (2 KiB, cleared
   * before each run instead). */
  bat_task task;
};

/* --enable_signature_method_name_check, process-wide (set once from main
 * before the transports start): Predict then requires the signature's
 * method_name "tensorflow/serving/predict" (INVALID_ARGUMENT "Expected
 * prediction signature method_name to be tensorflow/serving/predict. Was:
 * ..."), and srv_infer checks Classify's and Regress's. */
void srv_api_set_method_name_check(bool on);
bool srv_api_method_name_check(void);

/* On failure the call holds nothing, but srv_call_end is still safe. */
td_code srv_call_begin(srv_call *c, srv_api *api, const srv_model_spec *spec, td_err *err);
/* Charges `bytes` of input `name` to the request's input budget
 * (api->max_input_bytes) before the transport allocates them: past it,
 * RESOURCE_EXHAUSTED "input 'x': the tensor would take N bytes, more than
 * the M this request may still use" and nothing is charged. Classify,
 * Regress, MultiInference and the v2 infer edges use it; Predict's decoders
 * keep their own count of the same budget. */
td_code srv_call_charge(srv_call *c, const char *name, size_t bytes, td_err *err);
bool srv_call_try_run_here(srv_call *c);
td_code srv_call_submit(srv_call *c, td_err *err);
void srv_call_end(srv_call *c);

struct Tensorflow__Serving__ModelServerConfig;
/* Replaces the served models with `config` (ReloadConfigRequest), returning
 * once the new models are loaded. Only model_config_list is accepted
 * (INVALID_ARGUMENT with TF Serving's message otherwise); the config is
 * checked as a config file is (cfg_model_config). A new model that does not
 * become AVAILABLE answers UNKNOWN "N model(s) did not become available:
 * {...}" and labels that cannot be applied FAILED_PRECONDITION, as TF
 * Serving does; models and policies are replaced in both cases. Blocks the
 * calling thread while the models load: call it off any I/O loop. */
td_code srv_api_reload_config(srv_api *api, const struct Tensorflow__Serving__ModelServerConfig *config,
                              td_err *err);

#endif
