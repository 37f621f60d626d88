/* The text kernels one node at a time: values TensorFlow gives for edge
 * cases (empty strings, UTF-8 units, negative positions, number syntax),
 * and bad input failing with a message naming the node, never a crash.
 * Whole pipelines are checked against TensorFlow in tests/e2e/test_coverage.py. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_regex.h"
#include "td_opcase.h"

static eng_tensor strs(int n, const char *const *v) {
  int64_t d = n;
  eng_shape s = eng_shape_make(1, &d);
  size_t lens[16];
  for (int i = 0; i < n; i++) lens[i] = strlen(v[i]);
  eng_tensor t = {0};
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s, lens, NULL), TD_OK);
  for (int i = 0; i < n; i++) memcpy(eng_tensor_str_bytes(&t, i), v[i], lens[i]);
  return t;
}

static eng_tensor scalar_i64(int64_t v) {
  eng_shape s = eng_shape_scalar();
  eng_tensor t = {0};
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_INT64, &s, NULL), TD_OK);
  *(int64_t *)eng_tensor_data(&t) = v;
  return t;
}

typedef struct run {
  eng_graph *g;
  eng_tensor out[2];
  td_err err;
  td_code rc;
} run;

/* Runs op (attrs as td_opcase specs) on n inputs, which it takes. */
static run *run_op(const char *op, const char *attrs, int n, eng_tensor *in) {
  run *r = calloc(1, sizeof *r);
  r->g = eng_graph_create();
  int id = eng_graph_add_node(r->g, "n", op, NULL);
  eng_graph_node(r->g, id)->n_out = 1;
  td_opcase_attrs(r->g, id, attrs);
  td_err_clear(&r->err);
  const eng_op_def *def = eng_op_find(op);
  ck_assert_ptr_nonnull(def);
  eng_kctx ctx = {.node = eng_graph_node(r->g, id),
                  .node_id = id,
                  .n_in = n,
                  .in = in,
                  .n_out = 1,
                  .out = r->out,
                  .err = &r->err};
  r->rc = def->check ? def->check(ctx.node, &r->err) : TD_OK;
  if (!r->rc) r->rc = def->cpu(&ctx);
  for (int i = 0; i < n; i++) eng_tensor_release(&in[i]);
  return r;
}

static void done(run *r) {
  eng_tensor_release(&r->out[0]);
  eng_graph_destroy(r->g);
  free(r);
}

static void want_strs(run *r, int n, const char *const *v) {
  ck_assert_msg(r->rc == TD_OK, "%s", r->err.msg);
  ck_assert_int_eq(r->out[0].dtype, ENG_DT_STRING);
  ck_assert_int_eq(eng_tensor_numel(&r->out[0]), n);
  for (int i = 0; i < n; i++) {
    eng_str s = eng_tensor_strs(&r->out[0])[i];
    ck_assert_msg(s.len == strlen(v[i]) && !memcmp(s.data, v[i], s.len),
                  "element %d: '%.*s' != '%s'", i, (int)s.len, s.data, v[i]);
  }
}

static void want_fail(run *r, td_code code, const char *msg) {
  ck_assert_int_eq(r->rc, code);
  ck_assert_msg(strstr(r->err.msg, "node 'n'") && strstr(r->err.msg, msg), "%s", r->err.msg);
}

START_TEST(substr_positions_and_units) {
  const char *w[] = {"hello", "h\xc3\xa9llo", ""};
  eng_tensor in[3] = {strs(2, w), scalar_i64(-3), scalar_i64(10)};
  run *r = run_op("Substr", "", 3, in);
  want_strs(r, 2, (const char *[]){"llo", "llo"});
  done(r);
  eng_tensor in2[3] = {strs(2, w), scalar_i64(1), scalar_i64(2)};
  r = run_op("Substr", "unit=s:UTF8_CHAR", 3, in2);
  want_strs(r, 2, (const char *[]){"el", "\xc3\xa9l"});
  done(r);
  eng_tensor in3[3] = {strs(3, w), scalar_i64(1), scalar_i64(1)};
  r = run_op("Substr", "", 3, in3);
  want_fail(r, TD_INVALID_ARGUMENT, "out of range for string at index 2");
  done(r);
}
END_TEST

START_TEST(strings_to_numbers) {
  eng_tensor in[1] = {strs(3, (const char *[]){" 12 ", "-7", "+0"})};
  run *r = run_op("StringToNumber", "out_type=t:3", 1, in);
  ck_assert_int_eq(r->rc, TD_OK);
  const int32_t *v = eng_tensor_data(&r->out[0]);
  ck_assert(v[0] == 12 && v[1] == -7 && v[2] == 0);
  done(r);
  const char *bad[] = {"12abc", "", "1.5f", "3000000000"};
  for (int i = 0; i < 4; i++) {
    eng_tensor b[1] = {strs(1, &bad[i])};
    r = run_op("StringToNumber", i == 3 ? "out_type=t:3" : "out_type=t:1", 1, b);
    want_fail(r, TD_INVALID_ARGUMENT, "could not correctly convert string");
    done(r);
  }
}
END_TEST

START_TEST(join_needs_matching_shapes) {
  eng_tensor in[2] = {strs(2, (const char *[]){"a", "b"}),
                      strs(3, (const char *[]){"x", "y", "z"})};
  run *r = run_op("StringJoin", "separator=s:-", 2, in);
  want_fail(r, TD_INVALID_ARGUMENT, "Input shapes do not match");
  done(r);
}
END_TEST

