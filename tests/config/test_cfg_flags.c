/* cfg_flags: TF Serving's flag names and defaults, the accepted spellings,
 * parse errors and the cross-flag rules of cfg_options_validate. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg_flags.h"
#include "td_testcheck.h"

/* Parses a NULL-terminated argument list (argv[0] is added). */
static td_code parse(cfg_options *o, td_err *err, ...) {
  char *argv[32] = {"tensord"};
  int argc = 1;
  va_list ap;
  va_start(ap, err);
  for (char *a; (a = va_arg(ap, char *)) && argc < 31;) argv[argc++] = a;
  va_end(ap);
  cfg_options_defaults(o);
  td_err_clear(err);
  return cfg_flags_parse(argc, argv, o, err);
}

START_TEST(defaults) {
  cfg_options o;
  memset(&o, 0x5a, sizeof o);
  cfg_options_defaults(&o);
  ck_assert_int_eq(o.port, 8500);
  ck_assert_int_eq(o.rest_api_port, 0);
  ck_assert_str_eq(o.model_name, "default");
  ck_assert_str_eq(o.model_base_path, "");
  ck_assert_str_eq(o.saved_model_tags, "serve");
  ck_assert_int_eq(o.num_workers, 0);
  ck_assert_int_eq(o.inline_run_max_micros, 100);
  ck_assert(!o.help);
  ck_assert(!o.version);
  /* No arguments leaves the defaults. */
  td_err err;
  ck_assert_int_eq(parse(&o, &err, NULL), TD_OK);
  ck_assert_int_eq(o.port, 8500);
  ck_assert_str_eq(o.model_name, "default");
}
END_TEST

START_TEST(equals_and_space_forms) {
  cfg_options o;
  td_err err;
  ck_assert_int_eq(parse(&o, &err, "--port=9000", "--rest_api_port", "8501", "--model_name=half",
                         "--model_base_path", "/models/half", "--saved_model_tags=serve,gpu",
                         "--tensord_num_workers=3", NULL),
                   TD_OK);
  ck_assert_int_eq(o.port, 9000);
  ck_assert_int_eq(o.rest_api_port, 8501);
  ck_assert_str_eq(o.model_name, "half");
  ck_assert_str_eq(o.model_base_path, "/models/half");
  ck_assert_str_eq(o.saved_model_tags, "serve,gpu");
  ck_assert_int_eq(o.num_workers, 3);

  /* One dash works too; the last occurrence wins; '=' may be in the value. */
  ck_assert_int_eq(parse(&o, &err, "-port=1", "-port", "2", "--model_name=a=b", NULL), TD_OK);
  ck_assert_int_eq(o.port, 2);
  ck_assert_str_eq(o.model_name, "a=b");
  /* An empty string value is a value. */
  ck_assert_int_eq(parse(&o, &err, "--model_name=", NULL), TD_OK);
  ck_assert_str_eq(o.model_name, "");
  /* The space form takes the next argument even if it looks like a flag. */
  ck_assert_int_eq(parse(&o, &err, "--model_name", "--port=1", NULL), TD_OK);
  ck_assert_str_eq(o.model_name, "--port=1");
  ck_assert_int_eq(o.port, 8500);
  /* Negative and signed integers parse (validate rejects them later). */
  ck_assert_int_eq(parse(&o, &err, "--port=-5", "--rest_api_port", "+7", NULL), TD_OK);
  ck_assert_int_eq(o.port, -5);
  ck_assert_int_eq(o.rest_api_port, 7);
}
END_TEST

START_TEST(bool_forms) {
  cfg_options o;
  td_err err;
  ck_assert_int_eq(parse(&o, &err, "--help", NULL), TD_OK);
  ck_assert(o.help);
  ck_assert(!o.version);
  ck_assert_int_eq(parse(&o, &err, "-version", NULL), TD_OK);
  ck_assert(o.version);
  ck_assert_int_eq(parse(&o, &err, "--help=true", "--version=1", NULL), TD_OK);
  ck_assert(o.help && o.version);
  ck_assert_int_eq(parse(&o, &err, "--help=false", "--version=0", NULL), TD_OK);
  ck_assert(!o.help && !o.version);
  ck_assert_int_eq(parse(&o, &err, "--help", "--help=false", NULL), TD_OK);
  ck_assert(!o.help);
  /* A bare bool does not swallow the next argument. */
  ck_assert_int_eq(parse(&o, &err, "--help", "--port=7", NULL), TD_OK);
  ck_assert(o.help);
  ck_assert_int_eq(o.port, 7);
  /* ... so "false" after it is a stray argument: warned about, skipped. */
  ck_assert_int_eq(parse(&o, &err, "--help", "false", NULL), TD_OK);
  ck_assert(o.help);

  ck_err(parse(&o, &err, "--help=yes", NULL), err, TD_INVALID_ARGUMENT, "help");
  ck_err(parse(&o, &err, "--version=", NULL), err, TD_INVALID_ARGUMENT, "version");
  ck_err(parse(&o, &err, "--help=TRUE2", NULL), err, TD_INVALID_ARGUMENT, "TRUE2");
}
END_TEST

