/* srv_json: the REST predict codec, JSON <-> tensors (contract in srv_json.h).
 *
 * Design notes.
 * - Parsing and writing live in srv_jsonparse and srv_jsonwrite; this file is
 *   the predict semantics on top: TF Serving's request forms, validation
 *   order and messages, and its response layouts.
 * - Decoding walks each JSON value three times at most: a check pass that
 *   reproduces TF's validation order and messages without writing, a length
 *   pass for string tensors, then the write pass. Nothing is allocated before
 *   the check pass has proved the value dense, so a tensor is never larger
 *   than the number of leaves in the body (a shape read off the first
 *   elements alone could claim terabytes). */
#include "srv_json.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ========================= requests and decoding ========================== */

td_code srv_json_parse_request(const char *body, size_t len, srv_json_request *out,
                               td_err *err) {
  if (len == 0) return td_err_set(err, TD_INVALID_ARGUMENT, "JSON Parse error: The document is empty");
  cJSON *root = NULL;
  td_code rc = srv_json_parse(body, len, &root, err);
  if (rc) return rc;
  const char *what = NULL;
  const cJSON *sig = NULL;
  if (!cJSON_IsObject(root)) {
    what = " Is not object";
  } else {
    sig = cJSON_GetObjectItemCaseSensitive(root, "signature_name");
    if (sig && !cJSON_IsString(sig))
      what = " not formatted correctly. 'signature_name' key must be a string value.";
  }
  if (what) {
    td_buf b;
    td_buf_init(&b);
    td_buf_puts(&b, "JSON Value: ");
    srv_json_append_value(&b, root);
    td_buf_puts(&b, what);
    td_err_set(err, TD_INVALID_ARGUMENT, "%s", b.data ? b.data : what);
    td_buf_free(&b);
    srv_json_free(root);
    return TD_INVALID_ARGUMENT;
  }
  out->root = root;
  out->signature_name = sig ? sig->valuestring : NULL;
  return TD_OK;
}

void srv_json_request_free(srv_json_request *r) {
  if (!r) return;
  srv_json_free(r->root);
  r->root = NULL;
  r->signature_name = NULL;
}

/* "JSON Value: <v><after>", TF's FormatError shape. */
static td_code value_error(td_err *err, td_code code, const char *before, const cJSON *v,
                           const char *after_fmt, ...) __attribute__((format(printf, 5, 6)));
static td_code value_error(td_err *err, td_code code, const char *before, const cJSON *v,
                           const char *after_fmt, ...) {
  if (!err) return code;
  td_buf b;
  td_buf_init(&b);
  td_buf_puts(&b, before);
  srv_json_append_value(&b, v);
  char after[256];
  va_list ap;
  va_start(ap, after_fmt);
  vsnprintf(after, sizeof after, after_fmt, ap);
  va_end(ap);
  td_buf_puts(&b, after);
  td_err_set(err, code, "%s", b.data ? b.data : "out of memory formatting an error");
  td_buf_free(&b);
  return code;
}

static td_code type_error(td_err *err, const cJSON *v, eng_dtype dt) {
  return value_error(err, TD_INVALID_ARGUMENT, "JSON Value: ", v,
                     " Type: %s is not of expected type: %s", srv_json_type_name(v),
                     eng_dtype_name(dt));
}

static int64_t array_len(const cJSON *v) {
  int64_t n = 0;
  for (const cJSON *c = v->child; c; c = c->next) n++;
  return n;
}

typedef enum { PASS_CHECK, PASS_LENS, PASS_WRITE } fill_pass;

/* One walk over one JSON value against the dense shape it must have. */
typedef struct filler {
  eng_dtype dt;
  eng_shape shape; /* of the JSON value (no batch dim) */
  fill_pass pass;
  int64_t idx;   /* next element of the tensor */
  int64_t limit; /* elements the tensor holds (LENS/WRITE) */
  eng_tensor *t; /* WRITE */
  size_t *lens;  /* LENS */
  td_err *err;
} filler;

/* The integer value of a rapidjson "IsInt64"-or-"IsUint64" number. */
static bool json_int(const cJSON *v, int64_t *i, uint64_t *u, bool *is_u) {
  srv_json_numkind k = srv_json_number(v, i, u);
  *is_u = k == SRV_JSON_NUM_UINT64;
  return k != SRV_JSON_NUM_DOUBLE;
}

