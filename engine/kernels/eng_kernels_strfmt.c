/* StringFormat and dense ReduceJoin.
 *
 * StringFormat replaces each placeholder of the template with one input
 * printed as TensorFlow prints a tensor's summary: a scalar bare, a tensor
 * as nested brackets, elements split by " " in the last dim and by
 * newlines plus indentation above it, and with `summarize` = n >= 0 only
 * the first and last n entries of a longer dim around "..." (-1: all).
 * Elements: floats in the shortest of %.6g / %.9g that reads back (doubles
 * %.15g / %.17g), integers in decimal, bools as 1 / 0, strings quoted with
 * C escapes (bytes from 0x80 as they are).
 *
 * ReduceJoin joins the strings along the reduced axes, the first axis
 * listed varying fastest, as TensorFlow's kernel walks them; no axes leaves
 * the input as it is. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"

/* --- StringFormat ------------------------------------------------------ */

static int count_placeholders(const char *tmpl, const char *ph) {
  size_t pl = strlen(ph);
  int n = 0;
  if (!pl) return 0;
  for (const char *p = strstr(tmpl, ph); p; p = strstr(p + pl, ph)) n++;
  return n;
}

static bool printable_type(eng_dtype t) {
  switch (t) {
    case ENG_DT_FLOAT:
    case ENG_DT_DOUBLE:
    case ENG_DT_HALF:
    case ENG_DT_BFLOAT16:
    case ENG_DT_INT8:
    case ENG_DT_INT16:
    case ENG_DT_INT32:
    case ENG_DT_INT64:
    case ENG_DT_UINT8:
    case ENG_DT_UINT16:
    case ENG_DT_UINT32:
    case ENG_DT_UINT64:
    case ENG_DT_BOOL:
    case ENG_DT_STRING:
      return true;
    default:
      return false;
  }
}

td_code eng_c_string_format(const eng_node *n, td_err *err) {
  const char *tmpl = eng_attr_str(n, "template", "%s");
  const char *ph = eng_attr_str(n, "placeholder", "%s");
  const eng_attr *t = eng_node_attr(n, "T");
  bool list = t && t->kind == ENG_ATTR_LIST && t->list_kind == ENG_ATTR_TYPE;
  int nt = list ? t->n : n->n_in;
  int np = count_placeholders(tmpl, ph);
  if (!*ph)
    return td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (%s): the placeholder is empty", n->name,
                      n->op);
  if (np != nt)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "node '%s' (%s): %d placeholders in the template for %d inputs", n->name,
                      n->op, np, nt);
  for (int i = 0; list && i < t->n; i++)
    if (!printable_type(t->ltype[i]))
      return td_err_set(err, TD_UNIMPLEMENTED,
                        "node '%s' (%s): input %d of type %s is not supported", n->name, n->op, i,
                        eng_dtype_name(t->ltype[i]));
  return TD_OK;
}

static td_code put_float(eng_kctx *c, eng_strbuild *b, double v, bool single) {
  char buf[64];
  if (isnan(v) || isinf(v)) {
    snprintf(buf, sizeof buf, "%s%s", signbit(v) ? "-" : "", isnan(v) ? "nan" : "inf");
  } else if (single) {
    snprintf(buf, sizeof buf, "%.*g", FLT_DIG, v);
    if (strtof(buf, NULL) != (float)v) snprintf(buf, sizeof buf, "%.*g", FLT_DIG + 3, v);
  } else {
    snprintf(buf, sizeof buf, "%.*g", DBL_DIG, v);
    if (strtod(buf, NULL) != v) snprintf(buf, sizeof buf, "%.*g", DBL_DIG + 2, v);
  }
  return eng_strbuild_append(c, b, buf, strlen(buf));
}

static td_code put_string(eng_kctx *c, eng_strbuild *b, eng_str s) {
  td_code rc = eng_strbuild_append(c, b, "\"", 1);
  for (size_t i = 0; !rc && i < s.len; i++) {
    unsigned char ch = (unsigned char)s.data[i];
    char buf[8];
    const char *esc = ch == '\n'   ? "\\n"
                      : ch == '\r' ? "\\r"
                      : ch == '\t' ? "\\t"
                      : ch == '"'  ? "\\\""
                      : ch == '\'' ? "\\'"
                      : ch == '\\' ? "\\\\"
                                   : NULL;
    if (!esc && (ch < 0x20 || ch == 0x7f)) {
      snprintf(buf, sizeof buf, "\\%03o", ch);
      esc = buf;
    }
    rc = esc ? eng_strbuild_append(c, b, esc, strlen(esc))
             : eng_strbuild_append(c, b, (char *)&ch, 1);
  }
  return rc ? rc : eng_strbuild_append(c, b, "\"", 1);
}

