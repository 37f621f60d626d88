/* gRPC ModelInfer (v2), ModelStatistics and the repository RPCs. See
 * srv_grpc_v2.c for the design notes. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "inference/v2_service.pb-c.h"
#include "srv_grpc_call.h"
#include "srv_stats.h"
#include "srv_v2.h"
#include "srv_v2repo.h"
#include "td_buf.h"

/* --- ModelInfer ----------------------------------------------------------- */

typedef struct infer_state {
  char *model;
  char *id;
  int n_out;   /* outputs to return */
  int *out;    /* their signature indices */
  td_buf *raw; /* per returned output: BYTES scratch */
} infer_state;

static void infer_cleanup(srv_gcall *c) {
  infer_state *s = c->state;
  if (!s) return;
  for (int i = 0; s->raw && i < s->n_out; i++) td_buf_free(&s->raw[i]);
  free(s->raw);
  free(s->out);
  free(s->model);
  free(s->id);
  free(s);
  c->state = NULL;
}

static const char *signature_param(const Inference__ModelInferRequest *r, td_err *err,
                                   td_code *rc) {
  const char *sig = NULL;
  for (size_t i = 0; i < r->n_parameters; i++) {
    const Inference__InferParameter *p = r->parameters[i]->value;
    if (strcmp(r->parameters[i]->key, SRV_V2_SIGNATURE_PARAM)) continue;
    if (!p ||
        p->parameter_choice_case != INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM) {
      *rc = td_err_set(err, TD_INVALID_ARGUMENT, "parameter '%s' must be a string",
                       SRV_V2_SIGNATURE_PARAM);
      return NULL;
    }
    sig = p->string_param;
  }
  return sig;
}

/* Typed contents into the bound tensor t (numeric), converting from the
 * protocol's list for the datatype. */
static td_code fill_typed(eng_tensor *t, const char *name, const Inference__InferTensorContents *ct,
                          td_err *err) {
  int64_t n = eng_tensor_numel(t);
  void *d = eng_tensor_data(t);
  size_t have = 0;
#define FILL(list, ctype)                                                 \
  do {                                                                    \
    have = ct ? ct->n_##list : 0;                                         \
    if ((int64_t)have != n) break;                                        \
    for (int64_t i = 0; i < n; i++) ((ctype *)d)[i] = (ctype)ct->list[i]; \
    return TD_OK;                                                         \
  } while (0)
  const char *list = "";
  switch (t->dtype) {
    case ENG_DT_BOOL:
      list = "bool_contents";
      FILL(bool_contents, bool);
      break;
    case ENG_DT_INT8:
      list = "int_contents";
      FILL(int_contents, int8_t);
      break;
    case ENG_DT_INT16:
      list = "int_contents";
      FILL(int_contents, int16_t);
      break;
    case ENG_DT_INT32:
      list = "int_contents";
      FILL(int_contents, int32_t);
      break;
    case ENG_DT_INT64:
      list = "int64_contents";
      FILL(int64_contents, int64_t);
      break;
    case ENG_DT_UINT8:
      list = "uint_contents";
      FILL(uint_contents, uint8_t);
      break;
    case ENG_DT_UINT16:
      list = "uint_contents";
      FILL(uint_contents, uint16_t);
      break;
    case ENG_DT_UINT32:
      list = "uint_contents";
      FILL(uint_contents, uint32_t);
      break;
    case ENG_DT_UINT64:
      list = "uint64_contents";
      FILL(uint64_contents, uint64_t);
      break;
    case ENG_DT_FLOAT:
      list = "fp32_contents";
      FILL(fp32_contents, float);
      break;
    case ENG_DT_DOUBLE:
      list = "fp64_contents";
      FILL(fp64_contents, double);
      break;
    default:
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "input '%s': %s data has no typed contents; send it in raw_input_contents",
                        name, srv_v2_datatype(t->dtype));
  }
#undef FILL
  return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': %zu values in %s, its shape holds %lld",
                    name, have, list, (long long)n);
}

