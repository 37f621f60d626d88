/* srv_jsonwrite: TF Serving's JSON output bytes (contract in srv_jsonwrite.h).
 *
 * Design notes.
 * - Output goes through a small rapidjson-PrettyWriter clone, because TF
 *   Serving clients compare bytes.
 * - Two number layouts on purpose: responses use TF's WriteDecimal
 *   (srv_json_format_*), while error messages quote nested decimals the way
 *   rapidjson's own Writer::Double prints them (format_rapidjson_double). */
#include "srv_jsonwrite.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_jsonparse.h"

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

/* --- fast float path ---------------------------------------------------
 * The same text as snprintf("%g") / ("%.9g") plus the strtof round-trip
 * check, without either call for the common case. The P significant digits
 * come from one multiplication or division by an exact power of ten in
 * double; that is off from the exact product by at most half a double ulp,
 * so the rounding to an integer agrees with printf's exact rounding unless
 * the fraction is within a hair of one half, where we defer to snprintf.
 * The round trip is decided the same way: the digits times an exact power
 * of ten, rounded once to double, then to float; when that double lies
 * next to a float rounding boundary, strtof decides. */
static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* a * 10^k for |k| <= 22, rounded once; false when k is out of range. */
static bool scale10(double a, int k, double *out) {
  if (k > 22 || k < -22) return false;
  *out = k >= 0 ? a * pow10_exact[k] : a / pow10_exact[-k];
  return true;
}

/* The P significant digits of a (> 0) as printf rounds them, and the
 * decimal exponent of the first; false when unsure. */
static bool sig_digits(double a, int P, uint64_t *digits, int *exp10) {
  int e = (int)floor(log10(a));
  for (int tries = 0; tries < 3; tries++) {
    double s;
    if (!scale10(a, P - 1 - e, &s)) return false;
    double lo = pow10_exact[P - 1], hi = pow10_exact[P];
    if (s < lo - 0.5) {
      e--;
      continue;
    }
    if (s >= hi) {
      e++;
      continue;
    }
    double fl = floor(s), frac = s - fl;
    if (fabs(frac - 0.5) < 1e-6) return false; /* a near-tie: let printf decide */
    uint64_t d = (uint64_t)fl + (frac > 0.5);
    if (d >= (uint64_t)hi) { /* 9.999995 -> 10.0000 */
      d /= 10;
      e++;
    }
    if (d < (uint64_t)lo) return false;
    *digits = d;
    *exp10 = e;
    return true;
  }
  return false;
}

/* Whether digits * 10^(exp10 - P + 1) reads back (strtof) as |v|; -1 unsure. */
static int round_trips(float v, uint64_t digits, int P, int exp10) {
  double q;
  if (!scale10((double)digits, exp10 - P + 1, &q)) return -1;
  float f = (float)q;
  if ((double)f != q) {
    float g = nextafterf(f, q > (double)f ? INFINITY : -INFINITY);
    double mid = ((double)f + (double)g) / 2;
    if (fabs(q - mid) <= fabs(q) * 0x1p-50) return -1;
  }
  return f == fabsf(v);
}

/* printf's %g layout for P digits d (exactly P of them) and exponent X. */
static int layout_g(bool neg, uint64_t d, int P, int X, char *out) {
  char dig[24];
  for (int i = P - 1; i >= 0; i--) {
    dig[i] = (char)('0' + d % 10);
    d /= 10;
  }
  int nd = P;
  while (nd > 1 && dig[nd - 1] == '0') nd--; /* %g drops trailing zeros */
  int k = 0;
  if (neg) out[k++] = '-';
  if (X < -4 || X >= P) {
    out[k++] = dig[0];
    if (nd > 1) {
      out[k++] = '.';
      for (int i = 1; i < nd; i++) out[k++] = dig[i];
    }
    out[k++] = 'e';
    out[k++] = X < 0 ? '-' : '+';
    int ax = X < 0 ? -X : X;
    if (ax >= 100) out[k++] = (char)('0' + ax / 100);
    out[k++] = (char)('0' + ax / 10 % 10);
    out[k++] = (char)('0' + ax % 10);
  } else if (X >= 0) {
    for (int i = 0; i <= X; i++) out[k++] = i < nd ? dig[i] : '0';
    if (nd > X + 1) {
      out[k++] = '.';
      for (int i = X + 1; i < nd; i++) out[k++] = dig[i];
    }
  } else {
    out[k++] = '0';
    out[k++] = '.';
    for (int i = 0; i < -X - 1; i++) out[k++] = '0';
    for (int i = 0; i < nd; i++) out[k++] = dig[i];
  }
  out[k] = '\0';
  return k;
}

/* TF's WriteDecimal text for a finite nonzero float, or -1 when unsure. */
static int fast_float(float v, char *tmp) {
  double a = fabs((double)v);
  uint64_t d;
  int X;
  if (!sig_digits(a, 6, &d, &X)) return -1;
  int rt = round_trips(v, d, 6, X);
  if (rt < 0) return -1;
  if (rt) return layout_g(v < 0, d, 6, X, tmp);
  if (!sig_digits(a, 9, &d, &X)) return -1;
  return layout_g(v < 0, d, 9, X, tmp);
}

int srv_json_format_float(float v, char *buf, size_t n) {
  if (!isfinite(v)) return special_number(v, buf, n);
  char tmp[48];
  int len = v != 0 ? fast_float(v, tmp) : -1;
  if (len < 0) {
    len = snprintf(tmp, sizeof tmp - 3, "%g", (double)v);
    if (strtof(tmp, NULL) != v) len = snprintf(tmp, sizeof tmp - 3, "%.9g", (double)v);
  }
  if (!memchr(tmp, '.', (size_t)len) && !memchr(tmp, 'e', (size_t)len)) {
    memcpy(tmp + len, ".0", 3);
    len += 2;
  }
  if (n > (size_t)len) {
    memcpy(buf, tmp, (size_t)len + 1);
  } else if (n) {
    memcpy(buf, tmp, n - 1);
    buf[n - 1] = '\0';
  }
  return len;
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

/* ============================ quoting values ============================== */

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
