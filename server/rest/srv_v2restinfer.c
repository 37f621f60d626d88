/* The v2 REST inference codec: JSON (and binary-extension) request bodies
 * into the call's input tensors, finished calls into JSON (and binary)
 * replies. Values are checked against the datatype as they are copied:
 * integers must be integer literals in range, floats take any number,
 * BOOL takes true/false, BYTES takes strings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_json.h"
#include "srv_v2.h"
#include "srv_v2rest.h"

struct srv_v2_infer {
  char *model;
  char *id; /* NULL when the request had none */
  int n_out;
  int *out;     /* signature indices of the outputs to return */
  bool *binary; /* per returned output */
};

void srv_v2rest_infer_free(srv_v2_infer *s) {
  if (!s) return;
  free(s->model);
  free(s->id);
  free(s->out);
  free(s->binary);
  free(s);
}

/* --- JSON data into tensors ---------------------------------------------- */

typedef struct walk {
  eng_tensor *t;
  const char *name;
  int64_t n, i; /* elements expected, written */
  eng_str *strs;
  td_err *err;
} walk;

static td_code bad_value(walk *w, const cJSON *v, const char *why) {
  char text[96];
  td_buf b;
  td_buf_init(&b);
  srv_json_append_value(&b, v);
  snprintf(text, sizeof text, "%.80s%s", b.data ? b.data : "?", b.len > 80 ? "..." : "");
  td_buf_free(&b);
  return td_err_set(w->err, TD_INVALID_ARGUMENT, "input '%s': element %lld (%s) %s", w->name,
                    (long long)w->i, text, why);
}

static td_code put_int(walk *w, const cJSON *v, int64_t lo, uint64_t hi) {
  int64_t i = 0;
  uint64_t u = 0;
  srv_json_numkind k = cJSON_IsNumber(v) ? srv_json_number(v, &i, &u) : SRV_JSON_NUM_DOUBLE;
  if (!cJSON_IsNumber(v) || k == SRV_JSON_NUM_DOUBLE) return bad_value(w, v, "is not an integer");
  bool ok = k == SRV_JSON_NUM_UINT64 ? u <= hi : i >= lo && (i < 0 || (uint64_t)i <= hi);
  if (!ok) return bad_value(w, v, "is out of range for the datatype");
  void *d = eng_tensor_data(w->t);
  int64_t j = w->i;
  switch (w->t->dtype) {
    case ENG_DT_INT8:
      ((int8_t *)d)[j] = (int8_t)i;
      break;
    case ENG_DT_INT16:
      ((int16_t *)d)[j] = (int16_t)i;
      break;
    case ENG_DT_INT32:
      ((int32_t *)d)[j] = (int32_t)i;
      break;
    case ENG_DT_INT64:
      ((int64_t *)d)[j] = i;
      break;
    case ENG_DT_UINT8:
      ((uint8_t *)d)[j] = (uint8_t)i;
      break;
    case ENG_DT_UINT16:
      ((uint16_t *)d)[j] = (uint16_t)i;
      break;
    case ENG_DT_UINT32:
      ((uint32_t *)d)[j] = (uint32_t)i;
      break;
    default:
      ((uint64_t *)d)[j] = k == SRV_JSON_NUM_UINT64 ? u : (uint64_t)i;
      break;
  }
  return TD_OK;
}

