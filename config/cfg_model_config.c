/* Conversion walks the protobuf-c message once, copying into malloc'd plain
 * structs; the message is never kept. Checks follow TF Serving's
 * ValidateModelConfigList / ValidateAllListedModelsAreOfSamePlatform. */
#include "cfg_model_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg_pbtxt.h"
#include "td_log.h"
#include "tensorflow_serving/config/model_server_config.pb-c.h"

#define PLATFORM_TENSORFLOW "tensorflow"
#define PARSE_PREFIX "Error parsing text-format tensorflow.serving.ModelServerConfig"

typedef Tensorflow__Serving__ModelServerConfig MSC;
typedef Tensorflow__Serving__ModelConfig MC;
typedef Tensorflow__Serving__FileSystemStoragePathSourceConfig__ServableVersionPolicy VP;

static void model_free(cfg_model *m) {
  free(m->log_filename_prefix);
  free(m->name);
  free(m->base_path);
  free(m->policy.versions);
  for (int i = 0; i < m->n_labels; i++) free(m->labels[i].label);
  free(m->labels);
}

void cfg_model_config_free(cfg_model_config *c) {
  if (!c) return;
  for (int i = 0; i < c->n_models; i++) model_free(&c->models[i]);
  free(c->models);
  c->models = NULL;
  c->n_models = 0;
}

static td_code oom(td_err *err) { return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory"); }

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return x < y ? -1 : x > y;
}

static int cmp_label(const void *a, const void *b) {
  return strcmp(((const cfg_label *)a)->label, ((const cfg_label *)b)->label);
}

static td_code convert_policy(const VP *vp, cfg_version_policy *out, td_err *err) {
  *out = (cfg_version_policy){.kind = CFG_POLICY_LATEST, .num_versions = 1};
  if (!vp) return TD_OK;
  switch (vp->policy_choice_case) {
    case TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_LATEST:
      /* TF Serving treats num_versions 0 as 1. */
      out->num_versions = vp->latest && vp->latest->num_versions ? vp->latest->num_versions : 1;
      return TD_OK;
    case TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_ALL:
      out->kind = CFG_POLICY_ALL;
      return TD_OK;
    case TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_SPECIFIC: {
      out->kind = CFG_POLICY_SPECIFIC;
      size_t n = vp->specific ? vp->specific->n_versions : 0;
      if (!n) return TD_OK;
      if (n > (size_t)1 << 20) return td_err_set(err, TD_INVALID_ARGUMENT, "too many versions");
      out->versions = malloc(n * sizeof *out->versions);
      if (!out->versions) return oom(err);
      memcpy(out->versions, vp->specific->versions, n * sizeof *out->versions);
      qsort(out->versions, n, sizeof *out->versions, cmp_i64);
      int k = 0;
      for (size_t i = 0; i < n; i++)
        if (!k || out->versions[k - 1] != out->versions[i]) out->versions[k++] = out->versions[i];
      out->n_versions = k;
      return TD_OK;
    }
    default:
      return TD_OK; /* an empty policy message: the default, latest 1 */
  }
}

/* The fields seen that do nothing here, for one warning line. */
typedef struct noeff_list {
  char text[1024];
  size_t len;
} noeff_list;

static void noeff_add(noeff_list *l, const char *model, const char *field) {
  if (l->len >= sizeof l->text - 1) return;
  int n = snprintf(l->text + l->len, sizeof l->text - l->len, "%s%s: %s", l->len ? ", " : "", model,
                   field);
  if (n > 0) l->len += (size_t)n < sizeof l->text - l->len ? (size_t)n : sizeof l->text - l->len;
}

