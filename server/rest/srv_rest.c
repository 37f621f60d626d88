/* Each connection carries a rest_req through MHD's access-handler calls:
 * the first call (headers) routes and sizes the body, middle calls append
 * (or inflate) the body, and the last call either answers at once (status,
 * metadata, errors, and model runs taken on this thread) or starts a model run and
 * suspends. When the run ends (or its deadline passes) the connection is
 * resumed, MHD calls the handler once more, and the reply is encoded on the
 * MHD thread.
 *
 * Runs here: before queueing, a run is offered to srv_call_try_run_here,
 * which runs it on this MHD thread when the plan is known to be short and
 * an engine worker is idle (bat_queue.h), and, with batching on, nothing
 * is there to merge it with (bat_batcher.h). Such a request never suspends or
 * enters the run list: it is answered in the same handler call, and a run
 * that finished past the deadline answers 504 like one given up on.
 *
 * A queued model run (rest_run) lives apart from the connection because it
 * can outlive it: when the deadline passes, the connection answers 504 and
 * the worker, finishing later, frees the run. Who owns a run is decided
 * under the server's mutex by its state: RUNNING (both may still touch it),
 * DONE (the worker resumed the connection, which now owns it) or EXPIRED
 * (the connection gave up; the worker owns it). Every submitted run is on
 * the server's FIFO list (all share one timeout, so FIFO order is deadline
 * order); the watcher thread expires the head as deadlines pass, and
 * srv_rest_stop expires them all so no connection stays suspended. */
#include "srv_rest.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>
#include <zlib.h>

#include "srv_api.h"
#include "srv_infer.h"
#include "srv_inferpb.h"
#include "srv_json.h"
#include "srv_jsonexample.h"
#include "srv_jsonmeta.h"
#include "srv_metrics.h"
#include "srv_reqlog.h"
#include "srv_route.h"
#include "srv_v2rest.h"
#include "td_buf.h"
#include "td_clock.h"
#include "td_log.h"

#define PRESIZE_MAX ((size_t)4 << 20) /* trust Content-Length this far */
#define INFLATE_STEP ((size_t)64 << 10)
/* MHD can queue a reply only before the body or after all of it: a body
 * found too large midway (chunked, or gzip inflating past the limit) is
 * read and discarded up to this much more, then answered 413; past it the
 * connection is closed. Discarding costs no memory, so the bound is wide:
 * clients that stream a body past the limit still get their 413. */
#define DRAIN_MAX ((size_t)64 << 20)
/* libmicrohttpd keeps a request's head in the connection's memory and
 * answers a head that does not fit with its own HTML 414 / 431. Four times
 * SRV_REST_MAX_HEAD_BYTES lets heads well past that limit reach
 * first_call, which refuses them in JSON; the larger memory also takes
 * bodies in larger reads. */
#define MHD_MEMORY_LIMIT ((size_t)4 * SRV_REST_MAX_HEAD_BYTES)

typedef struct rest_req rest_req;
typedef struct rest_run rest_run;

typedef enum { RUN_RUNNING, RUN_DONE, RUN_EXPIRED } run_state;

struct rest_run {
  srv_rest *srv;
  rest_req *q;
  run_state state; /* under srv->mu once submitted */
  bool submitted;
  bool linked;
  uint64_t deadline; /* td_now_ns() ns; UINT64_MAX: none */
  rest_run *prev, *next;
  srv_route_kind kind;
  srv_json_format fmt; /* predict */
  int n_examples;      /* classify / regress */
  srv_v2_infer *v2;    /* v2 infer: the outputs asked for */
  srv_call call;       /* last: srv_call_begin initialises it */
};

struct srv_rest {
  struct MHD_Daemon *d;
  srv_rest_options opt;
  srv_api api;
  int port;
  uv_mutex_t mu;
  uv_cond_t cv;
  uv_thread_t watcher;
  bool has_watcher;
  bool stopping;
  atomic_bool draining; /* srv_rest_drain: /readyz answers 503 */
  int in_engine;        /* submitted runs whose done() has not run yet */
  int jobs;             /* v2 repository requests running on their own threads */
  rest_run *head, *tail;
  /* The listening socket MHD handed back (srv_rest_quiesce), closed once
   * it has stopped; -1 before. */
  int quiesced_fd;
};

struct rest_req {
  srv_rest *srv;
  struct MHD_Connection *conn;
  srv_route route;
  td_code route_rc;
  td_buf body;
  bool answered;  /* a response was queued before the body was read */
  bool suspended; /* waiting for its run */
  bool expired;   /* the run's deadline passed (set by the watcher) */
  bool too_large; /* the body passed the limit midway: discarding the rest */
  bool decoded_too_large; /* its inputs would take more than a request may */
  unsigned head_status;   /* 414 / 431: the head passed SRV_REST_MAX_HEAD_BYTES */
  size_t head_bytes;
  size_t drained;
  bool gzip, z_open, z_end;
  z_stream z;
  td_code body_rc;      /* a body error found while reading (gzip) */
  rest_run *run;        /* owned by the connection unless handed to the worker */
  srv_v2_route *v2;     /* SRV_ROUTE_V2 only */
  srv_v2_reply *v2_job; /* a repository request's reply, filled on its thread */
  uint64_t start_ns;    /* metrics: arrival, the answer's code, the run's time */
  td_code answer_code;
  bool counted; /* the metrics have this request */
  uint64_t run_ns;
  /* Last and not zeroed (2 KiB each): read only once their code is set. */
  td_err route_err;
  td_err body_err;
};

