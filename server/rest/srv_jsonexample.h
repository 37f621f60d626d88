/* srv_jsonexample: the JSON side of REST :classify and :regress.
 *
 * Request (TF Serving's FillClassifyRegressRequestFromJson):
 *   {"signature_name": "...", "context": {feature: value|list},
 *    "examples": [{feature: value|list}, ...]}
 * Each object becomes a tf.Example, serialized with protobuf-c. A feature's
 * kind follows the JSON type and every value of one feature must agree:
 * string or {"b64": "..."} -> bytes_list; a number written with a fraction
 * or exponent (or NaN/Infinity) -> float_list (lossless-to-float checked);
 * an integer -> int64_list (uint64 beyond int64 refused); true/false ->
 * int64_list 1/0. null, nested lists and other objects are refused. A key
 * repeated in one object keeps its last value (protobuf map semantics).
 * Messages are TF Serving's: "JSON Value: <doc> When method is classify, key
 * 'examples' is expected and was not found" (also for regress), "... 'examples'
 * value is an empty array", "Example must be JSON object but got JSON
 * Array", "Unexpected element type in feature: x expecting type: float",
 * "Feature: x has element with unexpected JSON type: Null", ...; all
 * INVALID_ARGUMENT.
 *
 * Response, rapidjson PrettyWriter bytes as TF Serving writes them:
 *   classify  "{\n    \"results\": [[[\"label\", 0.5], [\"\", 3.0]]\n    ]\n}"
 *   regress   "{\n    \"results\": [3.0, 3.5]\n}"
 * Scores and values are floats written as srv_json_format_float.
 *
 * Ownership: srv_json_examples owns its bytes (srv_json_examples_free);
 * encoders append to a caller-owned td_buf. Threads: no state. Failures
 * fill the optional td_err and leave *out empty. */
#ifndef SRV_JSONEXAMPLE_H
#define SRV_JSONEXAMPLE_H

#include <stdbool.h>

#include "srv_infer.h"
#include "srv_json.h"

typedef struct srv_json_examples {
  int n;
  eng_str *examples; /* n serialized Examples (into storage) */
  eng_str context;   /* the serialized context; len 0 when absent */
  bool has_context;
  char *storage;
} srv_json_examples;

td_code srv_json_decode_examples(const srv_json_request *r, srv_json_examples *out, td_err *err);
void srv_json_examples_free(srv_json_examples *e);

void srv_json_encode_classify(const srv_classify_result *r, td_buf *out);
void srv_json_encode_regress(const float *values, int n, td_buf *out);

#endif