static td_code convert_logging(const Tensorflow__Serving__LoggingConfig *lc, cfg_model *m,
                               noeff_list *noeff, td_err *err) {
  const Tensorflow__Serving__SamplingConfig *sc = lc->sampling_config;
  double rate = sc ? sc->sampling_rate : 0;
  if (!(rate >= 0 && rate <= 1))
    return td_err_set(err, TD_INVALID_ARGUMENT, "sampling_rate %g is not in [0, 1]", rate);
  if (sc && sc->attributes) noeff_add(noeff, m->name, "logging_config.sampling_config.attributes");
  for (size_t i = 0; sc && i < sc->n_per_task_sampling_configs; i++) {
    double r = sc->per_task_sampling_configs[i]->sampling_rate;
    if (!(r >= 0 && r <= 1))
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "per_task_sampling_configs[%zu].sampling_rate %g is not in [0, 1]", i, r);
  }
  /* A per-task rate is picked by the data center and task index of a
   * replicated job; a tensord process has neither, so the model's own rate
   * applies. */
  if (sc && sc->n_per_task_sampling_configs)
    noeff_add(noeff, m->name, "logging_config.sampling_config.per_task_sampling_configs");
  if (lc->custom_logging_config) noeff_add(noeff, m->name, "logging_config.custom_logging_config");
  if (rate == 0) return TD_OK;
  const Tensorflow__Serving__LogCollectorConfig *cc = lc->log_collector_config;
  const char *type = cc && cc->type ? cc->type : "";
  if (*type && strcmp(type, "tfrecord"))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "log_collector_config.type '%s' is not supported (tensord writes "
                      "'tfrecord' files)",
                      type);
  if (!cc || !cc->filename_prefix || !*cc->filename_prefix)
    return td_err_set(err, TD_INVALID_ARGUMENT, "log_collector_config.filename_prefix is empty");
  if (!(m->log_filename_prefix = strdup(cc->filename_prefix))) return oom(err);
  m->log_sampling_rate = rate;
  return TD_OK;
}

static td_code convert_model(const MC *mc, int index, cfg_model *m, noeff_list *noeff,
                             td_err *err) {
  const char *name = mc->name ? mc->name : "";
  if (!*name)
    return td_err_set(err, TD_INVALID_ARGUMENT, "model_config_list entry %d has no name", index);
  if (!mc->base_path || !*mc->base_path)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Model %s has no base_path", name);
  const char *platform = mc->model_platform ? mc->model_platform : "";
  if (mc->model_type != TENSORFLOW__SERVING__MODEL_TYPE__MODEL_TYPE_UNSPECIFIED) {
    if (*platform)
      return td_err_set(err, TD_FAILED_PRECONDITION,
                        "Model %s: Illegal setting both model_type(deprecated) and model_platform.",
                        name);
    platform = mc->model_type == TENSORFLOW__SERVING__MODEL_TYPE__TENSORFLOW ? PLATFORM_TENSORFLOW
                                                                            : "other";
  }
  if (!*platform)
    return td_err_set(err, TD_FAILED_PRECONDITION,
                      "Model %s: Illegal setting neither model_type(deprecated) nor model_platform.",
                      name);
  if (strcmp(platform, PLATFORM_TENSORFLOW))
    return td_err_set(err, TD_FAILED_PRECONDITION,
                      "Model %s requests platform '%s'; tensord serves only '" PLATFORM_TENSORFLOW
                      "' SavedModels",
                      name, platform);
  if (!(m->name = strdup(name)) || !(m->base_path = strdup(mc->base_path))) return oom(err);
  td_code rc = convert_policy(mc->model_version_policy, &m->policy, err);
  if (rc) return td_err_prefix(err, "Model %s", name);
  if (mc->n_version_labels) {
    m->labels = calloc(mc->n_version_labels, sizeof *m->labels);
    if (!m->labels) return oom(err);
    for (size_t i = 0; i < mc->n_version_labels; i++) {
      const char *key = mc->version_labels[i]->key ? mc->version_labels[i]->key : "";
      int64_t v = mc->version_labels[i]->value;
      if (!*key) return td_err_set(err, TD_INVALID_ARGUMENT, "Model %s: empty version label", name);
      if (v < 0)
        return td_err_set(err, TD_INVALID_ARGUMENT, "Model %s: label '%s' names version %lld",
                          name, key, (long long)v);
      /* Map semantics: a repeated key takes the last value. */
      int j = 0;
      while (j < m->n_labels && strcmp(m->labels[j].label, key)) j++;
      if (j < m->n_labels) {
        m->labels[j].version = v;
        continue;
      }
      if (!(m->labels[j].label = strdup(key))) return oom(err);
      m->labels[j].version = v;
      m->n_labels++;
    }
    qsort(m->labels, (size_t)m->n_labels, sizeof *m->labels, cmp_label);
  }
  if (mc->batching_parameters) {
    rc = cfg_batching_from_proto(mc->batching_parameters, 1, &m->batching, err);
    if (rc) return td_err_prefix(err, "Model %s: batching_parameters", name);
    m->has_batching = true;
  }
  if (mc->logging_config) {
    rc = convert_logging(mc->logging_config, m, noeff, err);
    if (rc) return td_err_prefix(err, "Model %s: logging_config", name);
  }
  if (mc->batching_parameters && mc->batching_parameters->thread_pool_name)
    noeff_add(noeff, name, "batching_parameters.thread_pool_name");
  if (mc->batch_queue_timeout_micros < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Model %s: batch_queue_timeout_micros is negative",
                      name);
  m->batch_queue_timeout_micros = mc->batch_queue_timeout_micros;
  return TD_OK;
}

