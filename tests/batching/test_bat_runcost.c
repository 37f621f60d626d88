/* bat_runcost: an unmeasured key is never short; short runs make a key
 * short up to the largest input seen within the limit; one sample far above
 * the limit ends that at once; many keys evict the least recently used. */
#include <check.h>

#include "bat_runcost.h"

#define US 1000u

static int keys[1024];

START_TEST(test_unmeasured_is_not_short) {
  bat_runcost *c;
  ck_assert_int_eq(bat_runcost_create(100 * US, &c, NULL), TD_OK);
  ck_assert(!bat_runcost_is_short(c, &keys[0], 0));
  ck_assert(!bat_runcost_is_short(c, NULL, 0));
  bat_runcost_destroy(c);
}
END_TEST

START_TEST(test_short_up_to_the_size_seen) {
  bat_runcost *c;
  ck_assert_int_eq(bat_runcost_create(100 * US, &c, NULL), TD_OK);
  bat_runcost_record(c, &keys[0], 64, 5 * US);
  ck_assert(bat_runcost_is_short(c, &keys[0], 64));
  ck_assert(bat_runcost_is_short(c, &keys[0], 12));
  ck_assert(!bat_runcost_is_short(c, &keys[0], 65)); /* never seen this large */
  ck_assert(!bat_runcost_is_short(c, &keys[1], 1));  /* another key */
  bat_runcost_record(c, &keys[0], 4096, 50 * US);
  ck_assert(bat_runcost_is_short(c, &keys[0], 4096));
  bat_runcost_destroy(c);
}
END_TEST

START_TEST(test_slow_sample_ends_it_at_once) {
  bat_runcost *c;
  ck_assert_int_eq(bat_runcost_create(100 * US, &c, NULL), TD_OK);
  for (int i = 0; i < 20; i++) bat_runcost_record(c, &keys[0], 64, 2 * US);
  ck_assert(bat_runcost_is_short(c, &keys[0], 64));
  bat_runcost_record(c, &keys[0], 64, 5000 * US); /* a stale entry, or a slow plan */
  ck_assert(!bat_runcost_is_short(c, &keys[0], 64));
  ck_assert(!bat_runcost_is_short(c, &keys[0], 32)); /* the trusted size halved too */
  /* Fast runs bring the average back. */
  for (int i = 0; i < 64; i++) bat_runcost_record(c, &keys[0], 64, 2 * US);
  ck_assert(bat_runcost_is_short(c, &keys[0], 64));
  bat_runcost_destroy(c);
}
END_TEST

START_TEST(test_average_above_limit_is_not_short) {
  bat_runcost *c;
  ck_assert_int_eq(bat_runcost_create(100 * US, &c, NULL), TD_OK);
  for (int i = 0; i < 20; i++) bat_runcost_record(c, &keys[0], 64, 150 * US);
  ck_assert(!bat_runcost_is_short(c, &keys[0], 1));
  bat_runcost_destroy(c);
}
END_TEST

START_TEST(test_limit_zero_and_changes) {
  bat_runcost *c;
  ck_assert_int_eq(bat_runcost_create(0, &c, NULL), TD_OK);
  bat_runcost_record(c, &keys[0], 64, 1);
  ck_assert(!bat_runcost_is_short(c, &keys[0], 64));
  bat_runcost_set_limit(c, 100 * US);
  ck_assert_uint_eq(bat_runcost_limit(c), 100 * US);
  bat_runcost_record(c, &keys[0], 64, 1);
  ck_assert(bat_runcost_is_short(c, &keys[0], 64));
  bat_runcost_set_limit(c, 0);
  ck_assert(!bat_runcost_is_short(c, &keys[0], 64));
  bat_runcost_destroy(c);
}
END_TEST

START_TEST(test_many_keys_keep_the_recent_ones) {
  bat_runcost *c;
  ck_assert_int_eq(bat_runcost_create(100 * US, &c, NULL), TD_OK);
  for (int i = 0; i < 1024; i++) bat_runcost_record(c, &keys[i], 8, 1 * US);
  /* The table is smaller than 1024: old keys gave way, the last few stay. */
  int kept = 0;
  for (int i = 0; i < 1024; i++) kept += bat_runcost_is_short(c, &keys[i], 8);
  ck_assert_int_lt(kept, 1024);
  ck_assert_int_gt(kept, 0);
  ck_assert(bat_runcost_is_short(c, &keys[1023], 8));
  bat_runcost_destroy(c);
}
END_TEST

int main(void) {
  Suite *s = suite_create("bat_runcost");
  TCase *tc = tcase_create("runcost");
  tcase_add_test(tc, test_unmeasured_is_not_short);
  tcase_add_test(tc, test_short_up_to_the_size_seen);
  tcase_add_test(tc, test_slow_sample_ends_it_at_once);
  tcase_add_test(tc, test_average_above_limit_is_not_short);
  tcase_add_test(tc, test_limit_zero_and_changes);
  tcase_add_test(tc, test_many_keys_keep_the_recent_ones);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
