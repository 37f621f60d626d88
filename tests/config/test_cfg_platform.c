/* cfg_platform: every SessionBundleConfig field parses; the ones that map
 * are taken, bad values fail with a message. */
#include <check.h>
#include <string.h>

#include "cfg_platform.h"

#define WRAP(body)                                                                     \
  "platform_configs { key: 'tensorflow' value { source_adapter_config {\n"             \
  "  [type.googleapis.com/tensorflow.serving.SavedModelBundleSourceAdapterConfig] {\n" \
  "    legacy_config {\n" body "\n    }\n  }\n} } }\n"

static const char EVERY_FIELD[] = WRAP(
    "      session_target: ''\n"
    "      session_config { intra_op_parallelism_threads: 2 inter_op_parallelism_threads: 5 }\n"
    "      batching_parameters { max_batch_size { value: 16 } batch_timeout_micros { value: 0 }\n"
    "        max_enqueued_batches { value: 10 } num_batch_threads { value: 2 }\n"
    "        thread_pool_name { value: 'p' } allowed_batch_sizes: 8 allowed_batch_sizes: 16\n"
    "        pad_variable_length_inputs: false enable_large_batch_splitting { value: true }\n"
    "        max_execution_batch_size { value: 16 } }\n"
    "      session_run_load_threadpool_index { value: 0 }\n"
    "      experimental_transient_ram_bytes_during_load: 1024\n"
    "      saved_model_tags: 'serve' saved_model_tags: 'gpu'\n"
    "      experimental_fixed_input_tensors { name: 'k' tensor { dtype: DT_FLOAT } }\n"
    "      enable_model_warmup: true\n"
    "      model_warmup_options { num_request_iterations { value: 3 }\n"
    "        num_model_warmup_threads { value: 2 } model_name: 'm' model_version: 1\n"
    "        enable_all_batch_sizes_warmup { value: false } }\n"
    "      enable_session_metadata: true\n"
    "      remove_unused_fields_from_bundle_metagraph: true\n"
    "      prefer_tflite_model: false num_tflite_interpreters: 1\n"
    "      num_tflite_interpreters_per_pool: 1 num_tflite_pools: 2\n"
    "      wrap_session_with_no_threading_params: false\n"
    "      enable_per_model_batching_params: true\n"
    "      resource_estimation_uses_validation_result: false\n"
    "      mixed_precision: 'bfloat16'");

START_TEST(every_field_parses_and_what_maps_is_taken) {
  cfg_platform p;
  td_err err;
  ck_assert_int_eq(cfg_platform_parse(EVERY_FIELD, 4, &p, &err), TD_OK);
  ck_assert(p.has_tensorflow);
  ck_assert_int_eq(p.session.intra_op_threads, 2);
  ck_assert_int_eq(p.session.inter_op_threads, 5);
  ck_assert(p.has_batching);
  ck_assert(p.enable_warmup);
  ck_assert_int_eq(p.warmup_iterations, 3);
  ck_assert(p.per_model_batching);
  ck_assert_str_eq(p.saved_model_tags, "serve,gpu");
}
END_TEST

START_TEST(unset_fields_take_tf_serving_defaults) {
  cfg_platform p;
  td_err err;
  ck_assert_int_eq(cfg_platform_parse(WRAP("session_target: ''"), 4, &p, &err), TD_OK);
  ck_assert(p.has_tensorflow && !p.has_batching);
  ck_assert(!p.enable_warmup); /* proto default, as TF Serving with a platform config */
  ck_assert_int_eq(p.warmup_iterations, 0);
  ck_assert(!p.per_model_batching);
  ck_assert_str_eq(p.saved_model_tags, "");
}
END_TEST

START_TEST(bad_values_fail) {
  cfg_platform p;
  td_err err;
  ck_assert_int_eq(cfg_platform_parse(WRAP("saved_model_tags: 'a,b'"), 4, &p, &err),
                   TD_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err.msg, "saved_model_tags: bad tag 'a,b'"));
  ck_assert_int_eq(
      cfg_platform_parse(WRAP("model_warmup_options { num_request_iterations { value: -1 } }"), 4,
                         &p, &err),
      TD_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err.msg, "num_request_iterations must be >= 0"));
  ck_assert_int_eq(cfg_platform_parse(WRAP("num_tflite_poolz: 1"), 4, &p, &err),
                   TD_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err.msg, "num_tflite_poolz"));
  ck_assert_ptr_nonnull(strstr(err.msg, "line "));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cfg_platform");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, every_field_parses_and_what_maps_is_taken);
  tcase_add_test(tc, unset_fields_take_tf_serving_defaults);
  tcase_add_test(tc, bad_values_fail);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