td_code cfg_model_config_from_proto(const MSC *p, cfg_model_config *out, td_err *err) {
  *out = (cfg_model_config){0};
  if (!p || p->config_case != TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      p && p->config_case ==
                               TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_CUSTOM_MODEL_CONFIG
                          ? "ModelServerConfig::custom_model_config is not supported; only "
                            "model_config_list is"
                          : "ModelServerConfig holds no model_config_list");
  const Tensorflow__Serving__ModelConfigList *list = p->model_config_list;
  size_t n = list ? list->n_config : 0;
  if (n > 100000) return td_err_set(err, TD_INVALID_ARGUMENT, "too many models (%zu)", n);
  cfg_model_config c = {0};
  if (n && !(c.models = calloc(n, sizeof *c.models))) return oom(err);
  td_code rc = TD_OK;
  noeff_list noeff = {.len = 0};
  for (size_t i = 0; i < n && !rc; i++) {
    rc = convert_model(list->config[i], (int)i, &c.models[i], &noeff, err);
    c.n_models = (int)i + 1;
    for (size_t j = 0; j < i && !rc; j++)
      if (!strcmp(c.models[j].name, c.models[i].name))
        rc = td_err_set(err, TD_INVALID_ARGUMENT,
                        "Illegal to list model %s multiple times in config list",
                        c.models[i].name);
  }
  if (rc) {
    cfg_model_config_free(&c);
    return rc;
  }
  if (noeff.len) td_log_warn("model config fields with no effect in tensord: %s", noeff.text);
  *out = c;
  return TD_OK;
}

td_code cfg_model_config_parse(const char *text, size_t len, cfg_model_config *out, td_err *err) {
  *out = (cfg_model_config){0};
  ProtobufCMessage *msg = NULL;
  td_code rc =
      cfg_pbtxt_parse(text, len, &tensorflow__serving__model_server_config__descriptor, &msg, err);
  if (rc) return td_err_prefix(err, PARSE_PREFIX);
  rc = cfg_model_config_from_proto((const MSC *)msg, out, err);
  protobuf_c_message_free_unpacked(msg, NULL);
  return rc;
}

td_code cfg_model_config_read_file(const char *path, cfg_model_config *out, td_err *err) {
  *out = (cfg_model_config){0};
  ProtobufCMessage *msg = NULL;
  td_code rc =
      cfg_pbtxt_parse_file(path, &tensorflow__serving__model_server_config__descriptor, &msg, err);
  if (rc) return td_err_prefix(err, PARSE_PREFIX);
  rc = cfg_model_config_from_proto((const MSC *)msg, out, err);
  protobuf_c_message_free_unpacked(msg, NULL);
  if (rc) td_err_prefix(err, "%s", path);
  return rc;
}

td_code cfg_model_config_single(const char *name, const char *base_path, cfg_model_config *out,
                                td_err *err) {
  *out = (cfg_model_config){0};
  if (!name || !*name || !base_path || !*base_path)
    return td_err_set(err, TD_INVALID_ARGUMENT, "a model needs a name and a base path");
  cfg_model *m = calloc(1, sizeof *m);
  if (!m) return oom(err);
  m->policy = (cfg_version_policy){.kind = CFG_POLICY_LATEST, .num_versions = 1};
  if (!(m->name = strdup(name)) || !(m->base_path = strdup(base_path))) {
    model_free(m);
    free(m);
    return oom(err);
  }
  *out = (cfg_model_config){.n_models = 1, .models = m};
  return TD_OK;
}

static td_code copy_model(const cfg_model *s, cfg_model *d, td_err *err) {
  *d = (cfg_model){.policy = s->policy,
                   .n_labels = s->n_labels,
                   .has_batching = s->has_batching,
                   .batching = s->batching,
                   .batch_queue_timeout_micros = s->batch_queue_timeout_micros,
                   .log_sampling_rate = s->log_sampling_rate};
  if (s->log_filename_prefix && !(d->log_filename_prefix = strdup(s->log_filename_prefix)))
    return oom(err);
  d->policy.versions = NULL;
  d->n_labels = 0;
  if (!(d->name = strdup(s->name)) || !(d->base_path = strdup(s->base_path))) return oom(err);
  if (s->policy.n_versions) {
    d->policy.versions = malloc((size_t)s->policy.n_versions * sizeof *d->policy.versions);
    if (!d->policy.versions) return oom(err);
    memcpy(d->policy.versions, s->policy.versions,
           (size_t)s->policy.n_versions * sizeof *d->policy.versions);
  }
  if (s->n_labels) {
    if (!(d->labels = calloc((size_t)s->n_labels, sizeof *d->labels))) return oom(err);
    for (int i = 0; i < s->n_labels; i++) {
      if (!(d->labels[i].label = strdup(s->labels[i].label))) return oom(err);
      d->labels[i].version = s->labels[i].version;
      d->n_labels++;
    }
  }
  return TD_OK;
}