static td_code fill_leaf(filler *f, const cJSON *v) {
  if (f->pass != PASS_CHECK && f->idx >= f->limit)
    return td_err_set(f->err, TD_INTERNAL, "JSON value outgrew its checked shape");
  const eng_dtype dt = f->dt;
  void *data = f->pass == PASS_WRITE ? eng_tensor_data(f->t) : NULL;
  const int64_t at = f->idx;
  if (cJSON_IsObject(v)) {
    if (dt != ENG_DT_STRING) return type_error(f->err, v, dt);
    if (!srv_json_is_b64_object(v))
      return value_error(f->err, TD_INVALID_ARGUMENT, "JSON Value: ", v,
                         " not formatted correctly for base64 data");
    const cJSON *s = v->child;
    size_t n = srv_json_string_len(s), dlen = 0;
    char *dst = f->pass == PASS_WRITE ? eng_tensor_str_bytes(f->t, at) : NULL;
    if (f->pass == PASS_WRITE && srv_json_b64_decode(s->valuestring, n, NULL, &dlen) &&
        dlen != eng_tensor_strs(f->t)[at].len)
      return td_err_set(f->err, TD_INTERNAL, "base64 value changed length between passes");
    if (!srv_json_b64_decode(s->valuestring, n, dst, &dlen))
      return td_err_set(f->err, TD_INVALID_ARGUMENT, "Unable to base64 decode");
    if (f->pass == PASS_LENS) f->lens[at] = dlen;
    f->idx++;
    return TD_OK;
  }
  int64_t i = 0;
  uint64_t u = 0;
  bool is_u = false;
  switch (dt) {
    case ENG_DT_FLOAT:
    case ENG_DT_DOUBLE: {
      if (!cJSON_IsNumber(v)) return type_error(f->err, v, dt);
      const bool fl = dt == ENG_DT_FLOAT;
      const double d = v->valuedouble;
      const uint64_t max_int = fl ? (1ULL << 24) - 1 : (1ULL << 53) - 1;
      bool lossless;
      if (!isfinite(d))
        lossless = true;
      else if (json_int(v, &i, &u, &is_u))
        lossless = is_u ? u <= max_int : (i < 0 ? (uint64_t)0 - (uint64_t)i : (uint64_t)i) <= max_int;
      else
        lossless = fl ? d <= FLT_MAX && d >= -FLT_MAX : true;
      if (!lossless)
        return value_error(f->err, TD_INVALID_ARGUMENT, "Cannot convert JSON value: ", v,
                           " to %s without loss of precision.", fl ? "float" : "double");
      if (data && fl) ((float *)data)[at] = (float)d;
      if (data && !fl) ((double *)data)[at] = d;
      break;
    }
    case ENG_DT_INT32:
    case ENG_DT_INT16:
    case ENG_DT_INT8:
    case ENG_DT_UINT8: {
      int64_t lo = dt == ENG_DT_INT32 ? INT32_MIN : dt == ENG_DT_INT16 ? INT16_MIN
                   : dt == ENG_DT_INT8 ? INT8_MIN : 0;
      int64_t hi = dt == ENG_DT_INT32 ? INT32_MAX : dt == ENG_DT_INT16 ? INT16_MAX
                   : dt == ENG_DT_INT8 ? INT8_MAX : UINT8_MAX;
      if (!cJSON_IsNumber(v) || !json_int(v, &i, &u, &is_u) || is_u || i < lo || i > hi)
        return type_error(f->err, v, dt);
      if (data) {
        if (dt == ENG_DT_INT32) ((int32_t *)data)[at] = (int32_t)i;
        if (dt == ENG_DT_INT16) ((int16_t *)data)[at] = (int16_t)i;
        if (dt == ENG_DT_INT8) ((int8_t *)data)[at] = (int8_t)i;
        if (dt == ENG_DT_UINT8) ((uint8_t *)data)[at] = (uint8_t)i;
      }
      break;
    }
    case ENG_DT_INT64:
      if (!cJSON_IsNumber(v) || !json_int(v, &i, &u, &is_u) || is_u)
        return type_error(f->err, v, dt);
      if (data) ((int64_t *)data)[at] = i;
      break;
    case ENG_DT_UINT32:
    case ENG_DT_UINT64:
      if (!cJSON_IsNumber(v) || !json_int(v, &i, &u, &is_u) || (!is_u && i < 0))
        return type_error(f->err, v, dt);
      if (!is_u) u = (uint64_t)i;
      if (dt == ENG_DT_UINT32 && u > UINT32_MAX) return type_error(f->err, v, dt);
      if (data && dt == ENG_DT_UINT32) ((uint32_t *)data)[at] = (uint32_t)u;
      if (data && dt == ENG_DT_UINT64) ((uint64_t *)data)[at] = u;
      break;
    case ENG_DT_BOOL:
      if (!cJSON_IsBool(v)) return type_error(f->err, v, dt);
      if (data) ((uint8_t *)data)[at] = cJSON_IsTrue(v) ? 1 : 0;
      break;
    case ENG_DT_STRING: {
      if (!cJSON_IsString(v)) return type_error(f->err, v, dt);
      size_t n = srv_json_string_len(v);
      if (f->pass == PASS_LENS) f->lens[at] = n;
      if (f->pass == PASS_WRITE) {
        if (eng_tensor_strs(f->t)[at].len != n)
          return td_err_set(f->err, TD_INTERNAL, "string changed length between passes");
        memcpy(eng_tensor_str_bytes(f->t, at), v->valuestring, n);
      }
      break;
    }
    default:
      return value_error(f->err, TD_UNIMPLEMENTED, "Conversion of JSON Value: ", v,
                         " to type: %s", eng_dtype_name(dt));
  }
  f->idx++;
  return TD_OK;
}

