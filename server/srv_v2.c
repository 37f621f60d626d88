#include "srv_v2.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_stats.h"

static const struct {
  eng_dtype dt;
  const char *name;
} types[] = {
    {ENG_DT_BOOL, "BOOL"},     {ENG_DT_UINT8, "UINT8"},   {ENG_DT_UINT16, "UINT16"},
    {ENG_DT_UINT32, "UINT32"}, {ENG_DT_UINT64, "UINT64"}, {ENG_DT_INT8, "INT8"},
    {ENG_DT_INT16, "INT16"},   {ENG_DT_INT32, "INT32"},   {ENG_DT_INT64, "INT64"},
    {ENG_DT_HALF, "FP16"},     {ENG_DT_BFLOAT16, "BF16"}, {ENG_DT_FLOAT, "FP32"},
    {ENG_DT_DOUBLE, "FP64"},   {ENG_DT_STRING, "BYTES"},
};
#define N_TYPES (sizeof types / sizeof types[0])

const char *srv_v2_datatype(eng_dtype dt) {
  for (size_t i = 0; i < N_TYPES; i++)
    if (types[i].dt == dt) return types[i].name;
  return NULL;
}

eng_dtype srv_v2_dtype(const char *datatype, size_t len) {
  for (size_t i = 0; datatype && i < N_TYPES; i++)
    if (strlen(types[i].name) == len && !memcmp(types[i].name, datatype, len)) return types[i].dt;
  return ENG_DT_INVALID;
}

td_code srv_v2_parse_version(const char *s, bool *has_version, int64_t *version, td_err *err) {
  *has_version = false;
  *version = -1;
  if (!s || !*s) return TD_OK;
  int64_t v = 0;
  for (const char *p = s; *p; p++) {
    if (*p < '0' || *p > '9' || v > (INT64_MAX - (*p - '0')) / 10)
      return td_err_set(err, TD_INVALID_ARGUMENT, "invalid model version '%s': expected a number",
                        s);
    v = v * 10 + (*p - '0');
  }
  *has_version = true;
  *version = v;
  return TD_OK;
}

td_code srv_v2_begin(srv_call *c, srv_api *api, const char *model, const char *version,
                     const char *signature, td_err *err) {
  srv_model_spec spec = {
      .name = model, .signature_name = signature, .sig_errors = SRV_SIG_ERRORS_INFER};
  td_code rc = srv_v2_parse_version(version, &spec.has_version, &spec.version, err);
  if (rc) {
    memset(c, 0, offsetof(srv_call, task.err)); /* srv_call_end stays safe */
    return rc;
  }
  return srv_call_begin(c, api, &spec, err);
}

static const char *shape_text(const int64_t *d, size_t rank, char *buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "[");
  for (size_t i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)d[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
  return buf;
}

