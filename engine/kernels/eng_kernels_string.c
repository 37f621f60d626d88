/* String kernels: AsString, StringLength, StringJoin, StringLower /
 * StringUpper (ASCII here, UTF-8 in eng_kernels_unicode.c), StringStrip, Substr, StringToNumber,
 * string Equal / NotEqual, UnsortedSegmentJoin, and the builder every string-producing kernel fills
 * its output with (eng_kernels.h). Semantics are TensorFlow's CPU kernels': bytes, not characters,
 * unless a node's unit says UTF8_CHAR. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"

/* --- the builder -------------------------------------------------------- */

static bool grow(void **p, int64_t *cap, int64_t need, size_t es) {
  if (need <= *cap) return true;
  int64_t nc = *cap ? *cap : 64;
  while (nc < need) nc *= 2;
  void *q = realloc(*p, (size_t)nc * es);
  if (!q) return false;
  *p = q;
  *cap = nc;
  return true;
}

td_code eng_strbuild_add(eng_kctx *c, eng_strbuild *b, const char *s, size_t n) {
  if (!grow((void **)&b->lens, &b->cap_n, b->n + 1, sizeof *b->lens))
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  b->lens[b->n++] = 0;
  return eng_strbuild_append(c, b, s, n);
}

td_code eng_strbuild_append(eng_kctx *c, eng_strbuild *b, const char *s, size_t n) {
  if (!n) return TD_OK;
  if (!grow((void **)&b->bytes, &b->cap, b->len + (int64_t)n, 1))
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  memcpy(b->bytes + b->len, s, n);
  b->len += (int64_t)n;
  b->lens[b->n - 1] += n;
  return TD_OK;
}

void eng_strbuild_free(eng_strbuild *b) {
  free(b->bytes);
  free(b->lens);
  *b = (eng_strbuild){0};
}

td_code eng_strbuild_finish(eng_kctx *c, eng_strbuild *b, int out, const eng_shape *s) {
  td_code rc = TD_OK;
  if (eng_shape_numel(s) != b->n)
    rc = eng_kfail(c, TD_INTERNAL, "%lld strings for an output of %lld", (long long)b->n,
                   (long long)eng_shape_numel(s));
  size_t one = 0;
  if (!rc) rc = eng_tensor_alloc_strings(&c->out[out], s, b->n ? b->lens : &one, c->err);
  if (!rc) {
    const char *p = b->bytes;
    for (int64_t i = 0; i < b->n; p += b->lens[i], i++)
      if (b->lens[i]) memcpy(eng_tensor_str_bytes(&c->out[out], i), p, b->lens[i]);
  } else {
    td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  }
  eng_strbuild_free(b);
  return rc;
}

/* --- AsString ----------------------------------------------------------- */

/* The printf conversion TensorFlow builds from the node's attributes; ""
 * for bool and string, which need none. */
static td_code as_string_format(const eng_node *n, eng_dtype dt, char *fmt, size_t cap,
                                td_err *err) {
  int64_t precision = eng_node_attr_int(n, "precision", -1);
  int64_t width = eng_node_attr_int(n, "width", -1);
  bool scientific = eng_node_attr_bool(n, "scientific", false);
  bool shortest = eng_node_attr_bool(n, "shortest", false);
  const char *fill = eng_attr_str(n, "fill", "");
  bool floating = dt == ENG_DT_FLOAT || dt == ENG_DT_DOUBLE;
  bool integer = dt == ENG_DT_INT8 || dt == ENG_DT_INT16 || dt == ENG_DT_INT32 ||
                 dt == ENG_DT_INT64 || dt == ENG_DT_UINT8 || dt == ENG_DT_UINT16 ||
                 dt == ENG_DT_UINT32 || dt == ENG_DT_UINT64;
  if (!floating && !integer && dt != ENG_DT_BOOL && dt != ENG_DT_STRING)
    return td_err_set(err, TD_UNIMPLEMENTED, "node '%s' (%s): T %s is not supported", n->name,
                      n->op, eng_dtype_name(dt));
  if (!floating && (scientific || shortest || precision > -1))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "node '%s' (%s): scientific, shortest and precision apply to floats only",
                      n->name, n->op);
  if (scientific && shortest)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "node '%s' (%s): Cannot select both scientific and shortest notation",
                      n->name, n->op);
  if (strlen(fill) > 1)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "node '%s' (%s): Fill string must be one or fewer characters", n->name,
                      n->op);
  if (*fill && !strchr(" +-#0", *fill))
    return td_err_set(err, TD_UNIMPLEMENTED, "node '%s' (%s): fill '%s' is not supported", n->name,
                      n->op, fill);
  fmt[0] = 0;
  if (dt == ENG_DT_BOOL || dt == ENG_DT_STRING) return TD_OK;
  int k = snprintf(fmt, cap, "%%%s", fill);
  if (width > -1) k += snprintf(fmt + k, cap - (size_t)k, "%lld", (long long)width);
  if (precision > -1) k += snprintf(fmt + k, cap - (size_t)k, ".%lld", (long long)precision);
  const char *conv =
      floating ? (shortest     ? "g"
                  : scientific ? "e"
                               : "f")
      : dt == ENG_DT_UINT64 || dt == ENG_DT_UINT32 || dt == ENG_DT_UINT16 || dt == ENG_DT_UINT8
          ? "llu"
          : "lld";
  snprintf(fmt + k, cap - (size_t)k, "%s", conv);
  return TD_OK;
}

