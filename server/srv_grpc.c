#include "srv_grpc.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "td_log.h"

#define CALLS_PER_CQ 16

typedef enum { CALL_REQUESTED, CALL_FINISHING } call_state;

typedef struct call_ctx {
  srv_grpc *srv;
  grpc_completion_queue *cq;
  call_state state;
  grpc_call *call;
  grpc_call_details details;
  grpc_metadata_array req_md;
  grpc_slice status_details;
  int cancelled;
} call_ctx;

struct srv_grpc {
  grpc_server *server;
  int n_cq;
  grpc_completion_queue **cqs;
  uv_thread_t *threads;
  int port;
  atomic_int live;      /* call contexts alive */
  atomic_bool stopping; /* no new request_call once set */
  grpc_completion_queue *shutdown_cq;
};

static void request_call(srv_grpc *s, grpc_completion_queue *cq) {
  if (atomic_load(&s->stopping)) return;
  call_ctx *c = calloc(1, sizeof *c);
  if (!c) return;
  c->srv = s;
  c->cq = cq;
  c->state = CALL_REQUESTED;
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
  if (c->call) grpc_call_unref(c->call);
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->req_md);
  if (c->state == CALL_FINISHING) grpc_slice_unref(c->status_details);
  atomic_fetch_sub(&c->srv->live, 1);
  free(c);
}

/* Answers with a status and no message. */
static void finish(call_ctx *c, grpc_status_code code, const char *msg) {
  c->state = CALL_FINISHING;
  c->status_details = grpc_slice_from_copied_string(msg);
  grpc_op ops[3];
  memset(ops, 0, sizeof ops);
  ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
  ops[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
  ops[1].data.send_status_from_server.status = code;
  ops[1].data.send_status_from_server.status_details = &c->status_details;
  ops[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
  ops[2].data.recv_close_on_server.cancelled = &c->cancelled;
  if (grpc_call_start_batch(c->call, ops, 3, c, NULL) != GRPC_CALL_OK) free_call(c);
}

static void on_event(call_ctx *c, bool ok) {
  switch (c->state) {
    case CALL_REQUESTED: {
      if (!ok) {
        free_call(c);
        return;
      }
      request_call(c->srv, c->cq);
      char *method = grpc_slice_to_c_string(c->details.method);
      char msg[512];
      snprintf(msg, sizeof msg, "tensord does not implement %s yet", method);
      gpr_free(method);
      finish(c, GRPC_STATUS_UNIMPLEMENTED, msg);
      return;
    }
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

td_code srv_grpc_start(const char *addr, int n_threads, srv_grpc **out, td_err *err) {
  if (n_threads < 1) n_threads = 1;
  srv_grpc *s = calloc(1, sizeof *s);
  if (!s) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  grpc_arg args[] = {
      {GRPC_ARG_INTEGER, GRPC_ARG_ALLOW_REUSEPORT, {.integer = 0}},
      {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = -1}},
      {GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = -1}},
  };
  grpc_channel_args cargs = {sizeof args / sizeof args[0], args};
  s->server = grpc_server_create(&cargs, NULL);
  s->n_cq = n_threads;
  s->cqs = calloc((size_t)n_threads, sizeof *s->cqs);
  s->threads = calloc((size_t)n_threads, sizeof *s->threads);
  if (!s->server || !s->cqs || !s->threads) {
    if (s->server) grpc_server_destroy(s->server);
    free(s->cqs);
    free(s->threads);
    free(s);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "cannot create the gRPC server");
  }
  for (int i = 0; i < n_threads; i++) {
    s->cqs[i] = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(s->server, s->cqs[i], NULL);
  }
  s->shutdown_cq = grpc_completion_queue_create_for_pluck(NULL);
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  s->port = grpc_server_add_http2_port(s->server, addr, creds);
  grpc_server_credentials_release(creds);
  if (!s->port) {
    grpc_server_destroy(s->server);
    for (int i = 0; i < n_threads; i++) grpc_completion_queue_destroy(s->cqs[i]);
    grpc_completion_queue_destroy(s->shutdown_cq);
    free(s->cqs);
    free(s->threads);
    free(s);
    return td_err_set(err, TD_UNAVAILABLE, "gRPC: cannot listen on %s (address in use?)", addr);
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

void srv_grpc_stop(srv_grpc *s) {
  if (!s) return;
  atomic_store(&s->stopping, true);
  grpc_server_shutdown_and_notify(s->server, s->shutdown_cq, s);
  grpc_server_cancel_all_calls(s->server);
  grpc_completion_queue_pluck(s->shutdown_cq, s, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  /* Pending request_call tags complete with ok=false and free themselves;
   * wait for every context before shutting the queues down. */
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