td_code srv_v2_bind(srv_call *c, const char *model, const char *name, const char *datatype,
                    const int64_t *shape, size_t rank, int *slot, td_err *err) {
  const ldr_signature *sig = c->sig;
  int i = ldr_signature_input(sig, name);
  if (i < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "unexpected inference input '%s' for model '%s'",
                      name, model);
  if (c->inputs[i].dtype != ENG_DT_INVALID)
    return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s' appears more than once", name);
  const ldr_tensor_info *ti = &sig->inputs[i];
  const char *want = srv_v2_datatype(ti->dtype);
  if (!want)
    return td_err_set(err, TD_UNIMPLEMENTED,
                      "input '%s' of model '%s' has dtype %s, which the v2 "
                      "protocol cannot carry",
                      name, model, eng_dtype_name(ti->dtype));
  if (!datatype || strcmp(datatype, want))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "input '%s': datatype %s does not match the model's %s", name,
                      datatype ? datatype : "(none)", want);
  char got[160], decl[160];
  if (rank > ENG_MAX_RANK)
    return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': rank %zu exceeds the limit of %d",
                      name, rank, ENG_MAX_RANK);
  shape_text(shape, rank, got, sizeof got);
  for (size_t k = 0; k < rank; k++)
    if (shape[k] < 0)
      return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': shape %s has a negative dimension",
                        name, got);
  eng_shape s = eng_shape_make((int)rank, shape);
  if (!eng_shape_fits(&ti->shape, &s))
    return td_err_set(
        err, TD_INVALID_ARGUMENT, "input '%s': shape %s does not match the model's %s", name,
        shape_text(shape, rank, got, sizeof got), eng_shape_str(&ti->shape, decl, sizeof decl));
  int64_t numel = 1;
  for (size_t k = 0; k < rank; k++) {
    if (shape[k] && numel > INT64_MAX / 16 / shape[k])
      return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': shape %s is too large", name, got);
    numel *= shape[k];
  }
  /* The request's input budget, before anything of the declared size is
   * allocated: BYTES are charged once their lengths are known, but their
   * shape alone already needs a table entry per element. */
  size_t bytes = ti->dtype == ENG_DT_STRING ? eng_tensor_strings_size(numel, 0)
                                            : (size_t)numel * eng_dtype_size(ti->dtype);
  td_code rc = srv_call_charge(c, name, bytes, err);
  if (rc) return rc;
  if (ti->dtype == ENG_DT_STRING) {
    c->input_bytes -= bytes;
    c->inputs[i] = (eng_tensor){.dtype = ENG_DT_STRING, .shape = s}; /* bound, not filled */
  } else {
    td_err why;
    if (eng_tensor_alloc_raw(&c->inputs[i], ti->dtype, &s, &why))
      return td_err_set(err, why.code, "input '%s': %s", name, why.msg);
  }
  *slot = i;
  return TD_OK;
}

static td_code alloc_strings(srv_call *c, int slot, const eng_shape *shape, const size_t *lens,
                             td_err *err) {
  int64_t n = eng_shape_numel(shape);
  size_t total = 0;
  for (int64_t j = 0; j < n; j++) total = lens[j] > SIZE_MAX - total ? SIZE_MAX : total + lens[j];
  td_code rc = srv_call_charge(c, c->sig->inputs[slot].alias, eng_tensor_strings_size(n, total), err);
  if (rc) return rc;
  td_err why;
  eng_tensor t;
  if (eng_tensor_alloc_strings(&t, shape, lens, &why))
    return td_err_set(err, why.code, "input '%s': %s", c->sig->inputs[slot].alias, why.msg);
  c->inputs[slot] = t;
  return TD_OK;
}

td_code srv_v2_set_raw(srv_call *c, int slot, const eng_shape *shape, const void *data, size_t len,
                       td_err *err) {
  eng_tensor *t = &c->inputs[slot];
  const char *name = c->sig->inputs[slot].alias;
  int64_t n = eng_shape_numel(shape);
  if (t->dtype != ENG_DT_STRING) {
    size_t want = eng_tensor_nbytes(t);
    if (len != want)
      return td_err_set(
          err, TD_INVALID_ARGUMENT,
          "input '%s': %zu bytes of raw data, expected %zu for its shape and datatype", name, len,
          want);
    if (want) memcpy(eng_tensor_data(t), data, want);
    return TD_OK;
  }
  /* BYTES: walk the length prefixes once to size the tensor, once to fill.
   * Each element has a 4-byte prefix, so the data bounds the count. */
  if (n > 0 && (uint64_t)n > len / 4)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "input '%s': raw BYTES data does not hold %lld length-prefixed elements",
                      name, (long long)n);
  const unsigned char *p = data;
  size_t *lens = malloc(sizeof *lens * (size_t)(n + 1));
  if (!lens) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  size_t off = 0;
  int64_t k = 0;
  for (; k < n && off + 4 <= len; k++) {
    uint32_t l = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 | (uint32_t)p[off + 2] << 16 |
                 (uint32_t)p[off + 3] << 24;
    off += 4;
    if (l > len - off) break;
    lens[k] = l;
    off += l;
  }
  if (k != n || off != len) {
    free(lens);
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "input '%s': raw BYTES data does not hold %lld length-prefixed elements",
                      name, (long long)n);
  }
  td_code rc = alloc_strings(c, slot, shape, lens, err);
  off = 0;
  for (int64_t j = 0; !rc && j < n; j++) {
    memcpy(eng_tensor_str_bytes(t, j), p + off + 4, lens[j]);
    off += 4 + lens[j];
  }
  free(lens);
  return rc;
}

