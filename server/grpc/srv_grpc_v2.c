/* gRPC inference.GRPCInferenceService: the v2 protocol's health, metadata,
 * config, inference, statistics and repository RPCs (srv_v2.h for the
 * semantics shared with REST).
 *
 * ModelInfer decodes on the polling thread: each input is bound to its
 * signature slot and filled from raw_input_contents (copied: the request
 * bytes die with the handler) or from its typed contents, converted to the
 * tensor's dtype. The answer always carries raw_output_contents, which
 * point into the output tensors (no copy; BYTES are length-prefixed into a
 * buffer of the call), kept alive until the call is freed.
 *
 * The repository RPCs block while models load, so each runs on a thread of
 * its own, like HandleReloadConfigRequest. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "inference/v2_service.pb-c.h"
#include "srv_grpc_call.h"
#include "srv_stats.h"
#include "srv_v2.h"
#include "srv_v2repo.h"

#ifndef TENSORD_VERSION
#define TENSORD_VERSION "unknown"
#endif

/* --- health and server metadata --------------------------------------------- */

/* Reads a request that carries nothing tensord uses; false when it does
 * not parse (the call is answered then). */
static bool read_request(srv_gcall *c, const ProtobufCMessageDescriptor *d, const uint8_t *req,
                         size_t len) {
  ProtobufCMessage *r = srv_gcall_unpack(c, d, req, len);
  if (r) srv_gcall_free(c, r);
  return r != NULL;
}

void srv_grpc_v2_server_live(srv_gcall *c, const uint8_t *req, size_t len) {
  if (!read_request(c, &inference__server_live_request__descriptor, req, len)) return;
  Inference__ServerLiveResponse resp;
  inference__server_live_response__init(&resp);
  resp.live = 1;
  srv_gcall_reply(c, &resp.base);
}

void srv_grpc_v2_server_ready(srv_gcall *c, const uint8_t *req, size_t len) {
  if (!read_request(c, &inference__server_ready_request__descriptor, req, len)) return;
  Inference__ServerReadyResponse resp;
  inference__server_ready_response__init(&resp);
  resp.ready = ldr_registry_ready(c->api->registry);
  srv_gcall_reply(c, &resp.base);
}

static const char *const extensions[] = {"binary_tensor_data", "model_repository", "statistics"};

void srv_grpc_v2_server_metadata(srv_gcall *c, const uint8_t *req, size_t len) {
  if (!read_request(c, &inference__server_metadata_request__descriptor, req, len)) return;
  Inference__ServerMetadataResponse resp;
  inference__server_metadata_response__init(&resp);
  resp.name = SRV_V2_SERVER_NAME;
  resp.version = TENSORD_VERSION;
  resp.n_extensions = sizeof extensions / sizeof extensions[0];
  resp.extensions = (char **)extensions;
  srv_gcall_reply(c, &resp.base);
}

/* --- model readiness, metadata, config -------------------------------------- */

/* Resolves name + version to a held servable and the signature the v2 API
 * shows (srv_v2_acquire); gRPC requests may leave the name empty. */
static td_code acquire(srv_gcall *c, const char *name, const char *version, ldr_servable **sv,
                       const ldr_signature **sig, td_err *err) {
  if (!name || !*name) return td_err_set(err, TD_INVALID_ARGUMENT, "a model name is required");
  return srv_v2_acquire(c->api, name, version, sv, sig, err);
}

/* acquire for a handler: on failure frees the request and answers the
 * call with the error, and returns false. */
static bool acquire_or_fail(srv_gcall *c, ProtobufCMessage *r, const char *name,
                            const char *version, ldr_servable **sv, const ldr_signature **sig) {
  td_err err;
  if (!acquire(c, name, version, sv, sig, &err)) return true;
  srv_gcall_free(c, r);
  srv_gcall_fail(c, &err);
  return false;
}

void srv_grpc_v2_model_ready(srv_gcall *c, const uint8_t *req, size_t len) {
  Inference__ModelReadyRequest *r = (Inference__ModelReadyRequest *)srv_gcall_unpack(
      c, &inference__model_ready_request__descriptor, req, len);
  if (!r) return;
  ldr_servable *sv = NULL;
  const ldr_signature *sig = NULL;
  td_err err;
  bool ready = !acquire(c, r->name, r->version, &sv, &sig, &err);
  if (ready) ldr_servable_unref(sv);
  srv_gcall_free(c, &r->base);
  Inference__ModelReadyResponse resp;
  inference__model_ready_response__init(&resp);
  resp.ready = ready;
  srv_gcall_reply(c, &resp.base);
}

/* Storage for a metadata or config answer's tensors. */
typedef struct tensor_meta {
  Inference__ModelMetadataResponse__TensorMetadata tm;
  Inference__ModelInput in;
  Inference__ModelOutput out;
  int64_t dims[ENG_MAX_RANK];
} tensor_meta;

