/* Unit tests for server/srv_json: request parsing and decoding (row and
 * columnar, every dtype rule, TF Serving's messages), response encoding byte
 * for byte, and mutated bodies that must never crash. The parser and the
 * writer underneath have their own tests (test_srv_jsonparse.c,
 * test_srv_jsonwrite.c). */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_json.h"

/* ----------------------------------------------------------------- helpers */

static ldr_tensor_info info(const char *alias, eng_dtype dt) {
  return (ldr_tensor_info){
      .alias = (char *)alias, .name = (char *)alias, .dtype = dt, .shape = {.rank = -1}};
}

static ldr_signature make_sig(ldr_tensor_info *in, int n_in, ldr_tensor_info *out, int n_out) {
  return (ldr_signature){.key = "serving_default",
                         .method_name = "tensorflow/serving/predict",
                         .n_inputs = n_in,
                         .inputs = in,
                         .n_outputs = n_out,
                         .outputs = out};
}

/* One-input signature of the given dtype, alias "x". */
static ldr_tensor_info one_in[1];
static ldr_signature sig1(eng_dtype dt) {
  one_in[0] = info("x", dt);
  return make_sig(one_in, 1, NULL, 0);
}

/* Two inputs: "a" float, "b" string (sorted by alias). */
static ldr_tensor_info two_in[2];
static ldr_signature sig2(void) {
  two_in[0] = info("a", ENG_DT_FLOAT);
  two_in[1] = info("b", ENG_DT_STRING);
  return make_sig(two_in, 2, NULL, 0);
}

static td_code decode(const char *body, const ldr_signature *sig, eng_tensor *in,
                      srv_json_format *fmt, td_err *err) {
  srv_json_request r = {0};
  td_code rc = srv_json_parse_request(body, strlen(body), &r, err);
  if (rc) return rc;
  rc = srv_json_decode_predict(&r, sig, 0, in, fmt, err);
  srv_json_request_free(&r);
  return rc;
}

#define DECODE_OK(body, sig, in, fmt)                                  \
  do {                                                                 \
    td_err e_ = {0};                                                   \
    td_code rc_ = decode(body, sig, in, fmt, &e_);                     \
    ck_assert_msg(rc_ == TD_OK, "decode %s: %s", body, e_.msg);        \
  } while (0)

#define DECODE_ERR(body, sig, code, want)                               \
  do {                                                                 \
    td_err e_ = {0};                                                   \
    eng_tensor in_[4];                                                 \
    memset(in_, 0x5a, sizeof in_);                                     \
    srv_json_format f_;                                                \
    td_code rc_ = decode(body, sig, in_, &f_, &e_);                    \
    ck_assert_msg(rc_ == (code), "decode %s: rc %d (%s)", body, rc_, e_.msg); \
    ck_assert_str_eq(e_.msg, want);                                    \
  } while (0)

static void expect_shape(const eng_tensor *t, int rank, const int64_t *dims) {
  ck_assert_int_eq(t->shape.rank, rank);
  for (int i = 0; i < rank; i++) ck_assert_int_eq(t->shape.dim[i], dims[i]);
}

/* ----------------------------------------------------------------- parsing */

static void parse_err(const char *body, size_t len, const char *msg) {
  srv_json_request r = {0};
  td_err e = {0};
  td_code rc = srv_json_parse_request(body, len, &r, &e);
  ck_assert_msg(rc == TD_INVALID_ARGUMENT, "parse %s: rc %d", body, rc);
  ck_assert_str_eq(e.msg, msg);
  ck_assert_ptr_null(r.root);
}

START_TEST(test_parse_request_errors) {
  parse_err("", 0, "JSON Parse error: The document is empty");
  parse_err("   ", 3, "JSON Parse error: The document is empty. at offset: 3");
  parse_err("{", 1, "JSON Parse error: Missing a name for object member. at offset: 1");
  parse_err("\xEF\xBB\xBF[", 4, "JSON Parse error: Invalid value. at offset: 4"); /* BOM skipped */
  parse_err("[1]", 3, "JSON Value: [\n    1\n] Is not object");
  parse_err("1.5", 3, "JSON Value: 1.5 Is not object");
  parse_err("\"x\"", 3, "JSON Value: \"x\" Is not object");
  parse_err("{\"signature_name\": 1}", 21,
            "JSON Value: {\n    \"signature_name\": 1\n} not formatted correctly. 'signature_name' "
            "key must be a string value.");
  /* parser failures come through unchanged (the full table is in
   * test_srv_jsonparse.c) */
  parse_err("{\"a\":1e999}", 11,
            "JSON Parse error: Number too big to be stored in double. at offset: 5");
}
END_TEST

START_TEST(test_parse_request_ok) {
  srv_json_request r = {0};
  td_err e = {0};
  const char *body = "  {\"signature_name\": \"sig\", \"x\": [1, -2, 1.0, 1e2, -0, 9223372036854775807, "
                     "-9223372036854775808, 18446744073709551615, 18446744073709551616, "
                     "9007199254740993, NaN, -Infinity, Inf], \"s\": \"a\\u0000b\\u00e9\\ud83d\\ude00\"}"
                     " trailing garbage is ignored";
  ck_assert_int_eq(srv_json_parse_request(body, strlen(body), &r, &e), TD_OK);
  ck_assert_str_eq(r.signature_name, "sig");
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(r.root, "x");
  ck_assert_int_eq(cJSON_GetArraySize(x), 13);
  ck_assert_int_eq(srv_json_number(cJSON_GetArrayItem(x, 5), NULL, NULL), SRV_JSON_NUM_INT64);
  ck_assert_int_eq(srv_json_string_len(cJSON_GetObjectItemCaseSensitive(r.root, "s")), 9);
  /* the tree is an ordinary cJSON tree */
  char *printed = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(r.root, "signature_name"));
  ck_assert_str_eq(printed, "\"sig\"");
  cJSON_free(printed);
  srv_json_request_free(&r);
  ck_assert_ptr_null(r.root);
  srv_json_request_free(&r); /* no-op */

  /* signature_name is optional */
  const char *plain = "{\"instances\": [1]}";
  ck_assert_int_eq(srv_json_parse_request(plain, strlen(plain), &r, &e), TD_OK);
  ck_assert_ptr_null(r.signature_name);
  srv_json_request_free(&r);
}
END_TEST

