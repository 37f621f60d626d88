/* Unicode kernels: StringLower / StringUpper with encoding "utf-8",
 * UnicodeDecode, UnicodeDecodeWithOffsets, UnicodeEncode and
 * UnicodeTranscode, with TensorFlow's error modes: "strict" fails the
 * request (INVALID_ARGUMENT), "replace" puts replacement_char where each
 * ill-formed sequence or invalid code point was, "ignore" drops it.
 * Codecs and case tables: eng_unicode.h. */
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_unicode.h"

typedef enum { ERR_STRICT, ERR_REPLACE, ERR_IGNORE } err_mode;

typedef struct {
  eng_uenc in, out;
  err_mode errors;
  int32_t repl;
  bool control; /* replace_control_characters: C0 controls become repl */
} uopts;

#define CFAIL(n, err, code, ...)                              \
  do {                                                        \
    td_code rc_ = td_err_set(err, code, __VA_ARGS__);         \
    td_err_prefix(err, "node '%s' (%s)", (n)->name, (n)->op); \
    return rc_;                                               \
  } while (0)

static td_code read_opts(const eng_node *n, uopts *o, td_err *err) {
  *o = (uopts){ENG_UTF8, ENG_UTF8, ERR_REPLACE, 0xFFFD, false};
  const char *in = eng_attr_str(n, "input_encoding", NULL);
  const char *out = eng_attr_str(n, "output_encoding", NULL);
  if (in && !eng_uenc_parse(in, &o->in))
    CFAIL(n, err, TD_UNIMPLEMENTED,
          "input_encoding '%s' is not supported (UTF-8, UTF-16-BE/LE, UTF-32-BE/LE are)", in);
  if (out && !eng_uenc_parse(out, &o->out))
    CFAIL(n, err, TD_INVALID_ARGUMENT, "output_encoding '%s' is not UTF-8, UTF-16-BE or UTF-32-BE",
          out);
  const char *e = eng_attr_str(n, "errors", "replace");
  if (!strcmp(e, "strict"))
    o->errors = ERR_STRICT;
  else if (!strcmp(e, "ignore"))
    o->errors = ERR_IGNORE;
  else if (strcmp(e, "replace"))
    CFAIL(n, err, TD_INVALID_ARGUMENT, "errors '%s' is not strict, replace or ignore", e);
  int64_t r = eng_node_attr_int(n, "replacement_char", 0xFFFD);
  if (o->errors == ERR_REPLACE && !eng_uni_valid(r))
    CFAIL(n, err, TD_INVALID_ARGUMENT, "replacement_char %lld is not a valid code point",
          (long long)r);
  o->repl = (int32_t)r;
  o->control = eng_node_attr_bool(n, "replace_control_characters", false);
  return TD_OK;
}

td_code eng_c_unicode(const eng_node *n, td_err *err) {
  uopts o;
  return read_opts(n, &o, err);
}

/* Decodes s into cps (capacity s.len: a code point takes at least a
 * byte), with each one's first byte in starts when not NULL, applying the
 * error mode to ill-formed sequences. */
static td_code decode(eng_kctx *c, const uopts *o, eng_str s, int32_t *cps, int64_t *starts,
                      size_t *n) {
  const unsigned char *p = (const unsigned char *)s.data;
  size_t pos = 0, k = 0;
  while (pos < s.len) {
    size_t at = pos;
    int32_t cp = eng_utf_next(o->in, p, s.len, &pos);
    if (cp < 0) {
      if (o->errors == ERR_STRICT)
        return eng_kfail(c, TD_INVALID_ARGUMENT,
                         "invalid formatting on input string at byte %zu (errors='strict')", at);
      if (o->errors == ERR_IGNORE) continue;
      cp = o->repl;
    } else if (o->control && cp < 0x20) {
      cp = o->repl;
    }
    if (starts) starts[k] = (int64_t)at;
    cps[k++] = cp;
  }
  *n = k;
  return TD_OK;
}

static td_code encode_append(eng_kctx *c, eng_strbuild *b, eng_uenc enc, uint32_t cp) {
  char buf[4];
  return eng_strbuild_append(c, b, buf, eng_utf_put(enc, cp, buf));
}

static size_t max_len(const eng_tensor *t) {
  size_t m = 0;
  const eng_str *s = eng_tensor_strs(t);
  for (int64_t i = 0, n = eng_tensor_numel(t); i < n; i++)
    if (s[i].len > m) m = s[i].len;
  return m;
}

/* --- StringLower / StringUpper, encoding "utf-8" ------------------------- */

