/* srv_jsonwrite: JSON output byte for byte as TF Serving writes it.
 * (Functions keep the srv_json_ prefix shared by the JSON family:
 * srv_jsonparse, srv_jsonwrite, srv_json.)
 *
 * What. TF Serving clients compare response bytes, so this module copies the
 * text rapidjson and TF Serving produce:
 *   - srv_json_writer, a clone of rapidjson's PrettyWriter: 4-space indent,
 *     ": " after keys, one element per line, or "[1, 2]" in single-line-array
 *     mode (kFormatSingleLineArray);
 *   - number text (TF's WriteDecimal) and string escaping (rapidjson's);
 *   - base64 for {"b64": "..."} values (the padded standard writer; the
 *     reader is the parser's, srv_jsonparse.h);
 *   - srv_json_append_value, which quotes a parsed value in error messages as
 *     TF's JsonValueToString does.
 * NaN and infinities are written as the bare tokens NaN, Infinity, -Infinity
 * (not strict JSON, as TF Serving).
 *
 * Ownership. Output is appended to a caller-owned td_buf; nothing else is
 * allocated (the writer is a plain value on the caller's stack, holding a
 * borrowed pointer to the buffer). Memory failure shows as the buffer's oom
 * flag, as for every td_buf append.
 *
 * Threads. No global state: every function may be called from any thread,
 * concurrently, on distinct arguments. Number formatting assumes the "C"
 * LC_NUMERIC locale (the process never calls setlocale).
 *
 * Failure. Nothing here fails on its own account; a writer misused past
 * SRV_JSON_WRITER_DEPTH stops output instead of aborting. */
#ifndef SRV_JSONWRITE_H
#define SRV_JSONWRITE_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "td_buf.h"

#define SRV_JSON_NUMBER_MAX 32       /* buffer size that fits any formatted number */
#define SRV_JSON_VALUE_TEXT_MAX 512  /* JSON values quoted in error messages are cut here */

/* TF Serving's WriteDecimal: "%g" (6 significant digits) when that text reads
 * back (strtof / strtod) as the same value, else "%.9g" (float) / "%.17g"
 * (double); ".0" appended when the text has neither '.' nor 'e' (3 -> "3.0",
 * 9e+06 and 1e-05 stay). NaN -> "NaN", inf -> "Infinity" / "-Infinity".
 * Writes at most n bytes including the NUL (SRV_JSON_NUMBER_MAX always fits)
 * and returns the length of the full text, like snprintf. */
int srv_json_format_float(float v, char *buf, size_t n);
int srv_json_format_double(double v, char *buf, size_t n);

/* Appends s[0..len) as a quoted JSON string, escaped as rapidjson does:
 * \" \\ \b \f \n \r \t, other bytes below 0x20 as \u00XX, all else raw
 * (bytes are not checked for valid UTF-8, as in TF Serving). */
void srv_json_append_string(td_buf *out, const char *s, size_t len);

/* Appends a value as TF Serving quotes it in error messages (its
 * JsonValueToString: pretty-printed, decimals as srv_json_format_*), cut
 * after SRV_JSON_VALUE_TEXT_MAX bytes with "..." appended. A NULL v appends
 * "null". Integers print exactly only in trees from srv_json_parse
 * (srv_jsonparse.h); other trees' numbers print as decimals. */
void srv_json_append_value(td_buf *out, const cJSON *v);

/* Appends the padded standard base64 text of data[0..n) (no quotes). */
void srv_json_b64_encode(td_buf *out, const void *data, size_t n);

/* A rapidjson-PrettyWriter-compatible writer, for responses that must match
 * TF Serving's bytes. Plain value on the caller's stack; appends to `out`.
 * Calls must nest properly (begin/end pairs, key before each object value);
 * nesting deeper than SRV_JSON_WRITER_DEPTH is an internal error and stops
 * output. `limit` (0 = none) stops output once that many bytes were written,
 * setting `truncated`. */
#define SRV_JSON_WRITER_DEPTH 80

typedef struct srv_json_writer {
  td_buf *out;
  bool single_line; /* rapidjson kFormatSingleLineArray: "[1, 2]" */
  bool truncated;
  int depth;
  size_t start, limit;
  struct {
    bool in_array;
    unsigned count;
  } level[SRV_JSON_WRITER_DEPTH];
} srv_json_writer;

void srv_json_writer_init(srv_json_writer *w, td_buf *out);
void srv_json_writer_begin_object(srv_json_writer *w);
void srv_json_writer_end_object(srv_json_writer *w);
void srv_json_writer_begin_array(srv_json_writer *w);
void srv_json_writer_end_array(srv_json_writer *w);
void srv_json_writer_key(srv_json_writer *w, const char *s, size_t len);
void srv_json_writer_string(srv_json_writer *w, const char *s, size_t len);
/* A value written verbatim (a number or literal token). */
void srv_json_writer_raw(srv_json_writer *w, const char *text, size_t len);
void srv_json_writer_float(srv_json_writer *w, float v);
void srv_json_writer_double(srv_json_writer *w, double v);
void srv_json_writer_int64(srv_json_writer *w, int64_t v);
void srv_json_writer_uint64(srv_json_writer *w, uint64_t v);
void srv_json_writer_bool(srv_json_writer *w, bool v);

#endif
