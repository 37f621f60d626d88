/* CRC-32C: published check values, incremental use, and the mask. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_crc32c.h"

/* Bit-at-a-time reference, independent of the table code under test. */
static uint32_t crc_slow(const uint8_t *p, size_t n) {
  uint32_t c = 0xffffffffu;
  while (n--) {
    c ^= *p++;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

START_TEST(test_known_vectors) {
  ck_assert_uint_eq(ldr_crc32c("123456789", 9), 0xE3069283u);
  ck_assert_uint_eq(ldr_crc32c("", 0), 0u);
  uint8_t buf[32];
  memset(buf, 0, sizeof buf);
  ck_assert_uint_eq(ldr_crc32c(buf, sizeof buf), 0x8A9136AAu);
  memset(buf, 0xff, sizeof buf);
  ck_assert_uint_eq(ldr_crc32c(buf, sizeof buf), 0x62A8AB43u);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
  ck_assert_uint_eq(ldr_crc32c(buf, sizeof buf), 0x46DD794Eu);
  for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(31 - i);
  ck_assert_uint_eq(ldr_crc32c(buf, sizeof buf), 0x113FDB5Cu);
  /* LevelDB's crc32c_test: an iSCSI read command PDU. */
  static const uint8_t iscsi[48] = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
  };
  ck_assert_uint_eq(ldr_crc32c(iscsi, sizeof iscsi), 0xD9963A56u);
}
END_TEST

/* Every length and alignment against the slow reference, whole and split
 * at every point, so the 8-byte loop and the tail both get covered. */
START_TEST(test_matches_reference_and_extends) {
  uint8_t buf[200];
  srand(7);
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)rand();
  for (size_t start = 0; start < 9; start++)
    for (size_t n = 0; n + start <= sizeof buf; n++) {
      uint32_t want = crc_slow(buf + start, n);
      ck_assert_uint_eq(ldr_crc32c(buf + start, n), want);
      ck_assert_uint_eq(ldr_crc32c_extend_portable(0, buf + start, n), want);
      if (n % 7 == 0)
        for (size_t cut = 0; cut <= n; cut++)
        {
          ck_assert_uint_eq(
              ldr_crc32c_extend(ldr_crc32c(buf + start, cut), buf + start + cut, n - cut), want);
          ck_assert_uint_eq(ldr_crc32c_extend_portable(ldr_crc32c(buf + start, cut),
                                                       buf + start + cut, n - cut),
                            want);
        }
    }
  ck_assert_uint_eq(ldr_crc32c_extend(ldr_crc32c("hello ", 6), "world", 5),
                    ldr_crc32c("hello world", 11));
}
END_TEST

START_TEST(test_mask) {
  uint32_t crc = ldr_crc32c("foo", 3);
  ck_assert_uint_ne(crc, ldr_crc32c_mask(crc));
  ck_assert_uint_ne(crc, ldr_crc32c_mask(ldr_crc32c_mask(crc)));
  ck_assert_uint_eq(crc, ldr_crc32c_unmask(ldr_crc32c_mask(crc)));
  ck_assert_uint_eq(crc,
                    ldr_crc32c_unmask(ldr_crc32c_unmask(ldr_crc32c_mask(ldr_crc32c_mask(crc)))));
  /* The formula from LevelDB / TF: rotate right 15, add a constant. */
  ck_assert_uint_eq(ldr_crc32c_mask(0), 0xa282ead8u);
  ck_assert_uint_eq(ldr_crc32c_mask(0x80000000u), 0xa282ead8u + 0x10000u);
  uint32_t x = 0x12345678u;
  for (int i = 0; i < 1000; i++) {
    ck_assert_uint_eq(ldr_crc32c_unmask(ldr_crc32c_mask(x)), x);
    x = x * 1103515245u + 12345u;
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_crc32c");
  TCase *tc = tcase_create("crc32c");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_known_vectors);
  tcase_add_test(tc, test_matches_reference_and_extends);
  tcase_add_test(tc, test_mask);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