/* ---------------------------------------------------------------- decoding */

START_TEST(test_row_float) {
  ldr_signature sig = sig1(ENG_DT_FLOAT);
  eng_tensor in[1];
  srv_json_format fmt = SRV_JSON_COLUMNAR;
  DECODE_OK("{\"instances\": [1.0, 2.0, 5.0]}", &sig, in, &fmt);
  ck_assert_int_eq(fmt, SRV_JSON_ROW);
  ck_assert_int_eq(in[0].dtype, ENG_DT_FLOAT);
  expect_shape(&in[0], 1, (int64_t[]){3});
  const float *d = eng_tensor_data(&in[0]);
  ck_assert(d[0] == 1.0f && d[1] == 2.0f && d[2] == 5.0f);
  eng_tensor_release(&in[0]);

  DECODE_OK("{\"instances\": [[1, 2], [3, 4.5]], \"signature_name\": \"serving_default\"}", &sig, in,
            &fmt);
  expect_shape(&in[0], 2, (int64_t[]){2, 2});
  d = eng_tensor_data(&in[0]);
  ck_assert(d[0] == 1.0f && d[1] == 2.0f && d[2] == 3.0f && d[3] == 4.5f);
  eng_tensor_release(&in[0]);

  /* {alias: value} objects in a one-input signature */
  DECODE_OK("{\"instances\": [{\"x\": [1, 2]}, {\"x\": [3, 4]}]}", &sig, in, &fmt);
  expect_shape(&in[0], 2, (int64_t[]){2, 2});
  ck_assert(((float *)eng_tensor_data(&in[0]))[3] == 4.0f);
  eng_tensor_release(&in[0]);

  /* NaN and infinities, empty inner lists */
  DECODE_OK("{\"instances\": [NaN, Infinity, -Infinity]}", &sig, in, &fmt);
  d = eng_tensor_data(&in[0]);
  ck_assert(isnan(d[0]) && d[1] == INFINITY && d[2] == -INFINITY);
  eng_tensor_release(&in[0]);
  DECODE_OK("{\"instances\": [[], []]}", &sig, in, &fmt);
  expect_shape(&in[0], 2, (int64_t[]){2, 0});
  eng_tensor_release(&in[0]);
}
END_TEST

START_TEST(test_columnar_float) {
  ldr_signature sig = sig1(ENG_DT_FLOAT);
  eng_tensor in[1];
  srv_json_format fmt = SRV_JSON_ROW;
  DECODE_OK("{\"inputs\": [1.0, 2.0, 5.0]}", &sig, in, &fmt);
  ck_assert_int_eq(fmt, SRV_JSON_COLUMNAR);
  expect_shape(&in[0], 1, (int64_t[]){3});
  ck_assert(((float *)eng_tensor_data(&in[0]))[2] == 5.0f);
  eng_tensor_release(&in[0]);

  DECODE_OK("{\"inputs\": [[1, 2], [3, 4]]}", &sig, in, &fmt);
  expect_shape(&in[0], 2, (int64_t[]){2, 2});
  ck_assert(((float *)eng_tensor_data(&in[0]))[2] == 3.0f);
  eng_tensor_release(&in[0]);

  DECODE_OK("{\"inputs\": 7.5}", &sig, in, &fmt);
  expect_shape(&in[0], 0, NULL);
  ck_assert(((float *)eng_tensor_data(&in[0]))[0] == 7.5f);
  eng_tensor_release(&in[0]);

  DECODE_OK("{\"inputs\": {\"x\": [[1], [2]], \"extra\": \"ignored\"}}", &sig, in, &fmt);
  expect_shape(&in[0], 2, (int64_t[]){2, 1});
  eng_tensor_release(&in[0]);

  DECODE_OK("{\"inputs\": []}", &sig, in, &fmt);
  expect_shape(&in[0], 1, (int64_t[]){0});
  eng_tensor_release(&in[0]);
}
END_TEST

START_TEST(test_multi_input) {
  ldr_signature sig = sig2();
  eng_tensor in[2];
  srv_json_format fmt;
  DECODE_OK("{\"instances\": [{\"b\": \"x\", \"a\": [1.5, 2]}, {\"a\": [2.5, 3], \"b\": {\"b64\": "
            "\"eXk=\"}}]}",
            &sig, in, &fmt);
  ck_assert_int_eq(fmt, SRV_JSON_ROW);
  expect_shape(&in[0], 2, (int64_t[]){2, 2});
  expect_shape(&in[1], 1, (int64_t[]){2});
  ck_assert(((float *)eng_tensor_data(&in[0]))[2] == 2.5f);
  ck_assert_int_eq(in[1].dtype, ENG_DT_STRING);
  eng_str *s = eng_tensor_strs(&in[1]);
  ck_assert_int_eq(s[0].len, 1);
  ck_assert(memcmp(s[0].data, "x", 1) == 0);
  ck_assert_int_eq(s[1].len, 2);
  ck_assert(memcmp(s[1].data, "yy", 2) == 0);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);

  /* columnar: inputs need not share dim0 */
  DECODE_OK("{\"inputs\": {\"a\": [[1], [2], [3]], \"b\": \"s\"}}", &sig, in, &fmt);
  ck_assert_int_eq(fmt, SRV_JSON_COLUMNAR);
  expect_shape(&in[0], 2, (int64_t[]){3, 1});
  expect_shape(&in[1], 0, NULL);
  ck_assert_int_eq(eng_tensor_strs(&in[1])[0].len, 1);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
}
END_TEST