static td_code put(walk *w, const cJSON *v) {
  if (w->i >= w->n)
    return td_err_set(w->err, TD_INVALID_ARGUMENT,
                      "input '%s': more data elements than its shape holds (%lld)", w->name,
                      (long long)w->n);
  void *d = w->t->buf ? eng_tensor_data(w->t) : NULL; /* BYTES: not allocated yet */
  td_code rc = TD_OK;
  switch (w->t->dtype) {
    case ENG_DT_FLOAT:
    case ENG_DT_DOUBLE: {
      if (!cJSON_IsNumber(v)) return bad_value(w, v, "is not a number");
      int64_t i;
      uint64_t u;
      srv_json_numkind k = srv_json_number(v, &i, &u);
      double x = k == SRV_JSON_NUM_INT64    ? (double)i
                 : k == SRV_JSON_NUM_UINT64 ? (double)u
                                            : v->valuedouble;
      if (w->t->dtype == ENG_DT_FLOAT)
        ((float *)d)[w->i] = (float)x;
      else
        ((double *)d)[w->i] = x;
      break;
    }
    case ENG_DT_BOOL:
      if (!cJSON_IsBool(v)) return bad_value(w, v, "is not true or false");
      ((bool *)d)[w->i] = cJSON_IsTrue(v);
      break;
    case ENG_DT_STRING:
      if (!cJSON_IsString(v)) return bad_value(w, v, "is not a string");
      w->strs[w->i] = (eng_str){v->valuestring, srv_json_string_len(v)};
      break;
    case ENG_DT_INT8:
      rc = put_int(w, v, INT8_MIN, INT8_MAX);
      break;
    case ENG_DT_INT16:
      rc = put_int(w, v, INT16_MIN, INT16_MAX);
      break;
    case ENG_DT_INT32:
      rc = put_int(w, v, INT32_MIN, INT32_MAX);
      break;
    case ENG_DT_INT64:
      rc = put_int(w, v, INT64_MIN, INT64_MAX);
      break;
    case ENG_DT_UINT8:
      rc = put_int(w, v, 0, UINT8_MAX);
      break;
    case ENG_DT_UINT16:
      rc = put_int(w, v, 0, UINT16_MAX);
      break;
    case ENG_DT_UINT32:
      rc = put_int(w, v, 0, UINT32_MAX);
      break;
    case ENG_DT_UINT64:
      rc = put_int(w, v, 0, UINT64_MAX);
      break;
    default:
      return td_err_set(w->err, TD_INVALID_ARGUMENT,
                        "input '%s': %s data cannot be sent as JSON; use the binary extension",
                        w->name, srv_v2_datatype(w->t->dtype));
  }
  if (!rc) w->i++;
  return rc;
}

static td_code walk_data(walk *w, const cJSON *v, int depth) {
  if (!cJSON_IsArray(v)) return put(w, v);
  if (depth > ENG_MAX_RANK + 1)
    return td_err_set(w->err, TD_INVALID_ARGUMENT, "input '%s': data nested too deeply", w->name);
  for (const cJSON *e = v->child; e; e = e->next) {
    td_code rc = walk_data(w, e, depth + 1);
    if (rc) return rc;
  }
  return TD_OK;
}

/* --- the request ------------------------------------------------------- */

static const cJSON *member(const cJSON *o, const char *key) {
  return cJSON_GetObjectItemCaseSensitive(o, key);
}

/* A parameter's value, or NULL; parameters must be an object when present. */
static td_code param(const cJSON *o, const char *key, const char *where, const cJSON **out,
                     td_err *err) {
  *out = NULL;
  const cJSON *p = member(o, "parameters");
  if (!p) return TD_OK;
  if (!cJSON_IsObject(p))
    return td_err_set(err, TD_INVALID_ARGUMENT, "%s: 'parameters' must be an object", where);
  *out = member(p, key);
  return TD_OK;
}

static td_code decode_shape(const cJSON *in, const char *name, int64_t *dims, size_t *rank,
                            td_err *err) {
  const cJSON *s = member(in, "shape");
  if (!cJSON_IsArray(s))
    return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': 'shape' must be a list of integers",
                      name);
  size_t n = 0;
  for (const cJSON *d = s->child; d; d = d->next, n++) {
    int64_t i;
    uint64_t u;
    if (n >= ENG_MAX_RANK)
      return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': rank exceeds the limit of %d", name,
                        ENG_MAX_RANK);
    if (!cJSON_IsNumber(d) || srv_json_number(d, &i, &u) != SRV_JSON_NUM_INT64)
      return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': 'shape' must be a list of integers",
                        name);
    dims[n] = i;
  }
  *rank = n;
  return TD_OK;
}