/* --- the run list -------------------------------------------------------- */

static void unlink_run(srv_rest *s, rest_run *r) {
  if (!r->linked) return;
  if (r->prev)
    r->prev->next = r->next;
  else
    s->head = r->next;
  if (r->next)
    r->next->prev = r->prev;
  else
    s->tail = r->prev;
  r->prev = r->next = NULL;
  r->linked = false;
}

static void link_run(srv_rest *s, rest_run *r) {
  r->prev = s->tail;
  r->next = NULL;
  if (s->tail)
    s->tail->next = r;
  else
    s->head = r;
  s->tail = r;
  r->linked = true;
}

/* Under s->mu: gives up on a RUNNING run (the worker will free it) and
 * wakes its connection to answer 504. */
static void expire_run(rest_run *r) {
  r->state = RUN_EXPIRED;
  r->q->expired = true;
  MHD_resume_connection(r->q->conn);
}

static void free_run(rest_run *r) {
  if (!r) return;
  srv_v2rest_infer_free(r->v2);
  srv_call_end(&r->call);
  free(r);
}

static void watch(void *arg) {
  srv_rest *s = arg;
  uint64_t tick = (uint64_t)s->opt.timeout_ms * 100000u; /* timeout / 10, in ns */
  if (tick < 1000000u) tick = 1000000u;
  if (tick > 100000000u) tick = 100000000u;
  uv_mutex_lock(&s->mu);
  while (!s->stopping) {
    uint64_t now = td_now_ns();
    while (s->head && s->head->deadline <= now) {
      rest_run *r = s->head;
      unlink_run(s, r);
      if (r->state == RUN_RUNNING) expire_run(r);
    }
    uv_cond_timedwait(&s->cv, &s->mu, tick);
  }
  uv_mutex_unlock(&s->mu);
}

/* Worker thread: the engine finished. */
static void run_done(srv_call *c) {
  rest_run *r = c->user;
  srv_rest *s = r->srv;
  bool mine;
  uv_mutex_lock(&s->mu);
  unlink_run(s, r);
  mine = r->state != RUN_RUNNING;
  if (!mine) {
    r->state = RUN_DONE;
    MHD_resume_connection(r->q->conn);
  }
  if (--s->in_engine == 0 && s->stopping) uv_cond_broadcast(&s->cv);
  uv_mutex_unlock(&s->mu);
  /* From here on s may be gone (srv_rest_stop waits only for the count). */
  if (mine) free_run(r); /* its connection answered 504 or is gone */
}

/* --- responses ----------------------------------------------------------- */

static void add_cors(const srv_rest *s, struct MHD_Response *r) {
  if (!s->opt.cors) return;
  MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
  MHD_add_response_header(r, "Access-Control-Allow-Methods", "POST, GET");
  MHD_add_response_header(r, "Access-Control-Allow-Headers", "Content-Type");
}

/* Queues body (taken from b, which is left empty) with status. */
/* Counts a Predict/Classify/Regress request once: when its answer is queued,
 * so a client holding the answer finds it in the metrics, or as cancelled
 * when the connection ends unanswered. */
static void count_request(rest_req *q, td_code code) {
  if (q->counted || q->route.kind < SRV_ROUTE_PREDICT || q->route.kind > SRV_ROUTE_REGRESS) return;
  q->counted = true;
  srv_metric_api api = (srv_metric_api)(SRV_METRIC_PREDICT + (q->route.kind - SRV_ROUTE_PREDICT));
  srv_metrics_request(srv_metrics_model(q->route.name), api, SRV_EP_REST, code, q->start_ns,
                      q->run_ns);
  td_vlog(1, "REST request: model %s, %s: %s in %llu us", q->route.name ? q->route.name : "",
          srv_metrics_api_name(api), td_code_name(code),
          (unsigned long long)((td_now_ns() - q->start_ns) / 1000));
}

