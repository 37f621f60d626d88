/* td_status's errno translation (one table for every module that reads
 * files) and td_clock's monotonic clock. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "td_clock.h"
#include "td_file.h"
#include "td_status.h"

START_TEST(errno_codes) {
  ck_assert_int_eq(td_code_from_errno(ENOENT), TD_NOT_FOUND);
  ck_assert_int_eq(td_code_from_errno(ENOTDIR), TD_NOT_FOUND);
  ck_assert_int_eq(td_code_from_errno(EACCES), TD_PERMISSION_DENIED);
  ck_assert_int_eq(td_code_from_errno(EPERM), TD_PERMISSION_DENIED);
  ck_assert_int_eq(td_code_from_errno(EMFILE), TD_RESOURCE_EXHAUSTED);
  ck_assert_int_eq(td_code_from_errno(ENOMEM), TD_RESOURCE_EXHAUSTED);
  ck_assert_int_eq(td_code_from_errno(EINTR), TD_UNAVAILABLE);
  ck_assert_int_eq(td_code_from_errno(ENAMETOOLONG), TD_INVALID_ARGUMENT);
  ck_assert_int_eq(td_code_from_errno(EIO), TD_UNKNOWN);
  ck_assert_int_eq(td_code_from_errno(0), TD_UNKNOWN);
}
END_TEST

/* td_file reports a missing path through the same table. */
START_TEST(file_errors_use_the_table) {
  td_err err;
  td_err_clear(&err);
  uint8_t *data = NULL;
  size_t len = 0;
  ck_assert_int_eq(td_file_read("/nonexistent/tensord/file", 16, &data, &len, &err), TD_NOT_FOUND);
  ck_assert_int_eq(err.code, TD_NOT_FOUND);
  ck_assert_ptr_null(data);
}
END_TEST

START_TEST(clock_is_monotonic) {
  uint64_t a = td_now_ns();
  usleep(1000);
  uint64_t b = td_now_ns();
  ck_assert_uint_gt(a, 0);
  ck_assert_uint_ge(b, a + 1000000u); /* slept at least 1 ms */
}
END_TEST

int main(void) {
  Suite *s = suite_create("td_status");
  TCase *tc = tcase_create("base");
  tcase_add_test(tc, errno_codes);
  tcase_add_test(tc, file_errors_use_the_table);
  tcase_add_test(tc, clock_is_monotonic);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