static td_code decode_input(srv_call *c, const char *model, const cJSON *in, const char *bin,
                            size_t bin_len, size_t *bin_off, td_err *err) {
  if (!cJSON_IsObject(in))
    return td_err_set(err, TD_INVALID_ARGUMENT, "each entry of 'inputs' must be an object");
  const cJSON *name = member(in, "name"), *dt = member(in, "datatype");
  if (!cJSON_IsString(name))
    return td_err_set(err, TD_INVALID_ARGUMENT, "an input has no 'name' string");
  const char *nm = name->valuestring;
  if (!cJSON_IsString(dt))
    return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': 'datatype' must be a string", nm);
  int64_t dims[ENG_MAX_RANK];
  size_t rank = 0;
  td_code rc = decode_shape(in, nm, dims, &rank, err);
  int slot = -1;
  if (!rc) rc = srv_v2_bind(c, model, nm, dt->valuestring, dims, rank, &slot, err);
  if (rc) return rc;
  eng_shape shape = eng_shape_make((int)rank, dims);
  const cJSON *bsize;
  rc = param(in, "binary_data_size", nm, &bsize, err);
  if (rc) return rc;
  if (bsize) {
    int64_t n;
    uint64_t u;
    if (!cJSON_IsNumber(bsize) || srv_json_number(bsize, &n, &u) != SRV_JSON_NUM_INT64 || n < 0)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "input '%s': 'binary_data_size' must be a non-negative integer", nm);
    if (!bin || (uint64_t)n > bin_len - *bin_off)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "input '%s': binary_data_size %lld runs past the end of the body", nm,
                        (long long)n);
    if (member(in, "data"))
      return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s' has both 'data' and binary_data_size",
                        nm);
    rc = srv_v2_set_raw(c, slot, &shape, bin + *bin_off, (size_t)n, err);
    *bin_off += (size_t)n;
    return rc;
  }
  const cJSON *data = member(in, "data");
  if (!data) return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s' has no 'data'", nm);
  walk w = {.t = &c->inputs[slot], .name = nm, .n = eng_shape_numel(&shape), .err = err};
  eng_tensor strings_shape = c->inputs[slot];
  if (w.t->dtype == ENG_DT_STRING) {
    w.t = &strings_shape;
    if (!(w.strs = malloc(sizeof *w.strs * (size_t)(w.n + 1))))
      return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  rc = walk_data(&w, data, 0);
  if (!rc && w.i != w.n)
    rc = td_err_set(err, TD_INVALID_ARGUMENT,
                    "input '%s': %lld data elements given, its shape holds %lld", nm,
                    (long long)w.i, (long long)w.n);
  if (!rc && w.strs) rc = srv_v2_set_strings(c, slot, &shape, w.strs, (size_t)w.n, err);
  free(w.strs);
  return rc;
}

static td_code decode_outputs(const cJSON *root, const ldr_signature *sig, srv_v2_infer *s,
                              bool binary_default, td_err *err) {
  const cJSON *outs = member(root, "outputs");
  if (outs && !cJSON_IsArray(outs))
    return td_err_set(err, TD_INVALID_ARGUMENT, "'outputs' must be a list");
  int n = outs ? cJSON_GetArraySize(outs) : 0;
  s->n_out = n ? n : sig->n_outputs;
  s->out = calloc((size_t)s->n_out + 1, sizeof *s->out);
  s->binary = calloc((size_t)s->n_out + 1, sizeof *s->binary);
  if (!s->out || !s->binary) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (!n) {
    for (int k = 0; k < s->n_out; k++) s->out[k] = k, s->binary[k] = binary_default;
    return TD_OK;
  }
  int k = 0;
  for (const cJSON *o = outs->child; o; o = o->next, k++) {
    const cJSON *name = member(o, "name");
    if (!cJSON_IsObject(o) || !cJSON_IsString(name))
      return td_err_set(err, TD_INVALID_ARGUMENT, "each entry of 'outputs' needs a 'name' string");
    td_code rc = srv_v2_output(sig, s->model, name->valuestring, &s->out[k], err);
    for (int j = 0; !rc && j < k; j++)
      if (s->out[j] == s->out[k])
        rc = td_err_set(err, TD_INVALID_ARGUMENT, "output '%s' is requested twice",
                        name->valuestring);
    const cJSON *bd = NULL;
    if (!rc) rc = param(o, "binary_data", name->valuestring, &bd, err);
    if (!rc && bd && !cJSON_IsBool(bd))
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "output '%s': 'binary_data' must be true or false",
                      name->valuestring);
    if (rc) return rc;
    s->binary[k] = bd ? cJSON_IsTrue(bd) : binary_default;
  }
  return TD_OK;
}