/* TF's FillTensorProto: every leaf at depth == rank, every list at a level of
 * the size the shape says. */
static td_code fill(filler *f, const cJSON *v, int level) {
  const int rank = f->shape.rank;
  if (!cJSON_IsArray(v)) {
    if (level != rank)
      return value_error(f->err, TD_INVALID_ARGUMENT, "JSON Value: ", v,
                         " found at incorrect level: %d in the JSON DOM. Expected at level: %d",
                         level + 1, rank);
    return fill_leaf(f, v);
  }
  if (level >= rank)
    return td_err_set(f->err, TD_INVALID_ARGUMENT,
                      "Encountered list at unexpected level: %d expected < %d", level, rank);
  const int64_t n = array_len(v);
  if (n != f->shape.dim[level])
    return td_err_set(f->err, TD_INVALID_ARGUMENT,
                      "Encountered list at unexpected size: %" PRId64 " at level: %d expected "
                      "size: %" PRId64,
                      n, level, f->shape.dim[level]);
  for (const cJSON *c = v->child; c; c = c->next) {
    td_code rc = fill(f, c, level + 1);
    if (rc) return rc;
  }
  return TD_OK;
}

/* TF's GetDenseTensorShape: follow the first element down. */
static td_code json_shape(const cJSON *v, int max_rank, eng_shape *s, td_err *err) {
  s->rank = 0;
  while (cJSON_IsArray(v)) {
    if (s->rank == max_rank)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "JSON value has lists nested more than %d deep: tensors of rank above %d "
                        "are not supported",
                        max_rank, ENG_MAX_RANK);
    const int64_t n = array_len(v);
    s->dim[s->rank++] = n;
    if (n == 0) break;
    v = v->child;
  }
  return TD_OK;
}

/* Per-input state while decoding. */
typedef struct slot {
  bool seen;
  eng_shape shape; /* of one instance (row) or of the whole value (columnar) */
  int64_t size;    /* elements per instance */
  size_t *lens;
} slot;

/* The bytes an input will take once allocated, as eng_tensor_alloc and
 * eng_tensor_alloc_strings lay it out (a string tensor: a table entry and a
 * NUL per element, then the bytes), saturating. */
static size_t input_bytes(eng_dtype dt, int64_t n, const size_t *lens) {
  if (dt == ENG_DT_STRING) {
    size_t total = 0;
    for (int64_t i = 0; i < n; i++) total = lens[i] > SIZE_MAX - total ? SIZE_MAX : total + lens[i];
    return eng_tensor_strings_size(n, total);
  }
  unsigned __int128 b = (unsigned __int128)n * eng_dtype_size(dt);
  return b > SIZE_MAX ? SIZE_MAX : (size_t)b;
}

/* Allocates an input once it fits what is left of the request's budget
 * (*budget, in bytes), and takes its size from it. */