START_TEST(test_int_rules) {
  ldr_signature sig = sig1(ENG_DT_INT32);
  eng_tensor in[1];
  srv_json_format fmt;
  DECODE_OK("{\"inputs\": [1, -2147483648, 2147483647]}", &sig, in, &fmt);
  const int32_t *d = eng_tensor_data(&in[0]);
  ck_assert(d[0] == 1 && d[1] == INT32_MIN && d[2] == INT32_MAX);
  eng_tensor_release(&in[0]);
  DECODE_ERR("{\"inputs\": [1, 1.0]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: 1.0 Type: Number is not of expected type: int32");
  DECODE_ERR("{\"inputs\": [1e0]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: 1.0 Type: Number is not of expected type: int32");
  DECODE_ERR("{\"inputs\": [2147483648]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: 2147483648 Type: Number is not of expected type: int32");
  DECODE_ERR("{\"inputs\": [true]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: true Type: True is not of expected type: int32");
  DECODE_ERR("{\"inputs\": [NaN]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: NaN Type: Number is not of expected type: int32");

  sig = sig1(ENG_DT_INT64);
  DECODE_OK("{\"inputs\": [9223372036854775807, -9223372036854775808, 9007199254740993]}", &sig,
            in, &fmt);
  const int64_t *l = eng_tensor_data(&in[0]);
  ck_assert(l[0] == INT64_MAX && l[1] == INT64_MIN && l[2] == 9007199254740993LL);
  eng_tensor_release(&in[0]);
  DECODE_ERR("{\"inputs\": [9223372036854775808]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: 9223372036854775808 Type: Number is not of expected type: int64");

  sig = sig1(ENG_DT_UINT64);
  DECODE_OK("{\"inputs\": [18446744073709551615, 0]}", &sig, in, &fmt);
  ck_assert(((uint64_t *)eng_tensor_data(&in[0]))[0] == UINT64_MAX);
  eng_tensor_release(&in[0]);
  DECODE_ERR("{\"inputs\": [-1]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: -1 Type: Number is not of expected type: uint64");

  sig = sig1(ENG_DT_UINT32);
  DECODE_OK("{\"inputs\": [4294967295]}", &sig, in, &fmt);
  ck_assert(((uint32_t *)eng_tensor_data(&in[0]))[0] == UINT32_MAX);
  eng_tensor_release(&in[0]);
  DECODE_ERR("{\"inputs\": [4294967296]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: 4294967296 Type: Number is not of expected type: uint32");

  sig = sig1(ENG_DT_UINT8);
  DECODE_OK("{\"inputs\": [0, 255]}", &sig, in, &fmt);
  ck_assert(((uint8_t *)eng_tensor_data(&in[0]))[1] == 255);
  eng_tensor_release(&in[0]);
  DECODE_ERR("{\"inputs\": [256]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: 256 Type: Number is not of expected type: uint8");
  sig = sig1(ENG_DT_INT8);
  DECODE_ERR("{\"inputs\": [-129]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: -129 Type: Number is not of expected type: int8");
  sig = sig1(ENG_DT_INT16);
  DECODE_OK("{\"inputs\": [-32768]}", &sig, in, &fmt);
  ck_assert(((int16_t *)eng_tensor_data(&in[0]))[0] == INT16_MIN);
  eng_tensor_release(&in[0]);
}
END_TEST

START_TEST(test_float_rules) {
  ldr_signature sig = sig1(ENG_DT_FLOAT);
  eng_tensor in[1];
  srv_json_format fmt;
  DECODE_OK("{\"inputs\": [16777215, -16777215, 3.4e38, 1e-50]}", &sig, in, &fmt);
  const float *f = eng_tensor_data(&in[0]);
  ck_assert(f[0] == 16777215.0f && f[1] == -16777215.0f && f[3] == 0.0f);
  eng_tensor_release(&in[0]);
  DECODE_ERR("{\"inputs\": [16777216]}", &sig, TD_INVALID_ARGUMENT,
             "Cannot convert JSON value: 16777216 to float without loss of precision.");
  DECODE_ERR("{\"inputs\": [1e39]}", &sig, TD_INVALID_ARGUMENT,
             "Cannot convert JSON value: 1e+39 to float without loss of precision.");
  DECODE_ERR("{\"inputs\": [\"x\"]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: \"x\" Type: String is not of expected type: float");
  DECODE_ERR("{\"inputs\": [null]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: null Type: Null is not of expected type: float");
  DECODE_ERR("{\"inputs\": [{\"b64\": \"AAAA\"}]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: {\n    \"b64\": \"AAAA\"\n} Type: Object is not of expected type: float");

  sig = sig1(ENG_DT_DOUBLE);
  DECODE_OK("{\"inputs\": [9007199254740991, 0.1, 1e300]}", &sig, in, &fmt);
  const double *d = eng_tensor_data(&in[0]);
  ck_assert(d[0] == 9007199254740991.0 && d[1] == 0.1 && d[2] == 1e300);
  eng_tensor_release(&in[0]);
  DECODE_ERR("{\"inputs\": [9007199254740993]}", &sig, TD_INVALID_ARGUMENT,
             "Cannot convert JSON value: 9007199254740993 to double without loss of precision.");
}
END_TEST

