/* srv_json: the JSON tensor codec of the REST predict API.
 *
 * What. Turns a REST request body into engine tensors and engine tensors
 * back into a response body, the way TF Serving's util/json_tensor.cc does:
 * same request forms, same validation order, same error messages, same
 * response bytes (rapidjson PrettyWriter layout, same number formatting).
 *
 *   body --srv_json_parse_request--> srv_json_request (cJSON tree)
 *        --srv_json_decode_predict--> eng_tensor per signature input
 *   eng_tensor per signature output --srv_json_encode_predict--> body
 *
 * Parsing. srv_json_parse_request uses its own parser (rapidjson's grammar
 * and error messages, "JSON Parse error: Invalid value. at offset: 7") that
 * builds an ordinary cJSON tree, so callers walk it with the cJSON API. On top
 * of cJSON it keeps what cJSON would lose:
 *   - integer literals ("7", "-3", no '.', 'e' or 'E') are told apart from
 *     decimals ("7.0", "7e0"), and kept exact over the whole int64/uint64
 *     range (read them with srv_json_number, never valueint, which cJSON
 *     clamps to int);
 *   - NaN, Infinity, -Infinity, Inf, -Inf are accepted as numbers, like
 *     rapidjson's kParseNanAndInfFlag;
 *   - a string's byte length survives "\u0000" escapes (srv_json_string_len).
 * Like TF Serving (kParseStopWhenDoneFlag) bytes after the root value are
 * ignored. Nesting is limited to SRV_JSON_MAX_DEPTH arrays/objects; deeper
 * documents fail with INVALID_ARGUMENT. Trees from plain cJSON_Parse lack the
 * integer marks: pass only srv_json_parse_request trees to the decoders.
 *
 * Request semantics (srv_json_decode_predict), as TF Serving:
 *   - exactly one of "instances" (row format) and "inputs" (columnar);
 *   - row: a non-empty array. For a one-input signature each element is a
 *     value, a nested list, or an {alias: value} object; the tensor stacks the
 *     elements (dim0 = element count). For several inputs every element is an
 *     object whose key set equals the input aliases. {"b64": "..."} is a value.
 *   - columnar: a bare value/list (one-input signatures only) or an object
 *     with an entry per input (extra keys ignored); a scalar gives rank 0;
 *   - the shape follows the first element at each level and every list at a
 *     level must have that size; tensors have at most ENG_MAX_RANK dims;
 *   - dtypes: float/double take any number (integers beyond 2^24-1 / 2^53-1
 *     are rejected as lossy, decimals beyond the type's range too, as TF
 *     does); int32/int16/int8/uint8/uint32/int64/uint64 take integer literals
 *     in range (1.0 is rejected; TF truncates int16/int8/uint8 silently, we
 *     reject out-of-range values); bool takes true/false; string takes a
 *     string or {"b64": "<base64>"}; other dtypes fail UNIMPLEMENTED
 *     ("Conversion of JSON Value: 1.5 to type: half").
 *   Error messages embed the offending JSON value as TF does, cut after
 *   about SRV_JSON_VALUE_TEXT_MAX bytes ("..." appended).
 *
 * Response layout (srv_json_encode_predict), byte for byte what rapidjson's
 * PrettyWriter writes for TF Serving: 4-space indent, ": " after keys. Row
 * format switches to single-line arrays inside each prediction, so
 *   {"instances": [1.0, 2.0, 5.0]}  ->  "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}"
 *   rank-2 output                    ->  "{\n    \"predictions\": [[1.0, 2.0], [3.0, 4.0]\n    ]\n}"
 * and with several outputs each prediction is an object printed pretty:
 *   "{\n    \"predictions\": [\n        {\n            \"a\": 1.0,\n            \"b\": [1, 2]\n        }\n    ]\n}"
 * Columnar format uses the default layout throughout, one element per line:
 *   "{\n    \"outputs\": [\n        2.5,\n        3.0\n    ]\n}"
 * Several outputs appear in the signature's (sorted) alias order. A string
 * output whose alias ends in "_bytes" is written as {"b64": "..."} objects.
 * Floats use srv_json_format_float/double; NaN and infinities are written as
 * the bare tokens NaN, Infinity, -Infinity (not strict JSON, as TF Serving).
 *
 * Ownership. A srv_json_request owns its tree; free it with
 * srv_json_request_free. Decoded tensors belong to the caller (release each
 * with eng_tensor_release). Encoders append to a caller-owned td_buf.
 *
 * Threads. No global state: every function may be called from any thread,
 * concurrently, on distinct arguments. Number formatting assumes the "C"
 * LC_NUMERIC locale (the process never calls setlocale).
 *
 * Failure. Fallible calls return a td_code and fill the optional td_err;
 * bad input never aborts. Out-params are untouched on failure, except the
 * decoder's tensor array, which is left all-empty (zeroed). */
