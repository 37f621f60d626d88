/* srv_json_decode_predict's byte budget (--tensord_max_request_input_bytes
 * on REST): inputs that would decode past it are refused, naming the sizes,
 * before they are allocated; base64 strings count their decoded bytes. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_json.h"

static ldr_tensor_info ins[2];

static ldr_signature sig_of(eng_dtype a, eng_dtype b, int n) {
  ins[0] = (ldr_tensor_info){.alias = "a", .name = "a:0", .dtype = a, .shape = {.rank = -1}};
  ins[1] = (ldr_tensor_info){.alias = "b", .name = "b:0", .dtype = b, .shape = {.rank = -1}};
  return (ldr_signature){.key = "serving_default",
                         .method_name = "tensorflow/serving/predict",
                         .n_inputs = n,
                         .inputs = ins};
}

static td_code decode(const char *body, const ldr_signature *sig, size_t max_bytes, eng_tensor *in,
                      td_err *err) {
  srv_json_request r = {0};
  td_code rc = srv_json_parse_request(body, strlen(body), &r, err);
  if (rc) return rc;
  srv_json_format fmt;
  memset(in, 0x5a, 2 * sizeof *in);
  rc = srv_json_decode_predict(&r, sig, max_bytes, in, &fmt, err);
  srv_json_request_free(&r);
  return rc;
}

/* Empty: no buffer (eng_tensor_release's state). */
static void expect_empty(const eng_tensor *t) { ck_assert_ptr_null(t->buf); }

START_TEST(test_numbers_over_the_budget) {
  ldr_signature sig = sig_of(ENG_DT_FLOAT, ENG_DT_FLOAT, 1);
  eng_tensor in[2];
  td_err err = {0};
  /* 4 floats: 16 bytes. */
  const char *body = "{\"instances\": [1, 2, 3, 4]}";
  ck_assert_int_eq(decode(body, &sig, 16, in, &err), TD_OK);
  eng_tensor_release(&in[0]);
  ck_assert_int_eq(decode(body, &sig, 15, in, &err), TD_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(err.msg,
                   "input 'a': the tensor would take 16 bytes, more than the 15 this request may "
                   "still use");
  expect_empty(&in[0]);
  /* 0: no bound. */
  ck_assert_int_eq(decode(body, &sig, 0, in, &err), TD_OK);
  eng_tensor_release(&in[0]);
}
END_TEST

START_TEST(test_budget_is_shared_by_the_inputs) {
  /* a: 2 doubles (16 bytes), b: 2 int64 (16 bytes); 24 fits a, not b. */
  ldr_signature sig = sig_of(ENG_DT_DOUBLE, ENG_DT_INT64, 2);
  eng_tensor in[2];
  td_err err = {0};
  const char *row = "{\"instances\": [{\"a\": 1.5, \"b\": 1}, {\"a\": 2.5, \"b\": 2}]}";
  ck_assert_int_eq(decode(row, &sig, 32, in, &err), TD_OK);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
  ck_assert_int_eq(decode(row, &sig, 24, in, &err), TD_RESOURCE_EXHAUSTED);
  ck_assert_str_eq(err.msg,
                   "input 'b': the tensor would take 16 bytes, more than the 8 this request may "
                   "still use");
  expect_empty(&in[0]); /* what was decoded before is released */
  expect_empty(&in[1]);
  const char *cols = "{\"inputs\": {\"a\": [1.5, 2.5], \"b\": [1, 2]}}";
  ck_assert_int_eq(decode(cols, &sig, 24, in, &err), TD_RESOURCE_EXHAUSTED);
  ck_assert(strstr(err.msg, "input 'b'") != NULL);
  expect_empty(&in[0]);
  expect_empty(&in[1]);
}
END_TEST

START_TEST(test_base64_counts_decoded_bytes) {
  ldr_signature sig = sig_of(ENG_DT_STRING, ENG_DT_STRING, 1);
  eng_tensor in[2];
  td_err err = {0};
  /* 3000 'A's of base64 decode to 2250 zero bytes. */
  size_t n = 3000;
  char *body = malloc(n + 64);
  ck_assert_ptr_nonnull(body);
  int k = sprintf(body, "{\"inputs\": [{\"b64\": \"");
  memset(body + k, 'A', n);
  strcpy(body + k + n, "\"}]}");
  const size_t need = sizeof(eng_str) + 1 + 2250;
  ck_assert_int_eq(decode(body, &sig, need, in, &err), TD_OK);
  ck_assert_int_eq(eng_tensor_strs(&in[0])[0].len, 2250);
  eng_tensor_release(&in[0]);
  ck_assert_int_eq(decode(body, &sig, need - 1, in, &err), TD_RESOURCE_EXHAUSTED);
  ck_assert(strstr(err.msg, "input 'a': the tensor would take") != NULL);
  expect_empty(&in[0]);
  free(body);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("srv_json_budget");
  TCase *tc = tcase_create("budget");
  tcase_add_test(tc, test_numbers_over_the_budget);
  tcase_add_test(tc, test_budget_is_shared_by_the_inputs);
  tcase_add_test(tc, test_base64_counts_decoded_bytes);
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