START_TEST(test_bool_string_b64) {
  ldr_signature sig = sig1(ENG_DT_BOOL);
  eng_tensor in[1];
  srv_json_format fmt;
  DECODE_OK("{\"instances\": [true, false]}", &sig, in, &fmt);
  const uint8_t *b = eng_tensor_data(&in[0]);
  ck_assert(b[0] == 1 && b[1] == 0);
  eng_tensor_release(&in[0]);
  DECODE_ERR("{\"inputs\": [1]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: 1 Type: Number is not of expected type: bool");

  sig = sig1(ENG_DT_STRING);
  DECODE_OK("{\"inputs\": [[\"ab\", \"\"], [{\"b64\": \"aGVsbG8=\"}, \"x\\u0000y\"]]}", &sig, in,
            &fmt);
  expect_shape(&in[0], 2, (int64_t[]){2, 2});
  eng_str *s = eng_tensor_strs(&in[0]);
  ck_assert_int_eq(s[0].len, 2);
  ck_assert_int_eq(s[1].len, 0);
  ck_assert_int_eq(s[2].len, 5);
  ck_assert(memcmp(s[2].data, "hello", 5) == 0);
  ck_assert_int_eq(s[3].len, 3);
  ck_assert(memcmp(s[3].data, "x\0y", 3) == 0);
  eng_tensor_release(&in[0]);

  /* a bare b64 object is a value, in both formats */
  DECODE_OK("{\"inputs\": {\"b64\": \"AP8=\"}}", &sig, in, &fmt);
  expect_shape(&in[0], 0, NULL);
  ck_assert_int_eq(eng_tensor_strs(&in[0])[0].len, 2);
  ck_assert(memcmp(eng_tensor_strs(&in[0])[0].data, "\x00\xff", 2) == 0);
  eng_tensor_release(&in[0]);
  DECODE_OK("{\"instances\": [{\"b64\": \"AP8=\"}, {\"b64\": \"\"}]}", &sig, in, &fmt);
  expect_shape(&in[0], 1, (int64_t[]){2});
  eng_tensor_release(&in[0]);

  DECODE_ERR("{\"inputs\": [{\"b64\": \"a\"}]}", &sig, TD_INVALID_ARGUMENT,
             "Unable to base64 decode");
  DECODE_ERR("{\"instances\": [{\"b64\": \"a\"}]}", &sig, TD_INVALID_ARGUMENT,
             "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: Unable "
             "to base64 decode");
  DECODE_ERR("{\"inputs\": [{\"b64\": 1}]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: {\n    \"b64\": 1\n} not formatted correctly for base64 data");
  DECODE_ERR("{\"inputs\": [{\"b64\": \"AA==\", \"x\": 1}]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: {\n    \"b64\": \"AA==\",\n    \"x\": 1\n} not formatted correctly for "
             "base64 data");
  DECODE_ERR("{\"inputs\": [1]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: 1 Type: Number is not of expected type: string");
}
END_TEST

START_TEST(test_unsupported_dtype) {
  ldr_signature sig = sig1(ENG_DT_HALF);
  DECODE_ERR("{\"inputs\": [1.5]}", &sig, TD_UNIMPLEMENTED,
             "Conversion of JSON Value: 1.5 to type: half");
  DECODE_ERR("{\"instances\": [1.5]}", &sig, TD_INVALID_ARGUMENT,
             "Failed to process element: 0 of 'instances' list. Error: UNIMPLEMENTED: Conversion "
             "of JSON Value: 1.5 to type: half");
  sig = sig1(ENG_DT_COMPLEX64);
  DECODE_ERR("{\"inputs\": [[1, 2]]}", &sig, TD_UNIMPLEMENTED,
             "Conversion of JSON Value: 1 to type: complex64");
}
END_TEST