td_code srv_v2_set_strings(srv_call *c, int slot, const eng_shape *shape, const eng_str *s,
                           size_t n, td_err *err) {
  int64_t want = eng_shape_numel(shape);
  if ((int64_t)n != want)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "input '%s': %zu elements given, its shape holds %lld",
                      c->sig->inputs[slot].alias, n, (long long)want);
  size_t *lens = malloc(sizeof *lens * (n + 1));
  if (!lens) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t j = 0; j < n; j++) lens[j] = s[j].len;
  td_code rc = alloc_strings(c, slot, shape, lens, err);
  free(lens);
  for (size_t j = 0; !rc && j < n; j++)
    if (s[j].len) memcpy(eng_tensor_str_bytes(&c->inputs[slot], (int64_t)j), s[j].data, s[j].len);
  return rc;
}

td_code srv_v2_check_complete(const srv_call *c, const char *model, td_err *err) {
  const ldr_signature *sig = c->sig;
  int given = 0;
  for (int i = 0; i < sig->n_inputs; i++) given += c->inputs[i].buf != NULL;
  if (given == sig->n_inputs) return TD_OK;
  td_buf b;
  td_buf_init(&b);
  for (int i = 0; i < sig->n_inputs; i++)
    if (!c->inputs[i].buf) td_buf_printf(&b, "%s'%s'", b.len ? ", " : "", sig->inputs[i].alias);
  td_code rc = td_err_set(err, TD_INVALID_ARGUMENT,
                          "expected %d inputs but got %d inputs for model '%s' (missing %s)",
                          sig->n_inputs, given, model, b.data ? b.data : "");
  td_buf_free(&b);
  return rc;
}

td_code srv_v2_output(const ldr_signature *sig, const char *model, const char *name, int *index,
                      td_err *err) {
  int i = ldr_signature_output(sig, name);
  if (i < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "unexpected inference output '%s' for model '%s'",
                      name, model);
  *index = i;
  return TD_OK;
}

void srv_v2_raw(const eng_tensor *t, td_buf *scratch, const void **data, size_t *len) {
  if (t->dtype != ENG_DT_STRING) {
    *data = eng_tensor_data(t);
    *len = eng_tensor_nbytes(t);
    return;
  }
  int64_t n = eng_tensor_numel(t);
  const eng_str *s = eng_tensor_strs(t);
  size_t start = scratch->len;
  for (int64_t i = 0; i < n; i++) {
    uint32_t l = (uint32_t)s[i].len;
    unsigned char pre[4] = {(unsigned char)l, (unsigned char)(l >> 8), (unsigned char)(l >> 16),
                            (unsigned char)(l >> 24)};
    td_buf_append(scratch, pre, 4);
    td_buf_append(scratch, s[i].data, s[i].len);
  }
  *data = scratch->data ? scratch->data + start : "";
  *len = scratch->len - start;
}

int srv_v2_tensor_shape(const ldr_tensor_info *t, int64_t *dims) {
  if (t->shape.rank < 0) {
    dims[0] = -1;
    return 1;
  }
  for (int i = 0; i < t->shape.rank; i++) dims[i] = t->shape.dim[i] < 0 ? -1 : t->shape.dim[i];
  return t->shape.rank;
}

td_code srv_v2_acquire(srv_api *api, const char *model, const char *version, ldr_servable **sv,
                       const ldr_signature **sig, td_err *err) {
  bool has = false;
  int64_t v = -1;
  td_code rc = srv_v2_parse_version(version, &has, &v, err);
  if (!rc) rc = ldr_registry_acquire(api->registry, model, has ? v : -1, sv, err);
  if (rc) return rc;
  *sig = ldr_servable_signature(*sv, SRV_DEFAULT_SIGNATURE);
  if (!*sig && ldr_servable_signature_count(*sv) > 0) *sig = ldr_servable_signature_at(*sv, 0);
  if (!*sig) {
    ldr_servable_unref(*sv);
    return td_err_set(err, TD_FAILED_PRECONDITION, "model '%s' has no signature", model);
  }
  return TD_OK;
}