static td_code alloc_input(eng_tensor *t, const ldr_tensor_info *ti, const eng_shape *shape,
                           slot *s, size_t *budget, td_err *err) {
  const eng_dtype dt = ti->dtype;
  int64_t n = eng_shape_numel(shape);
  if (n < 0) return td_err_set(err, TD_INTERNAL, "bad decoded shape");
  size_t bytes = input_bytes(dt, n, s->lens);
  if (bytes > *budget)
    return td_err_set(err, TD_RESOURCE_EXHAUSTED,
                      "input '%s': the tensor would take %zu bytes, more than the %zu this "
                      "request may still use",
                      ti->alias, bytes, *budget);
  *budget -= bytes;
  if (dt != ENG_DT_STRING) return eng_tensor_alloc(t, dt, shape, err);
  return eng_tensor_alloc_strings(t, shape, s->lens, err);
}

static td_code alloc_lens(slot *s, const eng_shape *shape, td_err *err) {
  int64_t n = eng_shape_numel(shape);
  s->lens = calloc(n > 0 ? (size_t)n : 1, sizeof *s->lens);
  return s->lens ? TD_OK : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
}

/* ----- columnar ----- */

static td_code decode_columnar_one(const cJSON *v, const ldr_tensor_info *ti, eng_tensor *t,
                                   size_t *budget, td_err *err) {
  slot s = {0};
  td_code rc = json_shape(v, ENG_MAX_RANK, &s.shape, err);
  if (rc) return rc;
  filler f = {.dt = ti->dtype, .shape = s.shape, .pass = PASS_CHECK, .err = err};
  if ((rc = fill(&f, v, 0))) return rc;
  int64_t n = f.idx;
  if (ti->dtype == ENG_DT_STRING) {
    if ((rc = alloc_lens(&s, &s.shape, err))) return rc;
    f = (filler){.dt = ti->dtype, .shape = s.shape, .pass = PASS_LENS, .limit = n, .lens = s.lens,
                 .err = err};
    rc = fill(&f, v, 0);
  }
  if (!rc) rc = alloc_input(t, ti, &s.shape, &s, budget, err);
  if (!rc) {
    f = (filler){.dt = ti->dtype, .shape = s.shape, .pass = PASS_WRITE, .limit = n, .t = t,
                 .err = err};
    rc = fill(&f, v, 0);
  }
  free(s.lens);
  return rc;
}

static td_code decode_columnar(const cJSON *val, const ldr_signature *sig, eng_tensor *inputs,
                               size_t *budget, td_err *err) {
  if (!cJSON_IsObject(val) || srv_json_is_b64_object(val)) {
    if (sig->n_inputs > 1)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "inputs is a plain value/list, but expecting an object as multiple "
                        "input tensors required as per tensorinfo_map");
    return decode_columnar_one(val, &sig->inputs[0], &inputs[0], budget, err);
  }
  for (int k = 0; k < sig->n_inputs; k++) {
    const char *name = sig->inputs[k].alias;
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(val, name);
    if (!item)
      return td_err_set(err, TD_INVALID_ARGUMENT, "Missing named input: %s in 'inputs' object.",
                        name);
    td_code rc = decode_columnar_one(item, &sig->inputs[k], &inputs[k], budget, err);
    if (rc) return rc;
  }
  return TD_OK;
}

/* ----- row ----- */

static bool is_element_object(const cJSON *v) {
  return cJSON_IsObject(v) && !srv_json_is_b64_object(v);
}

static int find_input(const ldr_signature *sig, const char *alias) {
  for (int k = 0; alias && k < sig->n_inputs; k++)
    if (strcmp(sig->inputs[k].alias, alias) == 0) return k;
  return -1;
}

/* TF's AddInstanceItem: check one instance's value for input k and that it
 * has the size and shape of the first instance. */
static td_code check_instance_item(const cJSON *item, const ldr_tensor_info *ti, slot *s,
                                   td_err *err) {
  eng_shape shape;
  td_code rc = json_shape(item, ENG_MAX_RANK - 1, &shape, err);
  if (rc) return rc;
  filler f = {.dt = ti->dtype, .shape = shape, .pass = PASS_CHECK, .err = err};
  if ((rc = fill(&f, item, 0))) return rc;
  if (!s->seen) {
    s->seen = true;
    s->shape = shape;
    s->size = f.idx;
    return TD_OK;
  }
  if (s->size != f.idx)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Expecting tensor size: %" PRId64 " but got: %" PRId64,
                      s->size, f.idx);
  if (!eng_shape_equal(&s->shape, &shape)) {
    char a[160], b[160];
    return td_err_set(err, TD_INVALID_ARGUMENT, "Expecting shape %s but got: %s",
                      eng_shape_str(&s->shape, a, sizeof a), eng_shape_str(&shape, b, sizeof b));
  }
  return TD_OK;
}

