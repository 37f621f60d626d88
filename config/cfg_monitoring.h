/* cfg_monitoring: TF Serving's --monitoring_config_file (text-format
 * tensorflow.serving.MonitoringConfig) as a plain struct.
 *
 *   prometheus_config { enable: true path: "/metrics" }
 *
 * An empty path means TF Serving's /monitoring/prometheus/metrics. A path
 * must start with '/' and may not name the /v1/ API (INVALID_ARGUMENT).
 * Parse errors name line and column, as for the model config. Pure
 * functions; thread-safe. */
#ifndef CFG_MONITORING_H
#define CFG_MONITORING_H

#include <stdbool.h>

#include "td_status.h"

#define CFG_MONITORING_DEFAULT_PATH "/monitoring/prometheus/metrics"

typedef struct cfg_monitoring {
  bool prometheus_enable;
  char prometheus_path[256];
} cfg_monitoring;

td_code cfg_monitoring_parse(const char *text, cfg_monitoring *out, td_err *err);
td_code cfg_monitoring_load(const char *path, cfg_monitoring *out, td_err *err);

#endif
