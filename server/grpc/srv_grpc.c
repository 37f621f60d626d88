/* The gRPC server and its call machine. Each call context walks
 *   REQUESTED --(request_call done)--> READING --(message read)--> RUNNING
 *   --(srv_gcall_reply/fail, any thread)--> FINISHING --(batch done)--> freed
 * and the context pointer is the tag of every batch it starts. Only one
 * batch per call is outstanding at any time, so a context is touched by one
 * thread at a time: the polling thread until the handler returns or queues
 * engine work, then whichever thread answers, then the polling thread that
 * sees the final batch complete.
 *
 * The answer is a single batch (initial metadata, the message, the status,
 * and the close): one write for the common case. */
#include "srv_grpc.h"

#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "cfg_pbtxt.h"
#include "srv_grpc_call.h"
#include "srv_metrics.h"
#include "td_clock.h"
#include "td_log.h"
#include "td_pbdepth.h"
#include "tensorflow_serving/config/ssl_config.pb-c.h"

#define CALLS_PER_CQ 32
#define GRPC_MSG_LIMIT 1024 /* TF Serving's kErrorMessageLimit */
#define MAX_CHANNEL_ARGS 64
#define ARENA_BYTES 2048 /* per call: a small request unpacks without malloc */

typedef struct method {
  const char *path;
  srv_gmethod_fn fn; /* NULL: answer UNIMPLEMENTED with `why` */
  const char *why;
  int api; /* counted in srv_metrics as this srv_metric_api; -1: not */
} method;

static const method methods[] = {
    {"/tensorflow.serving.PredictionService/Predict", srv_grpc_predict, NULL, SRV_METRIC_PREDICT},
    {"/tensorflow.serving.PredictionService/GetModelMetadata", srv_grpc_get_model_metadata, NULL,
     -1},
    {"/tensorflow.serving.PredictionService/Classify", srv_grpc_classify, NULL,
     SRV_METRIC_CLASSIFY},
    {"/tensorflow.serving.PredictionService/Regress", srv_grpc_regress, NULL, SRV_METRIC_REGRESS},
    {"/tensorflow.serving.PredictionService/MultiInference", srv_grpc_multi_inference, NULL,
     SRV_METRIC_MULTI_INFERENCE},
    {"/tensorflow.serving.ModelService/GetModelStatus", srv_grpc_get_model_status, NULL, -1},
    {"/tensorflow.serving.ModelService/HandleReloadConfigRequest", srv_grpc_reload_config, NULL,
     -1},
    {"/grpc.health.v1.Health/Check", srv_grpc_health_check, NULL, -1},
#define V2 "/inference.GRPCInferenceService/"
    {V2 "ServerLive", srv_grpc_v2_server_live, NULL, -1},
    {V2 "ServerReady", srv_grpc_v2_server_ready, NULL, -1},
    {V2 "ServerMetadata", srv_grpc_v2_server_metadata, NULL, -1},
    {V2 "ModelReady", srv_grpc_v2_model_ready, NULL, -1},
    {V2 "ModelMetadata", srv_grpc_v2_model_metadata, NULL, -1},
    {V2 "ModelConfig", srv_grpc_v2_model_config, NULL, -1},
    {V2 "ModelInfer", srv_grpc_v2_model_infer, NULL, -1},
    {V2 "ModelStatistics", srv_grpc_v2_model_statistics, NULL, -1},
    {V2 "RepositoryIndex", srv_grpc_v2_repository_index, NULL, -1},
    {V2 "RepositoryModelLoad", srv_grpc_v2_repository_load, NULL, -1},
    {V2 "RepositoryModelUnload", srv_grpc_v2_repository_unload, NULL, -1},
#undef V2
    {"/grpc.health.v1.Health/Watch", NULL,
     "grpc.health.v1.Health/Watch is not supported by tensord; poll Check instead", -1},
};

typedef enum { CALL_REQUESTED, CALL_READING, CALL_RUNNING, CALL_FINISHING } call_state;

