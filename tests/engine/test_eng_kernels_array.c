/* eng_copy_nd with negative source strides (reversed slices), on each of
 * its inner loops: contiguous rows, 4-byte and other element sizes. The
 * offsets go negative, which UBSan checks in the sanitizer build. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "eng_kernels.h"

START_TEST(rows_reversed_contiguous) {
  int32_t x[6] = {0, 1, 2, 3, 4, 5}, y[6] = {0};
  int64_t dims[2] = {2, 3}, sst[2] = {-3, 1}, dst[2] = {3, 1};
  eng_copy_nd(2, dims, sizeof x[0], (const char *)(x + 3), sst, (char *)y, dst);
  int32_t want[6] = {3, 4, 5, 0, 1, 2};
  for (int i = 0; i < 6; i++) ck_assert_int_eq(y[i], want[i]);
}
END_TEST

START_TEST(both_axes_reversed_4_byte) {
  int32_t x[6] = {0, 1, 2, 3, 4, 5}, y[6] = {0};
  int64_t dims[2] = {2, 3}, sst[2] = {-3, -1}, dst[2] = {3, 1};
  eng_copy_nd(2, dims, sizeof x[0], (const char *)(x + 5), sst, (char *)y, dst);
  for (int i = 0; i < 6; i++) ck_assert_int_eq(y[i], 5 - i);
}
END_TEST

START_TEST(both_axes_reversed_8_byte) {
  int64_t x[6] = {0, 1, 2, 3, 4, 5}, y[6] = {0};
  int64_t dims[2] = {2, 3}, sst[2] = {-3, -1}, dst[2] = {3, 1};
  eng_copy_nd(2, dims, sizeof x[0], (const char *)(x + 5), sst, (char *)y, dst);
  for (int i = 0; i < 6; i++) ck_assert_int_eq(y[i], 5 - i);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_kernels_array");
  TCase *tc = tcase_create("copy_nd");
  tcase_add_test(tc, rows_reversed_contiguous);
  tcase_add_test(tc, both_axes_reversed_4_byte);
  tcase_add_test(tc, both_axes_reversed_8_byte);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
