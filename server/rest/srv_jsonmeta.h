/* srv_jsonmeta: the REST API's status, metadata, model-list and probe JSON.
 *
 * What. TF Serving writes version status and model metadata with
 * protobuf's JSON printer (add_whitespace, always_print_primitive_fields),
 * not with rapidjson, so these bodies have their own layout: one-space
 * indent per level, ": " after keys, "[]" / "{}" for empty lists and maps,
 * int64 values as strings ("123"), enums by name, fields in the proto's
 * printing order (plain fields in declaration order, then the set member of
 * a oneof), and a newline after the root. This module writes that layout:
 *
 *   status    {"model_version_status": [{"version": "123", "state":
 *             "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}]}
 *   metadata  TF Serving's hand-joined GetModelMetadataResponse:
 *             "{\n\"model_spec\":" <ModelSpec> ",\n\"metadata\": {\"signature_def\": "
 *             <SignatureDefMap> "}\n}\n", where ModelSpec prints name,
 *             signature_name (""), version ("123") and every SignatureDef
 *             prints inputs, outputs, method_name, defaults; each TensorInfo
 *             prints dtype, tensor_shape (dim list of {"size": "-1", "name":
 *             ""}, unknown_rank), name. Signatures appear sorted by key.
 *   list      tensord's GET /v1/models (TF Serving has none):
 *             {"models": [{"name": "m", "model_version_status": [...]}]}
 *             with the status entries exactly as above, models sorted by name.
 *   probes    {"status": "alive"} for /healthz; {"ready": true|false,
 *             "models_not_ready": ["m", ...]} for /readyz.
 *
 * Limits. SignatureDef "defaults" (TF 2.15+ default values of optional
 * inputs) are not kept by the loader; they print as {} (README: not
 * supported).
 *
 * Ownership and threads. Appends to a caller-owned td_buf (out of memory
 * shows as its oom flag); no state, so any thread may call concurrently.
 * The servable must be held (referenced) by the caller for the call. */
#ifndef SRV_JSONMETA_H
#define SRV_JSONMETA_H

#include <stdbool.h>
#include <stdint.h>

#include "ldr_registry.h"
#include "ldr_servable.h"
#include "td_buf.h"

void srv_json_encode_status(const ldr_version_status *st, int n, td_buf *out);

void srv_json_encode_metadata(const char *model_name, int64_t version, const ldr_servable *sv,
                              td_buf *out);

typedef struct srv_json_model_status {
  const char *name;
  const ldr_version_status *versions; /* sorted by version */
  int n_versions;
} srv_json_model_status;

void srv_json_encode_model_list(const srv_json_model_status *models, int n, td_buf *out);

void srv_json_encode_health(td_buf *out);
void srv_json_encode_ready(bool ready, const char *const *not_ready, int n, td_buf *out);

#endif
