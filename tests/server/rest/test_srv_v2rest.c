/* srv_v2rest: the v2 REST URL grammar, and error replies in the v2 shape. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "srv_v2rest.h"

static void expect(const char *method, const char *path, srv_v2_kind kind, const char *name,
                   const char *version) {
  srv_v2_route r;
  ck_assert_msg(srv_v2rest_route(method, path, &r), "%s not a v2 path", path);
  ck_assert_msg(r.kind == kind, "%s %s: kind %d, want %d", method, path, r.kind, kind);
  if (name)
    ck_assert_str_eq(r.name, name);
  else
    ck_assert_ptr_null(r.name);
  ck_assert_str_eq(r.version, version);
}

START_TEST(forms) {
  expect("GET", "/v2", SRV_V2_SERVER_META, NULL, "");
  expect("GET", "/v2/", SRV_V2_SERVER_META, NULL, "");
  expect("GET", "/v2/health/live", SRV_V2_LIVE, NULL, "");
  expect("HEAD", "/v2/health/ready", SRV_V2_READY, NULL, "");
  expect("GET", "/v2/models/mlp", SRV_V2_MODEL_META, "mlp", "");
  expect("GET", "/v2/models/mlp/versions/3", SRV_V2_MODEL_META, "mlp", "3");
  expect("GET", "/v2/models/mlp/ready", SRV_V2_MODEL_READY, "mlp", "");
  expect("GET", "/v2/models/mlp/versions/3/ready", SRV_V2_MODEL_READY, "mlp", "3");
  expect("GET", "/v2/models/mlp/config", SRV_V2_MODEL_CONFIG, "mlp", "");
  expect("GET", "/v2/models/mlp/stats", SRV_V2_STATS, "mlp", "");
  expect("GET", "/v2/models/stats", SRV_V2_STATS, NULL, "");
  expect("POST", "/v2/models/mlp/infer", SRV_V2_INFER, "mlp", "");
  expect("POST", "/v2/models/mlp/versions/12/infer", SRV_V2_INFER, "mlp", "12");
  expect("POST", "/v2/repository/index", SRV_V2_REPO_INDEX, NULL, "");
  expect("POST", "/v2/repository/models/mlp/load", SRV_V2_REPO_LOAD, "mlp", "");
  expect("POST", "/v2/repository/models/mlp/unload", SRV_V2_REPO_UNLOAD, "mlp", "");
}
END_TEST

START_TEST(wrong_method_or_shape) {
  expect("POST", "/v2/models/mlp", SRV_V2_NOT_FOUND, "mlp", "");
  expect("GET", "/v2/models/mlp/infer", SRV_V2_NOT_FOUND, "mlp", "");
  expect("GET", "/v2/repository/index", SRV_V2_NOT_FOUND, NULL, "");
  expect("POST", "/v2/repository/models/mlp/delete", SRV_V2_NOT_FOUND, "mlp", "");
  expect("GET", "/v2/models/", SRV_V2_NOT_FOUND, NULL, "");
  expect("GET", "/v2/models/mlp/versions/", SRV_V2_NOT_FOUND, "mlp", "");
  expect("GET", "/v2/nothing", SRV_V2_NOT_FOUND, NULL, "");
  srv_v2_route r;
  ck_assert(!srv_v2rest_route("GET", "/v1/models/mlp", &r));
  ck_assert(!srv_v2rest_route("GET", "/v2x", &r));
}
END_TEST

START_TEST(percent_decoding) {
  expect("GET", "/v2/models/a%2Fb/ready", SRV_V2_MODEL_READY, "a/b", "");
  expect("GET", "/v2/models/a%00b/ready", SRV_V2_NOT_FOUND, NULL, ""); /* no NUL in names */
}
END_TEST

START_TEST(long_path) {
  char p[3000];
  strcpy(p, "/v2/models/");
  memset(p + 11, 'a', 2500);
  strcpy(p + 2511, "/ready");
  srv_v2_route r;
  ck_assert(srv_v2rest_route("GET", p, &r));
  ck_assert_int_eq(r.kind, SRV_V2_NOT_FOUND);
}
END_TEST

START_TEST(error_shape) {
  td_err e;
  td_err_set(&e, TD_NOT_FOUND, "model \"x\" not found");
  srv_v2_reply rep;
  srv_v2rest_error(&e, &rep);
  ck_assert_int_eq(rep.status, 404);
  ck_assert(!rep.binary);
  ck_assert_str_eq(rep.body.data, "{\"error\":\"model \\\"x\\\" not found\"}");
  td_buf_free(&rep.body);
  td_err_set(&e, TD_UNAVAILABLE, "loading");
  srv_v2rest_error(&e, &rep);
  ck_assert_int_eq(rep.status, 503);
  td_buf_free(&rep.body);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("srv_v2rest");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, forms);
  tcase_add_test(tc, wrong_method_or_shape);
  tcase_add_test(tc, percent_decoding);
  tcase_add_test(tc, long_path);
  tcase_add_test(tc, error_shape);
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
