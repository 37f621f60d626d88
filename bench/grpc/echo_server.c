/* grpc_echo: the baseline for tensord's gRPC benchmark. A minimal unary
 * echo service on the same gRPC core C library, built the way tensord's
 * gRPC server is (one completion queue per polling thread, one context per
 * call as the tag, a single answering batch), but with no work: every call
 * gets its request bytes back with status OK, whatever the method.
 *
 *   grpc_echo PORT [THREADS]      (runs until SIGINT/SIGTERM)
 *
 * Not installed; bench/grpc/run.sh drives it. */
#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CALLS_PER_CQ 32

typedef enum { REQUESTED, READING, FINISHING } state;

typedef struct call {
  grpc_completion_queue *cq;
  state st;
  grpc_call *call;
  grpc_call_details details;
  grpc_metadata_array md;
  grpc_byte_buffer *buf;
  int cancelled;
} call;

static grpc_server *server;
static atomic_int live;
static atomic_bool stopping;

static void request(grpc_completion_queue *cq) {
  if (atomic_load(&stopping)) return;
  call *c = calloc(1, sizeof *c);
  c->cq = cq;
  grpc_call_details_init(&c->details);
  grpc_metadata_array_init(&c->md);
  atomic_fetch_add(&live, 1);
  if (grpc_server_request_call(server, &c->call, &c->details, &c->md, cq, cq, c) != GRPC_CALL_OK) {
    atomic_fetch_sub(&live, 1);
    free(c);
  }
}

static void release(call *c) {
  if (c->call) grpc_call_unref(c->call);
  if (c->buf) grpc_byte_buffer_destroy(c->buf);
  grpc_call_details_destroy(&c->details);
  grpc_metadata_array_destroy(&c->md);
  free(c);
  atomic_fetch_sub(&live, 1);
}

static void on_event(call *c, int ok) {
  grpc_op ops[4];
  memset(ops, 0, sizeof ops);
  switch (c->st) {
    case REQUESTED:
      if (!ok) return release(c);
      request(c->cq);
      c->st = READING;
      ops[0].op = GRPC_OP_RECV_MESSAGE;
      ops[0].data.recv_message.recv_message = &c->buf;
      if (grpc_call_start_batch(c->call, ops, 1, c, NULL) != GRPC_CALL_OK) release(c);
      return;
    case READING: {
      if (!ok) return release(c);
      c->st = FINISHING;
      size_t n = 0;
      ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
      if (c->buf) { /* the request goes back as the response */
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->buf;
      }
      ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
      ops[n++].data.send_status_from_server.status = GRPC_STATUS_OK;
      ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
      ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
      if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK) release(c);
      return;
    }
    case FINISHING:
      release(c);
      return;
  }
}

static void *poll_thread(void *arg) {
  grpc_completion_queue *cq = arg;
  for (;;) {
    grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN) return NULL;
    if (ev.type == GRPC_OP_COMPLETE) on_event(ev.tag, ev.success);
  }
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PORT [THREADS]\n", argv[0]);
    return 2;
  }
  int port = atoi(argv[1]);
  int n = argc > 2 ? atoi(argv[2]) : 1;
  if (n < 1) n = 1;
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL); /* gRPC's threads inherit the mask */
  grpc_init();
  grpc_arg args[] = {
      {GRPC_ARG_INTEGER, GRPC_ARG_ALLOW_REUSEPORT, {.integer = 0}},
      {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = INT_MAX}},
      {GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = INT_MAX}},
  };
  grpc_channel_args cargs = {3, args};
  server = grpc_server_create(&cargs, NULL);
  grpc_completion_queue **cqs = calloc((size_t)n, sizeof *cqs);
  pthread_t *th = calloc((size_t)n, sizeof *th);
  for (int i = 0; i < n; i++) {
    cqs[i] = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(server, cqs[i], NULL);
  }
  char addr[64];
  snprintf(addr, sizeof addr, "0.0.0.0:%d", port);
  grpc_server_credentials *creds = grpc_insecure_server_credentials_create();
  int bound = grpc_server_add_http2_port(server, addr, creds);
  grpc_server_credentials_release(creds);
  if (!bound) {
    fprintf(stderr, "grpc_echo: cannot listen on %s\n", addr);
    return 1;
  }
  grpc_server_start(server);
  for (int i = 0; i < n; i++) {
    for (int k = 0; k < CALLS_PER_CQ; k++) request(cqs[i]);
    pthread_create(&th[i], NULL, poll_thread, cqs[i]);
  }
  fprintf(stderr, "grpc_echo: listening on %s with %d thread(s)\n", addr, n);
  int sig;
  sigwait(&stop, &sig);
  /* Shutdown as in tensord: queues close only once no call is alive. */
  atomic_store(&stopping, true);
  grpc_completion_queue *scq = grpc_completion_queue_create_for_pluck(NULL);
  grpc_server_shutdown_and_notify(server, scq, NULL);
  grpc_server_cancel_all_calls(server);
  grpc_completion_queue_pluck(scq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
  while (atomic_load(&live) > 0) nanosleep(&(struct timespec){0, 1000000}, NULL);
  for (int i = 0; i < n; i++) grpc_completion_queue_shutdown(cqs[i]);
  for (int i = 0; i < n; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n; i++) grpc_completion_queue_destroy(cqs[i]);
  grpc_completion_queue_shutdown(scq);
  grpc_completion_queue_destroy(scq);
  grpc_server_destroy(server);
  grpc_shutdown();
  free(cqs);
  free(th);
  return 0;
}
