/* srv_v2rest: the v2 protocol's REST API (KServe v2 / Open Inference
 * Protocol), served by srv_rest on the REST port beside TF Serving's /v1.
 *
 *   GET  /v2                                         server metadata
 *   GET  /v2/health/live | /v2/health/ready          200, or 503 not ready
 *   GET  /v2/models/{m}[/versions/{v}]               model metadata
 *   GET  /v2/models/{m}[/versions/{v}]/ready         200, else the error
 *   GET  /v2/models/{m}[/versions/{v}]/config        model config (the
 *                                                    fields clients read)
 *   GET  /v2/models[/{m}[/versions/{v}]]/stats       statistics extension
 *   POST /v2/models/{m}[/versions/{v}]/infer         inference
 *   POST /v2/repository/index                        {"ready": bool}
 *   POST /v2/repository/models/{m}/load | /unload    repository extension
 *
 * Inference bodies: a JSON object {"id", "parameters", "inputs": [{"name",
 * "shape", "datatype", "parameters", "data"}], "outputs": [{"name",
 * "parameters"}]}; "data" is a flat or nested list in row-major order
 * (numbers, true/false for BOOL, strings for BYTES). The binary tensor data
 * extension: with an Inference-Header-Content-Length header the JSON is the
 * first that many bytes and the rest holds, in input order, the raw data of
 * every input whose parameters carry "binary_data_size" (srv_v2.h layout).
 * An output is returned binary when its parameters say "binary_data": true,
 * or, for outputs without that parameter, when the request's parameters say
 * "binary_data_output": true; then the body is the JSON header (its length in
 * the Inference-Header-Content-Length response header) followed by those
 * outputs' raw data, each described by "parameters": {"binary_data_size"}.
 * FP16 and BF16 travel binary only. The request parameter "signature_name"
 * selects a signature (default serving_default).
 *
 * Errors are {"error": "<message>"} with the HTTP status of the one status
 * table; an unknown /v2 path answers 404 in the same shape.
 *
 * Threads: no state; any thread. srv_v2rest_repository blocks while models
 * load (the caller runs it off the I/O threads). */
#ifndef SRV_V2REST_H
#define SRV_V2REST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "srv_api.h"
#include "td_buf.h"
#include "td_status.h"

typedef enum {
  SRV_V2_NOT_FOUND,
  SRV_V2_SERVER_META,
  SRV_V2_LIVE,
  SRV_V2_READY,
  SRV_V2_MODEL_META,
  SRV_V2_MODEL_READY,
  SRV_V2_MODEL_CONFIG,
  SRV_V2_STATS,
  SRV_V2_INFER,
  SRV_V2_REPO_INDEX, /* blocking kinds from here on */
  SRV_V2_REPO_LOAD,
  SRV_V2_REPO_UNLOAD,
} srv_v2_kind;

typedef struct srv_v2_route {
  srv_v2_kind kind;
  const char *name;    /* NULL when the path has none */
  const char *version; /* "" when the path has none */
  char buf[1024];
} srv_v2_route;

/* True for "/v2" and paths under "/v2/" (then *r is filled; unknown forms
 * are SRV_V2_NOT_FOUND). */
bool srv_v2rest_route(const char *method, const char *path, srv_v2_route *r);
/* True for the kinds srv_v2rest_repository answers. */
bool srv_v2rest_blocking(const srv_v2_route *r);

/* A response: status, body, content type, and for binary bodies the JSON
 * header's length (0 otherwise). */
typedef struct srv_v2_reply {
  int status;
  td_buf body;
  size_t header_len;
  bool binary;
} srv_v2_reply;

/* Metadata, readiness, config and statistics: answers at once. */
void srv_v2rest_answer(srv_api *api, const srv_v2_route *r, srv_v2_reply *out);
/* Repository index, load and unload: blocks. */
void srv_v2rest_repository(srv_api *api, const srv_v2_route *r, const char *body, size_t len,
                           srv_v2_reply *out);
/* An error reply. */
void srv_v2rest_error(const td_err *e, srv_v2_reply *out);

/* Inference. begin: parses the body (header_len: the request's
 * Inference-Header-Content-Length, or -1 without one), begins the call and
 * fills its inputs; *state (owned by the caller, freed with
 * srv_v2rest_infer_free, also after a failure) remembers the outputs asked
 * for. encode: the finished call's reply. */
typedef struct srv_v2_infer srv_v2_infer;
td_code srv_v2rest_infer_begin(srv_call *c, srv_api *api, const srv_v2_route *r, const char *body,
                               size_t len, int64_t header_len, srv_v2_infer **state, td_err *err);
void srv_v2rest_infer_encode(const srv_v2_infer *s, const srv_call *c, srv_v2_reply *out);
void srv_v2rest_infer_free(srv_v2_infer *s);

#endif
