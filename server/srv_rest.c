/* Each connection carries a rest_req through MHD's access-handler calls:
 * the first call (headers) routes and sizes the body, middle calls append
 * the body, and the last call either answers at once (status, errors) or
 * submits a predict task and suspends. After the worker resumes the
 * connection MHD calls the handler once more, and the reply is encoded on
 * the MHD thread. */
#include "srv_rest.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_api.h"
#include "srv_json.h"
#include "srv_route.h"
#include "td_buf.h"
#include "td_log.h"

struct srv_rest {
  struct MHD_Daemon *d;
  srv_rest_options opt;
  srv_api api;
  int port;
};

typedef enum { REQ_READING, REQ_RUNNING, REQ_DONE } req_state;

typedef struct rest_req {
  srv_rest *srv;
  struct MHD_Connection *conn;
  req_state state;
  srv_route route;
  td_code route_rc;
  td_err route_err;
  td_buf body;
  bool answered; /* a response is queued before the body was read */
  /* predict */
  srv_call call;
  bool call_done; /* the worker finished; the reply is still to be written */
  srv_json_format fmt;
} rest_req;

static enum MHD_Result send_raw(struct MHD_Connection *conn, unsigned status, const char *body,
                                size_t len, const char *content_type) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  if (content_type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  enum MHD_Result ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result send_json(struct MHD_Connection *conn, unsigned status, td_buf *b) {
  if (b->oom) {
    static const char oom[] = "{ \"error\": \"out of memory writing the response\" }";
    return send_raw(conn, 500, oom, sizeof oom - 1, "application/json");
  }
  return send_raw(conn, status, b->data ? b->data : "", b->len, "application/json");
}

static enum MHD_Result send_error(struct MHD_Connection *conn, const td_err *e) {
  td_buf b;
  td_buf_init(&b);
  srv_json_encode_error(e->msg, &b);
  enum MHD_Result ret = send_json(conn, (unsigned)td_code_http(e->code), &b);
  td_buf_free(&b);
  return ret;
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
  enum MHD_Result ret = send_json(q->conn, MHD_HTTP_CONTENT_TOO_LARGE, &b);
  td_buf_free(&b);
  q->answered = true;
  return ret;
}

/* --- status ------------------------------------------------------------ */

static enum MHD_Result handle_status(rest_req *q) {
  td_err err;
  ldr_version_status *st = NULL;
  int n = 0;
  td_code rc = ldr_registry_status(q->srv->opt.registry, q->route.name,
                                   q->route.has_version ? q->route.version : -1, &st, &n, &err);
  if (rc) return send_error(q->conn, &err);
  /* Protobuf's JSON printer with whitespace: one-space indents, int64 as
   * strings, enums by name. */
  td_buf b;
  td_buf_init(&b);
  td_buf_puts(&b, "{\n \"model_version_status\": [\n");
  for (int i = 0; i < n; i++) {
    td_buf_printf(&b, "  {\n   \"version\": \"%lld\",\n   \"state\": \"%s\",\n   \"status\": {\n",
                  (long long)st[i].version, ldr_state_name(st[i].state));
    td_buf_printf(&b, "    \"error_code\": \"%s\",\n    \"error_message\": ",
                  td_code_name(st[i].status.code));
    srv_json_append_string(&b, st[i].status.msg, strlen(st[i].status.msg));
    td_buf_printf(&b, "\n   }\n  }%s\n", i + 1 < n ? "," : "");
  }
  td_buf_puts(&b, " ]\n}\n");
  free(st);
  enum MHD_Result ret = send_json(q->conn, 200, &b);
  td_buf_free(&b);
  return ret;
}

/* --- predict ----------------------------------------------------------- */

static void predict_done(srv_call *c) {
  rest_req *q = c->user;
  q->call_done = true;
  q->state = REQ_DONE;
  MHD_resume_connection(q->conn);
}

/* Starts a predict; returns TD_OK when the call is queued. */
static td_code start_predict(rest_req *q, td_err *err) {
  srv_json_request jr;
  td_code rc = srv_json_parse_request(q->body.data ? q->body.data : "", q->body.len, &jr, err);
  if (rc) return rc;
  srv_model_spec spec = {.name = q->route.name,
                         .has_version = q->route.has_version,
                         .version = q->route.version,
                         .label = q->route.label,
                         .signature_name = jr.signature_name};
  rc = srv_call_begin(&q->call, &q->srv->api, &spec, err);
  if (!rc) rc = srv_json_decode_predict(&jr, q->call.sig, q->call.inputs, &q->fmt, err);
  srv_json_request_free(&jr);
  if (rc) return rc;
  q->call.done = predict_done;
  q->call.user = q;
  /* Suspend before submitting: the worker may resume at once. */
  q->state = REQ_RUNNING;
  MHD_suspend_connection(q->conn);
  rc = srv_call_submit(&q->call, err);
  if (rc) {
    q->state = REQ_READING;
    MHD_resume_connection(q->conn);
  }
  return rc;
}

static enum MHD_Result finish_predict(rest_req *q) {
  if (q->call.task.code) return send_error(q->conn, &q->call.task.err);
  td_buf b;
  td_buf_init(&b);
  td_err err;
  td_code rc = srv_json_encode_predict(q->call.sig, q->call.outputs, q->fmt, &b, &err);
  enum MHD_Result ret = rc ? send_error(q->conn, &err) : send_json(q->conn, 200, &b);
  td_buf_free(&b);
  return ret;
}

/* --- dispatch ---------------------------------------------------------- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
  srv_rest *s = cls;
  rest_req *q = *con_cls;
  if (!q) {
    q = calloc(1, sizeof *q);
    if (!q) return MHD_NO;
    q->srv = s;
    q->conn = conn;
    td_buf_init(&q->body);
    q->route_rc = srv_route_parse(method, url, &q->route, &q->route_err);
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    *con_cls = q;
    if (cl) {
      unsigned long long len = strtoull(cl, NULL, 10);
      if (len > s->opt.max_body_bytes) return send_too_large(q);
      td_buf_reserve(&q->body, (size_t)len);
    }
    return MHD_YES;
  }
  if (q->state == REQ_READING && *upload_data_size) {
    if (q->body.len + *upload_data_size > s->opt.max_body_bytes) {
      *upload_data_size = 0;
      return send_too_large(q);
    }
    td_buf_append(&q->body, upload_data, *upload_data_size);
    *upload_data_size = 0;
    return MHD_YES;
  }
  if (q->state == REQ_RUNNING || q->answered) return MHD_YES; /* nothing left to do */
  if (q->state == REQ_DONE) {
    if (q->call_done) {
      q->call_done = false;
      return finish_predict(q);
    }
    return MHD_YES;
  }
  /* Whole request read. */
  if (q->route.kind == SRV_ROUTE_NOT_V1) {
    static const char nf[] = "<html><title>404 Not Found</title><body>Not Found</body></html>";
    return send_raw(conn, MHD_HTTP_NOT_FOUND, nf, sizeof nf - 1, "text/html");
  }
  if (q->route_rc) return send_error(conn, &q->route_err);
  if (q->body.oom) {
    td_err e;
    td_err_set(&e, TD_RESOURCE_EXHAUSTED, "out of memory reading the request body");
    return send_error(conn, &e);
  }
  td_err err;
  switch (q->route.kind) {
    case SRV_ROUTE_STATUS:
      return handle_status(q);
    case SRV_ROUTE_PREDICT:
      if (start_predict(q, &err)) return send_error(conn, &err);
      return MHD_YES;
    case SRV_ROUTE_METADATA:
    case SRV_ROUTE_CLASSIFY:
    case SRV_ROUTE_REGRESS:
      td_err_set(&err, TD_UNIMPLEMENTED, "%s is not implemented in tensord yet",
                 q->route.kind == SRV_ROUTE_METADATA   ? "GetModelMetadata"
                 : q->route.kind == SRV_ROUTE_CLASSIFY ? "Classify"
                                                       : "Regress");
      return send_error(conn, &err);
    default:
      td_err_set(&err, TD_INVALID_ARGUMENT, "Malformed request: %s %s", method, url);
      return send_error(conn, &err);
  }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  rest_req *q = *con_cls;
  if (!q) return;
  srv_call_end(&q->call);
  td_buf_free(&q->body);
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

td_code srv_rest_start(const srv_rest_options *opt, srv_rest **out, td_err *err) {
  srv_rest *s = calloc(1, sizeof *s);
  if (!s) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  s->opt = *opt;
  s->api = (srv_api){.registry = opt->registry, .queue = opt->queue};
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                   MHD_USE_ERROR_LOG | MHD_USE_TURBO;
  struct MHD_OptionItem pool[] = {
      {opt->n_threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
       opt->n_threads > 1 ? opt->n_threads : 0, NULL},
      {MHD_OPTION_END, 0, NULL},
  };
  /* Dual stack first (like TF Serving binding "::"), then IPv4 only. */
  for (int attempt = 0; attempt < 2 && !s->d; attempt++)
    s->d = MHD_start_daemon(flags | (attempt == 0 ? MHD_USE_DUAL_STACK : 0), (uint16_t)opt->port,
                            NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_CONNECTION_TIMEOUT, 60u, MHD_OPTION_CONNECTION_LIMIT,
                            10000u, MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024u,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)256 * 1024,
                            MHD_OPTION_ARRAY, pool, MHD_OPTION_END);
  if (!s->d) {
    free(s);
    return td_err_set(err, TD_UNAVAILABLE, "REST: cannot listen on port %d (address in use?)",
                      opt->port);
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
  s->port = info ? info->port : opt->port;
  *out = s;
  return TD_OK;
}

int srv_rest_port(const srv_rest *s) { return s->port; }

void srv_rest_stop(srv_rest *s) {
  if (!s) return;
  MHD_stop_daemon(s->d);
  free(s);
}
