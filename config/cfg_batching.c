#include "cfg_batching.h"

#include <string.h>

#include "cfg_pbtxt.h"
#include "tensorflow_serving/servables/tensorflow/session_bundle_config.pb-c.h"

typedef Tensorflow__Serving__BatchingParameters batching_proto;

void cfg_batching_defaults(cfg_batching *b, int cpus) {
  *b = (cfg_batching){
      .max_batch_size = 1000,
      .batch_timeout_micros = 0,
      .max_enqueued_batches = 10,
      .num_batch_threads = cpus > 0 ? cpus : 1,
      .max_execution_batch_size = 1000,
  };
}

int64_t cfg_batching_exec_size(const cfg_batching *b) {
  return b->enable_large_batch_splitting ? b->max_execution_batch_size : b->max_batch_size;
}

td_code cfg_batching_validate(const cfg_batching *b, td_err *err) {
  if (b->max_batch_size <= 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "max_batch_size must be positive; was %lld",
                      (long long)b->max_batch_size);
  if (b->batch_timeout_micros < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "batch_timeout_micros must be non-negative; was %lld",
                      (long long)b->batch_timeout_micros);
  if (b->max_enqueued_batches <= 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "max_enqueued_batches must be positive; was %lld",
                      (long long)b->max_enqueued_batches);
  if (b->num_batch_threads <= 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "num_batch_threads must be positive; was %lld",
                      (long long)b->num_batch_threads);
  if (b->enable_large_batch_splitting &&
      (b->max_execution_batch_size <= 0 || b->max_execution_batch_size > b->max_batch_size))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "max_execution_batch_size must be in [1, max_batch_size=%lld]; was %lld",
                      (long long)b->max_batch_size, (long long)b->max_execution_batch_size);
  int64_t prev = 0;
  for (int i = 0; i < b->n_allowed_batch_sizes; i++) {
    int64_t s = b->allowed_batch_sizes[i];
    if (s <= 0)
      return td_err_set(err, TD_INVALID_ARGUMENT, "allowed_batch_sizes entries must be positive");
    if (s <= prev)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "allowed_batch_sizes entries must be monotonically increasing");
    prev = s;
  }
  int64_t exec = cfg_batching_exec_size(b);
  if (b->n_allowed_batch_sizes && prev != exec)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Last entry in allowed_batch_sizes must match %s; last entry was %lld; "
                      "expected %lld",
                      b->enable_large_batch_splitting ? "max_execution_batch_size" : "max_batch_size",
                      (long long)prev, (long long)exec);
  return TD_OK;
}

td_code cfg_batching_from_proto(const batching_proto *p, int cpus, cfg_batching *b, td_err *err) {
  cfg_batching_defaults(b, cpus);
  if (p->max_batch_size) b->max_batch_size = p->max_batch_size->value;
  if (p->batch_timeout_micros) b->batch_timeout_micros = p->batch_timeout_micros->value;
  if (p->max_enqueued_batches) b->max_enqueued_batches = p->max_enqueued_batches->value;
  if (p->num_batch_threads) b->num_batch_threads = p->num_batch_threads->value;
  if (p->n_allowed_batch_sizes > CFG_MAX_ALLOWED_BATCH_SIZES)
    return td_err_set(err, TD_INVALID_ARGUMENT, "more than %d allowed_batch_sizes",
                      CFG_MAX_ALLOWED_BATCH_SIZES);
  b->n_allowed_batch_sizes = (int)p->n_allowed_batch_sizes;
  if (p->n_allowed_batch_sizes) /* the array is NULL when empty */
    memcpy(b->allowed_batch_sizes, p->allowed_batch_sizes,
           p->n_allowed_batch_sizes * sizeof *p->allowed_batch_sizes);
  b->pad_variable_length_inputs = p->pad_variable_length_inputs;
  if (p->enable_large_batch_splitting)
    b->enable_large_batch_splitting = p->enable_large_batch_splitting->value;
  b->max_execution_batch_size =
      p->max_execution_batch_size ? p->max_execution_batch_size->value : b->max_batch_size;
  return cfg_batching_validate(b, err);
}

td_code cfg_batching_parse(const char *text, int cpus, cfg_batching *out, td_err *err) {
  ProtobufCMessage *m = NULL;
  td_code rc = cfg_pbtxt_parse(text, strlen(text),
                               &tensorflow__serving__batching_parameters__descriptor, &m, err);
  if (rc) return td_err_prefix(err, "Error parsing text-format tensorflow.serving.BatchingParameters");
  rc = cfg_batching_from_proto((const batching_proto *)m, cpus, out, err);
  protobuf_c_message_free_unpacked(m, NULL);
  return rc;
}

td_code cfg_batching_load(const char *path, int cpus, cfg_batching *out, td_err *err) {
  ProtobufCMessage *m = NULL;
  td_code rc = cfg_pbtxt_parse_file(path, &tensorflow__serving__batching_parameters__descriptor,
                                    &m, err);
  if (rc) return td_err_prefix(err, "Error parsing text-format tensorflow.serving.BatchingParameters");
  rc = cfg_batching_from_proto((const batching_proto *)m, cpus, out, err);
  protobuf_c_message_free_unpacked(m, NULL);
  if (rc) td_err_prefix(err, "%s", path);
  return rc;
}
