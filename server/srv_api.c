#include "srv_api.h"

#include "bat_batcher.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cfg_model_config.h"
#include "ldr_manager.h"
#include "td_log.h"
#include "tensorflow_serving/config/model_server_config.pb-c.h"

static void call_done(bat_task *t) {
  srv_call *c = t->user;
  c->done(c);
}

td_code srv_call_begin(srv_call *c, srv_api *api, const srv_model_spec *spec, td_err *err) {
  memset(c, 0, offsetof(srv_call, task.err));
  td_err_clear(&c->task.err);
  c->api = api;
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
  c->version = ldr_servable_version(c->servable);
  /* Only the batcher reads the name (per-model parameters): no copy on the
   * unbatched hot path. */
  if (api->batcher && !(c->model = strdup(spec->name))) {
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
  t->user = c;
  t->next = NULL;
  td_err_clear(&t->err);
}

bool srv_call_try_inline(srv_call *c) {
  if (!c->api->queue) return false;
  set_task(c);
  /* With batching on, the batcher decides: only a request with nothing to
   * merge with runs inline. */
  if (c->api->batcher) return bat_batcher_try_inline(c->api->batcher, &c->task);
  return bat_queue_try_inline(c->api->queue, &c->task);
}

td_code srv_call_submit(srv_call *c, td_err *err) {
  set_task(c);
  if (c->api->batcher) return bat_batcher_submit(c->api->batcher, &c->task, err);
  return bat_queue_submit(c->api->queue, &c->task, err);
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
