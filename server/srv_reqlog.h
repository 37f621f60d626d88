/* srv_reqlog: request logging, TF Serving's ModelConfig.logging_config.
 *
 *   logging_config {
 *     sampling_config { sampling_rate: 0.1 }
 *     log_collector_config { type: "tfrecord" filename_prefix: "/logs/m" }
 *   }
 *
 * A sampled Predict request (REST or gRPC) and its response are written as
 * one tensorflow.serving.PredictionLog record (log_metadata.model_spec and
 * predict_log { request response }) to a TFRecord file
 * <filename_prefix>.<pid>.<n>.tfrecord, where n starts at 0 for each
 * process and model and goes up each time the file passes 64 MiB (or the
 * prefix changes in a config reload). That is the format of
 * assets.extra/tf_serving_warmup_requests: a log file copied there replays
 * as warmup. TF Serving's open-source build registers no log collector, so
 * the same config logs nothing there. Successful Predict, Classify,
 * Regress and MultiInference calls are logged (predict_log, classify_log,
 * regress_log, multi_inference_log), REST and gRPC alike. A Classify,
 * Regress or MultiInference record holds the examples as the model saw
 * them (a context merged into each example, as TF Serving feeds them), in
 * an example_list, and the version that served in the model specs.
 *
 * Writes never block a request: the request thread encodes the record and
 * offers it to a bounded queue (SRV_REQLOG_QUEUE records); one writer
 * thread appends to the files. A full queue drops the record and counts it
 * in tensord_request_log_dropped_total{model_name}; records written count in
 * :tensorflow:serving:request_log_count{model_name,status} (status "OK").
 * A file that cannot be opened or written is logged once per file and its
 * records are counted with status "UNAVAILABLE".
 *
 * srv_reqlog_configure follows the model config (ldr_manager's on_config):
 * models without logging_config, or with sampling rate 0, cost a single
 * atomic load per request. Threads: configure and log from any thread;
 * start/stop from main (stop drains the queue and closes the files). */
#ifndef SRV_REQLOG_H
#define SRV_REQLOG_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>

#include "cfg_model_config.h"
#include "srv_api.h"

#define SRV_REQLOG_QUEUE 1024
#define SRV_REQLOG_MAX_FILE ((long)64 << 20)

void srv_reqlog_start(void);
void srv_reqlog_stop(void);
/* ldr_manager_options.on_config: ctx unused. */
void srv_reqlog_configure(void *ctx, const cfg_model_config *c);
/* After a successful Predict call, before srv_call_end (the inputs and
 * outputs are read). Samples, encodes and queues; never blocks. */
void srv_reqlog_predict(const srv_call *c);

/* Classify, Regress, MultiInference: srv_reqlog_sample draws the sample for
 * one request of `model` (true: log it; one atomic load when the model
 * logs nothing), so a transport builds the protobuf response only for a
 * sampled request; then, after the successful call and before
 * srv_call_end, one of: */
bool srv_reqlog_sample(const char *model);
/* A Classify (regress false) or Regress call, and its response message
 * (ClassificationResponse or RegressionResponse). */
void srv_reqlog_infer(const srv_call *c, bool regress, const ProtobufCMessage *response);
/* A MultiInference: one call per task (the same version and examples),
 * each task's method name, and the MultiInferenceResponse. */
void srv_reqlog_multi(const srv_call *const *calls, const char *const *methods, int n,
                      const ProtobufCMessage *response);

#endif
