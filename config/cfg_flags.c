#include "cfg_flags.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "td_log.h"

typedef enum { FLAG_INT, FLAG_STRING, FLAG_BOOL, FLAG_INT64, FLAG_DOUBLE } flag_kind;

typedef struct flag_def {
  const char *name;
  flag_kind kind;
  size_t offset;
  const char *help;
} flag_def;

/* TF Serving's flags that mean nothing here: warned about when given. */
static const char *const no_effect_flags[] = {"prefer_tflite_model",
                                              "num_tflite_pools",
                                              "num_tflite_interpreters_per_pool",
                                              "xla_cpu_compilation_enabled",
                                              "xla_gpu_compilation_enabled",
                                              "enable_profiler",
                                              "use_alts_credentials",
                                              "mixed_precision",
                                              "skip_initialize_tpu",
                                              "thread_pool_factory_config_file"};

static bool has_no_effect(const char *name) {
  for (size_t i = 0; i < sizeof no_effect_flags / sizeof no_effect_flags[0]; i++)
    if (!strcmp(no_effect_flags[i], name)) return true;
  return false;
}

#define OPT(field) offsetof(cfg_options, field)

static const flag_def flags[] = {
    {"port", FLAG_INT, OPT(port), "TCP port for gRPC (default 8500)"},
    {"rest_api_port", FLAG_INT, OPT(rest_api_port),
     "TCP port for the REST API; 0 disables REST (default 0)"},
    {"rest_api_num_threads", FLAG_INT, OPT(rest_api_num_threads),
     "HTTP threads; 0 = 4 x CPU cores (default 0)"},
    {"rest_api_timeout_in_ms", FLAG_INT, OPT(rest_api_timeout_in_ms),
     "REST model-run deadline in ms, 504 past it; <= 0 = none (default 30000)"},
    {"rest_api_enable_cors_support", FLAG_BOOL, OPT(rest_api_enable_cors_support),
     "add CORS headers and answer OPTIONS preflights (default false)"},
    {"tensord_rest_max_body_bytes", FLAG_INT, OPT(rest_max_body_bytes),
     "largest REST request body, after gunzip; 413 above (default 268435456)"},
    {"tensord_max_request_input_bytes", FLAG_INT64, OPT(max_request_input_bytes),
     "most bytes one request's input tensors may decode to (gRPC, REST predict); "
     "RESOURCE_EXHAUSTED (HTTP 413) above (default 4294967296)"},
    {"model_name", FLAG_STRING, OPT(model_name), "name of the served model (default \"default\")"},
    {"model_base_path", FLAG_STRING, OPT(model_base_path),
     "directory (or s3://bucket/prefix, gs://bucket/prefix) holding the model's numbered "
     "version directories"},
    {"tensord_object_cache_dir", FLAG_STRING, OPT(object_cache_dir),
     "where s3:// and gs:// model versions are downloaded before loading (default: "
     "$TMPDIR/tensord-cache-PID)"},
    {"saved_model_tags", FLAG_STRING, OPT(saved_model_tags),
     "comma-separated MetaGraph tags to load (default \"serve\")"},
    {"tensord_num_workers", FLAG_INT, OPT(num_workers),
     "engine worker threads; 0 = one per CPU core (default 0)"},
    {"tensord_inline_run_max_micros", FLAG_INT64, OPT(inline_run_max_micros),
     "runs measured to average at most N microseconds may run on the thread that received "
     "the request when an engine worker is idle; 0 = never (default 100)"},
    {"tensorflow_intra_op_parallelism", FLAG_INT, OPT(intra_op_threads),
     "threads one op (a matrix product) may use; 0 = one per CPU core (default 0)"},
    {"grpc_socket_path", FLAG_STRING, OPT(grpc_socket_path),
     "also serve gRPC on this UNIX socket (default none)"},
    {"grpc_channel_arguments", FLAG_STRING, OPT(grpc_channel_arguments),
     "gRPC server channel arguments, key=value pairs separated by commas"},
    {"grpc_max_threads", FLAG_INT, OPT(grpc_max_threads),
     "gRPC polling threads, at most one per CPU core; 0 = one per core (default 0)"},
    {"ssl_config_file", FLAG_STRING, OPT(ssl_config_file),
     "text-format SSLConfig: serve gRPC over TLS (default plaintext)"},
    {"enable_serialization_as_tensor_content", FLAG_BOOL,
     OPT(enable_serialization_as_tensor_content),
     "gRPC Predict writes outputs in tensor_content (default false)"},
    {"enable_grpc_healthcheck_service", FLAG_BOOL, OPT(enable_grpc_healthcheck_service),
     "accepted for compatibility: grpc.health.v1.Health is always served"},
    {"model_config_file", FLAG_STRING, OPT(model_config_file),
     "text-format ModelServerConfig file (overrides --model_name/--model_base_path)"},
    {"model_config_file_poll_wait_seconds", FLAG_DOUBLE, OPT(model_config_file_poll_wait_seconds),
     "reread --model_config_file every N seconds; 0 = read once (default 0)"},
    {"file_system_poll_wait_seconds", FLAG_DOUBLE, OPT(file_system_poll_wait_seconds),
     "scan base paths for new versions every N seconds; 0 = once (default 1)"},
    {"allow_version_labels_for_unavailable_models", FLAG_BOOL,
     OPT(allow_version_labels_for_unavailable_models),
     "let new labels point at versions that are not AVAILABLE (default false)"},
    {"num_load_threads", FLAG_INT, OPT(num_load_threads),
     "threads loading model versions; 0 = one (default 0)"},
    {"max_num_load_retries", FLAG_INT, OPT(max_num_load_retries),
     "retries after a failed load (default 5)"},
    {"load_retry_interval_micros", FLAG_INT64, OPT(load_retry_interval_micros),
     "wait between load retries in microseconds (default 60000000)"},
    {"enable_model_warmup", FLAG_BOOL, OPT(enable_model_warmup),
     "replay assets.extra/tf_serving_warmup_requests before serving (default true)"},
    {"num_request_iterations_for_warmup", FLAG_INT, OPT(num_request_iterations_for_warmup),
     "replay each warmup record N times; 0 = once (default 0)"},
    {"tensord_shutdown_grace_seconds", FLAG_DOUBLE, OPT(shutdown_grace_seconds),
     "on SIGTERM/SIGINT, wait up to N seconds for in-flight requests (default 10)"},
    {"tensord_drain_seconds", FLAG_DOUBLE, OPT(drain_seconds),
     "on SIGTERM/SIGINT, keep serving N seconds with /readyz 503 and gRPC health NOT_SERVING "
     "before the listeners close; a second signal ends it (default 0)"},
    {"enable_batching", FLAG_BOOL, OPT(enable_batching),
     "merge concurrent requests into batches (default false)"},
    {"batching_parameters_file", FLAG_STRING, OPT(batching_parameters_file),
     "text-format BatchingParameters for --enable_batching (default: TF Serving's defaults)"},
    {"device", FLAG_STRING, OPT(device),
     "where models run: auto (a GPU when one is usable, else the CPU), cpu, gpu, or reference "
     "(the GPU code path on a host emulation, for testing) (default auto)"},
    {"per_process_gpu_memory_fraction", FLAG_DOUBLE, OPT(per_process_gpu_memory_fraction),
     "share of the GPU's memory tensord may use, 0 to 1; 0 = all of it (default 0)"},
    {"tensord_gpu_allow_tf32", FLAG_BOOL, OPT(gpu_allow_tf32),
     "let GPU matrix products use TF32 tensor cores: faster, about 1e-3 relative error "
     "(default false: FP32, matching the CPU)"},
    {"tensord_cuda_plugin", FLAG_STRING, OPT(cuda_plugin),
     "path of libtensord_cuda.so (default: next to the executable, then the loader path)"},
    {"monitoring_config_file", FLAG_STRING, OPT(monitoring_config_file),
     "text-format MonitoringConfig: prometheus_config { enable: true path: \"...\" } serves "
     "metrics on the REST port (default none)"},
    {"platform_config_file", FLAG_STRING, OPT(platform_config_file),
     "text-format PlatformConfigMap: the tensorflow platform's session thread counts and "
     "batching parameters replace the session and batching flags (default none)"},
    {"tensorflow_session_config_file", FLAG_STRING, OPT(tensorflow_session_config_file),
     "text-format ConfigProto: its thread counts are used (default none)"},
    {"thread_pool_factory_config_file", FLAG_STRING, OPT(thread_pool_factory_config_file),
     "no effect (TF thread-pool factories): tensord keeps its own pools"},
    {"tensorflow_inter_op_parallelism", FLAG_INT, OPT(inter_op_threads),
     "engine worker threads (runs at once) when --tensord_num_workers is 0; 0 = one per CPU "
     "core (default 0)"},
    {"tensorflow_session_parallelism", FLAG_INT, OPT(session_parallelism),
     "sets both intra- and inter-op threads when neither is given (default 0)"},
    {"enable_per_model_batching_parameters", FLAG_BOOL, OPT(enable_per_model_batching_parameters),
     "read batching_params.pbtxt from a model's version directory (default false)"},
    {"num_unload_threads", FLAG_INT, OPT(num_unload_threads),
     "accepted; versions unload on the manager's thread (default 0)"},
    {"flush_filesystem_caches", FLAG_BOOL, OPT(flush_filesystem_caches),
     "after a load, tell the kernel the model files' pages may go (default true)"},
    {"enable_signature_method_name_check", FLAG_BOOL, OPT(enable_signature_method_name_check),
     "Classify/Regress/Predict require the signature's method_name to match (default false)"},
    {"remove_unused_fields_from_bundle_metagraph", FLAG_BOOL,
     OPT(remove_unused_fields_from_bundle_metagraph),
     "accepted; tensord never keeps the MetaGraphDef after a load (default true)"},
    {"prefer_tflite_model", FLAG_BOOL, OPT(prefer_tflite_model), "no effect (TFLite)"},
    {"num_tflite_pools", FLAG_INT, OPT(num_tflite_pools), "no effect (TFLite)"},
    {"num_tflite_interpreters_per_pool", FLAG_INT, OPT(num_tflite_interpreters_per_pool),
     "no effect (TFLite)"},
    {"xla_cpu_compilation_enabled", FLAG_BOOL, OPT(xla_cpu_compilation_enabled), "no effect (XLA)"},
    {"xla_gpu_compilation_enabled", FLAG_BOOL, OPT(xla_gpu_compilation_enabled), "no effect (XLA)"},
    {"enable_profiler", FLAG_BOOL, OPT(enable_profiler), "no effect (TF profiler)"},
    {"use_alts_credentials", FLAG_BOOL, OPT(use_alts_credentials), "no effect (Google ALTS)"},
    {"mixed_precision", FLAG_STRING, OPT(mixed_precision), "no effect (mixed precision)"},
    {"skip_initialize_tpu", FLAG_BOOL, OPT(skip_initialize_tpu), "no effect (TPU)"},
    {"tensord_log_json", FLAG_BOOL, OPT(log_json),
     "log lines as JSON objects: time, level, message, model, version (default false)"},
    {"help", FLAG_BOOL, OPT(help), "print this help and exit"},
    {"version", FLAG_BOOL, OPT(version), "print the version and exit"},
};

