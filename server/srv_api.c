#include "srv_api.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bat_batcher.h"
#include "cfg_model_config.h"
#include "ldr_manager.h"
#include "srv_metrics.h"
#include "srv_stats.h"
#include "td_clock.h"
#include "td_log.h"
#include "td_metrics.h"
#include "tensorflow_serving/config/model_server_config.pb-c.h"

/* The rows a run carried: the first input's leading dimension. */
static uint64_t call_rows(const srv_call *c) {
  if (!c->sig || c->sig->n_inputs < 1) return 1;
  const eng_tensor *t = &c->inputs[0];
  return t->shape.rank >= 1 && t->shape.dim[0] >= 0 ? (uint64_t)t->shape.dim[0] : 1;
}

/* now: the run's end (td_now_ns). The phases are cut at the hand-off
 * (submit_ns) and the run's start (run_start_ns); see srv_stats.h. */
static void count(const srv_call *c, uint64_t now) {
  if (!c->api->stats) return;
  srv_stats_sample x = {
      .ok = c->task.code == TD_OK, .rows = call_rows(c), .total_ns = now - c->begin_ns};
  uint64_t handoff = c->submit_ns ? c->submit_ns : now;
  x.input_ns = handoff - c->begin_ns;
  if (c->started) {
    x.queue_ns = c->run_start_ns - handoff;
    x.infer_ns = now - c->run_start_ns;
  } else {
    x.queue_ns = now - handoff;
  }
  srv_stats_record(c->api->stats, c->model, c->version, &x);
}

#define PREDICT_METHOD "tensorflow/serving/predict"

static bool method_name_check;
void srv_api_set_method_name_check(bool on) { method_name_check = on; }
bool srv_api_method_name_check(void) { return method_name_check; }

/* Queue depth counts a call from submission until its run starts (or it
 * is abandoned), in-flight runs from the start until done. The run's start
 * is noted for the statistics too, metrics on or off. */
static void call_started(bat_task *t) {
  srv_call *c = t->user;
  if (__atomic_exchange_n(&c->started, true, __ATOMIC_RELAXED)) return; /* a later piece */
  c->run_start_ns = td_now_ns();
  if (!c->metered) return;
  if (c->queued) srv_metrics_queue_add(c->mstats, -1);
  srv_metrics_inflight_add(c->mstats, 1, !c->queued);
}

static void call_finished(srv_call *c) {
  uint64_t now = td_now_ns();
  if (c->started) c->run_ns = now - c->run_start_ns;
  count(c, now);
  if (!c->metered) return;
  if (c->started)
    srv_metrics_inflight_add(c->mstats, -1, false);
  else if (c->queued)
    srv_metrics_queue_add(c->mstats, -1);
}

static void call_done(bat_task *t) {
  srv_call *c = t->user;
  call_finished(c);
  c->done(c);
}

td_code srv_call_charge(srv_call *c, const char *name, size_t bytes, td_err *err) {
  size_t max = c->api && c->api->max_input_bytes ? c->api->max_input_bytes : SIZE_MAX;
  size_t left = max - (c->input_bytes < max ? c->input_bytes : max);
  if (bytes > left)
    return td_err_set(err, TD_RESOURCE_EXHAUSTED,
                      "input '%s': the tensor would take %zu bytes, more than the %zu this "
                      "request may still use",
                      name, bytes, left);
  c->input_bytes += bytes;
  return TD_OK;
}

td_code srv_call_begin(srv_call *c, srv_api *api, const srv_model_spec *spec, td_err *err) {
  memset(c, 0, offsetof(srv_call, task.err));
  td_err_clear(&c->task.err);
  c->api = api;
  if (api->stats) c->begin_ns = td_now_ns();
  if (spec->name) {
    snprintf(c->metric_model, sizeof c->metric_model, "%s", spec->name);
    c->mstats = srv_metrics_model(spec->name);
  }
  if (!spec->name || !*spec->name)
    return td_err_set(err, TD_INVALID_ARGUMENT, "ModelSpec has no name specified.");
  /* The registry reads a negative version as "latest"; one a client names
   * is a version like any other, and none is negative (TF: NOT_FOUND). */
  if (spec->has_version && spec->version < 0)
    return td_err_set(err, TD_NOT_FOUND, "Servable not found for request: Specific(%s, %lld)",
                      spec->name, (long long)spec->version);
  int64_t version = spec->has_version ? spec->version : -1;
  td_code rc = TD_OK;
  if (spec->label) rc = ldr_registry_resolve_label(api->registry, spec->name, spec->label, &version, err);
  if (!rc) rc = ldr_registry_acquire(api->registry, spec->name, version, &c->servable, err);
  if (rc) return rc;
  const char *key =
      spec->signature_name && *spec->signature_name ? spec->signature_name : SRV_DEFAULT_SIGNATURE;
  c->sig = ldr_servable_signature(c->servable, key);
  if (!c->sig) {
    if (spec->sig_errors == SRV_SIG_ERRORS_REST_PREDICT)
      rc = td_err_set(err, TD_INVALID_ARGUMENT,
                      "Serving signature name: \"%s\" not found in signature def", key);
    else if (spec->sig_errors == SRV_SIG_ERRORS_INFER)
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "No signature was found with the name: %s", key);
    else
      rc = td_err_set(err, TD_FAILED_PRECONDITION, "Serving signature key \"%s\" not found.",
                      key);
    goto fail;
  }
  if (method_name_check && spec->sig_errors != SRV_SIG_ERRORS_INFER &&
      strcmp(c->sig->method_name ? c->sig->method_name : "", PREDICT_METHOD)) {
    rc = td_err_set(err, TD_INVALID_ARGUMENT,
                    "Expected prediction signature method_name to be " PREDICT_METHOD ". Was: %s",
                    c->sig->method_name ? c->sig->method_name : "");
    c->sig = NULL; /* no tensors yet for srv_call_end to release */
    goto fail;
  }
  c->version = ldr_servable_version(c->servable);
  /* Only the batcher (per-model parameters) and the counters read the name:
   * no copy when neither is on. */
  if ((api->batcher || api->stats) && !(c->model = strdup(spec->name))) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  c->inputs = calloc((size_t)c->sig->n_inputs + 1, sizeof *c->inputs);
  c->outputs = calloc((size_t)c->sig->n_outputs + 1, sizeof *c->outputs);
  if (!c->inputs || !c->outputs) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  return TD_OK;
