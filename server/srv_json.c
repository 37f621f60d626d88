/* srv_json: JSON <-> tensors for the REST API (contract in srv_json.h).
 *
 * Design notes.
 * - The parser is ours, not cJSON_Parse: cJSON keeps numbers as doubles only,
 *   so it cannot tell 1 from 1.0 (int32 inputs must reject 1.0) nor keep int64
 *   exact, and it rejects NaN/Infinity, which TF Serving accepts. We follow
 *   rapidjson's grammar and messages (TF Serving's parser) and still build a
 *   cJSON tree. The extra facts live where cJSON does not look: integer
 *   literals carry private type bits above cJSON's 0xFF type byte (every cJSON
 *   function masks with 0xFF); integers beyond 2^53 keep their digits in
 *   valuestring (cJSON_Delete frees it); string nodes keep their byte length
 *   in valueint, unused by cJSON for strings.
 * - Decoding walks each JSON value three times at most: a check pass that
 *   reproduces TF's validation order and messages without writing, a length
 *   pass for string tensors, then the write pass. Nothing is allocated before
 *   the check pass has proved the value dense, so a tensor is never larger
 *   than the number of leaves in the body (a shape read off the first
 *   elements alone could claim terabytes).
 * - Output goes through a small rapidjson-PrettyWriter clone, because TF
 *   Serving clients compare bytes. */
#include "srv_json.h"

#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F_INT (1 << 12)  /* integer literal within int64 */
#define F_UINT (1 << 13) /* integer literal within (INT64_MAX, UINT64_MAX] */
#define EXACT_INT (1ULL << 53) /* integers up to here are exact doubles */

/* ===================== writer (rapidjson PrettyWriter) ===================== */

void srv_json_writer_init(srv_json_writer *w, td_buf *out) {
  w->out = out;
  w->single_line = false;
  w->truncated = false;
  w->depth = 0;
  w->start = out->len;
  w->limit = 0;
}

static bool w_room(srv_json_writer *w) {
  if (w->truncated) return false;
  if (w->limit && w->out->len - w->start >= w->limit) {
    w->truncated = true;
    return false;
  }
  return true;
}

static void w_indent(srv_json_writer *w) {
  static const char spaces[] = "                                ";
  size_t n = (size_t)w->depth * 4;
  while (n) {
    size_t k = n < sizeof spaces - 1 ? n : sizeof spaces - 1;
    td_buf_append(w->out, spaces, k);
    n -= k;
  }
}

/* rapidjson's PrettyPrefix: separators and indentation before a value. */
static void w_prefix(srv_json_writer *w) {
  if (w->depth == 0) return;
  td_buf *o = w->out;
  if (w->level[w->depth - 1].in_array) {
    if (w->level[w->depth - 1].count > 0) {
      td_buf_putc(o, ',');
      if (w->single_line) td_buf_putc(o, ' ');
    }
    if (!w->single_line) {
      td_buf_putc(o, '\n');
      w_indent(w);
    }
  } else {
    unsigned count = w->level[w->depth - 1].count;
    if (count > 0)
      td_buf_puts(o, count % 2 == 0 ? ",\n" : ": ");
    else
      td_buf_putc(o, '\n');
    if (count % 2 == 0) w_indent(w);
  }
  w->level[w->depth - 1].count++;
}

static void w_begin(srv_json_writer *w, bool array) {
  if (!w_room(w)) return;
  if (w->depth == SRV_JSON_WRITER_DEPTH) {
    w->truncated = true;
    return;
  }
  w_prefix(w);
  td_buf_putc(w->out, array ? '[' : '{');
  w->level[w->depth].in_array = array;
  w->level[w->depth].count = 0;
  w->depth++;
}

static void w_end(srv_json_writer *w, bool array) {
  if (!w_room(w) || w->depth == 0) return;
  w->depth--;
  if (w->level[w->depth].count > 0 && !(array && w->single_line)) {
    td_buf_putc(w->out, '\n');
    w_indent(w);
  }
  td_buf_putc(w->out, array ? ']' : '}');
}

void srv_json_writer_begin_object(srv_json_writer *w) { w_begin(w, false); }
void srv_json_writer_end_object(srv_json_writer *w) { w_end(w, false); }
void srv_json_writer_begin_array(srv_json_writer *w) { w_begin(w, true); }
void srv_json_writer_end_array(srv_json_writer *w) { w_end(w, true); }