static enum MHD_Result send_buf(rest_req *q, unsigned status, td_buf *b, const char *type,
                                bool cors) {
  static const char oom[] = "{\n    \"error\": \"out of memory writing the response\"\n}";
  struct MHD_Response *r;
  if (b->oom) {
    td_buf_free(b);
    status = 500;
    q->answer_code = TD_RESOURCE_EXHAUSTED;
    r = MHD_create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
  } else {
    size_t len = 0;
    char *data = td_buf_take(b, &len);
    r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
    if (!r) free(data);
  }
  if (!r) return MHD_NO;
  if (type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  /* A head past the limit ends the connection, as libmicrohttpd's own 414 /
   * 431 do: the client may not be waiting for another answer. */
  if (q->head_status) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
  if (cors) add_cors(q->srv, r);
  count_request(q, q->answer_code);
  enum MHD_Result ret = MHD_queue_response(q->conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result send_json(rest_req *q, unsigned status, td_buf *b) {
  return send_buf(q, status, b, "application/json", true);
}

static enum MHD_Result send_error(rest_req *q, const td_err *e) {
  q->answer_code = e->code;
  td_buf b;
  td_buf_init(&b);
  srv_json_encode_error(e->msg, &b);
  return send_json(q, q->decoded_too_large ? MHD_HTTP_CONTENT_TOO_LARGE : td_code_http(e->code),
                   &b);
}

/* Answers 413 at once; MHD then closes the connection without reading the
 * rest of the body. */
static enum MHD_Result send_too_large(rest_req *q) {
  td_err e;
  td_err_set(&e, TD_RESOURCE_EXHAUSTED, "request body exceeds the limit of %zu bytes",
             q->srv->opt.max_body_bytes);
  td_buf b;
  td_buf_init(&b);
  srv_json_encode_error(e.msg, &b);
  q->answered = true;
  q->answer_code = e.code;
  return send_json(q, MHD_HTTP_CONTENT_TOO_LARGE, &b);
}

/* Answers a head past SRV_REST_MAX_HEAD_BYTES, once its body is drained. */
static enum MHD_Result send_head_too_large(rest_req *q) {
  td_err e;
  td_err_set(&e, TD_INVALID_ARGUMENT, "%s of %zu bytes exceeds the limit of %d bytes",
             q->head_status == 414 ? "request line" : "request line and headers", q->head_bytes,
             SRV_REST_MAX_HEAD_BYTES);
  td_buf b;
  td_buf_init(&b);
  srv_json_encode_error(e.msg, &b);
  q->answered = true;
  q->answer_code = e.code;
  return send_json(q, q->head_status, &b);
}

/* Bytes of the head as sent, from what libmicrohttpd parsed of it: each
 * header "key: value\r\n", each query argument with its '?' / '&' and '='
 * (arguments stay escaped: keep_escaped). */
static enum MHD_Result count_header(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value) {
  (void)kind;
  *(size_t *)cls += strlen(key) + (value ? strlen(value) : 0) + 4;
  return MHD_YES;
}

static enum MHD_Result count_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value) {
  (void)kind;
  *(size_t *)cls += 1 + strlen(key) + (value ? 1 + strlen(value) : 0);
  return MHD_YES;
}

/* A v2 reply: JSON, or the JSON header and binary tensors with the header's
 * length in Inference-Header-Content-Length. */
static enum MHD_Result send_v2(rest_req *q, srv_v2_reply *rep) {
  if (rep->body.oom) {
    td_err e;
    td_buf_free(&rep->body);
    td_err_set(&e, TD_RESOURCE_EXHAUSTED, "out of memory writing the response");
    srv_v2rest_error(&e, rep);
  }
  size_t len = 0;
  char *data = td_buf_take(&rep->body, &len);
  struct MHD_Response *r = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
  if (!r) {
    free(data);
    return MHD_NO;
  }
  if (len)
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            rep->binary ? "application/octet-stream" : "application/json");
  if (rep->binary) {
    char hl[32];
    snprintf(hl, sizeof hl, "%zu", rep->header_len);
    MHD_add_response_header(r, "Inference-Header-Content-Length", hl);
  }
  add_cors(q->srv, r);
  enum MHD_Result ret = MHD_queue_response(q->conn, (unsigned)rep->status, r);
  MHD_destroy_response(r);
  return ret;
}

/* --- request body ---------------------------------------------------------- */

static bool body_error(rest_req *q, td_code code, const char *msg) {
  q->body_rc = td_err_set(&q->body_err, code, "%s", msg);
  return false;
}

static bool too_large(rest_req *q) {
  q->too_large = true;
  td_buf_free(&q->body);
  return false;
}

/* Appends upload bytes (inflating gzip); false when the rest of the body is
 * to be discarded: too large (q->too_large) or corrupt (q->body_rc). */
static bool body_add(rest_req *q, const char *data, size_t n, enum MHD_Result *ret) {
  size_t max = q->srv->opt.max_body_bytes;
  if (q->too_large) {
    q->drained += n;
    if (q->drained > DRAIN_MAX) *ret = MHD_NO; /* stop reading: close */
    return false;
  }
  if (q->body_rc) return false;
  if (!q->gzip) {
    if (n > max - q->body.len) return too_large(q);
    td_buf_append(&q->body, data, n);
    return true;
  }
  q->z.next_in = (Bytef *)data;
  q->z.avail_in = (uInt)n;
  while (q->z.avail_in && !q->z_end) {
    if (q->body.len > max) return too_large(q);
    size_t room = max + 1 - q->body.len; /* one byte past the limit detects overflow */
    if (room > INFLATE_STEP) room = INFLATE_STEP;
    if (!td_buf_reserve(&q->body, room))
      return body_error(q, TD_RESOURCE_EXHAUSTED, "out of memory reading the request body");
    q->z.next_out = (Bytef *)q->body.data + q->body.len;
    q->z.avail_out = (uInt)room;
    int zr = inflate(&q->z, Z_NO_FLUSH);
    q->body.len += room - q->z.avail_out;
    q->body.data[q->body.len] = '\0';
    if (zr == Z_STREAM_END)
      q->z_end = true;
    else if (zr != Z_OK && zr != Z_BUF_ERROR)
      return body_error(q, TD_INVALID_ARGUMENT, "Failed to decompress the gzip request body");
  }
  if (q->body.len > max) return too_large(q);
  return true;
}

/* --- status, metadata, list, probes ------------------------------------- */

static enum MHD_Result handle_status(rest_req *q) {
  td_err err;
  ldr_version_status *st = NULL;
  int n = 0;
  /* A label selects nothing here: TF Serving reports every version. */
  td_code rc = ldr_registry_status(q->srv->opt.registry, q->route.name,
                                   q->route.has_version ? q->route.version : -1, &st, &n, &err);
  if (rc) return send_error(q, &err);
  td_buf b;
  td_buf_init(&b);
  srv_json_encode_status(st, n, &b);
  free(st);
  return send_json(q, 200, &b);
}

static enum MHD_Result handle_metadata(rest_req *q) {
  ldr_registry *reg = q->srv->opt.registry;
  td_err err;
  int64_t version = q->route.has_version ? q->route.version : -1;
  ldr_servable *sv = NULL;
  td_code rc = TD_OK;
  if (q->route.label)
    rc = ldr_registry_resolve_label(reg, q->route.name, q->route.label, &version, &err);
  if (!rc) rc = ldr_registry_acquire(reg, q->route.name, version, &sv, &err);
  if (rc) return send_error(q, &err);
  td_buf b;
  td_buf_init(&b);
  srv_json_encode_metadata(q->route.name, ldr_servable_version(sv), sv, &b);
  ldr_servable_unref(sv);
  return send_json(q, 200, &b);
}

static enum MHD_Result handle_list(rest_req *q) {
  ldr_registry *reg = q->srv->opt.registry;
  char **names = NULL;
  int n = ldr_registry_model_names(reg, &names);
  srv_json_model_status *ms = calloc((size_t)n + 1, sizeof *ms);
  td_buf b;
  td_buf_init(&b);
  if (!ms) {
    b.oom = true;
  } else {
    for (int i = 0; i < n; i++) {
      ldr_version_status *st = NULL;
      int k = 0;
      if (ldr_registry_status(reg, names[i], -1, &st, &k, NULL)) k = 0;
      ms[i] = (srv_json_model_status){.name = names[i], .versions = st, .n_versions = k};
    }
    srv_json_encode_model_list(ms, n, &b);
    for (int i = 0; i < n; i++) free((void *)ms[i].versions);
  }
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  free(ms);
  return send_json(q, 200, &b);
}

static enum MHD_Result handle_probe(rest_req *q) {
  td_buf b;
  td_buf_init(&b);
  if (q->route.kind == SRV_ROUTE_HEALTH) {
    srv_json_encode_health(&b);
    return send_buf(q, 200, &b, "application/json", false);
  }
  if (atomic_load(&q->srv->draining)) {
    static const char body[] = "{\"ready\": false, \"draining\": true, \"models_not_ready\": []}";
    td_buf_append(&b, body, sizeof body - 1);
    return send_buf(q, 503, &b, "application/json", false);
  }
  ldr_registry *reg = q->srv->opt.registry;
  bool ready = ldr_registry_ready(reg);
  char **names = NULL;
  int n = ldr_registry_model_names(reg, &names);
  const char **missing = calloc((size_t)n + 1, sizeof *missing);
  int k = 0;
  for (int i = 0; missing && i < n; i++)
    if (!ldr_registry_available(reg, names[i])) missing[k++] = names[i];
  if (!missing)
    b.oom = true;
  else
    srv_json_encode_ready(ready, missing, k, &b);
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
  free(missing);
  return send_buf(q, ready ? 200 : 503, &b, "application/json", false);
}

static enum MHD_Result handle_metrics(rest_req *q, const char *method) {
  td_buf b;
  td_buf_init(&b);
  if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
    td_err e;
    td_err_set(&e, TD_INVALID_ARGUMENT, "Malformed request: %s %s", method,
               q->srv->opt.metrics_path);
    return send_error(q, &e);
  }
  srv_metrics_render(&b);
  return send_buf(q, 200, &b, "text/plain; version=0.0.4", false);
}

