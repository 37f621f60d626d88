/* srv_tensorproto and the gRPC wire: every dtype survives engine tensor ->
 * TensorProto (typed fields and tensor_content) -> bytes -> TensorProto ->
 * engine tensor (ldr_proto_tensor, the decoder gRPC requests use), the typed
 * layout uses the field TensorFlow uses, and the decoder takes what clients
 * send: unpacked repeated fields, one value filling the shape, no values
 * (zeros), and refuses a tensor_content of the wrong size. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_proto.h"
#include "srv_tensorproto.h"

static eng_tensor make(eng_dtype dt, int64_t d0, int64_t d1) {
  eng_tensor t;
  int64_t dims[2] = {d0, d1};
  eng_shape s = eng_shape_make(2, dims);
  ck_assert_int_eq(eng_tensor_alloc(&t, dt, &s, NULL), TD_OK);
  unsigned char *p = eng_tensor_data(&t);
  size_t n = eng_tensor_nbytes(&t);
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(i * 37 + 11);
  if (dt == ENG_DT_BOOL)
    for (size_t i = 0; i < n; i++) p[i] &= 1;
  return t;
}

/* Encodes, packs, unpacks and decodes; returns the decoded tensor. */
static eng_tensor round_trip(const eng_tensor *t, bool content, Tensorflow__TensorProto **wire) {
  srv_tensorproto tp;
  td_err err;
  ck_assert_int_eq(srv_tensorproto_encode(t, content, &tp, &err), TD_OK);
  size_t len = tensorflow__tensor_proto__get_packed_size(&tp.proto);
  uint8_t *buf = malloc(len + 1);
  tensorflow__tensor_proto__pack(&tp.proto, buf);
  srv_tensorproto_clear(&tp);
  *wire = tensorflow__tensor_proto__unpack(NULL, len, buf);
  free(buf);
  ck_assert_ptr_nonnull(*wire);
  eng_tensor back;
  ck_assert_int_eq(ldr_proto_tensor(*wire, &back, &err), TD_OK);
  return back;
}

static void check_same(const eng_tensor *a, const eng_tensor *b) {
  ck_assert_int_eq(a->dtype, b->dtype);
  ck_assert(eng_shape_equal(&a->shape, &b->shape));
  ck_assert_int_eq(eng_tensor_nbytes(a), eng_tensor_nbytes(b));
  ck_assert(!memcmp(eng_tensor_data(a), eng_tensor_data(b), eng_tensor_nbytes(a)));
}

static const eng_dtype numeric[] = {ENG_DT_FLOAT,    ENG_DT_DOUBLE, ENG_DT_INT32, ENG_DT_UINT8,
                                    ENG_DT_INT16,    ENG_DT_INT8,   ENG_DT_INT64, ENG_DT_BOOL,
                                    ENG_DT_BFLOAT16, ENG_DT_UINT16, ENG_DT_HALF,  ENG_DT_UINT32,
                                    ENG_DT_UINT64};

/* How many values the typed field TensorFlow uses for dt holds. */
static size_t typed_count(const Tensorflow__TensorProto *p, eng_dtype dt) {
  switch (dt) {
    case ENG_DT_FLOAT:
      return p->n_float_val;
    case ENG_DT_DOUBLE:
      return p->n_double_val;
    case ENG_DT_INT32:
    case ENG_DT_UINT8:
    case ENG_DT_INT16:
    case ENG_DT_INT8:
    case ENG_DT_UINT16:
      return p->n_int_val;
    case ENG_DT_INT64:
      return p->n_int64_val;
    case ENG_DT_BOOL:
      return p->n_bool_val;
    case ENG_DT_HALF:
    case ENG_DT_BFLOAT16:
      return p->n_half_val;
    case ENG_DT_UINT32:
      return p->n_uint32_val;
    case ENG_DT_UINT64:
      return p->n_uint64_val;
    default:
      return 0;
  }
}

START_TEST(test_numeric_round_trip_both_layouts) {
  for (size_t k = 0; k < sizeof numeric / sizeof numeric[0]; k++) {
    eng_tensor t = make(numeric[k], 3, 5);
    for (int content = 0; content < 2; content++) {
      Tensorflow__TensorProto *wire;
      eng_tensor back = round_trip(&t, content, &wire);
      ck_assert_int_eq(wire->dtype, (int)numeric[k]);
      ck_assert_uint_eq(wire->tensor_shape->n_dim, 2);
      ck_assert_int_eq(wire->tensor_shape->dim[1]->size, 5);
      if (content) {
        ck_assert_uint_eq(wire->tensor_content.len, eng_tensor_nbytes(&t));
        ck_assert_uint_eq(typed_count(wire, numeric[k]), 0);
      } else {
        ck_assert_uint_eq(wire->tensor_content.len, 0);
        ck_assert_msg(typed_count(wire, numeric[k]) == 15, "dtype %s: every element written",
                      eng_dtype_name(numeric[k]));
      }
      /* Decoding widens float16 / bfloat16 to float32 (ldr_proto.h). */
      eng_tensor want = eng_tensor_share(&t);
      ck_assert_int_eq(eng_tensor_widen(&want, NULL), TD_OK);
      check_same(&want, &back);
      eng_tensor_release(&want);
      eng_tensor_release(&back);
      tensorflow__tensor_proto__free_unpacked(wire, NULL);
    }
    eng_tensor_release(&t);
  }
}
END_TEST