static int cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (int)n : 1;
}

void cfg_options_defaults(cfg_options *o) {
  *o = (cfg_options){
      .port = 8500,
      .rest_api_port = 0,
      .model_name = "default",
      .batching_parameters_file = "",
      .device = "auto",
      .cuda_plugin = "",
      .model_base_path = "",
      .object_cache_dir = "",
      .saved_model_tags = "serve",
      .grpc_socket_path = "",
      .grpc_channel_arguments = "",
      .ssl_config_file = "",
      .rest_api_timeout_in_ms = 30000,
      .rest_max_body_bytes = 256 << 20,
      .max_request_input_bytes = (int64_t)4 << 30,
      .model_config_file = "",
      .file_system_poll_wait_seconds = 1,
      .max_num_load_retries = 5,
      .load_retry_interval_micros = 60000000,
      .enable_model_warmup = true,
      .shutdown_grace_seconds = 10,
      .inline_run_max_micros = 100,
      .monitoring_config_file = "",
      .platform_config_file = "",
      .tensorflow_session_config_file = "",
      .thread_pool_factory_config_file = "",
      .flush_filesystem_caches = true,
      .remove_unused_fields_from_bundle_metagraph = true,
      .num_tflite_pools = cpu_count(),
      .num_tflite_interpreters_per_pool = 1,
      .enable_profiler = true,
      .mixed_precision = "",
  };
}

