/* srv_rest: TF Serving's REST API over libmicrohttpd.
 *
 * Serves GET /v1/models/{name}[/versions/{N}] (version status) and
 * POST /v1/models/{name}[/versions/{N}]:predict. Other /v1/ routes answer
 * as TF Serving does where that is an error, and UNIMPLEMENTED (501) for
 * APIs not built yet (metadata, classify, regress). Paths outside /v1/ get
 * a plain 404. Every /v1/ response is JSON; errors are {"error": "..."} with
 * the HTTP status from the shared status table.
 *
 * Request path: the MHD thread reads the body (bounded: larger bodies get
 * 413 without being buffered), decodes JSON into tensors at the edge,
 * acquires the model version, submits a bat_task, and suspends the
 * connection. An engine worker runs the task and resumes the connection;
 * the MHD thread then encodes the reply. MHD threads never run a model.
 *
 * Threads: start/stop from the main thread. The registry and queue must
 * outlive the server. */
#ifndef SRV_REST_H
#define SRV_REST_H

#include <stddef.h>

#include "bat_queue.h"
#include "ldr_registry.h"
#include "td_status.h"

typedef struct srv_rest srv_rest;

typedef struct srv_rest_options {
  int port;
  int n_threads;         /* MHD polling threads (>= 1) */
  size_t max_body_bytes; /* request bodies above this get 413 */
  ldr_registry *registry;
  bat_queue *queue;
} srv_rest_options;

td_code srv_rest_start(const srv_rest_options *opt, srv_rest **out, td_err *err);
/* Port actually bound (useful with port 0). */
int srv_rest_port(const srv_rest *s);
void srv_rest_stop(srv_rest *s);

#endif
