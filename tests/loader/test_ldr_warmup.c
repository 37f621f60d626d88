/* ldr_warmup: TFRecord framing, record limits, predict replay and its
 * errors, with warmup files written here (stock format) for a fixture. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ldr_crc32c.h"
#include "ldr_warmup.h"
#include "td_testfs.h"
#include "tensorflow_serving/apis/prediction_log.pb-c.h"

#define V2 TD_FIXTURES "/models/half_plus_three_tf2/00000002"

static char root[256], vdir[300], wfile[400];
static ldr_servable *sv;

static void setup(void) {
  td_testfs_mkdtemp("td_warmup", root, sizeof root);
  snprintf(vdir, sizeof vdir, "%s/2", root);
  td_testfs_copy_tree(V2, vdir);
  char extra[350];
  snprintf(extra, sizeof extra, "%s/assets.extra", vdir);
  mkdir(extra, 0755);
  snprintf(wfile, sizeof wfile, "%s/" LDR_WARMUP_FILE, vdir);
  td_err err;
  ck_assert_msg(ldr_servable_load(vdir, 2, "serve", &sv, &err) == TD_OK, "%s", err.msg);
}

static void teardown(void) {
  ldr_servable_unref(sv);
  td_testfs_remove_tree(root);
}

/* One serialized PredictionLog asking `alias` = [v] of `signature`. */
static size_t predict_record(const char *alias, const char *signature, uint8_t *buf) {
  float val = 1.5f;
  Tensorflow__TensorShapeProto__Dim dim = TENSORFLOW__TENSOR_SHAPE_PROTO__DIM__INIT;
  dim.size = 1;
  Tensorflow__TensorShapeProto__Dim *dims[] = {&dim};
  Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
  shape.n_dim = 1;
  shape.dim = dims;
  Tensorflow__TensorProto t = TENSORFLOW__TENSOR_PROTO__INIT;
  t.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
  t.tensor_shape = &shape;
  t.n_float_val = 1;
  t.float_val = &val;
  Tensorflow__Serving__PredictRequest__InputsEntry in =
      TENSORFLOW__SERVING__PREDICT_REQUEST__INPUTS_ENTRY__INIT;
  in.key = (char *)alias;
  in.value = &t;
  Tensorflow__Serving__PredictRequest__InputsEntry *ins[] = {&in};
  Tensorflow__Serving__ModelSpec spec = TENSORFLOW__SERVING__MODEL_SPEC__INIT;
  spec.name = "m";
  spec.signature_name = (char *)signature;
  Tensorflow__Serving__PredictRequest req = TENSORFLOW__SERVING__PREDICT_REQUEST__INIT;
  req.model_spec = &spec;
  req.n_inputs = 1;
  req.inputs = ins;
  Tensorflow__Serving__PredictLog pl = TENSORFLOW__SERVING__PREDICT_LOG__INIT;
  pl.request = &req;
  Tensorflow__Serving__PredictionLog log = TENSORFLOW__SERVING__PREDICTION_LOG__INIT;
  log.log_type_case = TENSORFLOW__SERVING__PREDICTION_LOG__LOG_TYPE_PREDICT_LOG;
  log.predict_log = &pl;
  return tensorflow__serving__prediction_log__pack(&log, buf);
}

static void put_le(uint8_t *p, uint64_t v, int n) {
  for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Appends one TFRecord frame. */
static void frame(FILE *f, const uint8_t *data, size_t n) {
  uint8_t h[12], t[4];
  put_le(h, n, 8);
  put_le(h + 8, ldr_crc32c_mask(ldr_crc32c(h, 8)), 4);
  put_le(t, ldr_crc32c_mask(ldr_crc32c(data, n)), 4);
  fwrite(h, 1, 12, f);
  fwrite(data, 1, n, f);
  fwrite(t, 1, 4, f);
}

static void write_records(int count, const char *alias, const char *signature) {
  FILE *f = fopen(wfile, "wb");
  ck_assert_ptr_nonnull(f);
  uint8_t buf[512];
  for (int i = 0; i < count; i++) frame(f, buf, predict_record(alias, signature, buf));
  fclose(f);
}

static td_code run(int *n, td_err *err) {
  td_err_clear(err);
  return ldr_warmup_run(sv, vdir, 1, n, err);
}

#define ck_fails(want, substr)                                                         \
  do {                                                                                 \
    td_err e_;                                                                         \
    td_code rc_ = run(NULL, &e_);                                                      \
    ck_assert_msg(rc_ == (want), "got %s: %s", td_code_name(rc_), e_.msg);             \
    ck_assert_msg(strstr(e_.msg, (substr)), "message '%s' lacks '%s'", e_.msg, substr); \
  } while (0)

START_TEST(missing_file_is_fine) {
  int n = -1;
  td_err err;
  ck_assert_int_eq(run(&n, &err), TD_OK);
  ck_assert_int_eq(n, 0);
}
END_TEST

START_TEST(replays_records) {
  write_records(3, "x", "");
  int n = 0;
  td_err err;
  ck_assert_msg(run(&n, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(n, 3);
  ck_assert_int_eq(ldr_warmup_run(sv, vdir, 4, &n, &err), TD_OK);
  write_records(LDR_WARMUP_MAX_RECORDS, "x", "serving_default");
  ck_assert_msg(run(&n, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(n, 1000);
}
END_TEST

START_TEST(errors_fail) {
  write_records(LDR_WARMUP_MAX_RECORDS + 1, "x", "");
  ck_fails(TD_INVALID_ARGUMENT, "Number of warmup records exceeds the maximum (1000) at ");
  write_records(1, "nope", "");
  ck_fails(TD_INVALID_ARGUMENT, "input tensor alias not found in signature: nope");
  write_records(1, "x", "missing_sig");
  ck_fails(TD_FAILED_PRECONDITION, "Serving signature key \"missing_sig\" not found.");

  /* Framing: a flipped data byte, a cut file. */
  write_records(2, "x", "");
  FILE *f = fopen(wfile, "r+b");
  fseek(f, 20, SEEK_SET);
  fputc(0x55, f);
  fclose(f);
  ck_fails(TD_DATA_LOSS, "Please verify your warmup data is in TFRecord format.");
  write_records(2, "x", "");
  struct stat st;
  stat(wfile, &st);
  ck_assert_int_eq(truncate(wfile, st.st_size - 3), 0);
  ck_fails(TD_DATA_LOSS, "truncated record");

  /* Not a PredictionLog at all (valid framing). */
  f = fopen(wfile, "wb");
  const uint8_t junk[] = {0xff, 0xff, 0xff};
  frame(f, junk, sizeof junk);
  fclose(f);
  ck_fails(TD_INVALID_ARGUMENT, "Failed to parse warmup record 1");

  /* A classify_log record (field 2) without a request: replayed, and
   * refused for what it lacks. */
  f = fopen(wfile, "wb");
  const uint8_t classify[] = {0x12, 0x00};
  frame(f, classify, sizeof classify);
  fclose(f);
  ck_fails(TD_INVALID_ARGUMENT, "classify_log has no request");

  /* A session_run_log record (field 5): recognised, not replayed. */
  f = fopen(wfile, "wb");
  const uint8_t session[] = {0x2a, 0x00};
  frame(f, session, sizeof session);
  fclose(f);
  ck_fails(TD_UNIMPLEMENTED, "Unsupported log_type for warmup: session_run_log");
}
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_warmup");
  TCase *tc = tcase_create("warmup");
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, setup, teardown);
  tcase_add_test(tc, missing_file_is_fine);
  tcase_add_test(tc, replays_records);
  tcase_add_test(tc, errors_fail);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