void srv_json_writer_string(srv_json_writer *w, const char *s, size_t len) {
  if (!w_room(w)) return;
  w_prefix(w);
  if (w->limit) {
    size_t used = w->out->len - w->start;
    size_t left = used < w->limit ? w->limit - used : 0;
    if (len > left) {
      size_t before = w->out->len;
      srv_json_append_string(w->out, s, left);
      if (w->out->len > before) w->out->len--; /* drop the closing quote */
      if (w->out->data) w->out->data[w->out->len] = '\0';
      w->truncated = true;
      return;
    }
  }
  srv_json_append_string(w->out, s, len);
}

void srv_json_writer_key(srv_json_writer *w, const char *s, size_t len) {
  srv_json_writer_string(w, s, len);
}

void srv_json_writer_raw(srv_json_writer *w, const char *text, size_t len) {
  if (!w_room(w)) return;
  w_prefix(w);
  td_buf_append(w->out, text, len);
}

void srv_json_writer_float(srv_json_writer *w, float v) {
  char b[SRV_JSON_NUMBER_MAX];
  int n = srv_json_format_float(v, b, sizeof b);
  srv_json_writer_raw(w, b, (size_t)n);
}

void srv_json_writer_double(srv_json_writer *w, double v) {
  char b[SRV_JSON_NUMBER_MAX];
  int n = srv_json_format_double(v, b, sizeof b);
  srv_json_writer_raw(w, b, (size_t)n);
}

static int fmt_u64(uint64_t v, bool neg, char *b) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  int k = 0;
  if (neg) b[k++] = '-';
  while (n) b[k++] = tmp[--n];
  b[k] = '\0';
  return k;
}

static int fmt_i64(int64_t v, char *b) {
  uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  return fmt_u64(mag, v < 0, b);
}

void srv_json_writer_int64(srv_json_writer *w, int64_t v) {
  char b[24];
  srv_json_writer_raw(w, b, (size_t)fmt_i64(v, b));
}

void srv_json_writer_uint64(srv_json_writer *w, uint64_t v) {
  char b[24];
  srv_json_writer_raw(w, b, (size_t)fmt_u64(v, false, b));
}

void srv_json_writer_bool(srv_json_writer *w, bool v) {
  srv_json_writer_raw(w, v ? "true" : "false", v ? 4 : 5);
}

/* ========================= strings, numbers, base64 ======================== */

void srv_json_append_string(td_buf *out, const char *s, size_t len) {
  static const char hex[] = "0123456789ABCDEF";
  td_buf_reserve(out, len + 2);
  td_buf_putc(out, '"');
  size_t run = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    td_buf_append(out, s + run, i - run);
    run = i + 1;
    char e[6] = {'\\', 0};
    size_t n = 2;
    switch (c) {
      case '"': e[1] = '"'; break;
      case '\\': e[1] = '\\'; break;
      case '\b': e[1] = 'b'; break;
      case '\f': e[1] = 'f'; break;
      case '\n': e[1] = 'n'; break;
      case '\r': e[1] = 'r'; break;
      case '\t': e[1] = 't'; break;
      default:
        e[1] = 'u', e[2] = '0', e[3] = '0', e[4] = hex[c >> 4], e[5] = hex[c & 15];
        n = 6;
    }
    td_buf_append(out, e, n);
  }
  td_buf_append(out, s + run, len - run);
  td_buf_putc(out, '"');
}

static int finish_number(char *tmp, int len, char *buf, size_t n) {
  if (!strchr(tmp, '.') && !strchr(tmp, 'e')) {
    memcpy(tmp + len, ".0", 3);
    len += 2;
  }
  if (n) snprintf(buf, n, "%s", tmp);
  return len;
}

static int special_number(double v, char *buf, size_t n) {
  const char *t = isnan(v) ? "NaN" : signbit(v) ? "-Infinity" : "Infinity";
  if (n) snprintf(buf, n, "%s", t);
  return (int)strlen(t);
}

