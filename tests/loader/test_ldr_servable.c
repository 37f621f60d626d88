/* ldr_servable against real TensorFlow 2.19.1 exports: signatures, golden
 * outputs (compared exactly with TensorFlow's float32 results copied from
 * tests/fixtures/reference.json), load failures (missing checkpoint key,
 * truncated / missing / text-only saved_model.pb, wrong tags) and
 * reference counting. Corrupted copies live in a mkdtemp directory. */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_model.h"
#include "ldr_servable.h"
#include "td_testfs.h"
#include "td_testcheck.h"

#define EX_TF2 TD_EXAMPLES "/half_plus_two/00000123"
#define FX_TF1 TD_FIXTURES "/models/half_plus_two_tf1/00000123"
#define FX_B3 TD_FIXTURES "/models/half_plus_three_tf2/00000001"
#define FX_B4 TD_FIXTURES "/models/half_plus_three_tf2/00000002"
#define FX_MISSING TD_FIXTURES "/models/missing_var/00000001"

/* --- reference data (tests/fixtures/reference.json) ----------------------- */

static const float X16[16] = {
    0.1257302165031433f,  -0.13210485875606537f, 0.6404226422309875f,  0.10490011423826218f,
    -0.5356693863868713f, 0.3615950644016266f,   1.3040000200271606f,  0.9470809698104858f,
    -0.7037352323532104f, -1.2654215097427368f,  -0.6232744455337524f, 0.04132597893476486f,
    -2.32503080368042f,   -0.218791663646698f,   -1.2459110021591187f, -0.7322673797607422f};
static const float Y16_B2[16] = {
    2.0628650188446045f, 1.9339475631713867f, 2.320211410522461f,  2.052449941635132f,
    1.7321653366088867f, 2.180797576904297f,  2.6519999504089355f, 2.4735405445098877f,
    1.64813232421875f,   1.3672893047332764f, 1.6883628368377686f, 2.020663022994995f,
    0.83748459815979f,   1.8906041383743286f, 1.377044439315796f,  1.633866310119629f};
static const float Y16_B3[16] = {
    3.0628650188446045f, 2.9339475631713867f, 3.320211410522461f,  3.052449941635132f,
    2.7321653366088867f, 3.180797576904297f,  3.6519999504089355f, 3.4735405445098877f,
    2.64813232421875f,   2.3672893047332764f, 2.6883628368377686f, 3.020663022994995f,
    1.83748459815979f,   2.890604257583618f,  2.377044439315796f,  2.633866310119629f};
static const float Y16_B4[16] = {
    4.062865257263184f,  3.9339475631713867f, 4.320211410522461f,  4.052450180053711f,
    3.7321653366088867f, 4.180797576904297f,  4.6519999504089355f, 4.473540306091309f,
    3.64813232421875f,   3.3672893047332764f, 3.6883628368377686f, 4.020662784576416f,
    2.83748459815979f,   3.890604257583618f,  3.377044439315796f,  3.633866310119629f};
static const float X4[4] = {-3.25f, 1.0000000116860974e-07f, 123456.7890625f, 7.0f};

/* y = 0.5 x + b for the small cases ([1,2,5], [0], X4), as TensorFlow
 * computed them for b = 2, 3, 4. */
static void small_cases(float b, float y3[3], float y1[1], float y4[4]) {
  const float tf3[3][3] = {{2.5f, 3.0f, 4.5f}, {3.5f, 4.0f, 5.5f}, {4.5f, 5.0f, 6.5f}};
  const float tf1[3] = {2.0f, 3.0f, 4.0f};
  const float tf4[3][4] = {{0.375f, 2.0f, 61730.39453125f, 5.5f},
                           {1.375f, 3.0f, 61731.39453125f, 6.5f},
                           {2.375f, 4.0f, 61732.39453125f, 7.5f}};
  int k = (int)b - 2;
  ck_assert(k >= 0 && k < 3);
  memcpy(y3, tf3[k], sizeof tf3[0]);
  y1[0] = tf1[k];
  memcpy(y4, tf4[k], sizeof tf4[0]);
}

/* --- helpers ------------------------------------------------------------- */

static ldr_servable *load(const char *dir, int64_t version) {
  ldr_servable *sv = NULL;
  td_err err;
  td_err_clear(&err);
  td_code rc = ldr_servable_load(dir, version, "serve", &sv, &err);
  ck_assert_msg(rc == TD_OK, "loading %s: %s: %s", dir, td_code_name(rc), err.msg);
  ck_assert_ptr_nonnull(sv);
  return sv;
}

