/* srv_stats: per model version counters and their snapshots. */
#include <check.h>
#include <stdlib.h>

#include "srv_stats.h"

START_TEST(counts_and_filters) {
  srv_stats *s = srv_stats_create();
  ck_assert_ptr_nonnull(s);
  srv_stats_record(s, "b", 2, true, 8, 100);
  srv_stats_record(s, "a", 1, true, 1, 10);
  srv_stats_record(s, "a", 1, false, 4, 7);
  srv_stats_record(s, "a", 3, true, 2, 5);
  srv_stats_record(s, "a", 1, true, 3, 20);
  srv_stats_entry *e = NULL;
  int n = srv_stats_snapshot(s, NULL, -1, &e);
  ck_assert_int_eq(n, 3);
  ck_assert_str_eq(e[0].model, "a");
  ck_assert_int_eq(e[0].version, 1);
  ck_assert_int_eq(e[0].success_count, 2);
  ck_assert_int_eq(e[0].success_ns, 30);
  ck_assert_int_eq(e[0].fail_count, 1);
  ck_assert_int_eq(e[0].fail_ns, 7);
  ck_assert_int_eq(e[0].inference_count, 4); /* failed rows do not count */
  ck_assert_int_eq(e[0].execution_count, 2);
  ck_assert(e[0].last_ms > 0);
  ck_assert_int_eq(e[1].version, 3);
  ck_assert_str_eq(e[2].model, "b");
  srv_stats_snapshot_free(e, n);
  n = srv_stats_snapshot(s, "a", 3, &e);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(e[0].inference_count, 2);
  srv_stats_snapshot_free(e, n);
  n = srv_stats_snapshot(s, "c", -1, &e);
  ck_assert_int_eq(n, 0);
  srv_stats_snapshot_free(e, n);
  srv_stats_destroy(s);
}
END_TEST

START_TEST(null_is_a_no_op) {
  srv_stats_record(NULL, "a", 1, true, 1, 1);
  srv_stats_entry *e = (srv_stats_entry *)1;
  ck_assert_int_eq(srv_stats_snapshot(NULL, NULL, -1, &e), 0);
  ck_assert_ptr_null(e);
  srv_stats_destroy(NULL);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("srv_stats");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, counts_and_filters);
  tcase_add_test(tc, null_is_a_no_op);
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
