/* ldr_manager: version policies, swaps that keep serving, incomplete
 * directories, retries, labels, config changes and shutdown, against real
 * fixture models copied into a temporary base path. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cfg_model_config.h"
#include "eng_model.h"
#include "ldr_manager.h"
#include "td_testfs.h"

#define FX TD_FIXTURES "/models"
#define V1 FX "/half_plus_three_tf2/00000001" /* b = 3 */
#define V2 FX "/half_plus_three_tf2/00000002" /* b = 4 */
#define BROKEN FX "/missing_var/00000001"

static char root[256], base[300];

static void setup(void) {
  td_testfs_mkdtemp("td_manager", root, sizeof root);
  snprintf(base, sizeof base, "%s/m", root);
  ck_assert_int_eq(mkdir(base, 0755), 0);
}

static void teardown(void) { td_testfs_remove_tree(root); }

static void put_version(const char *src, int v) {
  char p[400];
  snprintf(p, sizeof p, "%s/%d", base, v);
  td_testfs_copy_tree(src, p);
}

static void drop_version(int v) {
  char p[400];
  snprintf(p, sizeof p, "%s/%d", base, v);
  td_testfs_remove_tree(p);
}

typedef struct env {
  ldr_registry *r;
  ldr_manager *m;
} env;

static env start(ldr_manager_options o) {
  env e;
  td_err err;
  td_err_clear(&err);
  if (!o.tags) o.tags = "serve";
  ck_assert_int_eq(ldr_registry_create("serve", &e.r, &err), TD_OK);
  ck_assert_msg(ldr_manager_create(e.r, &o, &e.m, &err) == TD_OK, "%s", err.msg);
  return e;
}

static void stop(env *e) {
  ldr_manager_destroy(e->m);
  ldr_registry_destroy(e->r);
}

static cfg_model_config config(const char *text) {
  char buf[4096];
  snprintf(buf, sizeof buf, text, base, base);
  cfg_model_config c;
  td_err err;
  ck_assert_msg(cfg_model_config_parse(buf, strlen(buf), &c, &err) == TD_OK, "%s", err.msg);
  return c;
}

static td_code apply(env *e, const char *text, td_err *err) {
  cfg_model_config c = config(text);
  uint64_t t = 0;
  td_err_clear(err);
  ck_assert_int_eq(ldr_manager_set_config(e->m, &c, &t, err), TD_OK);
  cfg_model_config_free(&c);
  return ldr_manager_wait(e->m, t, 20000, err);
}

static void rescan(env *e) {
  td_err err;
  uint64_t t = ldr_manager_request_scan(e->m);
  td_code rc = ldr_manager_wait(e->m, t, 20000, &err);
  ck_assert_msg(rc == TD_OK || rc == TD_UNKNOWN, "%s", err.msg);
}

#define LATEST1 \
  "model_config_list { config { name: 'm' base_path: '%s' model_platform: 'tensorflow' } }"

/* y(0) of the version a request would get: its b. -1 when none. */
static float answer(env *e, int64_t version, int64_t *served) {
  ldr_servable *sv = NULL;
  td_err err;
  if (ldr_registry_acquire(e->r, "m", version, &sv, &err)) return -1;
  const ldr_signature *sig = ldr_servable_signature(sv, "serving_default");
  eng_shape s = {.rank = 1, .dim = {1}};
  eng_tensor in, out = {0};
  ck_assert_int_eq(eng_tensor_alloc(&in, ENG_DT_FLOAT, &s, NULL), TD_OK);
  ck_assert_int_eq(eng_plan_run(sig->plan, &in, &out, &err), TD_OK);
  float y = *(float *)eng_tensor_data(&out);
  eng_tensor_release(&out);
  eng_tensor_release(&in);
  if (served) *served = ldr_servable_version(sv);
  ldr_servable_unref(sv);
  return y;
}

