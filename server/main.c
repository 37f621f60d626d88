/* tensord: a TensorFlow-Serving-compatible model server.
 *
 * Start-up order follows TF Serving: parse flags, read the model config
 * (--model_config_file, or --model_name/--model_base_path), wait until
 * every configured model's first aspired version has loaded, then open the
 * gRPC and REST ports. Unlike TF Serving, a failed load does not stop the
 * process: the ports open anyway so the status API can report the error
 * (and retries go on). A config file that does not parse, or labels that
 * cannot be applied, stop it as they stop TF Serving.
 *
 * Signals (blocked in every thread of ours, handled by the main thread's
 * libuv loop; the handlers are installed before the first load, as threads
 * made before main, OpenBLAS's pool, do not block them): SIGHUP rereads
 * --model_config_file;
 * SIGINT/SIGTERM stop the server. With --tensord_drain_seconds=N > 0 it
 * first drains as load balancers need: /readyz answers 503 and gRPC health
 * NOT_SERVING at once while every request is still served for N seconds
 * (a second signal ends that early). Then no new requests are taken,
 * requests in flight finish (up to --tensord_shutdown_grace_seconds),
 * every version is unloaded, and the process exits 0. A signal during the
 * start-up loads stops it at once (nothing serves yet). */
#include <grpc/grpc.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "bat_batcher.h"
#include "bat_queue.h"
#include "cfg_batching.h"
#include "cfg_flags.h"
#include "cfg_monitoring.h"
#include "cfg_platform.h"
#include "cfg_session.h"
#include "eng_device.h"
#include "eng_isa.h"
#include "eng_threads.h"
#include "ldr_inspect.h"
#include "ldr_manager.h"
#include "ldr_registry.h"
#include "ldr_watch.h"
#include "srv_api.h"
#include "srv_grpc.h"
#include "srv_metrics.h"
#include "srv_reqlog.h"
#include "srv_rest.h"
#include "srv_stats.h"
#include "srv_v2repo.h"
#include "td_log.h"
#include "td_metrics.h"

#define MAX_QUEUED_REQUESTS 4096

static volatile bool stop_requested;

/* What a stop signal needs once the ports are open (main thread only). */
static struct {
  srv_rest *rest;
  srv_grpc *grpc;
  double drain_seconds;
  uv_timer_t timer;
  bool timer_started;
} drain;

static void on_drain_end(uv_timer_t *t) {
  td_log_info("drain period over, closing listeners");
  uv_stop(t->loop);
}

static void on_signal(uv_signal_t *h, int signum) {
  bool serving = drain.rest || drain.grpc;
  if (drain.timer_started || !serving || drain.drain_seconds <= 0) {
    td_log_info("received signal %d, shutting down", signum);
    stop_requested = true;
    uv_stop(h->loop);
    return;
  }
  td_log_info("received signal %d, draining: not ready, still serving for %g s", signum,
              drain.drain_seconds);
  stop_requested = true;
  srv_rest_drain(drain.rest);
  srv_grpc_drain(drain.grpc);
  uv_timer_init(h->loop, &drain.timer);
  uv_timer_start(&drain.timer, on_drain_end, (uint64_t)(drain.drain_seconds * 1000.0 + 0.5), 0);
  drain.timer_started = true;
}

static void on_sighup(uv_signal_t *h, int signum) {
  ldr_watch *watch = h->data;
  td_err err;
  if (!watch) {
    td_log_warn("SIGHUP: the server is still starting; ignored");
  } else if (!ldr_watch_reload_config(watch, &err)) {
    td_log_info("SIGHUP: model config reread");
  } else if (err.code == TD_FAILED_PRECONDITION) {
    td_log_info("SIGHUP: %s", err.msg);
  }
}

/* The models to serve at start-up; exits on a bad config file. */
static td_code initial_config(const cfg_options *opt, cfg_model_config *c, td_err *err) {
  if (opt->model_config_file && *opt->model_config_file)
    return cfg_model_config_read_file(opt->model_config_file, c, err);
  return cfg_model_config_single(opt->model_name, opt->model_base_path, c, err);
}

/* Memory of an unloaded model version must go back to the system (TF
 * Serving users report RSS that only grows across version swaps). glibc
 * raises its mmap threshold each time a large mmapped block is freed, after
 * which weights land in thread arenas whose freed tops it keeps. Fixed
 * thresholds (glibc's initial values) keep large blocks mmapped and
 * returned on free. Each arena also keeps its own free fragments: a version
 * load and its requests touch a few more of glibc's 8-per-core arenas each
 * time, so RSS crept at swaps far beyond the bytes in use; two arenas
 * per core hold that creep to about half (see the soak in
 * docs/benchmarks.md). The MALLOC_* environment variables still win. */
