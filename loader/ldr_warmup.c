/* The file is read whole (it is bounded: 1000 records of requests), then
 * walked record by record; each record is unpacked, decoded into engine
 * tensors at this edge, run, and freed before the next. */
#include "ldr_warmup.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "eng_model.h"
#include "ldr_crc32c.h"
#include "ldr_proto.h"
#include "td_clock.h"
#include "td_log.h"
#include "td_file.h"
#include "td_log.h"
#include "td_pbdepth.h"
#include "tensord/raw_input.pb-c.h"
#include "tensorflow_serving/apis/prediction_log.pb-c.h"

#define MAX_FILE_BYTES ((size_t)1 << 30)
#define TFRECORD_HINT ". Please verify your warmup data is in TFRecord format."
#define DEFAULT_SIGNATURE "serving_default"

static uint64_t le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The log type a record holds when it is not predict_log, from its unknown
 * fields (protobuf-c keeps them). */
static const char *other_log_type(const Tensorflow__Serving__PredictionLog *log) {
  static const char *names[] = {[2] = "classify_log", [3] = "regress_log",
                                [4] = "multi_inference_log", [5] = "session_run_log",
                                [7] = "predict_streamed_log"};
  const char *found = NULL;
  for (unsigned i = 0; i < log->base.n_unknown_fields; i++) {
    uint32_t tag = log->base.unknown_fields[i].tag;
    if (tag < sizeof names / sizeof names[0] && names[tag]) found = names[tag];
  }
  return found;
}

static td_code find_signature(const ldr_servable *sv, const Tensorflow__Serving__ModelSpec *spec,
                              const ldr_signature **out, td_err *err);

static td_code run_predict(const ldr_servable *sv, const Tensorflow__Serving__PredictRequest *req,
                           int iterations, td_err *err) {
  const ldr_signature *sig = NULL;
  td_code rc0 = find_signature(sv, req->model_spec, &sig, err);
  if (rc0) return rc0;
  const char *key = sig->key;
  eng_tensor *in = calloc((size_t)sig->n_inputs + 1, sizeof *in);
  eng_tensor *out = calloc((size_t)sig->n_outputs + 1, sizeof *out);
  td_code rc = in && out ? TD_OK : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; !rc && i < req->n_inputs; i++) {
    const char *alias = req->inputs[i]->key ? req->inputs[i]->key : "";
    int k = ldr_signature_input(sig, alias);
    if (k < 0) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT,
                      "input tensor alias not found in signature: %s (signature '%s')", alias, key);
    } else if (!req->inputs[i]->value) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "input '%s' has no tensor", alias);
    } else {
      eng_tensor_release(&in[k]); /* map semantics: the last entry wins */
      rc = ldr_proto_tensor(req->inputs[i]->value, &in[k], err);
      if (rc) td_err_prefix(err, "input '%s'", alias);
    }
  }
  for (int k = 0; !rc && k < sig->n_inputs; k++)
    if (!in[k].buf)
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "input '%s' of signature '%s' is missing",
                      sig->inputs[k].alias, key);
  for (int it = 0; !rc && it < iterations; it++) {
    rc = eng_plan_run(sig->plan, in, out, err);
    for (int k = 0; k < sig->n_outputs; k++) eng_tensor_release(&out[k]);
  }
  for (int k = 0; in && k < sig->n_inputs; k++) eng_tensor_release(&in[k]);
  free(in);
  free(out);
  return rc;
}

/* The signature a request's model_spec names (serving_default when none),
 * ready to run. */
static td_code find_signature(const ldr_servable *sv, const Tensorflow__Serving__ModelSpec *spec,
                              const ldr_signature **out, td_err *err) {
  const char *key = spec && spec->signature_name && *spec->signature_name ? spec->signature_name
                                                                           : DEFAULT_SIGNATURE;
  const ldr_signature *sig = ldr_servable_signature(sv, key);
  if (!sig) return td_err_set(err, TD_FAILED_PRECONDITION, "Serving signature key \"%s\" not found.", key);
  if (!sig->plan)
    return td_err_set(err, TD_FAILED_PRECONDITION, "signature '%s' cannot run: %s", key,
                      sig->plan_error ? sig->plan_error : "no plan");
  *out = sig;
  return TD_OK;
}

/* A Classify or Regress request: its tf.Examples, serialized as the client
 * wrote them (a context's bytes first, which parsing merges, as TF Serving
 * does), form the 1-D string tensor fed to the signature's one input. */
