/* Loggers (one per model name ever configured with logging) are never
 * freed, so a request thread may hold one without a lock; their rate is an
 * atomic, their file state belongs to the writer thread. The queue is a
 * ring of encoded records under one mutex: the request thread only
 * encodes, locks, stores a pointer and signals. */
#include "srv_reqlog.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "ldr_crc32c.h"
#include "ldr_servable.h"
#include "srv_infer.h"
#include "srv_tensorproto.h"
#include "td_log.h"
#include "td_metrics.h"
#include "tensord/raw_input.pb-c.h"
#include "tensorflow_serving/apis/prediction_log.pb-c.h"

#define MAX_LOGGERS 256

typedef struct logger {
  char name[128];
  _Atomic uint64_t rate_bits; /* the sampling rate, a double's bits; 0: off */
  uv_mutex_t mu;              /* prefix, changed by configure, read by the writer */
  char prefix[1024];
  unsigned gen; /* bumped when the prefix changes */
  /* Writer thread only. */
  FILE *f;
  unsigned file_gen;
  long file_bytes;
  int file_n;
  bool failed; /* the current file could not be opened or written: logged once */
  td_series *written, *failed_s, *dropped;
} logger;

typedef struct record {
  logger *lg;
  uint8_t *data; /* TFRecord framing included */
  size_t len;
} record;

static struct {
  uv_mutex_t mu;
  uv_cond_t cv;
  record ring[SRV_REQLOG_QUEUE];
  int head, count;
  bool running, stopping;
  uv_thread_t thread;
  logger *loggers[MAX_LOGGERS];
  _Atomic int n_loggers;
  _Atomic int n_active; /* loggers with a rate above 0 */
  td_metric *m_count, *m_dropped;
} R;

