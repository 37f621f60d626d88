/* ldr_scan: version directory names, sorting, duplicates, non-directories
 * and unreadable base paths, over directories built in a mkdtemp root. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ldr_scan.h"
#include "td_testfs.h"

static char root[256];

static void make_dir(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, name);
  ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s", p);
}

static void make_file(const char *name) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, name);
  FILE *f = fopen(p, "w");
  ck_assert_ptr_nonnull(f);
  fputs("x", f);
  fclose(f);
}

static void setup(void) {
  td_testfs_mkdtemp("td_scan", root, sizeof root);
}

static void teardown(void) { td_testfs_remove_tree(root); }

START_TEST(parse_version) {
  int64_t v = -5;
  ck_assert(ldr_scan_parse_version("00000123", &v));
  ck_assert_int_eq(v, 123);
  ck_assert(ldr_scan_parse_version("0", &v));
  ck_assert_int_eq(v, 0);
  ck_assert(ldr_scan_parse_version("1", &v));
  ck_assert_int_eq(v, 1);
  ck_assert(ldr_scan_parse_version("9223372036854775807", &v));
  ck_assert_int_eq(v, INT64_MAX);
  ck_assert(ldr_scan_parse_version("0009223372036854775807", &v));
  ck_assert_int_eq(v, INT64_MAX);

  /* (Signs and surrounding blanks are left unspecified: TF Serving's
   * safe_strto64 would take "+1" and " 1".) */
  const char *bad[] = {"",
                       "v1",
                       "1.0",
                       "1a",
                       "a1",
                       "-1",
                       ".",
                       "..",
                       "0x10",
                       "1e3",
                       "9223372036854775808",
                       "18446744073709551615",
                       "99999999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = -5;
    ck_assert_msg(!ldr_scan_parse_version(bad[i], &v), "'%s' parsed", bad[i]);
    ck_assert_int_eq(v, -5); /* untouched */
  }
}
END_TEST

START_TEST(scan_mixed) {
  make_dir("00000123");
  make_dir("7");
  make_dir("v1");
  make_dir("1.0");
  make_dir("assets");
  make_dir("18446744073709551616"); /* overflows: ignored */
  make_dir("42");
  make_file("99"); /* a file, not a directory */
  make_file("README");
  make_dir("0");
  ldr_version_dir *v = NULL;
  int n = -1;
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(ldr_scan_versions(root, &v, &n, &err), TD_OK);
  ck_assert_int_eq(n, 4);
  const int64_t want[] = {0, 7, 42, 123};
  const char *names[] = {"0", "7", "42", "00000123"};
  for (int i = 0; i < 4; i++) {
    ck_assert_int_eq(v[i].version, want[i]);
    char p[512];
    snprintf(p, sizeof p, "%s/%s", root, names[i]);
    ck_assert_str_eq(v[i].path, p);
  }
  ldr_scan_free(v, n);
}
END_TEST

START_TEST(scan_sorted_many) {
  /* Enough entries to force growth, created out of order. */
  for (int i = 0; i < 100; i++) {
    char name[32];
    snprintf(name, sizeof name, "%d", (i * 37) % 100 + 1000);
    make_dir(name);
  }
  ldr_version_dir *v = NULL;
  int n = 0;
  ck_assert_int_eq(ldr_scan_versions(root, &v, &n, NULL), TD_OK);
  ck_assert_int_eq(n, 100);
  for (int i = 0; i < n; i++) ck_assert_int_eq(v[i].version, 1000 + i);
  ldr_scan_free(v, n);
}
END_TEST

START_TEST(scan_duplicates) {
  make_dir("1");
  make_dir("001");
  make_dir("2");
  ldr_version_dir *v = NULL;
  int n = 0;
  ck_assert_int_eq(ldr_scan_versions(root, &v, &n, NULL), TD_OK);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(v[0].version, 1);
  ck_assert_int_eq(v[1].version, 2);
  char a[512], b[512];
  snprintf(a, sizeof a, "%s/1", root);
  snprintf(b, sizeof b, "%s/001", root);
  /* Which one wins depends on the listing order; it must be one of them. */
  ck_assert_msg(!strcmp(v[0].path, a) || !strcmp(v[0].path, b), "path %s", v[0].path);
  ldr_scan_free(v, n);
}
END_TEST

START_TEST(scan_empty) {
  make_dir("not_a_version");
  ldr_version_dir *v = (ldr_version_dir *)0x1;
  int n = -1;
  ck_assert_int_eq(ldr_scan_versions(root, &v, &n, NULL), TD_OK);
  ck_assert_int_eq(n, 0);
  ldr_scan_free(v, n);
}
END_TEST

