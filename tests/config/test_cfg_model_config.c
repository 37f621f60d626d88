/* cfg_model_config: ModelServerConfig text and protos into plain structs,
 * with TF Serving's checks and messages. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cfg_model_config.h"
#include "tensorflow_serving/config/model_server_config.pb-c.h"

static cfg_model_config parse_ok(const char *text) {
  cfg_model_config c;
  td_err err;
  td_err_clear(&err);
  td_code rc = cfg_model_config_parse(text, strlen(text), &c, &err);
  ck_assert_msg(rc == TD_OK, "parse failed: %s", err.msg);
  return c;
}

static void parse_err(const char *text, td_code want, const char *substr) {
  cfg_model_config c = {.n_models = 7};
  td_err err;
  td_err_clear(&err);
  td_code rc = cfg_model_config_parse(text, strlen(text), &c, &err);
  ck_assert_msg(rc == want, "got %s (%s), want %s", td_code_name(rc), err.msg, td_code_name(want));
  ck_assert_msg(strstr(err.msg, substr), "message '%s' lacks '%s'", err.msg, substr);
  ck_assert_int_eq(c.n_models, 0);
  ck_assert_ptr_null(c.models);
}

START_TEST(models_policies_labels) {
  cfg_model_config c = parse_ok(
      "model_config_list {\n"
      "  config { name: 'a' base_path: '/m/a' model_platform: 'tensorflow'\n"
      "    model_version_policy { specific { versions: 43 versions: 42 versions: 43 } }\n"
      "    version_labels { key: 'stable' value: 42 } version_labels { key: 'canary' value: 43 }\n"
      "    version_labels { key: 'stable' value: 41 } }\n"
      "  config { name: 'b' base_path: '/m/b' model_type: TENSORFLOW\n"
      "    model_version_policy { latest { num_versions: 3 } } }\n"
      "  config { name: 'c' base_path: '/m/c' model_platform: 'tensorflow'\n"
      "    model_version_policy { all {} } }\n"
      "  config { name: 'd' base_path: 'rel/d' model_platform: 'tensorflow'\n"
      "    model_version_policy { latest { num_versions: 0 } } }\n"
      "  config { name: 'e' base_path: '/m/e' model_platform: 'tensorflow' }\n"
      "}\n");
  ck_assert_int_eq(c.n_models, 5);
  const cfg_model *a = &c.models[0];
  ck_assert_str_eq(a->name, "a");
  ck_assert_str_eq(a->base_path, "/m/a");
  ck_assert_int_eq(a->policy.kind, CFG_POLICY_SPECIFIC);
  ck_assert_int_eq(a->policy.n_versions, 2); /* sorted, duplicates dropped */
  ck_assert_int_eq(a->policy.versions[0], 42);
  ck_assert_int_eq(a->policy.versions[1], 43);
  ck_assert_int_eq(a->n_labels, 2); /* a repeated key keeps the last value */
  ck_assert_str_eq(a->labels[0].label, "canary");
  ck_assert_int_eq(a->labels[0].version, 43);
  ck_assert_str_eq(a->labels[1].label, "stable");
  ck_assert_int_eq(a->labels[1].version, 41);
  ck_assert_int_eq(c.models[1].policy.kind, CFG_POLICY_LATEST);
  ck_assert_uint_eq(c.models[1].policy.num_versions, 3);
  ck_assert_int_eq(c.models[2].policy.kind, CFG_POLICY_ALL);
  ck_assert_uint_eq(c.models[3].policy.num_versions, 1); /* 0 means 1 */
  ck_assert_str_eq(c.models[3].base_path, "rel/d");
  ck_assert_int_eq(c.models[4].policy.kind, CFG_POLICY_LATEST);
  ck_assert_uint_eq(c.models[4].policy.num_versions, 1);
  ck_assert_ptr_eq(cfg_model_config_find(&c, "c"), &c.models[2]);
  ck_assert_ptr_null(cfg_model_config_find(&c, "zz"));

  char buf[64];
  cfg_version_policy_describe(&a->policy, buf, sizeof buf);
  ck_assert_str_eq(buf, "specific{42,43}");
  cfg_version_policy_describe(&c.models[1].policy, buf, sizeof buf);
  ck_assert_str_eq(buf, "latest{3}");
  cfg_version_policy_describe(&c.models[2].policy, buf, sizeof buf);
  ck_assert_str_eq(buf, "all");

  cfg_model_config d;
  td_err err;
  ck_assert_int_eq(cfg_model_config_copy(&c, &d, &err), TD_OK);
  ck_assert(cfg_model_config_equal(&c, &d));
  d.models[0].labels[1].version = 40;
  ck_assert(!cfg_model_config_equal(&c, &d));
  d.models[0].labels[1].version = 41;
  d.models[0].policy.versions[1] = 44;
  ck_assert(!cfg_model_config_equal(&c, &d));
  cfg_model_config_free(&d);
  cfg_model_config_free(&c);
  ck_assert_int_eq(c.n_models, 0);
  cfg_model_config_free(NULL);
}
END_TEST

START_TEST(empty_list_and_specific) {
  cfg_model_config c = parse_ok("model_config_list {}");
  ck_assert_int_eq(c.n_models, 0);
  cfg_model_config_free(&c);
  c = parse_ok("model_config_list { config { name: 'x' base_path: '/x' model_platform: "
               "'tensorflow' model_version_policy { specific {} } } }");
  ck_assert_int_eq(c.models[0].policy.kind, CFG_POLICY_SPECIFIC);
  ck_assert_int_eq(c.models[0].policy.n_versions, 0);
  cfg_model_config_free(&c);
}
END_TEST

