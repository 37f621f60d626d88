/* td_pbdepth: the nesting bound is checked on the wire, before protobuf-c
 * recurses. The hostile input is an AttrValue holding a NameAttrList whose
 * attr map holds an AttrValue, and so on: three message levels per turn. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "td_pbdepth.h"
#include "td_testcheck.h"
#include "tensorflow/core/framework/attr_value.pb-c.h"
#include "tensorflow/core/protobuf/saved_model.pb-c.h"

/* Bytes are written backwards from the end of a buffer, so each wrapper's
 * length is known when its header is written: linear in the output. */
typedef struct rbuf {
  uint8_t *base;
  size_t cap, len; /* the message is base[cap - len .. cap) */
} rbuf;

static void put(rbuf *b, const void *p, size_t n) {
  ck_assert_uint_le(b->len + n, b->cap);
  b->len += n;
  memcpy(b->base + b->cap - b->len, p, n);
}
static void put_varint(rbuf *b, uint64_t v) {
  uint8_t t[10];
  size_t n = 0;
  do {
    t[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  put(b, t, n);
}
/* Wraps everything written so far as length-delimited field `field`. */
static void wrap(rbuf *b, unsigned field) {
  put_varint(b, b->len);
  put_varint(b, (uint64_t)field << 3 | 2);
}
static void put_key(rbuf *b) { put(b, "\x0a\x01k", 3); } /* map entry key = "k" */

/* An AttrValue nested `turns` times through func -> attr -> value. */
static void nested_attr(rbuf *b, int turns) {
  put(b, "\x18\x01", 2); /* innermost AttrValue: i = 1 */
  for (int t = 0; t < turns; t++) {
    wrap(b, 2); /* AttrEntry.value */
    put_key(b);
    wrap(b, 2);  /* NameAttrList.attr */
    wrap(b, 10); /* AttrValue.func */
  }
}

static rbuf rbuf_new(size_t cap) {
  rbuf b = {malloc(cap), cap, 0};
  ck_assert_ptr_nonnull(b.base);
  return b;
}
static const uint8_t *rbuf_data(const rbuf *b) { return b->base + b->cap - b->len; }

START_TEST(depth_at_the_bound_passes) {
  /* 33 turns: 99 levels below the top AttrValue; 34 turns: 102. */
  rbuf b = rbuf_new(4096);
  nested_attr(&b, 33);
  ck_assert_int_eq(
      td_pb_check_depth(&tensorflow__attr_value__descriptor, rbuf_data(&b), b.len, TD_PB_MAX_DEPTH),
      TD_PB_OK);
  td_err err;
  ProtobufCMessage *m =
      td_pb_unpack(&tensorflow__attr_value__descriptor, NULL, b.len, rbuf_data(&b), &err);
  ck_assert_ptr_nonnull(m);
  protobuf_c_message_free_unpacked(m, NULL);
  /* The innermost AttrValue is at level 99: a bound of 99 still passes. */
  ck_assert_int_eq(td_pb_check_depth(&tensorflow__attr_value__descriptor, rbuf_data(&b), b.len, 99),
                   TD_PB_OK);
  ck_assert_int_eq(td_pb_check_depth(&tensorflow__attr_value__descriptor, rbuf_data(&b), b.len, 98),
                   TD_PB_TOO_DEEP);
  free(b.base);
}
END_TEST

START_TEST(one_level_past_the_bound_fails) {
  rbuf b = rbuf_new(4096);
  nested_attr(&b, 34);
  td_err err;
  ProtobufCMessage *m =
      td_pb_unpack(&tensorflow__attr_value__descriptor, NULL, b.len, rbuf_data(&b), &err);
  ck_assert_ptr_null(m);
  ck_assert_int_eq(err.code, TD_INVALID_ARGUMENT);
  ck_assert_ptr_nonnull(strstr(err.msg, "nested deeper than 100 levels"));
  free(b.base);
}
END_TEST

/* Deep enough to overflow any thread's stack in protobuf-c's recursion
 * (90k levels, a little over 1 MB): the check answers without recursing. */
START_TEST(saved_model_nested_attr_is_refused) {
  rbuf b = rbuf_new(4 << 20);
  nested_attr(&b, 30000);
  wrap(&b, 2); /* AttrEntry.value */
  put_key(&b);
  wrap(&b, 5); /* NodeDef.attr */
  put(&b,
      "\x12\x05"
      "Const",
      7);
  put(&b, "\x0a\x01n", 3);
  wrap(&b, 1); /* GraphDef.node */
  wrap(&b, 2); /* MetaGraphDef.graph_def */
  wrap(&b, 2); /* SavedModel.meta_graphs */
  td_err err;
  ProtobufCMessage *m =
      td_pb_unpack(&tensorflow__saved_model__descriptor, NULL, b.len, rbuf_data(&b), &err);
  ck_assert_ptr_null(m);
  ck_assert_int_eq(err.code, TD_INVALID_ARGUMENT);
  free(b.base);
}
END_TEST

START_TEST(malformed_bytes_are_left_to_protobuf_c) {
  td_err err;
  /* A length that runs past the end, a group, a truncated varint. */
  static const uint8_t past[] = {0x52, 0x10, 0x0a};
  static const uint8_t group[] = {0x0b, 0x0c};
  static const uint8_t varint[] = {0x18, 0xff};
  ck_assert_int_eq(td_pb_check_depth(&tensorflow__attr_value__descriptor, past, 3, 100),
                   TD_PB_MALFORMED);
  ck_assert_int_eq(td_pb_check_depth(&tensorflow__attr_value__descriptor, group, 2, 100),
                   TD_PB_MALFORMED);
  ck_assert_int_eq(td_pb_check_depth(&tensorflow__attr_value__descriptor, varint, 2, 100),
                   TD_PB_MALFORMED);
  ck_assert_ptr_null(td_pb_unpack(&tensorflow__attr_value__descriptor, NULL, 3, past, &err));
  ck_assert_int_eq(err.code, TD_DATA_LOSS);
  /* Empty bytes are the empty message. */
  ProtobufCMessage *m = td_pb_unpack(&tensorflow__attr_value__descriptor, NULL, 0, past, &err);
  ck_assert_ptr_nonnull(m);
  protobuf_c_message_free_unpacked(m, NULL);
}
END_TEST

START_TEST(unknown_and_bytes_fields_are_not_descended) {
  /* Field 99 (unknown) and AttrValue.s (bytes) hold 200 nested levels of
   * length-delimited data: protobuf-c keeps them as bytes, so they pass. */
  rbuf b = rbuf_new(8192);
  put(&b, "\x08\x01", 2);
  for (int i = 0; i < 200; i++) wrap(&b, 2);
  wrap(&b, 99);
  ck_assert_int_eq(
      td_pb_check_depth(&tensorflow__attr_value__descriptor, rbuf_data(&b), b.len, TD_PB_MAX_DEPTH),
      TD_PB_OK);
  free(b.base);
}
END_TEST

int main(void) {
  Suite *s = suite_create("td_pbdepth");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, depth_at_the_bound_passes);
  tcase_add_test(tc, one_level_past_the_bound_fails);
  tcase_add_test(tc, saved_model_nested_attr_is_refused);
  tcase_add_test(tc, malformed_bytes_are_left_to_protobuf_c);
  tcase_add_test(tc, unknown_and_bytes_fields_are_not_descended);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
