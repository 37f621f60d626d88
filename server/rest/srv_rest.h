/* srv_rest: TF Serving's REST API over libmicrohttpd.
 *
 * Serves, as TF Serving does (its documented REST API):
 *   GET  /v1/models/{name}[/versions/{N}|/labels/{L}]            status
 *   GET  /v1/models/{name}[/versions/{N}|/labels/{L}]/metadata   metadata
 *   POST /v1/models/{name}[/versions/{N}|/labels/{L}]:predict|:classify|:regress
 * and, beyond TF Serving, GET /v1/models (every model and its versions),
 * GET /healthz (200 while the process serves) and GET /readyz (200 when
 * every configured model has an AVAILABLE version, else 503; 503 also once
 * srv_rest_drain has been called). Malformed
 * /v1/ requests and other methods answer "Malformed request: METHOD path"
 * (400); paths outside /v1/ (and not a probe) get a plain 404. Every /v1/
 * and probe response is JSON; errors are {"error": "..."} with the HTTP
 * status of the shared status table. Bodies are written by srv_json
 * (predict), srv_jsonexample (classify/regress) and srv_jsonmeta (status,
 * metadata, list, probes).
 *
 * Transport options (TF Serving's flags where it has them):
 *   n_threads       MHD polling threads, each with its own epoll loop.
 *   max_body_bytes  a body above it answers 413 as soon as that is known:
 *                   from Content-Length before reading, or while reading /
 *                   inflating; nothing beyond the limit is buffered. The
 *                   limit applies to the inflated body of gzip requests too.
 *   request head    the request line and the headers together may take
 *                   SRV_REST_MAX_HEAD_BYTES as sent: past it a request line
 *                   alone answers 414, else 431, both {"error": "..."}
 *                   naming the sizes (the body, if any, is read and
 *                   dropped). Heads past the per-connection memory
 *                   libmicrohttpd is given (128 KiB), and its other own
 *                   refusals (505, malformed chunk sizes or Content-Length)
 *                   are answered by libmicrohttpd before any callback runs,
 *                   with its built-in HTML bodies.
 *   gzip            a Content-Encoding naming gzip is inflated (zlib) as the
 *                   body arrives; corrupt data answers 400.
 *   timeout_ms      >0 bounds the time from queueing a model run to its
 *                   result: past it the request answers 504 DEADLINE_EXCEEDED
 *                   ("Timed out waiting for notification"). The engine run is
 *                   not interruptible: it finishes in the background and its
 *                   result is dropped (the worker frees it). Checked on a
 *                   coarse tick (timeout/10, 1-100 ms).
 *   cors            adds Access-Control-Allow-{Origin: *, Methods: POST, GET,
 *                   Headers: Content-Type} to /v1/ responses, and answers
 *                   OPTIONS /v1/... preflights (200 when Origin is http(s)://,
 *                   else 400 "Origin header is missing in CORS preflight").
 *                   Without it OPTIONS is a malformed request.
 *
 * Request path: the MHD thread reads the body, decodes JSON into tensors at
 * the edge, acquires the model version, submits a bat_task and suspends the
 * connection. An engine worker runs the task and resumes the connection;
 * the MHD thread then encodes the reply. A short run may instead run on the
 * MHD thread itself, when srv_call_try_run_here takes it (a worker idle,
 * the signature's runs measured short: bat_queue.h); the reply is then
 * encoded in the same handler call, without suspending.
 *
 * Threads: start/stop from the main thread. The registry and queue must
 * outlive the server; stop the server before destroying the queue (runs
 * still queued then finish on the workers and are freed there). */
#ifndef SRV_REST_H
#define SRV_REST_H

#include <stdbool.h>
#include <stddef.h>

#include "bat_queue.h"
#include "ldr_registry.h"
#include "td_status.h"

typedef struct srv_rest srv_rest;

#define SRV_REST_MAX_HEAD_BYTES (32 * 1024) /* request line + headers */

typedef struct srv_rest_options {
  int port;
  int n_threads;         /* MHD polling threads (>= 1) */
  size_t max_body_bytes; /* request bodies above this get 413 */
  /* Most bytes one request's decoded inputs may take (0: no bound); a
   * body that would decode past it gets 413 before the input that passes
   * it is allocated. */
  size_t max_input_bytes;
  int timeout_ms;        /* model-run deadline; <= 0: none */
  bool cors;             /* --rest_api_enable_cors_support */
  ldr_registry *registry;
  bat_queue *queue;
  struct bat_batcher *batcher; /* NULL unless --enable_batching */
  struct ldr_manager *manager; /* the v2 repository extension; may be NULL */
  struct srv_stats *stats;     /* run counters (srv_stats.h); may be NULL */
  struct srv_v2repo *repo;     /* v2 load/unload/index; NULL: refused */
  /* GET on exactly this path answers the Prometheus text exposition
   * (srv_metrics_render, Content-Type text/plain; version=0.0.4); NULL or
   * "": no metrics page. Predict/Classify/Regress requests are counted in
   * srv_metrics whenever td_metrics_enabled(). */
  const char *metrics_path;
} srv_rest_options;

td_code srv_rest_start(const srv_rest_options *opt, srv_rest **out, td_err *err);
/* Port actually bound (useful with port 0). */
int srv_rest_port(const srv_rest *s);
/* Graceful shutdown, step zero (optional): from now on /readyz answers
 * 503 {"ready": false, "draining": true, ...} so load balancers stop
 * sending traffic, while every other request is still served as before.
 * Thread-safe; cannot be undone. */
void srv_rest_drain(srv_rest *s);
/* Graceful shutdown, step one: shuts the listening socket down so no new
 * connection is accepted (srv_rest_stop closes it once the daemon has
 * stopped); requests already received still get their answers.
 * srv_rest_stop follows. */
void srv_rest_quiesce(srv_rest *s);
void srv_rest_stop(srv_rest *s);

#endif