/* State of a version in the status API; LDR_STATE_UNKNOWN when absent. */
static ldr_state state_of(env *e, int64_t v, td_err *status) {
  ldr_version_status *st = NULL;
  int n = 0;
  td_err err;
  if (ldr_registry_status(e->r, "m", v, &st, &n, &err)) return LDR_STATE_UNKNOWN;
  ldr_state s = st[0].state;
  if (status) *status = st[0].status;
  free(st);
  return s;
}

static bool wait_state(env *e, int64_t v, ldr_state want) {
  for (int i = 0; i < 30000; i++) { /* a minute at least: loads are slow on a loaded box */
    if (state_of(e, v, NULL) == want) return true;
    usleep(2000);
  }
  return false;
}

START_TEST(latest_swaps_and_rolls_back) {
  put_version(V1, 1);
  env e = start((ldr_manager_options){0});
  td_err err;
  ck_assert_int_eq(apply(&e, LATEST1, &err), TD_OK);
  int64_t served = 0;
  ck_assert_float_eq(answer(&e, -1, &served), 3.0f);
  ck_assert_int_eq(served, 1);

  put_version(V2, 2);
  rescan(&e);
  ck_assert_float_eq(answer(&e, -1, &served), 4.0f);
  ck_assert_int_eq(served, 2);
  ck_assert(wait_state(&e, 1, LDR_STATE_END)); /* unloaded once 2 served */
  ck_assert_float_eq(answer(&e, 1, NULL), -1);

  /* Removing 2 brings 1 back before 2 goes. */
  drop_version(2);
  rescan(&e);
  ck_assert_float_eq(answer(&e, -1, &served), 3.0f);
  ck_assert_int_eq(served, 1);
  ck_assert(wait_state(&e, 2, LDR_STATE_END));
  stop(&e);
}
END_TEST

START_TEST(in_flight_request_keeps_its_version) {
  put_version(V1, 1);
  env e = start((ldr_manager_options){0});
  td_err err;
  ck_assert_int_eq(apply(&e, LATEST1, &err), TD_OK);
  ldr_servable *held = NULL;
  ck_assert_int_eq(ldr_registry_acquire(e.r, "m", -1, &held, &err), TD_OK);

  put_version(V2, 2);
  rescan(&e);
  ck_assert(wait_state(&e, 1, LDR_STATE_UNLOADING));
  /* New requests go to 2; the held one still runs on 1. */
  ck_assert_float_eq(answer(&e, -1, NULL), 4.0f);
  ck_assert_int_eq(ldr_servable_version(held), 1);
  usleep(20000);
  ck_assert_int_eq(state_of(&e, 1, NULL), LDR_STATE_UNLOADING);
  ldr_servable_unref(held);
  ck_assert(wait_state(&e, 1, LDR_STATE_END));
  stop(&e);
}
END_TEST

START_TEST(policies) {
  put_version(V1, 1);
  put_version(V2, 2);
  env e = start((ldr_manager_options){0});
  td_err err;
  ck_assert_int_eq(apply(&e, "model_config_list { config { name: 'm' base_path: '%s' "
                             "model_platform: 'tensorflow' model_version_policy { all {} } } }",
                         &err),
                   TD_OK);
  ck_assert_float_eq(answer(&e, 1, NULL), 3.0f);
  ck_assert_float_eq(answer(&e, 2, NULL), 4.0f);
  ck_assert_float_eq(answer(&e, -1, NULL), 4.0f);

  ck_assert_int_eq(apply(&e, "model_config_list { config { name: 'm' base_path: '%s' "
                             "model_platform: 'tensorflow' model_version_policy { specific { "
                             "versions: 1 versions: 7 } } } }",
                         &err),
                   TD_OK);
  ck_assert(wait_state(&e, 2, LDR_STATE_END));
  ck_assert_float_eq(answer(&e, -1, NULL), 3.0f);
  ck_assert_int_eq(state_of(&e, 7, NULL), LDR_STATE_UNKNOWN);

  ck_assert_int_eq(apply(&e, "model_config_list { config { name: 'm' base_path: '%s' "
                             "model_platform: 'tensorflow' model_version_policy { latest { "
                             "num_versions: 2 } } } }",
                         &err),
                   TD_OK);
  ck_assert_float_eq(answer(&e, 1, NULL), 3.0f);
  ck_assert_float_eq(answer(&e, 2, NULL), 4.0f);
  put_version(V1, 3);
  rescan(&e);
  ck_assert(wait_state(&e, 1, LDR_STATE_END)); /* latest 2 = {2, 3} */
  ck_assert_float_eq(answer(&e, 2, NULL), 4.0f);
  ck_assert_float_eq(answer(&e, 3, NULL), 3.0f);
  stop(&e);
}
END_TEST

