/* gRPC Classify, Regress and MultiInference: TF Serving's semantics
 * (classification_service.cc, regression_service.cc, multi_inference.cc)
 * through srv_infer, the module REST :classify/:regress use too.
 *
 * Requests are decoded with tensord's raw views (proto/tensord/
 * raw_input.proto), so each tf.Example reaches the model's DT_STRING input
 * as the bytes the client sent.
 *
 * MultiInference: TF Serving resolves the model from the first task (only
 * its version counts), checks every task, and runs the union of the
 * signatures' outputs once. tensord's signatures each have their own plan,
 * so it runs one engine call per task, all on the same servable version and
 * the same examples; the last call to finish answers. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_registry.h"
#include "srv_grpc_call.h"
#include "srv_infer.h"
#include "srv_inferpb.h"
#include "srv_metrics.h"
#include "srv_reqlog.h"
#include "tensord/raw_input.pb-c.h"
#include "tensorflow_serving/apis/classification.pb-c.h"
#include "tensorflow_serving/apis/inference.pb-c.h"
#include "tensorflow_serving/apis/regression.pb-c.h"

#define CLASSIFY_METHOD "tensorflow/serving/classify"
#define REGRESS_METHOD "tensorflow/serving/regress"

/* The examples of an Input, as views into the unpacked request. */
typedef struct examples {
  eng_str *v;
  int n;
  eng_str context;
} examples;

static td_code examples_of(const Tensord__Wire__InputRaw *in, examples *ex, td_err *err) {
  memset(ex, 0, sizeof *ex);
  const ProtobufCBinaryData *src = NULL;
  size_t n = 0;
  if (in && in->kind_case == TENSORD__WIRE__INPUT_RAW__KIND_EXAMPLE_LIST && in->example_list) {
    src = in->example_list->examples;
    n = in->example_list->n_examples;
  } else if (in && in->kind_case == TENSORD__WIRE__INPUT_RAW__KIND_EXAMPLE_LIST_WITH_CONTEXT &&
             in->example_list_with_context) {
    src = in->example_list_with_context->examples;
    n = in->example_list_with_context->n_examples;
    ProtobufCBinaryData ctx = in->example_list_with_context->context;
    ex->context = (eng_str){(const char *)ctx.data, ctx.len};
  }
  if (n > INT32_MAX) return td_err_set(err, TD_INVALID_ARGUMENT, "too many examples: %zu", n);
  ex->n = (int)n;
  if (!n) return TD_OK; /* srv_infer_set_examples answers "Input is empty." */
  ex->v = malloc(n * sizeof *ex->v);
  if (!ex->v) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < n; i++) ex->v[i] = (eng_str){(const char *)src[i].data, src[i].len};
  return TD_OK;
}

/* --- Classify and Regress ------------------------------------------------- */

typedef struct infer_state {
  srv_infer_kind kind;
  int n_examples;
  char *model_name;
  char *signature_name; /* as requested ("" stays "" until the answer) */
} infer_state;

static void infer_cleanup(srv_gcall *c) {
  infer_state *st = c->state;
  if (!st) return;
  free(st->model_name);
  free(st->signature_name);
  free(st);
  c->state = NULL;
}

static void infer_done(srv_call *call) {
  srv_gcall *c = call->user;
  infer_state *st = c->state;
  if (call->task.code) {
    srv_gcall_fail(c, &call->task.err);
    return;
  }
  srv_metrics_examples(call->mstats, st->n_examples);
  td_err err;
  srv_gspec spec;
  srv_gspec_make(&spec, st->model_name, call->version, st->signature_name);
  if (st->kind == SRV_INFER_CLASSIFY) {
    srv_inferpb_classification k;
    if (srv_inferpb_classify(call, st->n_examples, &k, &err)) {
      srv_gcall_fail(c, &err);
      return;
    }
    Tensorflow__Serving__ClassificationResponse resp;
    tensorflow__serving__classification_response__init(&resp);
    resp.model_spec = &spec.spec;
    resp.result = &k.result;
    if (srv_reqlog_sample(call->metric_model)) srv_reqlog_infer(call, false, &resp.base);
    srv_gcall_reply(c, &resp.base);
    srv_inferpb_classification_free(&k);
  } else {
    srv_inferpb_regression g;
    if (srv_inferpb_regress(call, st->n_examples, &g, &err)) {
      srv_gcall_fail(c, &err);
      return;
    }
    Tensorflow__Serving__RegressionResponse resp;
    tensorflow__serving__regression_response__init(&resp);
    resp.model_spec = &spec.spec;
    resp.result = &g.result;
    if (srv_reqlog_sample(call->metric_model)) srv_reqlog_infer(call, true, &resp.base);
    srv_gcall_reply(c, &resp.base);
    srv_inferpb_regression_free(&g);
  }
}