static enum MHD_Result handle_preflight(rest_req *q, const char *method, const char *url) {
  td_err err;
  if (!q->srv->opt.cors) {
    td_err_set(&err, TD_INVALID_ARGUMENT, "Malformed request: %s %s", method, url);
    return send_error(q, &err);
  }
  const char *origin = MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Origin");
  if (!origin || (strncmp(origin, "http://", 7) && strncmp(origin, "https://", 8))) {
    td_err_set(&err, TD_FAILED_PRECONDITION, "Origin header is missing in CORS preflight");
    return send_error(q, &err);
  }
  td_buf b;
  td_buf_init(&b);
  return send_buf(q, 200, &b, NULL, true);
}

/* --- predict, classify, regress ------------------------------------------- */

/* Decodes the body into the run's inputs (after the call has begun). */
static td_code decode_inputs(rest_run *r, const srv_json_request *jr, td_err *err) {
  if (r->kind == SRV_ROUTE_PREDICT)
    return srv_json_decode_predict(jr, r->call.sig, r->srv->api.max_input_bytes, r->call.inputs,
                                   &r->fmt, err);
  srv_infer_kind kind = r->kind == SRV_ROUTE_CLASSIFY ? SRV_INFER_CLASSIFY : SRV_INFER_REGRESS;
  srv_json_examples ex;
  td_code rc = srv_json_decode_examples(jr, &ex, err);
  if (rc) return rc;
  rc = srv_infer_check_signature(kind, r->call.sig, err);
  if (!rc) rc = srv_infer_set_examples(&r->call, ex.examples, ex.n, ex.context, err);
  r->n_examples = ex.n;
  srv_json_examples_free(&ex);
  return rc;
}