static td_code wrap_element(td_err *err, const td_err *inner, int64_t item, const char *key) {
  if (key)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Failed to process element: %" PRId64 " key: %s of 'instances' list. "
                      "Error: %s: %s",
                      item, key, td_code_name(inner->code), inner->msg);
  return td_err_set(err, TD_INVALID_ARGUMENT,
                    "Failed to process element: %" PRId64 " of 'instances' list. Error: %s: %s",
                    item, td_code_name(inner->code), inner->msg);
}

static td_code check_rows(const cJSON *instances, const ldr_signature *sig, bool objects,
                          slot *slots, bool *present, td_err *err) {
  td_err inner = {0};
  int64_t item = 0;
  for (const cJSON *elem = instances->child; elem; elem = elem->next, item++) {
    if (!objects) {
      if (is_element_object(elem))
        return td_err_set(err, TD_INVALID_ARGUMENT,
                          "Expecting value/list but got object at item %" PRId64 " of input list",
                          item);
      if (check_instance_item(elem, &sig->inputs[0], &slots[0], &inner))
        return wrap_element(err, &inner, item, NULL);
      continue;
    }
    if (!is_element_object(elem))
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "Expecting object but got list at item %" PRId64 " of input list", item);
    memset(present, 0, (size_t)sig->n_inputs * sizeof *present);
    bool complete = true;
    for (const cJSON *m = elem->child; m; m = m->next) {
      int k = find_input(sig, m->string);
      if (k < 0) {
        td_err_set(&inner, TD_INVALID_ARGUMENT, "JSON object: does not have named input: %s",
                   m->string ? m->string : "");
        return wrap_element(err, &inner, item, m->string ? m->string : "");
      }
      if (present[k]) {
        td_err_set(&inner, TD_INVALID_ARGUMENT, "JSON object: has key %s more than once",
                   m->string);
        return wrap_element(err, &inner, item, m->string);
      }
      present[k] = true;
      if (check_instance_item(m, &sig->inputs[k], &slots[k], &inner))
        return wrap_element(err, &inner, item, m->string);
    }
    for (int k = 0; k < sig->n_inputs; k++) complete = complete && present[k];
    if (!complete) {
      td_buf b;
      td_buf_init(&b);
      td_buf_printf(&b, "Failed to process element: %" PRId64 " of 'instances' list. JSON object: ",
                    item);
      srv_json_append_value(&b, elem);
      td_buf_puts(&b, " keys must be equal to: ");
      for (int k = 0; k < sig->n_inputs; k++) {
        if (k) td_buf_putc(&b, ',');
        td_buf_puts(&b, sig->inputs[k].alias);
      }
      td_err_set(err, TD_INVALID_ARGUMENT, "%s", b.data ? b.data : "out of memory");
      td_buf_free(&b);
      return TD_INVALID_ARGUMENT;
    }
  }
  return TD_OK;
}

/* The LENS or WRITE pass of input k over all instances. */
static td_code walk_rows(const cJSON *instances, const ldr_tensor_info *ti, bool objects,
                         const slot *s, fill_pass pass, eng_tensor *t, int64_t total,
                         td_err *err) {
  int64_t item = 0;
  for (const cJSON *elem = instances->child; elem; elem = elem->next, item++) {
    const cJSON *v = objects ? cJSON_GetObjectItemCaseSensitive(elem, ti->alias) : elem;
    if (!v) return td_err_set(err, TD_INTERNAL, "instance lost its key %s", ti->alias);
    filler f = {.dt = ti->dtype, .shape = s->shape, .pass = pass, .idx = item * s->size,
                .limit = total, .t = t, .lens = s->lens, .err = err};
    td_code rc = fill(&f, v, 0);
    if (rc) return rc;
  }
  return TD_OK;
}