td_code eng_c_as_string(const eng_node *n, td_err *err) {
  char fmt[64];
  return as_string_format(n, eng_node_attr_type(n, "T", ENG_DT_FLOAT), fmt, sizeof fmt, err);
}

static long long int_elem(const eng_tensor *t, int64_t i) {
  const void *d = eng_tensor_data(t);
  switch (t->dtype) {
    case ENG_DT_INT8:
      return ((const int8_t *)d)[i];
    case ENG_DT_INT16:
      return ((const int16_t *)d)[i];
    case ENG_DT_INT32:
      return ((const int32_t *)d)[i];
    case ENG_DT_UINT8:
      return ((const uint8_t *)d)[i];
    case ENG_DT_UINT16:
      return ((const uint16_t *)d)[i];
    case ENG_DT_UINT32:
      return ((const uint32_t *)d)[i];
    default:
      return ((const int64_t *)d)[i];
  }
}

td_code eng_k_as_string(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  char fmt[64], buf[512];
  td_code rc = as_string_format(c->node, x->dtype, fmt, sizeof fmt, c->err);
  if (rc) return rc;
  if (x->dtype == ENG_DT_STRING) {
    c->out[0] = eng_tensor_share(x);
    return TD_OK;
  }
  int64_t n = eng_tensor_numel(x);
  eng_strbuild b = {0};
  for (int64_t i = 0; !rc && i < n; i++) {
    int k;
    if (x->dtype == ENG_DT_BOOL)
      k = snprintf(buf, sizeof buf, "%s", ((const bool *)eng_tensor_data(x))[i] ? "true" : "false");
    else if (x->dtype == ENG_DT_FLOAT)
      k = snprintf(buf, sizeof buf, fmt, (double)((const float *)eng_tensor_data(x))[i]);
    else if (x->dtype == ENG_DT_DOUBLE)
      k = snprintf(buf, sizeof buf, fmt, ((const double *)eng_tensor_data(x))[i]);
    else
      k = snprintf(buf, sizeof buf, fmt, int_elem(x, i));
    if (k < 0 || (size_t)k >= sizeof buf)
      rc = eng_kfail(c, TD_INVALID_ARGUMENT, "element %lld formats to more than %zu bytes",
                     (long long)i, sizeof buf - 1);
    else
      rc = eng_strbuild_add(c, &b, buf, (size_t)k);
  }
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  return eng_strbuild_finish(c, &b, 0, &x->shape);
}

/* --- StringLength ------------------------------------------------------- */

static bool utf8_unit(const eng_node *n, td_err *err, td_code *rc) {
  const char *unit = eng_attr_str(n, "unit", "BYTE");
  *rc = TD_OK;
  if (!strcmp(unit, "UTF8_CHAR")) return true;
  if (strcmp(unit, "BYTE"))
    *rc = td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (%s): unit '%s' is not BYTE or UTF8_CHAR",
                     n->name, n->op, unit);
  return false;
}

