#include "cfg_platform.h"

#include <stdio.h>
#include <string.h>

#include "cfg_pbtxt.h"
#include "td_pbdepth.h"
#include "td_log.h"
#include "tensorflow/core/protobuf/config.pb-c.h"
#include "tensorflow_serving/config/platform_config.pb-c.h"
#include "tensorflow_serving/servables/tensorflow/source_adapters.pb-c.h"

#define PREFIX "Error parsing text-format tensorflow.serving.PlatformConfigMap"

typedef Tensorflow__Serving__SessionBundleConfig SBC;

static void register_types(void) {
  cfg_pbtxt_register_any_type(
      &tensorflow__serving__saved_model_bundle_source_adapter_config__descriptor);
  cfg_pbtxt_register_any_type(
      &tensorflow__serving__session_bundle_source_adapter_config__descriptor);
  cfg_pbtxt_register_lenient(&tensorflow__config_proto__descriptor);
}

/* The SessionBundleConfig an adapter config holds, unpacked into *owner
 * (free it). NULL: an unknown type (named in *type). */
static const SBC *unpack(const Google__Protobuf__Any *any, ProtobufCMessage **owner,
                         const char **type, td_err *err, td_code *rc) {
  *owner = NULL;
  *rc = TD_OK;
  const char *url = any->type_url ? any->type_url : "";
  const char *slash = strrchr(url, '/');
  *type = slash ? slash + 1 : url;
  const ProtobufCMessageDescriptor *d = NULL;
  if (!strcmp(*type,
              tensorflow__serving__saved_model_bundle_source_adapter_config__descriptor.name))
    d = &tensorflow__serving__saved_model_bundle_source_adapter_config__descriptor;
  else if (!strcmp(*type,
                   tensorflow__serving__session_bundle_source_adapter_config__descriptor.name))
    d = &tensorflow__serving__session_bundle_source_adapter_config__descriptor;
  if (!d) return NULL;
  td_err why;
  *owner = td_pb_unpack(d, NULL, any->value.len, any->value.data, &why);
  if (!*owner) {
    *rc = td_err_set(err, TD_INVALID_ARGUMENT, "source_adapter_config: cannot decode %s (%s)",
                     *type, why.msg);
    return NULL;
  }
  if (d == &tensorflow__serving__saved_model_bundle_source_adapter_config__descriptor)
    return ((Tensorflow__Serving__SavedModelBundleSourceAdapterConfig *)*owner)->legacy_config;
  return ((Tensorflow__Serving__SessionBundleSourceAdapterConfig *)*owner)->config;
}

