/* eng_layout: NCHW image ops rewritten into Transposes around the NHWC op
 * (layout lists permuted, the node's name kept by the result), the
 * multi-output FusedBatchNorm through an IdentityN, and the nodes it must
 * leave alone. The rewritten models are checked against TensorFlow in
 * tests/e2e/test_coverage_ops.py (nchw). */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "eng_layout.h"

static int add(eng_graph *g, const char *name, const char *op, int n_out) {
  int id = eng_graph_add_node(g, name, op, NULL);
  ck_assert_int_ge(id, 0);
  eng_graph_node(g, id)->n_out = n_out;
  return id;
}

static void attr_s(eng_graph *g, int id, const char *name, const char *v) {
  eng_attr *a = eng_graph_add_attr(g, id, name);
  a->kind = ENG_ATTR_S;
  a->s.data = strdup(v);
  a->s.len = strlen(v);
}

static void attr_li(eng_graph *g, int id, const char *name, int n, const int64_t *v) {
  eng_attr *a = eng_graph_add_attr(g, id, name);
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_I;
  a->li = malloc(sizeof *a->li * (size_t)n);
  memcpy(a->li, v, sizeof *v * (size_t)n);
  a->n = n;
}

static void input(eng_graph *g, int id, int from, int index) {
  ck_assert_int_eq(eng_graph_add_input(g, id, (eng_edge){from, index}, NULL), TD_OK);
}

static const eng_node *named(eng_graph *g, const char *name) {
  int id = eng_graph_find(g, name, strlen(name));
  ck_assert_msg(id >= 0, "no node %s", name);
  return eng_graph_node(g, id);
}

static int id_of(eng_graph *g, const char *name) { return eng_graph_find(g, name, strlen(name)); }

START_TEST(nchw_ops_become_transposes_around_nhwc) {
  eng_graph *g = eng_graph_create();
  int x = add(g, "x", "Placeholder", 1), w = add(g, "w", "Const", 1);
  int c = add(g, "c", "Conv2D", 1);
  input(g, c, x, 0);
  input(g, c, w, 0);
  attr_s(g, c, "data_format", "NCHW");
  attr_s(g, c, "padding", "SAME");
  attr_li(g, c, "strides", 4, (int64_t[]){1, 1, 2, 3});
  attr_li(g, c, "dilations", 4, (int64_t[]){1, 1, 1, 2});
  int p = add(g, "p", "MaxPool", 1); /* NHWC: untouched */
  input(g, p, c, 0);
  attr_li(g, p, "ksize", 4, (int64_t[]){1, 2, 2, 1});
  int e = add(g, "e", "Conv2D", 1); /* EXPLICIT padding: untouched */
  input(g, e, x, 0);
  input(g, e, w, 0);
  attr_s(g, e, "data_format", "NCHW");
  attr_s(g, e, "padding", "EXPLICIT");
  int bn = add(g, "bn", "FusedBatchNormV3", 6);
  input(g, bn, c, 0);
  for (int i = 0; i < 4; i++) input(g, bn, w, 0);
  attr_s(g, bn, "data_format", "NCHW");
  td_err err;
  td_err_clear(&err);
  ck_assert_int_eq(eng_layout_lower(g, &err), TD_OK);

  const eng_node *n = named(g, "c");
  ck_assert_str_eq(n->op, "Transpose");
  ck_assert_int_eq(n->n_in, 2);
  ck_assert_int_eq(n->in[0].node, id_of(g, "c/_td_nhwc"));
  ck_assert_int_eq(n->in[1].node, id_of(g, "c/_td_nhwc/perm_out"));
  const int32_t *perm =
      eng_tensor_data(&eng_node_attr(named(g, "c/_td_nhwc/perm_out"), "value")->tensor);
  ck_assert(perm[0] == 0 && perm[1] == 3 && perm[2] == 1 && perm[3] == 2);
  n = named(g, "c/_td_nhwc");
  ck_assert_str_eq(n->op, "Conv2D");
  ck_assert_str_eq(eng_attr_str(n, "data_format", ""), "NHWC");
  ck_assert_str_eq(eng_attr_str(n, "padding", ""), "SAME");
  int64_t st[4], dl[4];
  ck_assert_int_eq(eng_attr_ints(n, "strides", st, 4), 4);
  ck_assert(st[0] == 1 && st[1] == 2 && st[2] == 3 && st[3] == 1);
  ck_assert_int_eq(eng_attr_ints(n, "dilations", dl, 4), 4);
  ck_assert(dl[1] == 1 && dl[2] == 2 && dl[3] == 1);
  ck_assert_int_eq(n->in[0].node, id_of(g, "c/_td_nhwc/in"));
  ck_assert_int_eq(n->in[1].node, w);
  n = named(g, "c/_td_nhwc/in");
  ck_assert_str_eq(n->op, "Transpose");
  ck_assert_int_eq(n->in[0].node, x);
  perm = eng_tensor_data(&eng_node_attr(named(g, "c/_td_nhwc/perm_in"), "value")->tensor);
  ck_assert(perm[0] == 0 && perm[1] == 2 && perm[2] == 3 && perm[3] == 1);

  ck_assert_str_eq(named(g, "p")->op, "MaxPool");
  ck_assert_int_eq(named(g, "p")->in[0].node, c); /* still reads "c" */
  ck_assert_str_eq(named(g, "e")->op, "Conv2D");
  ck_assert_int_eq(id_of(g, "e/_td_nhwc"), -1);

  n = named(g, "bn");
  ck_assert_str_eq(n->op, "IdentityN");
  ck_assert_int_eq(n->n_in, 6);
  ck_assert_int_eq(n->in[0].node, id_of(g, "bn/_td_nhwc/out"));
  for (int i = 1; i < 6; i++) {
    ck_assert_int_eq(n->in[i].node, id_of(g, "bn/_td_nhwc"));
    ck_assert_int_eq(n->in[i].index, i);
  }
  ck_assert_int_eq(named(g, "bn/_td_nhwc")->in[0].node, id_of(g, "bn/_td_nhwc/in"));
  ck_assert_int_eq(named(g, "bn/_td_nhwc/in")->in[0].node, c);
  eng_graph_destroy(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_layout");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, nchw_ops_become_transposes_around_nhwc);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