int srv_json_format_float(float v, char *buf, size_t n) {
  if (!isfinite(v)) return special_number(v, buf, n);
  char tmp[48];
  int len = snprintf(tmp, sizeof tmp - 3, "%g", (double)v);
  if (strtof(tmp, NULL) != v) len = snprintf(tmp, sizeof tmp - 3, "%.9g", (double)v);
  return finish_number(tmp, len, buf, n);
}

int srv_json_format_double(double v, char *buf, size_t n) {
  if (!isfinite(v)) return special_number(v, buf, n);
  char tmp[48];
  int len = snprintf(tmp, sizeof tmp - 3, "%g", v);
  if (strtod(tmp, NULL) != v) len = snprintf(tmp, sizeof tmp - 3, "%.17g", v);
  return finish_number(tmp, len, buf, n);
}

/* rapidjson's Writer::Double (shortest round-trip digits, then its Prettify
 * layout: 1.0, 0.001, 1e30, 1.5e-7). Only error messages use it: TF quotes
 * nested decimals this way. */
static int format_rapidjson_double(double d, char *out) {
  if (!isfinite(d)) return special_number(d, out, 40);
  if (d == 0) return sprintf(out, signbit(d) ? "-0.0" : "0.0");
  char tmp[40];
  for (int prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
    if (strtod(tmp, NULL) == d) break;
  }
  char digits[24];
  int len = 0, k = 0;
  const char *p = tmp;
  bool neg = *p == '-';
  if (neg) p++;
  for (; *p && *p != 'e'; p++)
    if (*p >= '0' && *p <= '9') digits[len++] = *p;
  int e10 = *p == 'e' ? atoi(p + 1) : 0;
  while (len > 1 && digits[len - 1] == '0') len--;
  k = e10 - (len - 1);
  int kk = len + k;
  char *o = out;
  if (neg) *o++ = '-';
  if (k >= 0 && kk <= 21) {
    memcpy(o, digits, (size_t)len), o += len;
    for (int i = 0; i < k; i++) *o++ = '0';
    *o++ = '.', *o++ = '0';
  } else if (kk > 0 && kk <= 21) {
    memcpy(o, digits, (size_t)kk), o += kk;
    *o++ = '.';
    memcpy(o, digits + kk, (size_t)(len - kk)), o += len - kk;
  } else if (kk > -6 && kk <= 0) {
    *o++ = '0', *o++ = '.';
    for (int i = 0; i < -kk; i++) *o++ = '0';
    memcpy(o, digits, (size_t)len), o += len;
  } else {
    *o++ = digits[0];
    if (len > 1) {
      *o++ = '.';
      memcpy(o, digits + 1, (size_t)(len - 1)), o += len - 1;
    }
    o += sprintf(o, "e%d", kk - 1);
  }
  *o = '\0';
  return (int)(o - out);
}

static const signed char unb64[256] = {
    ['A'] = 1,  ['B'] = 2,  ['C'] = 3,  ['D'] = 4,  ['E'] = 5,  ['F'] = 6,  ['G'] = 7,
    ['H'] = 8,  ['I'] = 9,  ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14,
    ['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21,
    ['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28,
    ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35,
    ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42,
    ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49,
    ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
    ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63,
    ['/'] = 64,
}; /* value + 1; 0 = not in the alphabet */

static bool b64_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool srv_json_b64_decode(const char *src, size_t n, char *dst, size_t *out_len) {
  const unsigned char *s = (const unsigned char *)src;
  size_t i = 0, o = 0;
  unsigned acc = 0;
  int state = 0;
  for (; i < n; i++) {
    unsigned char c = s[i];
    if (unb64[c]) {
      acc = (acc << 6) | (unsigned)(unb64[c] - 1);
      if (++state == 4) {
        if (dst) {
          dst[o] = (char)(acc >> 16);
          dst[o + 1] = (char)(acc >> 8);
          dst[o + 2] = (char)acc;
        }
        o += 3;
        state = 0;
        acc = 0;
      }
    } else if (c == '=' || c == '.') {
      break;
    } else if (!b64_space(c)) {
      return false;
    }
  }
  int expected_pad = 0;
  if (state == 1) return false;
  if (state == 2) {
    if (dst) dst[o] = (char)(acc >> 4);
    o += 1;
    expected_pad = 2;
  } else if (state == 3) {
    if (dst) {
      dst[o] = (char)(acc >> 10);
      dst[o + 1] = (char)(acc >> 2);
    }
    o += 2;
    expected_pad = 1;
  }
  int pad = 0;
  for (; i < n; i++) {
    if (s[i] == '=' || s[i] == '.')
      pad++;
    else if (!b64_space(s[i]))
      return false;
  }
  if (pad != 0 && pad != expected_pad) return false;
  if (out_len) *out_len = o;
  return true;
}

void srv_json_b64_encode(td_buf *out, const void *data, size_t n) {
  static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const unsigned char *p = data;
  if (n > ((size_t)-1 / 2) / 4 * 3 || !td_buf_reserve(out, (n + 2) / 3 * 4)) {
    out->oom = true;
    return;
  }
  char *o = out->data + out->len;
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
    *o++ = tbl[v >> 18], *o++ = tbl[(v >> 12) & 63], *o++ = tbl[(v >> 6) & 63];
    *o++ = tbl[v & 63];
  }
  if (i < n) {
    unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0);
    *o++ = tbl[v >> 18], *o++ = tbl[(v >> 12) & 63];
    *o++ = i + 1 < n ? tbl[(v >> 6) & 63] : '=';
    *o++ = '=';
  }
  out->len = (size_t)(o - out->data);
  out->data[out->len] = '\0';
}