static td_code convert(const Tensorflow__Serving__PlatformConfigMap *pm, int cpus,
                       cfg_platform *out, td_err *err) {
  cfg_platform p = {0};
  char noeff[512] = "";
  size_t used = 0;
#define NOEFF(...)                                                                         \
  do {                                                                                     \
    if (used < sizeof noeff)                                                               \
      used += (size_t)snprintf(noeff + used, sizeof noeff - used, "%s", used ? ", " : ""); \
    if (used < sizeof noeff)                                                               \
      used += (size_t)snprintf(noeff + used, sizeof noeff - used, __VA_ARGS__);            \
  } while (0)
  for (size_t i = 0; i < pm->n_platform_configs; i++) {
    const char *name = pm->platform_configs[i]->key ? pm->platform_configs[i]->key : "";
    const Tensorflow__Serving__PlatformConfig *pc = pm->platform_configs[i]->value;
    if (strcmp(name, "tensorflow")) {
      NOEFF("platform '%s' (tensord serves only 'tensorflow')", name);
      continue;
    }
    if (!pc || !pc->source_adapter_config) continue;
    ProtobufCMessage *owner;
    const char *type;
    td_code rc;
    const SBC *sbc = unpack(pc->source_adapter_config, &owner, &type, err, &rc);
    if (rc) return rc;
    if (!owner) {
      NOEFF("source_adapter_config of type %s", type);
      continue;
    }
    p.has_tensorflow = true;
    if (sbc) {
      if (sbc->session_target && *sbc->session_target) NOEFF("session_target");
      if (sbc->session_run_load_threadpool_index) NOEFF("session_run_load_threadpool_index");
      if (sbc->experimental_transient_ram_bytes_during_load)
        NOEFF("experimental_transient_ram_bytes_during_load");
      if (sbc->n_experimental_fixed_input_tensors) NOEFF("experimental_fixed_input_tensors");
      if (sbc->enable_session_metadata) NOEFF("enable_session_metadata");
      if (sbc->prefer_tflite_model) NOEFF("prefer_tflite_model");
      if (sbc->num_tflite_interpreters) NOEFF("num_tflite_interpreters");
      if (sbc->num_tflite_interpreters_per_pool) NOEFF("num_tflite_interpreters_per_pool");
      if (sbc->num_tflite_pools) NOEFF("num_tflite_pools");
      if (sbc->wrap_session_with_no_threading_params)
        NOEFF("wrap_session_with_no_threading_params");
      if (sbc->resource_estimation_uses_validation_result)
        NOEFF("resource_estimation_uses_validation_result");
      if (sbc->mixed_precision && *sbc->mixed_precision) NOEFF("mixed_precision");
      /* remove_unused_fields_from_bundle_metagraph holds either way: tensord
       * keeps no MetaGraphDef after a load. */
      const Tensorflow__Serving__ModelWarmupOptions *wo = sbc->model_warmup_options;
      if (wo && (wo->num_model_warmup_threads || (wo->model_name && *wo->model_name) ||
                 wo->model_version || wo->enable_all_batch_sizes_warmup))
        NOEFF("model_warmup_options (all but num_request_iterations)");
      if (wo && wo->num_request_iterations && wo->num_request_iterations->value < 0)
        rc = td_err_set(err, TD_INVALID_ARGUMENT,
                        "model_warmup_options.num_request_iterations must be >= 0");
      /* As TF Serving: with a platform config, warmup and its iterations are
       * the config's, not the flags'. */
      p.enable_warmup = sbc->enable_model_warmup;
      p.warmup_iterations =
          wo && wo->num_request_iterations ? wo->num_request_iterations->value : 0;
      p.per_model_batching = sbc->enable_per_model_batching_params;
      size_t tl = 0;
      for (size_t t = 0; !rc && t < sbc->n_saved_model_tags; t++) {
        const char *tag = sbc->saved_model_tags[t] ? sbc->saved_model_tags[t] : "";
        if (!*tag || strchr(tag, ','))
          rc = td_err_set(err, TD_INVALID_ARGUMENT, "saved_model_tags: bad tag '%s'", tag);
        else if (tl + strlen(tag) + 2 > sizeof p.saved_model_tags)
          rc = td_err_set(err, TD_INVALID_ARGUMENT, "saved_model_tags: too long");
        else
          tl += (size_t)snprintf(p.saved_model_tags + tl, sizeof p.saved_model_tags - tl, "%s%s",
                                 tl ? "," : "", tag);
      }
      const Tensorflow__ConfigProto *sc = sbc->session_config;
      if (!rc && sc &&
          (sc->intra_op_parallelism_threads < 0 || sc->inter_op_parallelism_threads < 0))
        rc = td_err_set(err, TD_INVALID_ARGUMENT, "session_config: thread counts must be >= 0");
      if (!rc && sc)
        p.session = (cfg_session){.intra_op_threads = sc->intra_op_parallelism_threads,
                                  .inter_op_threads = sc->inter_op_parallelism_threads};
      if (!rc && sbc->batching_parameters) {
        rc = cfg_batching_from_proto(sbc->batching_parameters, cpus, &p.batching, err);
        if (rc) td_err_prefix(err, "batching_parameters");
        p.has_batching = !rc;
      }
    }
    protobuf_c_message_free_unpacked(owner, NULL);
    if (rc) return rc;
  }
#undef NOEFF
  if (used) td_log_warn("platform config fields with no effect in tensord: %s", noeff);
  *out = p;
  return TD_OK;
}

td_code cfg_platform_parse(const char *text, int cpus, cfg_platform *out, td_err *err) {
  register_types();
  ProtobufCMessage *m = NULL;
  td_code rc = cfg_pbtxt_parse(text, strlen(text),
                               &tensorflow__serving__platform_config_map__descriptor, &m, err);
  if (rc) return td_err_prefix(err, PREFIX);
  rc = convert((const Tensorflow__Serving__PlatformConfigMap *)m, cpus, out, err);
  protobuf_c_message_free_unpacked(m, NULL);
  return rc;
}

td_code cfg_platform_load(const char *path, int cpus, cfg_platform *out, td_err *err) {
  register_types();
  ProtobufCMessage *m = NULL;
  td_code rc =
      cfg_pbtxt_parse_file(path, &tensorflow__serving__platform_config_map__descriptor, &m, err);
  if (rc) return td_err_prefix(err, PREFIX);
  rc = convert((const Tensorflow__Serving__PlatformConfigMap *)m, cpus, out, err);
  protobuf_c_message_free_unpacked(m, NULL);
  if (rc) td_err_prefix(err, "%s", path);
  return rc;
}
