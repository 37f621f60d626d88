/* gRPC Predict and GetModelMetadata, with TF Serving's checks and messages
 * (predict_util.cc, get_model_metadata_impl.cc).
 *
 * Predict: the polling thread unpacks the request, resolves the model spec
 * (srv_call_begin), checks the inputs against the signature, decodes each
 * TensorProto into the engine tensor of its signature slot, checks the
 * output filter and queues the run. The engine worker that finishes it
 * encodes the kept outputs (srv_tensorproto) and answers; a run that
 * srv_call_try_run_here takes (short plan, a worker idle) runs, is encoded and
 * answered on the polling thread itself. The output tensors stay alive
 * until the call is freed, so encoding points into them instead of
 * copying. */
#include <stdlib.h>
#include <string.h>

#include "ldr_proto.h"
#include "ldr_registry.h"
#include "srv_grpc_call.h"
#include "srv_reqlog.h"
#include "srv_tensorproto.h"
#include "td_buf.h"
#include "tensorflow_serving/apis/get_model_metadata.pb-c.h"
#include "tensorflow_serving/apis/predict.pb-c.h"

#define SIGNATURE_DEF_FIELD "signature_def"
#define SIGNATURE_DEF_MAP_URL "type.googleapis.com/tensorflow.serving.SignatureDefMap"

/* --- Predict -------------------------------------------------------------- */

/* One allocation: the struct, then keep[n_outputs], then the model name. */
typedef struct predict_state {
  const char *model_name;
  bool *keep; /* per signature output: returned to the client */
} predict_state;

static predict_state *predict_state_new(const char *model_name, int n_outputs) {
  size_t name_len = strlen(model_name) + 1;
  predict_state *ps = malloc(sizeof *ps + (size_t)n_outputs + name_len);
  if (!ps) return NULL;
  ps->keep = (bool *)(ps + 1);
  memset(ps->keep, 0, (size_t)n_outputs);
  char *name = (char *)(ps->keep + n_outputs);
  memcpy(name, model_name, name_len);
  ps->model_name = name;
  return ps;
}

static void predict_cleanup(srv_gcall *c) {
  free(c->state);
  c->state = NULL;
}

/* True when entry j is the last one with its key (protobuf's map semantics:
 * the last duplicate wins). */
