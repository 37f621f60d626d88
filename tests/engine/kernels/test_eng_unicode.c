/* eng_unicode: the codecs on the ill-formed input TensorFlow's converters
 * see (one error per maximal subpart, surrogates, truncated units) and the
 * case tables on the mappings that are not one code point to one (sigma's
 * final form, the SpecialCasing expansions). Whole kernels are checked
 * against TensorFlow in tests/e2e/test_coverage_ops.py (unicode_text). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "eng_unicode.h"

/* Decodes s (n bytes) in enc into out; returns the count (-1 = error). */
static int decode_all(eng_uenc enc, const char *s, size_t n, int32_t *out) {
  size_t pos = 0;
  int k = 0;
  while (pos < n) out[k++] = eng_utf_next(enc, (const unsigned char *)s, n, &pos);
  return k;
}

START_TEST(utf8_errors_are_maximal_subparts) {
  int32_t v[16];
  /* E2 82 is a valid prefix cut by 'x'; ED A0 is a surrogate's start, so
   * ED, A0 and 80 are three errors; F0 9F 98 80 is U+1F600. */
  const char s[] = "\xe2\x82x\xed\xa0\x80y\xf0\x9f\x98\x80\xc3";
  int n = decode_all(ENG_UTF8, s, sizeof s - 1, v);
  int32_t want[] = {-1, 'x', -1, -1, -1, 'y', 0x1F600, -1};
  ck_assert_int_eq(n, 8);
  for (int i = 0; i < n; i++) ck_assert_int_eq(v[i], want[i]);
  /* overlong and out-of-range lead bytes are one error each */
  n = decode_all(ENG_UTF8, "\xc0\xaf\xf5\x80", 4, v);
  ck_assert_int_eq(n, 4);
  for (int i = 0; i < n; i++) ck_assert_int_eq(v[i], -1);
}
END_TEST

START_TEST(utf16_and_utf32_errors) {
  int32_t v[16];
  /* h, a lone high surrogate before 'i', 'i', a trailing odd byte */
  int n = decode_all(ENG_UTF16BE, "\x00h\xd8\x00\x00i\x00", 7, v);
  ck_assert_int_eq(n, 4);
  ck_assert(v[0] == 'h' && v[1] == -1 && v[2] == 'i' && v[3] == -1);
  n = decode_all(ENG_UTF16LE, "\x3d\xd8\x00\xde", 4, v);
  ck_assert(n == 1 && v[0] == 0x1F600);
  n = decode_all(ENG_UTF32BE, "\x00\x11\x00\x00\x00\x00\xd8\x00\x00\x01\x00\x00\x00", 13, v);
  ck_assert_int_eq(n, 4);
  ck_assert(v[0] == -1 && v[1] == -1 && v[2] == 0x10000 && v[3] == -1);
}
END_TEST

START_TEST(encoders_round_trip) {
  const uint32_t cps[] = {0x41, 0xE9, 0x20AC, 0x1F600, 0x10FFFF};
  const eng_uenc encs[] = {ENG_UTF8, ENG_UTF16BE, ENG_UTF16LE, ENG_UTF32BE, ENG_UTF32LE};
  for (size_t e = 0; e < 5; e++)
    for (size_t i = 0; i < 5; i++) {
      char buf[4];
      size_t n = eng_utf_put(encs[e], cps[i], buf), pos = 0;
      ck_assert_int_eq(eng_utf_next(encs[e], (const unsigned char *)buf, n, &pos), cps[i]);
      ck_assert_uint_eq(pos, n);
    }
  eng_uenc enc;
  ck_assert(eng_uenc_parse("utf-16-be", &enc) && enc == ENG_UTF16BE);
  ck_assert(eng_uenc_parse("UTF8", &enc) && enc == ENG_UTF8);
  ck_assert(!eng_uenc_parse("ISO-8859-1", &enc));
}
END_TEST

START_TEST(case_mappings) {
  uint32_t to[3];
  ck_assert(eng_unicase_lower(0xC9, to) == 1 && to[0] == 0xE9);     /* Latin-1 */
  ck_assert(eng_unicase_lower(0x0394, to) == 1 && to[0] == 0x03B4); /* Greek */
  ck_assert(eng_unicase_upper(0x0436, to) == 1 && to[0] == 0x0416); /* Cyrillic */
  ck_assert(eng_unicase_upper(0x0101, to) == 1 && to[0] == 0x0100); /* stride-2 run */
  ck_assert(eng_unicase_lower(0x0101, to) == 1 && to[0] == 0x0101);
  ck_assert(eng_unicase_upper(0xDF, to) == 2 && to[0] == 'S' && to[1] == 'S');
  ck_assert(eng_unicase_lower(0x0130, to) == 2 && to[0] == 'i' && to[1] == 0x0307);
  ck_assert(eng_unicase_upper(0xFB03, to) == 3 && to[2] == 'I');
  ck_assert(eng_unicase_lower(0x01C5, to) == 1 && to[0] == 0x01C6); /* titlecase */
  ck_assert(eng_unicase_upper(0x01C5, to) == 1 && to[0] == 0x01C4);
  ck_assert(eng_unicase_upper(0x4E2D, to) == 1 && to[0] == 0x4E2D);
}
END_TEST

START_TEST(final_sigma) {
  /* "ΟΔΟΣ" ends in a final sigma; a lone "Σ" and "ΣΑ" do not; an
   * apostrophe and a combining accent (case-ignorable) are skipped. */
  const int32_t word[] = {0x039F, 0x0394, 0x039F, 0x03A3};
  ck_assert(eng_unicase_final_sigma(word, 4, 3));
  const int32_t alone[] = {0x03A3};
  ck_assert(!eng_unicase_final_sigma(alone, 1, 0));
  const int32_t first[] = {0x03A3, 0x0391};
  ck_assert(!eng_unicase_final_sigma(first, 2, 0));
  const int32_t skip[] = {'A', 0x0301, 0x03A3, '\'', ' ', 'b'};
  ck_assert(eng_unicase_final_sigma(skip, 6, 2));
  const int32_t inner[] = {'A', 0x03A3, '\'', 'b'};
  ck_assert(!eng_unicase_final_sigma(inner, 4, 1));
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_unicode");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, utf8_errors_are_maximal_subparts);
  tcase_add_test(tc, utf16_and_utf32_errors);
  tcase_add_test(tc, encoders_round_trip);
  tcase_add_test(tc, case_mappings);
  tcase_add_test(tc, final_sigma);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