START_TEST(test_strings_always_in_string_val) {
  eng_tensor t;
  int64_t dims[1] = {3};
  eng_shape s = eng_shape_make(1, dims);
  size_t lens[3] = {0, 5, 3};
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s, lens, NULL), TD_OK);
  memcpy(eng_tensor_str_bytes(&t, 1), "he\0lo", 5);
  memcpy(eng_tensor_str_bytes(&t, 2), "abc", 3);
  for (int content = 0; content < 2; content++) {
    Tensorflow__TensorProto *wire;
    eng_tensor back = round_trip(&t, content, &wire);
    ck_assert_uint_eq(wire->n_string_val, 3);
    ck_assert_uint_eq(wire->tensor_content.len, 0);
    ck_assert_int_eq(back.dtype, ENG_DT_STRING);
    for (int i = 0; i < 3; i++) {
      eng_str a = eng_tensor_strs(&t)[i], b = eng_tensor_strs(&back)[i];
      ck_assert_uint_eq(a.len, b.len);
      ck_assert(!memcmp(a.data, b.data, a.len));
    }
    eng_tensor_release(&back);
    tensorflow__tensor_proto__free_unpacked(wire, NULL);
  }
  eng_tensor_release(&t);
}
END_TEST

START_TEST(test_scalar_and_empty) {
  eng_shape sc = eng_shape_scalar();
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &sc, NULL), TD_OK);
  *(float *)eng_tensor_data(&t) = 1.5f;
  Tensorflow__TensorProto *wire;
  eng_tensor back = round_trip(&t, false, &wire);
  ck_assert_uint_eq(wire->tensor_shape->n_dim, 0);
  check_same(&t, &back);
  eng_tensor_release(&back);
  eng_tensor_release(&t);
  tensorflow__tensor_proto__free_unpacked(wire, NULL);

  int64_t dims[2] = {0, 4};
  eng_shape s = eng_shape_make(2, dims);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_INT16, &s, NULL), TD_OK);
  back = round_trip(&t, false, &wire);
  ck_assert_uint_eq(wire->n_int_val, 0);
  ck_assert(eng_shape_equal(&t.shape, &back.shape));
  eng_tensor_release(&back);
  eng_tensor_release(&t);
  tensorflow__tensor_proto__free_unpacked(wire, NULL);
}
END_TEST

START_TEST(test_unencodable_dtype) {
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc_handle(&t, 3, false, NULL), TD_OK);
  srv_tensorproto tp;
  td_err err;
  ck_assert_int_eq(srv_tensorproto_encode(&t, false, &tp, &err), TD_UNIMPLEMENTED);
  srv_tensorproto_clear(&tp);
  eng_tensor_release(&t);
}
END_TEST

/* A float TensorProto of shape [4], hand-encoded with float_val unpacked
 * (one tag per value, wire type 5), as some clients write it. */
START_TEST(test_decoder_accepts_unpacked_and_fills_shape) {
  uint8_t buf[64];
  size_t n = 0;
  buf[n++] = 0x08, buf[n++] = 1;                                /* dtype: DT_FLOAT */
  buf[n++] = 0x12, buf[n++] = 4;                                /* tensor_shape, 4 bytes */
  buf[n++] = 0x12, buf[n++] = 2, buf[n++] = 0x08, buf[n++] = 4; /* dim { size: 4 } */
  float v[2] = {1.5f, -2.0f};
  for (int i = 0; i < 2; i++) {
    buf[n++] = 0x2d; /* field 5, fixed32 */
    memcpy(buf + n, &v[i], 4);
    n += 4;
  }
  Tensorflow__TensorProto *p = tensorflow__tensor_proto__unpack(NULL, n, buf);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq(p->n_float_val, 2);
  eng_tensor t;
  ck_assert_int_eq(ldr_proto_tensor(p, &t, NULL), TD_OK);
  const float *f = eng_tensor_data(&t);
  ck_assert_int_eq(eng_tensor_numel(&t), 4);
  /* Fewer values than the shape: the last one repeats. */
  ck_assert(f[0] == 1.5f && f[1] == -2.0f && f[2] == -2.0f && f[3] == -2.0f);
  eng_tensor_release(&t);

  /* No values: zeros. */
  p->n_float_val = 0;
  ck_assert_int_eq(ldr_proto_tensor(p, &t, NULL), TD_OK);
  f = eng_tensor_data(&t);
  ck_assert(f[0] == 0 && f[3] == 0);
  eng_tensor_release(&t);

  /* tensor_content of the wrong size is refused. */
  uint8_t bytes[12] = {0};
  p->tensor_content = (ProtobufCBinaryData){sizeof bytes, bytes};
  td_err err;
  ck_assert_int_eq(ldr_proto_tensor(p, &t, &err), TD_INVALID_ARGUMENT);
  p->tensor_content = (ProtobufCBinaryData){0, NULL};
  tensorflow__tensor_proto__free_unpacked(p, NULL);
}
END_TEST

int main(void) {
  Suite *s = suite_create("srv_tensorproto");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_numeric_round_trip_both_layouts);
  tcase_add_test(tc, test_strings_always_in_string_val);
  tcase_add_test(tc, test_scalar_and_empty);
  tcase_add_test(tc, test_unencodable_dtype);
  tcase_add_test(tc, test_decoder_accepts_unpacked_and_fills_shape);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