td_code srv_v2rest_infer_begin(srv_call *c, srv_api *api, const srv_v2_route *r, const char *body,
                               size_t len, int64_t header_len, srv_v2_infer **state, td_err *err) {
  memset(c, 0, offsetof(srv_call, task.err)); /* srv_call_end is safe from here */
  *state = NULL;
  if (header_len > (int64_t)len)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Inference-Header-Content-Length %lld exceeds the body's %zu bytes",
                      (long long)header_len, len);
  size_t json_len = header_len >= 0 ? (size_t)header_len : len;
  const char *bin = header_len >= 0 ? body + json_len : NULL;
  size_t bin_len = len - json_len, bin_off = 0;
  cJSON *root = NULL;
  td_code rc = srv_json_parse(body, json_len, &root, err);
  if (rc) return rc;
  srv_v2_infer *s = calloc(1, sizeof *s);
  if (!s || !(s->model = strdup(r->name))) {
    free(s);
    srv_json_free(root);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  *state = s;
  const cJSON *sig_name = NULL, *bdo = NULL, *id = member(root, "id");
  const cJSON *inputs = member(root, "inputs");
  if (!cJSON_IsObject(root))
    rc = td_err_set(err, TD_INVALID_ARGUMENT, "the request body must be a JSON object");
  if (!rc) rc = param(root, SRV_V2_SIGNATURE_PARAM, "request", &sig_name, err);
  if (!rc) rc = param(root, "binary_data_output", "request", &bdo, err);
  if (!rc && sig_name && !cJSON_IsString(sig_name))
    rc = td_err_set(err, TD_INVALID_ARGUMENT, "parameter '%s' must be a string",
                    SRV_V2_SIGNATURE_PARAM);
  if (!rc && bdo && !cJSON_IsBool(bdo))
    rc = td_err_set(err, TD_INVALID_ARGUMENT,
                    "parameter 'binary_data_output' must be true or false");
  if (!rc && id && !cJSON_IsString(id))
    rc = td_err_set(err, TD_INVALID_ARGUMENT, "'id' must be a string");
  if (!rc && id && !(s->id = strdup(id->valuestring)))
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (!rc && !cJSON_IsArray(inputs))
    rc = td_err_set(err, TD_INVALID_ARGUMENT, "the request has no 'inputs' list");
  if (!rc)
    rc = srv_v2_begin(c, api, r->name, r->version, sig_name ? sig_name->valuestring : NULL, err);
  for (const cJSON *in = rc ? NULL : inputs->child; in && !rc; in = in->next)
    rc = decode_input(c, r->name, in, bin, bin_len, &bin_off, err);
  if (!rc) rc = srv_v2_check_complete(c, r->name, err);
  if (!rc && bin && bin_off != bin_len)
    rc = td_err_set(err, TD_INVALID_ARGUMENT,
                    "%zu bytes of binary data follow the JSON, the inputs use %zu", bin_len,
                    bin_off);
  if (!rc) rc = decode_outputs(root, c->sig, s, bdo && cJSON_IsTrue(bdo), err);
  srv_json_free(root);
  return rc;
}

/* --- the reply ----------------------------------------------------------- */