START_TEST(incomplete_versions_wait) {
  put_version(V1, 1);
  env e = start((ldr_manager_options){0});
  td_err err;
  ck_assert_int_eq(apply(&e, LATEST1, &err), TD_OK);
  /* Version 2 being copied: saved_model.pb is there, variables not yet. */
  char p[400], q[500];
  snprintf(p, sizeof p, "%s/2", base);
  ck_assert_int_eq(mkdir(p, 0755), 0);
  snprintf(q, sizeof q, "%s/saved_model.pb", p);
  td_testfs_copy_file(V2 "/saved_model.pb", q);
  rescan(&e);
  td_err status;
  ck_assert_int_eq(state_of(&e, 2, &status), LDR_STATE_START);
  ck_assert_msg(strstr(status.msg, "variables.index"), "%s", status.msg);
  ck_assert_float_eq(answer(&e, -1, NULL), 3.0f);
  /* A truncated saved_model.pb does not parse: still waiting. */
  ck_assert_int_eq(truncate(q, 50), 0);
  rescan(&e);
  ck_assert_int_eq(state_of(&e, 2, &status), LDR_STATE_START);
  ck_assert_msg(strstr(status.msg, "saved_model.pb"), "%s", status.msg);
  ck_assert_float_eq(answer(&e, -1, NULL), 3.0f);
  /* The copy completes: 2 loads. */
  td_testfs_remove_tree(p);
  put_version(V2, 2);
  rescan(&e);
  ck_assert_float_eq(answer(&e, -1, NULL), 4.0f);
  /* A waiting directory that disappears is forgotten. */
  snprintf(p, sizeof p, "%s/5", base);
  ck_assert_int_eq(mkdir(p, 0755), 0);
  rescan(&e);
  ck_assert_int_eq(state_of(&e, 5, NULL), LDR_STATE_START);
  td_testfs_remove_tree(p);
  rescan(&e);
  ck_assert_int_eq(state_of(&e, 5, NULL), LDR_STATE_UNKNOWN);
  stop(&e);
}
END_TEST

START_TEST(failed_loads_retry_then_end) {
  put_version(V1, 1);
  env e = start((ldr_manager_options){.max_num_load_retries = 2,
                                      .load_retry_interval_micros = 20000});
  td_err err;
  ck_assert_int_eq(apply(&e, LATEST1, &err), TD_OK);
  put_version(BROKEN, 2);
  rescan(&e);
  /* First attempt done: retrying, the error visible, 1 still serving. */
  td_err status;
  ldr_state s = state_of(&e, 2, &status);
  ck_assert_msg(s == LDR_STATE_LOADING || s == LDR_STATE_END, "state %s", ldr_state_name(s));
  ck_assert_msg(strstr(status.msg, "Key b not found in checkpoint"), "%s", status.msg);
  ck_assert_float_eq(answer(&e, -1, NULL), 3.0f);
  ck_assert(wait_state(&e, 2, LDR_STATE_END));
  ck_assert_int_eq(state_of(&e, 2, &status), LDR_STATE_END);
  ck_assert_int_eq(status.code, TD_NOT_FOUND);
  ck_assert_float_eq(answer(&e, -1, NULL), 3.0f);
  ck_assert_int_eq(state_of(&e, 1, NULL), LDR_STATE_AVAILABLE);
  stop(&e);
}
END_TEST