/* A v2 infer: the body (JSON, or JSON then binary tensors) into the call. */
static td_code v2_begin(rest_req *q, rest_run *r, td_err *err) {
  const char *hl =
      MHD_lookup_connection_value(q->conn, MHD_HEADER_KIND, "Inference-Header-Content-Length");
  int64_t header_len = -1;
  if (hl) {
    char *end = NULL;
    long long v = strtoll(hl, &end, 10);
    if (!*hl || *end || v < 0)
      return td_err_set(err, TD_INVALID_ARGUMENT, "bad Inference-Header-Content-Length: %s", hl);
    header_len = v;
  }
  return srv_v2rest_infer_begin(&r->call, &q->srv->api, q->v2, q->body.data ? q->body.data : "",
                                q->body.len, header_len, &r->v2, err);
}

/* Starts a run; TD_OK when it is queued and the connection suspended, or,
 * with *ran set, when it has already run here. */
static td_code start_run(rest_req *q, td_err *err, bool *ran) {
  srv_rest *s = q->srv;
  srv_json_request jr = {0};
  td_code rc = TD_OK;
  if (q->route.kind != SRV_ROUTE_V2)
    rc = srv_json_parse_request(q->body.data ? q->body.data : "", q->body.len, &jr, err);
  if (rc) return rc;
  rest_run *r = malloc(sizeof *r);
  if (r) memset(r, 0, offsetof(rest_run, call)); /* the call: srv_call_begin */
  if (!r) {
    srv_json_request_free(&jr);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  r->srv = s;
  r->q = q;
  r->kind = q->route.kind;
  if (r->kind == SRV_ROUTE_V2) {
    rc = v2_begin(q, r, err);
    goto begun;
  }
  srv_model_spec spec = {.name = q->route.name,
                         .has_version = q->route.has_version,
                         .version = q->route.version,
                         .label = q->route.label,
                         .signature_name = jr.signature_name,
                         .sig_errors = r->kind == SRV_ROUTE_PREDICT ? SRV_SIG_ERRORS_REST_PREDICT
                                                                    : SRV_SIG_ERRORS_INFER};
  rc = srv_call_begin(&r->call, &s->api, &spec, err);
  if (!rc) rc = decode_inputs(r, &jr, err);
  srv_json_request_free(&jr);
begun:
  /* A body that decodes past what a request may use is too large (413),
   * as one past the body limit is; a full queue stays 429. */
  if (rc == TD_RESOURCE_EXHAUSTED) q->decoded_too_large = true;
  if (rc) {
    free_run(r);
    return rc;
  }
  r->call.done = run_done;
  r->call.user = r;
  r->deadline =
      s->opt.timeout_ms > 0 ? td_now_ns() + (uint64_t)s->opt.timeout_ms * 1000000u : UINT64_MAX;
  q->run = r;
  if (srv_call_try_run_here(&r->call)) {
    *ran = true; /* on_completed frees the run with the connection */
    return TD_OK;
  }
  /* Link and suspend under the lock, so the watcher or srv_rest_stop can
   * only resume a connection that is suspended; suspend before submitting,
   * as the worker may resume at once. */
  uv_mutex_lock(&s->mu);
  if (s->stopping) {
    uv_mutex_unlock(&s->mu);
    q->run = NULL;
    free_run(r);
    return td_err_set(err, TD_UNAVAILABLE, "the server is shutting down");
  }
  link_run(s, r);
  s->in_engine++;
  q->suspended = true;
  MHD_suspend_connection(q->conn);
  uv_mutex_unlock(&s->mu);
  rc = srv_call_submit(&r->call, err);
  if (rc) {
    uv_mutex_lock(&s->mu);
    s->in_engine--;
    unlink_run(s, r);
    bool resumed = r->state == RUN_EXPIRED; /* the watcher already woke it */
    if (!resumed) MHD_resume_connection(q->conn);
    uv_mutex_unlock(&s->mu);
    q->suspended = false;
    q->expired = false;
    q->run = NULL;
    free_run(r);
    return rc;
  }
  r->submitted = true;
  return TD_OK;
}

static enum MHD_Result send_timeout(rest_req *q) {
  td_err e;
  td_err_set(&e, TD_DEADLINE_EXCEEDED, "Timed out waiting for notification");
  return send_error(q, &e);
}

/* A sampled :classify / :regress goes to the request log as the gRPC
 * messages TF Serving would log. */
static void log_infer(rest_run *r) {
  if (!srv_reqlog_sample(r->call.metric_model)) return;
  Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
  Google__Protobuf__Int64Value ver = GOOGLE__PROTOBUF__INT64_VALUE__INIT;
  ver.value = r->call.version;
  spec.name = r->call.metric_model;
  spec.version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
  spec.version = &ver;
  spec.signature_name = (char *)r->call.sig->key;
  if (r->kind == SRV_ROUTE_CLASSIFY) {
    srv_inferpb_classification k;
    if (!srv_inferpb_classify(&r->call, r->n_examples, &k, NULL)) {
      Tensorflow__Serving__ClassificationResponse resp =
          TENSORFLOW__SERVING__CLASSIFICATION_RESPONSE__INIT;
      resp.model_spec = &spec;
      resp.result = &k.result;
      srv_reqlog_infer(&r->call, false, &resp.base);
    }
    srv_inferpb_classification_free(&k);
  } else {
    srv_inferpb_regression g;
    if (!srv_inferpb_regress(&r->call, r->n_examples, &g, NULL)) {
      Tensorflow__Serving__RegressionResponse resp = TENSORFLOW__SERVING__REGRESSION_RESPONSE__INIT;
      resp.model_spec = &spec;
      resp.result = &g.result;
      srv_reqlog_infer(&r->call, true, &resp.base);
    }
    srv_inferpb_regression_free(&g);
  }
}

/* Encodes the result of the connection's finished run. */
static enum MHD_Result answer_run(rest_req *q) {
  rest_run *r = q->run;
  q->run_ns = r->call.run_ns;
  if (r->kind == SRV_ROUTE_V2) {
    srv_v2_reply rep;
    srv_v2rest_infer_encode(r->v2, &r->call, &rep);
    return send_v2(q, &rep);
  }
  if (r->call.task.code) return send_error(q, &r->call.task.err);
  if (r->kind != SRV_ROUTE_PREDICT) srv_metrics_examples(r->call.mstats, r->n_examples);
  td_buf b;
  td_buf_init(&b);
  td_err err;
  td_code rc = TD_OK;
  if (r->kind == SRV_ROUTE_PREDICT) {
    srv_reqlog_predict(&r->call);
    rc = srv_json_encode_predict(r->call.sig, r->call.outputs, r->fmt, &b, &err);
  } else if (r->kind == SRV_ROUTE_CLASSIFY) {
    srv_classify_result cr;
    rc = srv_infer_classify_result(&r->call, r->n_examples, &cr, &err);
    if (!rc) srv_json_encode_classify(&cr, &b);
    if (!rc) srv_classify_result_free(&cr);
  } else {
    const float *v = NULL;
    rc = srv_infer_regress_result(&r->call, r->n_examples, &v, &err);
    if (!rc) srv_json_encode_regress(v, r->n_examples, &b);
  }
  if (!rc && r->kind != SRV_ROUTE_PREDICT) log_infer(r);
  if (rc) {
    td_buf_free(&b);
    return send_error(q, &err);
  }
  return send_json(q, 200, &b);
}

/* The resumed connection of a queued run. */
static enum MHD_Result finish_run(rest_req *q) {
  if (q->expired) {
    q->run = NULL; /* the worker frees it when the engine lets go */
    return send_timeout(q);
  }
  return answer_run(q);
}

/* A run taken here: the same deadline as a queued one. */
static enum MHD_Result finish_run_here(rest_req *q) {
  if (td_now_ns() > q->run->deadline) return send_timeout(q);
  return answer_run(q);
}

/* --- v2 ------------------------------------------------------------------ */

typedef struct rest_job {
  rest_req *q;
  srv_rest *s;
} rest_job;

/* A repository request's own thread: it may wait for model loads. */
static void job_main(void *arg) {
  rest_job *j = arg;
  rest_req *q = j->q;
  srv_rest *s = j->s;
  free(j);
  srv_v2rest_repository(&s->api, q->v2, q->body.data ? q->body.data : "", q->body.len, q->v2_job);
  uv_mutex_lock(&s->mu);
  MHD_resume_connection(q->conn);
  if (--s->jobs == 0) uv_cond_broadcast(&s->cv);
  uv_mutex_unlock(&s->mu);
}

static enum MHD_Result start_job(rest_req *q) {
  srv_rest *s = q->srv;
  td_err err;
  rest_job *j = malloc(sizeof *j);
  if (!j || !(q->v2_job = calloc(1, sizeof *q->v2_job))) {
    free(j);
    td_err_set(&err, TD_RESOURCE_EXHAUSTED, "out of memory");
    return send_error(q, &err);
  }
  *j = (rest_job){.q = q, .s = s};
  uv_thread_t tid;
  uv_mutex_lock(&s->mu);
  if (s->stopping) {
    uv_mutex_unlock(&s->mu);
    free(j);
    td_err_set(&err, TD_UNAVAILABLE, "the server is shutting down");
    return send_error(q, &err);
  }
  s->jobs++;
  q->suspended = true;
  MHD_suspend_connection(q->conn);
  if (uv_thread_create(&tid, job_main, j)) {
    s->jobs--;
    MHD_resume_connection(q->conn);
    uv_mutex_unlock(&s->mu);
    q->suspended = false;
    free(j);
    td_err_set(&err, TD_RESOURCE_EXHAUSTED, "cannot start a thread for the repository request");
    return send_error(q, &err);
  }
  pthread_detach(tid); /* uv_thread_t is a pthread_t on Unix */
  uv_mutex_unlock(&s->mu);
  return MHD_YES;
}

static enum MHD_Result handle_v2(rest_req *q) {
  if (q->v2->kind == SRV_V2_INFER) {
    td_err err;
    bool ran = false;
    if (start_run(q, &err, &ran)) {
      srv_v2_reply rep;
      srv_v2rest_error(&err, &rep);
      if (q->decoded_too_large) rep.status = MHD_HTTP_CONTENT_TOO_LARGE;
      return send_v2(q, &rep);
    }
    return ran ? finish_run_here(q) : MHD_YES;
  }
  if (srv_v2rest_blocking(q->v2)) return start_job(q);
  srv_v2_reply rep;
  srv_v2rest_answer(&q->srv->api, q->v2, &rep);
  return send_v2(q, &rep);
}

/* --- dispatch ---------------------------------------------------------- */

static enum MHD_Result first_call(srv_rest *s, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, void **con_cls) {
  rest_req *q = malloc(sizeof *q);
  if (!q) return MHD_NO;
  memset(q, 0, offsetof(rest_req, route_err));
  q->srv = s;
  q->conn = conn;
  q->start_ns = td_now_ns();
  td_buf_init(&q->body);
  q->route_rc = srv_route_parse(method, url, &q->route, &q->route_err);
  *con_cls = q;
  size_t line = strlen(method) + 1 + strlen(url) + 1 + strlen(version) + 2;
  MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, count_arg, &line);
  size_t head = line + 2; /* and the blank line */
  MHD_get_connection_values(conn, MHD_HEADER_KIND, count_header, &head);
  if (head > SRV_REST_MAX_HEAD_BYTES) {
    q->head_status = line > SRV_REST_MAX_HEAD_BYTES ? 414 : 431;
    q->head_bytes = q->head_status == 414 ? line : head;
    q->too_large = true; /* drain any body, then answer */
    return MHD_YES;
  }
  if (q->route.kind == SRV_ROUTE_V2) {
    if (!(q->v2 = malloc(sizeof *q->v2))) return MHD_NO;
    srv_v2rest_route(method, url, q->v2);
  }
  const char *cl =
      MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
  if (cl) {
    unsigned long long len = strtoull(cl, NULL, 10);
    if (len > s->opt.max_body_bytes) return send_too_large(q);
    td_buf_reserve(&q->body, len < PRESIZE_MAX ? (size_t)len : PRESIZE_MAX);
  }
  const char *ce = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Encoding");
  if (ce && strcasestr(ce, "gzip")) {
    q->gzip = true;
    if (inflateInit2(&q->z, 16 + MAX_WBITS) != Z_OK) {
      q->body_rc = td_err_set(&q->body_err, TD_RESOURCE_EXHAUSTED, "cannot start gzip inflation");
    } else {
      q->z_open = true;
    }
  }
  return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  srv_rest *s = cls;
  rest_req *q = *con_cls;
  if (!q) return first_call(s, conn, url, method, version, con_cls);
  if (*upload_data_size) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    enum MHD_Result ret = MHD_YES;
    if (!q->answered && !q->suspended) body_add(q, upload_data, n, &ret);
    return ret;
  }
  if (q->answered) return MHD_YES; /* nothing left to do */
  if (q->head_status) return send_head_too_large(q);
  if (q->too_large) return send_too_large(q);
  if (q->suspended) {
    q->suspended = false;
    if (q->v2_job) return send_v2(q, q->v2_job);
    return finish_run(q);
  }
  /* Whole request read. */
  if (s->opt.metrics_path && *s->opt.metrics_path && !strcmp(url, s->opt.metrics_path))
    return handle_metrics(q, method);
  switch (q->route.kind) {
    case SRV_ROUTE_NOT_V1: {
      static const char nf[] = "<html><title>404 Not Found</title><body>Not Found</body></html>";
      td_buf b;
      td_buf_init(&b);
      td_buf_append(&b, nf, sizeof nf - 1);
      return send_buf(q, MHD_HTTP_NOT_FOUND, &b, "text/html", false);
    }
    case SRV_ROUTE_HEALTH:
    case SRV_ROUTE_READY:
      return handle_probe(q);
    case SRV_ROUTE_PREFLIGHT:
      return handle_preflight(q, method, url);
    default:
      break;
  }
  if (q->route_rc) return send_error(q, &q->route_err);
  if (q->body_rc) return send_error(q, &q->body_err);
  if (q->body.oom) {
    td_err e;
    td_err_set(&e, TD_RESOURCE_EXHAUSTED, "out of memory reading the request body");
    return send_error(q, &e);
  }
  if (q->gzip && !q->z_end &&
      ((q->route.kind >= SRV_ROUTE_PREDICT && q->route.kind <= SRV_ROUTE_REGRESS) ||
       q->route.kind == SRV_ROUTE_V2)) {
    td_err e;
    td_err_set(&e, TD_INVALID_ARGUMENT, "Failed to decompress the gzip request body: truncated");
    return send_error(q, &e);
  }
  td_err err;
  switch (q->route.kind) {
    case SRV_ROUTE_STATUS:
      return handle_status(q);
    case SRV_ROUTE_METADATA:
      return handle_metadata(q);
    case SRV_ROUTE_LIST:
      return handle_list(q);
    case SRV_ROUTE_V2:
      return handle_v2(q);
    case SRV_ROUTE_PREDICT:
    case SRV_ROUTE_CLASSIFY:
    case SRV_ROUTE_REGRESS: {
      bool ran = false;
      if (start_run(q, &err, &ran)) return send_error(q, &err);
      return ran ? finish_run_here(q) : MHD_YES;
    }
    default:
      td_err_set(&err, TD_INVALID_ARGUMENT, "Malformed request: %s %s", method, url);
      return send_error(q, &err);
  }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  rest_req *q = *con_cls;
  if (!q) return;
  if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) count_request(q, TD_CANCELLED);
  rest_run *r = q->run;
  if (r) {
    srv_rest *s = q->srv;
    bool mine = true;
    uv_mutex_lock(&s->mu);
    unlink_run(s, r);
    if (r->submitted && r->state != RUN_DONE) {
      r->state = RUN_EXPIRED; /* the worker still holds it */
      mine = false;
    }
    uv_mutex_unlock(&s->mu);
    if (mine) free_run(r);
  }
  if (q->z_open) inflateEnd(&q->z);
  td_buf_free(&q->body);
  if (q->v2_job) td_buf_free(&q->v2_job->body);
  free(q->v2_job);
  free(q->v2);
  free(q);
  *con_cls = NULL;
}