td_code eng_k_string_case_utf8(eng_kctx *c, bool upper) {
  td_code rc = eng_kwant(c, 0, ENG_DT_STRING);
  if (rc) return rc;
  uopts o = {ENG_UTF8, ENG_UTF8, ERR_REPLACE, 0xFFFD, false};
  const eng_tensor *x = &c->in[0];
  int32_t *cps = malloc(sizeof *cps * (max_len(x) + 1));
  if (!cps) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  const eng_str *s = eng_tensor_strs(x);
  eng_strbuild b = {0};
  for (int64_t i = 0, n = eng_tensor_numel(x); !rc && i < n; i++) {
    size_t m;
    /* TensorFlow hands ICU a C string: the text ends at the first NUL. */
    eng_str t = s[i];
    const char *nul = t.len ? memchr(t.data, 0, t.len) : NULL;
    if (nul) t.len = (size_t)(nul - t.data);
    rc = eng_strbuild_add(c, &b, "", 0);
    if (!rc) rc = decode(c, &o, t, cps, NULL, &m);
    for (size_t k = 0; !rc && k < m; k++) {
      uint32_t to[3];
      int nt;
      if (upper) {
        nt = eng_unicase_upper((uint32_t)cps[k], to);
      } else if (cps[k] == 0x03A3 && eng_unicase_final_sigma(cps, m, k)) {
        to[0] = 0x03C2, nt = 1;
      } else {
        nt = eng_unicase_lower((uint32_t)cps[k], to);
      }
      for (int q = 0; !rc && q < nt; q++) rc = encode_append(c, &b, ENG_UTF8, to[q]);
    }
  }
  free(cps);
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  return eng_strbuild_finish(c, &b, 0, &x->shape);
}

/* --- UnicodeDecode, UnicodeDecodeWithOffsets ------------------------------ */

static td_code unicode_decode(eng_kctx *c, bool offsets) {
  uopts o;
  td_code rc = read_opts(c->node, &o, c->err);
  if (rc || (rc = eng_kwant(c, 0, ENG_DT_STRING))) return rc;
  eng_dtype st = eng_node_attr_type(c->node, "Tsplits", ENG_DT_INT64);
  if (st != ENG_DT_INT32 && st != ENG_DT_INT64)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Tsplits must be int32 or int64");
  const eng_tensor *x = &c->in[0];
  int64_t n = eng_tensor_numel(x), total = 0;
  const eng_str *s = eng_tensor_strs(x);
  for (int64_t i = 0; i < n; i++) total += (int64_t)s[i].len;
  /* Decode everything into scratch sized by bytes, then copy out. */
  int32_t *cps = malloc(sizeof *cps * (size_t)(total + 1));
  int64_t *starts = offsets ? malloc(sizeof *starts * (size_t)(total + 1)) : NULL;
  int64_t *splits = malloc(sizeof *splits * (size_t)(n + 1));
  if (!cps || !splits || (offsets && !starts)) {
    free(cps), free(starts), free(splits);
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  size_t k = 0;
  splits[0] = 0;
  for (int64_t i = 0; !rc && i < n; i++) {
    size_t m;
    rc = decode(c, &o, s[i], cps + k, offsets ? starts + k : NULL, &m);
    k += m;
    splits[i + 1] = (int64_t)k;
  }
  eng_shape ss = eng_shape_make(1, (int64_t[]){n + 1});
  eng_shape sv = eng_shape_make(1, (int64_t[]){(int64_t)k});
  if (!rc) rc = eng_kout_raw(c, 0, st, &ss);
  if (!rc) rc = eng_kout_raw(c, 1, ENG_DT_INT32, &sv);
  if (!rc && offsets) rc = eng_kout_raw(c, 2, ENG_DT_INT64, &sv);
  if (!rc) {
    for (int64_t i = 0; i <= n; i++)
      if (st == ENG_DT_INT32)
        ((int32_t *)eng_tensor_data(&c->out[0]))[i] = (int32_t)splits[i];
      else
        ((int64_t *)eng_tensor_data(&c->out[0]))[i] = splits[i];
    if (k) memcpy(eng_tensor_data(&c->out[1]), cps, sizeof *cps * k);
    if (offsets && k) memcpy(eng_tensor_data(&c->out[2]), starts, sizeof *starts * k);
  }
  free(cps), free(starts), free(splits);
  return rc;
}

td_code eng_k_unicode_decode(eng_kctx *c) { return unicode_decode(c, false); }
td_code eng_k_unicode_decode_with_offsets(eng_kctx *c) { return unicode_decode(c, true); }

/* --- UnicodeEncode ------------------------------------------------------- */

/* TensorFlow builds each row as UTF-16 (ICU's UnicodeString), appending
 * every value, and with errors="ignore" the invalid ones too: a value past
 * U+10FFFF (or negative) appends nothing, a surrogate appends its unit, so
 * a high one followed by a low one makes one supplementary code point and a
 * lone one is written raw to UTF-16 / UTF-32 and as U+FFFD to UTF-8.
 * "Invalid" is ICU's U_IS_UNICODE_CHAR: noncharacters (U+FDD0..U+FDEF,
 * U+xFFFE, U+xFFFF) are invalid too, so replaced, or kept by "ignore". */
typedef struct {
  eng_strbuild *b;
  eng_uenc enc;
  int32_t high; /* a pending high surrogate, or -1 */
} row_writer;

static td_code put_lone(eng_kctx *c, row_writer *w, uint32_t unit) {
  char buf[4];
  if (w->enc == ENG_UTF8) return encode_append(c, w->b, ENG_UTF8, 0xFFFD);
  if (w->enc == ENG_UTF16BE || w->enc == ENG_UTF16LE) {
    bool be = w->enc == ENG_UTF16BE;
    buf[be ? 0 : 1] = (char)(unit >> 8);
    buf[be ? 1 : 0] = (char)(unit & 0xFF);
    return eng_strbuild_append(c, w->b, buf, 2);
  }
  for (int k = 0; k < 4; k++) buf[w->enc == ENG_UTF32BE ? k : 3 - k] = (char)(unit >> (24 - 8 * k));
  return eng_strbuild_append(c, w->b, buf, 4);
}

static td_code flush_high(eng_kctx *c, row_writer *w) {
  td_code rc = w->high >= 0 ? put_lone(c, w, (uint32_t)w->high) : TD_OK;
  w->high = -1;
  return rc;
}

static bool unicode_char(int64_t cp) {
  return eng_uni_valid(cp) && !(cp >= 0xFDD0 && cp <= 0xFDEF) && (cp & 0xFFFE) != 0xFFFE;
}

static td_code put_value(eng_kctx *c, const uopts *o, row_writer *w, int64_t cp) {
  if (!unicode_char(cp)) {
    if (o->errors == ERR_STRICT)
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "code point %lld is outside Unicode or a surrogate (errors='strict')",
                       (long long)cp);
    if (o->errors == ERR_REPLACE) {
      cp = o->repl;
    } else if (cp < 0 || cp > 0x10FFFF) {
      return TD_OK;
    } else if (cp < 0xD800 || cp > 0xDFFF) {
      /* a noncharacter: kept */
    } else if (cp < 0xDC00) {
      td_code rc = flush_high(c, w);
      w->high = (int32_t)cp;
      return rc;
    } else if (w->high >= 0) {
      uint32_t pair = 0x10000 + (((uint32_t)w->high - 0xD800) << 10) + ((uint32_t)cp - 0xDC00);
      w->high = -1;
      return encode_append(c, w->b, w->enc, pair);
    } else {
      return put_lone(c, w, (uint32_t)cp);
    }
  }
  td_code rc = flush_high(c, w);
  return rc ? rc : encode_append(c, w->b, w->enc, (uint32_t)cp);
}