START_TEST(unsupported_attrs_fail_the_check) {
  eng_tensor in[1] = {strs(1, (const char *[]){"A"})};
  run *r = run_op("StringLower", "encoding=s:UTF-8", 1, in);
  want_fail(r, TD_INVALID_ARGUMENT, "only utf-8 or ''");
  done(r);
  eng_tensor in2[1] = {strs(1, (const char *[]){"A"})};
  r = run_op("StringLength", "unit=s:WORD", 1, in2);
  want_fail(r, TD_INVALID_ARGUMENT, "unit 'WORD'");
  done(r);
  eng_tensor in3[1] = {strs(1, (const char *[]){"A"})};
  r = run_op("StringToHashBucketStrong", "num_buckets=i:4;key=li:1", 1, in3);
  want_fail(r, TD_INVALID_ARGUMENT, "Key must have 2 elements");
  done(r);
}
END_TEST

START_TEST(case_and_strip_are_ascii) {
  eng_tensor in[1] = {strs(2, (const char *[]){" \tAb\xc3\x89 \n", ""})};
  run *r = run_op("StringUpper", "", 1, in);
  want_strs(r, 2, (const char *[]){" \tAB\xc3\x89 \n", ""});
  done(r);
  eng_tensor in2[1] = {strs(2, (const char *[]){" \tAb\xc3\x89 \n", ""})};
  r = run_op("StringStrip", "", 1, in2);
  want_strs(r, 2, (const char *[]){"Ab\xc3\x89", ""});
  done(r);
}
END_TEST

static eng_tensor vec_i64(int n, const int64_t *v) {
  int64_t d = n;
  eng_shape s = eng_shape_make(1, &d);
  eng_tensor t = {0};
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_INT64, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&t), v, sizeof *v * (size_t)n);
  return t;
}

START_TEST(bad_patterns_fail_the_check) {
  if (!eng_regex_available()) {
    eng_tensor in[1] = {strs(1, (const char *[]){"a"})};
    run *r = run_op("StaticRegexFullMatch", "pattern=s:a+", 1, in);
    want_fail(r, TD_UNIMPLEMENTED, "need RE2");
    done(r);
    return;
  }
  eng_tensor in[1] = {strs(1, (const char *[]){"a"})};
  run *r = run_op("StaticRegexFullMatch", "pattern=s:(a", 1, in);
  want_fail(r, TD_INVALID_ARGUMENT, "invalid pattern");
  done(r);
  eng_tensor in2[1] = {strs(1, (const char *[]){"a"})};
  r = run_op("StaticRegexReplace", "pattern=s:(a);rewrite=s:\\2", 1, in2);
  want_fail(r, TD_INVALID_ARGUMENT, "invalid rewrite");
  done(r);
  eng_tensor in3[2] = {strs(2, (const char *[]){"aa", "ab"}), strs(1, (const char *[]){"a+"})};
  in3[1].shape = eng_shape_scalar();
  r = run_op("RegexFullMatch", "", 2, in3);
  ck_assert_int_eq(r->rc, TD_OK);
  ck_assert(((bool *)eng_tensor_data(&r->out[0]))[0] && !((bool *)eng_tensor_data(&r->out[0]))[1]);
  done(r);
}
END_TEST

START_TEST(bad_ragged_partitions_fail_cleanly) {
  eng_tensor in[4] = {vec_i64(2, (int64_t[]){-1, 2}), vec_i64(3, (int64_t[]){1, 2, 3}),
                      scalar_i64(0), vec_i64(3, (int64_t[]){0, 2, 5})};
  run *r = run_op("RaggedTensorToTensor", "row_partition_types=ls:ROW_SPLITS", 4, in);
  want_fail(r, TD_INVALID_ARGUMENT, "row_splits end at 5, but there are 3 values");
  done(r);
  eng_tensor in2[4] = {vec_i64(2, (int64_t[]){-1, 2}), vec_i64(3, (int64_t[]){1, 2, 3}),
                       scalar_i64(0), vec_i64(3, (int64_t[]){0, 2, 3})};
  r = run_op("RaggedTensorToTensor", "row_partition_types=ls:ROW_SPLITS", 4, in2);
  ck_assert_msg(r->rc == TD_OK, "%s", r->err.msg);
  const int64_t *v = eng_tensor_data(&r->out[0]);
  ck_assert(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == 0);
  done(r);
  eng_tensor in3[2] = {strs(2, (const char *[]){"a", "b"}), vec_i64(2, (int64_t[]){0, 3})};
  r = run_op("StringNGrams", "ngram_widths=li:2;separator=s: ", 2, in3);
  want_fail(r, TD_INVALID_ARGUMENT, "Invalid split value 3");
  done(r);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_kernels_text");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, substr_positions_and_units);
  tcase_add_test(tc, strings_to_numbers);
  tcase_add_test(tc, join_needs_matching_shapes);
  tcase_add_test(tc, unsupported_attrs_fail_the_check);
  tcase_add_test(tc, case_and_strip_are_ascii);
  tcase_add_test(tc, bad_patterns_fail_the_check);
  tcase_add_test(tc, bad_ragged_partitions_fail_cleanly);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