START_TEST(test_request_errors) {
  ldr_signature sig = sig1(ENG_DT_FLOAT);
  DECODE_ERR("{\"instances\": [1], \"inputs\": [1]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: {\n    \"instances\": [\n        1\n    ],\n    \"inputs\": [\n        1\n"
             "    ]\n} Not formatted correctly expecting only one of 'inputs' or 'instances' keys "
             "to exist ");
  DECODE_ERR("{\"signature_name\": \"x\"}", &sig, TD_INVALID_ARGUMENT,
             "Missing 'inputs' or 'instances' key");
  DECODE_ERR("{\"Instances\": [1]}", &sig, TD_INVALID_ARGUMENT,
             "Missing 'inputs' or 'instances' key");
  DECODE_ERR("{\"instances\": 1}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: {\n    \"instances\": 1\n} Excepting 'instances' to be an list/array");
  DECODE_ERR("{\"instances\": []}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: {\n    \"instances\": []\n} No values in 'instances' array");
  /* ragged rows */
  DECODE_ERR("{\"instances\": [[1, 2], [3]]}", &sig, TD_INVALID_ARGUMENT,
             "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
             "Expecting tensor size: 2 but got: 1");
  DECODE_ERR("{\"instances\": [[[1, 2]], [[1], [2]]]}", &sig, TD_INVALID_ARGUMENT,
             "Failed to process element: 1 of 'instances' list. Error: INVALID_ARGUMENT: "
             "Expecting shape [1,2] but got: [2,1]");
  DECODE_ERR("{\"instances\": [[1, [2]]]}", &sig, TD_INVALID_ARGUMENT,
             "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: "
             "Encountered list at unexpected level: 1 expected < 1");
  /* wrongly nested columnar values */
  DECODE_ERR("{\"inputs\": [1, [2]]}", &sig, TD_INVALID_ARGUMENT,
             "Encountered list at unexpected level: 1 expected < 1");
  DECODE_ERR("{\"inputs\": [[1, 2], [3]]}", &sig, TD_INVALID_ARGUMENT,
             "Encountered list at unexpected size: 1 at level: 1 expected size: 2");
  DECODE_ERR("{\"inputs\": [[1], 2]}", &sig, TD_INVALID_ARGUMENT,
             "JSON Value: 2 found at incorrect level: 2 in the JSON DOM. Expected at level: 2");
  DECODE_ERR("{\"instances\": [1, {\"x\": 1}]}", &sig, TD_INVALID_ARGUMENT,
             "Expecting value/list but got object at item 1 of input list");
  DECODE_ERR("{\"inputs\": [[[[[[[[[1]]]]]]]]]}", &sig, TD_INVALID_ARGUMENT,
             "JSON value has lists nested more than 8 deep: tensors of rank above 8 are not "
             "supported");
  DECODE_ERR("{\"instances\": [[[[[[[[[1]]]]]]]]]}", &sig, TD_INVALID_ARGUMENT,
             "Failed to process element: 0 of 'instances' list. Error: INVALID_ARGUMENT: JSON "
             "value has lists nested more than 7 deep: tensors of rank above 8 are not supported");

  ldr_signature sig_two = sig2();
  DECODE_ERR("{\"instances\": [[1], [2]]}", &sig_two, TD_INVALID_ARGUMENT,
             "instances is a plain list, but expecting list of objects as multiple input tensors "
             "required as per tensorinfo_map");
  DECODE_ERR("{\"instances\": [{\"b64\": \"AA==\"}]}", &sig_two, TD_INVALID_ARGUMENT,
             "instances is a plain list, but expecting list of objects as multiple input tensors "
             "required as per tensorinfo_map");
  DECODE_ERR("{\"inputs\": [1]}", &sig_two, TD_INVALID_ARGUMENT,
             "inputs is a plain value/list, but expecting an object as multiple input tensors "
             "required as per tensorinfo_map");
  DECODE_ERR("{\"inputs\": {\"a\": [1]}}", &sig_two, TD_INVALID_ARGUMENT,
             "Missing named input: b in 'inputs' object.");
  DECODE_ERR("{\"instances\": [{\"a\": 1, \"b\": \"x\"}, [1]]}", &sig_two, TD_INVALID_ARGUMENT,
             "Expecting object but got list at item 1 of input list");
  DECODE_ERR("{\"instances\": [{\"a\": 1, \"c\": 2}]}", &sig_two, TD_INVALID_ARGUMENT,
             "Failed to process element: 0 key: c of 'instances' list. Error: INVALID_ARGUMENT: "
             "JSON object: does not have named input: c");
  DECODE_ERR("{\"instances\": [{\"a\": [0.1, 1e-7]}]}", &sig_two, TD_INVALID_ARGUMENT,
             "Failed to process element: 0 of 'instances' list. JSON object: {\n    \"a\": [\n"
             "        0.1,\n        1e-7\n    ]\n} keys must be equal to: a,b");
  DECODE_ERR("{\"instances\": [{\"a\": 1, \"b\": \"x\"}, {\"a\": [1], \"b\": \"y\"}]}", &sig_two,
             TD_INVALID_ARGUMENT,
             "Failed to process element: 1 key: a of 'instances' list. Error: INVALID_ARGUMENT: "
             "Expecting shape [] but got: [1]");
  DECODE_ERR("{\"instances\": [{\"a\": 1, \"b\": \"x\", \"a\": 2}]}", &sig_two,
             TD_INVALID_ARGUMENT,
             "Failed to process element: 0 key: a of 'instances' list. Error: INVALID_ARGUMENT: "
             "JSON object: has key a more than once");
  DECODE_ERR("{\"instances\": [{\"a\": \"s\", \"b\": \"x\"}]}", &sig_two, TD_INVALID_ARGUMENT,
             "Failed to process element: 0 key: a of 'instances' list. Error: INVALID_ARGUMENT: "
             "JSON Value: \"s\" Type: String is not of expected type: float");

  ldr_signature none = make_sig(NULL, 0, NULL, 0);
  DECODE_ERR("{\"inputs\": [1]}", &none, TD_INVALID_ARGUMENT,
             "Failed to get input map for signature: DEFAULT");
}
END_TEST

START_TEST(test_long_value_is_cut) {
  ldr_signature sig = sig1(ENG_DT_FLOAT);
  td_buf body;
  td_buf_init(&body);
  td_buf_puts(&body, "{\"inputs\": [1], \"instances\": [");
  for (int i = 0; i < 5000; i++) td_buf_printf(&body, "%s%d", i ? "," : "", i);
  td_buf_puts(&body, "]}");
  td_err e = {0};
  eng_tensor in[1];
  srv_json_format fmt;
  ck_assert_int_eq(decode(body.data, &sig, in, &fmt, &e), TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(e.msg, "...") != NULL, "%s", e.msg);
  ck_assert_msg(strstr(e.msg, "keys to exist") != NULL, "%s", e.msg);
  ck_assert(strlen(e.msg) < 700);
  td_buf_free(&body);
}
END_TEST

/* ---------------------------------------------------------------- encoding */

static eng_tensor float_tensor(int rank, const int64_t *dims, const float *vals) {
  eng_tensor t;
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&t), vals, (size_t)eng_tensor_numel(&t) * sizeof(float));
  return t;
}

START_TEST(test_encode_error) {
  td_buf b;
  td_buf_init(&b);
  srv_json_encode_error("Servable not found for request: Latest(\"half\")\n", &b);
  ck_assert_str_eq(b.data,
                   "{\n    \"error\": \"Servable not found for request: Latest(\\\"half\\\")\\n\"\n}");
  td_buf_free(&b);
}
END_TEST

static char *encode(const ldr_signature *sig, const eng_tensor *outs, srv_json_format fmt) {
  td_buf b;
  td_buf_init(&b);
  td_err e = {0};
  td_code rc = srv_json_encode_predict(sig, outs, fmt, &b, &e);
  ck_assert_msg(rc == TD_OK, "encode: %s", e.msg);
  return td_buf_take(&b, NULL);
}

