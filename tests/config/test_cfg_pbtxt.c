#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg_pbtxt.h"
#include "tensorflow/core/framework/tensor.pb-c.h"
#include "tensorflow_serving/config/model_server_config.pb-c.h"

typedef Tensorflow__Serving__ModelServerConfig MSC;

static MSC *parse_ok(const char *text) {
  ProtobufCMessage *m = NULL;
  td_err err;
  td_err_clear(&err);
  td_code rc = cfg_pbtxt_parse(text, strlen(text), &tensorflow__serving__model_server_config__descriptor,
                               &m, &err);
  ck_assert_msg(rc == TD_OK, "parse failed: %s", err.msg);
  return (MSC *)m;
}

static void parse_err(const char *text, const char *want) {
  ProtobufCMessage *m = NULL;
  td_err err;
  td_err_clear(&err);
  td_code rc = cfg_pbtxt_parse(text, strlen(text), &tensorflow__serving__model_server_config__descriptor,
                               &m, &err);
  ck_assert_int_eq(rc, TD_INVALID_ARGUMENT);
  ck_assert_ptr_null(m);
  ck_assert_msg(strstr(err.msg, want), "message '%s' lacks '%s'", err.msg, want);
}

START_TEST(test_tf_serving_example) {
  /* The form TF Serving documents for --model_config_file. */
  MSC *c = parse_ok(
      "model_config_list {\n"
      "  config { name: 'half_plus_two' base_path: '/models/half_plus_two' model_platform: 'tensorflow'\n"
      "    model_version_policy { specific { versions: 42 versions: 43 } }\n"
      "    version_labels { key: 'stable' value: 42 }  version_labels { key: 'canary' value: 43 } }\n"
      "  config: { name: \"second\" base_path: \"/m/2\" model_version_policy: < latest < num_versions: 2 > > }\n"
      "}\n");
  ck_assert_int_eq(c->config_case, TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST);
  ck_assert_uint_eq(c->model_config_list->n_config, 2);
  Tensorflow__Serving__ModelConfig *m = c->model_config_list->config[0];
  ck_assert_str_eq(m->name, "half_plus_two");
  ck_assert_str_eq(m->base_path, "/models/half_plus_two");
  ck_assert_str_eq(m->model_platform, "tensorflow");
  ck_assert_uint_eq(m->model_version_policy->specific->n_versions, 2);
  ck_assert_int_eq(m->model_version_policy->specific->versions[1], 43);
  ck_assert_uint_eq(m->n_version_labels, 2);
  ck_assert_str_eq(m->version_labels[1]->key, "canary");
  ck_assert_int_eq(m->version_labels[1]->value, 43);
  Tensorflow__Serving__ModelConfig *m2 = c->model_config_list->config[1];
  ck_assert_str_eq(m2->model_platform, ""); /* unset proto3 string */
  ck_assert_int_eq(m2->model_version_policy->policy_choice_case,
                   TENSORFLOW__SERVING__FILE_SYSTEM_STORAGE_PATH_SOURCE_CONFIG__SERVABLE_VERSION_POLICY__POLICY_CHOICE_LATEST);
  ck_assert_uint_eq(m2->model_version_policy->latest->num_versions, 2);
  protobuf_c_message_free_unpacked(&c->base, NULL);
}
END_TEST

START_TEST(test_lists_comments_escapes_enums) {
  MSC *c = parse_ok(
      "# a comment\n"
      "model_config_list { config { name: 'a\\tb\\x41\\101\\u00e9' 'tail'; base_path: \"/p\",\n"
      "  model_type: TENSORFLOW  # enum by name\n"
      "  model_version_policy { specific { versions: [1, 0x10, -3] } } } }");
  Tensorflow__Serving__ModelConfig *m = c->model_config_list->config[0];
  ck_assert_str_eq(m->name, "a\tbAA\xc3\xa9tail");
  ck_assert_int_eq(m->model_type, TENSORFLOW__SERVING__MODEL_TYPE__TENSORFLOW);
  ck_assert_uint_eq(m->model_version_policy->specific->n_versions, 3);
  ck_assert_int_eq(m->model_version_policy->specific->versions[1], 16);
  ck_assert_int_eq(m->model_version_policy->specific->versions[2], -3);
  protobuf_c_message_free_unpacked(&c->base, NULL);

  c = parse_ok("model_config_list { config { name: 'x' model_type: 1 } }");
  ck_assert_int_eq(c->model_config_list->config[0]->model_type, 1);
  protobuf_c_message_free_unpacked(&c->base, NULL);

  c = parse_ok("");
  ck_assert_int_eq(c->config_case, 0);
  protobuf_c_message_free_unpacked(&c->base, NULL);
}
END_TEST

