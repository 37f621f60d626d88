/* eng_tensor_widen: float16 and bfloat16 to float32, exactly. */
#include <check.h>
#include <math.h>
#include <string.h>

#include "eng_tensor.h"

START_TEST(half_and_bfloat16) {
  const uint16_t half[] = {0x0000, 0x8000, 0x3C00, 0xC000, 0x7BFF, 0x0001, 0x03FF,
                           0x0400, 0x7C00, 0xFC00, 0x7E00, 0x3555};
  const float want[] = {0.0f, -0.0f, 1.0f, -2.0f, 65504.0f, 5.9604645e-08f, 6.0975552e-05f,
                        6.1035156e-05f, INFINITY, -INFINITY, NAN, 0.33325195f};
  int n = (int)(sizeof half / sizeof half[0]);
  eng_shape s = eng_shape_make(1, (int64_t[]){n});
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_HALF, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&t), half, sizeof half);
  ck_assert_int_eq(eng_tensor_widen(&t, NULL), TD_OK);
  ck_assert_int_eq(t.dtype, ENG_DT_FLOAT);
  const float *f = eng_tensor_data(&t);
  for (int i = 0; i < n; i++) {
    if (isnan(want[i])) {
      ck_assert(isnan(f[i]));
    } else {
      ck_assert_msg(f[i] == want[i] && signbit(f[i]) == signbit(want[i]),
                    "half 0x%04x -> %.9g, want %.9g", half[i], f[i], want[i]);
    }
  }
  eng_tensor_release(&t);
  const uint16_t bf[] = {0x3F80, 0xC040, 0x7F80, 0x0001};
  const float bwant[] = {1.0f, -3.0f, INFINITY, 9.1835496e-41f};
  s = eng_shape_make(1, (int64_t[]){4});
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_BFLOAT16, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&t), bf, sizeof bf);
  ck_assert_int_eq(eng_tensor_widen(&t, NULL), TD_OK);
  f = eng_tensor_data(&t);
  for (int i = 0; i < 4; i++) ck_assert_msg(f[i] == bwant[i], "bf16 %d -> %g", i, f[i]);
  eng_tensor_release(&t);
  /* Other dtypes are left alone. */
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_INT32, &s, NULL), TD_OK);
  ck_assert_int_eq(eng_tensor_widen(&t, NULL), TD_OK);
  ck_assert_int_eq(t.dtype, ENG_DT_INT32);
  eng_tensor_release(&t);
  ck_assert_int_eq(eng_dtype_widened(ENG_DT_HALF), ENG_DT_FLOAT);
  ck_assert_int_eq(eng_dtype_widened(ENG_DT_INT64), ENG_DT_INT64);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_widen");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, half_and_bfloat16);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