const char *srv_v2_config_type(eng_dtype dt) {
  static const struct {
    eng_dtype dt;
    const char *name;
  } map[] = {{ENG_DT_BOOL, "TYPE_BOOL"},     {ENG_DT_UINT8, "TYPE_UINT8"},
             {ENG_DT_UINT16, "TYPE_UINT16"}, {ENG_DT_UINT32, "TYPE_UINT32"},
             {ENG_DT_UINT64, "TYPE_UINT64"}, {ENG_DT_INT8, "TYPE_INT8"},
             {ENG_DT_INT16, "TYPE_INT16"},   {ENG_DT_INT32, "TYPE_INT32"},
             {ENG_DT_INT64, "TYPE_INT64"},   {ENG_DT_HALF, "TYPE_FP16"},
             {ENG_DT_FLOAT, "TYPE_FP32"},    {ENG_DT_DOUBLE, "TYPE_FP64"},
             {ENG_DT_STRING, "TYPE_STRING"}, {ENG_DT_BFLOAT16, "TYPE_BF16"}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (map[i].dt == dt) return map[i].name;
  return "TYPE_INVALID";
}

int srv_v2_available_versions(srv_api *api, const char *model, int64_t **out) {
  ldr_version_status *st = NULL;
  int n = 0, k = 0;
  *out = NULL;
  if (ldr_registry_status(api->registry, model, -1, &st, &n, NULL)) return 0;
  int64_t *v = malloc(((size_t)n + 1) * sizeof *v);
  for (int i = 0; v && i < n; i++)
    if (st[i].state == LDR_STATE_AVAILABLE) v[k++] = st[i].version;
  free(st);
  if (!v) return -1;
  *out = v;
  return k;
}

static bool batch_led(const ldr_tensor_info *t, int n) {
  for (int i = 0; i < n; i++)
    if (t[i].shape.rank < 1 || t[i].shape.dim[0] >= 0) return false;
  return true;
}

int srv_v2_max_batch(const ldr_signature *sig) {
  return batch_led(sig->inputs, sig->n_inputs) && batch_led(sig->outputs, sig->n_outputs)
             ? SRV_V2_MAX_BATCH
             : 0;
}

static int cmp_stat(const void *pa, const void *pb) {
  const srv_stats_entry *a = pa, *b = pb;
  int c = strcmp(a->model, b->model);
  if (c) return c;
  return a->version < b->version ? -1 : a->version > b->version;
}

int srv_v2_stats(srv_api *api, const char *model, int64_t version, srv_stats_entry **out) {
  srv_stats_entry *e = NULL;
  int n = srv_stats_snapshot(api->stats, model, version, &e);
  char **names = NULL;
  int n_names = 0;
  if (model) {
    names = malloc(sizeof *names);
    if (names && (names[0] = strdup(model))) n_names = 1;
  } else {
    n_names = ldr_registry_model_names(api->registry, &names);
  }
  for (int i = 0; i < n_names; i++) {
    ldr_version_status *st = NULL;
    int k = 0;
    if (ldr_registry_status(api->registry, names[i], version, &st, &k, NULL)) k = 0;
    for (int j = 0; j < k; j++) {
      if (st[j].state != LDR_STATE_AVAILABLE) continue;
      bool have = false;
      for (int m = 0; m < n && !have; m++)
        have = e[m].version == st[j].version && !strcmp(e[m].model, names[i]);
      if (have) continue;
      srv_stats_entry *g = realloc(e, sizeof *g * (size_t)(n + 1));
      if (!g) break;
      e = g;
      memset(&e[n], 0, sizeof e[n]);
      if (!(e[n].model = strdup(names[i]))) break;
      e[n++].version = st[j].version;
    }
    free(st);
  }
  for (int i = 0; i < n_names; i++) free(names[i]);
  free(names);
  if (n) qsort(e, (size_t)n, sizeof *e, cmp_stat);
  *out = e;
  return n;
}