typedef struct call_ctx {
  srv_gcall g; /* first: handlers get &ctx->g */
  srv_grpc *srv;
  grpc_completion_queue *cq;
  const method *m;
  call_state state;
  grpc_call *call;
  grpc_call_details details;
  grpc_metadata_array req_md;
  grpc_byte_buffer *recv_buf;
  grpc_byte_buffer *send_buf;
  grpc_slice status_details;
  bool has_details;
  int cancelled;
  uint64_t start_ns; /* metrics: the request's arrival */
  td_code answer_code;
  ProtobufCAllocator pb_alloc; /* request messages: arena first, then malloc */
  size_t arena_used;
  _Alignas(16) unsigned char arena[ARENA_BYTES];
} call_ctx;

struct srv_grpc {
  grpc_server *server;
  srv_api api;
  srv_grpc_config cfg;
  int n_cq;
  grpc_completion_queue **cqs;
  uv_thread_t *threads;
  int port;
  atomic_int live;      /* call contexts alive */
  atomic_bool stopping; /* no new request_call once set */
  atomic_bool quiesced; /* shutdown_and_notify already called */
  grpc_completion_queue *shutdown_cq;
};

/* --- call contexts -------------------------------------------------------- */

static void request_call(srv_grpc *s, grpc_completion_queue *cq) {
  if (atomic_load(&s->stopping)) return;
  /* Neither the arena nor the engine call's error message (2 KiB each) is
   * zeroed: together they are most of the context's bytes, and neither is
   * read before it is written. */
  call_ctx *c = malloc(sizeof *c);
  if (!c) {
    td_log_error("gRPC: out of memory arming a call");
    return;
  }
  size_t hole = offsetof(call_ctx, g.call.task.err), after = hole + sizeof(td_err);
  memset(c, 0, hole);
  memset((char *)c + after, 0, offsetof(call_ctx, arena) - after);
  td_err_clear(&c->g.call.task.err);
  c->srv = s;
  c->cq = cq;
  c->state = CALL_REQUESTED;
  c->g.api = &s->api;
  c->g.cfg = &s->cfg;
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->req_md);
  atomic_fetch_add(&s->live, 1);
  if (grpc_server_request_call(s->server, &c->call, &c->details, &c->req_md, cq, cq, c) !=
      GRPC_CALL_OK) {
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->req_md);
    atomic_fetch_sub(&s->live, 1);
    free(c);
  }
}

static void free_call(call_ctx *c) {
  if (c->g.cleanup) c->g.cleanup(&c->g);
  srv_call_end(&c->g.call);
  if (c->call) grpc_call_unref(c->call);
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->req_md);
  if (c->recv_buf) grpc_byte_buffer_destroy(c->recv_buf);
  if (c->send_buf) grpc_byte_buffer_destroy(c->send_buf);
  if (c->has_details) grpc_slice_unref(c->status_details);
  srv_grpc *s = c->srv;
  free(c);
  atomic_fetch_sub(&s->live, 1);
}

/* The one answering batch. `msg` NULL: no status message. */
static void finish(call_ctx *c, grpc_status_code code, grpc_byte_buffer *reply, const char *msg) {
  c->state = CALL_FINISHING;
  c->answer_code = (td_code)code; /* td_code values are the gRPC codes */
  /* Counted before the answer leaves: a client that has its answer finds it
   * in the metrics already. */
  if (c->start_ns && c->m && c->m->api >= 0) {
    srv_metrics_request(c->g.call.mstats, (srv_metric_api)c->m->api, SRV_EP_GRPC, c->answer_code,
                        c->start_ns, c->g.call.run_ns);
    td_vlog(1, "gRPC request: model %s, %s: %s in %llu us", c->g.call.metric_model,
            srv_metrics_api_name((srv_metric_api)c->m->api), td_code_name(c->answer_code),
            (unsigned long long)((td_now_ns() - c->start_ns) / 1000));
  }
  c->send_buf = reply;
  if (msg && *msg) {
    size_t len = strlen(msg);
    if (len > GRPC_MSG_LIMIT) {
      static const char cut[] = "...TRUNCATED";
      c->status_details = grpc_slice_malloc(GRPC_MSG_LIMIT + sizeof cut - 1);
      memcpy(GRPC_SLICE_START_PTR(c->status_details), msg, GRPC_MSG_LIMIT);
      memcpy(GRPC_SLICE_START_PTR(c->status_details) + GRPC_MSG_LIMIT, cut, sizeof cut - 1);
    } else {
      c->status_details = grpc_slice_from_copied_buffer(msg, len);
    }
    c->has_details = true;
  }
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  size_t n = 0;
  ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
  if (reply) {
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = reply;
  }
  ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[n].data.send_status_from_server.status = code;
  ops[n++].data.send_status_from_server.status_details = c->has_details ? &c->status_details : NULL;
  ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
  if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK) free_call(c);
}