START_TEST(unknown_flags) {
  /* As TF Serving: an unknown argument is named in a warning and skipped. */
  cfg_options o;
  td_err err;
  ck_assert_int_eq(parse(&o, &err, "--bogus=1", "--por=1", "--PORT=1", "--", "---port=1", "-",
                         "positional", "--port=9", "stray", NULL),
                   TD_OK);
  ck_assert_int_eq(o.port, 9);
  /* A known flag's malformed value is still an error. */
  ck_err(parse(&o, &err, "--bogus", "--port=x", NULL), err, TD_INVALID_ARGUMENT, "port");
}
END_TEST

START_TEST(tf_serving_2_20_flags) {
  /* Every flag of tensorflow_model_server 2.20, with a value of its type. */
  cfg_options o;
  td_err err;
  ck_assert_int_eq(
      parse(&o, &err, "--port=8500", "--grpc_socket_path=", "--rest_api_port=8501",
            "--rest_api_num_threads=4", "--rest_api_timeout_in_ms=30000",
            "--rest_api_enable_cors_support=false", "--enable_batching=false",
            "--allow_version_labels_for_unavailable_models=false",
            "--batching_parameters_file=", "--enable_per_model_batching_parameters=true",
            "--model_config_file=", "--model_config_file_poll_wait_seconds=0", "--model_name=m",
            "--model_base_path=/models/m", "--num_load_threads=0", "--num_unload_threads=2",
            "--max_num_load_retries=5", "--load_retry_interval_micros=60000000",
            "--file_system_poll_wait_seconds=1", "--flush_filesystem_caches=true",
            "--tensorflow_session_parallelism=0",
            "--tensorflow_session_config_file=", "--tensorflow_intra_op_parallelism=2",
            "--tensorflow_inter_op_parallelism=3", "--use_alts_credentials=false",
            "--ssl_config_file=", "--platform_config_file=", "--per_process_gpu_memory_fraction=0",
            "--saved_model_tags=serve", NULL),
      TD_OK);
  ck_assert_int_eq(o.inter_op_threads, 3);
  ck_assert_int_eq(o.num_unload_threads, 2);
  ck_assert(o.enable_per_model_batching_parameters);
  ck_assert_int_eq(
      parse(&o, &err, "--grpc_channel_arguments=", "--grpc_max_threads=4",
            "--enable_model_warmup=true", "--num_request_iterations_for_warmup=0",
            "--version=false", "--monitoring_config_file=/m.txt",
            "--remove_unused_fields_from_bundle_metagraph=true", "--prefer_tflite_model=false",
            "--num_tflite_pools=2", "--num_tflite_interpreters_per_pool=1",
            "--enable_signature_method_name_check=true", "--xla_cpu_compilation_enabled=false",
            "--xla_gpu_compilation_enabled=false", "--enable_profiler=true",
            "--thread_pool_factory_config_file=", "--mixed_precision=bfloat16",
            "--skip_initialize_tpu=false", "--enable_grpc_healthcheck_service=true",
            "--enable_serialization_as_tensor_content=false", NULL),
      TD_OK);
  ck_assert_str_eq(o.monitoring_config_file, "/m.txt");
  ck_assert_str_eq(o.mixed_precision, "bfloat16");
  ck_assert(o.enable_signature_method_name_check);
  /* Defaults of the added flags are TF Serving's. */
  cfg_options_defaults(&o);
  ck_assert(o.flush_filesystem_caches);
  ck_assert(o.remove_unused_fields_from_bundle_metagraph);
  ck_assert(o.enable_profiler);
  ck_assert_int_eq(o.num_tflite_interpreters_per_pool, 1);
  ck_assert_int_ge(o.num_tflite_pools, 1);
  /* Typed: a no-effect flag's malformed value still fails. */
  ck_err(parse(&o, &err, "--num_tflite_pools=many", NULL), err, TD_INVALID_ARGUMENT,
         "num_tflite_pools");
  ck_err(parse(&o, &err, "--xla_cpu_compilation_enabled=maybe", NULL), err, TD_INVALID_ARGUMENT,
         "xla_cpu_compilation_enabled");
  /* TF Serving refuses all three thread counts at once. */
  ck_assert_int_eq(
      parse(&o, &err, "--model_base_path=/m", "--tensorflow_session_parallelism=1",
            "--tensorflow_intra_op_parallelism=1", "--tensorflow_inter_op_parallelism=1", NULL),
      TD_OK);
  ck_assert_int_eq(cfg_options_validate(&o, &err), TD_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err.msg, "tensorflow_session_parallelism"));
}
END_TEST