START_TEST(refusals) {
  parse_err("", TD_INVALID_ARGUMENT, "no model_config_list");
  parse_err("custom_model_config { }", TD_INVALID_ARGUMENT, "custom_model_config is not supported");
  parse_err("model_config_list { config { base_path: '/x' model_platform: 'tensorflow' } }",
            TD_INVALID_ARGUMENT, "entry 0 has no name");
  parse_err("model_config_list { config { name: 'x' model_platform: 'tensorflow' } }",
            TD_INVALID_ARGUMENT, "Model x has no base_path");
  parse_err("model_config_list { config { name: 'x' base_path: '/x' } }", TD_FAILED_PRECONDITION,
            "Illegal setting neither model_type(deprecated) nor model_platform.");
  parse_err("model_config_list { config { name: 'x' base_path: '/x' model_type: TENSORFLOW "
            "model_platform: 'tensorflow' } }",
            TD_FAILED_PRECONDITION, "Illegal setting both model_type(deprecated) and model_platform.");
  parse_err("model_config_list { config { name: 'x' base_path: '/x' model_platform: 'onnx' } }",
            TD_FAILED_PRECONDITION, "platform 'onnx'");
  parse_err("model_config_list { config { name: 'x' base_path: '/x' model_platform: 'tensorflow' }"
            " config { name: 'x' base_path: '/y' model_platform: 'tensorflow' } }",
            TD_INVALID_ARGUMENT, "Illegal to list model x multiple times in config list");
  parse_err("model_config_list { config { name: 'x' base_path: '/x' model_platform: 'tensorflow' "
            "version_labels { key: 's' value: -1 } } }",
            TD_INVALID_ARGUMENT, "label 's'");
  /* Syntax errors carry TF Serving's prefix, the line and the column. */
  parse_err("model_config_list {\n  config { nam: 'x' }\n}", TD_INVALID_ARGUMENT,
            "Error parsing text-format tensorflow.serving.ModelServerConfig: line 2 column 12");
  parse_err("improperly formatted file", TD_INVALID_ARGUMENT,
            "Error parsing text-format tensorflow.serving.ModelServerConfig: line 1 column ");
}
END_TEST

START_TEST(files) {
  char path[] = "/tmp/td_cfgmc_XXXXXX";
  int fd = mkstemp(path);
  ck_assert_int_ge(fd, 0);
  const char *bad = "model_config_list {\n config {\n  name: 'x'\n  base_path: 3.5.1\n }\n}\n";
  ck_assert_int_eq(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
  close(fd);
  cfg_model_config c;
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(cfg_model_config_read_file(path, &c, &err), TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, "Error parsing text-format tensorflow.serving.ModelServerConfig"),
                "%s", err.msg);
  ck_assert_msg(strstr(err.msg, path) && strstr(err.msg, "line 4 column"), "%s", err.msg);
  FILE *f = fopen(path, "w");
  fputs("model_config_list { config { name: 'x' base_path: '/x' model_platform: 'tensorflow' } }",
        f);
  fclose(f);
  ck_assert_int_eq(cfg_model_config_read_file(path, &c, &err), TD_OK);
  ck_assert_int_eq(c.n_models, 1);
  cfg_model_config_free(&c);
  unlink(path);
  td_err_clear(&err);
  ck_assert_int_eq(cfg_model_config_read_file(path, &c, &err), TD_NOT_FOUND);
  ck_assert_msg(strstr(err.msg, path), "%s", err.msg);
}
END_TEST

START_TEST(single_and_proto) {
  cfg_model_config c;
  td_err err;
  ck_assert_int_eq(cfg_model_config_single("m", "/models/m", &c, &err), TD_OK);
  ck_assert_int_eq(c.n_models, 1);
  ck_assert_str_eq(c.models[0].name, "m");
  ck_assert_int_eq(c.models[0].policy.kind, CFG_POLICY_LATEST);
  ck_assert_uint_eq(c.models[0].policy.num_versions, 1);
  cfg_model_config_free(&c);
  ck_assert_int_eq(cfg_model_config_single("", "/x", &c, &err), TD_INVALID_ARGUMENT);

  /* A message as gRPC's ReloadConfigRequest delivers it. */
  Tensorflow__Serving__ModelConfig mc = TENSORFLOW__SERVING__MODEL_CONFIG__INIT;
  mc.name = "g";
  mc.base_path = "/g";
  mc.model_platform = "tensorflow";
  Tensorflow__Serving__ModelConfig *list_items[] = {&mc};
  Tensorflow__Serving__ModelConfigList list = TENSORFLOW__SERVING__MODEL_CONFIG_LIST__INIT;
  list.n_config = 1;
  list.config = list_items;
  Tensorflow__Serving__ModelServerConfig msc = TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__INIT;
  td_err_clear(&err);
  ck_assert_int_eq(cfg_model_config_from_proto(&msc, &c, &err), TD_INVALID_ARGUMENT);
  ck_assert_int_eq(cfg_model_config_from_proto(NULL, &c, &err), TD_INVALID_ARGUMENT);
  msc.config_case = TENSORFLOW__SERVING__MODEL_SERVER_CONFIG__CONFIG_MODEL_CONFIG_LIST;
  msc.model_config_list = &list;
  ck_assert_int_eq(cfg_model_config_from_proto(&msc, &c, &err), TD_OK);
  ck_assert_str_eq(c.models[0].base_path, "/g");
  cfg_model_config_free(&c);
}
END_TEST

int main(void) {
  Suite *s = suite_create("cfg_model_config");
  TCase *tc = tcase_create("config");
  tcase_add_test(tc, models_policies_labels);
  tcase_add_test(tc, empty_list_and_specific);
  tcase_add_test(tc, refusals);
  tcase_add_test(tc, files);
  tcase_add_test(tc, single_and_proto);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