static eng_tensor ftensor(int rank, const int64_t *dims, const float *v) {
  eng_shape s = eng_shape_make(rank, dims);
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&t), v, eng_tensor_nbytes(&t));
  return t;
}

/* Runs the signature's plan on x shaped `rank`/`dims` and compares every
 * element exactly with want. */
static void run_case(const ldr_signature *sig, int rank, const int64_t *dims, const float *x,
                     const float *want) {
  ck_assert_ptr_nonnull(sig->plan);
  ck_assert_int_eq(sig->n_inputs, 1);
  ck_assert_int_eq(sig->n_outputs, 1);
  eng_tensor in = ftensor(rank, dims, x), out = {0};
  td_err err;
  td_err_clear(&err);
  td_code rc = eng_plan_run(sig->plan, &in, &out, &err);
  ck_assert_msg(rc == TD_OK, "run: %s: %s", td_code_name(rc), err.msg);
  ck_assert_int_eq(out.dtype, ENG_DT_FLOAT);
  eng_shape s = eng_shape_make(rank, dims);
  char a[64], b[64];
  ck_assert_msg(eng_shape_equal(&out.shape, &s), "output shape %s, want %s",
                eng_shape_str(&out.shape, a, sizeof a), eng_shape_str(&s, b, sizeof b));
  const float *y = eng_tensor_data(&out);
  for (int64_t i = 0; i < eng_tensor_numel(&out); i++)
    ck_assert_msg(y[i] == want[i], "element %lld: %.9g, want %.9g (x %.9g)", (long long)i, y[i],
                  want[i], x[i]);
  eng_tensor_release(&out);
  eng_tensor_release(&in);
}

/* All four reference cases as a vector [N]. */
static void golden_vector(const ldr_signature *sig, float b, const float *y16) {
  float y3[3], y1[1], y4[4];
  small_cases(b, y3, y1, y4);
  run_case(sig, 1, (int64_t[]){3}, (float[]){1, 2, 5}, y3);
  run_case(sig, 1, (int64_t[]){1}, (float[]){0}, y1);
  run_case(sig, 1, (int64_t[]){4}, X4, y4);
  run_case(sig, 1, (int64_t[]){16}, X16, y16);
}

static void check_info(const ldr_tensor_info *t, const char *alias, const char *name, eng_dtype dt,
                       int rank, const int64_t *dims) {
  ck_assert_str_eq(t->alias, alias);
  ck_assert_str_eq(t->name, name);
  ck_assert_int_eq(t->dtype, dt);
  ck_assert_int_eq(t->shape.rank, rank);
  for (int i = 0; i < rank; i++) ck_assert_int_eq(t->shape.dim[i], dims[i]);
}

/* --- loading the fixtures ----------------------------------------------------- */

START_TEST(tf2_example) {
  ldr_servable *sv = load(EX_TF2, 123);
  ck_assert_int_eq(ldr_servable_version(sv), 123);
  ck_assert_str_eq(ldr_servable_path(sv), EX_TF2);
  int n = ldr_servable_signature_count(sv);
  ck_assert_int_ge(n, 1);
  for (int i = 1; i < n; i++)
    ck_assert_msg(strcmp(ldr_servable_signature_at(sv, i - 1)->key,
                         ldr_servable_signature_at(sv, i)->key) < 0,
                  "signatures not sorted at %d", i);
  for (int i = 0; i < n; i++) {
    const ldr_signature *s = ldr_servable_signature_at(sv, i);
    ck_assert_ptr_eq(ldr_servable_signature(sv, s->key), s);
    ck_assert_msg(s->plan || s->plan_error, "signature %s: neither plan nor error", s->key);
  }
  const ldr_signature *sig = ldr_servable_signature(sv, "serving_default");
  ck_assert_ptr_nonnull(sig);
  ck_assert_str_eq(sig->method_name, "tensorflow/serving/predict");
  ck_assert_int_eq(sig->n_inputs, 1);
  ck_assert_int_eq(sig->n_outputs, 1);
  check_info(&sig->inputs[0], "x", "serving_default_x:0", ENG_DT_FLOAT, 1, (int64_t[]){-1});
  ck_assert_str_eq(sig->outputs[0].alias, "y");
  ck_assert_str_eq(sig->outputs[0].name, "StatefulPartitionedCall:0");
  ck_assert_int_eq(sig->outputs[0].dtype, ENG_DT_FLOAT);
  ck_assert_int_eq(ldr_signature_input(sig, "x"), 0);
  ck_assert_int_eq(ldr_signature_input(sig, "y"), -1);
  ck_assert_int_eq(ldr_signature_output(sig, "y"), 0);
  ck_assert_int_eq(ldr_signature_output(sig, "x"), -1);
  ck_assert_ptr_null(sig->plan_error);
  eng_shape decl = eng_plan_input_shape(sig->plan, 0);
  ck_assert_int_eq(decl.rank, 1);
  ck_assert_int_eq(decl.dim[0], -1);
  ck_assert_ptr_null(ldr_servable_signature(sv, "nope"));
  ck_assert_ptr_null(ldr_servable_signature(sv, ""));
  /* The init-op signature, when present, is not servable. */
  const ldr_signature *init = ldr_servable_signature(sv, "__saved_model_init_op");
  if (init) {
    ck_assert_ptr_null(init->plan);
    ck_assert_ptr_nonnull(init->plan_error);
  }

  golden_vector(sig, 2, Y16_B2);

  /* The placeholder is [-1]: a [N,1] feed is refused, naming the input. */
  eng_tensor in = ftensor(2, (int64_t[]){3, 1}, (float[]){1, 2, 5}), out = {0};
  td_err err;
  td_err_clear(&err);
  ck_err(eng_plan_run(sig->plan, &in, &out, &err), err, TD_INVALID_ARGUMENT, "serving_default_x");
  eng_tensor_release(&in);
  ldr_servable_unref(sv);
}
END_TEST