static void fix_malloc_thresholds(void) {
  if (!getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  if (!getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (!getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 2 * (int)(cores > 0 ? cores : 1));
}

/* Per-model batching parameters from the current model config. */
static bool model_batching(void *ctx, const char *model, cfg_batching *out,
                           int64_t *queue_timeout_micros) {
  return ldr_manager_model_batching(ctx, model, out, queue_timeout_micros);
}

static int cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

int main(int argc, char **argv) {
  cfg_options opt;
  td_err err;
  if (argc >= 2 && !strcmp(argv[1], "inspect")) { /* tensord inspect DIR [TAGS] */
    if (argc < 3 || argc > 4) {
      fprintf(stderr, "usage: %s inspect SAVED_MODEL_DIR [TAGS (default serve)]\n", argv[0]);
      return 2;
    }
    if (ldr_inspect_print(argv[2], argc > 3 ? argv[3] : "serve", stdout, &err)) {
      fprintf(stderr, "%s inspect: %s\n", argv[0], err.msg);
      return 1;
    }
    return 0;
  }
  td_log_init_from_env();        /* TF_CPP_MIN_LOG_LEVEL, TF_CPP_MAX_VLOG_LEVEL, TF_CPP_VMODULE */
  for (int i = 1; i < argc; i++) /* before the flags' own warnings */
    if (!strcmp(argv[i], "--tensord_log_json") || !strcmp(argv[i], "--tensord_log_json=true") ||
        !strcmp(argv[i], "--tensord_log_json=1"))
      td_log_set_json(true);
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
           TENSORD_CUDA_BUILD ? "built (libtensord_cuda.so, used with --device=auto|gpu)"
                              : "not built");
    return 0;
  }
  td_log_set_json(opt.log_json);
  if (cfg_options_validate(&opt, &err)) {
    fprintf(stderr, "%s: %s\n\n", argv[0], err.msg);
    cfg_flags_usage(stderr, argv[0]);
    return 2;
  }
  /* Thread counts: the flags, else --tensorflow_session_parallelism, else
   * the session config file's ConfigProto. */
  cfg_session session = {0};
  if (*opt.tensorflow_session_config_file &&
      cfg_session_load(opt.tensorflow_session_config_file, &session, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  /* --platform_config_file replaces the session and batching flags, as in
   * TF Serving. */
  cfg_platform platform = {0};
  if (*opt.platform_config_file) {
    if (cfg_platform_load(opt.platform_config_file, cpu_count(), &platform, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      return 1;
    }
    opt.intra_op_threads = opt.inter_op_threads = opt.session_parallelism = 0;
    session = platform.session;
    opt.enable_batching = platform.has_batching;
    opt.enable_model_warmup = platform.enable_warmup;
    opt.num_request_iterations_for_warmup = platform.warmup_iterations;
    opt.enable_per_model_batching_parameters = platform.per_model_batching;
    if (*platform.saved_model_tags) opt.saved_model_tags = platform.saved_model_tags;
  }
  int intra = opt.intra_op_threads      ? opt.intra_op_threads
              : opt.session_parallelism ? opt.session_parallelism
                                        : session.intra_op_threads;
  eng_threads_set(intra); /* before any engine work */
  {
    eng_device_opts dopt = {.memory_fraction = opt.per_process_gpu_memory_fraction,
                            .allow_tf32 = opt.gpu_allow_tf32,
                            .plugin = *opt.cuda_plugin ? opt.cuda_plugin : NULL};
    char note[1024];
    if (eng_device_parse_mode(opt.device, &dopt.mode, &err) ||
        eng_device_select(&dopt, note, sizeof note, &err)) {
      fprintf(stderr, "%s: %s\n", argv[0], err.msg);
      return 1;
    }
    td_log_info("%s", note);
  }

  fix_malloc_thresholds();
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
  signal(SIGPIPE, SIG_IGN);

  ldr_registry *registry = NULL;
  ldr_manager *manager = NULL;
  ldr_watch *watch = NULL;
  bool clean = true;
  bat_queue *queue = NULL;
  bat_batcher *batcher = NULL;
  srv_grpc *grpc = NULL;
  srv_rest *rest = NULL;
  srv_stats *stats = NULL;
  srv_v2repo *repo = NULL;
  int rc = 1;
  /* Engine workers bound the runs computing at once, as TF's inter-op pool
   * does; --tensord_num_workers wins over TF Serving's names. */
  int inter = opt.inter_op_threads      ? opt.inter_op_threads
              : opt.session_parallelism ? opt.session_parallelism
                                        : session.inter_op_threads;
  int workers = opt.num_workers ? opt.num_workers : inter ? inter : cpu_count();
  td_log_info("Engine: %d worker threads (runs at once), %d threads per op", workers,
              intra ? intra : cpu_count());
  {
    char isa[160];
    td_log_info("%s", eng_isa_describe(isa, sizeof isa));
  }

  cfg_batching batching;
  cfg_batching_defaults(&batching, cpu_count());
  if (platform.has_batching) {
    batching = platform.batching;
  } else if (*opt.batching_parameters_file && !*opt.platform_config_file &&
             cfg_batching_load(opt.batching_parameters_file, cpu_count(), &batching, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  cfg_monitoring monitoring = {0};
  if (*opt.monitoring_config_file &&
      cfg_monitoring_load(opt.monitoring_config_file, &monitoring, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  if (monitoring.prometheus_enable && !opt.rest_api_port)
    td_log_warn(
        "--monitoring_config_file enables Prometheus, which is served on the REST port: "
        "set --rest_api_port");
  td_metrics_set_enabled(monitoring.prometheus_enable);
  srv_api_set_method_name_check(opt.enable_signature_method_name_check);
  cfg_model_config models;
  if (initial_config(&opt, &models, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  ldr_manager_options mo = {
      .tags = opt.saved_model_tags,
      .num_load_threads = opt.num_load_threads,
      .max_num_load_retries = opt.max_num_load_retries,
      .load_retry_interval_micros = opt.load_retry_interval_micros,
      .enable_warmup = opt.enable_model_warmup,
      .warmup_iterations = opt.num_request_iterations_for_warmup,
      .allow_labels_for_unavailable = opt.allow_version_labels_for_unavailable_models,
      .per_model_batching = opt.enable_per_model_batching_parameters,
      .cpus = cpu_count(),
      .flush_caches = opt.flush_filesystem_caches,
      .object_cache_dir = opt.object_cache_dir};
  mo.on_config = srv_reqlog_configure; /* logging_config, before the first config */
  srv_reqlog_start();
  /* The handlers are in place before the first load starts: threads made
   * before main (OpenBLAS's pool) do not block these signals, so a signal
   * that came while the default action was still set would kill the
   * process. The loop acts on it once the signals are unblocked below. */
  uv_loop_t *loop = uv_default_loop();
  uv_signal_t sig_int, sig_term, sig_hup;
  uv_signal_init(loop, &sig_int);
  uv_signal_init(loop, &sig_term);
  uv_signal_init(loop, &sig_hup);
  sig_hup.data = NULL;
  uv_signal_start(&sig_int, on_signal, SIGINT);
  uv_signal_start(&sig_term, on_signal, SIGTERM);
  uv_signal_start(&sig_hup, on_sighup, SIGHUP);
  uint64_t ticket = 0;
  if (ldr_registry_create(opt.saved_model_tags, &registry, &err) ||
      ldr_manager_create(registry, &mo, &manager, &err) ||
      ldr_manager_set_config(manager, &models, &ticket, &err)) {
    cfg_model_config_free(&models);
    td_log_error("%s", err.msg);
    goto out_loop;
  }
  cfg_model_config_free(&models);
  srv_metrics_init(registry);

  /* Signals work from here on, also while the first versions load. */
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, NULL);
  td_code ready;
  while ((ready = ldr_manager_wait(manager, ticket, 20, &err)) == TD_DEADLINE_EXCEEDED &&
         !stop_requested)
    uv_run(loop, UV_RUN_NOWAIT);
  if (ready == TD_FAILED_PRECONDITION) {
    /* Labels that cannot be applied: TF Serving refuses to start too. */
    fprintf(stderr, "Failed to start server. Error: %s\n", err.msg);
    rc = 1;
    goto out_loop;
  }
  /* A model without a loaded version is reported; the server starts. */
  if (ready && ready != TD_DEADLINE_EXCEEDED && ready != TD_CANCELLED)
    td_log_error("%s", err.msg);
  if (stop_requested) {
    rc = 0;
    goto out_loop;
  }
  ldr_watch_options wo = {.poll_seconds = opt.file_system_poll_wait_seconds,
                          .config_path = opt.model_config_file,
                          .config_poll_seconds = opt.model_config_file_poll_wait_seconds};
  if (ldr_watch_start(loop, manager, &wo, &watch, &err)) {
    td_log_error("%s", err.msg);
    goto out_loop;
  }
  sig_hup.data = watch;

  if (bat_queue_create(workers, MAX_QUEUED_REQUESTS, &queue, &err)) {
    td_log_error("%s", err.msg);
    goto out;
  }
  bat_queue_set_run_here_limit(queue, (uint64_t)opt.inline_run_max_micros * 1000u);
  if (opt.enable_batching) {
    if (bat_batcher_create(&batching, queue, model_batching, manager, &batcher, &err)) {
      td_log_error("%s", err.msg);
      goto out;
    }
    td_log_info("Batching: max_batch_size %lld, batch_timeout_micros %lld, num_batch_threads %lld",
                (long long)batching.max_batch_size, (long long)batching.batch_timeout_micros,
                (long long)batching.num_batch_threads);
  }
  if (!(stats = srv_stats_create()) || srv_v2repo_create(manager, registry, &repo, &err)) {
    td_log_error("out of memory");
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
                           .api = {.registry = registry,
                                   .queue = queue,
                                   .batcher = batcher,
                                   .manager = manager,
                                   .stats = stats,
                                   .repo = repo,

                                   .max_input_bytes = (size_t)opt.max_request_input_bytes}};
    if (srv_grpc_start(&go, &grpc, &err)) {
      td_log_error("%s", err.msg);
      goto out_grpc;
    }
    if (opt.port) td_log_info("Running gRPC ModelServer at 0.0.0.0:%d ...", srv_grpc_port(grpc));
    if (*opt.grpc_socket_path)
      td_log_info("Running gRPC ModelServer at UNIX socket %s ...", opt.grpc_socket_path);
  }
  if (opt.rest_api_port) {
    srv_rest_options ro = {
        .port = opt.rest_api_port,
        .n_threads = opt.rest_api_num_threads ? opt.rest_api_num_threads : 4 * cpu_count(),
        .max_body_bytes = (size_t)opt.rest_max_body_bytes,
        .max_input_bytes = (size_t)opt.max_request_input_bytes,
        .timeout_ms = opt.rest_api_timeout_in_ms,
        .cors = opt.rest_api_enable_cors_support,
        .registry = registry,
        .queue = queue,
        .batcher = batcher,
        .manager = manager,
        .stats = stats,
        .repo = repo,

        .metrics_path = monitoring.prometheus_enable ? monitoring.prometheus_path : NULL};
    if (srv_rest_start(&ro, &rest, &err)) {
      td_log_error("%s", err.msg);
      goto out_grpc;
    }
    td_log_info("Exporting HTTP/REST API at:localhost:%d ...", srv_rest_port(rest));
    if (monitoring.prometheus_enable)
      td_log_info("Prometheus metrics at http://localhost:%d%s", srv_rest_port(rest),
                  monitoring.prometheus_path);
  }

  drain.rest = rest;
  drain.grpc = grpc;
  drain.drain_seconds = opt.drain_seconds;
  if (!stop_requested) uv_run(loop, UV_RUN_DEFAULT);
  rc = 0;

out_grpc:
  /* The listening sockets close, requests in flight finish (new requests
   * on open connections are refused), versions unload; then the transports
   * stop. */
  srv_rest_quiesce(rest);
  srv_grpc_quiesce(grpc);
  clean = ldr_manager_shutdown(manager, opt.shutdown_grace_seconds);
  srv_rest_stop(rest);
  srv_grpc_stop(grpc);
  bat_batcher_destroy(batcher);
  batcher = NULL;
  bat_queue_destroy(queue);
  queue = NULL;
  srv_reqlog_stop(); /* every run is over: what was logged reaches the files */
  grpc_shutdown();
out_loop:
  drain.rest = NULL;
  drain.grpc = NULL;
  if (drain.timer_started) uv_close((uv_handle_t *)&drain.timer, NULL);
  ldr_watch_stop(watch);
  uv_close((uv_handle_t *)&sig_int, NULL);
  uv_close((uv_handle_t *)&sig_term, NULL);
  uv_close((uv_handle_t *)&sig_hup, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
out:
  bat_batcher_destroy(batcher);
  bat_queue_destroy(queue);
  if (manager && clean) clean = ldr_manager_shutdown(manager, opt.shutdown_grace_seconds);
  if (manager && !clean) {
    /* A load still running after the grace period cannot be interrupted:
     * exit without freeing what it uses. */
    td_log_warn("tensord stopped with a load in progress");
    return rc;
  }
  /* The transports are stopped: no call can reach these any more. */
  srv_v2repo_destroy(repo);
  srv_stats_destroy(stats);
  ldr_manager_destroy(manager);
  ldr_registry_destroy(registry);
  td_log_info("tensord stopped");
  return rc;
}