#ifndef SRV_JSON_H
#define SRV_JSON_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_tensor.h"
#include "ldr_signature.h"
#include "td_buf.h"
#include "td_status.h"

#define SRV_JSON_MAX_DEPTH 64        /* nested arrays/objects accepted by the parser */
#define SRV_JSON_NUMBER_MAX 32       /* buffer size that fits any formatted number */
#define SRV_JSON_VALUE_TEXT_MAX 512  /* JSON values quoted in error messages are cut here */

typedef enum { SRV_JSON_ROW, SRV_JSON_COLUMNAR } srv_json_format;

typedef struct srv_json_request {
  cJSON *root;                /* the request object */
  const char *signature_name; /* points into root; NULL when the key is absent */
} srv_json_request;

/* --- requests ------------------------------------------------------------ */

/* Parses a request body (predict, classify and regress alike: TF's ParseJson
 * + FillSignature): the body must be a JSON object and "signature_name", when
 * present, a string. `body` need not be NUL-terminated. All failures are
 * INVALID_ARGUMENT ("JSON Parse error: The document is empty", "JSON Value:
 * 1 Is not object", ...) except RESOURCE_EXHAUSTED when memory runs out. */
td_code srv_json_parse_request(const char *body, size_t len, srv_json_request *out,
                               td_err *err);
/* Frees the tree and zeroes *r; a zeroed request is a no-op. */
void srv_json_request_free(srv_json_request *r);

/* Builds one tensor per signature input from "instances" or "inputs":
 * inputs[i] (an array of sig->n_inputs) gets sig->inputs[i], with that
 * input's declared dtype and the shape the JSON gives (the declared shape is
 * not checked here). *fmt tells which form the request used, so the
 * response can answer in kind. On failure every inputs[i] is empty. */
td_code srv_json_decode_predict(const srv_json_request *r, const ldr_signature *sig,
                                eng_tensor *inputs, srv_json_format *fmt, td_err *err);

/* --- responses ----------------------------------------------------------- */

/* Appends {"predictions": ...} (row) or {"outputs": ...} (columnar) for
 * outputs[i] <-> sig->outputs[i] (layout above). Row format needs every output
 * at rank >= 1 ("Tensor name: y has no shape information ") with one shared
 * dim0 ("Tensor name: y has inconsistent batch size: 3 expecting: 2").
 * Output dtypes TF Serving cannot write (half, complex, ...) fail with
 * "Failed to write JSON value for tensor type: half". On failure `out` is
 * restored to its length on entry. Errors are INVALID_ARGUMENT, or
 * RESOURCE_EXHAUSTED when the buffer runs out of memory. */
td_code srv_json_encode_predict(const ldr_signature *sig, const eng_tensor *outputs,
                                srv_json_format fmt, td_buf *out, td_err *err);

/* Appends TF Serving's error body: "{\n    \"error\": \"<message>\"\n}". */
void srv_json_encode_error(const char *message, td_buf *out);

/* --- building blocks (also for classify/regress JSON) --------------------- */

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
 * after SRV_JSON_VALUE_TEXT_MAX bytes with "..." appended. */
void srv_json_append_value(td_buf *out, const cJSON *v);

typedef enum {
  SRV_JSON_NUM_DOUBLE, /* a decimal or exponent literal, NaN/Infinity, or an
                          integer literal outside the int64/uint64 range */
  SRV_JSON_NUM_INT64,  /* an integer literal in [INT64_MIN, INT64_MAX] */
  SRV_JSON_NUM_UINT64, /* an integer literal in (INT64_MAX, UINT64_MAX] */
} srv_json_numkind;

/* Classifies a number node of a parsed request and gives its exact value:
 * *i for INT64, *u for UINT64 (either pointer may be NULL). valuedouble is
 * always the nearest double. Returns SRV_JSON_NUM_DOUBLE for non-numbers. */
srv_json_numkind srv_json_number(const cJSON *v, int64_t *i, uint64_t *u);

/* Byte length of a string node of a parsed request (counts bytes after an
 * escaped NUL, which strlen(valuestring) would not); 0 for non-strings. */
size_t srv_json_string_len(const cJSON *v);

/* True for {"b64": "<string>"}: an object with exactly one member, "b64",
 * holding a string (TF's IsValBase64Object). */
bool srv_json_is_b64_object(const cJSON *v);

/* Base64 as absl::Base64Unescape reads it: standard alphabet, whitespace
 * skipped, padding ('=' or '.') optional but exact when present. With dst ==
 * NULL only validates and measures; otherwise dst needs room for the decoded
 * bytes (at most 3 * (n / 4) + 2; a NULL pass gives the exact count). Sets
 * *out_len (optional) and returns false for malformed input. */
bool srv_json_b64_decode(const char *src, size_t n, char *dst, size_t *out_len);
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