/* ================================ parser ================================== */

typedef struct jparser {
  const unsigned char *s;
  size_t n, i;
  td_code code; /* of the first failure */
  td_err *err;
} jparser;

static int jp_peek(const jparser *p) { return p->i < p->n ? p->s[p->i] : 0; }

static void jp_ws(jparser *p) {
  while (p->i < p->n) {
    unsigned char c = p->s[p->i];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
    p->i++;
  }
}

static cJSON *jp_fail(jparser *p, const char *what, size_t off) {
  p->code = TD_INVALID_ARGUMENT;
  td_err_set(p->err, TD_INVALID_ARGUMENT, "JSON Parse error: %s at offset: %zu", what, off);
  return NULL;
}

static cJSON *jp_oom(jparser *p) {
  p->code = TD_RESOURCE_EXHAUSTED;
  td_err_set(p->err, TD_RESOURCE_EXHAUSTED, "out of memory parsing the JSON body");
  return NULL;
}

static cJSON *jp_value(jparser *p, int depth, bool root);

static cJSON *jp_literal(jparser *p, const char *word, int type) {
  for (size_t k = 0; word[k]; k++, p->i++)
    if (jp_peek(p) != word[k]) return jp_fail(p, "Invalid value.", p->i);
  cJSON *v = cJSON_CreateNull();
  if (!v) return jp_oom(p);
  v->type = type;
  return v;
}

static int jp_hex4(jparser *p) {
  unsigned v = 0;
  for (int k = 0; k < 4; k++, p->i++) {
    int c = jp_peek(p);
    if (c >= '0' && c <= '9')
      v = v << 4 | (unsigned)(c - '0');
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
      v = v << 4 | (unsigned)((c | 0x20) - 'a' + 10);
    else
      return -1;
  }
  return (int)v;
}