td_code eng_c_string_unit(const eng_node *n, td_err *err) {
  td_code rc;
  utf8_unit(n, err, &rc);
  return rc;
}

static bool utf8_lead(unsigned char b) { return (b & 0xc0) != 0x80; }

td_code eng_k_string_length(eng_kctx *c) {
  td_code rc;
  bool chars = utf8_unit(c->node, c->err, &rc);
  if (rc || (rc = eng_kwant(c, 0, ENG_DT_STRING)) ||
      (rc = eng_kout_raw(c, 0, ENG_DT_INT32, &c->in[0].shape)))
    return rc;
  int64_t n = eng_tensor_numel(&c->in[0]);
  const eng_str *s = eng_tensor_strs(&c->in[0]);
  int32_t *out = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) {
    size_t len = s[i].len;
    if (chars) {
      len = 0;
      for (size_t k = 0; k < s[i].len; k++) len += utf8_lead((unsigned char)s[i].data[k]);
    }
    out[i] = (int32_t)len;
  }
  return TD_OK;
}

/* --- StringJoin --------------------------------------------------------- */

td_code eng_k_string_join(eng_kctx *c) {
  const char *sep = eng_attr_str(c->node, "separator", "");
  size_t seplen = strlen(sep);
  const eng_shape *shape = NULL;
  eng_shape scalar = eng_shape_scalar();
  for (int i = 0; i < c->n_in; i++) {
    td_code rc = eng_kwant(c, i, ENG_DT_STRING);
    if (rc) return rc;
    if (c->in[i].shape.rank == 0) continue;
    if (shape && !eng_shape_equal(shape, &c->in[i].shape)) {
      char a[96], b[96];
      return eng_kfail(c, TD_INVALID_ARGUMENT, "Input shapes do not match: %s vs. %s",
                       eng_shape_str(shape, a, sizeof a),
                       eng_shape_str(&c->in[i].shape, b, sizeof b));
    }
    shape = &c->in[i].shape;
  }
  if (!shape) shape = &scalar;
  int64_t n = eng_shape_numel(shape);
  eng_strbuild b = {0};
  td_code rc = TD_OK;
  for (int64_t e = 0; !rc && e < n; e++) {
    rc = eng_strbuild_add(c, &b, "", 0);
    for (int i = 0; !rc && i < c->n_in; i++) {
      eng_str s = eng_tensor_strs(&c->in[i])[c->in[i].shape.rank ? e : 0];
      if (i && seplen) rc = eng_strbuild_append(c, &b, sep, seplen);
      if (!rc) rc = eng_strbuild_append(c, &b, s.data, s.len);
    }
  }
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  return eng_strbuild_finish(c, &b, 0, shape);
}

/* --- case, whitespace ---------------------------------------------------- */

/* TensorFlow takes "" (ASCII) or exactly "utf-8" (full Unicode case
 * mapping, eng_kernels_unicode.c). */
td_code eng_c_string_case(const eng_node *n, td_err *err) {
  const char *enc = eng_attr_str(n, "encoding", "");
  if (*enc && strcmp(enc, "utf-8"))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "node '%s' (%s): only utf-8 or '' (no encoding) is supported, received %s",
                      n->name, n->op, enc);
  return TD_OK;
}

static td_code map_strings(eng_kctx *c, int (*fn)(int)) {
  td_code rc = eng_c_string_case(c->node, c->err);
  if (rc) return rc;
  if (*eng_attr_str(c->node, "encoding", "")) return eng_k_string_case_utf8(c, fn == toupper);
  if ((rc = eng_kwant(c, 0, ENG_DT_STRING))) return rc;
  int64_t n = eng_tensor_numel(&c->in[0]);
  const eng_str *s = eng_tensor_strs(&c->in[0]);
  size_t *lens = malloc(sizeof *lens * (size_t)(n + 1));
  if (!lens) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int64_t i = 0; i < n; i++) lens[i] = s[i].len;
  rc = eng_tensor_alloc_strings(&c->out[0], &c->in[0].shape, lens, c->err);
  free(lens);
  if (rc) return rc;
  for (int64_t i = 0; i < n; i++) {
    char *d = eng_tensor_str_bytes(&c->out[0], i);
    for (size_t k = 0; k < s[i].len; k++) {
      unsigned char ch = (unsigned char)s[i].data[k];
      d[k] = (char)(ch < 0x80 ? fn(ch) : ch); /* ASCII only, as TensorFlow's default */
    }
  }
  return TD_OK;
}

