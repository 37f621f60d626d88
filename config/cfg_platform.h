/* cfg_platform: TF Serving's --platform_config_file (text-format
 * tensorflow.serving.PlatformConfigMap), as far as it maps onto tensord.
 *
 *   platform_configs {
 *     key: "tensorflow"
 *     value {
 *       source_adapter_config {
 *         [type.googleapis.com/tensorflow.serving.SavedModelBundleSourceAdapterConfig] {
 *           legacy_config {
 *             session_config { intra_op_parallelism_threads: 2 inter_op_parallelism_threads: 4 }
 *             batching_parameters { max_batch_size { value: 32 } }
 *           }
 *         }
 *       }
 *     }
 *   }
 *
 * The "tensorflow" platform's SessionBundleConfig (in a
 * SavedModelBundleSourceAdapterConfig's legacy_config or a
 * SessionBundleSourceAdapterConfig's config) gives the engine's thread
 * counts (session_config) and, when batching_parameters is present,
 * turns dynamic batching on with those parameters, as TF Serving does
 * (the platform config replaces --enable_batching,
 * --batching_parameters_file and the session flags). Also taken from it, as
 * TF Serving does with a platform config (the flags are then not read):
 * saved_model_tags (when non-empty), enable_model_warmup (proto default
 * false: warmup off unless the config turns it on),
 * model_warmup_options.num_request_iterations and
 * enable_per_model_batching_params. Other platforms, and the fields that do
 * nothing here (session_target, session_run_load_threadpool_index, the
 * TFLite, mixed-precision, session-metadata and resource-estimation
 * fields, fixed input tensors, the other warmup options), are named in one
 * warning line when set.
 * session_config is a ConfigProto, of which only the thread counts are
 * declared: its other fields are skipped. Errors name line and column. Pure
 * apart from registering its Any types with cfg_pbtxt (every call;
 * registering again changes nothing); call from main. */
#ifndef CFG_PLATFORM_H
#define CFG_PLATFORM_H

#include <stdbool.h>

#include "cfg_batching.h"
#include "cfg_session.h"
#include "td_status.h"

typedef struct cfg_platform {
  bool has_tensorflow; /* a "tensorflow" entry with a known adapter config */
  cfg_session session; /* its thread counts (0: unset) */
  bool has_batching;   /* batching_parameters present: batching on */
  cfg_batching batching;
  bool enable_warmup;         /* enable_model_warmup */
  int warmup_iterations;      /* model_warmup_options.num_request_iterations; 0: unset */
  bool per_model_batching;    /* enable_per_model_batching_params */
  char saved_model_tags[256]; /* comma-joined; "": unset (the flag's apply) */
} cfg_platform;

td_code cfg_platform_load(const char *path, int cpus, cfg_platform *out, td_err *err);
td_code cfg_platform_parse(const char *text, int cpus, cfg_platform *out, td_err *err);

#endif
