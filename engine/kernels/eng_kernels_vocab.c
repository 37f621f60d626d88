/* InitializeTableFromTextFileV2: a lookup table filled, at load, from a
 * text file of the version (a TF1 asset vocabulary, fed by the loader as
 * "<version>/assets/<file>"), read through the model's io callbacks. Each
 * line (up to vocab_size lines; "\n" or "\r\n" ends one) gives a key and a
 * value: the whole line (key_index / value_index -2), its number plus
 * offset (-1), or a column split by delimiter (>= 0), converted to the
 * table's dtypes as TensorFlow's text initializer does. The table's dtypes
 * come from the HashTableV2 / MutableHashTableV2 node behind the handle
 * (through identities); then the entries go to eng_table_import, so
 * duplicate keys are TensorFlow's errors. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_model.h"

#define WHOLE_LINE (-2)
#define LINE_NUMBER (-1)

/* The table node behind input 0: its key and value dtypes. */
static void table_dtypes(eng_kctx *c, eng_dtype *key, eng_dtype *value) {
  const eng_graph *g = eng_model_graph(c->model);
  const eng_node *n = c->node;
  for (int hops = 0; hops < 64 && n->n_in > 0; hops++) {
    n = eng_graph_node(g, n->in[0].node);
    if (!strcmp(n->op, "HashTableV2") || !strcmp(n->op, "MutableHashTableV2")) {
      *key = eng_node_attr_type(n, "key_dtype", *key);
      *value = eng_node_attr_type(n, "value_dtype", *value);
      return;
    }
    if (strcmp(n->op, "Identity")) return;
  }
}

typedef struct field {
  const char *p;
  size_t n;
} field;

/* Column `col` of line (split by delim), or false when it has too few. */
static bool column(field line, const char *delim, size_t dl, int64_t col, field *out) {
  const char *p = line.p, *end = line.p + line.n;
  for (int64_t k = 0;; k++) {
    const char *hit = NULL;
    if (dl)
      for (const char *q = p; q + dl <= end; q++)
        if (!memcmp(q, delim, dl)) {
          hit = q;
          break;
        }
    if (k == col) {
      *out = (field){p, (size_t)((hit ? hit : end) - p)};
      return true;
    }
    if (!hit) return false;
    p = hit + dl;
  }
}

/* Writes element i of t (dtype t->dtype) from a field or a line number. */
static td_code put(eng_kctx *c, eng_strbuild *sb, eng_tensor *t, int64_t i, int64_t index,
                   field line, int64_t lineno, const char *delim, size_t dl, int64_t offset) {
  field f = line;
  if (index == LINE_NUMBER) {
    if (t->dtype != ENG_DT_INT64 && t->dtype != ENG_DT_INT32)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "line numbers need an integer table side, not %s",
                       eng_dtype_name(t->dtype));
    if (t->dtype == ENG_DT_INT64)
      ((int64_t *)eng_tensor_data(t))[i] = lineno + offset;
    else
      ((int32_t *)eng_tensor_data(t))[i] = (int32_t)(lineno + offset);
    return TD_OK;
  }
  if (index >= 0 && !column(line, delim, dl, index, &f))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Invalid number of columns in line %lld: '%.*s'",
                     (long long)lineno, (int)(line.n > 200 ? 200 : line.n), line.p);
  if (t->dtype == ENG_DT_STRING) return eng_strbuild_add(c, sb, f.p, f.n);
  char buf[64];
  if (f.n == 0 || f.n >= sizeof buf)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "field '%.*s' in line %lld is not a number",
                     (int)(f.n > 60 ? 60 : f.n), f.p, (long long)lineno);
  memcpy(buf, f.p, f.n);
  buf[f.n] = 0;
  char *end;
  errno = 0;
  if (t->dtype == ENG_DT_INT64 || t->dtype == ENG_DT_INT32) {
    long long v = strtoll(buf, &end, 10);
    if (*end || errno || (t->dtype == ENG_DT_INT32 && (v < INT32_MIN || v > INT32_MAX)))
      return eng_kfail(c, TD_INVALID_ARGUMENT, "field '%s' in line %lld is not an integer", buf,
                       (long long)lineno);
    if (t->dtype == ENG_DT_INT64)
      ((int64_t *)eng_tensor_data(t))[i] = v;
    else
      ((int32_t *)eng_tensor_data(t))[i] = (int32_t)v;
  } else if (t->dtype == ENG_DT_FLOAT || t->dtype == ENG_DT_DOUBLE) {
    double v = strtod(buf, &end);
    if (*end)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "field '%s' in line %lld is not a number", buf,
                       (long long)lineno);
    if (t->dtype == ENG_DT_FLOAT)
      ((float *)eng_tensor_data(t))[i] = (float)v;
    else
      ((double *)eng_tensor_data(t))[i] = v;
  } else {
    return eng_kfail(c, TD_UNIMPLEMENTED, "text file tables of %s", eng_dtype_name(t->dtype));
  }
  return TD_OK;
}