START_TEST(test_encode_half_plus_two) {
  ldr_tensor_info out_info[1] = {info("y", ENG_DT_FLOAT)};
  ldr_signature sig = make_sig(NULL, 0, out_info, 1);
  eng_tensor y = float_tensor(1, (int64_t[]){3}, (float[]){2.5f, 3.0f, 4.5f});
  char *row = encode(&sig, &y, SRV_JSON_ROW);
  ck_assert_str_eq(row, "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}");
  char *col = encode(&sig, &y, SRV_JSON_COLUMNAR);
  ck_assert_str_eq(col, "{\n    \"outputs\": [\n        2.5,\n        3.0,\n        4.5\n    ]\n}");
  free(row);
  free(col);
  eng_tensor_release(&y);

  /* decode -> compute -> encode, the REST round trip for half_plus_two */
  ldr_signature isig = sig1(ENG_DT_FLOAT);
  eng_tensor in[1];
  srv_json_format fmt;
  DECODE_OK("{\"instances\": [1.0, 2.0, 5.0]}", &isig, in, &fmt);
  float *x = eng_tensor_data(&in[0]);
  for (int i = 0; i < 3; i++) x[i] = 0.5f * x[i] + 2.0f;
  row = encode(&sig, in, fmt);
  ck_assert_str_eq(row, "{\n    \"predictions\": [2.5, 3.0, 4.5\n    ]\n}");
  free(row);
  eng_tensor_release(&in[0]);
}
END_TEST

START_TEST(test_encode_shapes) {
  ldr_tensor_info out_info[1] = {info("y", ENG_DT_FLOAT)};
  ldr_signature sig = make_sig(NULL, 0, out_info, 1);
  eng_tensor y = float_tensor(2, (int64_t[]){2, 2}, (float[]){1, 2, 3, 4});
  char *s = encode(&sig, &y, SRV_JSON_ROW);
  ck_assert_str_eq(s, "{\n    \"predictions\": [[1.0, 2.0], [3.0, 4.0]\n    ]\n}");
  free(s);
  s = encode(&sig, &y, SRV_JSON_COLUMNAR);
  ck_assert_str_eq(s,
                   "{\n    \"outputs\": [\n        [\n            1.0,\n            2.0\n        ],\n"
                   "        [\n            3.0,\n            4.0\n        ]\n    ]\n}");
  free(s);
  eng_tensor_release(&y);

  eng_tensor scalar = float_tensor(0, NULL, (float[]){NAN});
  s = encode(&sig, &scalar, SRV_JSON_COLUMNAR);
  ck_assert_str_eq(s, "{\n    \"outputs\": NaN\n}");
  free(s);
  td_buf b;
  td_buf_init(&b);
  td_buf_puts(&b, "keep");
  td_err e = {0};
  ck_assert_int_eq(srv_json_encode_predict(&sig, &scalar, SRV_JSON_ROW, &b, &e),
                   TD_INVALID_ARGUMENT);
  ck_assert_str_eq(e.msg, "Tensor name: y has no shape information ");
  ck_assert_str_eq(b.data, "keep");
  td_buf_free(&b);
  eng_tensor_release(&scalar);

  eng_tensor empty = float_tensor(2, (int64_t[]){2, 0}, (float[]){0});
  s = encode(&sig, &empty, SRV_JSON_ROW);
  ck_assert_str_eq(s, "{\n    \"predictions\": [[], []\n    ]\n}");
  free(s);
  eng_tensor_release(&empty);
  empty = float_tensor(1, (int64_t[]){0}, (float[]){0});
  s = encode(&sig, &empty, SRV_JSON_ROW);
  ck_assert_str_eq(s, "{\n    \"predictions\": []\n}");
  free(s);
  s = encode(&sig, &empty, SRV_JSON_COLUMNAR);
  ck_assert_str_eq(s, "{\n    \"outputs\": []\n}");
  free(s);
  eng_tensor_release(&empty);
}
END_TEST

START_TEST(test_encode_several_outputs) {
  ldr_tensor_info out_info[3] = {info("a", ENG_DT_FLOAT), info("b", ENG_DT_INT64),
                                 info("c", ENG_DT_STRING)};
  ldr_signature sig = make_sig(NULL, 0, out_info, 3);
  eng_tensor outs[3];
  outs[0] = float_tensor(1, (int64_t[]){2}, (float[]){0.5f, INFINITY});
  eng_shape s2 = eng_shape_make(2, (int64_t[]){2, 2});
  ck_assert_int_eq(eng_tensor_alloc(&outs[1], ENG_DT_INT64, &s2, NULL), TD_OK);
  int64_t *l = eng_tensor_data(&outs[1]);
  l[0] = 1, l[1] = -2, l[2] = INT64_MAX, l[3] = 0;
  eng_shape s1 = eng_shape_make(1, (int64_t[]){2});
  ck_assert_int_eq(eng_tensor_alloc_strings(&outs[2], &s1, (size_t[]){3, 1}, NULL), TD_OK);
  memcpy(eng_tensor_str_bytes(&outs[2], 0), "q\"\n", 3);
  memcpy(eng_tensor_str_bytes(&outs[2], 1), "z", 1);

  char *s = encode(&sig, outs, SRV_JSON_ROW);
  ck_assert_str_eq(s,
                   "{\n    \"predictions\": [\n        {\n            \"a\": 0.5,\n"
                   "            \"b\": [1, -2],\n            \"c\": \"q\\\"\\n\"\n        },\n"
                   "        {\n            \"a\": Infinity,\n            \"b\": [9223372036854775807, 0],\n"
                   "            \"c\": \"z\"\n        }\n    ]\n}");
  free(s);
  s = encode(&sig, outs, SRV_JSON_COLUMNAR);
  ck_assert_str_eq(s,
                   "{\n    \"outputs\": {\n        \"a\": [\n            0.5,\n            Infinity\n"
                   "        ],\n        \"b\": [\n            [\n                1,\n"
                   "                -2\n            ],\n            [\n"
                   "                9223372036854775807,\n                0\n            ]\n"
                   "        ],\n        \"c\": [\n            \"q\\\"\\n\",\n            \"z\"\n"
                   "        ]\n    }\n}");
  free(s);

  /* inconsistent batch */
  eng_tensor bad = float_tensor(1, (int64_t[]){3}, (float[]){1, 2, 3});
  eng_tensor mixed[3] = {outs[0], bad, outs[2]};
  td_buf b;
  td_buf_init(&b);
  td_err e = {0};
  ck_assert_int_eq(srv_json_encode_predict(&sig, mixed, SRV_JSON_ROW, &b, &e), TD_INVALID_ARGUMENT);
  ck_assert_str_eq(e.msg, "Tensor name: b has inconsistent batch size: 3 expecting: 2");
  ck_assert_uint_eq(b.len, 0);
  td_buf_free(&b);
  eng_tensor_release(&bad);
  for (int i = 0; i < 3; i++) eng_tensor_release(&outs[i]);
}
END_TEST