static double rate_of(logger *lg) {
  uint64_t b = atomic_load_explicit(&lg->rate_bits, memory_order_relaxed);
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

static logger *find_logger(const char *name) {
  int n = atomic_load_explicit(&R.n_loggers, memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (!strcmp(R.loggers[i]->name, name)) return R.loggers[i];
  return NULL;
}

/* --- the writer -------------------------------------------------------- */

static void close_file(logger *lg) {
  if (lg->f && fclose(lg->f))
    td_log_error("request log of %s: close failed: %s", lg->name, strerror(errno));
  lg->f = NULL;
}

static bool open_file(logger *lg) {
  char prefix[1024];
  uv_mutex_lock(&lg->mu);
  snprintf(prefix, sizeof prefix, "%s", lg->prefix);
  unsigned gen = lg->gen;
  uv_mutex_unlock(&lg->mu);
  if (lg->f && gen == lg->file_gen && lg->file_bytes < SRV_REQLOG_MAX_FILE) return true;
  if (lg->f) {
    close_file(lg);
    lg->file_n++;
  }
  if (gen != lg->file_gen) lg->file_n = 0;
  lg->file_gen = gen;
  char path[1200];
  snprintf(path, sizeof path, "%s.%ld.%d.tfrecord", prefix, (long)getpid(), lg->file_n);
  lg->f = fopen(path, "ab");
  lg->file_bytes = 0;
  if (!lg->f) {
    if (!lg->failed)
      td_log_error("request log of %s: cannot open %s: %s", lg->name, path, strerror(errno));
    lg->failed = true;
    return false;
  }
  lg->failed = false;
  td_log_info("request log of %s: writing %s", lg->name, path);
  return true;
}

static void write_record(record *r) {
  logger *lg = r->lg;
  bool ok = open_file(lg) && fwrite(r->data, 1, r->len, lg->f) == r->len && !fflush(lg->f);
  if (ok) {
    lg->file_bytes += (long)r->len;
    td_series_add(lg->written, 1);
  } else {
    if (lg->f && !lg->failed)
      td_log_error("request log of %s: write failed: %s", lg->name, strerror(errno));
    if (lg->f) lg->failed = true;
    td_series_add(lg->failed_s, 1);
  }
  free(r->data);
}

static void writer(void *arg) {
  uv_mutex_lock(&R.mu);
  for (;;) {
    while (!R.count && !R.stopping) uv_cond_wait(&R.cv, &R.mu);
    if (!R.count) break;
    record r = R.ring[R.head];
    R.head = (R.head + 1) % SRV_REQLOG_QUEUE;
    R.count--;
    uv_mutex_unlock(&R.mu);
    write_record(&r);
    uv_mutex_lock(&R.mu);
  }
  uv_mutex_unlock(&R.mu);
  int n = atomic_load(&R.n_loggers);
  for (int i = 0; i < n; i++) close_file(R.loggers[i]);
}

void srv_reqlog_start(void) {
  uv_mutex_init(&R.mu);
  uv_cond_init(&R.cv);
  const char *const cl[] = {"model_name", "status"};
  const char *const dl[] = {"model_name"};
  R.m_count = td_metric_counter(":tensorflow:serving:request_log_count",
                                "Requests written to a request log.", 2, cl);
  R.m_dropped =
      td_metric_counter("tensord_request_log_dropped_total",
                        "Sampled requests not logged because the log queue was full.", 1, dl);
  R.running = !uv_thread_create(&R.thread, writer, NULL);
  if (!R.running) td_log_error("request logging: cannot start the writer thread");
}

void srv_reqlog_stop(void) {
  if (!R.running) return;
  uv_mutex_lock(&R.mu);
  R.stopping = true;
  uv_cond_signal(&R.cv);
  uv_mutex_unlock(&R.mu);
  uv_thread_join(&R.thread);
  R.running = false;
}

/* --- configuration ------------------------------------------------------ */

static void set_rate(logger *lg, double rate) {
  uint64_t b;
  memcpy(&b, &rate, sizeof b);
  atomic_store_explicit(&lg->rate_bits, b, memory_order_relaxed);
}

void srv_reqlog_configure(void *ctx, const cfg_model_config *c) {
  uv_mutex_lock(&R.mu); /* one configure at a time; the writer takes it only briefly */
  int n = atomic_load(&R.n_loggers);
  for (int i = 0; i < n; i++)
    if (!cfg_model_config_find(c, R.loggers[i]->name)) set_rate(R.loggers[i], 0);
  for (int i = 0; i < c->n_models; i++) {
    const cfg_model *m = &c->models[i];
    logger *lg = find_logger(m->name);
    if (!lg && m->log_sampling_rate > 0 && n < MAX_LOGGERS && strlen(m->name) < sizeof lg->name &&
        (lg = calloc(1, sizeof *lg))) {
      snprintf(lg->name, sizeof lg->name, "%s", m->name);
      uv_mutex_init(&lg->mu);
      lg->written = td_metric_series2(R.m_count, m->name, "OK");
      lg->failed_s = td_metric_series2(R.m_count, m->name, "UNAVAILABLE");
      lg->dropped = td_metric_series1(R.m_dropped, m->name);
      lg->gen = 1;
      R.loggers[n++] = lg;
      atomic_store_explicit(&R.n_loggers, n, memory_order_release);
    } else if (!lg && m->log_sampling_rate > 0) {
      td_log_error("request logging for %s not started: too many logged models", m->name);
    }
    if (!lg) continue;
    if (m->log_sampling_rate > 0) {
      uv_mutex_lock(&lg->mu);
      if (strcmp(lg->prefix, m->log_filename_prefix)) {
        snprintf(lg->prefix, sizeof lg->prefix, "%s", m->log_filename_prefix);
        lg->gen++;
      }
      uv_mutex_unlock(&lg->mu);
    }
    set_rate(lg, m->log_sampling_rate);
  }
  int active = 0;
  for (int i = 0; i < n; i++) active += rate_of(R.loggers[i]) > 0;
  atomic_store(&R.n_active, active);
  uv_mutex_unlock(&R.mu);
}

/* --- the request side --------------------------------------------------- */

static bool sampled(double rate) {
  if (rate >= 1) return true;
  static _Thread_local uint64_t s;
  if (!s) s = uv_hrtime() ^ (uint64_t)(uintptr_t)&s ^ 0x9e3779b97f4a7c15ull;
  s ^= s << 13, s ^= s >> 7, s ^= s << 17; /* xorshift64 */
  return (double)(s >> 11) / 9007199254740992.0 < rate;
}

/* TFRecord: length, masked CRC of the length, data, masked CRC of the data. */
static uint8_t *frame(const ProtobufCMessage *msg, size_t *len) {
  size_t n = protobuf_c_message_get_packed_size(msg);
  uint8_t *b = malloc(n + 16);
  if (!b) return NULL;
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)n >> (8 * i));
  uint32_t c = ldr_crc32c_mask(ldr_crc32c(b, 8));
  for (int i = 0; i < 4; i++) b[8 + i] = (uint8_t)(c >> (8 * i));
  protobuf_c_message_pack(msg, b + 12);
  c = ldr_crc32c_mask(ldr_crc32c(b + 12, n));
  for (int i = 0; i < 4; i++) b[12 + n + i] = (uint8_t)(c >> (8 * i));
  *len = n + 16;
  return b;
}