static td_code decode(srv_gcall *c, const Inference__ModelInferRequest *r, infer_state *s,
                      td_err *err) {
  srv_call *call = &c->call;
  if (r->n_raw_input_contents && r->n_raw_input_contents != r->n_inputs)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "%zu raw_input_contents for %zu inputs: give one per input or none",
                      r->n_raw_input_contents, r->n_inputs);
  for (size_t j = 0; j < r->n_inputs; j++) {
    const Inference__ModelInferRequest__InferInputTensor *in = r->inputs[j];
    int slot = -1;
    td_code rc =
        srv_v2_bind(call, s->model, in->name, in->datatype, in->shape, in->n_shape, &slot, err);
    if (rc) return rc;
    eng_shape shape = eng_shape_make((int)in->n_shape, in->shape);
    if (r->n_raw_input_contents) {
      rc = srv_v2_set_raw(call, slot, &shape, r->raw_input_contents[j].data,
                          r->raw_input_contents[j].len, err);
    } else if (call->inputs[slot].dtype == ENG_DT_STRING) {
      size_t n = in->contents ? in->contents->n_bytes_contents : 0;
      eng_str *strs = malloc(sizeof *strs * (n + 1));
      if (!strs) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      for (size_t k = 0; k < n; k++)
        strs[k] = (eng_str){(const char *)in->contents->bytes_contents[k].data,
                            in->contents->bytes_contents[k].len};
      rc = srv_v2_set_strings(call, slot, &shape, strs, n, err);
      free(strs);
    } else {
      rc = fill_typed(&call->inputs[slot], in->name, in->contents, err);
    }
    if (rc) return rc;
  }
  td_code rc = srv_v2_check_complete(call, s->model, err);
  if (rc) return rc;
  const ldr_signature *sig = call->sig;
  s->n_out = r->n_outputs ? (int)r->n_outputs : sig->n_outputs;
  s->out = calloc((size_t)s->n_out + 1, sizeof *s->out);
  s->raw = calloc((size_t)s->n_out + 1, sizeof *s->raw);
  if (!s->out || !s->raw) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int k = 0; k < s->n_out; k++) {
    td_buf_init(&s->raw[k]);
    if (!r->n_outputs) {
      s->out[k] = k;
      continue;
    }
    rc = srv_v2_output(sig, s->model, r->outputs[k]->name, &s->out[k], err);
    if (rc) return rc;
  }
  return TD_OK;
}

static void infer_done(srv_call *call) {
  srv_gcall *c = call->user;
  if (call->task.code) {
    srv_gcall_fail(c, &call->task.err);
    return;
  }
  infer_state *s = c->state;
  const ldr_signature *sig = call->sig;
  int n = s->n_out;
  Inference__ModelInferResponse__InferOutputTensor *ot = calloc((size_t)n + 1, sizeof *ot);
  Inference__ModelInferResponse__InferOutputTensor **otp = calloc((size_t)n + 1, sizeof *otp);
  ProtobufCBinaryData *raw = calloc((size_t)n + 1, sizeof *raw);
  int64_t *dims = calloc((size_t)n * ENG_MAX_RANK + 1, sizeof *dims);
  if (!ot || !otp || !raw || !dims) {
    free(ot), free(otp), free(raw), free(dims);
    srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "out of memory encoding the response");
    return;
  }
  for (int k = 0; k < n; k++) {
    const eng_tensor *t = &call->outputs[s->out[k]];
    const char *dt = srv_v2_datatype(t->dtype);
    if (!dt) {
      free(ot), free(otp), free(raw), free(dims);
      srv_gcall_failf(c, TD_UNIMPLEMENTED,
                      "output '%s' has dtype %s, which the v2 protocol "
                      "cannot carry",
                      sig->outputs[s->out[k]].alias, eng_dtype_name(t->dtype));
      return;
    }
    inference__model_infer_response__infer_output_tensor__init(&ot[k]);
    ot[k].name = sig->outputs[s->out[k]].alias;
    ot[k].datatype = (char *)dt;
    for (int d = 0; d < t->shape.rank; d++) dims[k * ENG_MAX_RANK + d] = t->shape.dim[d];
    ot[k].n_shape = (size_t)t->shape.rank;
    ot[k].shape = &dims[k * ENG_MAX_RANK];
    otp[k] = &ot[k];
    const void *data;
    size_t len;
    srv_v2_raw(t, &s->raw[k], &data, &len);
    raw[k].data = (uint8_t *)data;
    raw[k].len = len;
  }
  char version[24];
  snprintf(version, sizeof version, "%lld", (long long)call->version);
  Inference__ModelInferResponse resp;
  inference__model_infer_response__init(&resp);
  resp.model_name = s->model;
  resp.model_version = version;
  resp.id = s->id;
  resp.n_outputs = (size_t)n;
  resp.outputs = otp;
  resp.n_raw_output_contents = (size_t)n;
  resp.raw_output_contents = raw;
  bool oom = false;
  for (int k = 0; k < n; k++) oom |= s->raw[k].oom;
  /* Freed after packing: the reply packs before it returns. */
  if (oom)
    srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "out of memory encoding the response");
  else
    srv_gcall_reply(c, &resp.base);
  free(ot), free(otp), free(raw), free(dims);
}