START_TEST(test_encode_types_and_bytes) {
  ldr_tensor_info out_info[1] = {info("img_bytes", ENG_DT_STRING)};
  ldr_signature sig = make_sig(NULL, 0, out_info, 1);
  eng_tensor t;
  eng_shape s1 = eng_shape_make(1, (int64_t[]){2});
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s1, (size_t[]){5, 2}, NULL), TD_OK);
  memcpy(eng_tensor_str_bytes(&t, 0), "hello", 5);
  memcpy(eng_tensor_str_bytes(&t, 1), "\x00\xff", 2);
  char *s = encode(&sig, &t, SRV_JSON_ROW);
  ck_assert_str_eq(s,
                   "{\n    \"predictions\": [{\n            \"b64\": \"aGVsbG8=\"\n        }, {\n"
                   "            \"b64\": \"AP8=\"\n        }\n    ]\n}");
  free(s);
  s = encode(&sig, &t, SRV_JSON_COLUMNAR);
  ck_assert_str_eq(s,
                   "{\n    \"outputs\": [\n        {\n            \"b64\": \"aGVsbG8=\"\n        },\n"
                   "        {\n            \"b64\": \"AP8=\"\n        }\n    ]\n}");
  free(s);
  /* the same tensor under a plain alias is written raw */
  out_info[0].alias = "img";
  s = encode(&sig, &t, SRV_JSON_ROW);
  ck_assert_str_eq(s, "{\n    \"predictions\": [\"hello\", \"\\u0000\xff\"\n    ]\n}");
  free(s);
  eng_tensor_release(&t);

  /* bool, int32, uint8, uint64, double */
  const eng_dtype dts[] = {ENG_DT_BOOL, ENG_DT_INT32, ENG_DT_UINT8, ENG_DT_UINT64, ENG_DT_DOUBLE};
  const char *want[] = {
      "{\n    \"predictions\": [true, false\n    ]\n}",
      "{\n    \"predictions\": [-7, 2147483647\n    ]\n}",
      "{\n    \"predictions\": [255, 0\n    ]\n}",
      "{\n    \"predictions\": [18446744073709551615, 1\n    ]\n}",
      "{\n    \"predictions\": [16777217.0, 0.30000000000000004\n    ]\n}",
  };
  for (int k = 0; k < 5; k++) {
    out_info[0] = info("y", dts[k]);
    ck_assert_int_eq(eng_tensor_alloc(&t, dts[k], &s1, NULL), TD_OK);
    void *d = eng_tensor_data(&t);
    switch (dts[k]) {
      case ENG_DT_BOOL: ((uint8_t *)d)[0] = 1; break;
      case ENG_DT_INT32: ((int32_t *)d)[0] = -7, ((int32_t *)d)[1] = INT32_MAX; break;
      case ENG_DT_UINT8: ((uint8_t *)d)[0] = 255; break;
      case ENG_DT_UINT64: ((uint64_t *)d)[0] = UINT64_MAX, ((uint64_t *)d)[1] = 1; break;
      default: ((double *)d)[0] = 16777217.0, ((double *)d)[1] = 0.1 + 0.2;
    }
    s = encode(&sig, &t, SRV_JSON_ROW);
    ck_assert_str_eq(s, want[k]);
    free(s);
    eng_tensor_release(&t);
  }

  out_info[0] = info("h", ENG_DT_HALF);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_HALF, &s1, NULL), TD_OK);
  td_buf b;
  td_buf_init(&b);
  td_err e = {0};
  ck_assert_int_eq(srv_json_encode_predict(&sig, &t, SRV_JSON_COLUMNAR, &b, &e),
                   TD_INVALID_ARGUMENT);
  ck_assert_str_eq(e.msg, "Failed to write JSON value for tensor type: half");
  ck_assert_uint_eq(b.len, 0);
  td_buf_free(&b);
  eng_tensor_release(&t);

  ldr_signature none = make_sig(NULL, 0, NULL, 0);
  td_buf_init(&b);
  ck_assert_int_eq(srv_json_encode_predict(&none, NULL, SRV_JSON_ROW, &b, &e), TD_INVALID_ARGUMENT);
  ck_assert_str_eq(e.msg, "Cannot convert empty tensor map to JSON");
  td_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------------ robustness */

/* Raise for a one-off soak: -DSRV_JSON_FUZZ_ITERS=1000000 */
#ifndef SRV_JSON_FUZZ_ITERS
#define SRV_JSON_FUZZ_ITERS 20000
#endif

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint32_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return (uint32_t)(rng_state >> 11);
}

