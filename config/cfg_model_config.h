/* cfg_model_config: the models a server serves, as plain C values.
 *
 * TF Serving describes them with a ModelServerConfig protocol buffer: read
 * from --model_config_file (text format), received by the gRPC
 * HandleReloadConfigRequest, or built from --model_name/--model_base_path.
 * This module turns each of those into one cfg_model_config, checking what
 * TF Serving checks, so nothing past config/ sees protobuf:
 *   - only model_config_list is accepted (custom_model_config is refused);
 *   - every model has a non-empty name and base path, and a name appears
 *     once ("Illegal to list model M multiple times in config list");
 *   - model_platform "tensorflow", or the deprecated model_type TENSORFLOW,
 *     but not both, and not neither (TF Serving's messages);
 *   - the version policy: latest {num_versions} (the default; 0 means 1),
 *     all {}, or specific {versions} (an empty list is allowed and serves
 *     nothing, as in TF Serving);
 *   - version labels: the map as given, the last entry winning for a key
 *     that appears twice (protobuf map semantics);
 *   - logging_config (request logging): sampling_rate in [0, 1]; with a
 *     rate above 0 the collector type must be "tfrecord" (or empty, taken
 *     as "tfrecord") and filename_prefix non-empty.
 * Fields that parse but do nothing here (sampling_config.attributes,
 * custom_logging_config, batching_parameters.thread_pool_name) are named in
 * one warning line per conversion (td_log). Unknown fields fail in the
 * parser with line and column.
 * A relative base path is taken as given (relative to the working
 * directory), as TF Serving does without model_config_list_root_dir.
 *
 * Errors are INVALID_ARGUMENT (FAILED_PRECONDITION for the platform ones,
 * as TF Serving) naming the model. cfg_model_config_read_file adds TF
 * Serving's "Error parsing text-format tensorflow.serving.ModelServerConfig"
 * prefix and the line and column of a syntax error. On failure *out is left
 * zeroed; on success free it with cfg_model_config_free. Pure functions;
 * thread-safe. */
#ifndef CFG_MODEL_CONFIG_H
#define CFG_MODEL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cfg_batching.h"
#include "td_status.h"

typedef enum {
  CFG_POLICY_LATEST = 0,
  CFG_POLICY_ALL,
  CFG_POLICY_SPECIFIC,
} cfg_policy_kind;

typedef struct cfg_version_policy {
  cfg_policy_kind kind;
  uint32_t num_versions; /* LATEST: >= 1 */
  int n_versions;        /* SPECIFIC: the listed versions, sorted, no duplicates */
  int64_t *versions;
} cfg_version_policy;

typedef struct cfg_label {
  char *label;
  int64_t version;
} cfg_label;

typedef struct cfg_model {
  char *name;
  char *base_path;
  cfg_version_policy policy;
  int n_labels; /* sorted by label, unique */
  cfg_label *labels;
  /* tensord extensions (ModelConfig fields 1001, 1002): per-model dynamic
   * batching replacing the global parameters, and a batch queue timeout. */
  bool has_batching;
  cfg_batching batching;
  int64_t batch_queue_timeout_micros; /* 0: none */
  /* logging_config: with sampling_rate > 0, that share of Predict requests
   * is logged with its response to TFRecord files named
   * <filename_prefix>.<pid>.<n>.tfrecord (srv_reqlog). */
  double log_sampling_rate;
  char *log_filename_prefix; /* NULL unless log_sampling_rate > 0 */
} cfg_model;

typedef struct cfg_model_config {
  int n_models; /* in the order given */
  cfg_model *models;
} cfg_model_config;

struct Tensorflow__Serving__ModelServerConfig;

/* The one-model config --model_name/--model_base_path describe: latest 1. */
td_code cfg_model_config_single(const char *name, const char *base_path, cfg_model_config *out,
                                td_err *err);
td_code cfg_model_config_from_proto(const struct Tensorflow__Serving__ModelServerConfig *p,
                                    cfg_model_config *out, td_err *err);
/* Parses a text-format ModelServerConfig file. */
td_code cfg_model_config_read_file(const char *path, cfg_model_config *out, td_err *err);
/* Parses text-format ModelServerConfig held in memory. */
td_code cfg_model_config_parse(const char *text, size_t len, cfg_model_config *out, td_err *err);

/* Deep copy (RESOURCE_EXHAUSTED on allocation failure). */
td_code cfg_model_config_copy(const cfg_model_config *src, cfg_model_config *out, td_err *err);
/* True when both configs describe the same models the same way. */
bool cfg_model_config_equal(const cfg_model_config *a, const cfg_model_config *b);
const cfg_model *cfg_model_config_find(const cfg_model_config *c, const char *name);
void cfg_model_config_free(cfg_model_config *c);

/* "latest{2}", "all", "specific{1,3}" for logs. */
void cfg_version_policy_describe(const cfg_version_policy *p, char *buf, int size);

#endif