static bool last_of_key(const Tensorflow__Serving__PredictRequest *r, size_t j) {
  for (size_t k = j + 1; k < r->n_inputs; k++)
    if (!strcmp(r->inputs[k]->key, r->inputs[j]->key)) return false;
  return true;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "{a,b}" of the names in `names` (sorted, as std::set prints them). */
static void join_set(td_buf *b, const char **names, size_t n) {
  td_buf_putc(b, '{');
  for (size_t i = 0; i < n; i++) {
    if (i) td_buf_putc(b, ',');
    td_buf_puts(b, names[i]);
  }
  td_buf_putc(b, '}');
}

static void join_aliases(td_buf *b, const ldr_tensor_info *t, int n) {
  td_buf_putc(b, '{');
  for (int i = 0; i < n; i++) {
    if (i) td_buf_putc(b, ',');
    td_buf_puts(b, t[i].alias);
  }
  td_buf_putc(b, '}');
}

static td_code finish_message(td_buf *b, td_code code, td_err *err) {
  td_err_set(err, code, "%s", b->oom ? "out of memory formatting an error" : b->data);
  td_buf_free(b);
  return code;
}

/* TF's message for an alias the signature lacks: head, the alias, tail,
 * then the set of aliases it has, INVALID_ARGUMENT. */
static td_code alias_missing(const char *head, const char *alias, const char *tail,
                             const ldr_tensor_info *t, int n, td_err *err) {
  td_buf b;
  td_buf_init(&b);
  td_buf_puts(&b, head);
  td_buf_puts(&b, alias);
  td_buf_puts(&b, tail);
  join_aliases(&b, t, n);
  td_buf_puts(&b, ".");
  return finish_message(&b, TD_INVALID_ARGUMENT, err);
}

/* TF's "input size does not match signature" message. */
static td_code size_mismatch(const Tensorflow__Serving__PredictRequest *r, const ldr_signature *sig,
                             size_t n_sent, td_err *err) {
  const char **sent = calloc(n_sent + 1, sizeof *sent);
  const char **extra = calloc(n_sent + 1, sizeof *extra);
  const char **missing = calloc((size_t)sig->n_inputs + 1, sizeof *missing);
  if (!sent || !extra || !missing) {
    free(sent), free(extra), free(missing);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  size_t k = 0, n_extra = 0, n_missing = 0;
  for (size_t j = 0; j < r->n_inputs; j++)
    if (last_of_key(r, j)) sent[k++] = r->inputs[j]->key;
  qsort(sent, k, sizeof *sent, cmp_str);
  for (size_t j = 0; j < k; j++)
    if (ldr_signature_input(sig, sent[j]) < 0) extra[n_extra++] = sent[j];
  for (int i = 0; i < sig->n_inputs; i++) {
    bool found = false;
    for (size_t j = 0; j < k && !found; j++) found = !strcmp(sent[j], sig->inputs[i].alias);
    if (!found) missing[n_missing++] = sig->inputs[i].alias;
  }
  td_buf b;
  td_buf_init(&b);
  td_buf_printf(&b, "input size does not match signature: %zu!=%d len(", k, sig->n_inputs);
  join_set(&b, sent, k);
  td_buf_puts(&b, ") != len(");
  join_aliases(&b, sig->inputs, sig->n_inputs);
  td_buf_puts(&b, "). Sent extra: ");
  join_set(&b, extra, n_extra);
  td_buf_puts(&b, ". Missing but required: ");
  join_set(&b, missing, n_missing);
  td_buf_puts(&b, ".");
  free(sent), free(extra), free(missing);
  return finish_message(&b, TD_INVALID_ARGUMENT, err);
}

/* Fills inputs[i] for every signature input from the request's map. On
 * failure the filled tensors stay in `inputs` (srv_call_end releases them). */
static td_code decode_inputs(const Tensorflow__Serving__PredictRequest *r, const ldr_signature *sig,
                             size_t max_bytes, eng_tensor *inputs, td_err *err) {
  size_t distinct = 0;
  for (size_t j = 0; j < r->n_inputs; j++) distinct += last_of_key(r, j);
  if (distinct != (size_t)sig->n_inputs) return size_mismatch(r, sig, distinct, err);
  int arg = 0; /* the feed's position, as TensorFlow numbers call-frame args */
  size_t budget = max_bytes ? max_bytes : SIZE_MAX;
  for (size_t j = 0; j < r->n_inputs; j++) {
    if (!last_of_key(r, j)) continue;
    const char *alias = r->inputs[j]->key;
    int i = ldr_signature_input(sig, alias);
    if (i < 0)
      return alias_missing("input tensor alias not found in signature: ", alias,
                           ". Inputs expected to be in the set ", sig->inputs, sig->n_inputs, err);
    Tensorflow__TensorProto empty;
    const Tensorflow__TensorProto *tp = r->inputs[j]->value;
    if (!tp) {
      tensorflow__tensor_proto__init(&empty);
      tp = &empty;
    }
    td_err why;
    /* TensorFlow's Tensor::FromProto refuses what cannot be a tensor (no
     * dtype, a _REF dtype, bad shape, value counts that do not fit); tensord
     * also answers UNIMPLEMENTED for the types its engine does not store.
     * All of it, the dtype against the signature, and the request's byte
     * budget are checked before anything is allocated. The shape is left
     * to the run, as in TensorFlow (a batching error comes first): what
     * the bytes can hold already bounds the allocation. */
    ldr_proto_info info;
    td_code rc = tp->dtype == TENSORFLOW__DATA_TYPE__DT_INVALID
                     ? TD_INVALID_ARGUMENT
                     : ldr_proto_tensor_peek(tp, &info, &why);
    if (!rc && info.is_ref) rc = TD_INVALID_ARGUMENT;
    if (rc == TD_INVALID_ARGUMENT)
      return td_err_set(err, TD_INVALID_ARGUMENT, "tensor parsing error: %s", alias);
    if (rc) return td_err_set(err, rc, "input '%s': %s", alias, why.msg);
    /* The dtypes as declared and sent: a half input is not a float one,
     * even though the engine widens both to float32. */
    const ldr_tensor_info *ti = &sig->inputs[i];
    eng_dtype want = eng_dtype_from_tf(ti->tf_dtype, NULL), sent = info.dtype;
    if (want != ENG_DT_INVALID && sent != want)
      return td_err_set(err, TD_INVALID_ARGUMENT, "Expects arg[%d] to be %s but %s is provided",
                        arg, eng_dtype_name(want), eng_dtype_name(sent));
    rc = ldr_proto_tensor_bounded(tp, budget, &inputs[i], &why);
    if (rc == TD_INVALID_ARGUMENT)
      return td_err_set(err, TD_INVALID_ARGUMENT, "tensor parsing error: %s", alias);
    if (rc) return td_err_set(err, rc, "input '%s': %s", alias, why.msg);
    budget -= info.bytes < budget ? info.bytes : budget;
    arg++;
  }
  return TD_OK;
}

static td_code check_output_filter(const Tensorflow__Serving__PredictRequest *r,
                                   const ldr_signature *sig, bool *keep, td_err *err) {
  if (!r->n_output_filter) {
    for (int i = 0; i < sig->n_outputs; i++) keep[i] = true;
    return TD_OK;
  }
  for (size_t j = 0; j < r->n_output_filter; j++) {
    const char *alias = r->output_filter[j];
    int i = ldr_signature_output(sig, alias);
    if (i < 0)
      return alias_missing("output tensor alias not found in signature: ", alias,
                           " Outputs expected to be in the set ", sig->outputs, sig->n_outputs,
                           err);
    if (keep[i])
      return td_err_set(err, TD_INVALID_ARGUMENT, "duplicate output tensor alias: %s", alias);
    keep[i] = true;
  }
  return TD_OK;
}

/* On an engine worker: encode the kept outputs and answer. */
static void predict_done(srv_call *call) {
  srv_gcall *c = call->user;
  if (call->task.code) {
    srv_gcall_fail(c, &call->task.err);
    return;
  }
  const ldr_signature *sig = call->sig;
  predict_state *ps = c->state;
  size_t n = 0;
  for (int i = 0; i < sig->n_outputs; i++) n += ps->keep[i];
  /* The common few outputs need no allocation. */
  enum { FEW = 4 };
  srv_tensorproto tps_few[FEW];
  Tensorflow__Serving__PredictResponse__OutputsEntry ents_few[FEW], *entp_few[FEW];
  bool few = n <= FEW;
  srv_tensorproto *tps = few ? tps_few : calloc(n, sizeof *tps);
  Tensorflow__Serving__PredictResponse__OutputsEntry *ents =
      few ? ents_few : calloc(n, sizeof *ents);
  Tensorflow__Serving__PredictResponse__OutputsEntry **entp =
      few ? entp_few : calloc(n, sizeof *entp);
  if (!tps || !ents || !entp) {
    free(tps), free(ents), free(entp);
    srv_gcall_failf(c, TD_RESOURCE_EXHAUSTED, "out of memory encoding the response");
    return;
  }
  td_err err;
  td_code rc = TD_OK;
  size_t k = 0;
  for (int i = 0; i < sig->n_outputs && !rc; i++) {
    if (!ps->keep[i]) continue;
    rc = srv_tensorproto_encode(&call->outputs[i], c->cfg->tensor_content, &tps[k], &err);
    if (rc) {
      td_err_prefix(&err, "output '%s'", sig->outputs[i].alias);
      break;
    }
    tensorflow__serving__predict_response__outputs_entry__init(&ents[k]);
    ents[k].key = sig->outputs[i].alias;
    ents[k].value = &tps[k].proto;
    entp[k] = &ents[k];
    k++;
  }
  if (rc) {
    srv_gcall_fail(c, &err);
  } else {
    Tensorflow__Serving__PredictResponse resp;
    tensorflow__serving__predict_response__init(&resp);
    resp.n_outputs = k;
    resp.outputs = entp;
    srv_gspec spec;
    srv_gspec_make(&spec, ps->model_name, call->version, sig->key);
    resp.model_spec = &spec.spec;
    srv_reqlog_predict(call);
    srv_gcall_reply(c, &resp.base); /* packs before returning; c is gone after */
  }
  for (size_t j = 0; j < k; j++) srv_tensorproto_clear(&tps[j]);
  if (!few) free(tps), free(ents), free(entp);
}

void srv_grpc_predict(srv_gcall *c, const uint8_t *req, size_t len) {
  Tensorflow__Serving__PredictRequest *r = (Tensorflow__Serving__PredictRequest *)srv_gcall_unpack(
      c, &tensorflow__serving__predict_request__descriptor, req, len);
  if (!r) return;
  td_err err;
  td_code rc = TD_OK;
  if (!r->model_spec) {
    rc = td_err_set(&err, TD_INVALID_ARGUMENT, "Missing ModelSpec");
  } else {
    srv_model_spec spec;
    srv_gspec_from_proto(r->model_spec, &spec);
    rc = srv_call_begin(&c->call, c->api, &spec, &err);
  }
  predict_state *ps = NULL;
  if (!rc) {
    const ldr_signature *sig = c->call.sig;
    ps = predict_state_new(r->model_spec->name, sig->n_outputs);
    if (ps) {
      c->state = ps;
      c->cleanup = predict_cleanup;
    } else {
      rc = td_err_set(&err, TD_RESOURCE_EXHAUSTED, "out of memory");
    }
    if (!rc) rc = decode_inputs(r, sig, c->api->max_input_bytes, c->call.inputs, &err);
    if (!rc) rc = check_output_filter(r, sig, ps->keep, &err);
  }
  srv_gcall_run(c, &r->base, rc, &err, predict_done);
}

/* --- GetModelMetadata ----------------------------------------------------- */

/* A bump allocator for the many small structs of a SignatureDefMap. */
typedef struct arena {
  struct arena_block *head;
  bool oom;
} arena;
typedef struct arena_block {
  struct arena_block *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
} arena_block;

static void *arena_alloc(arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (!a->head || a->head->cap - a->head->used < n) {
    size_t cap = n > 16384 ? n : 16384;
    arena_block *b = malloc(sizeof *b + cap);
    if (!b) {
      a->oom = true;
      return NULL;
    }
    b->next = a->head, b->used = 0, b->cap = cap;
    a->head = b;
  }
  void *p = a->head->data + a->head->used;
  a->head->used += n;
  memset(p, 0, n);
  return p;
}

static void arena_free(arena *a) {
  while (a->head) {
    arena_block *next = a->head->next;
    free(a->head);
    a->head = next;
  }
}

/* The TensorInfo as the SavedModel declares it: the DataType number (refs
 * included), the shape only when there is one, dim names when any. */
static Tensorflow__TensorInfo *tensor_info(arena *a, const ldr_tensor_info *t) {
  Tensorflow__TensorInfo *ti = arena_alloc(a, sizeof *ti);
  if (!ti) return NULL;
  tensorflow__tensor_info__init(ti);
  ti->encoding_case = TENSORFLOW__TENSOR_INFO__ENCODING_NAME;
  ti->name = t->name;
  ti->dtype = (Tensorflow__DataType)t->tf_dtype;
  if (!t->has_shape) return ti;
  Tensorflow__TensorShapeProto *sp = arena_alloc(a, sizeof *sp);
  if (!sp) return NULL;
  tensorflow__tensor_shape_proto__init(sp);
  if (t->shape.rank < 0) {
    sp->unknown_rank = true;
  } else {
    sp->n_dim = (size_t)t->shape.rank;
    sp->dim = arena_alloc(a, (size_t)(t->shape.rank + 1) * sizeof *sp->dim);
    if (!sp->dim) return NULL;
    for (int d = 0; d < t->shape.rank; d++) {
      Tensorflow__TensorShapeProto__Dim *dim = arena_alloc(a, sizeof *dim);
      if (!dim) return NULL;
      tensorflow__tensor_shape_proto__dim__init(dim);
      dim->size = t->shape.dim[d];
      if (t->dim_names) dim->name = t->dim_names[d];
      sp->dim[d] = dim;
    }
  }
  ti->tensor_shape = sp;
  return ti;
}

/* InputsEntry and OutputsEntry have the same layout; build either. */
static Tensorflow__SignatureDef__InputsEntry **info_map(arena *a, const ldr_tensor_info *t, int n,
                                                        const ProtobufCMessageDescriptor *entry) {
  Tensorflow__SignatureDef__InputsEntry **v = arena_alloc(a, (size_t)(n + 1) * sizeof *v);
  if (!v) return NULL;
  for (int i = 0; i < n; i++) {
    Tensorflow__SignatureDef__InputsEntry *e = arena_alloc(a, sizeof *e);
    if (!e) return NULL;
    protobuf_c_message_init(entry, e);
    e->key = t[i].alias;
    if (!(e->value = tensor_info(a, &t[i]))) return NULL;
    v[i] = e;
  }
  return v;
}

/* Packs every signature of the servable as a SignatureDefMap into *out
 * (malloc'ed). */
static td_code pack_signature_defs(const ldr_servable *sv, ProtobufCBinaryData *out, td_err *err) {
  arena a = {0};
  int n = ldr_servable_signature_count(sv);
  Tensorflow__Serving__SignatureDefMap map;
  tensorflow__serving__signature_def_map__init(&map);
  map.n_signature_def = (size_t)n;
  map.signature_def = arena_alloc(&a, (size_t)(n + 1) * sizeof *map.signature_def);
  for (int i = 0; i < n && !a.oom; i++) {
    const ldr_signature *s = ldr_servable_signature_at(sv, i);
    Tensorflow__Serving__SignatureDefMap__SignatureDefEntry *e = arena_alloc(&a, sizeof *e);
    Tensorflow__SignatureDef *def = arena_alloc(&a, sizeof *def);
    if (!e || !def) break;
    tensorflow__serving__signature_def_map__signature_def_entry__init(e);
    tensorflow__signature_def__init(def);
    def->method_name = s->method_name;
    def->n_inputs = (size_t)s->n_inputs;
    def->inputs =
        info_map(&a, s->inputs, s->n_inputs, &tensorflow__signature_def__inputs_entry__descriptor);
    def->n_outputs = (size_t)s->n_outputs;
    def->outputs = (Tensorflow__SignatureDef__OutputsEntry **)info_map(
        &a, s->outputs, s->n_outputs, &tensorflow__signature_def__outputs_entry__descriptor);
    e->key = s->key;
    e->value = def;
    map.signature_def[i] = e;
  }
  td_code rc = TD_OK;
  if (a.oom) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory building the metadata");
  } else {
    out->len = tensorflow__serving__signature_def_map__get_packed_size(&map);
    out->data = malloc(out->len + 1);
    if (out->data)
      tensorflow__serving__signature_def_map__pack(&map, out->data);
    else
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory packing the metadata");
  }
  arena_free(&a);
  return rc;
}

void srv_grpc_get_model_metadata(srv_gcall *c, const uint8_t *req, size_t len) {
  Tensorflow__Serving__GetModelMetadataRequest *r =
      (Tensorflow__Serving__GetModelMetadataRequest *)srv_gcall_unpack(
          c, &tensorflow__serving__get_model_metadata_request__descriptor, req, len);
  if (!r) return;
  td_err err;
  td_code rc = TD_OK;
  ldr_servable *sv = NULL;
  char *name = NULL;
  if (!r->model_spec)
    rc = td_err_set(&err, TD_INVALID_ARGUMENT, "Missing ModelSpec");
  else if (!r->n_metadata_field)
    rc = td_err_set(&err, TD_INVALID_ARGUMENT,
                    "GetModelMetadataRequest must specify at least one metadata_field");
  /* Fields are handled in request order, as TF Serving does: an unknown
   * field after "signature_def" is reported only once the model resolved. */
  for (size_t i = 0; !rc && i < r->n_metadata_field; i++) {
    if (strcmp(r->metadata_field[i], SIGNATURE_DEF_FIELD)) {
      rc = td_err_set(&err, TD_INVALID_ARGUMENT, "Metadata field %s is not supported",
                      r->metadata_field[i]);
    } else if (!sv) {
      srv_model_spec spec;
      srv_gspec_from_proto(r->model_spec, &spec);
      int64_t version = spec.has_version ? spec.version : -1;
      if (!spec.name || !*spec.name)
        rc = td_err_set(&err, TD_INVALID_ARGUMENT, "ModelSpec has no name specified.");
      if (!rc && spec.label)
        rc = ldr_registry_resolve_label(c->api->registry, spec.name, spec.label, &version, &err);
      if (!rc) rc = ldr_registry_acquire(c->api->registry, spec.name, version, &sv, &err);
      if (!rc && !(name = strdup(spec.name)))
        rc = td_err_set(&err, TD_RESOURCE_EXHAUSTED, "out of memory");
    }
  }
  srv_gcall_free(c, &r->base);
  ProtobufCBinaryData packed = {0, NULL};
  if (!rc) rc = pack_signature_defs(sv, &packed, &err);
  if (rc) {
    srv_gcall_fail(c, &err);
  } else {
    Google__Protobuf__Any any;
    google__protobuf__any__init(&any);
    any.type_url = SIGNATURE_DEF_MAP_URL;
    any.value = packed;
    Tensorflow__Serving__GetModelMetadataResponse__MetadataEntry ent;
    tensorflow__serving__get_model_metadata_response__metadata_entry__init(&ent);
    ent.key = SIGNATURE_DEF_FIELD;
    ent.value = &any;
    Tensorflow__Serving__GetModelMetadataResponse__MetadataEntry *entp = &ent;
    Tensorflow__Serving__GetModelMetadataResponse resp;
    tensorflow__serving__get_model_metadata_response__init(&resp);
    srv_gspec spec;
    srv_gspec_make(&spec, name, ldr_servable_version(sv), NULL);
    resp.model_spec = &spec.spec;
    resp.n_metadata = 1;
    resp.metadata = &entp;
    srv_gcall_reply(c, &resp.base);
  }
  free(packed.data);
  free(name);
  ldr_servable_unref(sv);
}
