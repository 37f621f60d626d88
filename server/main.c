/* tensord: a TensorFlow-Serving-compatible model server.
 *
 * Start-up order follows TF Serving: parse flags, load the model's latest
 * version, then open the gRPC and REST ports. Unlike TF Serving, a failed
 * load does not stop the process: the ports open anyway so the status API
 * can report the error. SIGINT/SIGTERM stop the server cleanly: the signal
 * mask is set before any thread starts, so only the main thread's libuv loop
 * sees them. */
#include <grpc/grpc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "bat_queue.h"
#include "cfg_flags.h"
#include "ldr_registry.h"
#include "srv_grpc.h"
#include "srv_rest.h"
#include "td_log.h"

#define MAX_QUEUED_REQUESTS 4096
#define MAX_BODY_BYTES ((size_t)256 << 20)

static void on_signal(uv_signal_t *h, int signum) {
  td_log_info("received signal %d, shutting down", signum);
  uv_stop(h->loop);
}

static int cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int main(int argc, char **argv) {
  cfg_options opt;
  td_err err;
  cfg_options_defaults(&opt);
  if (cfg_flags_parse(argc, argv, &opt, &err)) {
    fprintf(stderr, "%s: %s\n\n", argv[0], err.msg);
    cfg_flags_usage(stderr, argv[0]);
    return 2;
  }
  if (opt.help) {
    cfg_flags_usage(stdout, argv[0]);
    return 0;
  }
  if (opt.version) {
    printf("tensord %s\nCUDA backend: %s\n", TENSORD_VERSION,
           TENSORD_CUDA_BUILD ? "switch on (no GPU kernels yet; CPU engine)" : "off");
    return 0;
  }
  if (cfg_options_validate(&opt, &err)) {
    fprintf(stderr, "%s: %s\n\n", argv[0], err.msg);
    cfg_flags_usage(stderr, argv[0]);
    return 2;
  }

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  signal(SIGPIPE, SIG_IGN);

  ldr_registry *registry = NULL;
  bat_queue *queue = NULL;
  srv_grpc *grpc = NULL;
  srv_rest *rest = NULL;
  int rc = 1;
  int workers = opt.num_workers ? opt.num_workers : cpu_count();

  if (ldr_registry_create(opt.saved_model_tags, &registry, &err) ||
      ldr_registry_add_model(registry, opt.model_name, opt.model_base_path, &err)) {
    td_log_error("%s", err.msg);
    goto out;
  }
  /* A failure is recorded for the status API; the server still starts. */
  ldr_registry_load_latest(registry, opt.model_name, &err);

  if (bat_queue_create(workers, MAX_QUEUED_REQUESTS, &queue, &err)) {
    td_log_error("%s", err.msg);
    goto out;
  }
  grpc_init();
  if (opt.port || *opt.grpc_socket_path) {
    /* Polling threads only decode and queue, so more than one per core
     * buys nothing; --grpc_max_threads caps them. */
    int gthreads = cpu_count();
    if (opt.grpc_max_threads && opt.grpc_max_threads < gthreads) gthreads = opt.grpc_max_threads;
    srv_grpc_options go = {.port = opt.port,
                           .socket_path = opt.grpc_socket_path,
                           .channel_args = opt.grpc_channel_arguments,
                           .n_threads = gthreads,
                           .ssl_config_file = opt.ssl_config_file,
                           .tensor_content = opt.enable_serialization_as_tensor_content,
                           .api = {.registry = registry, .queue = queue}};
    if (srv_grpc_start(&go, &grpc, &err)) {
      td_log_error("%s", err.msg);
      goto out_grpc;
    }
    if (opt.port) td_log_info("Running gRPC ModelServer at 0.0.0.0:%d ...", srv_grpc_port(grpc));
    if (*opt.grpc_socket_path)
      td_log_info("Running gRPC ModelServer at UNIX socket %s ...", opt.grpc_socket_path);
  }
  if (opt.rest_api_port) {
    srv_rest_options ro = {.port = opt.rest_api_port, .n_threads = 1,
                           .max_body_bytes = MAX_BODY_BYTES, .registry = registry, .queue = queue};
    if (srv_rest_start(&ro, &rest, &err)) {
      td_log_error("%s", err.msg);
      goto out_grpc;
    }
    td_log_info("Exporting HTTP/REST API at:localhost:%d ...", srv_rest_port(rest));
  }

  uv_loop_t *loop = uv_default_loop();
  uv_signal_t sig_int, sig_term;
  uv_signal_init(loop, &sig_int);
  uv_signal_init(loop, &sig_term);
  uv_signal_start(&sig_int, on_signal, SIGINT);
  uv_signal_start(&sig_term, on_signal, SIGTERM);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_close((uv_handle_t *)&sig_int, NULL);
  uv_close((uv_handle_t *)&sig_term, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  rc = 0;

out_grpc:
  srv_rest_stop(rest);
  srv_grpc_stop(grpc);
  bat_queue_destroy(queue);
  queue = NULL;
  grpc_shutdown();
out:
  bat_queue_destroy(queue);
  ldr_registry_destroy(registry);
  td_log_info("tensord stopped");
  return rc;
}