td_code eng_k_init_table_from_text_file(eng_kctx *c) {
  const eng_tensor *fn = &c->in[1];
  if (fn->dtype != ENG_DT_STRING || eng_tensor_numel(fn) != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "filename must be a scalar string");
  int64_t ki = eng_node_attr_int(c->node, "key_index", WHOLE_LINE);
  int64_t vi = eng_node_attr_int(c->node, "value_index", LINE_NUMBER);
  int64_t vocab = eng_node_attr_int(c->node, "vocab_size", -1);
  int64_t offset = eng_node_attr_int(c->node, "offset", 0);
  const char *delim = eng_attr_str(c->node, "delimiter", "\t");
  size_t dl = strlen(delim);
  if (ki < WHOLE_LINE || vi < WHOLE_LINE)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "key_index and value_index must be >= -2");
  eng_dtype kt = ki == LINE_NUMBER ? ENG_DT_INT64 : ENG_DT_STRING;
  eng_dtype vt = vi == LINE_NUMBER ? ENG_DT_INT64 : ENG_DT_STRING;
  table_dtypes(c, &kt, &vt);
  eng_str path = eng_tensor_strs(fn)[0];
  char *p = strndup(path.data, path.len), *data = NULL;
  size_t len = 0;
  td_code rc = p ? eng_model_read_asset(c->model, p, &data, &len, c->err)
                 : eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  free(p);
  if (rc) {
    if (rc != TD_RESOURCE_EXHAUSTED)
      td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
    return rc;
  }
  /* The lines: "\n" ends one, a "\r" before it is dropped, a last line
   * without "\n" counts. */
  int64_t lines = 0;
  for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
  if (len && data[len - 1] != '\n') lines++;
  if (vocab > 0 && lines < vocab) {
    free(data);
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "Invalid vocab_size in %.*s: expected %lld lines, the file has %lld",
                     (int)path.len, path.data, (long long)vocab, (long long)lines);
  }
  if (vocab > 0) lines = vocab;
  eng_shape s = eng_shape_make(1, &lines);
  eng_tensor keys = {0}, values = {0};
  eng_strbuild kb = {0}, vb = {0};
  if (kt != ENG_DT_STRING) rc = eng_tensor_alloc(&keys, kt, &s, c->err);
  if (!rc && vt != ENG_DT_STRING) rc = eng_tensor_alloc(&values, vt, &s, c->err);
  keys.dtype = kt;
  values.dtype = vt;
  const char *at = data, *end = data + len;
  for (int64_t i = 0; !rc && i < lines; i++) {
    const char *nl = memchr(at, '\n', (size_t)(end - at));
    field line = {at, (size_t)((nl ? nl : end) - at)};
    if (line.n && line.p[line.n - 1] == '\r') line.n--;
    at = nl ? nl + 1 : end;
    rc = put(c, &kb, &keys, i, ki, line, i, delim, dl, offset);
    if (!rc) rc = put(c, &vb, &values, i, vi, line, i, delim, dl, offset);
  }
  free(data);
  /* String sides are built, then made tensors through an output slot. */
  eng_tensor tmp[2] = {{0}, {0}};
  eng_kctx sub = *c;
  sub.out = tmp;
  sub.n_out = 2;
  if (!rc && kt == ENG_DT_STRING && !(rc = eng_strbuild_finish(&sub, &kb, 0, &s))) keys = tmp[0];
  if (!rc && vt == ENG_DT_STRING && !(rc = eng_strbuild_finish(&sub, &vb, 1, &s))) values = tmp[1];
  eng_strbuild_free(&kb);
  eng_strbuild_free(&vb);
  if (!rc) rc = eng_table_import(c, &keys, &values, false);
  eng_tensor_release(&keys);
  eng_tensor_release(&values);
  return rc;
}