void srv_grpc_v2_model_infer(srv_gcall *c, const uint8_t *req, size_t len) {
  Inference__ModelInferRequest *r = (Inference__ModelInferRequest *)srv_gcall_unpack(
      c, &inference__model_infer_request__descriptor, req, len);
  if (!r) return;
  td_err err;
  td_code rc = TD_OK;
  infer_state *s = calloc(1, sizeof *s);
  if (!s || !(s->model = strdup(r->model_name)) || !(s->id = strdup(r->id))) {
    if (s) free(s->model), free(s);
    srv_gcall_free(c, &r->base);
    srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  c->state = s;
  c->cleanup = infer_cleanup;
  const char *sig = signature_param(r, &err, &rc);
  if (!rc) {
    if (!*r->model_name)
      rc = td_err_set(&err, TD_INVALID_ARGUMENT, "a model name is required");
    else
      rc = srv_v2_begin(&c->call, c->api, r->model_name, r->model_version, sig, &err);
  }
  if (!rc) rc = decode(c, r, s, &err);
  srv_gcall_run(c, &r->base, rc, &err, infer_done);
}

/* --- ModelStatistics -------------------------------------------------------- */

void srv_grpc_v2_model_statistics(srv_gcall *c, const uint8_t *req, size_t len) {
  Inference__ModelStatisticsRequest *r = (Inference__ModelStatisticsRequest *)srv_gcall_unpack(
      c, &inference__model_statistics_request__descriptor, req, len);
  if (!r) return;
  td_err err;
  bool has = false;
  int64_t v = -1;
  td_code rc = srv_v2_parse_version(r->version, &has, &v, &err);
  if (!rc && *r->name) {
    /* A named model must be known, as for metadata. */
    ldr_version_status *st = NULL;
    int k = 0;
    rc = ldr_registry_status(c->api->registry, r->name, has ? v : -1, &st, &k, &err);
    free(st);
  }
  if (rc) {
    srv_gcall_free(c, &r->base);
    srv_gcall_fail(c, &err);
    return;
  }
  srv_stats_entry *e = NULL;
  int n = srv_v2_stats(c->api, *r->name ? r->name : NULL, has ? v : -1, &e);
  srv_gcall_free(c, &r->base);
  Inference__ModelStatistics *ms = calloc((size_t)n + 1, sizeof *ms);
  Inference__ModelStatistics **msp = calloc((size_t)n + 1, sizeof *msp);
  Inference__InferStatistics *is = calloc((size_t)n + 1, sizeof *is);
  Inference__StatisticDuration *d = calloc((size_t)n * 8 + 1, sizeof *d);
  char *vers = calloc((size_t)n + 1, 24);
  if (!ms || !msp || !is || !d || !vers) {
    srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    for (int i = 0; i < n; i++) {
      inference__model_statistics__init(&ms[i]);
      inference__infer_statistics__init(&is[i]);
      Inference__StatisticDuration *di = &d[i * 8];
      for (int k = 0; k < 8; k++) inference__statistic_duration__init(&di[k]);
      snprintf(vers + 24 * i, 24, "%lld", (long long)e[i].version);
      ms[i].name = e[i].model;
      ms[i].version = vers + 24 * i;
      ms[i].last_inference = e[i].last_ms;
      ms[i].inference_count = e[i].inference_count;
      ms[i].execution_count = e[i].execution_count;
      di[0].count = e[i].success_count, di[0].ns = e[i].success_ns;
      di[1].count = e[i].fail_count, di[1].ns = e[i].fail_ns;
      /* Each successful run counts once in every phase (srv_stats.h). */
      for (int k = 2; k < 6; k++) di[k].count = e[i].success_count;
      di[2].ns = e[i].queue_ns;
      di[3].ns = e[i].compute_input_ns;
      di[4].ns = e[i].compute_infer_ns;
      di[5].ns = e[i].compute_output_ns;
      is[i].success = &di[0], is[i].fail = &di[1], is[i].queue = &di[2];
      is[i].compute_input = &di[3], is[i].compute_infer = &di[4], is[i].compute_output = &di[5];
      is[i].cache_hit = &di[6], is[i].cache_miss = &di[7];
      ms[i].inference_stats = &is[i];
      msp[i] = &ms[i];
    }
    Inference__ModelStatisticsResponse resp;
    inference__model_statistics_response__init(&resp);
    resp.n_model_stats = (size_t)n;
    resp.model_stats = msp;
    srv_gcall_reply(c, &resp.base);
  }
  free(ms), free(msp), free(is), free(d), free(vers);
  srv_stats_snapshot_free(e, n);
}

/* --- repository ------------------------------------------------------------ */

typedef enum { REPO_INDEX, REPO_LOAD, REPO_UNLOAD } repo_op;

typedef struct repo_job {
  srv_gcall *c;
  repo_op op;
  bool ready_only;
  char *name;
  char *base_path;
} repo_job;

static void repo_thread(void *arg) {
  repo_job *j = arg;
  srv_gcall *c = j->c;
  srv_v2repo *repo = c->api->repo;
  td_err err;
  td_code rc = TD_OK;
  if (j->op == REPO_INDEX) {
    srv_v2repo_entry *e = NULL;
    int n = srv_v2repo_index(repo, j->ready_only, &e);
    Inference__RepositoryIndexResponse__ModelIndex *mi = calloc((size_t)n + 1, sizeof *mi);
    Inference__RepositoryIndexResponse__ModelIndex **mip = calloc((size_t)n + 1, sizeof *mip);
    char *vers = calloc((size_t)n + 1, 24);
    if (!mi || !mip || !vers) {
      srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      for (int i = 0; i < n; i++) {
        inference__repository_index_response__model_index__init(&mi[i]);
        if (e[i].has_version) snprintf(vers + 24 * i, 24, "%lld", (long long)e[i].version);
        mi[i].name = e[i].name;
        mi[i].version = vers + 24 * i;
        mi[i].state = (char *)e[i].state;
        mi[i].reason = e[i].reason;
        mip[i] = &mi[i];
      }
      Inference__RepositoryIndexResponse resp;
      inference__repository_index_response__init(&resp);
      resp.n_models = (size_t)n;
      resp.models = mip;
      srv_gcall_reply(c, &resp.base);
    }
    free(mi), free(mip), free(vers);
    srv_v2repo_index_free(e, n);
  } else {
    rc = j->op == REPO_LOAD ? srv_v2repo_load(repo, j->name, j->base_path, &err)
                            : srv_v2repo_unload(repo, j->name, &err);
    if (rc) {
      srv_gcall_fail(c, &err);
    } else if (j->op == REPO_LOAD) {
      Inference__RepositoryModelLoadResponse resp;
      inference__repository_model_load_response__init(&resp);
      srv_gcall_reply(c, &resp.base);
    } else {
      Inference__RepositoryModelUnloadResponse resp;
      inference__repository_model_unload_response__init(&resp);
      srv_gcall_reply(c, &resp.base);
    }
  }
  free(j->name);
  free(j->base_path);
  free(j);
}

/* The end of a repository handler: frees the request, then answers with
 * *err when rc is set, else starts job j on a thread of its own. */
static void start_repo_job(srv_gcall *c, ProtobufCMessage *req, td_code rc, const td_err *err,
                           repo_job *j) {
  uv_thread_t tid;
  srv_gcall_free(c, req);
  if (rc) {
    srv_gcall_fail(c, err);
    return;
  }
  j->c = c;
  if (!c->api->repo) {
    free(j->name), free(j->base_path), free(j);
    srv_gcall_failf(c, TD_UNIMPLEMENTED, "the model repository extension is not available");
    return;
  }
  if (!uv_thread_create(&tid, repo_thread, j)) {
    pthread_detach(tid); /* uv_thread_t is a pthread_t on Unix */
    return;
  }
  free(j->name), free(j->base_path), free(j);
  srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "cannot start a thread for the repository request");
}