static void log_mhd(void *cls, const char *fmt, va_list ap) {
  char line[512];
  vsnprintf(line, sizeof line, fmt, ap);
  size_t n = strlen(line);
  while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
  td_log_warn("http: %s", line);
}

/* The access handler sees the raw request target: srv_route decodes the
 * name and label itself, after matching, as TF Serving does. */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s) { return strlen(s); }

td_code srv_rest_start(const srv_rest_options *opt, srv_rest **out, td_err *err) {
  srv_rest *s = calloc(1, sizeof *s);
  if (!s) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  s->quiesced_fd = -1;
  s->opt = *opt;
  s->api = (srv_api){.registry = opt->registry,
                     .queue = opt->queue,
                     .batcher = opt->batcher,
                     .manager = opt->manager,
                     .stats = opt->stats,
                     .repo = opt->repo,
                     .max_input_bytes = opt->max_input_bytes};
  if (uv_mutex_init(&s->mu) || uv_cond_init(&s->cv)) {
    free(s);
    return td_err_set(err, TD_INTERNAL, "REST: cannot create locks");
  }
  if (opt->timeout_ms > 0) {
    if (uv_thread_create(&s->watcher, watch, s)) {
      uv_cond_destroy(&s->cv);
      uv_mutex_destroy(&s->mu);
      free(s);
      return td_err_set(err, TD_INTERNAL, "REST: cannot start the timeout thread");
    }
    s->has_watcher = true;
  }
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                   MHD_USE_ERROR_LOG | MHD_USE_TURBO;
  struct MHD_OptionItem pool[] = {
      {opt->n_threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
       opt->n_threads > 1 ? opt->n_threads : 0, NULL},
      {MHD_OPTION_END, 0, NULL},
  };
  /* Dual stack first (like TF Serving binding "::"), then IPv4 only. */
  for (int attempt = 0; attempt < 2 && !s->d; attempt++)
    s->d = MHD_start_daemon(
        flags | (attempt == 0 ? MHD_USE_DUAL_STACK : 0), (uint16_t)opt->port, NULL, NULL,
        on_request, s, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
        MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_CONNECTION_LIMIT, 10000u,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        MHD_MEMORY_LIMIT, MHD_OPTION_ARRAY, pool, MHD_OPTION_END);
  if (!s->d) {
    srv_rest_stop(s);
    return td_err_set(err, TD_UNAVAILABLE, "REST: cannot listen on port %d (address in use?)",
                      opt->port);
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : opt->port;
  *out = s;
  return TD_OK;
}

int srv_rest_port(const srv_rest *s) { return s->port; }

void srv_rest_drain(srv_rest *s) {
  if (s) atomic_store(&s->draining, true);
}

void srv_rest_quiesce(srv_rest *s) {
  if (!s || !s->d) return;
  /* MHD hands the listening socket back (suspend/resume implies the
   * inter-thread channel quiescing needs). Shutting it down refuses new
   * clients; closing it must wait until MHD has stopped: its polling
   * thread may still take the socket out of its epoll set, and a closed
   * descriptor there makes MHD abort the process. */
  MHD_socket fd = MHD_quiesce_daemon(s->d);
  if (fd == MHD_INVALID_SOCKET) return;
  shutdown(fd, SHUT_RDWR);
  s->quiesced_fd = fd;
}

void srv_rest_stop(srv_rest *s) {
  if (!s) return;
  uv_mutex_lock(&s->mu);
  s->stopping = true;
  uv_cond_broadcast(&s->cv);
  uv_mutex_unlock(&s->mu);
  if (s->has_watcher) uv_thread_join(&s->watcher);
  /* MHD refuses to stop with suspended connections: give up on every run
   * still in the engine (the workers free them). */
  uv_mutex_lock(&s->mu);
  while (s->head) {
    rest_run *r = s->head;
    unlink_run(s, r);
    if (r->state == RUN_RUNNING) expire_run(r);
  }
  /* Repository requests resume their connections when their loads end
   * (the manager's shutdown ends them): wait for them before MHD stops. */
  while (s->jobs > 0) uv_cond_wait(&s->cv, &s->mu);
  uv_mutex_unlock(&s->mu);
  if (s->d) MHD_stop_daemon(s->d);
  if (s->quiesced_fd >= 0) close(s->quiesced_fd);
  /* Runs given up on still call run_done, which touches s: wait for them
   * (the queue's workers outlive the server). */
  uv_mutex_lock(&s->mu);
  while (s->in_engine > 0) uv_cond_wait(&s->cv, &s->mu);
  uv_mutex_unlock(&s->mu);
  uv_cond_destroy(&s->cv);
  uv_mutex_destroy(&s->mu);
  free(s);
}