static const flag_def *find_flag(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    if (strlen(flags[i].name) == len && !strncmp(flags[i].name, name, len)) return &flags[i];
  return NULL;
}

static td_code set_value(const flag_def *f, const char *value, cfg_options *o, td_err *err) {
  char *slot = (char *)o + f->offset;
  switch (f->kind) {
    case FLAG_STRING:
      *(const char **)slot = value;
      return TD_OK;
    case FLAG_INT: {
      char *end;
      errno = 0;
      long v = strtol(value, &end, 10);
      if (!*value || *end || errno || v < INT_MIN || v > INT_MAX)
        return td_err_set(err, TD_INVALID_ARGUMENT, "flag --%s: '%s' is not an integer", f->name,
                          value);
      *(int *)slot = (int)v;
      return TD_OK;
    }
    case FLAG_INT64: {
      char *end;
      errno = 0;
      long long v = strtoll(value, &end, 10);
      if (!*value || *end || errno)
        return td_err_set(err, TD_INVALID_ARGUMENT, "flag --%s: '%s' is not an integer", f->name,
                          value);
      *(int64_t *)slot = (int64_t)v;
      return TD_OK;
    }
    case FLAG_DOUBLE: {
      char *end;
      errno = 0;
      double v = strtod(value, &end);
      if (!*value || *end || errno || !isfinite(v))
        return td_err_set(err, TD_INVALID_ARGUMENT, "flag --%s: '%s' is not a number", f->name,
                          value);
      *(double *)slot = v;
      return TD_OK;
    }
    case FLAG_BOOL:
      if (!strcmp(value, "true") || !strcmp(value, "1")) {
        *(bool *)slot = true;
      } else if (!strcmp(value, "false") || !strcmp(value, "0")) {
        *(bool *)slot = false;
      } else {
        return td_err_set(err, TD_INVALID_ARGUMENT, "flag --%s: '%s' is not true or false", f->name,
                          value);
      }
      return TD_OK;
  }
  return td_err_set(err, TD_INTERNAL, "flag --%s: bad kind", f->name);
}

