/* gRPC handlers that answer from the registry without running a model:
 * ModelService (GetModelStatus, HandleReloadConfigRequest) and the health
 * service, plus the ModelSpec conversions every handler shares.
 *
 * HandleReloadConfigRequest blocks until the new models are loaded, so it
 * runs on a thread of its own (reloads are rare); like TF Serving it always
 * answers OK at the gRPC level and reports the reload's outcome in the
 * response's StatusProto. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "grpc/health/v1/health.pb-c.h"
#include "srv_grpc_call.h"
#include "td_log.h"
#include "tensorflow_serving/apis/get_model_status.pb-c.h"
#include "tensorflow_serving/apis/model_management.pb-c.h"

void srv_gspec_from_proto(const Tensorflow__Serving__ModelSpec *ms, srv_model_spec *out) {
  memset(out, 0, sizeof *out);
  if (!ms) return;
  out->name = ms->name;
  out->signature_name = ms->signature_name;
  if (ms->version_choice_case == TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION) {
    out->has_version = true;
    out->version = ms->version ? ms->version->value : 0;
  } else if (ms->version_choice_case ==
             TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION_LABEL) {
    out->label = ms->version_label;
  }
}

void srv_gspec_make(srv_gspec *o, const char *name, int64_t version, const char *signature) {
  tensorflow__serving__model_spec__init(&o->spec);
  google__protobuf__int64_value__init(&o->version);
  o->version.value = version;
  o->spec.name = (char *)name;
  o->spec.version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
  o->spec.version = &o->version;
  if (signature) o->spec.signature_name = (char *)(*signature ? signature : SRV_DEFAULT_SIGNATURE);
}

/* --- GetModelStatus ----------------------------------------------------- */

void srv_grpc_get_model_status(srv_gcall *c, const uint8_t *req, size_t len) {
  Tensorflow__Serving__GetModelStatusRequest *r =
      (Tensorflow__Serving__GetModelStatusRequest *)srv_gcall_unpack(
          c, &tensorflow__serving__get_model_status_request__descriptor, req, len);
  if (!r) return;
  if (!r->model_spec) {
    srv_gcall_free(c, &r->base);
    srv_gcall_failf(c, TD_INVALID_ARGUMENT, "Missing ModelSpec");
    return;
  }
  /* As TF Serving, a version label selects nothing: without a version the
   * answer lists every version the server remembers, failed ones too. */
  srv_model_spec spec;
  srv_gspec_from_proto(r->model_spec, &spec);
  ldr_version_status *st = NULL;
  int n = 0;
  td_err err;
  td_code rc = ldr_registry_status(c->api->registry, spec.name,
                                   spec.has_version ? spec.version : -1, &st, &n, &err);
  srv_gcall_free(c, &r->base);
  if (rc) {
    srv_gcall_fail(c, &err);
    return;
  }
  Tensorflow__Serving__ModelVersionStatus *mvs = calloc((size_t)n + 1, sizeof *mvs);
  Tensorflow__Serving__ModelVersionStatus **mvp = calloc((size_t)n + 1, sizeof *mvp);
  Tensorflow__Serving__StatusProto *sp = calloc((size_t)n + 1, sizeof *sp);
  if (!mvs || !mvp || !sp) {
    free(mvs), free(mvp), free(sp), free(st);
    srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  for (int i = 0; i < n; i++) {
    tensorflow__serving__model_version_status__init(&mvs[i]);
    tensorflow__serving__status_proto__init(&sp[i]);
    mvs[i].version = st[i].version;
    mvs[i].state = (Tensorflow__Serving__ModelVersionStatus__State)st[i].state;
    sp[i].error_code = (Tensorflow__Error__Code)st[i].status.code;
    sp[i].error_message = st[i].status.msg;
    mvs[i].status = &sp[i];
    mvp[i] = &mvs[i];
  }
  Tensorflow__Serving__GetModelStatusResponse resp;
  tensorflow__serving__get_model_status_response__init(&resp);
  resp.n_model_version_status = (size_t)n;
  resp.model_version_status = mvp;
  srv_gcall_reply(c, &resp.base);
  free(mvs), free(mvp), free(sp), free(st);
}

/* --- HandleReloadConfigRequest ------------------------------------------ */

typedef struct reload_job {
  srv_gcall *c;
  Tensorflow__Serving__ReloadConfigRequest *req;
} reload_job;

static void reload_thread(void *arg) {
  reload_job *job = arg;
  srv_gcall *c = job->c;
  td_err err;
  td_err_clear(&err);
  const Tensorflow__Serving__ModelServerConfig *config = job->req->config;
  Tensorflow__Serving__ModelServerConfig empty;
  if (!config) { /* an absent config is an empty one, as in proto3 C++ */
    tensorflow__serving__model_server_config__init(&empty);
    config = &empty;
  }
  td_code rc = srv_api_reload_config(c->api, config, &err);
  if (rc) td_log_warn("HandleReloadConfigRequest: %s", err.msg);
  srv_gcall_free(c, &job->req->base);
  free(job);

  /* tensord keeps no metrics yet, so metric_names select nothing. */
  Tensorflow__Serving__StatusProto status;
  tensorflow__serving__status_proto__init(&status);
  status.error_code = (Tensorflow__Error__Code)rc;
  status.error_message = rc ? err.msg : "";
  Tensorflow__Serving__ReloadConfigResponse resp;
  tensorflow__serving__reload_config_response__init(&resp);
  resp.status = &status;
  srv_gcall_reply(c, &resp.base);
}

void srv_grpc_reload_config(srv_gcall *c, const uint8_t *req, size_t len) {
  Tensorflow__Serving__ReloadConfigRequest *r =
      (Tensorflow__Serving__ReloadConfigRequest *)srv_gcall_unpack(
          c, &tensorflow__serving__reload_config_request__descriptor, req, len);
  if (!r) return;
  reload_job *job = malloc(sizeof *job);
  uv_thread_t tid;
  if (job) {
    *job = (reload_job){.c = c, .req = r};
    if (!uv_thread_create(&tid, reload_thread, job)) {
      pthread_detach(tid); /* uv_thread_t is a pthread_t on Unix */
      return;
    }
    free(job);
  }
  srv_gcall_free(c, &r->base);
  srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "cannot start a thread for the config reload");
}

/* --- grpc.health.v1.Health/Check ---------------------------------------- */

/* The services TF Serving registers with the health service, by the short
 * names it uses and by their full names, plus "" for the whole server. */
static const char *const health_services[] = {"", "PredictionService", "ModelService",
                                              "tensorflow.serving.PredictionService",
                                              "tensorflow.serving.ModelService"};

void srv_grpc_health_check(srv_gcall *c, const uint8_t *req, size_t len) {
  Grpc__Health__V1__HealthCheckRequest *r =
      (Grpc__Health__V1__HealthCheckRequest *)srv_gcall_unpack(
          c, &grpc__health__v1__health_check_request__descriptor, req, len);
  if (!r) return;
  bool known = false;
  for (size_t i = 0; i < sizeof health_services / sizeof health_services[0]; i++)
    known |= !strcmp(r->service, health_services[i]);
  srv_gcall_free(c, &r->base);
  if (!known) {
    /* What gRPC's own health service answers for a name it does not know. */
    srv_gcall_failf(c, TD_NOT_FOUND, "service name unknown");
    return;
  }
  Grpc__Health__V1__HealthCheckResponse resp;
  grpc__health__v1__health_check_response__init(&resp);
  resp.status = atomic_load(&c->cfg->draining)
                    ? GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING
                    : GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
  srv_gcall_reply(c, &resp.base);
}
