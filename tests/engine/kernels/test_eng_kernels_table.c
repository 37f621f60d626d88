/* Lookup tables (eng_kernels_table.c) through a model: HashTableV2 names a
 * slot, an init plan imports keys and values, serving plans find keys
 * (hits, misses with the default, strings both ways) and read the size;
 * a find before the import and a conflicting import fail cleanly. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "eng_model.h"
#include "td_opcase.h"

static eng_tensor strings(int n, const char *const *v) {
  int64_t d = n;
  eng_shape s = eng_shape_make(1, &d);
  size_t lens[8];
  for (int i = 0; i < n; i++) lens[i] = strlen(v[i]);
  eng_tensor t = {0};
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s, lens, NULL), TD_OK);
  for (int i = 0; i < n; i++) memcpy(eng_tensor_str_bytes(&t, i), v[i], lens[i]);
  return t;
}

static eng_tensor ints(int rank, int n, const int64_t *v) {
  int64_t d = n;
  eng_shape s = rank ? eng_shape_make(1, &d) : eng_shape_scalar();
  eng_tensor t = {0};
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_INT64, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&t), v, sizeof *v * (size_t)n);
  return t;
}

static int add(eng_graph *g, const char *name, const char *op, int n_out, int n_in, const int *in) {
  int id = eng_graph_add_node(g, name, op, NULL);
  ck_assert_int_ge(id, 0);
  eng_graph_node(g, id)->n_out = n_out;
  for (int i = 0; i < n_in; i++) eng_graph_add_input(g, id, (eng_edge){in[i], 0}, NULL);
  return id;
}

static int cnst(eng_graph *g, const char *name, eng_tensor t) {
  int id = add(g, name, "Const", 1, 0, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  a->tensor = t;
  return id;
}

/* words -> ids (default -1), ids -> words (default "?"). */
static eng_model *build(bool conflicting) {
  eng_graph *g = eng_graph_create();
  int t1 = add(g, "words_table", "HashTableV2", 1, 0, NULL);
  int t2 = add(g, "ids_table", "HashTableV2", 1, 0, NULL);
  eng_graph_add_attr(g, t2, "key_dtype")->kind = ENG_ATTR_TYPE;
  ((eng_attr *)eng_node_attr(eng_graph_node(g, t2), "key_dtype"))->type = ENG_DT_INT64;
  const char *words[] = {"cat", "dog", "", conflicting ? "cat" : "bird"};
  int k1 = cnst(g, "k1", strings(4, words));
  int v1 = cnst(g, "v1", ints(1, 4, (int64_t[]){10, 11, 12, 13}));
  int k2 = cnst(g, "k2", ints(1, 3, (int64_t[]){7, -2, 42}));
  int v2 = cnst(g, "v2", strings(3, (const char *[]){"seven", "minus two", "forty-two"}));
  add(g, "init1", "LookupTableImportV2", 0, 3, (int[]){t1, k1, v1});
  add(g, "init2", "LookupTableImportV2", 0, 3, (int[]){t2, k2, v2});
  int q1 = add(g, "q1", "Placeholder", 1, 0, NULL);
  int q2 = add(g, "q2", "Placeholder", 1, 0, NULL);
  int d1 = cnst(g, "d1", ints(0, 1, (int64_t[]){-1}));
  int d2 = cnst(g, "d2", strings(1, (const char *[]){"?"}));
  add(g, "find1", "LookupTableFindV2", 1, 3, (int[]){t1, q1, d1});
  add(g, "find2", "LookupTableFindV2", 1, 3, (int[]){t2, q2, d2});
  add(g, "size1", "LookupTableSizeV2", 1, 1, (int[]){t1});
  eng_model *m = NULL;
  ck_assert_int_eq(eng_model_create(g, NULL, NULL, &m, NULL), TD_OK);
  return m;
}

static td_code run_init(eng_model *m, td_err *err) {
  const char *targets[] = {"init1", "init2"};
  return eng_model_run(m, 0, NULL, 0, NULL, NULL, 2, targets, err);
}

