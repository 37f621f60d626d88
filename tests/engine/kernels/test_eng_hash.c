/* The hashes behind the hashing ops (eng_hash.c) against TensorFlow's own
 * values (hash_cases.inc, from make_hash_cases.py): every string length
 * through each of Fingerprint64's length classes and block loop, SipHash's
 * tail lengths and keys, and the legacy hash's tail bytes. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#include "eng_hash.h"
#include "hash_cases.inc"

#define N_CASES ((int)(sizeof hash_cases / sizeof hash_cases[0]))

START_TEST(fingerprint64_matches_tensorflow) {
  for (int i = 0; i < N_CASES; i++)
    ck_assert_msg(
        eng_hash_fingerprint64(hash_cases[i].s, hash_cases[i].len) == hash_cases[i].fingerprint,
        "length %zu", hash_cases[i].len);
}
END_TEST

START_TEST(siphash_buckets_match_tensorflow) {
  for (int k = 0; k < 3; k++)
    for (int i = 0; i < N_CASES; i++) {
      uint64_t h =
          eng_hash_siphash24(hash_keys[k][0], hash_keys[k][1], hash_cases[i].s, hash_cases[i].len);
      ck_assert_msg(h % HASH_BUCKETS == hash_cases[i].strong[k], "key %d length %zu", k,
                    hash_cases[i].len);
    }
}
END_TEST

START_TEST(legacy_hash_buckets_match_tensorflow) {
  for (int i = 0; i < N_CASES; i++)
    ck_assert_msg(
        eng_hash_tf64(hash_cases[i].s, hash_cases[i].len) % HASH_BUCKETS == hash_cases[i].legacy,
        "length %zu", hash_cases[i].len);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_hash");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, fingerprint64_matches_tensorflow);
  tcase_add_test(tc, siphash_buckets_match_tensorflow);
  tcase_add_test(tc, legacy_hash_buckets_match_tensorflow);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