typedef Tensorflow__Serving__PredictRequest__InputsEntry InEntry;
typedef Tensorflow__Serving__PredictResponse__OutputsEntry OutEntry;

static uint8_t *encode(const srv_call *c, size_t *len) {
  const ldr_signature *sig = c->sig;
  int ni = sig->n_inputs, no = sig->n_outputs;
  srv_tensorproto *tps = calloc((size_t)(ni + no) + 1, sizeof *tps);
  InEntry *ie = calloc((size_t)ni + 1, sizeof *ie);
  InEntry **iep = calloc((size_t)ni + 1, sizeof *iep);
  OutEntry *oe = calloc((size_t)no + 1, sizeof *oe);
  OutEntry **oep = calloc((size_t)no + 1, sizeof *oep);
  uint8_t *out = NULL;
  int done = 0;
  if (!tps || !ie || !iep || !oe || !oep) goto cleanup;
  td_err err;
  for (int i = 0; i < ni; i++, done++) {
    if (srv_tensorproto_encode(&c->inputs[i], true, &tps[done], &err)) goto cleanup;
    tensorflow__serving__predict_request__inputs_entry__init(&ie[i]);
    ie[i].key = sig->inputs[i].alias;
    ie[i].value = &tps[done].proto;
    iep[i] = &ie[i];
  }
  for (int i = 0; i < no; i++, done++) {
    if (srv_tensorproto_encode(&c->outputs[i], true, &tps[done], &err)) goto cleanup;
    tensorflow__serving__predict_response__outputs_entry__init(&oe[i]);
    oe[i].key = sig->outputs[i].alias;
    oe[i].value = &tps[done].proto;
    oep[i] = &oe[i];
  }
  Google__Protobuf__Int64Value ver = GOOGLE__PROTOBUF__INT64_VALUE__INIT;
  ver.value = c->version;
  Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
  spec.name = (char *)c->metric_model;
  spec.version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
  spec.version = &ver;
  spec.signature_name = (char *)sig->key;
  Tensorflow__Serving__PredictRequest req = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
  req.model_spec = &spec;
  req.n_inputs = (size_t)ni;
  req.inputs = iep;
  Tensorflow__Serving__PredictResponse resp = TENSORFLOW__SERVING__PREDICT_RESPONSE__INIT;
  resp.model_spec = &spec;
  resp.n_outputs = (size_t)no;
  resp.outputs = oep;
  Tensorflow__Serving__PredictLog pl = TENSORFLOW__SERVING__PREDICT_LOG__INIT;
  pl.request = &req;
  pl.response = &resp;
  Tensorflow__Serving__LogMetadata md = TENSORFLOW__SERVING__LOG_METADATA__INIT;
  md.model_spec = &spec;
  Tensorflow__Serving__PredictionLog log = TENSORFLOW__SERVING__PREDICTION_LOG__INIT;
  log.log_metadata = &md;
  log.log_type_case = TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_PREDICT_LOG;
  log.predict_log = &pl;
  out = frame(&log.base, len);
cleanup:
  for (int i = 0; tps && i < done; i++) srv_tensorproto_clear(&tps[i]);
  free(tps), free(ie), free(iep), free(oe), free(oep);
  return out;
}