void srv_grpc_v2_repository_index(srv_gcall *c, const uint8_t *req, size_t len) {
  Inference__RepositoryIndexRequest *r = (Inference__RepositoryIndexRequest *)srv_gcall_unpack(
      c, &inference__repository_index_request__descriptor, req, len);
  if (!r) return;
  td_err err;
  repo_job *j = calloc(1, sizeof *j);
  td_code rc = j ? TD_OK : td_err_set(&err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (j) j->op = REPO_INDEX, j->ready_only = r->ready;
  start_repo_job(c, &r->base, rc, &err, j);
}

/* A load or unload job; parameters are read (base_path, for loads) and
 * copied, so the request can be freed before the job starts. */
static td_code prepare_job(repo_op op, const char *name, size_t n_params,
                           Inference__RepositoryModelLoadRequest__ParametersEntry **params,
                           repo_job **out, td_err *err) {
  repo_job *j = calloc(1, sizeof *j);
  if (!j || !(j->name = strdup(name))) {
    free(j);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  j->op = op;
  td_code rc = TD_OK;
  for (size_t i = 0; i < n_params && !rc; i++) {
    const Inference__ModelRepositoryParameter *p = params[i]->value;
    if (strcmp(params[i]->key, "base_path")) continue;
    if (!p || p->parameter_choice_case !=
                  INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "parameter 'base_path' must be a string");
    else if (!(j->base_path = strdup(p->string_param)))
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  if (rc) {
    free(j->name), free(j->base_path), free(j);
    return rc;
  }
  *out = j;
  return TD_OK;
}

void srv_grpc_v2_repository_load(srv_gcall *c, const uint8_t *req, size_t len) {
  Inference__RepositoryModelLoadRequest *r =
      (Inference__RepositoryModelLoadRequest *)srv_gcall_unpack(
          c, &inference__repository_model_load_request__descriptor, req, len);
  if (!r) return;
  repo_job *j = NULL;
  td_err err;
  td_code rc = prepare_job(REPO_LOAD, r->model_name, r->n_parameters, r->parameters, &j, &err);
  start_repo_job(c, &r->base, rc, &err, j);
}

void srv_grpc_v2_repository_unload(srv_gcall *c, const uint8_t *req, size_t len) {
  Inference__RepositoryModelUnloadRequest *r =
      (Inference__RepositoryModelUnloadRequest *)srv_gcall_unpack(
          c, &inference__repository_model_unload_request__descriptor, req, len);
  if (!r) return;
  repo_job *j = NULL;
  td_err err;
  /* Unload takes no parameters tensord reads. */
  td_code rc = prepare_job(REPO_UNLOAD, r->model_name, 0, NULL, &j, &err);
  start_repo_job(c, &r->base, rc, &err, j);
}
