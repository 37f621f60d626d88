/* JSON <-> tf.Example for :classify / :regress (contract in
 * srv_jsonexample.h). Each JSON object is turned into protobuf-c structs
 * built on the stack and in short-lived arrays, packed, and freed at once;
 * all serialized examples share one storage block. */
#include "srv_jsonexample.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/core/example/example.pb-c.h"

/* "<before><value><after>", the shape of TF's FormatError messages. */
static td_code value_error(td_err *err, const char *before, const cJSON *v, const char *after) {
  td_buf b;
  td_buf_init(&b);
  td_buf_puts(&b, before);
  srv_json_append_value(&b, v);
  td_buf_puts(&b, after);
  td_err_set(err, TD_INVALID_ARGUMENT, "%s", b.data && !b.oom ? b.data : after);
  td_buf_free(&b);
  return TD_INVALID_ARGUMENT;
}

typedef struct feat {
  Tensorflow__Features__FeatureEntry entry;
  Tensorflow__Feature feature;
  Tensorflow__BytesList bl;
  Tensorflow__FloatList fl;
  Tensorflow__Int64List il;
  size_t cap; /* values the feature may hold */
} feat;

static void feat_free(feat *f) {
  for (size_t i = 0; i < f->bl.n_value; i++) free(f->bl.value[i].data);
  free(f->bl.value);
  free(f->fl.value);
  free(f->il.value);
}

static const char *kind_name(const feat *f) {
  switch (f->feature.kind_case) {
    case TENSORFLOW__FEATURE__KIND_BYTES_LIST: return "bytes";
    case TENSORFLOW__FEATURE__KIND_FLOAT_LIST: return "float";
    case TENSORFLOW__FEATURE__KIND_INT64_LIST: return "int64";
    default: return "UNKNOWN";
  }
}

/* Fixes the feature's kind on its first value; false when it differs. */
static bool want_kind(feat *f, Tensorflow__Feature__KindCase k, td_err *err, const char *name,
                      td_code *rc) {
  if (f->feature.kind_case == TENSORFLOW__FEATURE__KIND__NOT_SET) {
    size_t sz = k == TENSORFLOW__FEATURE__KIND_BYTES_LIST ? sizeof(ProtobufCBinaryData)
                : k == TENSORFLOW__FEATURE__KIND_FLOAT_LIST ? sizeof(float)
                                                            : sizeof(int64_t);
    void *p = malloc(f->cap * sz + 1);
    if (!p) {
      *rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      return false;
    }
    f->feature.kind_case = k;
    if (k == TENSORFLOW__FEATURE__KIND_BYTES_LIST) {
      f->bl.value = p;
      f->feature.bytes_list = &f->bl;
    } else if (k == TENSORFLOW__FEATURE__KIND_FLOAT_LIST) {
      f->fl.value = p;
      f->feature.float_list = &f->fl;
    } else {
      f->il.value = p;
      f->feature.int64_list = &f->il;
    }
    return true;
  }
  if (f->feature.kind_case == k) return true;
  *rc = td_err_set(err, TD_INVALID_ARGUMENT,
                   "Unexpected element type in feature: %s expecting type: %s", name,
                   kind_name(f));
  return false;
}

static td_code add_bytes(feat *f, const char *data, size_t len, td_err *err) {
  char *copy = malloc(len + 1);
  if (!copy) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (len) memcpy(copy, data, len);
  f->bl.value[f->bl.n_value++] = (ProtobufCBinaryData){.len = len, .data = (uint8_t *)copy};
  return TD_OK;
}

