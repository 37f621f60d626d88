/* srv_route: parses REST request lines into TF Serving API calls.
 *
 * Mirrors TF Serving's URL grammar (case-insensitive on the fixed parts):
 *   GET  /v1/models/{name}[/versions/{N}|/labels/{L}][/metadata]
 *   POST /v1/models/{name}[/versions/{N}|/labels/{L}]:(predict|classify|regress)
 * The verb after ':' is compared case-sensitively, as TF Serving does. A path
 * outside /v1/ is SRV_ROUTE_NOT_V1 (plain 404); anything else that does not
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
} srv_route_kind;

typedef struct srv_route {
  srv_route_kind kind;
  const char *name;  /* model name */
  bool has_version;
  int64_t version;
  const char *label; /* NULL unless /labels/L */
  char buf[512];
} srv_route;

/* Returns TD_OK with the route, or INVALID_ARGUMENT with TF Serving's
 * message for malformed paths and bad version numbers (kind MALFORMED). */
td_code srv_route_parse(const char *method, const char *path, srv_route *r, td_err *err);

#endif
