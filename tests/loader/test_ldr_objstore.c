/* ldr_objstore's URL handling (the listing, completeness and download are
 * exercised against real emulators in tests/e2e/test_objstore.py). */
#include <check.h>
#include <stdlib.h>

#include "ldr_objstore.h"
#include "td_testcheck.h"

START_TEST(test_parse) {
  const ldr_os_backend *be;
  char *bucket, *prefix;
  td_err err;
  ck_ok(ldr_objstore_parse("s3://models/a/b//", &be, &bucket, &prefix, &err), err);
  ck_assert_str_eq(be->scheme, "s3");
  ck_assert_str_eq(bucket, "models");
  ck_assert_str_eq(prefix, "a/b");
  free(bucket);
  free(prefix);
  ck_ok(ldr_objstore_parse("gs://b", &be, &bucket, &prefix, &err), err);
  ck_assert_str_eq(be->scheme, "gs");
  ck_assert_str_eq(bucket, "b");
  ck_assert_str_eq(prefix, "");
  free(bucket);
  free(prefix);
  ck_err(ldr_objstore_parse("s3:///x", &be, &bucket, &prefix, &err), err, TD_INVALID_ARGUMENT,
         "no bucket");
  ck_err(ldr_objstore_parse("/models/m", &be, &bucket, &prefix, &err), err, TD_INVALID_ARGUMENT,
         "not an s3:// or gs:// URL");
  ck_assert(ldr_objstore_is_remote("gs://b/m"));
  ck_assert(ldr_objstore_is_remote("s3://b"));
  ck_assert(!ldr_objstore_is_remote("/s3://b"));
  ck_assert(!ldr_objstore_is_remote("models/m"));
}
END_TEST

START_TEST(test_unreachable_store_is_unavailable) {
  /* Port 1 on loopback refuses at once; the scan names the URL. */
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
  setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret-never-shown", 1);
  ldr_os_version *v = NULL;
  int n = 0;
  td_err err;
  ck_err(ldr_objstore_scan("s3://models/m", &v, &n, &err), err, TD_UNAVAILABLE,
         "http://127.0.0.1:1/models?");
  ck_assert_ptr_null(strstr(err.msg, "secret-never-shown"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_objstore");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, test_parse);
  tcase_add_test(tc, test_unreachable_store_is_unavailable);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