static td_code decode_row(const cJSON *instances, const ldr_signature *sig, eng_tensor *inputs,
                          size_t *budget, td_err *err) {
  const cJSON *first = instances->child;
  const bool objects = is_element_object(first);
  /* TF tests IsObject() here, so a {"b64"} first element passes it and then
   * feeds only the first input; we refuse that case with the same message. */
  if (sig->n_inputs > 1 && !objects)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "instances is a plain list, but expecting list of objects as multiple "
                      "input tensors required as per tensorinfo_map");
  const int n = sig->n_inputs;
  slot *slots = calloc((size_t)n, sizeof *slots);
  bool *present = calloc((size_t)n, sizeof *present);
  td_code rc = TD_OK;
  if (!slots || !present) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto out;
  }
  if ((rc = check_rows(instances, sig, objects, slots, present, err))) goto out;
  const int64_t count = array_len(instances);
  for (int k = 0; k < n && !rc; k++) {
    const ldr_tensor_info *ti = &sig->inputs[k];
    slot *s = &slots[k];
    eng_shape shape = {.rank = s->shape.rank + 1, .dim = {count}};
    memcpy(shape.dim + 1, s->shape.dim, (size_t)s->shape.rank * sizeof shape.dim[0]);
    const int64_t total = count * s->size;
    if (ti->dtype == ENG_DT_STRING) {
      rc = alloc_lens(s, &shape, err);
      if (!rc) rc = walk_rows(instances, ti, objects, s, PASS_LENS, NULL, total, err);
    }
    if (!rc) rc = alloc_input(&inputs[k], ti, &shape, s, budget, err);
    if (!rc) rc = walk_rows(instances, ti, objects, s, PASS_WRITE, &inputs[k], total, err);
  }
out:
  for (int k = 0; slots && k < n; k++) free(slots[k].lens);
  free(slots);
  free(present);
  return rc;
}

td_code srv_json_decode_predict(const srv_json_request *r, const ldr_signature *sig,
                                size_t max_bytes, eng_tensor *inputs, srv_json_format *fmt,
                                td_err *err) {
  if (!r || !r->root || !sig || (sig->n_inputs > 0 && !inputs) || !fmt)
    return td_err_set(err, TD_INTERNAL, "srv_json_decode_predict: missing argument");
  for (int k = 0; k < sig->n_inputs; k++) inputs[k] = (eng_tensor){0};
  if (sig->n_inputs <= 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Failed to get input map for signature: %s",
                      r->signature_name && *r->signature_name ? r->signature_name : "DEFAULT");
  const cJSON *root = r->root;
  const cJSON *instances = cJSON_GetObjectItemCaseSensitive(root, "instances");
  const cJSON *columns = cJSON_GetObjectItemCaseSensitive(root, "inputs");
  td_code rc;
  srv_json_format f;
  size_t budget = max_bytes ? max_bytes : SIZE_MAX;
  if (instances && columns) {
    return value_error(err, TD_INVALID_ARGUMENT, "JSON Value: ", root,
                       " Not formatted correctly expecting only one of 'inputs' or 'instances' "
                       "keys to exist ");
  } else if (instances) {
    if (!cJSON_IsArray(instances))
      return value_error(err, TD_INVALID_ARGUMENT, "JSON Value: ", root,
                         " Excepting 'instances' to be an list/array");
    if (!instances->child)
      return value_error(err, TD_INVALID_ARGUMENT, "JSON Value: ", root,
                         " No values in 'instances' array");
    f = SRV_JSON_ROW;
    rc = decode_row(instances, sig, inputs, &budget, err);
  } else if (columns) {
    f = SRV_JSON_COLUMNAR;
    rc = decode_columnar(columns, sig, inputs, &budget, err);
  } else {
    return td_err_set(err, TD_INVALID_ARGUMENT, "Missing 'inputs' or 'instances' key");
  }
  if (rc) {
    for (int k = 0; k < sig->n_inputs; k++) eng_tensor_release(&inputs[k]);
    return rc;
  }
  *fmt = f;
  return TD_OK;
}

/* ================================ encoding ================================ */

static bool is_bytes_alias(const char *alias) {
  size_t n = strlen(alias);
  return n >= 6 && memcmp(alias + n - 6, "_bytes", 6) == 0;
}

