/* cfg_flags: the command line, with TF Serving's flag names and defaults.
 *
 * Flags are described by one table (cfg_flags.c); parsing fills a plain
 * cfg_options value. Accepted forms: `--name=value`, `--name value`, and for
 * booleans `--name`, `--name=true|false|1|0`. A single leading dash works
 * too, as with TensorFlow's flag parser. An unknown flag, a missing value or
 * a malformed number is an error (INVALID_ARGUMENT naming the flag); the
 * caller prints it with the usage text and exits non-zero.
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
  int port;                    /* --port: gRPC (8500) */
  int rest_api_port;           /* --rest_api_port: REST; 0 = off */
  int rest_api_num_threads;    /* --rest_api_num_threads: 0 = 4 x CPUs (TF's default) */
  int rest_api_timeout_in_ms;  /* --rest_api_timeout_in_ms (30000); <= 0: no deadline */
  bool rest_api_enable_cors_support; /* --rest_api_enable_cors_support (false) */
  int rest_max_body_bytes;     /* --tensord_rest_max_body_bytes (256 MiB): 413 above */
  const char *model_name;      /* --model_name ("default") */
  const char *model_base_path; /* --model_base_path (required): a directory, s3:// or gs:// */
  const char *object_cache_dir; /* --tensord_object_cache_dir (""): s3:// and gs:// downloads */
  const char *saved_model_tags; /* --saved_model_tags ("serve") */
  int num_workers;             /* --tensord_num_workers: engine threads; 0 = one per core */
  int64_t inline_run_max_micros; /* --tensord_inline_run_max_micros (100): 0 = no inline runs */
  int intra_op_threads;        /* --tensorflow_intra_op_parallelism: threads per op; 0 = cores */
  /* gRPC (TF Serving's names). */
  const char *grpc_socket_path;       /* --grpc_socket_path (""): also listen on unix:PATH */
  const char *grpc_channel_arguments; /* --grpc_channel_arguments (""): k=v,k2=v2 */
  int grpc_max_threads;               /* --grpc_max_threads: polling threads; 0 = one per core */
  const char *ssl_config_file;        /* --ssl_config_file (""): SSLConfig text, TLS */
  bool enable_serialization_as_tensor_content; /* Predict outputs in tensor_content */
  bool enable_grpc_healthcheck_service; /* accepted; the health service is always on */
  /* Model lifecycle (TF Serving's names and defaults). The two poll
   * intervals are whole seconds in TF Serving; tensord also accepts
   * fractions ("0.2"). */
  const char *model_config_file;              /* --model_config_file ("") */
  double model_config_file_poll_wait_seconds; /* 0: read once (SIGHUP rereads) */
  double file_system_poll_wait_seconds;       /* 1; 0: scan once */
  bool allow_version_labels_for_unavailable_models; /* false */
  int num_load_threads;                       /* 0: one load thread */
  int max_num_load_retries;                   /* 5 */
  int64_t load_retry_interval_micros;         /* 60000000; negative: no wait */
  bool enable_model_warmup;                   /* true */
  int num_request_iterations_for_warmup;      /* 0: once per record */
  double shutdown_grace_seconds;  /* --tensord_shutdown_grace_seconds (10): in-flight requests */
  /* Dynamic batching (TF Serving's names). */
  bool enable_batching;                 /* --enable_batching (false) */
  const char *batching_parameters_file; /* --batching_parameters_file (""): BatchingParameters */
  /* Device (TF Serving has only the memory fraction). */
  const char *device;                     /* --device=auto|cpu|gpu|reference (auto) */
  double per_process_gpu_memory_fraction; /* 0: all of the GPU's memory */
  bool gpu_allow_tf32;                    /* --tensord_gpu_allow_tf32 (false) */
  const char *cuda_plugin;                /* --tensord_cuda_plugin ("") */
  bool help;                   /* --help was given */
  bool version;                /* --version was given */
} cfg_options;

void cfg_options_defaults(cfg_options *o);
td_code cfg_flags_parse(int argc, char **argv, cfg_options *o, td_err *err);
/* Checks cross-flag rules (a base path is required, ports differ, ...). */
td_code cfg_options_validate(const cfg_options *o, td_err *err);
void cfg_flags_usage(FILE *f, const char *argv0);

#endif