td_code eng_k_unicode_encode(eng_kctx *c) {
  uopts o;
  td_code rc = read_opts(c->node, &o, c->err);
  if (rc || (rc = eng_kwant(c, 0, ENG_DT_INT32))) return rc;
  const eng_tensor *v = &c->in[0], *sp = &c->in[1];
  if (v->shape.rank != 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "input_values must be a vector");
  if ((sp->dtype != ENG_DT_INT32 && sp->dtype != ENG_DT_INT64) || sp->shape.rank != 1 ||
      sp->shape.dim[0] < 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input_splits must be a non-empty int vector");
  int64_t nrows = sp->shape.dim[0] - 1, nv = v->shape.dim[0], prev = 0;
  const int32_t *vals = eng_tensor_data(v);
  eng_strbuild b = {0};
  for (int64_t r = 0; !rc && r <= nrows; r++) {
    int64_t at = sp->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(sp))[r]
                                           : ((const int64_t *)eng_tensor_data(sp))[r];
    if ((r == 0 && at != 0) || at < prev || at > nv || (r == nrows && at != nv)) {
      rc = eng_kfail(c, TD_INVALID_ARGUMENT,
                     "input_splits must start at 0, not decrease and end at %lld", (long long)nv);
      break;
    }
    if (r) {
      row_writer w = {&b, o.out, -1};
      rc = eng_strbuild_add(c, &b, "", 0);
      for (int64_t k = prev; !rc && k < at; k++) rc = put_value(c, &o, &w, vals[k]);
      if (!rc) rc = flush_high(c, &w);
    }
    prev = at;
  }
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  eng_shape out = eng_shape_make(1, (int64_t[]){nrows});
  return eng_strbuild_finish(c, &b, 0, &out);
}

/* --- UnicodeTranscode ------------------------------------------------------ */

td_code eng_k_unicode_transcode(eng_kctx *c) {
  uopts o;
  td_code rc = read_opts(c->node, &o, c->err);
  if (rc || (rc = eng_kwant(c, 0, ENG_DT_STRING))) return rc;
  const eng_tensor *x = &c->in[0];
  int32_t *cps = malloc(sizeof *cps * (max_len(x) + 1));
  if (!cps) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  const eng_str *s = eng_tensor_strs(x);
  eng_strbuild b = {0};
  for (int64_t i = 0, n = eng_tensor_numel(x); !rc && i < n; i++) {
    size_t m;
    rc = eng_strbuild_add(c, &b, "", 0);
    if (!rc) rc = decode(c, &o, s[i], cps, NULL, &m);
    for (size_t k = 0; !rc && k < m; k++) rc = encode_append(c, &b, o.out, (uint32_t)cps[k]);
  }
  free(cps);
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  return eng_strbuild_finish(c, &b, 0, &x->shape);
}