START_TEST(scan_missing_base) {
  char p[512];
  snprintf(p, sizeof p, "%s/does_not_exist", root);
  ldr_version_dir *v = NULL;
  int n = 0;
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(ldr_scan_versions(p, &v, &n, &err), TD_NOT_FOUND);
  ck_assert_int_eq(err.code, TD_NOT_FOUND);
  ck_assert_msg(strstr(err.msg, p), "message: %s", err.msg);
  /* A file is not a base path either. */
  make_file("plain");
  snprintf(p, sizeof p, "%s/plain", root);
  td_err_clear(&err);
  ck_assert_int_eq(ldr_scan_versions(p, &v, &n, &err), TD_NOT_FOUND);
}
END_TEST

START_TEST(scan_fixture) {
  ldr_version_dir *v = NULL;
  int n = 0;
  ck_assert_int_eq(ldr_scan_versions(TD_FIXTURES "/models/half_plus_three_tf2", &v, &n, NULL),
                   TD_OK);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(v[0].version, 1);
  ck_assert_int_eq(v[1].version, 2);
  ck_assert_str_eq(v[1].path, TD_FIXTURES "/models/half_plus_three_tf2/00000002");
  ldr_scan_free(v, n);
}
END_TEST

#define ck_incomplete(dir, want, substr)                                                   \
  do {                                                                                     \
    td_err e_;                                                                             \
    td_err_clear(&e_);                                                                     \
    td_code rc_ = ldr_scan_check_complete(dir, &e_);                                       \
    ck_assert_msg(rc_ == (want), "got %s (%s)", td_code_name(rc_), e_.msg);                \
    ck_assert_msg(strstr(e_.msg, substr), "message '%s' lacks '%s'", e_.msg, substr);     \
  } while (0)

START_TEST(check_complete) {
  td_err err;
  ck_assert_int_eq(ldr_scan_check_complete(TD_FIXTURES "/models/half_plus_three_tf2/00000002", &err),
                   TD_OK);
  ck_assert_int_eq(ldr_scan_check_complete(TD_FIXTURES "/models/half_plus_two_tf1/00000123", &err),
                   TD_OK);
  char v[512], p[600];
  snprintf(v, sizeof v, "%s/7", root);
  td_testfs_copy_tree(TD_FIXTURES "/models/half_plus_three_tf2/00000002", v);
  /* A copy in progress, file by file backwards: each state is refused. */
  snprintf(p, sizeof p, "%s/variables/variables.data-00000-of-00001", v);
  ck_assert_int_eq(unlink(p), 0);
  ck_incomplete(v, TD_NOT_FOUND, "variables.data-00000-of-00001");
  snprintf(p, sizeof p, "%s/variables/variables.index", v);
  ck_assert_int_eq(truncate(p, 10), 0);
  ck_incomplete(v, TD_DATA_LOSS, "variables.index");
  ck_assert_int_eq(unlink(p), 0);
  ck_incomplete(v, TD_NOT_FOUND, "variables.index");
  snprintf(p, sizeof p, "%s/saved_model.pb", v);
  ck_assert_int_eq(truncate(p, 64), 0);
  ck_incomplete(v, TD_DATA_LOSS, "saved_model.pb");
  ck_assert_int_eq(unlink(p), 0);
  ck_incomplete(v, TD_NOT_FOUND, "saved_model.pb");
  snprintf(p, sizeof p, "%s/saved_model.pbtxt", v);
  FILE *f = fopen(p, "w");
  fclose(f);
  ck_incomplete(v, TD_INVALID_ARGUMENT, "no MetaGraph"); /* an empty text SavedModel */
  /* saved_model.pb that is a directory cannot be read. */
  snprintf(p, sizeof p, "%s/saved_model.pb", v);
  ck_assert_int_eq(mkdir(p, 0755), 0);
  ck_incomplete(v, TD_INVALID_ARGUMENT, "not a regular file");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ldr_scan");
  TCase *tc = tcase_create("names");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, parse_version);
  tcase_add_test(tc, scan_fixture);
  suite_add_tcase(s, tc);
  tc = tcase_create("dirs");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, scan_mixed);
  tcase_add_test(tc, scan_sorted_many);
  tcase_add_test(tc, scan_duplicates);
  tcase_add_test(tc, scan_empty);
  tcase_add_test(tc, scan_missing_base);
  tcase_add_test(tc, check_complete);
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