START_TEST(tf2_half_plus_three_versions) {
  ldr_servable *v1 = load(FX_B3, 1), *v2 = load(FX_B4, 2);
  ck_assert_int_eq(ldr_servable_version(v1), 1);
  ck_assert_int_eq(ldr_servable_version(v2), 2);
  const ldr_signature *s1 = ldr_servable_signature(v1, "serving_default");
  const ldr_signature *s2 = ldr_servable_signature(v2, "serving_default");
  ck_assert_ptr_nonnull(s1);
  ck_assert_ptr_nonnull(s2);
  ck_assert_int_eq(ldr_signature_input(s1, "x"), 0);
  ck_assert_int_eq(ldr_signature_output(s1, "y"), 0);
  golden_vector(s1, 3, Y16_B3);
  golden_vector(s2, 4, Y16_B4);
  /* Two versions loaded at once keep separate variables. */
  golden_vector(s1, 3, Y16_B3);
  ldr_servable_unref(v2);
  golden_vector(s1, 3, Y16_B3);
  ldr_servable_unref(v1);
}
END_TEST

START_TEST(tf1_model) {
  ldr_servable *sv = load(FX_TF1, 123);
  const ldr_signature *sig = ldr_servable_signature(sv, "serving_default");
  ck_assert_ptr_nonnull(sig);
  /* The export declares unknown_rank for both (TensorFlow fed [N,1]). */
  check_info(&sig->inputs[0], "x", "x:0", ENG_DT_FLOAT, -1, NULL);
  check_info(&sig->outputs[0], "y", "y:0", ENG_DT_FLOAT, -1, NULL);
  ck_assert_int_eq(eng_plan_input_shape(sig->plan, 0).rank, -1);
  /* As TensorFlow was fed ([N,1]) ... */
  float y3[3], y1[1], y4[4];
  small_cases(2, y3, y1, y4);
  run_case(sig, 2, (int64_t[]){3, 1}, (float[]){1, 2, 5}, y3);
  run_case(sig, 2, (int64_t[]){1, 1}, (float[]){0}, y1);
  run_case(sig, 2, (int64_t[]){4, 1}, X4, y4);
  run_case(sig, 2, (int64_t[]){16, 1}, X16, Y16_B2);
  /* ... and as a plain vector: x:0 is an Identity, not a Placeholder, so
   * the feed cuts the graph there and any shape goes through. */
  golden_vector(sig, 2, Y16_B2);
  ldr_servable_unref(sv);
}
END_TEST

START_TEST(missing_variable) {
  ldr_servable *sv = (ldr_servable *)0x1;
  td_err err;
  td_err_clear(&err);
  ck_err(ldr_servable_load(FX_MISSING, 1, "serve", &sv, &err), err, TD_NOT_FOUND,
         "Key b not found in checkpoint");
  ck_assert_ptr_eq(sv, (ldr_servable *)0x1); /* untouched on failure */
}
END_TEST