static td_code run_infer(const ldr_servable *sv, const Tensorflow__Serving__ModelSpec *spec,
                         const Tensord__Wire__InputRaw *input, int iterations, td_err *err) {
  const ldr_signature *sig = NULL;
  td_code rc = find_signature(sv, spec, &sig, err);
  if (rc) return rc;
  if (sig->n_inputs != 1 || sig->inputs[0].dtype != ENG_DT_STRING)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Expected one input Tensor of DT_STRING in signature '%s'", sig->key);
  size_t n = 0;
  ProtobufCBinaryData *ex = NULL, ctx = {0};
  if (input && input->kind_case == TENSORD__WIRE__INPUT_RAW__KIND_EXAMPLE_LIST) {
    n = input->example_list->n_examples;
    ex = input->example_list->examples;
  } else if (input && input->kind_case == TENSORD__WIRE__INPUT_RAW__KIND_EXAMPLE_LIST_WITH_CONTEXT) {
    n = input->example_list_with_context->n_examples;
    ex = input->example_list_with_context->examples;
    ctx = input->example_list_with_context->context;
  }
  if (!n) return td_err_set(err, TD_INVALID_ARGUMENT, "Input is empty.");
  size_t *lens = calloc(n, sizeof *lens);
  if (!lens) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < n; i++) lens[i] = ctx.len + ex[i].len;
  eng_tensor in = {0};
  eng_shape s = eng_shape_make(1, (int64_t[]){(int64_t)n});
  rc = eng_tensor_alloc_strings(&in, &s, lens, err);
  free(lens);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    char *dst = eng_tensor_str_bytes(&in, (int64_t)i);
    if (ctx.len) memcpy(dst, ctx.data, ctx.len);
    if (ex[i].len) memcpy(dst + ctx.len, ex[i].data, ex[i].len);
  }
  eng_tensor *out = calloc((size_t)sig->n_outputs + 1, sizeof *out);
  if (!out) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int it = 0; !rc && it < iterations; it++) {
    rc = eng_plan_run(sig->plan, &in, out, err);
    for (int k = 0; k < sig->n_outputs; k++) eng_tensor_release(&out[k]);
  }
  free(out);
  eng_tensor_release(&in);
  return rc;
}

/* classify_log, regress_log and multi_inference_log records (every task of
 * a MultiInference runs on the one input). */
static td_code run_other(const ldr_servable *sv, const uint8_t *body, size_t n, int iterations,
                         const char **type, td_err *err) {
  td_err why;
  Tensord__Wire__PredictionLogRaw *log = (Tensord__Wire__PredictionLogRaw *)td_pb_unpack(
      &tensord__wire__prediction_log_raw__descriptor, NULL, n, body, &why);
  if (!log) return td_err_set(err, TD_INVALID_ARGUMENT, "cannot parse the record: %s", why.msg);
  td_code rc = TD_OK;
  switch (log->log_type_case) {
    case TENSORD__WIRE__PREDICTION_LOG_RAW__LOG_TYPE_CLASSIFY_LOG:
    case TENSORD__WIRE__PREDICTION_LOG_RAW__LOG_TYPE_REGRESS_LOG: {
      bool cls = log->log_type_case == TENSORD__WIRE__PREDICTION_LOG_RAW__LOG_TYPE_CLASSIFY_LOG;
      const Tensord__Wire__InferLogRaw *l = cls ? log->classify_log : log->regress_log;
      *type = cls ? "classify_log" : "regress_log";
      if (!l->request)
        rc = td_err_set(err, TD_INVALID_ARGUMENT, "%s has no request", *type);
      else
        rc = run_infer(sv, l->request->model_spec, l->request->input, iterations, err);
      break;
    }
    case TENSORD__WIRE__PREDICTION_LOG_RAW__LOG_TYPE_MULTI_INFERENCE_LOG: {
      const Tensord__Wire__MultiInferenceRequestRaw *r = log->multi_inference_log->request;
      *type = "multi_inference_log";
      if (!r || !r->n_tasks)
        rc = td_err_set(err, TD_INVALID_ARGUMENT, "multi_inference_log has no tasks");
      for (size_t t = 0; !rc && r && t < r->n_tasks; t++)
        rc = run_infer(sv, r->tasks[t]->model_spec, r->input, iterations, err);
      break;
    }
    default:
      rc = TD_UNIMPLEMENTED;
  }
  tensord__wire__prediction_log_raw__free_unpacked(log, NULL);
  return rc;
}