/* TF's AddValueToFeature. */
static td_code add_value(feat *f, const cJSON *v, const char *name, td_err *err) {
  td_code rc = TD_OK;
  if (cJSON_IsNull(v) || cJSON_IsArray(v) || (cJSON_IsObject(v) && !srv_json_is_b64_object(v))) {
    td_buf b;
    td_buf_init(&b);
    td_buf_printf(&b, "Feature: %s has element with unexpected JSON type: %s", name,
                  srv_json_type_name(v));
    td_err_set(err, TD_INVALID_ARGUMENT, "%s", b.data && !b.oom ? b.data : "bad feature");
    td_buf_free(&b);
    return TD_INVALID_ARGUMENT;
  }
  if (cJSON_IsBool(v)) {
    if (!want_kind(f, TENSORFLOW__FEATURE__KIND_INT64_LIST, err, name, &rc)) return rc;
    f->il.value[f->il.n_value++] = cJSON_IsTrue(v) ? 1 : 0;
    return TD_OK;
  }
  if (cJSON_IsObject(v)) { /* {"b64": "..."} */
    if (!want_kind(f, TENSORFLOW__FEATURE__KIND_BYTES_LIST, err, name, &rc)) return rc;
    const cJSON *s = v->child;
    size_t n = srv_json_string_len(s), dlen = 0;
    if (!srv_json_b64_decode(s->valuestring, n, NULL, &dlen))
      return td_err_set(err, TD_INVALID_ARGUMENT, "Unable to base64 decode");
    char *dst = malloc(dlen + 1);
    if (!dst) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    srv_json_b64_decode(s->valuestring, n, dst, &dlen);
    f->bl.value[f->bl.n_value++] = (ProtobufCBinaryData){.len = dlen, .data = (uint8_t *)dst};
    return TD_OK;
  }
  if (cJSON_IsString(v)) {
    if (!want_kind(f, TENSORFLOW__FEATURE__KIND_BYTES_LIST, err, name, &rc)) return rc;
    return add_bytes(f, v->valuestring, srv_json_string_len(v), err);
  }
  /* A number. */
  int64_t i = 0;
  uint64_t u = 0;
  srv_json_numkind k = srv_json_number(v, &i, &u);
  if (k == SRV_JSON_NUM_DOUBLE) {
    if (!want_kind(f, TENSORFLOW__FEATURE__KIND_FLOAT_LIST, err, name, &rc)) return rc;
    double d = v->valuedouble;
    if (isfinite(d) && (d > FLT_MAX || d < -FLT_MAX))
      return value_error(err, "Cannot convert JSON value: ", v,
                         " to float without loss of precision.");
    f->fl.value[f->fl.n_value++] = (float)d;
    return TD_OK;
  }
  if (!want_kind(f, TENSORFLOW__FEATURE__KIND_INT64_LIST, err, name, &rc)) return rc;
  if (k == SRV_JSON_NUM_UINT64)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Feature: %s has uint64 element. Only int64 is supported.", name);
  f->il.value[f->il.n_value++] = i;
  return TD_OK;
}

/* True when a later member of the same object repeats this key. */
static bool shadowed(const cJSON *m) {
  for (const cJSON *o = m->next; o; o = o->next)
    if (!strcmp(o->string, m->string)) return true;
  return false;
}

/* TF's MakeExampleFromJsonObject, then pack; appends the bytes to *b. */
static td_code make_example(const cJSON *obj, td_buf *b, td_err *err) {
  if (!cJSON_IsObject(obj))
    return td_err_set(err, TD_INVALID_ARGUMENT, "Example must be JSON object but got JSON %s",
                      srv_json_type_name(obj));
  size_t n = 0;
  for (const cJSON *m = obj->child; m; m = m->next) n++;
  feat *fs = calloc(n + 1, sizeof *fs);
  Tensorflow__Features__FeatureEntry **entries = calloc(n + 1, sizeof *entries);
  td_code rc = TD_OK;
  if (!fs || !entries) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  size_t used = 0;
  for (const cJSON *m = obj->child; m && !rc; m = m->next) {
    if (shadowed(m)) continue;
    feat *f = &fs[used];
    tensorflow__features__feature_entry__init(&f->entry);
    tensorflow__feature__init(&f->feature);
    tensorflow__bytes_list__init(&f->bl);
    tensorflow__float_list__init(&f->fl);
    tensorflow__int64_list__init(&f->il);
    f->entry.key = m->string;
    f->entry.value = &f->feature;
    entries[used++] = &f->entry;
    if (cJSON_IsArray(m)) {
      for (const cJSON *v = m->child; v; v = v->next) f->cap++;
      for (const cJSON *v = m->child; v && !rc; v = v->next) rc = add_value(f, v, m->string, err);
    } else {
      f->cap = 1;
      rc = add_value(f, m, m->string, err);
    }
  }
  if (!rc) {
    Tensorflow__Features features = TENSORFLOW__FEATURES__INIT;
    features.n_feature = used;
    features.feature = entries;
    Tensorflow__Example ex = TENSORFLOW__EXAMPLE__INIT;
    ex.features = used ? &features : NULL; /* TF leaves {} without a Features message */
    size_t size = tensorflow__example__get_packed_size(&ex);
    if (!td_buf_reserve(b, size + 1)) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      tensorflow__example__pack(&ex, (uint8_t *)b->data + b->len);
      b->len += size;
    }
  }
  for (size_t i = 0; fs && i < used; i++) feat_free(&fs[i]);
  free(fs);
  free(entries);
  return rc;
}

