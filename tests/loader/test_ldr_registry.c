/* ldr_registry: configuring models, loading the latest version, resolving
 * model specs with TF Serving's messages, the status snapshot (failed loads
 * end in END with their error) and references that outlive the registry. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_model.h"
#include "ldr_registry.h"
#include "td_testfs.h"
#include "td_testcheck.h"

#define FX TD_FIXTURES "/models"

static ldr_registry *registry(void) {
  ldr_registry *r = NULL;
  td_err err;
  td_err_clear(&err);
  ck_ok(ldr_registry_create("serve", &r, &err), err);
  ck_assert_ptr_nonnull(r);
  return r;
}

/* Runs serving_default on [0] and returns y[0] (the model's b). */
static float predict0(ldr_servable *sv) {
  const ldr_signature *sig = ldr_servable_signature(sv, "serving_default");
  ck_assert_ptr_nonnull(sig);
  ck_assert_ptr_nonnull(sig->plan);
  eng_shape s = {.rank = 1, .dim = {1}};
  eng_tensor in, out = {0};
  ck_assert_int_eq(eng_tensor_alloc(&in, ENG_DT_FLOAT, &s, NULL), TD_OK);
  td_err err;
  ck_ok(eng_plan_run(sig->plan, &in, &out, &err), err);
  float y = *(float *)eng_tensor_data(&out);
  eng_tensor_release(&out);
  eng_tensor_release(&in);
  return y;
}

START_TEST(state_names) {
  ck_assert_str_eq(ldr_state_name(LDR_STATE_START), "START");
  ck_assert_str_eq(ldr_state_name(LDR_STATE_LOADING), "LOADING");
  ck_assert_str_eq(ldr_state_name(LDR_STATE_AVAILABLE), "AVAILABLE");
  ck_assert_str_eq(ldr_state_name(LDR_STATE_UNLOADING), "UNLOADING");
  ck_assert_str_eq(ldr_state_name(LDR_STATE_END), "END");
  ck_assert_str_eq(ldr_state_name(LDR_STATE_UNKNOWN), "UNKNOWN");
  ck_assert_str_eq(ldr_state_name((ldr_state)77), "UNKNOWN");
  /* The numbers are TF Serving's ModelVersionStatus.State values. */
  ck_assert_int_eq(LDR_STATE_START, 10);
  ck_assert_int_eq(LDR_STATE_AVAILABLE, 30);
  ck_assert_int_eq(LDR_STATE_END, 50);
}
END_TEST

START_TEST(add_model) {
  ldr_registry *r = registry();
  td_err err;
  ck_ok(ldr_registry_add_model(r, "m", FX "/half_plus_three_tf2", &err), err);
  td_err_clear(&err);
  ck_err(ldr_registry_add_model(r, "m", FX "/half_plus_two_tf1", &err), err, TD_ALREADY_EXISTS,
         "m");
  /* Configured but never loaded: no versions yet. */
  ldr_version_status *st = NULL;
  int n = 0;
  td_err_clear(&err);
  ck_err(ldr_registry_status(r, "m", -1, &st, &n, &err), err, TD_NOT_FOUND,
         "Could not find any versions of model m");
  ldr_servable *sv = NULL;
  td_err_clear(&err);
  ck_err(ldr_registry_acquire(r, "m", -1, &sv, &err), err, TD_UNAVAILABLE,
         "Servable not found for request: Latest(m)");
  ck_assert_str_eq(err.msg, "Servable not found for request: Latest(m)");
  ck_assert_ptr_null(sv);
  /* Unconfigured model. */
  td_err_clear(&err);
  ck_err(ldr_registry_load_latest(r, "other", &err), err, TD_NOT_FOUND, "other");
  ldr_registry_destroy(r);
  ldr_registry_destroy(NULL);
}
END_TEST