START_TEST(new_model_that_fails_is_reported) {
  put_version(BROKEN, 1);
  env e = start((ldr_manager_options){.max_num_load_retries = 5,
                                      .load_retry_interval_micros = 60000000});
  td_err err;
  ck_assert_int_eq(apply(&e, LATEST1, &err), TD_UNKNOWN);
  ck_assert_msg(strstr(err.msg, "1 model(s) did not become available: {{name: m due to error: ") &&
                    strstr(err.msg, "Key b not found"),
                "%s", err.msg);
  /* Retries go on in the background (default 5, a minute apart). */
  ck_assert_int_eq(state_of(&e, 1, NULL), LDR_STATE_LOADING);
  stop(&e);
}
END_TEST

#define LABELS                                                                               \
  "model_config_list { config { name: 'm' base_path: '%s' model_platform: 'tensorflow' "     \
  "model_version_policy { specific { versions: 1 versions: 2 } } "                           \
  "version_labels { key: 'stable' value: %s } version_labels { key: 'canary' value: %s } } }"

static td_code apply_labels(env *e, const char *stable, const char *canary, td_err *err) {
  char text[1024];
  snprintf(text, sizeof text, LABELS, "%s", stable, canary);
  return apply(e, text, err);
}

static int64_t label(env *e, const char *l) {
  int64_t v = -1;
  td_err err;
  if (ldr_registry_resolve_label(e->r, "m", l, &v, &err)) return -1;
  return v;
}

START_TEST(labels) {
  put_version(V1, 1);
  put_version(V2, 2);
  env e = start((ldr_manager_options){0});
  td_err err;
  /* Labels in the first config work once its loads are done. */
  ck_assert_int_eq(apply_labels(&e, "1", "2", &err), TD_OK);
  ck_assert_int_eq(label(&e, "stable"), 1);
  ck_assert_int_eq(label(&e, "canary"), 2);
  ck_assert_int_eq(label(&e, "other"), -1);
  ck_assert_int_eq(ldr_registry_resolve_label(e.r, "m", "other", &(int64_t){0}, &err),
                   TD_INVALID_ARGUMENT);
  ck_assert_str_eq(err.msg, "Unrecognized servable version label: other");
  /* Move canary to stable's version. */
  ck_assert_int_eq(apply_labels(&e, "1", "1", &err), TD_OK);
  ck_assert_int_eq(label(&e, "canary"), 1);
  /* A label on a version that is not available: refused, labels unchanged. */
  ck_assert_int_eq(apply_labels(&e, "1", "9", &err), TD_FAILED_PRECONDITION);
  ck_assert_str_eq(err.msg,
                   "Request to assign label to version 9 of model m, which is not currently "
                   "available for inference");
  ck_assert_int_eq(label(&e, "canary"), 1);
  stop(&e);

  /* With allow_labels_for_unavailable, a new label may point anywhere, but
   * an existing one may not move to an unavailable version. */
  e = start((ldr_manager_options){.allow_labels_for_unavailable = true});
  ck_assert_int_eq(apply_labels(&e, "1", "9", &err), TD_OK);
  ck_assert_int_eq(label(&e, "canary"), 9);
  ck_assert_int_eq(apply_labels(&e, "1", "9", &err), TD_OK);
  ck_assert_int_eq(apply_labels(&e, "8", "9", &err), TD_FAILED_PRECONDITION);
  ck_assert_int_eq(label(&e, "stable"), 1);
  stop(&e);
}
END_TEST