START_TEST(refcount) {
  ldr_servable *sv = load(EX_TF2, 123);
  ldr_servable_ref(sv);
  ldr_servable_ref(sv);
  ldr_servable_unref(sv);
  ldr_servable_unref(sv);
  /* The creator's reference remains: still usable (ASan flags a free). */
  const ldr_signature *sig = ldr_servable_signature(sv, "serving_default");
  golden_vector(sig, 2, Y16_B2);
  ldr_servable_unref(sv);
  ldr_servable_unref(NULL);
}
END_TEST

/* --- corrupted copies ------------------------------------------------------- */

static char tmp_root[256];

static void setup_tmp(void) {
  td_testfs_mkdtemp("td_servable", tmp_root, sizeof tmp_root);
}

static void teardown_tmp(void) { td_testfs_remove_tree(tmp_root); }

/* A fresh copy of `src` under the temp root; returns its path. */
static const char *copy_model(const char *src, const char *name) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", tmp_root, name);
  td_testfs_copy_tree(src, path);
  return path;
}

START_TEST(copy_loads) {
  /* The copy itself is good: the failures below come from the damage. */
  const char *dir = copy_model(EX_TF2, "good");
  ldr_servable *sv = load(dir, 7);
  golden_vector(ldr_servable_signature(sv, "serving_default"), 2, Y16_B2);
  ldr_servable_unref(sv);
}
END_TEST

START_TEST(truncated_pb) {
  const char *srcs[] = {EX_TF2, FX_TF1};
  for (int k = 0; k < 2; k++) {
    char name[16];
    snprintf(name, sizeof name, "trunc%d", k);
    char dir[512], pb[600];
    snprintf(dir, sizeof dir, "%s", copy_model(srcs[k], name));
    snprintf(pb, sizeof pb, "%s/saved_model.pb", dir);
    struct stat st;
    ck_assert_int_eq(stat(pb, &st), 0);
    ck_assert_int_eq(truncate(pb, st.st_size / 2), 0);
    ldr_servable *sv = NULL;
    td_err err;
    td_err_clear(&err);
    ck_err(ldr_servable_load(dir, 1, "serve", &sv, &err), err, TD_DATA_LOSS, "saved_model.pb");
    ck_assert_ptr_null(sv);
  }
}
END_TEST

START_TEST(empty_pb) {
  char dir[512], pb[600];
  snprintf(dir, sizeof dir, "%s", copy_model(EX_TF2, "empty"));
  snprintf(pb, sizeof pb, "%s/saved_model.pb", dir);
  ck_assert_int_eq(truncate(pb, 0), 0);
  ldr_servable *sv = NULL;
  td_err err;
  td_err_clear(&err);
  td_code rc = ldr_servable_load(dir, 1, "serve", &sv, &err);
  ck_assert_int_ne(rc, TD_OK);
  ck_assert_msg(strstr(err.msg, "saved_model.pb"), "message: %s", err.msg);
  ck_assert_ptr_null(sv);
}
END_TEST

START_TEST(missing_pb) {
  char dir[512], pb[600];
  snprintf(dir, sizeof dir, "%s", copy_model(EX_TF2, "nopb"));
  snprintf(pb, sizeof pb, "%s/saved_model.pb", dir);
  ck_assert_int_eq(unlink(pb), 0);
  ldr_servable *sv = NULL;
  td_err err;
  td_err_clear(&err);
  ck_err(ldr_servable_load(dir, 1, "serve", &sv, &err), err, TD_NOT_FOUND, "saved_model.pb");
  ck_assert_ptr_null(sv);

  /* A directory that does not exist at all. */
  td_err_clear(&err);
  ck_err(ldr_servable_load("/nonexistent/tensord/1", 1, "serve", &sv, &err), err, TD_NOT_FOUND,
         "saved_model.pb");
}
END_TEST

START_TEST(pbtxt_only) {
  char dir[512], pb[600], txt[600];
  snprintf(dir, sizeof dir, "%s", copy_model(EX_TF2, "txt"));
  snprintf(pb, sizeof pb, "%s/saved_model.pb", dir);
  snprintf(txt, sizeof txt, "%s/saved_model.pbtxt", dir);
  ck_assert_int_eq(rename(pb, txt), 0);
  ldr_servable *sv = NULL;
  td_err err;
  td_err_clear(&err);
  /* Binary bytes under the text name: a clear parse error, no crash. */
  ck_err(ldr_servable_load(dir, 1, "serve", &sv, &err), err, TD_DATA_LOSS, "saved_model.pbtxt");
  ck_assert_ptr_null(sv);
}
END_TEST