void srv_gcall_reply(srv_gcall *g, const ProtobufCMessage *msg) {
  call_ctx *c = (call_ctx *)g;
  size_t len = protobuf_c_message_get_packed_size(msg);
  if (len > INT32_MAX) {
    srv_gcall_failf(g, TD_RESOURCE_EXHAUSTED, "response of %zu bytes exceeds the 2 GiB limit", len);
    return;
  }
  grpc_slice out = grpc_slice_malloc(len);
  protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(out));
  grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&out, 1);
  grpc_slice_unref(out);
  finish(c, GRPC_STATUS_OK, bb, NULL);
}

void srv_gcall_fail(srv_gcall *g, const td_err *e) {
  /* td_code values are the gRPC codes (base/td_status.def). */
  finish((call_ctx *)g, (grpc_status_code)e->code, NULL, e->msg);
}

void srv_gcall_run(srv_gcall *g, ProtobufCMessage *req, td_code rc, const td_err *failed,
                   void (*done)(srv_call *call)) {
  srv_gcall_free(g, req);
  if (rc) {
    srv_gcall_fail(g, failed);
    return;
  }
  g->call.done = done;
  g->call.user = g;
  g->call.deadline_ns = g->deadline_ns;
  if (srv_call_try_run_here(&g->call)) {
    done(&g->call); /* answers on this polling thread */
    return;
  }
  td_err err;
  td_err_clear(&err);
  if (srv_call_submit(&g->call, &err)) srv_gcall_fail(g, &err); /* else done answers */
}

void srv_gcall_failf(srv_gcall *g, td_code code, const char *fmt, ...) {
  td_err e;
  va_list ap;
  va_start(ap, fmt);
  td_err_vset(&e, code, fmt, ap);
  va_end(ap);
  srv_gcall_fail(g, &e);
}

static void *arena_alloc(void *data, size_t n) {
  call_ctx *c = data;
  size_t need = (n + 15) & ~(size_t)15;
  if (need <= ARENA_BYTES - c->arena_used) {
    void *p = c->arena + c->arena_used;
    c->arena_used += need;
    return p;
  }
  return malloc(n);
}

static void arena_free(void *data, void *p) {
  call_ctx *c = data;
  uintptr_t a = (uintptr_t)p, lo = (uintptr_t)c->arena;
  if (a >= lo && a < lo + ARENA_BYTES) return; /* released with the call */
  free(p);
}

ProtobufCMessage *srv_gcall_unpack(srv_gcall *g, const ProtobufCMessageDescriptor *desc,
                                   const uint8_t *req, size_t len) {
  call_ctx *c = (call_ctx *)g;
  c->pb_alloc = (ProtobufCAllocator){.alloc = arena_alloc, .free = arena_free, .allocator_data = c};
  td_err why;
  ProtobufCMessage *m = td_pb_unpack(desc, &c->pb_alloc, len, req, &why);
  if (m) return m;
  if (why.code == TD_INVALID_ARGUMENT)
    srv_gcall_failf(g, TD_INVALID_ARGUMENT, "cannot parse the request: %s", why.msg);
  else
    srv_gcall_failf(g, TD_INTERNAL, "cannot parse the request as %s (%zu bytes)", desc->name, len);
  return m;
}

void srv_gcall_free(srv_gcall *g, ProtobufCMessage *m) {
  if (m) protobuf_c_message_free_unpacked(m, &((call_ctx *)g)->pb_alloc);
}

/* Converts the call's deadline to td_now_ns()'s clock; 0 when infinite. */
static uint64_t call_deadline(gpr_timespec d) {
  if (gpr_time_cmp(d, gpr_inf_future(d.clock_type)) == 0) return 0;
  gpr_timespec now = gpr_now(d.clock_type);
  int64_t left_ns = (int64_t)(d.tv_sec - now.tv_sec) * 1000000000 + (d.tv_nsec - now.tv_nsec);
  if (left_ns > (int64_t)1000000 * 1000000000) return 0; /* > 11 days: none */
  uint64_t t = td_now_ns();
  return left_ns > 0 ? t + (uint64_t)left_ns : t ? t : 1;
}