static td_code write_scalar(srv_json_writer *w, const eng_tensor *t, bool as_bytes, int64_t i,
                            td_err *err) {
  const void *d = eng_tensor_data(t);
  switch (t->dtype) {
    case ENG_DT_FLOAT: srv_json_writer_float(w, ((const float *)d)[i]); break;
    case ENG_DT_DOUBLE: srv_json_writer_double(w, ((const double *)d)[i]); break;
    case ENG_DT_INT32: srv_json_writer_int64(w, ((const int32_t *)d)[i]); break;
    case ENG_DT_INT16: srv_json_writer_int64(w, ((const int16_t *)d)[i]); break;
    case ENG_DT_INT8: srv_json_writer_int64(w, ((const int8_t *)d)[i]); break;
    case ENG_DT_UINT8: srv_json_writer_int64(w, ((const uint8_t *)d)[i]); break;
    case ENG_DT_INT64: srv_json_writer_int64(w, ((const int64_t *)d)[i]); break;
    case ENG_DT_UINT32: srv_json_writer_uint64(w, ((const uint32_t *)d)[i]); break;
    case ENG_DT_UINT64: srv_json_writer_uint64(w, ((const uint64_t *)d)[i]); break;
    case ENG_DT_BOOL: srv_json_writer_bool(w, ((const uint8_t *)d)[i] != 0); break;
    case ENG_DT_STRING: {
      const eng_str *s = &eng_tensor_strs(t)[i];
      if (!as_bytes) {
        srv_json_writer_string(w, s->data, s->len);
        break;
      }
      td_buf b64;
      td_buf_init(&b64);
      srv_json_b64_encode(&b64, s->data, s->len);
      srv_json_writer_begin_object(w);
      srv_json_writer_key(w, "b64", 3);
      srv_json_writer_string(w, b64.data ? b64.data : "", b64.len);
      srv_json_writer_end_object(w);
      bool oom = b64.oom;
      td_buf_free(&b64);
      if (oom) w->out->oom = true;
      break;
    }
    default:
      return td_err_set(err, TD_INVALID_ARGUMENT, "Failed to write JSON value for tensor type: %s",
                        eng_dtype_name(t->dtype));
  }
  return TD_OK;
}

/* TF's AddTensorValues: nested lists from dimension `dim` down. */
static td_code write_tensor(srv_json_writer *w, const eng_tensor *t, bool as_bytes, int dim,
                            int64_t *off, td_err *err) {
  if (dim >= t->shape.rank) return write_scalar(w, t, as_bytes, (*off)++, err);
  srv_json_writer_begin_array(w);
  for (int64_t i = 0; i < t->shape.dim[dim]; i++) {
    td_code rc = write_tensor(w, t, as_bytes, dim + 1, off, err);
    if (rc) return rc;
  }
  srv_json_writer_end_array(w);
  return TD_OK;
}

static td_code check_output(const ldr_tensor_info *ti, const eng_tensor *t, td_err *err) {
  int64_t n = t->shape.rank <= ENG_MAX_RANK ? eng_shape_numel(&t->shape) : -1;
  if (n < 0) return td_err_set(err, TD_INTERNAL, "output '%s' has an invalid shape", ti->alias);
  if (n > 0 && !t->buf) return td_err_set(err, TD_INTERNAL, "output '%s' has no data", ti->alias);
  return TD_OK;
}

static td_code encode_row(const ldr_signature *sig, const eng_tensor *outs, srv_json_writer *w,
                          td_err *err) {
  int64_t batch = -1;
  for (int k = 0; k < sig->n_outputs; k++) {
    const char *name = sig->outputs[k].alias;
    if (outs[k].shape.rank == 0)
      return td_err_set(err, TD_INVALID_ARGUMENT, "Tensor name: %s has no shape information ",
                        name);
    int64_t b = outs[k].shape.dim[0];
    if (batch >= 0 && b != batch)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "Tensor name: %s has inconsistent batch size: %" PRId64
                        " expecting: %" PRId64,
                        name, b, batch);
    batch = b;
  }
  int64_t *offs = calloc(sig->n_outputs > 0 ? (size_t)sig->n_outputs : 1, sizeof *offs);
  if (!offs) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  td_code rc = TD_OK;
  const bool objects = sig->n_outputs > 1;
  srv_json_writer_begin_object(w);
  srv_json_writer_key(w, "predictions", 11);
  srv_json_writer_begin_array(w);
  for (int64_t item = 0; item < batch; item++) {
    if (objects) srv_json_writer_begin_object(w);
    w->single_line = true;
    for (int k = 0; k < sig->n_outputs; k++) {
      const char *name = sig->outputs[k].alias;
      if (objects) srv_json_writer_key(w, name, strlen(name));
      if ((rc = write_tensor(w, &outs[k], is_bytes_alias(name), 1, &offs[k], err))) goto out;
    }
    w->single_line = false;
    if (objects) srv_json_writer_end_object(w);
  }
  srv_json_writer_end_array(w);
  srv_json_writer_end_object(w);