START_TEST(models_added_and_removed) {
  put_version(V1, 1);
  char other[400];
  snprintf(other, sizeof other, "%s/o", root);
  ck_assert_int_eq(mkdir(other, 0755), 0);
  char ov[450];
  snprintf(ov, sizeof ov, "%s/3", other);
  td_testfs_copy_tree(V2, ov);
  env e = start((ldr_manager_options){0});
  td_err err;
  ck_assert_int_eq(apply(&e, LATEST1, &err), TD_OK);
  char text[1024];
  snprintf(text, sizeof text,
           "model_config_list { config { name: 'o' base_path: '%s' model_platform: 'tensorflow' "
           "} config { name: 'm' base_path: '%%s' model_platform: 'tensorflow' } }",
           other);
  ck_assert_int_eq(apply(&e, text, &err), TD_OK);
  ldr_servable *sv = NULL;
  ck_assert_int_eq(ldr_registry_acquire(e.r, "o", -1, &sv, &err), TD_OK);
  ck_assert_int_eq(ldr_servable_version(sv), 3);
  ldr_servable_unref(sv);
  char **paths = NULL;
  int n = ldr_manager_base_paths(e.m, &paths);
  ck_assert_int_eq(n, 2);
  for (int i = 0; i < n; i++) free(paths[i]);
  free(paths);

  /* Drop m: it unloads and disappears. */
  snprintf(text, sizeof text,
           "model_config_list { config { name: 'o' base_path: '%s' model_platform: 'tensorflow' "
           "} }",
           other);
  ck_assert_int_eq(apply(&e, text, &err), TD_OK);
  bool gone = false;
  for (int i = 0; i < 2000 && !gone; i++) {
    char **names = NULL;
    int k = ldr_registry_model_names(e.r, &names);
    gone = k == 1 && !strcmp(names[0], "o");
    for (int j = 0; j < k; j++) free(names[j]);
    free(names);
    if (!gone) usleep(2000);
  }
  ck_assert(gone);
  ck_assert_int_eq(ldr_registry_acquire(e.r, "m", -1, &sv, &err), TD_NOT_FOUND);
  stop(&e);
}
END_TEST

START_TEST(shutdown_waits_for_requests) {
  put_version(V1, 1);
  env e = start((ldr_manager_options){0});
  td_err err;
  ck_assert_int_eq(apply(&e, LATEST1, &err), TD_OK);
  ldr_servable *held = NULL;
  ck_assert_int_eq(ldr_registry_acquire(e.r, "m", -1, &held, &err), TD_OK);
  /* A request still holds version 1: not clean within the grace period. */
  ck_assert(!ldr_manager_shutdown(e.m, 0.05));
  ck_assert_int_eq(ldr_registry_acquire(e.r, "m", -1, &(ldr_servable *){NULL}, &err),
                   TD_UNAVAILABLE);
  ck_assert_str_eq(err.msg, "Server is shutting down");
  ldr_servable_unref(held);
  ck_assert(ldr_manager_shutdown(e.m, 5));
  ck_assert_int_eq(state_of(&e, 1, NULL), LDR_STATE_END);
  stop(&e);
}
END_TEST

START_TEST(missing_base_path_keeps_versions) {
  put_version(V1, 1);
  env e = start((ldr_manager_options){0});
  td_err err;
  ck_assert_int_eq(apply(&e, LATEST1, &err), TD_OK);
  char moved[400];
  snprintf(moved, sizeof moved, "%s/moved", root);
  ck_assert_int_eq(rename(base, moved), 0);
  rescan(&e);
  ck_assert_float_eq(answer(&e, -1, NULL), 3.0f); /* as TF Serving: nothing changes */
  ck_assert_int_eq(rename(moved, base), 0);
  rescan(&e);
  ck_assert_float_eq(answer(&e, -1, NULL), 3.0f);
  stop(&e);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_manager");
  TCase *tc = tcase_create("manager");
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, latest_swaps_and_rolls_back);
  tcase_add_test(tc, in_flight_request_keeps_its_version);
  tcase_add_test(tc, policies);
  tcase_add_test(tc, incomplete_versions_wait);
  tcase_add_test(tc, failed_loads_retry_then_end);
  tcase_add_test(tc, new_model_that_fails_is_reported);
  tcase_add_test(tc, labels);
  tcase_add_test(tc, models_added_and_removed);
  tcase_add_test(tc, shutdown_waits_for_requests);
  tcase_add_test(tc, missing_base_path_keeps_versions);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