static const method *find_method(grpc_slice path) {
  for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
    if (!grpc_slice_str_cmp(path, methods[i].path)) return &methods[i];
  return NULL;
}

static void start_read(call_ctx *c) {
  c->state = CALL_READING;
  grpc_op op;
  memset(&op, 0, sizeof op);
  op.op = GRPC_OP_RECV_MESSAGE;
  op.data.recv_message.recv_message = &c->recv_buf;
  if (grpc_call_start_batch(c->call, &op, 1, c, NULL) != GRPC_CALL_OK) free_call(c);
}

static void run_handler(call_ctx *c) {
  grpc_byte_buffer *bb = c->recv_buf;
  grpc_slice req;
  if (bb->type == GRPC_BB_RAW && bb->data.raw.compression == GRPC_COMPRESS_NONE &&
      bb->data.raw.slice_buffer.count == 1) {
    req = grpc_slice_ref(bb->data.raw.slice_buffer.slices[0]); /* the usual case: no copy */
  } else {
    grpc_byte_buffer_reader rd;
    if (!grpc_byte_buffer_reader_init(&rd, bb)) {
      srv_gcall_failf(&c->g, TD_INTERNAL, "cannot read the request message");
      return;
    }
    req = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
  }
  grpc_byte_buffer_destroy(bb);
  c->recv_buf = NULL;
  c->g.deadline_ns = call_deadline(c->details.deadline);
  c->start_ns = td_now_ns();
  c->state = CALL_RUNNING;
  /* From here on the context may be answered (and freed) by another thread. */
  c->m->fn(&c->g, GRPC_SLICE_START_PTR(req), GRPC_SLICE_LENGTH(req));
  grpc_slice_unref(req);
}

static void on_event(call_ctx *c, bool ok) {
  switch (c->state) {
    case CALL_REQUESTED: {
      if (!ok) { /* server shutting down */
        free_call(c);
        return;
      }
      request_call(c->srv, c->cq);
      const method *m = c->m = find_method(c->details.method);
      if (m && m->fn) {
        start_read(c);
      } else if (m) {
        finish(c, GRPC_STATUS_UNIMPLEMENTED, NULL, m->why);
      } else {
        char *path = grpc_slice_to_c_string(c->details.method);
        char msg[512];
        snprintf(msg, sizeof msg, "Method not found: %s", path);
        gpr_free(path);
        finish(c, GRPC_STATUS_UNIMPLEMENTED, NULL, msg);
      }
      return;
    }
    case CALL_READING:
      if (!ok) { /* the call died before its message arrived */
        free_call(c);
      } else if (!c->recv_buf) {
        finish(c, GRPC_STATUS_INTERNAL, NULL, "the request carries no message");
      } else {
        run_handler(c);
      }
      return;
    case CALL_RUNNING: /* no batch is started in this state */
      td_log_error("gRPC: unexpected completion while a call runs");
      return;
    case CALL_FINISHING:
      free_call(c);
      return;
  }
}

static void poll_thread(void *arg) {
  grpc_completion_queue *cq = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) return;
    if (ev.type == GRPC_OP_COMPLETE) on_event(ev.tag, ev.success);
  }
}

/* --- setup ---------------------------------------------------------------- */

typedef struct chan_args {
  grpc_arg args[MAX_CHANNEL_ARGS];
  size_t n;
  char *text; /* owns the user's keys and string values */
} chan_args;

static void chan_set_int(chan_args *a, char *key, int v) {
  for (size_t i = 0; i < a->n; i++)
    if (!strcmp(a->args[i].key, key)) {
      a->args[i].type = GRPC_ARG_INTEGER;
      a->args[i].value.integer = v;
      return;
    }
  a->args[a->n++] = (grpc_arg){.type = GRPC_ARG_INTEGER, .key = key, .value.integer = v};
}

