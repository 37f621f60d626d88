/* srv_route: TF Serving's REST URL grammar (http_rest_api_util.cc), every
 * well-formed shape, the malformed examples of http_rest_api_handler_test.cc
 * and their exact messages. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_route.h"

/* The route is filled in place: name and label point into r->buf, so a
 * copy of the struct would point into the original. */
static void parse_ok(const char *method, const char *path, srv_route *r) {
  td_err err;
  td_err_clear(&err);
  td_code rc = srv_route_parse(method, path, r, &err);
  ck_assert_msg(rc == TD_OK, "%s %s: %s (%s)", method, path, td_code_name(rc), err.msg);
}

static void expect(const char *method, const char *path, srv_route_kind kind, const char *name,
                   bool has_version, int64_t version, const char *label) {
  srv_route r;
  parse_ok(method, path, &r);
  ck_assert_msg(r.kind == kind, "%s %s: kind %d, want %d", method, path, r.kind, kind);
  ck_assert_ptr_nonnull(r.name);
  ck_assert_str_eq(r.name, name);
  ck_assert_msg(r.has_version == has_version, "%s %s: has_version", method, path);
  if (has_version) ck_assert_int_eq(r.version, version);
  if (label) {
    ck_assert_ptr_nonnull(r.label);
    ck_assert_str_eq(r.label, label);
  } else {
    ck_assert_ptr_null(r.label);
  }
  /* Name and label live inside the route value. */
  ck_assert(r.name >= r.buf && r.name < r.buf + sizeof r.buf);
  if (label) ck_assert(r.label >= r.buf && r.label < r.buf + sizeof r.buf);
}

static void malformed(const char *method, const char *path) {
  srv_route r;
  td_err err;
  td_err_clear(&err);
  td_code rc = srv_route_parse(method, path, &r, &err);
  ck_assert_msg(rc == TD_INVALID_ARGUMENT, "%s %s: %s", method, path, td_code_name(rc));
  ck_assert_int_eq(err.code, TD_INVALID_ARGUMENT);
  ck_assert_int_eq(r.kind, SRV_ROUTE_MALFORMED);
  char want[1200];
  snprintf(want, sizeof want, "Malformed request: %s %s", method, path);
  ck_assert_str_eq(err.msg, want);
}

START_TEST(status_forms) {
  expect("GET", "/v1/models/half", SRV_ROUTE_STATUS, "half", false, 0, NULL);
  expect("GET", "/v1/models/half/versions/123", SRV_ROUTE_STATUS, "half", true, 123, NULL);
  expect("GET", "/v1/models/half/versions/0", SRV_ROUTE_STATUS, "half", true, 0, NULL);
  expect("GET", "/v1/models/half/labels/stable", SRV_ROUTE_STATUS, "half", false, 0, "stable");
}
END_TEST

START_TEST(metadata_forms) {
  expect("GET", "/v1/models/half/metadata", SRV_ROUTE_METADATA, "half", false, 0, NULL);
  expect("GET", "/v1/models/half/versions/00123/metadata", SRV_ROUTE_METADATA, "half", true, 123,
         NULL);
  expect("GET", "/v1/models/half/labels/canary/metadata", SRV_ROUTE_METADATA, "half", false, 0,
         "canary");
}
END_TEST

START_TEST(post_forms) {
  const char *verbs[] = {"predict", "classify", "regress"};
  const srv_route_kind kinds[] = {SRV_ROUTE_PREDICT, SRV_ROUTE_CLASSIFY, SRV_ROUTE_REGRESS};
  for (int i = 0; i < 3; i++) {
    char p[128];
    snprintf(p, sizeof p, "/v1/models/half:%s", verbs[i]);
    expect("POST", p, kinds[i], "half", false, 0, NULL);
    snprintf(p, sizeof p, "/v1/models/half/versions/2:%s", verbs[i]);
    expect("POST", p, kinds[i], "half", true, 2, NULL);
    snprintf(p, sizeof p, "/v1/models/half/labels/beta-1.x:%s", verbs[i]);
    expect("POST", p, kinds[i], "half", false, 0, "beta-1.x");
  }
  /* Names may hold anything but '/' and ':'. */
  expect("POST", "/v1/models/my.model-2_x%20y:predict", SRV_ROUTE_PREDICT, "my.model-2_x y", false,
         0, NULL);
  expect("GET", "/v1/models/metadata", SRV_ROUTE_STATUS, "metadata", false, 0, NULL);
  expect("GET", "/v1/models/versions", SRV_ROUTE_STATUS, "versions", false, 0, NULL);
  /* The largest int64 is a valid version. */
  expect("POST", "/v1/models/m/versions/9223372036854775807:predict", SRV_ROUTE_PREDICT, "m", true,
         INT64_MAX, NULL);
}
END_TEST