/* Queues a framed record (taking `data`); a full queue drops it. */
static void enqueue(logger *lg, uint8_t *data, size_t len) {
  if (!data) {
    td_series_add(lg->dropped, 1);
    return;
  }
  uv_mutex_lock(&R.mu);
  bool room = R.count < SRV_REQLOG_QUEUE && !R.stopping;
  if (room) {
    R.ring[(R.head + R.count) % SRV_REQLOG_QUEUE] = (record){.lg = lg, .data = data, .len = len};
    R.count++;
    uv_cond_signal(&R.cv);
  }
  uv_mutex_unlock(&R.mu);
  if (!room) {
    free(data);
    td_series_add(lg->dropped, 1);
  }
}

/* The model's logger when this request is sampled; NULL: not logged. */
static logger *sample(const char *model) {
  if (!atomic_load_explicit(&R.n_active, memory_order_relaxed) || !R.running) return NULL;
  logger *lg = find_logger(model);
  if (!lg) return NULL;
  double rate = rate_of(lg);
  return rate > 0 && sampled(rate) ? lg : NULL;
}

void srv_reqlog_predict(const srv_call *c) {
  logger *lg = sample(c->metric_model);
  if (!lg) return;
  size_t len = 0;
  uint8_t *data = encode(c, &len);
  enqueue(lg, data, len);
}

bool srv_reqlog_sample(const char *model) { return sample(model) != NULL; }

/* --- Classify, Regress, MultiInference ----------------------------------- */

typedef struct spec_store {
  Google__Protobuf__Int64Value ver;
  Tensorflow__Serving__ModelSpec spec;
} spec_store;

static void spec_of(const srv_call *c, spec_store *s) {
  google__protobuf__int64_value__init(&s->ver);
  s->ver.value = c->version;
  tensorflow__serving__model_spec__init(&s->spec);
  s->spec.name = (char *)c->metric_model;
  s->spec.version_choice_case = TENSORFLOW__SERVING__MODEL_SPEC__VERSION_CHOICE_VERSION;
  s->spec.version = &s->ver;
  s->spec.signature_name = (char *)c->sig->key;
}

/* The call's examples (its "inputs" tensor, context already merged into
 * each, as the model saw them) as an ExampleList; bins owned by the caller. */
static bool input_of(const srv_call *c, Tensord__Wire__InputRaw *in,
                     Tensord__Wire__ExampleListRaw *el, ProtobufCBinaryData **bins) {
  int k = ldr_signature_input(c->sig, SRV_INFER_INPUTS);
  if (k < 0 || c->inputs[k].dtype != ENG_DT_STRING) return false;
  int64_t n = eng_shape_numel(&c->inputs[k].shape);
  const eng_str *v = eng_tensor_strs(&c->inputs[k]);
  *bins = calloc((size_t)n + 1, sizeof **bins);
  if (!*bins) return false;
  for (int64_t i = 0; i < n; i++)
    (*bins)[i] = (ProtobufCBinaryData){v[i].len, (uint8_t *)v[i].data};
  tensord__wire__example_list_raw__init(el);
  el->n_examples = (size_t)n;
  el->examples = *bins;
  tensord__wire__input_raw__init(in);
  in->kind_case = TENSORD__WIRE__INPUT_RAW__KIND_EXAMPLE_LIST;
  in->example_list = el;
  return true;
}

/* The packed response, as the log's bytes field. */
static bool pack(const ProtobufCMessage *m, ProtobufCBinaryData *out) {
  out->len = protobuf_c_message_get_packed_size(m);
  out->data = malloc(out->len + 1);
  if (!out->data) return false;
  protobuf_c_message_pack(m, out->data);
  return true;
}