fail:
  srv_call_end(c);
  return rc;
}

/* Field by field: a compound literal would zero task.err's 2 KiB too. */
static void set_task(srv_call *c) {
  bat_task *t = &c->task;
  t->sig = c->sig;
  t->inputs = c->inputs;
  t->outputs = c->outputs;
  t->code = TD_OK;
  t->done = call_done;
  t->run = NULL;
  t->deadline_ns = c->deadline_ns;
  t->model = c->model;
  t->started = c->metered || c->api->stats ? call_started : NULL;
  t->user = c;
  t->next = NULL;
  td_err_clear(&t->err);
}

bool srv_call_try_run_here(srv_call *c) {
  if (!c->api->queue) return false;
  /* With batching on, the batcher decides: only a request with nothing to
   * merge with runs here. */
  c->metered = c->mstats != NULL;
  c->queued = c->started = false;
  if (c->api->stats) c->submit_ns = td_now_ns();
  set_task(c);
  bool ran = c->api->batcher ? bat_batcher_try_run_here(c->api->batcher, &c->task)
                             : bat_queue_try_run_here(c->api->queue, &c->task);
  if (ran) call_finished(c);
  return ran;
}

td_code srv_call_submit(srv_call *c, td_err *err) {
  c->metered = c->mstats != NULL;
  c->started = false;
  c->queued = c->metered;
  if (c->api->stats) c->submit_ns = td_now_ns();
  set_task(c);
  if (c->queued) srv_metrics_queue_add(c->mstats, 1); /* before a worker can start it */
  td_code rc = c->api->batcher ? bat_batcher_submit(c->api->batcher, &c->task, err)
                               : bat_queue_submit(c->api->queue, &c->task, err);
  if (rc && c->queued) srv_metrics_queue_add(c->mstats, -1);
  return rc;
}

void srv_call_end(srv_call *c) {
  for (int i = 0; c->sig && i < c->sig->n_inputs; i++) eng_tensor_release(&c->inputs[i]);
  for (int i = 0; c->sig && i < c->sig->n_outputs; i++) eng_tensor_release(&c->outputs[i]);
  free(c->inputs);
  free(c->outputs);
  free(c->model);
  c->model = NULL;
  ldr_servable_unref(c->servable);
  c->inputs = c->outputs = NULL;
  c->servable = NULL;
  c->sig = NULL;
}

td_code srv_api_reload_config(srv_api *api, const struct Tensorflow__Serving__ModelServerConfig *config,
                              td_err *err) {
  if (!config ||
      config->config_case != TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "ServerModelConfig type not supported by HandleReloadConfigRequest. Only "
                      "ModelConfigList is currently supported");
  if (!api->manager)
    return td_err_set(err, TD_UNAVAILABLE, "this server does not manage model configs");
  cfg_model_config c;
  td_code rc = cfg_model_config_from_proto(config, &c, err);
  if (rc) {
    td_log_error("ReloadConfig failed: %s", err ? err->msg : "");
    return rc;
  }
  for (int i = 0; i < c.n_models; i++)
    td_log_info("ReloadConfig entry %d: name %s, base path %s", i, c.models[i].name,
                c.models[i].base_path);
  uint64_t ticket = 0;
  rc = ldr_manager_set_config(api->manager, &c, &ticket, err);
  cfg_model_config_free(&c);
  if (!rc) rc = ldr_manager_wait(api->manager, ticket, -1, err);
  if (rc) td_log_error("ReloadConfig failed: %s", err ? err->msg : "");
  return rc;
}
