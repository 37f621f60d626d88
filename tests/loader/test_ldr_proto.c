/* ldr_proto: TensorProtos are checked against what their bytes hold before
 * anything is allocated. The peak RSS (ru_maxrss) shows an allocation that
 * should not happen; it does not depend on the machine's speed. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "ldr_proto.h"
#include "td_testcheck.h"

static long peak_kb(void) {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

typedef struct proto {
  Tensorflow__TensorProto t;
  Tensorflow__TensorShapeProto shape;
  Tensorflow__TensorShapeProto__Dim dims[2], *dimp[2];
} proto;

static void make(proto *p, int dtype, int rank, const int64_t *dims) {
  tensorflow__tensor_proto__init(&p->t);
  tensorflow__tensor_shape_proto__init(&p->shape);
  for (int i = 0; i < rank; i++) {
    tensorflow__tensor_shape_proto__dim__init(&p->dims[i]);
    p->dims[i].size = dims[i];
    p->dimp[i] = &p->dims[i];
  }
  p->shape.n_dim = (size_t)rank;
  p->shape.dim = p->dimp;
  p->t.tensor_shape = &p->shape;
  p->t.dtype = dtype;
}

static const int64_t HUGE[1] = {(int64_t)1 << 28}; /* 1 GiB of float32 */

START_TEST(content_shorter_than_the_shape_allocates_nothing) {
  proto p;
  make(&p, TENSORFLOW__DATA_TYPE__DT_FLOAT, 1, HUGE);
  uint8_t four[4] = {0};
  p.t.tensor_content = (ProtobufCBinaryData){4, four};
  long before = peak_kb();
  eng_tensor t;
  td_err err;
  ck_err(ldr_proto_tensor(&p.t, &t, &err), err, TD_INVALID_ARGUMENT, "tensor_content has 4 bytes");
  ck_assert_int_lt(peak_kb() - before, 64 * 1024);
}
END_TEST

START_TEST(more_values_than_elements_allocates_nothing) {
  proto p;
  int64_t one = 1;
  make(&p, TENSORFLOW__DATA_TYPE__DT_FLOAT, 1, &one);
  float v[2] = {1, 2};
  p.t.n_float_val = 2;
  p.t.float_val = v;
  eng_tensor t;
  td_err err;
  ck_err(ldr_proto_tensor(&p.t, &t, &err), err, TD_INVALID_ARGUMENT, "2 values");
}
END_TEST

START_TEST(fill_by_repetition_is_bounded) {
  proto p;
  make(&p, TENSORFLOW__DATA_TYPE__DT_FLOAT, 1, HUGE);
  float v[2] = {1, 2};
  p.t.n_float_val = 2;
  p.t.float_val = v;
  long before = peak_kb();
  eng_tensor t;
  td_err err;
  ck_err(ldr_proto_tensor_bounded(&p.t, SIZE_MAX, &t, &err), err, TD_RESOURCE_EXHAUSTED,
         "filling by repetition");
  /* Strings: one value for 10^8 elements. */
  int64_t n = 100000000;
  make(&p, TENSORFLOW__DATA_TYPE__DT_STRING, 1, &n);
  ProtobufCBinaryData s = {3, (uint8_t *)"abc"};
  p.t.n_string_val = 1;
  p.t.string_val = &s;
  ck_err(ldr_proto_tensor_bounded(&p.t, SIZE_MAX, &t, &err), err, TD_RESOURCE_EXHAUSTED,
         "filling by repetition");
  ck_assert_int_lt(peak_kb() - before, 64 * 1024);
  /* A small fill is what TensorFlow allows: the last value repeats. */
  int64_t four = 4;
  make(&p, TENSORFLOW__DATA_TYPE__DT_FLOAT, 1, &four);
  p.t.n_float_val = 2;
  p.t.float_val = v;
  ck_ok(ldr_proto_tensor_bounded(&p.t, SIZE_MAX, &t, &err), err);
  const float *f = eng_tensor_data(&t);
  ck_assert(f[0] == 1 && f[1] == 2 && f[2] == 2 && f[3] == 2);
  eng_tensor_release(&t);
}
END_TEST

START_TEST(budget_names_the_sizes) {
  proto p;
  int64_t n = 300;
  make(&p, TENSORFLOW__DATA_TYPE__DT_FLOAT, 1, &n);
  float *v = calloc(300, sizeof *v);
  p.t.n_float_val = 300;
  p.t.float_val = v;
  eng_tensor t;
  td_err err;
  ck_err(ldr_proto_tensor_bounded(&p.t, 1000, &t, &err), err, TD_RESOURCE_EXHAUSTED,
         "1200 bytes, more than the 1000");
  ck_ok(ldr_proto_tensor_bounded(&p.t, 1200, &t, &err), err);
  eng_tensor_release(&t);
  free(v);
}
END_TEST

START_TEST(peek_reports_the_sent_dtype_and_refs) {
  proto p;
  int64_t n = 2;
  make(&p, TENSORFLOW__DATA_TYPE__DT_HALF, 1, &n);
  int32_t h[1] = {0x3c00};
  p.t.n_half_val = 1;
  p.t.half_val = h;
  ldr_proto_info info;
  td_err err;
  ck_ok(ldr_proto_tensor_peek(&p.t, &info, &err), err);
  ck_assert_int_eq(info.dtype, ENG_DT_HALF);
  ck_assert(!info.is_ref && info.filled);
  ck_assert_uint_eq(info.bytes, 8); /* widened to float32 */
  p.t.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT_REF;
  p.t.n_half_val = 0;
  ck_ok(ldr_proto_tensor_peek(&p.t, &info, &err), err);
  ck_assert(info.is_ref && info.dtype == ENG_DT_FLOAT);
  /* Dims whose product overflows int64 are not a shape. */
  int64_t big[2] = {(int64_t)1 << 62, (int64_t)1 << 62};
  make(&p, TENSORFLOW__DATA_TYPE__DT_FLOAT, 2, big);
  ck_err(ldr_proto_tensor_peek(&p.t, &info, &err), err, TD_INVALID_ARGUMENT, "2^63-1");
}
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_proto");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, content_shorter_than_the_shape_allocates_nothing);
  tcase_add_test(tc, more_values_than_elements_allocates_nothing);
  tcase_add_test(tc, fill_by_repetition_is_bounded);
  tcase_add_test(tc, budget_names_the_sizes);
  tcase_add_test(tc, peek_reports_the_sent_dtype_and_refs);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