static void run_single(srv_gcall *c, srv_infer_kind kind, const uint8_t *req, size_t len) {
  Tensord__Wire__InferRequestRaw *r = (Tensord__Wire__InferRequestRaw *)srv_gcall_unpack(
      c, &tensord__wire__infer_request_raw__descriptor, req, len);
  if (!r) return;
  td_err err;
  td_code rc = TD_OK;
  examples ex = {0};
  if (!r->model_spec) {
    rc = td_err_set(&err, TD_INVALID_ARGUMENT, "Missing ModelSpec");
  } else {
    srv_model_spec spec;
    srv_gspec_from_proto(r->model_spec, &spec);
    spec.sig_errors = SRV_SIG_ERRORS_INFER;
    rc = srv_call_begin(&c->call, c->api, &spec, &err);
  }
  if (!rc) rc = srv_infer_check_signature(kind, c->call.sig, &err);
  if (!rc) rc = examples_of(r->input, &ex, &err);
  if (!rc) rc = srv_infer_set_examples(&c->call, ex.v, ex.n, ex.context, &err);
  if (!rc) {
    infer_state *st = calloc(1, sizeof *st);
    if (st) {
      c->state = st;
      c->cleanup = infer_cleanup;
      st->kind = kind;
      st->n_examples = ex.n;
      st->model_name = strdup(r->model_spec->name);
      st->signature_name = strdup(r->model_spec->signature_name);
    }
    if (!st || !st->model_name || !st->signature_name)
      rc = td_err_set(&err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  free(ex.v);
  srv_gcall_run(c, &r->base, rc, &err, infer_done);
}

void srv_grpc_classify(srv_gcall *c, const uint8_t *req, size_t len) {
  run_single(c, SRV_INFER_CLASSIFY, req, len);
}

void srv_grpc_regress(srv_gcall *c, const uint8_t *req, size_t len) {
  run_single(c, SRV_INFER_REGRESS, req, len);
}

/* --- MultiInference ------------------------------------------------------- */

typedef struct multi_task {
  srv_call call;
  srv_infer_kind kind;
  char *signature_name; /* as requested */
  struct multi_state *m;
} multi_task;

typedef struct multi_state {
  srv_gcall *c;
  int n_tasks;
  multi_task *tasks;
  atomic_int pending; /* engine calls still running */
  int n_examples;
  char *model_name;
} multi_state;

static void multi_cleanup(srv_gcall *c) {
  multi_state *m = c->state;
  if (!m) return;
  for (int i = 0; i < m->n_tasks; i++) {
    srv_call_end(&m->tasks[i].call);
    free(m->tasks[i].signature_name);
  }
  free(m->tasks);
  free(m->model_name);
  free(m);
  c->state = NULL;
}

static void log_multi(const multi_state *m, const ProtobufCMessage *resp) {
  const srv_call **calls = calloc((size_t)m->n_tasks, sizeof *calls);
  const char **methods = calloc((size_t)m->n_tasks, sizeof *methods);
  if (calls && methods) {
    for (int i = 0; i < m->n_tasks; i++) {
      calls[i] = &m->tasks[i].call;
      methods[i] = m->tasks[i].kind == SRV_INFER_CLASSIFY ? CLASSIFY_METHOD : REGRESS_METHOD;
    }
    srv_reqlog_multi(calls, methods, m->n_tasks, resp);
  }
  free(calls), free(methods);
}

/* Called by the last engine call to finish: every result is in. The
 * request's metrics (API "MultiInference") are kept on the gcall's own
 * srv_call, which runs nothing: the engine time is the tasks' together. */
static void multi_answer(multi_state *m) {
  srv_gcall *c = m->c;
  for (int i = 0; i < m->n_tasks; i++) c->call.run_ns += m->tasks[i].call.run_ns;
  for (int i = 0; i < m->n_tasks; i++)
    if (m->tasks[i].call.task.code) {
      srv_gcall_fail(c, &m->tasks[i].call.task.err);
      return;
    }
  srv_metrics_examples(c->call.mstats, m->n_examples);
  size_t n = (size_t)m->n_tasks;
  Tensorflow__Serving__InferenceResult *res = calloc(n, sizeof *res);
  Tensorflow__Serving__InferenceResult **resp_p = calloc(n, sizeof *resp_p);
  srv_gspec *specs = calloc(n, sizeof *specs);
  srv_inferpb_classification *ks = calloc(n, sizeof *ks);
  srv_inferpb_regression *gs = calloc(n, sizeof *gs);
  td_err err;
  td_code rc = res && resp_p && specs && ks && gs
                   ? TD_OK
                   : td_err_set(&err, TD_RESOURCE_EXHAUSTED, "out of memory");
  size_t built = 0;
  for (size_t i = 0; i < n && !rc; i++, built++) {
    multi_task *t = &m->tasks[i];
    tensorflow__serving__inference_result__init(&res[i]);
    srv_gspec_make(&specs[i], m->model_name, t->call.version, t->signature_name);
    res[i].model_spec = &specs[i].spec;
    if (t->kind == SRV_INFER_CLASSIFY) {
      rc = srv_inferpb_classify(&t->call, m->n_examples, &ks[i], &err);
      res[i].result_case = TENSORFLOW__SERVING__INFERENCE_RESULT__RESULT_CLASSIFICATION_RESULT;
      res[i].classification_result = &ks[i].result;
    } else {
      rc = srv_inferpb_regress(&t->call, m->n_examples, &gs[i], &err);
      res[i].result_case = TENSORFLOW__SERVING__INFERENCE_RESULT__RESULT_REGRESSION_RESULT;
      res[i].regression_result = &gs[i].result;
    }
    if (rc) break;
    resp_p[i] = &res[i];
  }
  if (rc) {
    srv_gcall_fail(c, &err);
  } else {
    Tensorflow__Serving__MultiInferenceResponse resp;
    tensorflow__serving__multi_inference_response__init(&resp);
    resp.n_results = n;
    resp.results = resp_p;
    if (srv_reqlog_sample(m->model_name)) log_multi(m, &resp.base);
    srv_gcall_reply(c, &resp.base);
  }
  /* The reply (or failure) ends the call, and with it m: what to free is
   * read from res, which is ours. */
  for (size_t i = 0; i < built; i++) {
    if (res[i].result_case == TENSORFLOW__SERVING__INFERENCE_RESULT__RESULT_CLASSIFICATION_RESULT)
      srv_inferpb_classification_free(&ks[i]);
    else
      srv_inferpb_regression_free(&gs[i]);
  }
  free(res), free(resp_p), free(specs), free(ks), free(gs);
}

static void multi_done(srv_call *call) {
  multi_task *t = call->user;
  multi_state *m = t->m;
  if (atomic_fetch_sub(&m->pending, 1) == 1) multi_answer(m);
}

/* TF Serving's checks of every task, against the first task's servable. */
static td_code check_tasks(const Tensord__Wire__MultiInferenceRequestRaw *r, const ldr_servable *sv,
                           srv_infer_kind *kinds, td_err *err) {
  const char *model = r->tasks[0]->model_spec ? r->tasks[0]->model_spec->name : "";
  const char *input_name = NULL;
  for (size_t i = 0; i < r->n_tasks; i++) {
    const Tensorflow__Serving__InferenceTask *t = r->tasks[i];
    const char *name = t->model_spec ? t->model_spec->name : "";
    if (strcmp(name, model))
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "All ModelSpecs in a MultiInferenceRequest must access the same model "
                        "name.");
    const char *sig_name = t->model_spec && *t->model_spec->signature_name
                               ? t->model_spec->signature_name
                               : SRV_DEFAULT_SIGNATURE;
    for (size_t j = 0; j < i; j++) {
      const Tensorflow__Serving__InferenceTask *u = r->tasks[j];
      const char *prev = u->model_spec && *u->model_spec->signature_name
                             ? u->model_spec->signature_name
                             : SRV_DEFAULT_SIGNATURE;
      if (!strcmp(prev, sig_name))
        return td_err_set(err, TD_INVALID_ARGUMENT, "Duplicate evaluation of signature: %s",
                          sig_name);
    }
    const ldr_signature *sig = ldr_servable_signature(sv, sig_name);
    if (!sig)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "Requested signature not found in model graph: %s", sig_name);
    if (!strcmp(t->method_name, CLASSIFY_METHOD))
      kinds[i] = SRV_INFER_CLASSIFY;
    else if (!strcmp(t->method_name, REGRESS_METHOD))
      kinds[i] = SRV_INFER_REGRESS;
    else
      return td_err_set(err, TD_UNIMPLEMENTED, "Unsupported signature method_name: %s",
                        t->method_name);
    td_code rc = srv_infer_check_signature(kinds[i], sig, err);
    if (rc) return rc;
    const char *in = sig->inputs[ldr_signature_input(sig, SRV_INFER_INPUTS)].name;
    if (input_name && strcmp(input_name, in))
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "Input tensor must be the same for all Signatures.");
    input_name = in;
  }
  return TD_OK;
}

