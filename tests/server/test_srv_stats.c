/* srv_stats: per model version counters and their snapshots. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "srv_stats.h"
#include "td_buf.h"
#include "td_metrics.h"

static void rec(srv_stats *s, const char *m, int64_t v, bool ok, uint64_t rows, uint64_t ns) {
  srv_stats_sample x = {.ok = ok,
                        .rows = rows,
                        .total_ns = ns,
                        .queue_ns = ns / 2,
                        .input_ns = ns / 4,
                        .infer_ns = ns - ns / 2 - ns / 4};
  srv_stats_record(s, m, v, &x);
}

START_TEST(counts_and_filters) {
  srv_stats *s = srv_stats_create();
  ck_assert_ptr_nonnull(s);
  rec(s, "b", 2, true, 8, 100);
  rec(s, "a", 1, true, 1, 10);
  rec(s, "a", 1, false, 4, 7);
  rec(s, "a", 3, true, 2, 5);
  rec(s, "a", 1, true, 3, 20);
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
  ck_assert_int_eq(e[0].queue_ns, 5 + 10); /* successes only */
  ck_assert_int_eq(e[0].compute_input_ns, 2 + 5);
  ck_assert_int_eq(e[0].compute_infer_ns, 3 + 5);
  ck_assert_int_eq(e[0].compute_output_ns, 0);
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
  rec(NULL, "a", 1, true, 1, 1);
  srv_stats_entry *e = (srv_stats_entry *)1;
  ck_assert_int_eq(srv_stats_snapshot(NULL, NULL, -1, &e), 0);
  ck_assert_ptr_null(e);
  srv_stats_destroy(NULL);
}
END_TEST

/* The metrics page shows the same counters the snapshot reads. */
START_TEST(the_metrics_are_the_counters) {
  srv_stats *s = srv_stats_create();
  rec(s, "m", 7, true, 3, 40);
  rec(s, "m", 7, false, 1, 9);
  td_metrics_set_enabled(true);
  td_buf b;
  td_buf_init(&b);
  td_metrics_render(&b);
  const char *page = b.data;
  ck_assert_ptr_nonnull(
      strstr(page, "tensord_inference_request_success_total{model_name=\"m\",version=\"7\"} 1\n"));
  ck_assert_ptr_nonnull(
      strstr(page, "tensord_inference_request_failure_total{model_name=\"m\",version=\"7\"} 1\n"));
  ck_assert_ptr_nonnull(
      strstr(page, "tensord_inference_count_total{model_name=\"m\",version=\"7\"} 3\n"));
  ck_assert_ptr_nonnull(strstr(
      page, "tensord_inference_queue_duration_total{model_name=\"m\",version=\"7\"} 20\n"));
  td_buf_free(&b);
  srv_stats_destroy(s);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("srv_stats");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, counts_and_filters);
  tcase_add_test(tc, null_is_a_no_op);
  tcase_add_test(tc, the_metrics_are_the_counters);
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