out:
  free(offs);
  return rc;
}

static td_code encode_columnar(const ldr_signature *sig, const eng_tensor *outs,
                               srv_json_writer *w, td_err *err) {
  const bool objects = sig->n_outputs > 1;
  srv_json_writer_begin_object(w);
  srv_json_writer_key(w, "outputs", 7);
  if (objects) srv_json_writer_begin_object(w);
  for (int k = 0; k < sig->n_outputs; k++) {
    const char *name = sig->outputs[k].alias;
    if (objects) srv_json_writer_key(w, name, strlen(name));
    int64_t off = 0;
    td_code rc = write_tensor(w, &outs[k], is_bytes_alias(name), 0, &off, err);
    if (rc) return rc;
  }
  if (objects) srv_json_writer_end_object(w);
  srv_json_writer_end_object(w);
  return TD_OK;
}

td_code srv_json_encode_predict(const ldr_signature *sig, const eng_tensor *outputs,
                                srv_json_format fmt, td_buf *out, td_err *err) {
  if (!sig || !out || (sig->n_outputs > 0 && !outputs))
    return td_err_set(err, TD_INTERNAL, "srv_json_encode_predict: missing argument");
  if (sig->n_outputs <= 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Cannot convert empty tensor map to JSON");
  if (fmt != SRV_JSON_ROW && fmt != SRV_JSON_COLUMNAR)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Invalid request format");
  for (int k = 0; k < sig->n_outputs; k++) {
    td_code rc = check_output(&sig->outputs[k], &outputs[k], err);
    if (rc) return rc;
  }
  const size_t start = out->len;
  const bool was_oom = out->oom;
  srv_json_writer w;
  srv_json_writer_init(&w, out);
  td_code rc = fmt == SRV_JSON_ROW ? encode_row(sig, outputs, &w, err)
                                   : encode_columnar(sig, outputs, &w, err);
  if (!rc && out->oom && !was_oom)
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory writing the JSON response");
  if (rc) {
    out->len = start;
    out->oom = was_oom;
    if (out->data) out->data[start] = '\0';
  }
  return rc;
}

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 if none. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  if (s[0] < 0x80) return 1;
  size_t len = s[0] >= 0xC2 && s[0] <= 0xDF   ? 2
               : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
               : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4
                                              : 0;
  if (!len || len > n) return 0;
  unsigned char lo = 0x80, hi = 0xBF; /* the second byte's range */
  if (s[0] == 0xE0) lo = 0xA0;
  if (s[0] == 0xED) hi = 0x9F; /* no surrogates */
  if (s[0] == 0xF0) lo = 0x90;
  if (s[0] == 0xF4) hi = 0x8F; /* nothing past U+10FFFF */
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < len; i++)
    if ((s[i] & 0xC0) != 0x80) return 0;
  return len;
}

void srv_json_encode_error(const char *message, td_buf *out) {
  /* Messages quote what clients sent (model names, aliases): bytes that are
   * not UTF-8 become U+FFFD so that the body stays valid JSON. */
  const char *m = message ? message : "";
  size_t len = strlen(m);
  td_buf clean;
  td_buf_init(&clean);
  for (size_t i = 0; i < len;) {
    size_t k = utf8_seq((const unsigned char *)m + i, len - i);
    if (k) {
      td_buf_append(&clean, m + i, k);
      i += k;
    } else {
      td_buf_puts(&clean, "\xEF\xBF\xBD");
      i++;
    }
  }
  srv_json_writer w;
  srv_json_writer_init(&w, out);
  srv_json_writer_begin_object(&w);
  srv_json_writer_key(&w, "error", 5);
  srv_json_writer_string(&w, clean.data ? clean.data : "", clean.len);
  srv_json_writer_end_object(&w);
  td_buf_free(&clean);
}