START_TEST(test_scalars_of_every_kind) {
  /* TensorProto has float, double, int32, int64, bool, bytes and enum fields. */
  ProtobufCMessage *m = NULL;
  td_err err;
  const char *text =
      "dtype: DT_FLOAT version_number: -7 float_val: [1.5, -2e3, inf, -Infinity, nan, 3f]\n"
      "double_val: 0.25 int64_val: 9223372036854775807 bool_val: [true, f, 1, False]\n"
      "string_val: 'x\\000y' uint64_val: 18446744073709551615";
  ck_assert_int_eq(cfg_pbtxt_parse(text, strlen(text), &tensorflow__tensor_proto__descriptor, &m, &err),
                   TD_OK);
  Tensorflow__TensorProto *t = (Tensorflow__TensorProto *)m;
  ck_assert_int_eq(t->dtype, TENSORFLOW__DATA_TYPE__DT_FLOAT);
  ck_assert_int_eq(t->version_number, -7);
  ck_assert_uint_eq(t->n_float_val, 6);
  ck_assert(t->float_val[1] == -2000.0f && isinf(t->float_val[2]) && t->float_val[3] < 0);
  ck_assert(isnan(t->float_val[4]) && t->float_val[5] == 3.0f);
  ck_assert(t->double_val[0] == 0.25);
  ck_assert(t->int64_val[0] == INT64_MAX);
  ck_assert(t->bool_val[0] && !t->bool_val[1] && t->bool_val[2] && !t->bool_val[3]);
  ck_assert_uint_eq(t->string_val[0].len, 3);
  ck_assert(!memcmp(t->string_val[0].data, "x\0y", 3));
  ck_assert(t->uint64_val[0] == UINT64_MAX);
  protobuf_c_message_free_unpacked(m, NULL);
}
END_TEST

START_TEST(test_errors_name_line_and_column) {
  parse_err("improperly formatted file", "line 1 column 1: message tensorflow.serving.ModelServerConfig has no field named \"improperly\"");
  parse_err("model_config_list {\n  config { nam: 'x' }\n}", "line 2 column 12: message tensorflow.serving.ModelConfig has no field named \"nam\"");
  parse_err("model_config_list { config { name: 'x' name: 'y' } }", "non-repeated field \"name\" is specified multiple times");
  parse_err("model_config_list { config { model_version_policy { latest {} all {} } } }", "same oneof");
  parse_err("model_config_list { config { name 'x' } }", "expected ':'");
  parse_err("model_config_list { config { name: 'x }", "unterminated string");
  parse_err("model_config_list { config { name: 'x' }", "unexpected end of input");
  parse_err("model_config_list { config { model_type: NOPE } }", "unknown value 'NOPE'");
  parse_err("model_config_list { config { model_type: 99 } }", "99 is not a value of enum");
  parse_err("model_config_list { config { model_version_policy { specific { versions: 1.5 } } } }", "not a valid int64");
  parse_err("model_config_list { config { model_version_policy { latest { num_versions: -1 } } } }", "not a valid uint32");
  parse_err("model_config_list { config { model_version_policy { specific { versions: [1, 2 } } } }", "expected ',' or ']'");
  parse_err("model_config_list { config { name: 'a\\q' } }", "unknown escape");
  parse_err("model_config_list { config { name: 5 } }", "expected a string");
  parse_err("model_config_list { [type.googleapis.com/x] { } }", "not supported");
  parse_err("model_config_list { config { name: 'x' } } }", "line 1 column 44: expected a field name");
  parse_err("model_config_list @", "unexpected character '@'");
}
END_TEST