td_code eng_k_string_lower(eng_kctx *c) { return map_strings(c, tolower); }
td_code eng_k_string_upper(eng_kctx *c) { return map_strings(c, toupper); }

static bool ascii_space(unsigned char ch) {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
}

td_code eng_k_string_strip(eng_kctx *c) {
  td_code rc = eng_kwant(c, 0, ENG_DT_STRING);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(&c->in[0]);
  const eng_str *s = eng_tensor_strs(&c->in[0]);
  eng_strbuild b = {0};
  for (int64_t i = 0; !rc && i < n; i++) {
    size_t lo = 0, hi = s[i].len;
    while (lo < hi && ascii_space((unsigned char)s[i].data[lo])) lo++;
    while (hi > lo && ascii_space((unsigned char)s[i].data[hi - 1])) hi--;
    rc = eng_strbuild_add(c, &b, s[i].data + lo, hi - lo);
  }
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  return eng_strbuild_finish(c, &b, 0, &c->in[0].shape);
}

/* --- Substr ------------------------------------------------------------- */

/* Byte offset of character `ch` of s (UTF-8), or s.len past the end. */
static size_t char_offset(eng_str s, int64_t ch) {
  size_t k = 0;
  for (int64_t seen = -1; k < s.len; k++)
    if (utf8_lead((unsigned char)s.data[k]) && ++seen == ch) return k;
  return s.len;
}

static int64_t char_count(eng_str s) {
  int64_t n = 0;
  for (size_t k = 0; k < s.len; k++) n += utf8_lead((unsigned char)s.data[k]);
  return n;
}

/* pos and len share one shape (as TensorFlow requires): scalars apply to
 * every string, otherwise they broadcast against the input NumPy-style and
 * the output takes the broadcast shape. */
td_code eng_k_substr(eng_kctx *c) {
  td_code rc;
  bool chars = utf8_unit(c->node, c->err, &rc);
  if (rc || (rc = eng_kwant(c, 0, ENG_DT_STRING))) return rc;
  const eng_tensor *x = &c->in[0], *pos = &c->in[1], *len = &c->in[2];
  for (int k = 1; k <= 2; k++)
    if (c->in[k].dtype != ENG_DT_INT32 && c->in[k].dtype != ENG_DT_INT64)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "input %d must be int32 or int64", k);
  if (!eng_shape_equal(&pos->shape, &len->shape)) {
    char a[96], b[96];
    return eng_kfail(
        c, TD_INVALID_ARGUMENT, "pos and len should have the same shape, got: %s vs. %s",
        eng_shape_str(&pos->shape, a, sizeof a), eng_shape_str(&len->shape, b, sizeof b));
  }
  eng_shape out;
  if ((rc = eng_broadcast_shape(&x->shape, &pos->shape, &out, c->err))) {
    td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
    return rc;
  }
  const eng_shape *in[2] = {&x->shape, &pos->shape};
  eng_bcast it;
  eng_bcast_init(&it, &out, 2, in);
  const eng_str *s = eng_tensor_strs(x);
  eng_strbuild b = {0};
  for (int64_t i = 0, n = eng_shape_numel(&out); !rc && i < n; i++, eng_bcast_next(&it)) {
    int64_t at = it.off[1];
    eng_str v = s[it.off[0]];
    int64_t p = pos->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(pos))[at]
                                           : ((const int64_t *)eng_tensor_data(pos))[at];
    int64_t l = len->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(len))[at]
                                           : ((const int64_t *)eng_tensor_data(len))[at];
    int64_t size = chars ? char_count(v) : (int64_t)v.len;
    if (p < 0) p += size;
    if (p < 0 || p > size) {
      rc = eng_kfail(c, TD_INVALID_ARGUMENT, "pos %lld out of range for string at index %lld",
                     (long long)(p < 0 ? p - size : p), (long long)it.off[0]);
      break;
    }
    /* A negative len takes the rest in bytes (TensorFlow's size_t cast)
     * and nothing in characters (its forward walk never starts). */
    if (l < 0 && chars) l = 0;
    int64_t end = l < 0 || l > size - p ? size : p + l;
    size_t lo = chars ? char_offset(v, p) : (size_t)p;
    size_t hi = chars ? char_offset(v, end) : (size_t)end;
    rc = eng_strbuild_add(c, &b, v.data + lo, hi - lo);
  }
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  return eng_strbuild_finish(c, &b, 0, &out);
}