td_code cfg_flags_parse(int argc, char **argv, cfg_options *o, td_err *err) {
  char no_effect[512] = "";
  size_t used = 0;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    const flag_def *f = NULL;
    const char *name = arg, *eq = NULL;
    if (arg[0] == '-' && arg[1]) {
      name = arg + (arg[1] == '-' ? 2 : 1);
      eq = strchr(name, '=');
      f = find_flag(name, eq ? (size_t)(eq - name) : strlen(name));
    }
    if (!f) {
      /* TF Serving prints "unknown argument" and carries on. */
      td_log_warn("unknown argument: %s (ignored)", arg);
      continue;
    }
    const char *value = eq ? eq + 1 : NULL;
    if (!value) {
      if (f->kind == FLAG_BOOL) {
        value = "true";
      } else if (i + 1 < argc) {
        value = argv[++i];
      } else {
        return td_err_set(err, TD_INVALID_ARGUMENT, "flag --%s needs a value", f->name);
      }
    }
    td_code rc = set_value(f, value, o, err);
    if (rc) return rc;
    if (has_no_effect(f->name) && !strstr(no_effect, f->name) && used < sizeof no_effect - 1) {
      int n =
          snprintf(no_effect + used, sizeof no_effect - used, "%s--%s", used ? ", " : "", f->name);
      if (n > 0) used += (size_t)n < sizeof no_effect - used ? (size_t)n : 0;
    }
  }
  if (used)
    td_log_warn(
        "flags with no effect in tensord (TFLite, XLA, TPU, ALTS, profiler, mixed "
        "precision, thread-pool factory): %s",
        no_effect);
  return TD_OK;
}

