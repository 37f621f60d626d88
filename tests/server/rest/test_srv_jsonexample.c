/* srv_jsonexample: JSON examples -> serialized tf.Example (read back with
 * protobuf-c), TF Serving's error messages, and the classify/regress
 * response bytes. srv_jsonmeta's layouts are checked here too (both are
 * the REST API's non-predict JSON). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_jsonexample.h"
#include "srv_jsonmeta.h"
#include "tensorflow/core/example/example.pb-c.h"

static srv_json_request parse(const char *body) {
  srv_json_request r;
  td_err err;
  ck_assert_msg(srv_json_parse_request(body, strlen(body), &r, &err) == TD_OK, "%s", err.msg);
  return r;
}

static const Tensorflow__Feature *feature(const Tensorflow__Example *ex, const char *key) {
  for (size_t i = 0; ex->features && i < ex->features->n_feature; i++)
    if (!strcmp(ex->features->feature[i]->key, key)) return ex->features->feature[i]->value;
  return NULL;
}

START_TEST(examples_serialize_each_kind) {
  srv_json_request r = parse(
      "{\"examples\": [{\"f\": 1.5, \"i\": [3, -4], \"b\": true, \"s\": \"ab\", "
      "\"x\": {\"b64\": \"AAE=\"}, \"e\": [], \"d\": 1, \"d\": 2.5e0}]}");
  srv_json_examples ex;
  td_err err;
  ck_assert_msg(srv_json_decode_examples(&r, &ex, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(ex.n, 1);
  ck_assert(!ex.has_context && ex.context.len == 0);
  Tensorflow__Example *m =
      tensorflow__example__unpack(NULL, ex.examples[0].len, (const uint8_t *)ex.examples[0].data);
  ck_assert_ptr_nonnull(m);
  const Tensorflow__Feature *f = feature(m, "f");
  ck_assert(f && f->kind_case == TENSORFLOW__FEATURE__KIND_FLOAT_LIST);
  ck_assert(f->float_list->n_value == 1 && f->float_list->value[0] == 1.5f);
  f = feature(m, "i");
  ck_assert(f && f->kind_case == TENSORFLOW__FEATURE__KIND_INT64_LIST);
  ck_assert(f->int64_list->n_value == 2 && f->int64_list->value[1] == -4);
  f = feature(m, "b");
  ck_assert(f && f->kind_case == TENSORFLOW__FEATURE__KIND_INT64_LIST && f->int64_list->value[0] == 1);
  f = feature(m, "s");
  ck_assert(f && f->kind_case == TENSORFLOW__FEATURE__KIND_BYTES_LIST);
  ck_assert(f->bytes_list->value[0].len == 2 && !memcmp(f->bytes_list->value[0].data, "ab", 2));
  f = feature(m, "x");
  ck_assert(f && f->bytes_list->value[0].len == 2 && f->bytes_list->value[0].data[1] == 1);
  f = feature(m, "e");
  ck_assert(f && f->kind_case == TENSORFLOW__FEATURE__KIND__NOT_SET);
  /* A repeated key keeps its last value, as a protobuf map does. */
  ck_assert_int_eq(m->features->n_feature, 7);
  f = feature(m, "d");
  ck_assert(f && f->kind_case == TENSORFLOW__FEATURE__KIND_FLOAT_LIST && f->float_list->value[0] == 2.5f);
  tensorflow__example__free_unpacked(m, NULL);
  srv_json_examples_free(&ex);
  srv_json_request_free(&r);
}
END_TEST

START_TEST(context_is_its_own_example) {
  srv_json_request r = parse("{\"context\": {\"c\": 7.0}, \"examples\": [{}, {\"x\": 1.0}]}");
  srv_json_examples ex;
  td_err err;
  ck_assert_msg(srv_json_decode_examples(&r, &ex, &err) == TD_OK, "%s", err.msg);
  ck_assert(ex.has_context && ex.n == 2 && ex.context.len > 0);
  ck_assert_int_eq(ex.examples[0].len, 0); /* {} serializes to nothing */
  Tensorflow__Example *m =
      tensorflow__example__unpack(NULL, ex.context.len, (const uint8_t *)ex.context.data);
  ck_assert(m && feature(m, "c") && feature(m, "c")->float_list->value[0] == 7.0f);
  tensorflow__example__free_unpacked(m, NULL);
  srv_json_examples_free(&ex);
  srv_json_request_free(&r);
}
END_TEST

