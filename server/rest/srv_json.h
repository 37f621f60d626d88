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
 * Built on srv_jsonparse.h (the parser: rapidjson's grammar and messages
 * into a cJSON tree that keeps integer literals exact, and base64
 * decoding) and srv_jsonwrite.h (the PrettyWriter clone, number and string
 * formatting, base64 encoding), which this header includes. Trees from plain cJSON_Parse lack the parser's integer
 * marks: pass only srv_json_parse_request trees to the decoders.
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
#include <stddef.h>

#include "eng_tensor.h"
#include "ldr_signature.h"
#include "srv_jsonparse.h"
#include "srv_jsonwrite.h"
#include "td_buf.h"
#include "td_status.h"

typedef enum { SRV_JSON_ROW, SRV_JSON_COLUMNAR } srv_json_format;

typedef struct srv_json_request {
  cJSON *root;                /* the request object */
  const char *signature_name; /* points into root; NULL when the key is absent */
} srv_json_request;

/* --- requests ------------------------------------------------------------ */

/* Parses a request body (predict, classify and regress alike: TF's ParseJson
 * + FillSignature): the body must be a JSON object and "signature_name", when
 * present, a string. `body` need not be NUL-terminated. Malformed text fails
 * with srv_json_parse's message; an empty body (len 0) with TF's "JSON Parse
 * error: The document is empty" (no offset). All failures are
 * INVALID_ARGUMENT ("JSON Value: 1 Is not object", ...) except
 * RESOURCE_EXHAUSTED when memory runs out. */
td_code srv_json_parse_request(const char *body, size_t len, srv_json_request *out,
                               td_err *err);
/* Frees the tree and zeroes *r; a zeroed request is a no-op. */
void srv_json_request_free(srv_json_request *r);

/* Builds one tensor per signature input from "instances" or "inputs":
 * inputs[i] (an array of sig->n_inputs) gets sig->inputs[i], with that
 * input's declared dtype and the shape the JSON gives (the declared shape is
 * not checked here). *fmt tells which form the request used, so the
 * response can answer in kind. The inputs together may take at most
 * max_bytes (0: no bound; strings count their bytes, decoded from base64,
 * plus a table entry and a NUL each): the input that would pass it fails
 * RESOURCE_EXHAUSTED, naming its size and what was left, before anything
 * of its own is allocated. On failure every inputs[i] is empty. */
td_code srv_json_decode_predict(const srv_json_request *r, const ldr_signature *sig,
                                size_t max_bytes, eng_tensor *inputs, srv_json_format *fmt,
                                td_err *err);

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

#endif