td_code srv_json_decode_examples(const srv_json_request *r, srv_json_examples *out, td_err *err) {
  const cJSON *root = r->root;
  const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(root, "context");
  const cJSON *exs = cJSON_GetObjectItemCaseSensitive(root, "examples");
  td_buf b;
  td_buf_init(&b);
  size_t ctx_len = 0;
  td_code rc = TD_OK;
  if (ctx) {
    rc = make_example(ctx, &b, err);
    ctx_len = b.len;
  }
  if (!rc && !exs)
    rc = value_error(err, "JSON Value: ", root,
                     " When method is classify, key 'examples' is expected and was not found");
  else if (!rc && !cJSON_IsArray(exs))
    rc = value_error(err, "JSON Value: ", root, " Expecting 'examples' value to be an list/array");
  else if (!rc && !exs->child)
    rc = value_error(err, "JSON Value: ", root, " 'examples' value is an empty array");
  int n = 0;
  size_t *ends = NULL;
  if (!rc) {
    for (const cJSON *e = exs->child; e; e = e->next) n++;
    ends = malloc((size_t)n * sizeof *ends);
    if (!ends) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  int i = 0;
  for (const cJSON *e = rc ? NULL : exs->child; e && !rc; e = e->next, i++) {
    rc = make_example(e, &b, err);
    ends[i] = b.len;
  }
  eng_str *list = NULL;
  if (!rc && !(list = malloc((size_t)n * sizeof *list)))
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (!rc && b.oom) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (rc) {
    free(ends);
    free(list);
    td_buf_free(&b);
    return rc;
  }
  size_t len = 0;
  char *storage = td_buf_take(&b, &len);
  if (!storage) storage = calloc(1, 1); /* every example empty: still own a block */
  size_t at = ctx_len;
  for (int k = 0; k < n; k++) {
    list[k] = (eng_str){.data = storage + at, .len = ends[k] - at};
    at = ends[k];
  }
  free(ends);
  *out = (srv_json_examples){.n = n, .examples = list,
                             .context = {.data = storage, .len = ctx_len},
                             .has_context = ctx != NULL, .storage = storage};
  return TD_OK;
}

void srv_json_examples_free(srv_json_examples *e) {
  if (!e) return;
  free(e->examples);
  free(e->storage);
  memset(e, 0, sizeof *e);
}

void srv_json_encode_classify(const srv_classify_result *r, td_buf *out) {
  srv_json_writer w;
  srv_json_writer_init(&w, out);
  srv_json_writer_begin_object(&w);
  srv_json_writer_key(&w, "results", 7);
  srv_json_writer_begin_array(&w);
  for (int i = 0; i < r->n_examples; i++) {
    w.single_line = true;
    srv_json_writer_begin_array(&w);
    for (int c = 0; c < r->n_classes; c++) {
      const srv_class *cl = &r->classes[(size_t)i * (size_t)r->n_classes + (size_t)c];
      srv_json_writer_begin_array(&w);
      srv_json_writer_string(&w, cl->label, cl->label_len);
      srv_json_writer_float(&w, cl->score);
      srv_json_writer_end_array(&w);
    }
    srv_json_writer_end_array(&w);
    w.single_line = false;
  }
  srv_json_writer_end_array(&w);
  srv_json_writer_end_object(&w);
}

void srv_json_encode_regress(const float *values, int n, td_buf *out) {
  srv_json_writer w;
  srv_json_writer_init(&w, out);
  srv_json_writer_begin_object(&w);
  srv_json_writer_key(&w, "results", 7);
  w.single_line = true;
  srv_json_writer_begin_array(&w);
  for (int i = 0; i < n; i++) srv_json_writer_float(&w, values[i]);
  srv_json_writer_end_array(&w);
  srv_json_writer_end_object(&w);
}