void srv_reqlog_infer(const srv_call *c, bool regress, const ProtobufCMessage *response) {
  logger *lg = find_logger(c->metric_model);
  if (!lg || !c->sig) return;
  spec_store ss;
  spec_of(c, &ss);
  Tensord__Wire__InputRaw in;
  Tensord__Wire__ExampleListRaw el;
  ProtobufCBinaryData *bins = NULL, resp = {0};
  uint8_t *data = NULL;
  size_t len = 0;
  if (input_of(c, &in, &el, &bins) && pack(response, &resp)) {
    Tensord__Wire__InferRequestRaw req = TENSORD__WIRE__INFER_REQUEST_RAW__INIT;
    req.model_spec = &ss.spec;
    req.input = &in;
    Tensord__Wire__InferLogRaw il = TENSORD__WIRE__INFER_LOG_RAW__INIT;
    il.request = &req;
    il.response = resp;
    Tensorflow__Serving__LogMetadata md = TENSORFLOW__SERVING__LOG_METADATA__INIT;
    md.model_spec = &ss.spec;
    Tensord__Wire__PredictionLogRaw log = TENSORD__WIRE__PREDICTION_LOG_RAW__INIT;
    log.log_metadata = &md;
    if (regress) {
      log.log_type_case = TENSORD__WIRE__PREDICTION_LOG_RAW__LOG_TYPE_REGRESS_LOG;
      log.regress_log = &il;
    } else {
      log.log_type_case = TENSORD__WIRE__PREDICTION_LOG_RAW__LOG_TYPE_CLASSIFY_LOG;
      log.classify_log = &il;
    }
    data = frame(&log.base, &len);
  }
  free(bins);
  free(resp.data);
  enqueue(lg, data, len);
}

void srv_reqlog_multi(const srv_call *const *calls, const char *const *methods, int n,
                      const ProtobufCMessage *response) {
  if (n < 1 || !calls[0]->sig) return;
  logger *lg = find_logger(calls[0]->metric_model);
  if (!lg) return;
  spec_store *ss = calloc((size_t)n, sizeof *ss);
  Tensorflow__Serving__InferenceTask *tasks = calloc((size_t)n, sizeof *tasks);
  Tensorflow__Serving__InferenceTask **tp = calloc((size_t)n, sizeof *tp);
  Tensord__Wire__InputRaw in;
  Tensord__Wire__ExampleListRaw el;
  ProtobufCBinaryData *bins = NULL, resp = {0};
  uint8_t *data = NULL;
  size_t len = 0;
  if (ss && tasks && tp && input_of(calls[0], &in, &el, &bins) && pack(response, &resp)) {
    for (int i = 0; i < n; i++) {
      spec_of(calls[i], &ss[i]);
      tensorflow__serving__inference_task__init(&tasks[i]);
      tasks[i].model_spec = &ss[i].spec;
      tasks[i].method_name = (char *)methods[i];
      tp[i] = &tasks[i];
    }
    Tensord__Wire__MultiInferenceRequestRaw req = TENSORD__WIRE__MULTI_INFERENCE_REQUEST_RAW__INIT;
    req.n_tasks = (size_t)n;
    req.tasks = tp;
    req.input = &in;
    Tensord__Wire__MultiInferenceLogRaw ml = TENSORD__WIRE__MULTI_INFERENCE_LOG_RAW__INIT;
    ml.request = &req;
    ml.response = resp;
    Tensorflow__Serving__LogMetadata md = TENSORFLOW__SERVING__LOG_METADATA__INIT;
    md.model_spec = &ss[0].spec;
    Tensord__Wire__PredictionLogRaw log = TENSORD__WIRE__PREDICTION_LOG_RAW__INIT;
    log.log_metadata = &md;
    log.log_type_case = TENSORD__WIRE__PREDICTION_LOG_RAW__LOG_TYPE_MULTI_INFERENCE_LOG;
    log.multi_inference_log = &ml;
    data = frame(&log.base, &len);
  }
  free(ss), free(tasks), free(tp), free(bins), free(resp.data);
  enqueue(lg, data, len);
}