START_TEST(load_latest_and_acquire) {
  ldr_registry *r = registry();
  td_err err;
  ck_ok(ldr_registry_add_model(r, "half", FX "/half_plus_three_tf2", &err), err);
  ck_ok(ldr_registry_add_model(r, "tf1", FX "/half_plus_two_tf1", &err), err);
  ck_ok(ldr_registry_load_latest(r, "half", &err), err);
  ck_ok(ldr_registry_load_latest(r, "tf1", &err), err);

  /* Latest is the highest version: 2 (b = 4). */
  ldr_servable *sv = NULL;
  ck_ok(ldr_registry_acquire(r, "half", -1, &sv, &err), err);
  ck_assert_int_eq(ldr_servable_version(sv), 2);
  ck_assert_str_eq(ldr_servable_path(sv), FX "/half_plus_three_tf2/00000002");
  ck_assert_float_eq(predict0(sv), 4.0f);
  ldr_servable_unref(sv);

  sv = NULL;
  ck_ok(ldr_registry_acquire(r, "half", 2, &sv, &err), err);
  ck_assert_int_eq(ldr_servable_version(sv), 2);
  ldr_servable_unref(sv);

  ck_ok(ldr_registry_acquire(r, "tf1", -1, &sv, &err), err);
  ck_assert_int_eq(ldr_servable_version(sv), 123);
  ldr_servable_unref(sv);

  /* Version 1 exists on disk but was not loaded. */
  sv = NULL;
  td_err_clear(&err);
  ck_err(ldr_registry_acquire(r, "half", 1, &sv, &err), err, TD_NOT_FOUND,
         "Servable not found for request: Specific(half, 1)");
  ck_assert_str_eq(err.msg, "Servable not found for request: Specific(half, 1)");
  ck_assert_ptr_null(sv);
  td_err_clear(&err);
  ck_err(ldr_registry_acquire(r, "nope", -1, &sv, &err), err, TD_NOT_FOUND,
         "Servable not found for request: Latest(nope)");
  ck_assert_str_eq(err.msg, "Servable not found for request: Latest(nope)");
  td_err_clear(&err);
  ck_err(ldr_registry_acquire(r, "nope", 99, &sv, &err), err, TD_NOT_FOUND,
         "Servable not found for request: Specific(nope, 99)");

  /* Status: one AVAILABLE version with an OK status. */
  ldr_version_status *st = NULL;
  int n = 0;
  ck_ok(ldr_registry_status(r, "half", -1, &st, &n, &err), err);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(st[0].version, 2);
  ck_assert_int_eq(st[0].state, LDR_STATE_AVAILABLE);
  ck_assert_int_eq(st[0].status.code, TD_OK);
  ck_assert_str_eq(st[0].status.msg, "");
  free(st);
  st = NULL;
  ck_ok(ldr_registry_status(r, "half", 2, &st, &n, &err), err);
  ck_assert_int_eq(n, 1);
  free(st);
  td_err_clear(&err);
  ck_err(ldr_registry_status(r, "half", 1, &st, &n, &err), err, TD_NOT_FOUND,
         "Could not find version 1 of model half");
  ck_assert_str_eq(err.msg, "Could not find version 1 of model half");
  td_err_clear(&err);
  ck_err(ldr_registry_status(r, "ghost", -1, &st, &n, &err), err, TD_NOT_FOUND,
         "Could not find any versions of model ghost");
  ck_assert_str_eq(err.msg, "Could not find any versions of model ghost");
  td_err_clear(&err);
  ck_err(ldr_registry_status(r, "ghost", 3, &st, &n, &err), err, TD_NOT_FOUND,
         "Could not find version 3 of model ghost");

  /* Loading the same latest version again keeps it serving. */
  ck_ok(ldr_registry_load_latest(r, "half", &err), err);
  ck_ok(ldr_registry_acquire(r, "half", -1, &sv, &err), err);
  ck_assert_float_eq(predict0(sv), 4.0f);
  ldr_servable_unref(sv);
  ldr_registry_destroy(r);
}
END_TEST

START_TEST(reference_outlives_registry) {
  ldr_registry *r = registry();
  td_err err;
  ck_ok(ldr_registry_add_model(r, "half", FX "/half_plus_three_tf2", &err), err);
  ck_ok(ldr_registry_load_latest(r, "half", &err), err);
  ldr_servable *sv = NULL;
  ck_ok(ldr_registry_acquire(r, "half", -1, &sv, &err), err);
  ldr_registry_destroy(r);
  /* A request holding the version keeps it alive (ASan checks). */
  ck_assert_float_eq(predict0(sv), 4.0f);
  ldr_servable_unref(sv);
}
END_TEST

START_TEST(failed_load) {
  ldr_registry *r = registry();
  td_err err;
  ck_ok(ldr_registry_add_model(r, "broken", FX "/missing_var", &err), err);
  td_err_clear(&err);
  ck_err(ldr_registry_load_latest(r, "broken", &err), err, TD_NOT_FOUND,
         "Key b not found in checkpoint");

  ldr_version_status *st = NULL;
  int n = 0;
  ck_ok(ldr_registry_status(r, "broken", -1, &st, &n, &err), err);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(st[0].version, 1);
  ck_assert_int_eq(st[0].state, LDR_STATE_END);
  ck_assert_int_eq(st[0].status.code, TD_NOT_FOUND);
  ck_assert_msg(strstr(st[0].status.msg, "Key b not found in checkpoint"), "status: %s",
                st[0].status.msg);
  free(st);
  st = NULL;
  ck_ok(ldr_registry_status(r, "broken", 1, &st, &n, &err), err);
  ck_assert_int_eq(n, 1);
  ck_assert_int_eq(st[0].state, LDR_STATE_END);
  free(st);

  /* Nothing to serve: UNAVAILABLE for latest (retry later), NOT_FOUND for a
   * specific version. */
  ldr_servable *sv = NULL;
  td_err_clear(&err);
  ck_err(ldr_registry_acquire(r, "broken", -1, &sv, &err), err, TD_UNAVAILABLE,
         "Servable not found for request: Latest(broken)");
  ck_assert_str_eq(err.msg, "Servable not found for request: Latest(broken)");
  td_err_clear(&err);
  ck_err(ldr_registry_acquire(r, "broken", 1, &sv, &err), err, TD_NOT_FOUND,
         "Servable not found for request: Specific(broken, 1)");
  ck_assert_ptr_null(sv);
  ldr_registry_destroy(r);
}
END_TEST