/* Reads a string at p->i (on the opening quote) into a cJSON_malloc'd buffer. */
static char *jp_string(jparser *p, size_t *out_len) {
  size_t start = ++p->i, j = start;
  while (j < p->n && p->s[j] != '"' && p->s[j] != 0) j += p->s[j] == '\\' ? 2 : 1;
  size_t cap = (j < p->n ? j : p->n) - start + 1;
  char *buf = cJSON_malloc(cap);
  if (!buf) return (char *)jp_oom(p);
  size_t o = 0;
  const char *bad = NULL;
  size_t bad_at = 0;
  for (;;) {
    int c = jp_peek(p);
    char enc[4];
    size_t en = 1;
    if (c == '"') {
      p->i++;
      break;
    }
    if (c == '\\') {
      size_t esc = p->i++;
      int e = jp_peek(p);
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *hit = e ? strchr(from, e) : NULL;
      if (hit) {
        enc[0] = to[hit - from];
        p->i++;
      } else if (e == 'u') {
        p->i++;
        int cp = jp_hex4(p);
        if (cp < 0) {
          bad = "Incorrect hex digit after \\u escape in string.", bad_at = esc;
          break;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          int lo = -1;
          if (jp_peek(p) == '\\' && (p->i++, jp_peek(p) == 'u')) {
            p->i++;
            lo = jp_hex4(p);
            if (lo < 0) {
              bad = "Incorrect hex digit after \\u escape in string.", bad_at = esc;
              break;
            }
          }
          if (lo < 0xDC00 || lo > 0xDFFF) {
            bad = "The surrogate pair in string is invalid.", bad_at = esc;
            break;
          }
          cp = (((cp - 0xD800) << 10) | (lo - 0xDC00)) + 0x10000;
        }
        if (cp < 0x80) {
          enc[0] = (char)cp;
        } else if (cp < 0x800) {
          enc[0] = (char)(0xC0 | cp >> 6), enc[1] = (char)(0x80 | (cp & 63)), en = 2;
        } else if (cp < 0x10000) {
          enc[0] = (char)(0xE0 | cp >> 12), enc[1] = (char)(0x80 | ((cp >> 6) & 63));
          enc[2] = (char)(0x80 | (cp & 63)), en = 3;
        } else {
          enc[0] = (char)(0xF0 | cp >> 18), enc[1] = (char)(0x80 | ((cp >> 12) & 63));
          enc[2] = (char)(0x80 | ((cp >> 6) & 63)), enc[3] = (char)(0x80 | (cp & 63)), en = 4;
        }
      } else {
        bad = "Invalid escape character in string.", bad_at = esc;
        break;
      }
    } else if (c < 0x20) {
      bad = c == 0 ? "Missing a closing quotation mark in string." : "Invalid encoding in string.";
      bad_at = p->i;
      break;
    } else {
      enc[0] = (char)c;
      p->i++;
    }
    /* An escape never grows its text, so cap (the raw length) suffices;
     * the check keeps that a property we do not have to trust. */
    if (o + en >= cap) {
      bad = "Invalid encoding in string.", bad_at = p->i;
      break;
    }
    memcpy(buf + o, enc, en);
    o += en;
  }
  if (bad) {
    cJSON_free(buf);
    return (char *)jp_fail(p, bad, bad_at);
  }
  buf[o] = '\0';
  *out_len = o;
  return buf;
}