START_TEST(fixed_parts_ignore_case) {
  expect("GET", "/V1/MODELS/Half", SRV_ROUTE_STATUS, "Half", false, 0, NULL);
  expect("GET", "/v1/Models/half/VERSIONS/7/MetaData", SRV_ROUTE_METADATA, "half", true, 7, NULL);
  expect("POST", "/V1/models/half/Labels/L:predict", SRV_ROUTE_PREDICT, "half", false, 0, "L");
}
END_TEST

START_TEST(tf_serving_malformed_examples) {
  /* http_rest_api_handler_test.cc */
  malformed("GET", "/v1/foo");
  malformed("POST", "/v1/foo");
  malformed("GET", "/v1/models/foo:predict");
  malformed("POST", "/v1/models/foo/version/50:regress");
  malformed("POST", "/v1/models/foo/versions/HELLO:regress");
  malformed("POST", "/v1/models/foo/metadata");
  malformed("POST", "/v1/models/foo/label/x:regress");
  malformed("POST", "/v1/models/foo/versions/50/labels/x:regress");
  /* The verb is case-sensitive. */
  malformed("POST", "/v1/models/foo:PREDICT");
  malformed("POST", "/v1/models/foo:Regress");
}
END_TEST

START_TEST(other_malformed) {
  malformed("POST", "/v1/models/foo");           /* POST without a verb */
  malformed("POST", "/v1/models/foo:");          /* empty verb */
  malformed("POST", "/v1/models/foo:predict/x"); /* trailing path */
  malformed("POST", "/v1/models/foo:predict:predict");
  malformed("GET", "/v1/models/"); /* empty name */
  malformed("GET", "/v1/models//versions/1");
  malformed("GET", "/v1/models/foo/");
  malformed("GET", "/v1/models/foo/versions/");
  malformed("GET", "/v1/models/foo/versions/-1");
  malformed("GET", "/v1/models/foo/versions/+1");
  malformed("GET", "/v1/models/foo/versions/1.5");
  malformed("GET", "/v1/models/foo/labels/");
  malformed("GET", "/v1/models/foo/metadata/");
  malformed("GET", "/v1/models/foo/metadataX");
  malformed("GET", "/v1/models/foo/versions/1/labels/x");
  malformed("GET", "/v1/modelsfoo");
  malformed("GET", "/v1/model/foo");
  malformed("GET", "/v1/");
  malformed("POST", "/v1/models");
  /* Only GET and POST route (OPTIONS is the CORS preflight); other methods
   * are malformed. */
  malformed("PUT", "/v1/models/foo:predict");
  malformed("DELETE", "/v1/models/foo");
  malformed("HEAD", "/v1/models/foo");
  malformed("get", "/v1/models/foo");
}
END_TEST

static srv_route_kind kind_of(const char *method, const char *path) {
  srv_route r;
  td_err err;
  td_err_clear(&err);
  ck_assert_msg(srv_route_parse(method, path, &r, &err) == TD_OK, "%s %s: %s", method, path,
                err.msg);
  return r.kind;
}

START_TEST(beyond_tf_serving) {
  /* TF Serving answers "Missing model name in request."; tensord lists. */
  ck_assert_int_eq(kind_of("GET", "/v1/models"), SRV_ROUTE_LIST);
  ck_assert_int_eq(kind_of("GET", "/V1/Models"), SRV_ROUTE_LIST);
  ck_assert_int_eq(kind_of("GET", "/healthz"), SRV_ROUTE_HEALTH);
  ck_assert_int_eq(kind_of("HEAD", "/healthz"), SRV_ROUTE_HEALTH);
  ck_assert_int_eq(kind_of("GET", "/readyz"), SRV_ROUTE_READY);
  /* Probes are exact, lower-case, GET/HEAD only; anything else is outside /v1/. */
  ck_assert_int_eq(kind_of("POST", "/healthz"), SRV_ROUTE_NOT_V1);
  ck_assert_int_eq(kind_of("GET", "/healthz/"), SRV_ROUTE_NOT_V1);
  ck_assert_int_eq(kind_of("GET", "/READYZ"), SRV_ROUTE_NOT_V1);
  ck_assert_int_eq(kind_of("OPTIONS", "/v1/models/m:predict"), SRV_ROUTE_PREFLIGHT);
  ck_assert_int_eq(kind_of("OPTIONS", "/v1/anything"), SRV_ROUTE_PREFLIGHT);
  ck_assert_int_eq(kind_of("OPTIONS", "/other"), SRV_ROUTE_NOT_V1);
}
END_TEST

START_TEST(percent_decoding) {
  /* Name and label are decoded after matching, as TF Serving's DecodeArg. */
  expect("GET", "/v1/models/a%2Fb", SRV_ROUTE_STATUS, "a/b", false, 0, NULL);
  expect("POST", "/v1/models/a%3ab/labels/x%20y:predict", SRV_ROUTE_PREDICT, "a:b", false, 0,
         "x y");
  expect("GET", "/v1/models/100%/metadata", SRV_ROUTE_METADATA, "100%", false, 0, NULL);
  expect("GET", "/v1/models/%zz%4", SRV_ROUTE_STATUS, "%zz%4", false, 0, NULL);
  srv_route r;
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(srv_route_parse("GET", "/v1/models/a%00b", &r, &err), TD_INVALID_ARGUMENT);
  ck_assert_str_eq(err.msg, "Failed to decode model name:a%00b");
  td_err_clear(&err);
  ck_assert_int_eq(srv_route_parse("POST", "/v1/models/a/labels/%00:predict", &r, &err),
                   TD_INVALID_ARGUMENT);
  ck_assert_str_eq(err.msg, "Failed to decode model version label:%00");
}
END_TEST

