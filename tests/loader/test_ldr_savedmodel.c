/* ldr_savedmodel: binary and text SavedModel files. The text fixture is
 * TensorFlow's own rendering of the binary one (make_fixtures.py --pbtxt),
 * so both must give the same MetaGraph. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_savedmodel.h"
#include "td_testcheck.h"
#include "td_testfs.h"

#define TF1 TD_FIXTURES "/models/half_plus_two_tf1/00000123"
#define TF1_TXT TD_FIXTURES "/pbtxt/half_plus_two_tf1.pbtxt"

static void path_in(char *buf, size_t n, const char *dir, const char *name) {
  snprintf(buf, n, "%s/%s", dir, name);
}

START_TEST(text_equals_binary) {
  char dir[256], p[512];
  td_testfs_mkdtemp("smfile", dir, sizeof dir);
  path_in(p, sizeof p, dir, "saved_model.pbtxt");
  td_testfs_copy_file(TF1_TXT, p);
  td_err err;
  Tensorflow__SavedModel *bin = NULL, *txt = NULL;
  size_t nb = 0, nt = 0;
  bool is_text = true;
  ck_ok(ldr_savedmodel_read(TF1, &bin, &nb, &is_text, &err), err);
  ck_assert(!is_text);
  ck_ok(ldr_savedmodel_read(dir, &txt, &nt, &is_text, &err), err);
  ck_assert(is_text);
  ck_assert_uint_gt(nt, nb);
  /* The same message, up to the order of map entries (text format sorts
   * them by key): same encoded size, same graph, same signatures. */
  ck_assert_uint_eq(protobuf_c_message_get_packed_size(&bin->base),
                    protobuf_c_message_get_packed_size(&txt->base));
  ck_assert_uint_eq(bin->n_meta_graphs, txt->n_meta_graphs);
  const Tensorflow__MetaGraphDef *mb = bin->meta_graphs[0], *mt = txt->meta_graphs[0];
  ck_assert_uint_eq(mb->graph_def->n_node, mt->graph_def->n_node);
  for (size_t i = 0; i < mb->graph_def->n_node; i++) {
    ck_assert_str_eq(mb->graph_def->node[i]->name, mt->graph_def->node[i]->name);
    ck_assert_str_eq(mb->graph_def->node[i]->op, mt->graph_def->node[i]->op);
    ck_assert_uint_eq(mb->graph_def->node[i]->n_attr, mt->graph_def->node[i]->n_attr);
  }
  ck_assert_uint_eq(mb->n_signature_def, mt->n_signature_def);
  for (size_t i = 0; i < mb->n_signature_def; i++) {
    bool found = false;
    for (size_t j = 0; j < mt->n_signature_def; j++)
      found |= !strcmp(mb->signature_def[i]->key, mt->signature_def[j]->key);
    ck_assert_msg(found, "signature %s missing from the text form", mb->signature_def[i]->key);
  }
  ldr_savedmodel_free(bin);
  ldr_savedmodel_free(txt);
  /* With both files present the binary one wins. */
  path_in(p, sizeof p, dir, "saved_model.pb");
  td_testfs_copy_file(TF1 "/saved_model.pb", p);
  ck_ok(ldr_savedmodel_read(dir, &bin, NULL, &is_text, &err), err);
  ck_assert(!is_text);
  ldr_savedmodel_free(bin);
  td_testfs_remove_tree(dir);
}
END_TEST

START_TEST(missing_truncated_empty) {
  char dir[256], p[512];
  td_testfs_mkdtemp("smfile", dir, sizeof dir);
  td_err err;
  Tensorflow__SavedModel *sm = NULL;
  ck_err(ldr_savedmodel_read(dir, &sm, NULL, NULL, &err), err, TD_NOT_FOUND, "saved_model.pbtxt");
  ck_assert_ptr_null(sm);
  /* Half a text file: DATA_LOSS with the parser's position. */
  FILE *in = fopen(TF1_TXT, "rb");
  ck_assert_ptr_nonnull(in);
  char buf[4096];
  size_t n = fread(buf, 1, sizeof buf, in);
  fclose(in);
  path_in(p, sizeof p, dir, "saved_model.pbtxt");
  FILE *out = fopen(p, "wb");
  fwrite(buf, 1, n / 2, out);
  fclose(out);
  ck_err(ldr_savedmodel_read(dir, &sm, NULL, NULL, &err), err, TD_DATA_LOSS, "line ");
  ck_assert_ptr_null(sm);
  /* Well-formed text with no MetaGraph. */
  out = fopen(p, "wb");
  fputs("saved_model_schema_version: 1\n", out);
  fclose(out);
  ck_err(ldr_savedmodel_read(dir, &sm, NULL, NULL, &err), err, TD_INVALID_ARGUMENT, "no MetaGraph");
  /* A binary file cut short. */
  path_in(p, sizeof p, dir, "saved_model.pb");
  out = fopen(p, "wb");
  fputs("\x0a\x80\x80", out);
  fclose(out);
  ck_err(ldr_savedmodel_read(dir, &sm, NULL, NULL, &err), err, TD_DATA_LOSS, "saved_model.pb");
  td_testfs_remove_tree(dir);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_savedmodel");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, text_equals_binary);
  tcase_add_test(tc, missing_truncated_empty);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
