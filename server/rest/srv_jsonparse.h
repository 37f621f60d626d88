/* srv_jsonparse: the JSON parser of the REST API, and accessors for what it
 * records beyond plain cJSON. (Functions keep the srv_json_ prefix shared by
 * the JSON family: srv_jsonparse, srv_jsonwrite, srv_json.)
 *
 * What. srv_json_parse reads JSON with rapidjson's grammar and error messages
 * (TF Serving's parser: "JSON Parse error: Invalid value. at offset: 7") and
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
 * ignored. A leading UTF-8 byte-order mark is skipped, as rapidjson's
 * EncodedInputStream does (offsets still count from the first byte). Nesting
 * is limited to SRV_JSON_MAX_DEPTH arrays/objects; deeper documents fail with
 * INVALID_ARGUMENT. Any root value is accepted (a request must be an object:
 * srv_json_parse_request in srv_json.h checks that).
 *
 * The extra facts live in node fields cJSON ignores, so treat the tree as
 * read-only: changing a node through the cJSON API can leave them stale.
 * Trees built any other way (cJSON_Parse, cJSON_Create*) lack them: the
 * accessors then see every number as a double and measure strings by strlen.
 *
 * Ownership. *out belongs to the caller: the tree's nodes and strings come
 * from slabs owned by the document as a whole, so free it with
 * srv_json_free (never cJSON_Delete, which would free nodes one by one).
 * Accessors return views into the node they are given.
 *
 * Threads. No global state: every function may be called from any thread,
 * concurrently, on distinct arguments (memory comes from malloc, not from
 * cJSON's allocation hooks). Decimals are read with strtod, so the "C" LC_NUMERIC locale is
 * assumed (the process never calls setlocale).
 *
 * Failure. srv_json_b64_decode returns false for malformed base64.
 * srv_json_parse returns INVALID_ARGUMENT with rapidjson's message
 * for malformed text, RESOURCE_EXHAUSTED when memory runs out; it fills the
 * optional td_err, never aborts, and leaves *out untouched on failure. */
#ifndef SRV_JSONPARSE_H
#define SRV_JSONPARSE_H

#include <cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "td_status.h"

#define SRV_JSON_MAX_DEPTH 64 /* nested arrays/objects accepted by the parser */

/* Parses text[0..len) (need not be NUL-terminated) into a new tree. Empty or
 * all-whitespace text fails with "JSON Parse error: The document is empty.
 * at offset: <len>". The tree's memory belongs to the document as a whole:
 * read it with cJSON's accessors, free it with srv_json_free (never
 * cJSON_Delete), and do not add, detach or delete nodes. */
td_code srv_json_parse(const char *text, size_t len, cJSON **out, td_err *err);
/* Frees a tree from srv_json_parse (NULL: nothing). */
void srv_json_free(cJSON *root);

typedef enum {
  SRV_JSON_NUM_DOUBLE, /* a decimal or exponent literal, NaN/Infinity, or an
                          integer literal outside the int64/uint64 range */
  SRV_JSON_NUM_INT64,  /* an integer literal in [INT64_MIN, INT64_MAX] */
  SRV_JSON_NUM_UINT64, /* an integer literal in (INT64_MAX, UINT64_MAX] */
} srv_json_numkind;

/* Classifies a number node of a parsed tree and gives its exact value:
 * *i for INT64, *u for UINT64 (either pointer may be NULL). valuedouble is
 * always the nearest double. Returns SRV_JSON_NUM_DOUBLE for non-numbers. */
srv_json_numkind srv_json_number(const cJSON *v, int64_t *i, uint64_t *u);

/* Byte length of a string node of a parsed tree (counts bytes after an
 * escaped NUL, which strlen(valuestring) would not); 0 for non-strings. */
size_t srv_json_string_len(const cJSON *v);

/* The value's kind as rapidjson names it in TF Serving's messages: "Null",
 * "False", "True", "Object", "Array", "String" or "Number". */
const char *srv_json_type_name(const cJSON *v);

/* True for {"b64": "<string>"}: an object with exactly one member, "b64",
 * holding a string (TF's IsValBase64Object). */
bool srv_json_is_b64_object(const cJSON *v);

/* Base64 as absl::Base64Unescape reads it: standard alphabet, whitespace
 * skipped, padding ('=' or '.') optional but exact when present. With dst ==
 * NULL only validates and measures; otherwise dst needs room for the decoded
 * bytes (at most 3 * (n / 4) + 2; a NULL pass gives the exact count). Sets
 * *out_len (optional) and returns false for malformed input. */
bool srv_json_b64_decode(const char *src, size_t n, char *dst, size_t *out_len);

#endif