static cJSON *jp_string_node(jparser *p) {
  size_t len;
  char *s = jp_string(p, &len);
  if (!s) return NULL;
  cJSON *v = cJSON_CreateNull();
  if (!v) {
    cJSON_free(s);
    return jp_oom(p);
  }
  v->type = cJSON_String;
  v->valuestring = s;
  v->valueint = len <= INT_MAX ? (int)len : -1;
  return v;
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

static cJSON *jp_number(jparser *p) {
  size_t start = p->i;
  bool minus = jp_peek(p) == '-';
  if (minus) p->i++;
  int c = jp_peek(p);
  if (c == 'N' || c == 'I') {
    const char *word = c == 'N' ? "NaN" : "Inf";
    for (int k = 0; k < 3; k++, p->i++)
      if (jp_peek(p) != word[k]) return jp_fail(p, "Invalid value.", p->i);
    if (c == 'I' && jp_peek(p) == 'i') {
      for (const char *w = "inity"; *w; w++, p->i++)
        if (jp_peek(p) != *w) return jp_fail(p, "Invalid value.", p->i);
    }
    cJSON *v = cJSON_CreateNumber(c == 'N' ? NAN : minus ? -INFINITY : INFINITY);
    return v ? v : jp_oom(p);
  }
  uint64_t mag = 0;
  bool overflow = false;
  if (c == '0') {
    p->i++;
  } else if (c >= '1' && c <= '9') {
    for (; is_digit(jp_peek(p)); p->i++) {
      unsigned d = (unsigned)(jp_peek(p) - '0');
      if (mag > (UINT64_MAX - d) / 10) overflow = true;
      mag = mag * 10 + d;
    }
  } else {
    return jp_fail(p, "Invalid value.", p->i);
  }
  bool integer = true;
  if (jp_peek(p) == '.') {
    p->i++;
    if (!is_digit(jp_peek(p))) return jp_fail(p, "Miss fraction part in number.", p->i);
    while (is_digit(jp_peek(p))) p->i++;
    integer = false;
  }
  if (jp_peek(p) == 'e' || jp_peek(p) == 'E') {
    p->i++;
    if (jp_peek(p) == '+' || jp_peek(p) == '-') p->i++;
    if (!is_digit(jp_peek(p))) return jp_fail(p, "Miss exponent in number.", p->i);
    while (is_digit(jp_peek(p))) p->i++;
    integer = false;
  }
  size_t len = p->i - start;
  char small[64];
  char *text = len < sizeof small ? small : malloc(len + 1);
  if (!text) return jp_oom(p);
  memcpy(text, p->s + start, len);
  text[len] = '\0';

  int flags = 0;
  double d;
  if (integer && !overflow && !minus) {
    flags = mag <= INT64_MAX ? F_INT : F_UINT;
    d = (double)mag;
  } else if (integer && !overflow && mag <= (uint64_t)INT64_MAX + 1) {
    flags = F_INT;
    d = mag ? -(double)mag : 0.0; /* rapidjson reads "-0" as the integer 0 */
  } else {
    d = strtod(text, NULL);
  }
  cJSON *v = NULL;
  if (isinf(d)) {
    jp_fail(p, "Number too big to be stored in double.", start);
  } else if (!(v = cJSON_CreateNumber(d))) {
    jp_oom(p);
  } else {
    v->type |= flags;
    if (flags && mag > EXACT_INT) {
      v->valuestring = cJSON_malloc(len + 1);
      if (v->valuestring) {
        memcpy(v->valuestring, text, len + 1);
      } else {
        cJSON_Delete(v);
        v = jp_oom(p);
      }
    }
  }
  if (text != small) free(text);
  return v;
}

static void jp_append(cJSON *parent, cJSON **tail, cJSON *v) {
  if (*tail) {
    (*tail)->next = v;
    v->prev = *tail;
  } else {
    parent->child = v;
  }
  *tail = v;
  parent->child->prev = v;
}

static cJSON *jp_container(jparser *p, int depth, bool array) {
  if (depth >= SRV_JSON_MAX_DEPTH) {
    char what[96];
    snprintf(what, sizeof what, "The document is nested more than %d levels deep.",
             SRV_JSON_MAX_DEPTH);
    return jp_fail(p, what, p->i);
  }
  cJSON *c = array ? cJSON_CreateArray() : cJSON_CreateObject();
  if (!c) return jp_oom(p);
  cJSON *tail = NULL;
  p->i++;
  jp_ws(p);
  if (jp_peek(p) == (array ? ']' : '}')) {
    p->i++;
    return c;
  }
  for (;;) {
    char *key = NULL;
    if (!array) {
      size_t klen;
      if (jp_peek(p) != '"') {
        jp_fail(p, "Missing a name for object member.", p->i);
        goto fail;
      }
      if (!(key = jp_string(p, &klen))) goto fail;
      jp_ws(p);
      if (jp_peek(p) != ':') {
        cJSON_free(key);
        jp_fail(p, "Missing a colon after a name of object member.", p->i);
        goto fail;
      }
      p->i++;
      jp_ws(p);
    }
    cJSON *v = jp_value(p, depth + 1, false);
    if (!v) {
      cJSON_free(key);
      goto fail;
    }
    v->string = key;
    jp_append(c, &tail, v);
    jp_ws(p);
    int ch = jp_peek(p);
    if (ch == ',') {
      p->i++;
      jp_ws(p);
    } else if (ch == (array ? ']' : '}')) {
      p->i++;
      return c;
    } else {
      jp_fail(p,
              array ? "Missing a comma or ']' after an array element."
                    : "Missing a comma or '}' after an object member.",
              p->i);
      goto fail;
    }
  }
fail:
  cJSON_Delete(c);
  return NULL;
}

static cJSON *jp_value(jparser *p, int depth, bool root) {
  switch (jp_peek(p)) {
    case 'n': return jp_literal(p, "null", cJSON_NULL);
    case 't': return jp_literal(p, "true", cJSON_True);
    case 'f': return jp_literal(p, "false", cJSON_False);
    case '"': return jp_string_node(p);
    case '{': return jp_container(p, depth, false);
    case '[': return jp_container(p, depth, true);
    case 0: case '}': case ']': case ',': case ':':
      /* rapidjson's iterative parser reports these by state */
      return jp_fail(p, root ? "The document is empty." : "Invalid value.", p->i);
    default: return jp_number(p);
  }
}

/* ============================ value accessors ============================= */

srv_json_numkind srv_json_number(const cJSON *v, int64_t *i, uint64_t *u) {
  if (!cJSON_IsNumber(v) || !(v->type & (F_INT | F_UINT))) return SRV_JSON_NUM_DOUBLE;
  bool big = v->valuestring != NULL;
  if (v->type & F_UINT) {
    if (u) *u = big ? strtoull(v->valuestring, NULL, 10) : (uint64_t)v->valuedouble;
    return SRV_JSON_NUM_UINT64;
  }
  if (i) *i = big ? strtoll(v->valuestring, NULL, 10) : (int64_t)v->valuedouble;
  return SRV_JSON_NUM_INT64;
}

size_t srv_json_string_len(const cJSON *v) {
  if (!cJSON_IsString(v) || !v->valuestring) return 0;
  return v->valueint > 0 ? (size_t)v->valueint : strlen(v->valuestring);
}

bool srv_json_is_b64_object(const cJSON *v) {
  return cJSON_IsObject(v) && v->child && !v->child->next && v->child->string &&
         strcmp(v->child->string, "b64") == 0 && cJSON_IsString(v->child);
}

static void write_tree(srv_json_writer *w, const cJSON *v) {
  if (w->truncated) return;
  switch (v->type & 0xFF) {
    case cJSON_False: srv_json_writer_bool(w, false); break;
    case cJSON_True: srv_json_writer_bool(w, true); break;
    case cJSON_Number: {
      int64_t i;
      uint64_t u;
      char b[48];
      switch (srv_json_number(v, &i, &u)) {
        case SRV_JSON_NUM_INT64: srv_json_writer_int64(w, i); break;
        case SRV_JSON_NUM_UINT64: srv_json_writer_uint64(w, u); break;
        default: srv_json_writer_raw(w, b, (size_t)format_rapidjson_double(v->valuedouble, b));
      }
      break;
    }
    case cJSON_String:
      srv_json_writer_string(w, v->valuestring ? v->valuestring : "", srv_json_string_len(v));
      break;
    case cJSON_Array:
    case cJSON_Object: {
      bool array = cJSON_IsArray(v);
      w_begin(w, array);
      for (const cJSON *c = v->child; c && !w->truncated; c = c->next) {
        if (!array) srv_json_writer_key(w, c->string ? c->string : "", c->string ? strlen(c->string) : 0);
        write_tree(w, c);
      }
      w_end(w, array);
      break;
    }
    default: srv_json_writer_raw(w, "null", 4);
  }
}

void srv_json_append_value(td_buf *out, const cJSON *v) {
  if (!v) {
    td_buf_puts(out, "null");
    return;
  }
  srv_json_writer w;
  srv_json_writer_init(&w, out);
  w.limit = SRV_JSON_VALUE_TEXT_MAX;
  int64_t i;
  if (cJSON_IsNumber(v) && srv_json_number(v, &i, NULL) == SRV_JSON_NUM_DOUBLE) {
    /* TF's JsonValueToString: rapidjson IsFloat() decimals print as float */
    double d = v->valuedouble;
    if (d >= -3.4028234e38 && d <= 3.4028234e38)
      srv_json_writer_float(&w, (float)d);
    else
      srv_json_writer_double(&w, d);
  } else {
    write_tree(&w, v);
  }
  if (w.truncated) td_buf_puts(out, "...");
}

/* ========================= requests and decoding ========================== */

td_code srv_json_parse_request(const char *body, size_t len, srv_json_request *out,
                               td_err *err) {
  if (len == 0) return td_err_set(err, TD_INVALID_ARGUMENT, "JSON Parse error: The document is empty");
  jparser p = {.s = (const unsigned char *)body, .n = len, .err = err};
  /* rapidjson's EncodedInputStream<UTF8> drops a byte-order mark, byte by
   * byte; offsets still count from the first byte. */
  static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
  for (int k = 0; k < 3; k++)
    if (jp_peek(&p) == bom[k]) p.i++;
  jp_ws(&p);
  cJSON *root = jp_value(&p, 0, true);
  if (!root) return p.code;
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
    cJSON_Delete(root);
    return TD_INVALID_ARGUMENT;
  }
  out->root = root;
  out->signature_name = sig ? sig->valuestring : NULL;
  return TD_OK;
}

