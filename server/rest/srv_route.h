/* srv_route: parses REST request lines into TF Serving API calls.
 *
 * Mirrors TF Serving's URL grammar (case-insensitive on the fixed parts):
 *   GET  /v1/models/{name}[/versions/{N}|/labels/{L}][/metadata]
 *   POST /v1/models/{name}[/versions/{N}|/labels/{L}]:(predict|classify|regress)
 * The verb after ':' is compared case-sensitively, as TF Serving does. The
 * path is the raw request target (not yet percent-decoded): name and label
 * are percent-decoded here, as TF Serving's curl_easy_unescape does, so a
 * "%2F" in a name is part of the name, not a separator. A %00 in either is
 * refused ("Failed to decode model name:<raw>").
 *
 * Beyond TF Serving: GET /v1/models (exactly) is SRV_ROUTE_LIST, where TF
 * Serving answers "Missing model name in request."; GET or HEAD /healthz and
 * /readyz are SRV_ROUTE_HEALTH / SRV_ROUTE_READY. OPTIONS on any /v1/ path is
 * SRV_ROUTE_PREFLIGHT (the transport decides whether CORS is on). "/v2" and
 * paths under "/v2/" are SRV_ROUTE_V2, parsed further by srv_v2rest. A path
 * outside both is SRV_ROUTE_NOT_V1 (plain 404); anything else that does not
 * match is SRV_ROUTE_MALFORMED ("Malformed request: <METHOD> <path>").
 * Pure function; thread-safe. Name and label point into a buffer inside the
 * route value. */
#ifndef SRV_ROUTE_H
#define SRV_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include "td_status.h"

typedef enum {
  SRV_ROUTE_NOT_V1,
  SRV_ROUTE_MALFORMED,
  SRV_ROUTE_STATUS,
  SRV_ROUTE_METADATA,
  SRV_ROUTE_PREDICT,
  SRV_ROUTE_CLASSIFY,
  SRV_ROUTE_REGRESS,
  SRV_ROUTE_LIST,      /* GET /v1/models: every model (tensord's own) */
  SRV_ROUTE_HEALTH,    /* GET /healthz: the process is alive */
  SRV_ROUTE_READY,     /* GET /readyz: every model has an AVAILABLE version */
  SRV_ROUTE_PREFLIGHT, /* OPTIONS under /v1/ (CORS preflight) */
  SRV_ROUTE_V2,        /* "/v2" or under "/v2/": the v2 protocol (srv_v2rest) */
} srv_route_kind;

typedef struct srv_route {
  srv_route_kind kind;
  const char *name;  /* model name */
  bool has_version;
  int64_t version;
  const char *label; /* NULL unless /labels/L */
  char buf[4096]; /* name and label copies; longer paths are refused as malformed */
} srv_route;

/* Returns TD_OK with the route, or INVALID_ARGUMENT with TF Serving's
 * message for malformed paths and bad version numbers (kind MALFORMED). */
td_code srv_route_parse(const char *method, const char *path, srv_route *r, td_err *err);

#endif
