/* TensorList kernels, one at a time (While and If run the Keras RNN and
 * tf.cond / tf.while_loop exports in tests/e2e/test_control.py). */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "eng_graph.h"
#include "eng_op.h"
#include "td_testcheck.h"

static eng_tensor ints(int rank, const int64_t *dims, const int32_t *v) {
  eng_tensor t;
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_INT32, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&t), v, sizeof(int32_t) * (size_t)eng_tensor_numel(&t));
  return t;
}

static eng_tensor floats(int rank, const int64_t *dims, const float *v) {
  eng_tensor t;
  eng_shape s = eng_shape_make(rank, dims);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&t), v, sizeof(float) * (size_t)eng_tensor_numel(&t));
  return t;
}

/* Runs op on inputs; out[0] gets the result. */
static td_code run(eng_graph *g, const char *op, int n_in, const eng_tensor *in, eng_tensor *out,
                   td_err *err) {
  char name[32];
  snprintf(name, sizeof name, "n%d", eng_graph_node_count(g));
  int id = eng_graph_add_node(g, name, op, NULL);
  eng_graph_node(g, id)->n_out = 1;
  eng_attr *a = eng_graph_add_attr(g, id, "element_dtype");
  a->kind = ENG_ATTR_TYPE;
  a->type = ENG_DT_FLOAT;
  eng_kctx c = {.node = eng_graph_node(g, id), .node_id = id, .n_in = n_in, .in = in, .n_out = 1,
                .out = out, .err = err};
  td_err_clear(err);
  return eng_op_find(op)->cpu(&c);
}

START_TEST(lists) {
  eng_graph *g = eng_graph_create();
  td_err err;
  const int64_t two[] = {2}, none[] = {0};
  eng_tensor shape = ints(1, two, (const int32_t[]){-1, 3}), n = ints(0, none, (const int32_t[]){3});
  eng_tensor list = {0}, item = {0}, got = {0}, stacked = {0}, list2 = {0};
  /* Reserve three elements of shape [?, 3]. */
  eng_tensor rin[2] = {shape, n};
  ck_ok(run(g, "TensorListReserve", 2, rin, &list, &err), err);
  ck_assert_int_eq(list.dtype, ENG_DT_VARIANT);
  /* An unset element whose shape is not fully known cannot be read. */
  eng_tensor idx1 = ints(0, none, (const int32_t[]){1}), idx5 = ints(0, none, (const int32_t[]){5});
  eng_tensor gin[3] = {list, idx1, shape};
  ck_err(run(g, "TensorListGetItem", 3, gin, &got, &err), err, TD_INVALID_ARGUMENT, "never set");
  gin[1] = idx5;
  ck_err(run(g, "TensorListGetItem", 3, gin, &got, &err), err, TD_INVALID_ARGUMENT,
         "element 5 in a list with 3");
  /* Set element 1: a new list; the old one is unchanged. */
  const int64_t d23[] = {2, 3};
  item = floats(2, d23, (const float[]){1, 2, 3, 4, 5, 6});
  eng_tensor sin[3] = {list, idx1, item};
  ck_ok(run(g, "TensorListSetItem", 3, sin, &list2, &err), err);
  gin[0] = list2;
  gin[1] = idx1;
  ck_ok(run(g, "TensorListGetItem", 3, gin, &got, &err), err);
  ck_assert(got.buf == item.buf); /* shared, not copied */
  eng_tensor_release(&got);
  gin[0] = list;
  ck_err(run(g, "TensorListGetItem", 3, gin, &got, &err), err, TD_INVALID_ARGUMENT, "never set");
  /* Stack: unset elements are zeros of the set elements' shape. */
  eng_tensor kin[2] = {list2, shape};
  ck_ok(run(g, "TensorListStack", 2, kin, &stacked, &err), err);
  ck_assert_int_eq(stacked.shape.rank, 3);
  ck_assert_int_eq(stacked.shape.dim[0], 3);
  const float *sv = eng_tensor_data(&stacked);
  ck_assert(sv[0] == 0 && sv[6] == 1 && sv[11] == 6 && sv[17] == 0);
  /* A wrong dtype for SetItem. */
  eng_tensor bad = ints(0, none, (const int32_t[]){7});
  eng_tensor bin[3] = {list, idx1, bad};
  eng_tensor l3 = {0};
  ck_err(run(g, "TensorListSetItem", 3, bin, &l3, &err), err, TD_INVALID_ARGUMENT, "int32 item");
  /* FromTensor splits dim 0; Length counts. */
  eng_tensor fl = {0}, len = {0};
  eng_tensor fin[2] = {stacked, shape};
  ck_ok(run(g, "TensorListFromTensor", 2, fin, &fl, &err), err);
  ck_ok(run(g, "TensorListLength", 1, &fl, &len, &err), err);
  ck_assert_int_eq(*(int32_t *)eng_tensor_data(&len), 3);
  gin[0] = fl;
  gin[1] = idx1;
  ck_ok(run(g, "TensorListGetItem", 3, gin, &got, &err), err);
  ck_assert(((const float *)eng_tensor_data(&got))[5] == 6);
  eng_tensor *all[] = {&shape, &n, &list, &item, &got, &stacked, &list2, &idx1, &idx5, &bad, &fl, &len};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) eng_tensor_release(all[i]);
  eng_graph_destroy(g);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_control");
  TCase *tc = tcase_create("lists");
  tcase_add_test(tc, lists);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