START_TEST(version_overflow) {
  const char *vs[] = {"18446744073709551615", "9223372036854775808", "99999999999999999999999"};
  for (int i = 0; i < 3; i++) {
    char p[128], want[160];
    srv_route r;
    td_err err;
    snprintf(p, sizeof p, "/v1/models/m/versions/%s:predict", vs[i]);
    td_err_clear(&err);
    ck_assert_int_eq(srv_route_parse("POST", p, &r, &err), TD_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "Failed to convert version: %s to numeric.", vs[i]);
    ck_assert_str_eq(err.msg, want);
    ck_assert_int_eq(r.kind, SRV_ROUTE_MALFORMED);
    snprintf(p, sizeof p, "/v1/models/m/versions/%s", vs[i]);
    td_err_clear(&err);
    ck_assert_int_eq(srv_route_parse("GET", p, &r, &err), TD_INVALID_ARGUMENT);
    ck_assert_str_eq(err.msg, want);
  }
}
END_TEST

START_TEST(not_v1) {
  const char *paths[] = {"/",
                         "/v2x/models/foo",
                         "/v1",
                         "/metrics",
                         "/monitoring/prometheus/metrics",
                         "",
                         "v1/models/foo",
                         "/v10/models/foo",
                         "/models/foo"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    srv_route r;
    td_err err;
    td_err_clear(&err);
    ck_assert_msg(srv_route_parse("GET", paths[i], &r, &err) == TD_OK, "%s", paths[i]);
    ck_assert_msg(r.kind == SRV_ROUTE_NOT_V1, "'%s': kind %d", paths[i], r.kind);
  }
}
END_TEST

START_TEST(v2_paths) {
  /* "/v2" and everything under "/v2/" belong to the v2 protocol. */
  const char *paths[] = {"/v2", "/v2/", "/v2/models/foo", "/v2/health/live"};
  for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
    srv_route r;
    ck_assert_int_eq(srv_route_parse("GET", paths[i], &r, NULL), TD_OK);
    ck_assert_msg(r.kind == SRV_ROUTE_V2, "'%s': kind %d", paths[i], r.kind);
  }
  srv_route r;
  ck_assert_int_eq(srv_route_parse("POST", "/v2/models/foo/infer", &r, NULL), TD_OK);
  ck_assert_int_eq(r.kind, SRV_ROUTE_V2);
}
END_TEST

START_TEST(long_paths) {
  /* A long model name is fine (TF Serving takes any length); a path past
   * the route's buffer is refused, never overflowing it. */
  char p[6000];
  int n = snprintf(p, sizeof p, "/v1/models/");
  memset(p + n, 'a', 1500);
  strcpy(p + n + 1500, ":predict");
  srv_route r;
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(srv_route_parse("POST", p, &r, &err), TD_OK);
  ck_assert_int_eq(r.kind, SRV_ROUTE_PREDICT);
  ck_assert_uint_eq(strlen(r.name), 1500);
  memset(p + n, 'a', 5000);
  strcpy(p + n + 5000, ":predict");
  ck_assert_int_eq(srv_route_parse("POST", p, &r, &err), TD_INVALID_ARGUMENT);
  ck_assert_int_eq(r.kind, SRV_ROUTE_MALFORMED);
  /* A name and a label that together nearly fill the buffer. */
  n = snprintf(p, sizeof p, "/v1/models/");
  memset(p + n, 'n', 240);
  n += 240;
  n += snprintf(p + n, sizeof p - (size_t)n, "/labels/");
  memset(p + n, 'l', 240);
  n += 240;
  strcpy(p + n, ":classify");
  parse_ok("POST", p, &r);
  ck_assert_int_eq(r.kind, SRV_ROUTE_CLASSIFY);
  ck_assert_uint_eq(strlen(r.name), 240);
  ck_assert_uint_eq(strlen(r.label), 240);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("srv_route");
  TCase *tc = tcase_create("routes");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, status_forms);
  tcase_add_test(tc, metadata_forms);
  tcase_add_test(tc, post_forms);
  tcase_add_test(tc, fixed_parts_ignore_case);
  tcase_add_test(tc, tf_serving_malformed_examples);
  tcase_add_test(tc, other_malformed);
  tcase_add_test(tc, beyond_tf_serving);
  tcase_add_test(tc, percent_decoding);
  tcase_add_test(tc, version_overflow);
  tcase_add_test(tc, not_v1);
  tcase_add_test(tc, v2_paths);
  tcase_add_test(tc, long_paths);
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