/* --- StringToNumber ----------------------------------------------------- */

td_code eng_c_string_to_number(const eng_node *n, td_err *err) {
  eng_dtype t = eng_node_attr_type(n, "out_type", ENG_DT_FLOAT);
  if (t != ENG_DT_FLOAT && t != ENG_DT_DOUBLE && t != ENG_DT_INT32 && t != ENG_DT_INT64)
    return td_err_set(err, TD_UNIMPLEMENTED, "node '%s' (%s): out_type %s is not supported",
                      n->name, n->op, eng_dtype_name(t));
  return TD_OK;
}

/* Parses the whole of s (surrounding ASCII whitespace allowed) as TensorFlow's
 * safe_strto* do: decimal integers in range, or a float as strtod reads it
 * (inf, nan and hex spelled out); false otherwise. */
static bool parse_number(eng_str s, eng_dtype t, void *out) {
  char buf[128];
  size_t lo = 0, hi = s.len;
  while (lo < hi && ascii_space((unsigned char)s.data[lo])) lo++;
  while (hi > lo && ascii_space((unsigned char)s.data[hi - 1])) hi--;
  if (hi == lo || hi - lo >= sizeof buf) return false;
  memcpy(buf, s.data + lo, hi - lo);
  buf[hi - lo] = 0;
  char *end;
  errno = 0;
  if (t == ENG_DT_INT32 || t == ENG_DT_INT64) {
    const char *p = buf + (buf[0] == '-' || buf[0] == '+');
    if (!isdigit((unsigned char)*p)) return false;
    long long v = strtoll(buf, &end, 10);
    if (*end || errno) return false;
    if (t == ENG_DT_INT32) {
      if (v < INT32_MIN || v > INT32_MAX) return false;
      *(int32_t *)out = (int32_t)v;
    } else {
      *(int64_t *)out = v;
    }
    return true;
  }
  double v = strtod(buf, &end);
  if (*end || end == buf) return false;
  if (t == ENG_DT_FLOAT)
    *(float *)out = (float)v;
  else
    *(double *)out = v;
  return true;
}

td_code eng_k_string_to_number(eng_kctx *c) {
  eng_dtype t = eng_node_attr_type(c->node, "out_type", ENG_DT_FLOAT);
  td_code rc = eng_c_string_to_number(c->node, c->err);
  if (rc || (rc = eng_kwant(c, 0, ENG_DT_STRING)) || (rc = eng_kout_raw(c, 0, t, &c->in[0].shape)))
    return rc;
  int64_t n = eng_tensor_numel(&c->in[0]);
  const eng_str *s = eng_tensor_strs(&c->in[0]);
  char *out = eng_tensor_data(&c->out[0]);
  size_t es = eng_dtype_size(t);
  for (int64_t i = 0; i < n; i++)
    if (!parse_number(s[i], t, out + (size_t)i * es))
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "StringToNumberOp could not correctly convert string: %.*s",
                       (int)(s[i].len > 200 ? 200 : s[i].len), s[i].data);
  return TD_OK;
}

/* --- Equal / NotEqual over strings --------------------------------------- */

td_code eng_k_equal_any(eng_kctx *c) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  if (a->dtype != ENG_DT_STRING && b->dtype != ENG_DT_STRING) return eng_k_compare(c);
  if (a->dtype != b->dtype)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "operands are %s and %s", eng_dtype_name(a->dtype),
                     eng_dtype_name(b->dtype));
  eng_shape s;
  td_code rc = eng_broadcast_shape(&a->shape, &b->shape, &s, c->err);
  if (rc) {
    td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
    return rc;
  }
  if ((rc = eng_kout_raw(c, 0, ENG_DT_BOOL, &s))) return rc;
  bool want = !strcmp(c->node->op, "Equal");
  const eng_shape *in[2] = {&a->shape, &b->shape};
  eng_bcast it;
  eng_bcast_init(&it, &s, 2, in);
  const eng_str *x = eng_tensor_strs(a), *y = eng_tensor_strs(b);
  bool *out = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0, n = eng_shape_numel(&s); i < n; i++, eng_bcast_next(&it)) {
    eng_str p = x[it.off[0]], q = y[it.off[1]];
    out[i] = (p.len == q.len && !memcmp(p.data, q.data, p.len)) == want;
  }
  return TD_OK;
}

