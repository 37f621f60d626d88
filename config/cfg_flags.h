/* cfg_flags: the command line, with TF Serving's flag names and defaults.
 *
 * Flags are described by one table (cfg_flags.c); parsing fills a plain
 * cfg_options value. Every flag of tensorflow_model_server 2.20 is in the
 * table with its type and default, plus tensord's own (`--tensord_*`,
 * `--device`). Accepted forms: `--name=value`, `--name value`, and for
 * booleans `--name`, `--name=true|false|1|0`. A single leading dash works
 * too, as with TensorFlow's flag parser.
 *
 * A missing value or a malformed value of a known flag is an error
 * (INVALID_ARGUMENT naming the flag); the caller prints it with the usage
 * text and exits 2. An unknown flag or a stray argument is not: as TF
 * Serving ("unknown argument"), parsing logs one warning line naming it and
 * goes on, so a command line written for a newer release still starts (an
 * unknown `--name value` pair warns for both words). Flags of TF Serving
 * that mean nothing here (TFLite, XLA, TPU, ALTS, the profiler, mixed
 * precision, thread-pool factories) are parsed and checked, and when given they are named in one
 * warning line saying they have no effect.
 *
 * Strings in cfg_options point into argv or at static defaults: valid for the
 * life of the process, never freed. Not thread-safe; call from main. */
#ifndef CFG_FLAGS_H
#define CFG_FLAGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "td_status.h"

typedef struct cfg_options {
  int port;                          /* --port: gRPC (8500) */
  int rest_api_port;                 /* --rest_api_port: REST; 0 = off */
  int rest_api_num_threads;          /* --rest_api_num_threads: 0 = 4 x CPUs (TF's default) */
  int rest_api_timeout_in_ms;        /* --rest_api_timeout_in_ms (30000); <= 0: no deadline */
  bool rest_api_enable_cors_support; /* --rest_api_enable_cors_support (false) */
  int rest_max_body_bytes;           /* --tensord_rest_max_body_bytes (256 MiB): 413 above */
  int64_t max_request_input_bytes; /* --tensord_max_request_input_bytes (4 GiB): decoded inputs */
  const char *model_name;            /* --model_name ("default") */
  const char *model_base_path;       /* --model_base_path (required): a directory, s3:// or gs:// */
  const char *object_cache_dir;      /* --tensord_object_cache_dir (""): s3:// and gs:// downloads */
  const char *saved_model_tags;      /* --saved_model_tags ("serve") */
  int num_workers;                   /* --tensord_num_workers: engine threads; 0 = one per core */
  int64_t inline_run_max_micros;     /* --tensord_inline_run_max_micros (100): 0 = no inline runs */
  int intra_op_threads; /* --tensorflow_intra_op_parallelism: threads per op; 0 = cores */
  /* gRPC (TF Serving's names). */
  const char *grpc_socket_path;       /* --grpc_socket_path (""): also listen on unix:PATH */
  const char *grpc_channel_arguments; /* --grpc_channel_arguments (""): k=v,k2=v2 */
  int grpc_max_threads;               /* --grpc_max_threads: polling threads; 0 = one per core */
  const char *ssl_config_file;        /* --ssl_config_file (""): SSLConfig text, TLS */
  bool enable_serialization_as_tensor_content; /* Predict outputs in tensor_content */
  bool enable_grpc_healthcheck_service;        /* accepted; the health service is always on */
  /* Model lifecycle (TF Serving's names and defaults). The two poll
   * intervals are whole seconds in TF Serving; tensord also accepts
   * fractions ("0.2"). */
  const char *model_config_file;                    /* --model_config_file ("") */
  double model_config_file_poll_wait_seconds;       /* 0: read once (SIGHUP rereads) */
  double file_system_poll_wait_seconds;             /* 1; 0: scan once */
  bool allow_version_labels_for_unavailable_models; /* false */
  int num_load_threads;                       /* 0: one load thread */
  int max_num_load_retries;                   /* 5 */
  int64_t load_retry_interval_micros;         /* 60000000; negative: no wait */
  bool enable_model_warmup;                   /* true */
  int num_request_iterations_for_warmup;      /* 0: once per record */
  double shutdown_grace_seconds;  /* --tensord_shutdown_grace_seconds (10): in-flight requests */
  double drain_seconds; /* --tensord_drain_seconds (0): serve on, not ready, before closing */
  /* Dynamic batching (TF Serving's names). */
  bool enable_batching;                 /* --enable_batching (false) */
  const char *batching_parameters_file; /* --batching_parameters_file (""): BatchingParameters */
  /* Device (TF Serving has only the memory fraction). */
  const char *device;                     /* --device=auto|cpu|gpu|reference (auto) */
  double per_process_gpu_memory_fraction; /* 0: all of the GPU's memory */
  bool gpu_allow_tf32;                    /* --tensord_gpu_allow_tf32 (false) */
  const char *cuda_plugin;                /* --tensord_cuda_plugin ("") */
  /* TF Serving 2.20 flags added for drop-in use (see README's flag table). */
  const char *monitoring_config_file; /* --monitoring_config_file (""): MonitoringConfig text */
  const char *platform_config_file;   /* --platform_config_file (""): PlatformConfigMap text */
  const char *tensorflow_session_config_file;  /* ConfigProto text: thread counts */
  const char *thread_pool_factory_config_file; /* no effect: tensord keeps its own pools */
  int inter_op_threads;    /* --tensorflow_inter_op_parallelism: engine workers; 0 = cores */
  int session_parallelism; /* --tensorflow_session_parallelism: both of the above */
  bool enable_per_model_batching_parameters; /* batching_params.pbtxt in the version dir */
  int num_unload_threads;       /* --num_unload_threads (0): unloads are cheap; accepted */
  bool flush_filesystem_caches; /* --flush_filesystem_caches (true) */
  bool enable_signature_method_name_check;         /* (false) */
  bool remove_unused_fields_from_bundle_metagraph; /* (true): tensord keeps no MetaGraphDef */
  /* Accepted with no effect (one warning line when given). */
  bool prefer_tflite_model;
  int num_tflite_pools;
  int num_tflite_interpreters_per_pool;
  bool xla_cpu_compilation_enabled;
  bool xla_gpu_compilation_enabled;
  bool enable_profiler;
  bool use_alts_credentials;
  const char *mixed_precision;
  bool skip_initialize_tpu;
  /* tensord's logging. */
  bool log_json; /* --tensord_log_json (false): one JSON object per log line */
  bool help;     /* --help was given */
  bool version;  /* --version was given */
} cfg_options;

void cfg_options_defaults(cfg_options *o);
td_code cfg_flags_parse(int argc, char **argv, cfg_options *o, td_err *err);
/* Checks cross-flag rules (a base path is required, ports differ, ...). */
td_code cfg_options_validate(const cfg_options *o, td_err *err);
void cfg_flags_usage(FILE *f, const char *argv0);

#endif
