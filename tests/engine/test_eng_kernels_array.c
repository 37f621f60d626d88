/* eng_copy_nd with negative source strides (reversed slices), on each of
 * its inner loops: contiguous rows, 4-byte and other element sizes. The
 * offsets go negative, which UBSan checks in the sanitizer build. Then
 * transposes of a rank-4 array (the source's contiguous dim moved inward,
 * outward or kept, one dim reversed or none) against an element-by-element
 * walk. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* dst[i0][i1][i2][i3] = src at sum(i * sst), walked one element at a time. */
static void walk4(const int64_t *dims, size_t es, const char *src, const int64_t *sst, char *dst) {
  int64_t n = 0;
  for (int64_t a = 0; a < dims[0]; a++)
    for (int64_t b = 0; b < dims[1]; b++)
      for (int64_t c = 0; c < dims[2]; c++)
        for (int64_t d = 0; d < dims[3]; d++, n++) {
          int64_t o = a * sst[0] + b * sst[1] + c * sst[2] + d * sst[3];
          memcpy(dst + (size_t)n * es, src + o * (int64_t)es, es);
        }
}

/* Copies a [3, 37, 5, 21] source under the permutation perm (its dims in
 * destination order), optionally walking the source's dim rev backwards. */
static void check_perm(size_t es, const int perm[4], int rev) {
  int64_t sd[4] = {3, 37, 5, 21}, sst[4], dims[4], pst[4], dst[4];
  int64_t n = 3 * 37 * 5 * 21, v = 1;
  for (int d = 3; d >= 0; d--) {
    sst[d] = v;
    v *= sd[d];
  }
  char *x = malloc((size_t)n * es), *y = malloc((size_t)n * es), *want = malloc((size_t)n * es);
  for (int64_t i = 0; i < n; i++) {
    int64_t val = i * 7 + 1;
    memcpy(x + (size_t)i * es, &val, es);
  }
  int64_t base = 0;
  for (int d = 0; d < 4; d++) {
    dims[d] = sd[perm[d]];
    pst[d] = sst[perm[d]];
    if (perm[d] == rev) {
      base += (dims[d] - 1) * pst[d];
      pst[d] = -pst[d];
    }
  }
  v = 1;
  for (int d = 3; d >= 0; d--) {
    dst[d] = v;
    v *= dims[d];
  }
  eng_copy_nd(4, dims, es, x + base * (int64_t)es, pst, y, dst);
  walk4(dims, es, x + base * (int64_t)es, pst, want);
  ck_assert_int_eq(memcmp(y, want, (size_t)n * es), 0);
  free(x);
  free(y);
  free(want);
}

START_TEST(transposes_match_the_walk) {
  static const int perms[][4] = {{0, 3, 2, 1}, {3, 1, 2, 0}, {0, 2, 3, 1}, {1, 3, 0, 2}};
  for (size_t p = 0; p < sizeof perms / sizeof perms[0]; p++)
    for (int rev = -1; rev < 4; rev++) {
      check_perm(4, perms[p], rev);
      check_perm(8, perms[p], rev);
    }
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_kernels_array");
  TCase *tc = tcase_create("copy_nd");
  tcase_add_test(tc, rows_reversed_contiguous);
  tcase_add_test(tc, both_axes_reversed_4_byte);
  tcase_add_test(tc, both_axes_reversed_8_byte);
  tcase_add_test(tc, transposes_match_the_walk);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
