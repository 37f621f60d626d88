/* srv_v2: datatype names, version strings, raw layouts. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "srv_v2.h"

START_TEST(datatypes_round_trip) {
  const eng_dtype all[] = {ENG_DT_BOOL,   ENG_DT_UINT8, ENG_DT_UINT16,   ENG_DT_UINT32,
                           ENG_DT_UINT64, ENG_DT_INT8,  ENG_DT_INT16,    ENG_DT_INT32,
                           ENG_DT_INT64,  ENG_DT_HALF,  ENG_DT_BFLOAT16, ENG_DT_FLOAT,
                           ENG_DT_DOUBLE, ENG_DT_STRING};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    const char *n = srv_v2_datatype(all[i]);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(srv_v2_dtype(n, strlen(n)), all[i]);
  }
  ck_assert_str_eq(srv_v2_datatype(ENG_DT_FLOAT), "FP32");
  ck_assert_str_eq(srv_v2_datatype(ENG_DT_STRING), "BYTES");
  ck_assert_ptr_null(srv_v2_datatype(ENG_DT_RESOURCE));
  ck_assert_ptr_null(srv_v2_datatype(ENG_DT_COMPLEX64));
  ck_assert_int_eq(srv_v2_dtype("FP3", 3), ENG_DT_INVALID);
  ck_assert_int_eq(srv_v2_dtype("fp32", 4), ENG_DT_INVALID);
}
END_TEST

START_TEST(versions) {
  bool has;
  int64_t v;
  ck_assert_int_eq(srv_v2_parse_version("", &has, &v, NULL), TD_OK);
  ck_assert(!has);
  ck_assert_int_eq(srv_v2_parse_version(NULL, &has, &v, NULL), TD_OK);
  ck_assert(!has);
  ck_assert_int_eq(srv_v2_parse_version("42", &has, &v, NULL), TD_OK);
  ck_assert(has);
  ck_assert_int_eq(v, 42);
  td_err err;
  ck_assert_int_eq(srv_v2_parse_version("4x", &has, &v, &err), TD_INVALID_ARGUMENT);
  ck_assert_str_eq(err.msg, "invalid model version '4x': expected a number");
  ck_assert_int_eq(srv_v2_parse_version("-1", &has, &v, NULL), TD_INVALID_ARGUMENT);
  ck_assert_int_eq(srv_v2_parse_version("99999999999999999999", &has, &v, NULL),
                   TD_INVALID_ARGUMENT);
}
END_TEST

START_TEST(raw_bytes_are_length_prefixed) {
  eng_shape s = eng_shape_make(1, (int64_t[]){2});
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s, (size_t[]){2, 0}, NULL), TD_OK);
  memcpy(eng_tensor_str_bytes(&t, 0), "hi", 2);
  td_buf scratch;
  td_buf_init(&scratch);
  const void *data;
  size_t len;
  srv_v2_raw(&t, &scratch, &data, &len);
  ck_assert_uint_eq(len, 10);
  ck_assert(!memcmp(data, "\x02\0\0\0hi\0\0\0\0", 10));
  td_buf_free(&scratch);
  eng_tensor_release(&t);
  /* Numeric tensors are their data, in place. */
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_INT32, &s, NULL), TD_OK);
  srv_v2_raw(&t, NULL, &data, &len);
  ck_assert_ptr_eq(data, eng_tensor_data(&t));
  ck_assert_uint_eq(len, 8);
  eng_tensor_release(&t);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("srv_v2");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, datatypes_round_trip);
  tcase_add_test(tc, versions);
  tcase_add_test(tc, raw_bytes_are_length_prefixed);
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