START_TEST(missing_values) {
  cfg_options o;
  td_err err;
  ck_err(parse(&o, &err, "--port", NULL), err, TD_INVALID_ARGUMENT, "port");
  ck_err(parse(&o, &err, "--model_base_path", NULL), err, TD_INVALID_ARGUMENT, "model_base_path");
  ck_err(parse(&o, &err, "--model_name=x", "--rest_api_port", NULL), err, TD_INVALID_ARGUMENT,
         "rest_api_port");
}
END_TEST

START_TEST(bad_integers) {
  cfg_options o;
  td_err err;
  const char *bad[] = {"--port=",     "--port=abc",         "--port=12x",          "--port=1.5",
                       "--port=0x10", "--port=99999999999", "--port=-99999999999", "--port= "};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    td_code rc = parse(&o, &err, bad[i], NULL);
    ck_assert_msg(rc == TD_INVALID_ARGUMENT, "'%s': %s", bad[i], td_code_name(rc));
    ck_assert_msg(strstr(err.msg, "port"), "'%s': message %s", bad[i], err.msg);
  }
  ck_err(parse(&o, &err, "--tensord_num_workers", "many", NULL), err, TD_INVALID_ARGUMENT, "many");
}
END_TEST

START_TEST(validate) {
  cfg_options o;
  td_err err;
  cfg_options_defaults(&o);
  td_err_clear(&err);
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "model_base_path");
  o.model_base_path = NULL;
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "model_base_path");

  o.model_base_path = "/models/m";
  td_err_clear(&err);
  ck_assert_int_eq(cfg_options_validate(&o, &err), TD_OK);

  o.model_name = "";
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "model_name");
  o.model_name = "m";

  o.rest_api_port = 8500; /* equal to --port */
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "rest_api_port");
  o.rest_api_port = 8501;
  ck_assert_int_eq(cfg_options_validate(&o, &err), TD_OK);
  o.rest_api_port = 0; /* REST off: never equal */
  o.port = 0;
  ck_assert_int_eq(cfg_options_validate(&o, &err), TD_OK);
  o.port = 8500;

  const int bad_ports[] = {-1, 65536, 100000};
  for (int i = 0; i < 3; i++) {
    o.port = bad_ports[i];
    ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "--port");
    o.port = 8500;
    o.rest_api_port = bad_ports[i];
    ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "rest_api_port");
    o.rest_api_port = 0;
  }
  o.port = 65535;
  o.rest_api_port = 1;
  ck_assert_int_eq(cfg_options_validate(&o, &err), TD_OK);

  o.num_workers = -1;
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "tensord_num_workers");
  o.num_workers = 64;
  ck_assert_int_eq(cfg_options_validate(&o, &err), TD_OK);

  o.inline_run_max_micros = -1;
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "tensord_inline_run_max_micros");
  o.inline_run_max_micros = 60000001;
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "tensord_inline_run_max_micros");
  o.inline_run_max_micros = 0; /* inline runs off */
  ck_assert_int_eq(cfg_options_validate(&o, &err), TD_OK);
  ck_assert_int_eq(parse(&o, &err, "--tensord_inline_run_max_micros=250", NULL), TD_OK);
  ck_assert_int_eq(o.inline_run_max_micros, 250);
}
END_TEST

START_TEST(parse_then_validate) {
  cfg_options o;
  td_err err;
  ck_assert_int_eq(
      parse(&o, &err, "--port=8500", "--rest_api_port=8500", "--model_base_path=/m", NULL), TD_OK);
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "rest_api_port");
}
END_TEST

START_TEST(usage_lists_flags) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  ck_assert_ptr_nonnull(f);
  cfg_flags_usage(f, "tensord");
  fclose(f);
  const char *names[] = {"--port",
                         "--rest_api_port",
                         "--model_name",
                         "--model_base_path",
                         "--saved_model_tags",
                         "--tensord_num_workers",
                         "--tensord_inline_run_max_micros",
                         "--help",
                         "--version"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    ck_assert_msg(strstr(text, names[i]), "usage lacks %s", names[i]);
  ck_assert(strstr(text, "tensord"));
  free(text);
}
END_TEST