static td_code put_elem(eng_kctx *c, eng_strbuild *b, const eng_tensor *t, int64_t i) {
  const void *d = eng_tensor_data(t);
  char buf[32];
  switch (t->dtype) {
    case ENG_DT_FLOAT:
      return put_float(c, b, ((const float *)d)[i], true);
    case ENG_DT_DOUBLE:
      return put_float(c, b, ((const double *)d)[i], false);
    case ENG_DT_STRING:
      return put_string(c, b, eng_tensor_strs(t)[i]);
    case ENG_DT_BOOL:
      return eng_strbuild_append(c, b, ((const bool *)d)[i] ? "1" : "0", 1);
    case ENG_DT_INT8:
      snprintf(buf, sizeof buf, "%d", ((const int8_t *)d)[i]);
      break;
    case ENG_DT_INT16:
      snprintf(buf, sizeof buf, "%d", ((const int16_t *)d)[i]);
      break;
    case ENG_DT_INT32:
      snprintf(buf, sizeof buf, "%d", ((const int32_t *)d)[i]);
      break;
    case ENG_DT_INT64:
      snprintf(buf, sizeof buf, "%lld", (long long)((const int64_t *)d)[i]);
      break;
    case ENG_DT_UINT8:
      snprintf(buf, sizeof buf, "%u", ((const uint8_t *)d)[i]);
      break;
    case ENG_DT_UINT16:
      snprintf(buf, sizeof buf, "%u", ((const uint16_t *)d)[i]);
      break;
    case ENG_DT_UINT32:
      snprintf(buf, sizeof buf, "%u", ((const uint32_t *)d)[i]);
      break;
    case ENG_DT_UINT64:
      snprintf(buf, sizeof buf, "%llu", (unsigned long long)((const uint64_t *)d)[i]);
      break;
    default:
      return eng_kfail(c, TD_UNIMPLEMENTED, "%s is not supported", eng_dtype_name(t->dtype));
  }
  return eng_strbuild_append(c, b, buf, strlen(buf));
}

/* Between two entries of dim d of a rank-r tensor: a space in the last
 * dim, else r-d-1 newlines and d+1 spaces. */
static td_code put_spacing(eng_kctx *c, eng_strbuild *b, int d, int r) {
  td_code rc = TD_OK;
  if (d == r - 1) return eng_strbuild_append(c, b, " ", 1);
  for (int j = 0; !rc && j < r - d - 1; j++) rc = eng_strbuild_append(c, b, "\n", 1);
  for (int j = 0; !rc && j <= d; j++) rc = eng_strbuild_append(c, b, " ", 1);
  return rc;
}

static td_code put_dim(eng_kctx *c, eng_strbuild *b, const eng_tensor *t, int d, int64_t ends,
                       int64_t at) {
  int r = t->shape.rank;
  if (d == r) return put_elem(c, b, t, at);
  int64_t count = t->shape.dim[d], inner = 1;
  for (int k = d + 1; k < r; k++) inner *= t->shape.dim[k];
  int64_t tail = ends > count - ends ? ends : count - ends;
  td_code rc = eng_strbuild_append(c, b, "[", 1);
  for (int64_t i = 0; !rc && i < ends && i < count; i++) {
    if (i) rc = put_spacing(c, b, d, r);
    if (!rc) rc = put_dim(c, b, t, d + 1, ends, at + inner * i);
  }
  if (!rc && count > 2 * ends) {
    rc = put_spacing(c, b, d, r);
    if (!rc) rc = eng_strbuild_append(c, b, "...", 3);
  }
  for (int64_t i = tail; !rc && i < count; i++) {
    rc = put_spacing(c, b, d, r);
    if (!rc) rc = put_dim(c, b, t, d + 1, ends, at + inner * i);
  }
  return rc ? rc : eng_strbuild_append(c, b, "]", 1);
}

static td_code put_tensor(eng_kctx *c, eng_strbuild *b, const eng_tensor *t, int64_t summarize) {
  int64_t n = eng_tensor_numel(t);
  int64_t limit = summarize < 0 || summarize > n ? n : summarize;
  if (t->shape.rank == 0) {
    if (!limit) return eng_strbuild_append(c, b, "...", 3);
    return put_elem(c, b, t, 0);
  }
  return put_dim(c, b, t, 0, limit, 0);
}