static void write_values(td_buf *b, const eng_tensor *t) {
  int64_t n = eng_tensor_numel(t);
  const void *d = eng_tensor_data(t);
  char num[64];
  td_buf_putc(b, '[');
  for (int64_t i = 0; i < n; i++) {
    if (i) td_buf_putc(b, ',');
    switch (t->dtype) {
      case ENG_DT_FLOAT: {
        float v = ((const float *)d)[i];
        if (!isfinite(v))
          td_buf_puts(b, isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
        else
          td_buf_append(b, num, (size_t)srv_json_format_float(v, num, sizeof num));
        break;
      }
      case ENG_DT_DOUBLE: {
        double v = ((const double *)d)[i];
        if (!isfinite(v))
          td_buf_puts(b, isnan(v) ? "NaN" : v > 0 ? "Infinity" : "-Infinity");
        else
          td_buf_append(b, num, (size_t)srv_json_format_double(v, num, sizeof num));
        break;
      }
      case ENG_DT_BOOL:
        td_buf_puts(b, ((const bool *)d)[i] ? "true" : "false");
        break;
      case ENG_DT_INT8:
        td_buf_printf(b, "%d", ((const int8_t *)d)[i]);
        break;
      case ENG_DT_INT16:
        td_buf_printf(b, "%d", ((const int16_t *)d)[i]);
        break;
      case ENG_DT_INT32:
        td_buf_printf(b, "%d", ((const int32_t *)d)[i]);
        break;
      case ENG_DT_INT64:
        td_buf_printf(b, "%lld", (long long)((const int64_t *)d)[i]);
        break;
      case ENG_DT_UINT8:
        td_buf_printf(b, "%u", ((const uint8_t *)d)[i]);
        break;
      case ENG_DT_UINT16:
        td_buf_printf(b, "%u", ((const uint16_t *)d)[i]);
        break;
      case ENG_DT_UINT32:
        td_buf_printf(b, "%u", ((const uint32_t *)d)[i]);
        break;
      case ENG_DT_UINT64:
        td_buf_printf(b, "%llu", (unsigned long long)((const uint64_t *)d)[i]);
        break;
      case ENG_DT_STRING: {
        const eng_str *s = eng_tensor_strs(t);
        srv_json_append_string(b, s[i].data, s[i].len);
        break;
      }
      default:
        break;
    }
  }
  td_buf_putc(b, ']');
}

void srv_v2rest_infer_encode(const srv_v2_infer *s, const srv_call *c, srv_v2_reply *out) {
  if (c->task.code) {
    srv_v2rest_error(&c->task.err, out);
    return;
  }
  const ldr_signature *sig = c->sig;
  td_buf json, bin, scratch;
  td_buf_init(&json);
  td_buf_init(&bin);
  td_buf_init(&scratch);
  td_buf_puts(&json, "{\"model_name\":");
  srv_json_append_string(&json, s->model, strlen(s->model));
  td_buf_printf(&json, ",\"model_version\":\"%lld\"", (long long)c->version);
  if (s->id) {
    td_buf_puts(&json, ",\"id\":");
    srv_json_append_string(&json, s->id, strlen(s->id));
  }
  td_buf_puts(&json, ",\"outputs\":[");
  bool any_binary = false;
  for (int k = 0; k < s->n_out; k++) {
    const eng_tensor *t = &c->outputs[s->out[k]];
    const char *alias = sig->outputs[s->out[k]].alias;
    const char *dt = srv_v2_datatype(t->dtype);
    bool binary = s->binary[k] || t->dtype == ENG_DT_HALF || t->dtype == ENG_DT_BFLOAT16;
    if (!dt) {
      td_err e;
      td_err_set(&e, TD_UNIMPLEMENTED,
                 "output '%s' has dtype %s, which the v2 protocol cannot carry", alias,
                 eng_dtype_name(t->dtype));
      td_buf_free(&json), td_buf_free(&bin), td_buf_free(&scratch);
      srv_v2rest_error(&e, out);
      return;
    }
    td_buf_puts(&json, k ? ",{\"name\":" : "{\"name\":");
    srv_json_append_string(&json, alias, strlen(alias));
    td_buf_printf(&json, ",\"datatype\":\"%s\",\"shape\":[", dt);
    for (int d = 0; d < t->shape.rank; d++)
      td_buf_printf(&json, "%s%lld", d ? "," : "", (long long)t->shape.dim[d]);
    td_buf_putc(&json, ']');
    if (binary) {
      const void *data;
      size_t len;
      td_buf_reset(&scratch);
      srv_v2_raw(t, &scratch, &data, &len);
      td_buf_append(&bin, data, len);
      td_buf_printf(&json, ",\"parameters\":{\"binary_data_size\":%zu}}", len);
      any_binary = true;
    } else {
      td_buf_puts(&json, ",\"data\":");
      write_values(&json, t);
      td_buf_putc(&json, '}');
    }
  }
  td_buf_puts(&json, "]}");
  td_buf_free(&scratch);
  out->status = 200;
  out->binary = any_binary;
  out->header_len = any_binary ? json.len : 0;
  if (any_binary) td_buf_append(&json, bin.data ? bin.data : "", bin.len);
  bool oom = json.oom || bin.oom;
  out->body = json;
  td_buf_free(&bin);
  if (oom) {
    td_buf_free(&out->body);
    td_err e;
    td_err_set(&e, TD_RESOURCE_EXHAUSTED, "out of memory writing the response");
    srv_v2rest_error(&e, out);
  }
}