START_TEST(wrong_tags) {
  const char *bad[] = {"serve,gpu", "gpu", "", "train"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    ldr_servable *sv = NULL;
    td_err err;
    td_err_clear(&err);
    td_code rc = ldr_servable_load(EX_TF2, 1, bad[i], &sv, &err);
    ck_assert_msg(rc == TD_NOT_FOUND, "tags '%s': %s (%s)", bad[i], td_code_name(rc), err.msg);
    ck_assert_ptr_null(sv);
  }
  /* A tag too long for the parser's buffer must not be dropped silently
   * (which would leave "serve" alone, matching the MetaGraph). */
  char longtags[200];
  snprintf(longtags, sizeof longtags, "serve,%0100d", 7);
  ldr_servable *lsv = NULL;
  td_err lerr;
  td_err_clear(&lerr);
  td_code lrc = ldr_servable_load(EX_TF2, 1, longtags, &lsv, &lerr);
  ck_assert_msg(lrc == TD_NOT_FOUND, "long tag: %s (%s)", td_code_name(lrc), lerr.msg);
  ck_assert_ptr_null(lsv);
  /* Likewise a 33rd distinct tag. */
  char many[400] = "serve";
  for (int i = 0; i < 31; i++) sprintf(many + strlen(many), ",t%d", i);
  strcat(many, ",gpu");
  td_err_clear(&lerr);
  lrc = ldr_servable_load(EX_TF2, 1, many, &lsv, &lerr);
  ck_assert_msg(lrc == TD_NOT_FOUND, "33 tags: %s (%s)", td_code_name(lrc), lerr.msg);
  ck_assert_ptr_null(lsv);
  /* A trailing comma and repeats do not matter (tags form a set). */
  ldr_servable *sv = NULL;
  td_err err;
  ck_assert_int_eq(ldr_servable_load(EX_TF2, 1, "serve,", &sv, &err), TD_OK);
  ldr_servable_unref(sv);
  char repeated[400] = "serve";
  for (int i = 0; i < 40; i++) strcat(repeated, ",serve");
  td_err_clear(&err);
  td_code rc = ldr_servable_load(EX_TF2, 1, repeated, &sv, &err);
  ck_assert_msg(rc == TD_OK, "repeated tags: %s (%s)", td_code_name(rc), err.msg);
  ldr_servable_unref(sv);
}
END_TEST

START_TEST(no_variables_dir) {
  /* TF skips the restore when variables/variables.index is missing; the
   * load succeeds, and running reads an unset variable. */
  char dir[512], vars[600];
  snprintf(dir, sizeof dir, "%s", copy_model(EX_TF2, "novars"));
  snprintf(vars, sizeof vars, "%s/variables", dir);
  td_testfs_remove_tree(vars);
  ldr_servable *sv = load(dir, 1);
  const ldr_signature *sig = ldr_servable_signature(sv, "serving_default");
  ck_assert_ptr_nonnull(sig->plan);
  eng_tensor in = ftensor(1, (int64_t[]){1}, (float[]){1}), out = {0};
  td_err err;
  td_err_clear(&err);
  td_code rc = eng_plan_run(sig->plan, &in, &out, &err);
  ck_assert_msg(rc == TD_FAILED_PRECONDITION, "%s: %s", td_code_name(rc), err.msg);
  ck_assert_ptr_null(out.buf);
  eng_tensor_release(&in);
  ldr_servable_unref(sv);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("ldr_servable");
  TCase *tc = tcase_create("fixtures");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, tf2_example);
  tcase_add_test(tc, tf2_half_plus_three_versions);
  tcase_add_test(tc, tf1_model);
  tcase_add_test(tc, missing_variable);
  tcase_add_test(tc, refcount);
  tcase_add_test(tc, wrong_tags);
  suite_add_tcase(s, tc);

  tc = tcase_create("damaged");
  tcase_set_timeout(tc, 60);
  tcase_add_checked_fixture(tc, setup_tmp, teardown_tmp);
  tcase_add_test(tc, copy_loads);
  tcase_add_test(tc, truncated_pb);
  tcase_add_test(tc, empty_pb);
  tcase_add_test(tc, missing_pb);
  tcase_add_test(tc, pbtxt_only);
  tcase_add_test(tc, no_variables_dir);
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
