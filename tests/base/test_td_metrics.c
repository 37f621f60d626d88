/* td_metrics: series lookup, updates from several threads, and the text
 * exposition (names, labels, escaping, cumulative buckets). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "td_metrics.h"

static char *render(void) {
  td_buf b;
  td_buf_init(&b);
  td_metrics_render(&b);
  size_t n;
  char *s = td_buf_take(&b, &n);
  return s ? s : strdup("");
}

START_TEST(counter_series_and_text) {
  const char *const l[] = {"model_name", "status"};
  td_metric *m = td_metric_counter(":tensorflow:serving:request_count", "The total.", 2, l);
  ck_assert_ptr_nonnull(m);
  ck_assert_ptr_eq(td_metric_counter(":tensorflow:serving:request_count", "x", 2, l), m);
  td_series *a = td_metric_series2(m, "half", "OK");
  ck_assert_ptr_eq(td_metric_series2(m, "half", "OK"), a);
  td_series *b = td_metric_series2(m, "half", "NOT_FOUND");
  ck_assert_ptr_ne(a, b);
  td_series_add(a, 2);
  td_series_add(a, 1);
  td_series_add(b, 1);
  td_series_add(NULL, 1); /* dropped, no crash */
  ck_assert_int_eq(td_series_value(a), 3);
  td_series *q = td_metric_series2(m, "we\"ird\\\n", "OK");
  td_series_add(q, 1);
  char *t = render();
  ck_assert_ptr_nonnull(strstr(t, "# HELP :tensorflow:serving:request_count The total.\n"));
  ck_assert_ptr_nonnull(strstr(t, "# TYPE :tensorflow:serving:request_count counter\n"));
  ck_assert_ptr_nonnull(
      strstr(t, ":tensorflow:serving:request_count{model_name=\"half\",status=\"OK\"} 3\n"));
  ck_assert_ptr_nonnull(
      strstr(t, ":tensorflow:serving:request_count{model_name=\"half\",status=\"NOT_FOUND\"} 1\n"));
  ck_assert_ptr_nonnull(strstr(t, "{model_name=\"we\\\"ird\\\\\\n\",status=\"OK\"} 1\n"));
  free(t);
}
END_TEST

START_TEST(histogram_buckets) {
  double bounds[3];
  td_metric_exponential_bounds(10, 2, 3, bounds); /* 10 20 40 */
  ck_assert(bounds[2] == 40);
  const char *const l[] = {"model_name"};
  td_metric *h = td_metric_histogram("t_latency", "", 1, l, bounds, 3);
  td_series *s = td_metric_series1(h, "m");
  td_series_observe(s, 5);
  td_series_observe(s, 10); /* le is inclusive */
  td_series_observe(s, 30);
  td_series_observe(s, 1000);
  ck_assert_int_eq(td_series_value(s), 4);
  ck_assert(td_series_sum(s) == 1045);
  char *t = render();
  ck_assert_ptr_nonnull(strstr(t,
                               "# TYPE t_latency histogram\n"
                               "t_latency_bucket{model_name=\"m\",le=\"10\"} 2\n"
                               "t_latency_bucket{model_name=\"m\",le=\"20\"} 2\n"
                               "t_latency_bucket{model_name=\"m\",le=\"40\"} 3\n"
                               "t_latency_bucket{model_name=\"m\",le=\"+Inf\"} 4\n"
                               "t_latency_sum{model_name=\"m\"} 1045\n"
                               "t_latency_count{model_name=\"m\"} 4\n"));
  ck_assert_ptr_null(strstr(t, "# HELP t_latency")); /* no help, no line */
  free(t);
  /* Bounds must increase. */
  double bad[2] = {2, 1};
  ck_assert_ptr_null(td_metric_histogram("t_bad", "", 0, NULL, bad, 2));
}
END_TEST

START_TEST(gauges_zero_and_unlabelled) {
  td_metric *g = td_metric_gauge("t_rss_bytes", "RSS.", 0, NULL);
  td_series *s = td_metric_series(g, NULL);
  td_series_set(s, 42);
  td_series_add(s, -2);
  ck_assert_int_eq(td_series_value(s), 40);
  char *t = render();
  ck_assert_ptr_nonnull(strstr(t, "\nt_rss_bytes 40\n"));
  free(t);
  td_metric_zero(g);
  ck_assert_int_eq(td_series_value(s), 0);
  /* A family with no series is not rendered. */
  td_metric_gauge("t_unused", "", 0, NULL);
  t = render();
  ck_assert_ptr_null(strstr(t, "t_unused"));
  free(t);
}
END_TEST

static td_metric *shared;

static void *hammer(void *arg) {
  char name[8];
  for (int i = 0; i < 20000; i++) {
    snprintf(name, sizeof name, "m%d", i % 7);
    td_series_add(td_metric_series1(shared, name), 1);
  }
  return arg;
}

START_TEST(threads_agree) {
  const char *const l[] = {"model_name"};
  shared = td_metric_counter("t_threads_total", "", 1, l);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, hammer, NULL);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  int64_t total = 0;
  char name[8];
  for (int i = 0; i < 7; i++) {
    snprintf(name, sizeof name, "m%d", i);
    total += td_series_value(td_metric_series1(shared, name));
  }
  ck_assert_int_eq(total, 4 * 20000);
}
END_TEST

START_TEST(series_limit) {
  const char *const l[] = {"k"};
  td_metric *m = td_metric_counter("t_many_total", "", 1, l);
  char v[16];
  int made = 0;
  for (int i = 0; i < TD_METRIC_MAX_SERIES + 10; i++) {
    snprintf(v, sizeof v, "%d", i);
    made += td_metric_series1(m, v) != NULL;
  }
  ck_assert_int_eq(made, TD_METRIC_MAX_SERIES);
  /* Existing series are still found past the limit. */
  ck_assert_ptr_nonnull(td_metric_series1(m, "3"));
}
END_TEST

int main(void) {
  Suite *s = suite_create("td_metrics");
  TCase *tc = tcase_create("metrics");
  tcase_add_test(tc, counter_series_and_text);
  tcase_add_test(tc, histogram_buckets);
  tcase_add_test(tc, gauges_zero_and_unlabelled);
  tcase_add_test(tc, threads_agree);
  tcase_add_test(tc, series_limit);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