/* --- base paths without versions --------------------------------------------- */

static char root[256];

static void setup(void) {
  td_testfs_mkdtemp("td_registry", root, sizeof root);
}

static void teardown(void) { td_testfs_remove_tree(root); }

static void corrupt_pb(const char *version_dir) {
  char pb[600];
  snprintf(pb, sizeof pb, "%s/saved_model.pb", version_dir);
  ck_assert_int_eq(truncate(pb, 100), 0);
}

START_TEST(failed_load_never_disturbs_serving) {
  char v2[512], v3[512];
  snprintf(v2, sizeof v2, "%s/2", root);
  snprintf(v3, sizeof v3, "%s/3", root);
  td_testfs_copy_tree(FX "/half_plus_three_tf2/00000002", v2);
  ldr_registry *r = registry();
  td_err err;
  ck_ok(ldr_registry_add_model(r, "m", root, &err), err);
  ck_ok(ldr_registry_load_latest(r, "m", &err), err);

  /* Loading the version that already serves again, now that its files
   * are damaged, must leave the loaded copy serving. */
  corrupt_pb(v2);
  td_err_clear(&err);
  ldr_registry_load_latest(r, "m", &err);
  ldr_servable *sv = NULL;
  ck_ok(ldr_registry_acquire(r, "m", -1, &sv, &err), err);
  ck_assert_int_eq(ldr_servable_version(sv), 2);
  ck_assert_float_eq(predict0(sv), 4.0f);
  ldr_servable_unref(sv);

  /* A newer version that fails to load ends in END; version 2 serves on. */
  td_testfs_copy_tree(FX "/half_plus_three_tf2/00000001", v3);
  corrupt_pb(v3);
  td_err_clear(&err);
  ck_err(ldr_registry_load_latest(r, "m", &err), err, TD_DATA_LOSS, "saved_model.pb");
  ldr_version_status *st = NULL;
  int n = 0;
  ck_ok(ldr_registry_status(r, "m", -1, &st, &n, &err), err);
  ck_assert_int_eq(n, 2);
  ck_assert_int_eq(st[0].version, 2);
  ck_assert_int_eq(st[0].state, LDR_STATE_AVAILABLE);
  ck_assert_int_eq(st[0].status.code, TD_OK);
  ck_assert_int_eq(st[1].version, 3);
  ck_assert_int_eq(st[1].state, LDR_STATE_END);
  ck_assert_int_eq(st[1].status.code, TD_DATA_LOSS);
  free(st);
  ck_ok(ldr_registry_acquire(r, "m", -1, &sv, &err), err);
  ck_assert_int_eq(ldr_servable_version(sv), 2);
  ck_assert_float_eq(predict0(sv), 4.0f);
  ldr_servable_unref(sv);
  td_err_clear(&err);
  ck_err(ldr_registry_acquire(r, "m", 3, &sv, &err), err, TD_NOT_FOUND,
         "Servable not found for request: Specific(m, 3)");
  ldr_registry_destroy(r);
}
END_TEST

START_TEST(empty_base_path) {
  char p[512];
  snprintf(p, sizeof p, "%s/not_a_version", root);
  ck_assert_int_eq(mkdir(p, 0755), 0);
  ldr_registry *r = registry();
  td_err err;
  ck_ok(ldr_registry_add_model(r, "default", root, &err), err);
  td_err_clear(&err);
  ck_err(ldr_registry_load_latest(r, "default", &err), err, TD_NOT_FOUND,
         "No versions of servable default found under base path ");
  char want[1024];
  snprintf(want, sizeof want,
           "No versions of servable default found under base path %s. Did you forget to name "
           "your leaf directory as a number (eg. '/1/')?",
           root);
  ck_assert_str_eq(err.msg, want);
  /* Nothing was recorded for the status API. */
  ldr_version_status *st = NULL;
  int n = 0;
  td_err_clear(&err);
  ck_err(ldr_registry_status(r, "default", -1, &st, &n, &err), err, TD_NOT_FOUND,
         "Could not find any versions of model default");
  ldr_registry_destroy(r);
}
END_TEST

START_TEST(missing_base_path) {
  char p[512];
  snprintf(p, sizeof p, "%s/gone", root);
  ldr_registry *r = registry();
  td_err err;
  ck_ok(ldr_registry_add_model(r, "default", p, &err), err);
  td_err_clear(&err);
  ck_err(ldr_registry_load_latest(r, "default", &err), err, TD_NOT_FOUND, p);
  ldr_registry_destroy(r);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ldr_registry");
  TCase *tc = tcase_create("registry");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, state_names);
  tcase_add_test(tc, add_model);
  tcase_add_test(tc, load_latest_and_acquire);
  tcase_add_test(tc, reference_outlives_registry);
  tcase_add_test(tc, failed_load);
  suite_add_tcase(s, tc);
  tc = tcase_create("base_paths");
  tcase_set_timeout(tc, 30);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, empty_base_path);
  tcase_add_test(tc, missing_base_path);
  tcase_add_test(tc, failed_load_never_disturbs_serving);
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