START_TEST(test_depth_and_garbage_never_crash) {
  /* Deep nesting is refused, not followed. */
  size_t n = 400;
  char *deep = malloc(n * 22 + 1);
  deep[0] = '\0';
  for (size_t i = 0; i < n; i++) strcat(deep, "model_config_list { ");
  parse_err(deep, "line 1");
  free(deep);
  /* Random mutations of a valid file: an error or a message, never a crash
   * or a leak (run under ASan in CI builds with TENSORD_SANITIZE). */
  const char *base =
      "model_config_list { config { name: 'm' base_path: \"/x\" model_version_policy "
      "{ specific { versions: [1, 2] } } version_labels { key: 's' value: 1 } } }";
  size_t len = strlen(base);
  char *buf = malloc(len + 1);
  srand(7);
  for (int it = 0; it < 20000; it++) {
    memcpy(buf, base, len + 1);
    for (int k = 0; k < 1 + it % 4; k++) buf[rand() % len] = (char)(rand() % 128);
    size_t cut = it % 5 == 0 ? (size_t)rand() % len : len;
    ProtobufCMessage *m = NULL;
    td_err err;
    if (cfg_pbtxt_parse(buf, cut, &tensorflow__serving__model_server_config__descriptor, &m, &err) ==
        TD_OK)
      protobuf_c_message_free_unpacked(m, NULL);
  }
  free(buf);
}
END_TEST

START_TEST(test_parse_file) {
  char path[] = "/tmp/cfg_pbtxt_XXXXXX";
  int fd = mkstemp(path);
  const char *text = "model_config_list {\n config { name: 'm' base_path: '/b' }\n bogus: 1 }\n";
  ck_assert_int_eq(write(fd, text, strlen(text)), (int)strlen(text));
  close(fd);
  ProtobufCMessage *m = NULL;
  td_err err;
  ck_assert_int_eq(cfg_pbtxt_parse_file(path, &tensorflow__serving__model_server_config__descriptor,
                                        &m, &err),
                   TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "line 3 column 2"), "%s", err.msg);
  unlink(path);
  ck_assert_int_eq(cfg_pbtxt_parse_file("/nonexistent/x.config",
                                        &tensorflow__serving__model_server_config__descriptor, &m, &err),
                   TD_NOT_FOUND);
}
END_TEST

/* Files written against TensorFlow's full .proto files: with
 * CFG_PBTXT_SKIP_UNKNOWN, fields our .proto files leave out (scalars,
 * strings, blocks, lists, Any expansions) are skipped and the rest parses;
 * without it they are errors; skipped text must still be well formed. */
START_TEST(test_skip_unknown_fields) {
  const char *text =
      "model_config_list {\n"
      "  some_future_field: 7\n"
      "  config { name: 'a' base_path: '/m/a' unknown_str: 'x' \"y\"\n"
      "    unknown_block { deep { deeper: [1, 2, {z: 3}] } [type.googleapis.com/x.Y] { v: 1 } }\n"
      "    unknown_list: [ 'p', 'q' ] unknown_enum: SOME_VALUE\n"
      "    model_platform: 'tensorflow' }\n"
      "}\n"
      "[type.googleapis.com/foo.Bar] { a: 1 }\n";
  ProtobufCMessage *m = NULL;
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(cfg_pbtxt_parse_flags(text, strlen(text),
                                         &tensorflow__serving__model_server_config__descriptor,
                                         CFG_PBTXT_SKIP_UNKNOWN, &m, &err),
                   TD_OK);
  MSC *c = (MSC *)m;
  ck_assert_uint_eq(c->model_config_list->n_config, 1);
  ck_assert_str_eq(c->model_config_list->config[0]->name, "a");
  ck_assert_str_eq(c->model_config_list->config[0]->model_platform, "tensorflow");
  protobuf_c_message_free_unpacked(m, NULL);
  parse_err(text, "has no field named \"some_future_field\"");
  const char *bad[] = {"model_config_list { junk { a: 1 }", /* unclosed */
                       "model_config_list { junk: [1, 2 }", /* list */
                       "model_config_list { junk: } }",     /* no value */
                       "model_config_list { [type.x { } }"}; /* bracket */
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    m = NULL;
    td_err_clear(&err);
    ck_assert_int_eq(cfg_pbtxt_parse_flags(bad[i], strlen(bad[i]),
                                           &tensorflow__serving__model_server_config__descriptor,
                                           CFG_PBTXT_SKIP_UNKNOWN, &m, &err),
                     TD_INVALID_ARGUMENT);
    ck_assert_ptr_null(m);
    ck_assert_msg(strstr(err.msg, "line 1"), "%s", err.msg);
  }
}
END_TEST

int main(void) {
  Suite *s = suite_create("cfg_pbtxt");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_tf_serving_example);
  tcase_add_test(tc, test_lists_comments_escapes_enums);
  tcase_add_test(tc, test_scalars_of_every_kind);
  tcase_add_test(tc, test_errors_name_line_and_column);
  tcase_add_test(tc, test_depth_and_garbage_never_crash);
  tcase_add_test(tc, test_parse_file);
  tcase_add_test(tc, test_skip_unknown_fields);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