/* --- UnsortedSegmentJoin ------------------------------------------------ */

/* Joins the rows of input 0 (rows: the elements under segment_ids' shape,
 * a prefix of the input's) into num_segments outputs, in order of
 * appearance, with the separator between; an id outside [0,
 * num_segments) is INVALID_ARGUMENT as in TensorFlow. */
td_code eng_k_unsorted_segment_join(eng_kctx *c) {
  const eng_tensor *x = &c->in[0], *ids = &c->in[1];
  int64_t nseg;
  td_code rc = eng_kwant(c, 0, ENG_DT_STRING);
  if (rc || (rc = eng_karg_int(c, 2, &nseg))) return rc;
  if (ids->dtype != ENG_DT_INT32 && ids->dtype != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "segment_ids must be int32 or int64");
  if (nseg < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "Number of segments cannot be negative");
  if (ids->shape.rank > x->shape.rank)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "segment_ids have a higher rank than the input");
  for (int d = 0; d < ids->shape.rank; d++)
    if (ids->shape.dim[d] != x->shape.dim[d])
      return eng_kfail(c, TD_INVALID_ARGUMENT, "segment_ids.shape must be a prefix of input.shape");
  int64_t nrow = eng_tensor_numel(ids), inner = nrow ? eng_tensor_numel(x) / nrow : 0;
  eng_shape out = {.rank = 1 + x->shape.rank - ids->shape.rank};
  if (out.rank > ENG_MAX_RANK) return eng_kfail(c, TD_UNIMPLEMENTED, "rank above %d", ENG_MAX_RANK);
  out.dim[0] = nseg;
  int64_t cells = nseg;
  for (int d = ids->shape.rank; d < x->shape.rank; d++) {
    out.dim[1 + d - ids->shape.rank] = x->shape.dim[d];
    cells *= x->shape.dim[d];
  }
  const char *sep = eng_attr_str(c->node, "separator", "");
  size_t seplen = strlen(sep);
  /* Output cell -> the rows joined into it, as a linked list in order. */
  int64_t *first = malloc(sizeof *first * (size_t)(cells + 1));
  int64_t *next = malloc(sizeof *next * (size_t)(nrow * inner + 1));
  int64_t *last = malloc(sizeof *last * (size_t)(cells + 1));
  if (!first || !next || !last) {
    free(first), free(next), free(last);
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (int64_t i = 0; i < cells; i++) first[i] = last[i] = -1;
  for (int64_t r = 0; !rc && r < nrow; r++) {
    int64_t s = ids->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(ids))[r]
                                           : ((const int64_t *)eng_tensor_data(ids))[r];
    if (s < 0 || s >= nseg) {
      rc = eng_kfail(c, TD_INVALID_ARGUMENT,
                     "segment_ids are not allowed to exceed num_segments "
                     "or be negative (segment_ids[%lld] = %lld)",
                     (long long)r, (long long)s);
      break;
    }
    for (int64_t e = 0; e < inner; e++) {
      int64_t cell = s * inner + e, src = r * inner + e;
      next[src] = -1;
      if (last[cell] < 0)
        first[cell] = src;
      else
        next[last[cell]] = src;
      last[cell] = src;
    }
  }
  eng_strbuild b = {0};
  const eng_str *sv = eng_tensor_strs(x);
  for (int64_t cell = 0; !rc && cell < cells; cell++) {
    rc = eng_strbuild_add(c, &b, "", 0);
    for (int64_t k = first[cell]; !rc && k >= 0; k = next[k]) {
      if (k != first[cell]) rc = eng_strbuild_append(c, &b, sep, seplen);
      if (!rc) rc = eng_strbuild_append(c, &b, sv[k].data, sv[k].len);
    }
  }
  free(first), free(next), free(last);
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  return eng_strbuild_finish(c, &b, 0, &out);
}