START_TEST(find_hits_misses_and_strings) {
  eng_model *m = build(false);
  td_err err;
  td_err_clear(&err);
  ck_assert_msg(run_init(m, &err) == TD_OK, "%s", err.msg);
  eng_feed feeds[2] = {{"q1", strings(3, (const char *[]){"dog", "emu", ""})},
                       {"q2", ints(1, 2, (int64_t[]){42, 8})}};
  const char *fetch[] = {"find1", "find2", "size1"};
  eng_tensor out[3] = {0};
  ck_assert_msg(eng_model_run(m, 2, feeds, 3, fetch, out, 0, NULL, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(out[0].dtype, ENG_DT_INT64);
  const int64_t *ids = eng_tensor_data(&out[0]);
  ck_assert(ids[0] == 11 && ids[1] == -1 && ids[2] == 12);
  ck_assert_int_eq(out[1].dtype, ENG_DT_STRING);
  eng_str a = eng_tensor_strs(&out[1])[0], b = eng_tensor_strs(&out[1])[1];
  ck_assert(a.len == 9 && !memcmp(a.data, "forty-two", 9) && b.len == 1 && b.data[0] == '?');
  ck_assert_int_eq(*(const int64_t *)eng_tensor_data(&out[2]), 4);
  for (int i = 0; i < 3; i++) eng_tensor_release(&out[i]);
  for (int i = 0; i < 2; i++) eng_tensor_release(&feeds[i].tensor);
  eng_model_destroy(m);
}
END_TEST

START_TEST(uninitialised_and_conflicting_tables_fail_cleanly) {
  eng_model *m = build(false);
  td_err err;
  td_err_clear(&err);
  eng_feed feed = {"q1", strings(1, (const char *[]){"dog"})};
  const char *fetch[] = {"find1"};
  eng_tensor out[1] = {0};
  ck_assert_int_eq(eng_model_run(m, 1, &feed, 1, fetch, out, 0, NULL, &err),
                   TD_FAILED_PRECONDITION);
  ck_assert_msg(strstr(err.msg, "find1") && strstr(err.msg, "Table not initialized"), "%s",
                err.msg);
  eng_tensor_release(&feed.tensor);
  eng_model_destroy(m);

  m = build(true);
  td_err_clear(&err);
  ck_assert_int_eq(run_init(m, &err), TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, "init1") && strstr(err.msg, "different value for same key"), "%s",
                err.msg);
  eng_model_destroy(m);
}
END_TEST

/* A mutable table filled by two inserts (the second overwriting "cat"),
 * exported; a table read from a text file through the io callbacks
 * (whole line -> line number, a "\r\n" line, a cut vocab_size), and a
 * file with too few columns. */
static const char vocab[] = "cat\tfeline\ndog\r\nemu\tbird\n";

static td_code read_vocab(void *ctx, const char *path, char **data, size_t *len, td_err *err) {
  (void)ctx;
  if (strcmp(path, "assets/vocab.txt")) return td_err_set(err, TD_NOT_FOUND, "no %s", path);
  *data = malloc(sizeof vocab);
  memcpy(*data, vocab, sizeof vocab);
  *len = sizeof vocab - 1;
  return TD_OK;
}

static eng_model *build_mutable(const char *value_index, int64_t vocab_size) {
  eng_graph *g = eng_graph_create();
  int t = add(g, "mutable", "MutableHashTableV2", 1, 0, NULL);
  int k1 = cnst(g, "k1", strings(2, (const char *[]){"cat", "dog"}));
  int v1 = cnst(g, "v1", ints(1, 2, (int64_t[]){1, 2}));
  int k2 = cnst(g, "k2", strings(2, (const char *[]){"emu", "cat"}));
  int v2 = cnst(g, "v2", ints(1, 2, (int64_t[]){3, 4}));
  int i1 = add(g, "insert1", "LookupTableInsertV2", 0, 3, (int[]){t, k1, v1});
  int i2 = add(g, "insert2", "LookupTableInsertV2", 0, 3, (int[]){t, k2, v2});
  eng_graph_add_ctrl(g, i2, i1, NULL);
  add(g, "export", "LookupTableExportV2", 2, 1, (int[]){t});
  int f = add(g, "file_table", "HashTableV2", 1, 0, NULL);
  int fn = cnst(g, "fn", strings(1, (const char *[]){"assets/vocab.txt"}));
  fn = add(g, "fn_id", "Identity", 1, 1, (int[]){fn});
  int init = add(g, "from_file", "InitializeTableFromTextFileV2", 0, 2, (int[]){f, fn});
  eng_attr *a = eng_graph_add_attr(g, init, "key_index");
  a->kind = ENG_ATTR_I;
  a->i = -2;
  a = eng_graph_add_attr(g, init, "value_index");
  a->kind = ENG_ATTR_I;
  a->i = strcmp(value_index, "line") ? 1 : -1;
  a = eng_graph_add_attr(g, init, "vocab_size");
  a->kind = ENG_ATTR_I;
  a->i = vocab_size;
  int q = add(g, "q", "Placeholder", 1, 0, NULL);
  int d = cnst(g, "d", ints(0, 1, (int64_t[]){-1}));
  add(g, "find", "LookupTableFindV2", 1, 3, (int[]){f, q, d});
  eng_io io = {.read_asset = read_vocab};
  eng_model *m = NULL;
  ck_assert_int_eq(eng_model_create(g, NULL, &io, &m, NULL), TD_OK);
  return m;
}

START_TEST(mutable_tables_insert_export_and_text_files) {
  eng_model *m = build_mutable("line", 2);
  td_err err;
  td_err_clear(&err);
  const char *targets[] = {"insert2", "from_file"};
  ck_assert_msg(eng_model_run(m, 0, NULL, 0, NULL, NULL, 2, targets, &err) == TD_OK, "%s", err.msg);
  eng_feed feed = {"q", strings(3, (const char *[]){"dog", "cat\tfeline", "emu\tbird"})};
  const char *fetch[] = {"export:0", "export:1", "find"};
  eng_tensor out[3] = {0};
  ck_assert_msg(eng_model_run(m, 1, &feed, 3, fetch, out, 0, NULL, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(eng_tensor_numel(&out[0]), 3);
  const char *want_keys[] = {"dog", "emu", "cat"};
  const int64_t want_vals[] = {2, 3, 4}, *vals = eng_tensor_data(&out[1]);
  for (int i = 0; i < 3; i++) {
    eng_str k = eng_tensor_strs(&out[0])[i];
    ck_assert(k.len == strlen(want_keys[i]) && !memcmp(k.data, want_keys[i], k.len));
    ck_assert_int_eq(vals[i], want_vals[i]);
  }
  const int64_t *ids = eng_tensor_data(&out[2]);
  ck_assert(ids[0] == 1 && ids[1] == 0 && ids[2] == -1); /* vocab_size 2 */
  for (int i = 0; i < 3; i++) eng_tensor_release(&out[i]);
  eng_tensor_release(&feed.tensor);
  eng_model_destroy(m);

  m = build_mutable("column", -1); /* "dog" has no column 1 */
  td_err_clear(&err);
  const char *file[] = {"from_file"};
  ck_assert_int_eq(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, file, &err), TD_INVALID_ARGUMENT);
  ck_assert_msg(
      strstr(err.msg, "from_file") && strstr(err.msg, "Invalid number of columns in line 1"), "%s",
      err.msg);
  eng_model_detach_io(m);
  td_err_clear(&err);
  ck_assert_int_eq(eng_model_run(m, 0, NULL, 0, NULL, NULL, 1, file, &err), TD_FAILED_PRECONDITION);
  ck_assert_msg(strstr(err.msg, "from_file") && strstr(err.msg, "no asset reader"), "%s", err.msg);
  eng_model_destroy(m);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("eng_kernels_table");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, find_hits_misses_and_strings);
  tcase_add_test(tc, uninitialised_and_conflicting_tables_fail_cleanly);
  tcase_add_test(tc, mutable_tables_insert_export_and_text_files);
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