static double now_us(void) { return (double)td_now_ns() / 1e3; }

td_code ldr_warmup_run(const ldr_servable *sv, const char *version_dir, int iterations,
                       int *n_records, td_err *err) {
  if (n_records) *n_records = 0;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", version_dir, LDR_WARMUP_FILE);
  struct stat st;
  if (stat(path, &st) && errno == ENOENT) {
    td_log_info("No warmup data file found at %s", path);
    return TD_OK;
  }
  double t0 = now_us();
  uint8_t *data = NULL;
  size_t len = 0;
  td_code rc = td_file_read(path, MAX_FILE_BYTES, &data, &len, err);
  if (rc) return td_err_prefix(err, "warmup");
  int count = 0;
  rc = ldr_warmup_replay(sv, data, len, path, iterations, &count, err);
  free(data);
  if (rc) return rc;
  td_log_info("Finished reading warmup data for model at %s. Number of warmup records read: %d. "
              "Elapsed time (microseconds): %.0f.",
              path, count, now_us() - t0);
  if (n_records) *n_records = count;
  return TD_OK;
}

td_code ldr_warmup_replay(const ldr_servable *sv, const uint8_t *data, size_t len,
                          const char *path, int iterations, int *n_records, td_err *err) {
  if (n_records) *n_records = 0;
  if (iterations < 1) iterations = 1;
  td_code rc = TD_OK;
  size_t off = 0;
  int count = 0;
  while (!rc && off < len) {
    if (len - off < 12) {
      rc = td_err_set(err, TD_DATA_LOSS, "%s: truncated record at offset %zu" TFRECORD_HINT, path,
                      off);
      break;
    }
    const uint8_t *h = data + off;
    uint64_t n = le64(h);
    if (ldr_crc32c_unmask(le32(h + 8)) != ldr_crc32c(h, 8)) {
      rc = td_err_set(err, TD_DATA_LOSS, "%s: corrupted record at offset %zu" TFRECORD_HINT, path,
                      off);
      break;
    }
    if (n > len - off - 12 || len - off - 12 - n < 4) {
      rc = td_err_set(err, TD_DATA_LOSS, "%s: truncated record at offset %zu" TFRECORD_HINT, path,
                      off);
      break;
    }
    const uint8_t *body = h + 12;
    if (ldr_crc32c_unmask(le32(body + n)) != ldr_crc32c(body, (size_t)n)) {
      rc = td_err_set(err, TD_DATA_LOSS, "%s: corrupted record at offset %zu" TFRECORD_HINT, path,
                      off);
      break;
    }
    off += 12 + (size_t)n + 4;
    if (++count > LDR_WARMUP_MAX_RECORDS) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT,
                      "Number of warmup records exceeds the maximum (%d) at %s",
                      LDR_WARMUP_MAX_RECORDS, path);
      break;
    }
    td_err why;
    Tensorflow__Serving__PredictionLog *log = (Tensorflow__Serving__PredictionLog *)td_pb_unpack(
        &tensorflow__serving__prediction_log__descriptor, NULL, (size_t)n, body, &why);
    if (!log) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "Failed to parse warmup record %d from %s: %s",
                      count, path, why.msg);
      break;
    }
    if (log->log_type_case != TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_PREDICT_LOG) {
      const char *other = other_log_type(log), *type = NULL;
      rc = run_other(sv, body, (size_t)n, iterations, &type, err);
      if (rc == TD_UNIMPLEMENTED)
        rc = td_err_set(err, TD_UNIMPLEMENTED, "Unsupported log_type for warmup: %s (record %d of %s)",
                        other ? other : "none", count, path);
      else if (rc)
        td_err_prefix(err, "warmup record %d (%s) of %s", count, type ? type : "?", path);
    } else if (!log->predict_log->request) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "warmup record %d of %s has no PredictRequest",
                      count, path);
    } else {
      rc = run_predict(sv, log->predict_log->request, iterations, err);
      if (rc) td_err_prefix(err, "warmup record %d of %s", count, path);
    }
    tensorflow__serving__prediction_log__free_unpacked(log, NULL);
  }
  if (!rc && n_records) *n_records = count;
  return rc;
}