static void chan_set_str(chan_args *a, char *key, char *v) {
  for (size_t i = 0; i < a->n; i++)
    if (!strcmp(a->args[i].key, key)) {
      a->args[i].type = GRPC_ARG_STRING;
      a->args[i].value.string = v;
      return;
    }
  a->args[a->n++] = (grpc_arg){.type = GRPC_ARG_STRING, .key = key, .value.string = v};
}

/* TF Serving's safe_strto32: optional surrounding spaces, optional sign. */
static bool parse_int32(const char *s, int *out) {
  while (*s == ' ' || *s == '\t') s++;
  if (!*s) return false;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  while (*end == ' ' || *end == '\t') end++;
  if (*end || errno || v < INT_MIN || v > INT_MAX) return false;
  *out = (int)v;
  return true;
}

static td_code build_channel_args(const char *user, chan_args *a, td_err *err) {
  memset(a, 0, sizeof *a);
  /* Our defaults: one server per port (SO_REUSEPORT would let a second
   * process share it silently) and TF Serving's INT32_MAX message size. */
  chan_set_int(a, GRPC_ARG_ALLOW_REUSEPORT, 0);
  chan_set_int(a, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, INT32_MAX);
  chan_set_int(a, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, INT32_MAX);
  if (!user || !*user) return TD_OK;
  a->text = strdup(user);
  if (!a->text) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  char *save = NULL;
  for (char *item = strtok_r(a->text, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(item, '=');
    if (!eq || eq == item)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "--grpc_channel_arguments: '%s' is not of the form key=value", item);
    *eq = '\0';
    char *value = eq + 1;
    if (a->n == MAX_CHANNEL_ARGS)
      return td_err_set(err, TD_INVALID_ARGUMENT, "--grpc_channel_arguments: more than %d",
                        MAX_CHANNEL_ARGS - 3);
    int iv;
    if (parse_int32(value, &iv))
      chan_set_int(a, item, iv);
    else
      chan_set_str(a, item, value);
  }
  return TD_OK;
}

/* Credentials for every listener: TLS from an SSLConfig file, else none. */
static td_code make_credentials(const char *ssl_config_file, grpc_server_credentials **out,
                                td_err *err) {
  if (!ssl_config_file || !*ssl_config_file) {
    *out = grpc_insecure_server_credentials_create();
    return TD_OK;
  }
  ProtobufCMessage *m = NULL;
  td_code rc =
      cfg_pbtxt_parse_file(ssl_config_file, &tensorflow__serving__sslconfig__descriptor, &m, err);
  if (rc) return td_err_prefix(err, "--ssl_config_file");
  Tensorflow__Serving__SSLConfig *ssl = (Tensorflow__Serving__SSLConfig *)m;
  if (!*ssl->server_key || !*ssl->server_cert) {
    protobuf_c_message_free_unpacked(m, NULL);
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--ssl_config_file %s: server_key and server_cert (PEM text) are required",
                      ssl_config_file);
  }
  grpc_ssl_pem_key_cert_pair pair = {.private_key = ssl->server_key,
                                     .cert_chain = ssl->server_cert};
  *out = grpc_ssl_server_credentials_create_ex(
      *ssl->custom_ca ? ssl->custom_ca : NULL, &pair, 1,
      ssl->client_verify ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                         : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
      NULL);
  protobuf_c_message_free_unpacked(m, NULL); /* gRPC copied the PEM text */
  if (!*out)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--ssl_config_file %s: gRPC refused the TLS setup",
                      ssl_config_file);
  return TD_OK;
}

static void destroy_unstarted(srv_grpc *s) {
  if (s->server) grpc_server_destroy(s->server);
  for (int i = 0; s->cqs && i < s->n_cq; i++)
    if (s->cqs[i]) grpc_completion_queue_destroy(s->cqs[i]);
  if (s->shutdown_cq) grpc_completion_queue_destroy(s->shutdown_cq);
  free(s->cqs);
  free(s->threads);
  free(s);
}

static td_code add_listener(srv_grpc *s, const char *addr, grpc_server_credentials *creds, bool tls,
                            td_err *err) {
  int port = grpc_server_add_http2_port(s->server, addr, creds);
  if (!port)
    return td_err_set(
        err, TD_UNAVAILABLE, "gRPC: cannot listen on %s (%s)", addr,
        tls ? "address in use, or the TLS key and certificate are not usable" : "address in use?");
  if (!strncmp(addr, "0.0.0.0:", 8)) s->port = port;
  return TD_OK;
}