static tensor_meta *describe(const ldr_tensor_info *t, int n, int drop_batch) {
  tensor_meta *m = calloc((size_t)n + 1, sizeof *m);
  for (int i = 0; m && i < n; i++) {
    const char *dt = srv_v2_datatype(t[i].dtype);
    int rank = srv_v2_tensor_shape(&t[i], m[i].dims);
    inference__model_metadata_response__tensor_metadata__init(&m[i].tm);
    m[i].tm.name = t[i].alias;
    m[i].tm.datatype = (char *)(dt ? dt : "");
    m[i].tm.n_shape = (size_t)rank;
    m[i].tm.shape = m[i].dims;
    inference__model_input__init(&m[i].in);
    inference__model_output__init(&m[i].out);
    const ProtobufCEnumValue *type = protobuf_c_enum_descriptor_get_value_by_name(
        &inference__data_type__descriptor, srv_v2_config_type(t[i].dtype));
    int skip = drop_batch && rank > 0 ? 1 : 0;
    m[i].in.name = m[i].out.name = t[i].alias;
    m[i].in.data_type = m[i].out.data_type =
        type ? (Inference__DataType)type->value : INFERENCE__DATA_TYPE__TYPE_INVALID;
    m[i].in.n_dims = m[i].out.n_dims = (size_t)(rank - skip);
    m[i].in.dims = m[i].out.dims = m[i].dims + skip;
  }
  return m;
}

/* The AVAILABLE versions of a model, as decimal strings in one block. */
static char **available_versions(srv_api *api, const char *name, size_t *n) {
  int64_t *v = NULL;
  int k = srv_v2_available_versions(api, name, &v);
  *n = 0;
  if (k < 0) return NULL;
  char **s = calloc((size_t)k + 1, sizeof *s + 24);
  char *text = s ? (char *)(s + k + 1) : NULL;
  for (int i = 0; s && i < k; i++) {
    s[i] = text + 24 * i;
    snprintf(s[i], 24, "%lld", (long long)v[i]);
  }
  if (s) *n = (size_t)k;
  free(v);
  return s;
}

void srv_grpc_v2_model_metadata(srv_gcall *c, const uint8_t *req, size_t len) {
  Inference__ModelMetadataRequest *r = (Inference__ModelMetadataRequest *)srv_gcall_unpack(
      c, &inference__model_metadata_request__descriptor, req, len);
  if (!r) return;
  ldr_servable *sv = NULL;
  const ldr_signature *sig = NULL;
  if (!acquire_or_fail(c, &r->base, r->name, r->version, &sv, &sig)) return;
  tensor_meta *in = describe(sig->inputs, sig->n_inputs, 0);
  tensor_meta *out = describe(sig->outputs, sig->n_outputs, 0);
  Inference__ModelMetadataResponse__TensorMetadata **ip =
      calloc((size_t)sig->n_inputs + 1, sizeof *ip);
  Inference__ModelMetadataResponse__TensorMetadata **op =
      calloc((size_t)sig->n_outputs + 1, sizeof *op);
  size_t nv = 0;
  char **versions = available_versions(c->api, r->name, &nv);
  if (!in || !out || !ip || !op || !versions) {
    srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    for (int i = 0; i < sig->n_inputs; i++) ip[i] = &in[i].tm;
    for (int i = 0; i < sig->n_outputs; i++) op[i] = &out[i].tm;
    Inference__ModelMetadataResponse resp;
    inference__model_metadata_response__init(&resp);
    resp.name = r->name;
    resp.n_versions = nv;
    resp.versions = versions;
    resp.platform = SRV_V2_PLATFORM;
    resp.n_inputs = (size_t)sig->n_inputs;
    resp.inputs = ip;
    resp.n_outputs = (size_t)sig->n_outputs;
    resp.outputs = op;
    srv_gcall_reply(c, &resp.base);
  }
  srv_gcall_free(c, &r->base);
  ldr_servable_unref(sv);
  free(in), free(out), free(ip), free(op), free(versions);
}

void srv_grpc_v2_model_config(srv_gcall *c, const uint8_t *req, size_t len) {
  Inference__ModelConfigRequest *r = (Inference__ModelConfigRequest *)srv_gcall_unpack(
      c, &inference__model_config_request__descriptor, req, len);
  if (!r) return;
  ldr_servable *sv = NULL;
  const ldr_signature *sig = NULL;
  if (!acquire_or_fail(c, &r->base, r->name, r->version, &sv, &sig)) return;
  int maxb = srv_v2_max_batch(sig);
  tensor_meta *in = describe(sig->inputs, sig->n_inputs, maxb > 0);
  tensor_meta *out = describe(sig->outputs, sig->n_outputs, maxb > 0);
  Inference__ModelInput **ip = calloc((size_t)sig->n_inputs + 1, sizeof *ip);
  Inference__ModelOutput **op = calloc((size_t)sig->n_outputs + 1, sizeof *op);
  if (!in || !out || !ip || !op) {
    srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    for (int i = 0; i < sig->n_inputs; i++) ip[i] = &in[i].in;
    for (int i = 0; i < sig->n_outputs; i++) op[i] = &out[i].out;
    Inference__ModelConfig cfg;
    inference__model_config__init(&cfg);
    cfg.name = r->name;
    cfg.platform = SRV_V2_PLATFORM;
    cfg.backend = "tensord";
    cfg.max_batch_size = maxb;
    cfg.n_input = (size_t)sig->n_inputs;
    cfg.input = ip;
    cfg.n_output = (size_t)sig->n_outputs;
    cfg.output = op;
    Inference__ModelConfigResponse resp;
    inference__model_config_response__init(&resp);
    resp.config = &cfg;
    srv_gcall_reply(c, &resp.base);
  }
  srv_gcall_free(c, &r->base);
  ldr_servable_unref(sv);
  free(in), free(out), free(ip), free(op);
}
