#include "cfg_monitoring.h"

#include <stdio.h>
#include <string.h>

#include "cfg_pbtxt.h"
#include "tensorflow_serving/config/monitoring_config.pb-c.h"

typedef Tensorflow__Serving__MonitoringConfig MON;

static td_code convert(const MON *m, cfg_monitoring *out, td_err *err) {
  cfg_monitoring c = {0};
  const Tensorflow__Serving__PrometheusConfig *p = m->prometheus_config;
  const char *path = p && p->path && *p->path ? p->path : CFG_MONITORING_DEFAULT_PATH;
  if (path[0] != '/')
    return td_err_set(err, TD_INVALID_ARGUMENT, "prometheus_config.path '%s' must start with '/'",
                      path);
  if (!strncmp(path, "/v1/", 4) || !strcmp(path, "/v1"))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "prometheus_config.path '%s' would hide the /v1/ REST API", path);
  if (strlen(path) >= sizeof c.prometheus_path)
    return td_err_set(err, TD_INVALID_ARGUMENT, "prometheus_config.path is too long");
  c.prometheus_enable = p && p->enable;
  snprintf(c.prometheus_path, sizeof c.prometheus_path, "%s", path);
  *out = c;
  return TD_OK;
}

td_code cfg_monitoring_parse(const char *text, cfg_monitoring *out, td_err *err) {
  ProtobufCMessage *msg = NULL;
  td_code rc = cfg_pbtxt_parse(text, strlen(text),
                               &tensorflow__serving__monitoring_config__descriptor, &msg, err);
  if (rc)
    return td_err_prefix(err, "Error parsing text-format tensorflow.serving.MonitoringConfig");
  rc = convert((const MON *)msg, out, err);
  protobuf_c_message_free_unpacked(msg, NULL);
  return rc;
}

td_code cfg_monitoring_load(const char *path, cfg_monitoring *out, td_err *err) {
  ProtobufCMessage *msg = NULL;
  td_code rc =
      cfg_pbtxt_parse_file(path, &tensorflow__serving__monitoring_config__descriptor, &msg, err);
  if (rc)
    return td_err_prefix(err, "Error parsing text-format tensorflow.serving.MonitoringConfig");
  rc = convert((const MON *)msg, out, err);
  protobuf_c_message_free_unpacked(msg, NULL);
  if (rc) td_err_prefix(err, "%s", path);
  return rc;
}