td_code cfg_model_config_copy(const cfg_model_config *src, cfg_model_config *out, td_err *err) {
  *out = (cfg_model_config){0};
  cfg_model_config c = {0};
  if (src->n_models && !(c.models = calloc((size_t)src->n_models, sizeof *c.models)))
    return oom(err);
  for (int i = 0; i < src->n_models; i++) {
    c.n_models = i + 1;
    if (copy_model(&src->models[i], &c.models[i], err)) {
      cfg_model_config_free(&c);
      return TD_RESOURCE_EXHAUSTED;
    }
  }
  *out = c;
  return TD_OK;
}

static bool batching_equal(const cfg_batching *a, const cfg_batching *b) {
  if (a->max_batch_size != b->max_batch_size || a->batch_timeout_micros != b->batch_timeout_micros ||
      a->max_enqueued_batches != b->max_enqueued_batches ||
      a->num_batch_threads != b->num_batch_threads ||
      a->n_allowed_batch_sizes != b->n_allowed_batch_sizes ||
      a->pad_variable_length_inputs != b->pad_variable_length_inputs ||
      a->enable_large_batch_splitting != b->enable_large_batch_splitting ||
      a->max_execution_batch_size != b->max_execution_batch_size)
    return false;
  for (int i = 0; i < a->n_allowed_batch_sizes; i++)
    if (a->allowed_batch_sizes[i] != b->allowed_batch_sizes[i]) return false;
  return true;
}

static bool model_equal(const cfg_model *a, const cfg_model *b) {
  if (strcmp(a->name, b->name) || strcmp(a->base_path, b->base_path)) return false;
  if (a->log_sampling_rate != b->log_sampling_rate ||
      strcmp(a->log_filename_prefix ? a->log_filename_prefix : "",
             b->log_filename_prefix ? b->log_filename_prefix : ""))
    return false;
  if (a->has_batching != b->has_batching ||
      a->batch_queue_timeout_micros != b->batch_queue_timeout_micros ||
      (a->has_batching && !batching_equal(&a->batching, &b->batching)))
    return false;
  if (a->policy.kind != b->policy.kind || a->policy.num_versions != b->policy.num_versions ||
      a->policy.n_versions != b->policy.n_versions || a->n_labels != b->n_labels)
    return false;
  for (int i = 0; i < a->policy.n_versions; i++)
    if (a->policy.versions[i] != b->policy.versions[i]) return false;
  for (int i = 0; i < a->n_labels; i++)
    if (strcmp(a->labels[i].label, b->labels[i].label) ||
        a->labels[i].version != b->labels[i].version)
      return false;
  return true;
}

bool cfg_model_config_equal(const cfg_model_config *a, const cfg_model_config *b) {
  if (a->n_models != b->n_models) return false;
  for (int i = 0; i < a->n_models; i++)
    if (!model_equal(&a->models[i], &b->models[i])) return false;
  return true;
}

const cfg_model *cfg_model_config_find(const cfg_model_config *c, const char *name) {
  for (int i = 0; c && i < c->n_models; i++)
    if (!strcmp(c->models[i].name, name)) return &c->models[i];
  return NULL;
}

void cfg_version_policy_describe(const cfg_version_policy *p, char *buf, int size) {
  if (size <= 0) return;
  switch (p->kind) {
    case CFG_POLICY_LATEST:
      snprintf(buf, (size_t)size, "latest{%u}", p->num_versions);
      return;
    case CFG_POLICY_ALL:
      snprintf(buf, (size_t)size, "all");
      return;
    case CFG_POLICY_SPECIFIC: {
      int n = snprintf(buf, (size_t)size, "specific{");
      for (int i = 0; i < p->n_versions && n > 0 && n < size; i++)
        n += snprintf(buf + n, (size_t)(size - n), "%s%lld", i ? "," : "",
                      (long long)p->versions[i]);
      if (n > 0 && n < size) snprintf(buf + n, (size_t)(size - n), "}");
      return;
    }
  }
  snprintf(buf, (size_t)size, "?");
}
