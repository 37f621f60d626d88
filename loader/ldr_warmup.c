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
#include "td_log.h"
#include "tensorflow_serving/apis/prediction_log.pb-c.h"
#include "td_file.h"

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

static td_code run_predict(const ldr_servable *sv, const Tensorflow__Serving__PredictRequest *req,
                           int iterations, td_err *err) {
  const char *key = req->model_spec && req->model_spec->signature_name &&
                            *req->model_spec->signature_name
                        ? req->model_spec->signature_name
                        : DEFAULT_SIGNATURE;
  const ldr_signature *sig = ldr_servable_signature(sv, key);
  if (!sig) return td_err_set(err, TD_FAILED_PRECONDITION, "Serving signature key \"%s\" not found.", key);
  if (!sig->plan)
    return td_err_set(err, TD_FAILED_PRECONDITION, "signature '%s' cannot run: %s", key,
                      sig->plan_error ? sig->plan_error : "no plan");
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

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

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
  if (iterations < 1) iterations = 1;
  double t0 = now_us();
  uint8_t *data = NULL;
  size_t len = 0;
  td_code rc = td_file_read(path, MAX_FILE_BYTES, &data, &len, err);
  if (rc) return td_err_prefix(err, "warmup");
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
    Tensorflow__Serving__PredictionLog *log =
        tensorflow__serving__prediction_log__unpack(NULL, (size_t)n, body);
    if (!log) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "Failed to parse warmup record %d from %s", count,
                      path);
      break;
    }
    if (log->log_type_case != TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_PREDICT_LOG) {
      const char *other = other_log_type(log);
      rc = td_err_set(err, TD_UNIMPLEMENTED, "Unsupported log_type for warmup: %s (record %d of %s)",
                      other ? other : "none", count, path);
    } else if (!log->predict_log->request) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "warmup record %d of %s has no PredictRequest",
                      count, path);
    } else {
      rc = run_predict(sv, log->predict_log->request, iterations, err);
      if (rc) td_err_prefix(err, "warmup record %d of %s", count, path);
    }
    tensorflow__serving__prediction_log__free_unpacked(log, NULL);
  }
  free(data);
  if (rc) return rc;
  td_log_info("Finished reading warmup data for model at %s. Number of warmup records read: %d. "
              "Elapsed time (microseconds): %.0f.",
              path, count, now_us() - t0);
  if (n_records) *n_records = count;
  return TD_OK;
}