START_TEST(lifecycle_flags) {
  cfg_options o;
  td_err err;
  ck_assert_int_eq(parse(&o, &err, NULL), TD_OK);
  ck_assert_str_eq(o.model_config_file, "");
  ck_assert(o.file_system_poll_wait_seconds == 1.0);
  ck_assert(o.model_config_file_poll_wait_seconds == 0.0);
  ck_assert_int_eq(o.max_num_load_retries, 5);
  ck_assert(o.load_retry_interval_micros == 60000000);
  ck_assert(o.enable_model_warmup);
  ck_assert(!o.allow_version_labels_for_unavailable_models);
  ck_assert_int_eq(o.num_load_threads, 0);
  ck_assert_int_eq(
      parse(&o, &err, "--model_config_file=/c", "--file_system_poll_wait_seconds=0.25",
            "--model_config_file_poll_wait_seconds", "2", "--load_retry_interval_micros=5000000000",
            "--enable_model_warmup=false", "--allow_version_labels_for_unavailable_models",
            "--num_load_threads=4", NULL),
      TD_OK);
  ck_assert_str_eq(o.model_config_file, "/c");
  ck_assert(o.file_system_poll_wait_seconds == 0.25);
  ck_assert(o.model_config_file_poll_wait_seconds == 2.0);
  ck_assert(o.load_retry_interval_micros == 5000000000LL);
  ck_assert(!o.enable_model_warmup);
  ck_assert(o.allow_version_labels_for_unavailable_models);
  ck_assert_int_eq(o.num_load_threads, 4);
  /* A config file stands in for --model_base_path. */
  ck_assert_int_eq(cfg_options_validate(&o, &err), TD_OK);
  ck_err(parse(&o, &err, "--file_system_poll_wait_seconds=1s", NULL), err, TD_INVALID_ARGUMENT,
         "file_system_poll_wait_seconds");
  ck_err(parse(&o, &err, "--file_system_poll_wait_seconds=nan", NULL), err, TD_INVALID_ARGUMENT,
         "not a number");
  ck_err(parse(&o, &err, "--load_retry_interval_micros=1e6", NULL), err, TD_INVALID_ARGUMENT,
         "load_retry_interval_micros");
  ck_assert_int_eq(parse(&o, &err, "--model_base_path=/m", "--max_num_load_retries=-1", NULL),
                   TD_OK);
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "max_num_load_retries");
  ck_assert_int_eq(parse(&o, &err, NULL), TD_OK);
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT,
         "Both server_options.model_base_path and server_options.model_config_file are empty!");
}
END_TEST

START_TEST(shutdown_flags) {
  cfg_options o;
  td_err err;
  ck_assert_int_eq(parse(&o, &err, NULL), TD_OK);
  ck_assert(o.shutdown_grace_seconds == 10.0);
  ck_assert(o.drain_seconds == 0.0);
  ck_assert_int_eq(parse(&o, &err, "--model_base_path=/m", "--tensord_drain_seconds=2.5",
                         "--tensord_shutdown_grace_seconds=20", NULL),
                   TD_OK);
  ck_assert(o.drain_seconds == 2.5);
  ck_assert(o.shutdown_grace_seconds == 20.0);
  ck_assert_int_eq(cfg_options_validate(&o, &err), TD_OK);
  ck_assert_int_eq(parse(&o, &err, "--model_base_path=/m", "--tensord_drain_seconds=-1", NULL),
                   TD_OK);
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "tensord_drain_seconds");
  ck_assert_int_eq(parse(&o, &err, "--model_base_path=/m", "--tensord_drain_seconds=4000", NULL),
                   TD_OK);
  ck_err(cfg_options_validate(&o, &err), err, TD_INVALID_ARGUMENT, "[0, 3600]");
  ck_err(parse(&o, &err, "--tensord_drain_seconds=5s", NULL), err, TD_INVALID_ARGUMENT,
         "tensord_drain_seconds");
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cfg_flags");
  TCase *tc = tcase_create("flags");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, defaults);
  tcase_add_test(tc, equals_and_space_forms);
  tcase_add_test(tc, bool_forms);
  tcase_add_test(tc, unknown_flags);
  tcase_add_test(tc, tf_serving_2_20_flags);
  tcase_add_test(tc, missing_values);
  tcase_add_test(tc, bad_integers);
  tcase_add_test(tc, validate);
  tcase_add_test(tc, parse_then_validate);
  tcase_add_test(tc, usage_lists_flags);
  tcase_add_test(tc, lifecycle_flags);
  tcase_add_test(tc, shutdown_flags);
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