td_code srv_grpc_start(const srv_grpc_options *opt, srv_grpc **out, td_err *err) {
  int n_threads = opt->n_threads < 1 ? 1 : opt->n_threads;
  bool tls = opt->ssl_config_file && *opt->ssl_config_file;
  bool unix_socket = opt->socket_path && *opt->socket_path;
  if (!opt->port && !unix_socket)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "At least one of server_options.grpc_port or "
                      "server_options.grpc_socket_path must be set.");
  chan_args ca;
  td_code rc = build_channel_args(opt->channel_args, &ca, err);
  if (rc) {
    free(ca.text);
    return rc;
  }
  srv_grpc *s = calloc(1, sizeof *s);
  if (!s) {
    free(ca.text);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  s->api = opt->api;
  s->cfg.tensor_content = opt->tensor_content;
  grpc_channel_args cargs = {ca.n, ca.args};
  s->server = grpc_server_create(&cargs, NULL);
  free(ca.text); /* core copied the arguments */
  s->n_cq = n_threads;
  s->cqs = calloc((size_t)n_threads, sizeof *s->cqs);
  s->threads = calloc((size_t)n_threads, sizeof *s->threads);
  if (!s->server || !s->cqs || !s->threads) {
    destroy_unstarted(s);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "cannot create the gRPC server");
  }
  for (int i = 0; i < n_threads; i++) {
    s->cqs[i] = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->server, s->cqs[i], NULL);
  }
  s->shutdown_cq = grpc_completion_queue_create_for_pluck(NULL);

  grpc_server_credentials *creds = NULL;
  rc = make_credentials(opt->ssl_config_file, &creds, err);
  if (!rc && opt->port) {
    char addr[64];
    snprintf(addr, sizeof addr, "0.0.0.0:%d", opt->port);
    rc = add_listener(s, addr, creds, tls, err);
  }
  if (!rc && unix_socket) {
    size_t n = strlen(opt->socket_path) + 6;
    char *addr = malloc(n);
    if (!addr) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      snprintf(addr, n, "unix:%s", opt->socket_path);
      rc = add_listener(s, addr, creds, tls, err);
      free(addr);
    }
  }
  if (creds) grpc_server_credentials_release(creds);
  if (rc) {
    destroy_unstarted(s);
    return rc;
  }
  grpc_server_start(s->server);
  for (int i = 0; i < n_threads; i++) {
    for (int k = 0; k < CALLS_PER_CQ; k++) request_call(s, s->cqs[i]);
    uv_thread_create(&s->threads[i], poll_thread, s->cqs[i]);
  }
  *out = s;
  return TD_OK;
}

int srv_grpc_port(const srv_grpc *s) { return s->port; }

void srv_grpc_drain(srv_grpc *s) {
  if (s) atomic_store(&s->cfg.draining, true);
}

void srv_grpc_quiesce(srv_grpc *s) {
  if (!s || atomic_exchange(&s->quiesced, true)) return;
  atomic_store(&s->stopping, true);
  grpc_server_shutdown_and_notify(s->server, s->shutdown_cq, s);
}

void srv_grpc_stop(srv_grpc *s) {
  if (!s) return;
  srv_grpc_quiesce(s); /* the one notification plucked below */
  grpc_server_cancel_all_calls(s->server);
  grpc_completion_queue_pluck(s->shutdown_cq, s, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  /* Pending request_call tags complete with ok=false and free themselves;
   * calls in the engine answer into cancelled calls. Wait for every context
   * before shutting the queues down, or a late batch would hit a dead cq. */
  while (atomic_load(&s->live) > 0) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < s->n_cq; i++) grpc_completion_queue_shutdown(s->cqs[i]);
  for (int i = 0; i < s->n_cq; i++) uv_thread_join(&s->threads[i]);
  for (int i = 0; i < s->n_cq; i++) grpc_completion_queue_destroy(s->cqs[i]);
  grpc_completion_queue_shutdown(s->shutdown_cq);
  grpc_completion_queue_destroy(s->shutdown_cq);
  grpc_server_destroy(s->server);
  free(s->cqs);
  free(s->threads);
  free(s);
}