void srv_json_request_free(srv_json_request *r) {
  if (!r) return;
  cJSON_Delete(r->root);
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

static const char *json_type_name(const cJSON *v) {
  switch (v->type & 0xFF) {
    case cJSON_NULL: return "Null";
    case cJSON_False: return "False";
    case cJSON_True: return "True";
    case cJSON_Object: return "Object";
    case cJSON_Array: return "Array";
    case cJSON_String: return "String";
    default: return "Number";
  }
}

static td_code type_error(td_err *err, const cJSON *v, eng_dtype dt) {
  return value_error(err, TD_INVALID_ARGUMENT, "JSON Value: ", v,
                     " Type: %s is not of expected type: %s", json_type_name(v),
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

static td_code alloc_input(eng_tensor *t, eng_dtype dt, const eng_shape *shape, slot *s,
                           td_err *err) {
  if (dt != ENG_DT_STRING) return eng_tensor_alloc(t, dt, shape, err);
  int64_t n = eng_shape_numel(shape);
  if (n < 0) return td_err_set(err, TD_INTERNAL, "bad decoded shape");
  return eng_tensor_alloc_strings(t, shape, s->lens, err);
}

static td_code alloc_lens(slot *s, const eng_shape *shape, td_err *err) {
  int64_t n = eng_shape_numel(shape);
  s->lens = calloc(n > 0 ? (size_t)n : 1, sizeof *s->lens);
  return s->lens ? TD_OK : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
}

/* ----- columnar ----- */

static td_code decode_columnar_one(const cJSON *v, const ldr_tensor_info *ti, eng_tensor *t,
                                   td_err *err) {
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
  if (!rc) rc = alloc_input(t, ti->dtype, &s.shape, &s, err);
  if (!rc) {
    f = (filler){.dt = ti->dtype, .shape = s.shape, .pass = PASS_WRITE, .limit = n, .t = t,
                 .err = err};
    rc = fill(&f, v, 0);
  }
  free(s.lens);
  return rc;
}

static td_code decode_columnar(const cJSON *val, const ldr_signature *sig, eng_tensor *inputs,
                               td_err *err) {
  if (!cJSON_IsObject(val) || srv_json_is_b64_object(val)) {
    if (sig->n_inputs > 1)
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "inputs is a plain value/list, but expecting an object as multiple "
                        "input tensors required as per tensorinfo_map");
    return decode_columnar_one(val, &sig->inputs[0], &inputs[0], err);
  }
  for (int k = 0; k < sig->n_inputs; k++) {
    const char *name = sig->inputs[k].alias;
    const cJSON *item = cJSON_GetObjectItemCaseSensitive(val, name);
    if (!item)
      return td_err_set(err, TD_INVALID_ARGUMENT, "Missing named input: %s in 'inputs' object.",
                        name);
    td_code rc = decode_columnar_one(item, &sig->inputs[k], &inputs[k], err);
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
                          td_err *err) {
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
    if (!rc) rc = alloc_input(&inputs[k], ti->dtype, &shape, s, err);
    if (!rc) rc = walk_rows(instances, ti, objects, s, PASS_WRITE, &inputs[k], total, err);
  }
out:
  for (int k = 0; slots && k < n; k++) free(slots[k].lens);
  free(slots);
  free(present);
  return rc;
}

td_code srv_json_decode_predict(const srv_json_request *r, const ldr_signature *sig,
                                eng_tensor *inputs, srv_json_format *fmt, td_err *err) {
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
    rc = decode_row(instances, sig, inputs, err);
  } else if (columns) {
    f = SRV_JSON_COLUMNAR;
    rc = decode_columnar(columns, sig, inputs, err);
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

void srv_json_encode_error(const char *message, td_buf *out) {
  srv_json_writer w;
  srv_json_writer_init(&w, out);
  srv_json_writer_begin_object(&w);
  srv_json_writer_key(&w, "error", 5);
  srv_json_writer_string(&w, message ? message : "", message ? strlen(message) : 0);
  srv_json_writer_end_object(&w);
}