td_code cfg_options_validate(const cfg_options *o, td_err *err) {
  bool config_file = o->model_config_file && *o->model_config_file;
  if (!config_file && (!o->model_base_path || !*o->model_base_path))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--model_base_path is required (the directory holding numbered versions) "
                      "unless --model_config_file is given: Both server_options.model_base_path "
                      "and server_options.model_config_file are empty!");
  if (!o->model_name || !*o->model_name)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--model_name must not be empty");
  if (o->port < 0 || o->port > 65535)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--port %d is out of range", o->port);
  if (o->rest_api_port < 0 || o->rest_api_port > 65535)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--rest_api_port %d is out of range",
                      o->rest_api_port);
  if (o->rest_api_port && o->rest_api_port == o->port)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--rest_api_port must differ from --port (%d)",
                      o->port);
  if (*o->batching_parameters_file && !o->enable_batching)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "server_options.batching_parameters_file is set without setting "
                      "server_options.enable_batching to true.");
  if (o->num_workers < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--tensord_num_workers must be >= 0");
  if (o->inline_run_max_micros < 0 || o->inline_run_max_micros > 60000000)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--tensord_inline_run_max_micros must be in [0, 60000000]");
  if (o->intra_op_threads < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--tensorflow_intra_op_parallelism must be >= 0");
  if (o->inter_op_threads < 0 || o->inter_op_threads > 1024)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--tensorflow_inter_op_parallelism must be in [0, 1024]");
  if (o->session_parallelism < 0 || o->session_parallelism > 1024)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--tensorflow_session_parallelism must be in [0, 1024]");
  /* TF Serving's rule (server.cc). */
  if (o->session_parallelism > 0 && o->intra_op_threads > 0 && o->inter_op_threads > 0)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Either configure server_options.tensorflow_session_parallelism or "
                      "(server_options.tensorflow_intra_op_parallelism, "
                      "server_options.tensorflow_inter_op_parallelism), not both");
  if (o->num_unload_threads < 0 || o->num_tflite_pools < 0 ||
      o->num_tflite_interpreters_per_pool < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--num_unload_threads, --num_tflite_pools and "
                      "--num_tflite_interpreters_per_pool must be >= 0");
  if (o->use_alts_credentials && *o->ssl_config_file)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--use_alts_credentials and --ssl_config_file cannot both be set");
  if (strcmp(o->device, "auto") && strcmp(o->device, "cpu") && strcmp(o->device, "gpu") &&
      strcmp(o->device, "reference"))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--device must be auto, cpu, gpu or reference, not '%s'", o->device);
  if (!(o->per_process_gpu_memory_fraction >= 0 && o->per_process_gpu_memory_fraction <= 1))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--per_process_gpu_memory_fraction must be between 0 and 1, not %g",
                      o->per_process_gpu_memory_fraction);
  if (o->grpc_max_threads < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--grpc_max_threads must be >= 0");
  if (o->rest_api_num_threads < 0 || o->rest_api_num_threads > 1024)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--rest_api_num_threads must be in [0, 1024]");
  if (o->rest_max_body_bytes < 1)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--tensord_rest_max_body_bytes must be >= 1");
  if (o->max_request_input_bytes < 1)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--tensord_max_request_input_bytes must be >= 1");
  if (o->num_load_threads < 0 || o->num_load_threads > 1024)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--num_load_threads must be in [0, 1024]");
  if (o->max_num_load_retries < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--max_num_load_retries must be >= 0");
  if (o->num_request_iterations_for_warmup < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "--num_request_iterations_for_warmup must be >= 0");
  if (o->model_config_file_poll_wait_seconds < 0 || o->shutdown_grace_seconds < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "--model_config_file_poll_wait_seconds and "
                      "--tensord_shutdown_grace_seconds must be >= 0");
  if (!(o->drain_seconds >= 0 && o->drain_seconds <= 3600))
    return td_err_set(err, TD_INVALID_ARGUMENT, "--tensord_drain_seconds must be in [0, 3600]");
  return TD_OK;
}

void cfg_flags_usage(FILE *f, const char *argv0) {
  fprintf(f, "usage: %s (--model_base_path=DIR | --model_config_file=FILE) [flags]\n\nFlags:\n",
          argv0);
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
    fprintf(f, "  --%-24s %s\n", flags[i].name, flags[i].help);
  fprintf(f,
          "\nEnvironment: TF_CPP_MIN_LOG_LEVEL (0 info, 1 warnings, 2 errors, 3 none), "
          "TF_CPP_MAX_VLOG_LEVEL (1: a line per request), TF_CPP_VMODULE (module=level,...)\n");
}