static void exercise(const char *body, size_t len, const ldr_signature *sigs, int nsigs) {
  srv_json_request r = {0};
  td_err e = {0};
  td_code rc = srv_json_parse_request(body, len, &r, &e);
  if (rc) {
    ck_assert(e.code == rc && e.msg[0]);
    ck_assert_ptr_null(r.root);
    return;
  }
  for (int k = 0; k < nsigs; k++) {
    eng_tensor in[2];
    srv_json_format fmt;
    td_err de = {0};
    rc = srv_json_decode_predict(&r, &sigs[k], 0, in, &fmt, &de);
    if (rc) {
      ck_assert(de.code == rc && de.msg[0]);
      for (int i = 0; i < sigs[k].n_inputs; i++) ck_assert_ptr_null(in[i].buf);
      continue;
    }
    /* echo the inputs back as outputs */
    ldr_signature echo = make_sig(NULL, 0, sigs[k].inputs, sigs[k].n_inputs);
    td_buf out;
    td_buf_init(&out);
    srv_json_encode_predict(&echo, in, fmt, &out, &de);
    td_buf_free(&out);
    for (int i = 0; i < sigs[k].n_inputs; i++) eng_tensor_release(&in[i]);
  }
  td_buf v;
  td_buf_init(&v);
  srv_json_append_value(&v, r.root);
  ck_assert(v.len <= SRV_JSON_VALUE_TEXT_MAX + 8 + 64 * 4 * 64);
  td_buf_free(&v);
  srv_json_request_free(&r);
}

START_TEST(test_garbage_never_crashes) {
  static const char *seeds[] = {
      "{\"instances\": [1.0, 2.0, 5.0]}",
      "{\"inputs\": [[1, 2], [3, 4]], \"signature_name\": \"s\"}",
      "{\"instances\": [{\"a\": [1.5, 2], \"b\": \"x\"}, {\"a\": [2.5, 3], \"b\": {\"b64\": \"eXk=\"}}]}",
      "{\"inputs\": {\"a\": [[1], [2]], \"b\": [\"\\u00e9\\ud83d\\ude00\", \"\\n\"]}}",
      "{\"inputs\": [NaN, -Infinity, 1e308, -0, 18446744073709551615, true, null]}",
      "{\"instances\": [[[[1]]], [[[2]]]], \"x\": {\"y\": [{}, [], \"\"]}}",
  };
  ldr_tensor_info i_f[1] = {info("x", ENG_DT_FLOAT)};
  ldr_tensor_info i_i[1] = {info("x", ENG_DT_INT32)};
  ldr_tensor_info i_s[1] = {info("x", ENG_DT_STRING)};
  ldr_tensor_info i_ab[2] = {info("a", ENG_DT_FLOAT), info("b", ENG_DT_STRING)};
  ldr_tensor_info i_u[2] = {info("a", ENG_DT_UINT64), info("b", ENG_DT_BOOL)};
  const ldr_signature sigs[] = {make_sig(i_f, 1, NULL, 0), make_sig(i_i, 1, NULL, 0),
                                make_sig(i_s, 1, NULL, 0), make_sig(i_ab, 2, NULL, 0),
                                make_sig(i_u, 2, NULL, 0)};
  static const char alphabet[] = "{}[]\",:0123456789.eE+-\\ubtnfalsrNI \x00\x01\xff";
  char buf[512];
  for (int iter = 0; iter < SRV_JSON_FUZZ_ITERS; iter++) {
    const char *seed = seeds[rnd() % (sizeof seeds / sizeof *seeds)];
    size_t len = strlen(seed);
    memcpy(buf, seed, len);
    int edits = 1 + (int)(rnd() % 6);
    for (int k = 0; k < edits; k++) {
      size_t at = len ? rnd() % len : 0;
      char c = alphabet[rnd() % (sizeof alphabet - 1)];
      switch (rnd() % 4) {
        case 0: buf[at] = c; break; /* replace */
        case 1:                     /* insert */
          if (len + 1 < sizeof buf) {
            memmove(buf + at + 1, buf + at, len - at);
            buf[at] = c;
            len++;
          }
          break;
        case 2: /* delete */
          if (len) {
            memmove(buf + at, buf + at + 1, len - at - 1);
            len--;
          }
          break;
        default: len = at; /* truncate */
      }
    }
    exercise(buf, len, sigs, (int)(sizeof sigs / sizeof *sigs));
  }
  /* purely random bytes and deep nesting */
  for (int iter = 0; iter < SRV_JSON_FUZZ_ITERS / 10; iter++) {
    size_t len = rnd() % sizeof buf;
    for (size_t i = 0; i < len; i++) buf[i] = alphabet[rnd() % (sizeof alphabet - 1)];
    if (len) buf[0] = '{';
    exercise(buf, len, sigs, 5);
  }
  char deep[300];
  size_t n = (size_t)sprintf(deep, "{\"inputs\":");
  for (int i = 0; i < 63; i++) deep[n++] = '[';
  for (int i = 0; i < 63; i++) deep[n++] = ']';
  deep[n++] = '}';
  exercise(deep, n, sigs, 5);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("srv_json");
  TCase *tc = tcase_create("parse");
  tcase_add_test(tc, test_parse_request_errors);
  tcase_add_test(tc, test_parse_request_ok);
  suite_add_tcase(s, tc);
  tc = tcase_create("decode");
  tcase_add_test(tc, test_row_float);
  tcase_add_test(tc, test_columnar_float);
  tcase_add_test(tc, test_multi_input);
  tcase_add_test(tc, test_int_rules);
  tcase_add_test(tc, test_float_rules);
  tcase_add_test(tc, test_bool_string_b64);
  tcase_add_test(tc, test_unsupported_dtype);
  tcase_add_test(tc, test_request_errors);
  tcase_add_test(tc, test_long_value_is_cut);
  suite_add_tcase(s, tc);
  tc = tcase_create("encode");
  tcase_add_test(tc, test_encode_half_plus_two);
  tcase_add_test(tc, test_encode_shapes);
  tcase_add_test(tc, test_encode_several_outputs);
  tcase_add_test(tc, test_encode_types_and_bytes);
  tcase_add_test(tc, test_encode_error);
  suite_add_tcase(s, tc);
  tc = tcase_create("robustness");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_garbage_never_crashes);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