static void expect_error(const char *body, const char *msg, bool prefix_only) {
  srv_json_request r = parse(body);
  srv_json_examples ex;
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(srv_json_decode_examples(&r, &ex, &err), TD_INVALID_ARGUMENT);
  if (prefix_only)
    ck_assert_msg(strstr(err.msg, msg), "'%s' lacks '%s'", err.msg, msg);
  else
    ck_assert_str_eq(err.msg, msg);
  srv_json_request_free(&r);
}

START_TEST(tf_serving_messages) {
  expect_error("{\"x\": 1}", "JSON Value: {\n    \"x\": 1\n} When method is classify, key 'examples' "
                             "is expected and was not found", false);
  expect_error("{\"examples\": 3}", "Expecting 'examples' value to be an list/array", true);
  expect_error("{\"examples\": []}", "'examples' value is an empty array", true);
  expect_error("{\"examples\": [1]}", "Example must be JSON object but got JSON Number", false);
  expect_error("{\"examples\": [{\"a\": [1.0, 2]}]}",
               "Unexpected element type in feature: a expecting type: float", false);
  expect_error("{\"examples\": [{\"a\": [\"s\", true]}]}",
               "Unexpected element type in feature: a expecting type: bytes", false);
  expect_error("{\"examples\": [{\"a\": {\"c\": 1}}]}",
               "Feature: a has element with unexpected JSON type: Object", false);
  expect_error("{\"examples\": [{\"a\": 18446744073709551615}]}",
               "Feature: a has uint64 element. Only int64 is supported.", false);
  expect_error("{\"examples\": [{\"a\": 1e39}]}", "to float without loss of precision.", true);
  expect_error("{\"examples\": [{\"a\": {\"b64\": \"!!\"}}]}", "Unable to base64 decode", false);
}
END_TEST

START_TEST(result_layouts) {
  td_buf b;
  td_buf_init(&b);
  srv_class cls[] = {{"", 0, 3.0f}, {"a\"b", 3, 0.5f}, {"c", 1, 1e-5f}, {"d", 1, 9e6f}};
  srv_classify_result cr = {.n_examples = 2, .n_classes = 2, .classes = cls};
  srv_json_encode_classify(&cr, &b);
  ck_assert_str_eq(b.data, "{\n    \"results\": [[[\"\", 3.0], [\"a\\\"b\", 0.5]], "
                           "[[\"c\", 1e-05], [\"d\", 9e+06]]\n    ]\n}");
  td_buf_reset(&b);
  srv_json_encode_regress((const float[]){3.0f, 2.00000501f}, 2, &b);
  ck_assert_str_eq(b.data, "{\n    \"results\": [3.0, 2.00000501]\n}");
  td_buf_free(&b);
}
END_TEST

START_TEST(meta_layouts) {
  td_buf b;
  td_buf_init(&b);
  ldr_version_status st[2] = {{.version = 1, .state = LDR_STATE_AVAILABLE},
                              {.version = 2, .state = LDR_STATE_END}};
  st[1].status.code = TD_NOT_FOUND;
  strcpy(st[1].status.msg, "no \"x\"");
  srv_json_encode_status(st, 2, &b);
  ck_assert_str_eq(b.data,
                   "{\n \"model_version_status\": [\n  {\n   \"version\": \"1\",\n   \"state\": "
                   "\"AVAILABLE\",\n   \"status\": {\n    \"error_code\": \"OK\",\n    "
                   "\"error_message\": \"\"\n   }\n  },\n  {\n   \"version\": \"2\",\n   \"state\": "
                   "\"END\",\n   \"status\": {\n    \"error_code\": \"NOT_FOUND\",\n    "
                   "\"error_message\": \"no \\\"x\\\"\"\n   }\n  }\n ]\n}\n");
  td_buf_reset(&b);
  srv_json_encode_model_list(NULL, 0, &b);
  ck_assert_str_eq(b.data, "{\n \"models\": []\n}\n");
  td_buf_reset(&b);
  const char *missing[] = {"a", "b"};
  srv_json_encode_ready(false, missing, 2, &b);
  ck_assert_str_eq(b.data, "{\n \"ready\": false,\n \"models_not_ready\": [\n  \"a\",\n  \"b\"\n ]\n}\n");
  td_buf_free(&b);
}
END_TEST

int main(void) {
  Suite *s = suite_create("srv_jsonexample");
  TCase *tc = tcase_create("examples");
  tcase_add_test(tc, examples_serialize_each_kind);
  tcase_add_test(tc, context_is_its_own_example);
  tcase_add_test(tc, tf_serving_messages);
  tcase_add_test(tc, result_layouts);
  tcase_add_test(tc, meta_layouts);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