void srv_grpc_multi_inference(srv_gcall *c, const uint8_t *req, size_t len) {
  Tensord__Wire__MultiInferenceRequestRaw *r =
      (Tensord__Wire__MultiInferenceRequestRaw *)srv_gcall_unpack(
          c, &tensord__wire__multi_inference_request_raw__descriptor, req, len);
  if (!r) return;
  td_err err;
  td_code rc = TD_OK;
  ldr_servable *sv = NULL;
  examples ex = {0};
  srv_infer_kind *kinds = NULL;
  multi_state *m = NULL;
  if (!r->n_tasks) {
    rc = td_err_set(&err, TD_INVALID_ARGUMENT, "Expected at least one task");
  } else {
    /* The first task's model spec picks the servable for all of them. */
    srv_model_spec spec;
    srv_gspec_from_proto(r->tasks[0]->model_spec, &spec);
    if (spec.name && *spec.name) {
      snprintf(c->call.metric_model, sizeof c->call.metric_model, "%s", spec.name);
      c->call.mstats = srv_metrics_model(spec.name);
    }
    int64_t version = spec.has_version ? spec.version : -1;
    if (!spec.name || !*spec.name)
      rc = td_err_set(&err, TD_INVALID_ARGUMENT, "ModelSpec has no name specified.");
    if (!rc && spec.label)
      rc = ldr_registry_resolve_label(c->api->registry, spec.name, spec.label, &version, &err);
    if (!rc) rc = ldr_registry_acquire(c->api->registry, spec.name, version, &sv, &err);
  }
  if (!rc && !(kinds = calloc(r->n_tasks, sizeof *kinds)))
    rc = td_err_set(&err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (!rc) rc = check_tasks(r, sv, kinds, &err);
  if (!rc) rc = examples_of(r->input, &ex, &err);
  if (!rc) {
    m = calloc(1, sizeof *m);
    if (m) {
      c->state = m;
      c->cleanup = multi_cleanup;
      m->c = c;
      m->tasks = calloc(r->n_tasks, sizeof *m->tasks);
      m->model_name = strdup(r->tasks[0]->model_spec->name);
    }
    if (!m || !m->tasks || !m->model_name)
      rc = td_err_set(&err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  /* One engine call per task, all on the version the first task resolved. */
  for (size_t i = 0; !rc && i < r->n_tasks; i++) {
    multi_task *t = &m->tasks[i];
    m->n_tasks = (int)i + 1;
    t->m = m;
    t->kind = kinds[i];
    t->signature_name = strdup(r->tasks[i]->model_spec->signature_name);
    if (!t->signature_name) rc = td_err_set(&err, TD_RESOURCE_EXHAUSTED, "out of memory");
    srv_model_spec spec = {.name = m->model_name,
                           .has_version = true,
                           .version = ldr_servable_version(sv),
                           .signature_name = t->signature_name,
                           .sig_errors = SRV_SIG_ERRORS_INFER};
    if (!rc) rc = srv_call_begin(&t->call, c->api, &spec, &err);
    /* Every task holds its own copy of the examples: one budget for all. */
    if (!rc && i) t->call.input_bytes = m->tasks[i - 1].call.input_bytes;
    if (!rc) rc = srv_infer_set_examples(&t->call, ex.v, ex.n, ex.context, &err);
  }
  free(ex.v);
  free(kinds);
  srv_gcall_free(c, &r->base);
  ldr_servable_unref(sv);
  if (rc) {
    srv_gcall_fail(c, &err);
    return;
  }
  m->n_examples = ex.n;
  /* Submit all; a task the queue refuses counts as finished with its error,
   * so the last one to finish (or be refused) still answers exactly once. */
  atomic_store(&m->pending, m->n_tasks);
  int n = m->n_tasks;
  for (int i = 0; i < n; i++) {
    multi_task *t = &m->tasks[i];
    t->call.done = multi_done;
    t->call.user = t;
    t->call.deadline_ns = c->deadline_ns;
    if (srv_call_submit(&t->call, &t->call.task.err)) {
      t->call.task.code = t->call.task.err.code;
      multi_done(&t->call);
    }
  }
}