td_code eng_k_string_format(eng_kctx *c) {
  td_code rc = eng_c_string_format(c->node, c->err);
  if (rc) return rc;
  const char *tmpl = eng_attr_str(c->node, "template", "%s");
  const char *ph = eng_attr_str(c->node, "placeholder", "%s");
  int64_t summarize = eng_node_attr_int(c->node, "summarize", 3);
  size_t pl = strlen(ph);
  eng_strbuild b = {0};
  rc = eng_strbuild_add(c, &b, "", 0);
  const char *p = tmpl;
  for (int i = 0; !rc; i++) {
    const char *q = strstr(p, ph);
    if (!q || i >= c->n_in) {
      rc = eng_strbuild_append(c, &b, p, strlen(p));
      break;
    }
    rc = eng_strbuild_append(c, &b, p, (size_t)(q - p));
    if (!rc) rc = put_tensor(c, &b, &c->in[i], summarize);
    p = q + pl;
  }
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  eng_shape s = eng_shape_scalar();
  return eng_strbuild_finish(c, &b, 0, &s);
}

/* --- ReduceJoin ---------------------------------------------------------- */

td_code eng_k_reduce_join(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  td_code rc = eng_kwant(c, 0, ENG_DT_STRING);
  if (rc) return rc;
  int64_t axes[ENG_MAX_RANK];
  int na = 0, r = x->shape.rank;
  if ((rc = eng_karg_ints(c, 1, axes, ENG_MAX_RANK, &na))) return rc;
  bool reduced[ENG_MAX_RANK] = {false};
  for (int k = 0; k < na; k++) {
    int64_t a = axes[k] < 0 ? axes[k] + r : axes[k];
    if (a < 0 || a >= r)
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "Invalid reduction dimension %lld for input with %d dimensions",
                       (long long)axes[k], r);
    if (reduced[a])
      return eng_kfail(c, TD_INVALID_ARGUMENT, "Duplicate reduction dimension %lld",
                       (long long)axes[k]);
    reduced[a] = true;
    axes[k] = a;
  }
  if (!na) {
    c->out[0] = eng_tensor_share(x);
    return TD_OK;
  }
  bool keep = eng_node_attr_bool(c->node, "keep_dims", false);
  const char *sep = eng_attr_str(c->node, "separator", "");
  size_t seplen = strlen(sep);
  int64_t st[ENG_MAX_RANK];
  eng_contig_strides(&x->shape, st);
  /* the kept dims, outermost first, walked row-major for the output */
  int kept[ENG_MAX_RANK], nk = 0;
  eng_shape out = {.rank = 0};
  for (int d = 0; d < r; d++) {
    if (!reduced[d]) kept[nk++] = d;
    if (!reduced[d] || keep) out.dim[out.rank++] = reduced[d] ? 1 : x->shape.dim[d];
  }
  int64_t nout = 1, ninner = 1;
  for (int k = 0; k < nk; k++) nout *= x->shape.dim[kept[k]];
  for (int k = 0; k < na; k++) ninner *= x->shape.dim[axes[k]];
  const eng_str *s = eng_tensor_strs(x);
  eng_strbuild b = {0};
  int64_t oi[ENG_MAX_RANK] = {0};
  for (int64_t o = 0; !rc && o < nout; o++) {
    int64_t base = 0;
    for (int k = 0; k < nk; k++) base += oi[k] * st[kept[k]];
    rc = eng_strbuild_add(c, &b, "", 0);
    int64_t ri[ENG_MAX_RANK] = {0};
    for (int64_t e = 0; !rc && e < ninner; e++) {
      int64_t at = base;
      for (int k = 0; k < na; k++) at += ri[k] * st[axes[k]];
      if (e && seplen) rc = eng_strbuild_append(c, &b, sep, seplen);
      if (!rc) rc = eng_strbuild_append(c, &b, s[at].data, s[at].len);
      for (int k = 0; k < na && ++ri[k] == x->shape.dim[axes[k]]; k++) ri[k] = 0;
    }
    for (int k = nk - 1; k >= 0 && ++oi[k] == x->shape.dim[kept[k]]; k--) oi[k] = 0;
  }
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  return eng_strbuild_finish(c, &b, 0, &out);
}
