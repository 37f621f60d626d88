/* eng_tensor: shapes, allocation (zeroing, alignment, limits), string
 * tensors, handles, reference counting and deep copies. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "eng_tensor.h"

static eng_shape shp(int rank, int64_t d0, int64_t d1, int64_t d2) {
  int64_t d[3] = {d0, d1, d2};
  return eng_shape_make(rank, d);
}

/* --- shapes ------------------------------------------------------------ */

START_TEST(shape_numel) {
  eng_shape s = eng_shape_scalar();
  ck_assert_int_eq(s.rank, 0);
  ck_assert_int_eq(eng_shape_numel(&s), 1);
  s = shp(2, 2, 3, 0);
  ck_assert_int_eq(eng_shape_numel(&s), 6);
  s = shp(3, 4, 0, 5);
  ck_assert_int_eq(eng_shape_numel(&s), 0);
  s = shp(2, -1, 3, 0);
  ck_assert_int_eq(eng_shape_numel(&s), -1);
  s = eng_shape_unknown();
  ck_assert_int_eq(s.rank, -1);
  ck_assert_int_eq(eng_shape_numel(&s), -1);
  int64_t eight[8] = {1, 2, 1, 2, 1, 2, 1, 2};
  s = eng_shape_make(8, eight);
  ck_assert_int_eq(eng_shape_numel(&s), 16);
}
END_TEST

START_TEST(shape_equal_and_fits) {
  eng_shape a = shp(2, 2, 3, 0), b = shp(2, 2, 3, 0), c = shp(2, 3, 2, 0), d = shp(1, 6, 0, 0);
  ck_assert(eng_shape_equal(&a, &b));
  ck_assert(!eng_shape_equal(&a, &c));
  ck_assert(!eng_shape_equal(&a, &d));
  eng_shape sc = eng_shape_scalar(), v1 = shp(1, 1, 0, 0);
  ck_assert(!eng_shape_equal(&sc, &v1));

  eng_shape unk = eng_shape_unknown();
  ck_assert(eng_shape_fits(&unk, &a));
  ck_assert(eng_shape_fits(&unk, &sc));
  eng_shape decl = shp(2, -1, 3, 0);
  ck_assert(eng_shape_fits(&decl, &a));
  eng_shape a7 = shp(2, 7, 3, 0);
  ck_assert(eng_shape_fits(&decl, &a7));
  ck_assert(!eng_shape_fits(&decl, &c));
  ck_assert(!eng_shape_fits(&decl, &d)); /* rank differs */
  eng_shape vec = shp(1, -1, 0, 0);
  ck_assert(!eng_shape_fits(&vec, &sc));
  ck_assert(eng_shape_fits(&sc, &sc));
  ck_assert(!eng_shape_fits(&sc, &v1));
}
END_TEST

START_TEST(shape_str) {
  char buf[64];
  eng_shape s = shp(2, 2, 3, 0);
  ck_assert_str_eq(eng_shape_str(&s, buf, sizeof buf), "[2,3]");
  s = shp(2, -1, 1, 0);
  ck_assert_str_eq(eng_shape_str(&s, buf, sizeof buf), "[?,1]");
  s = eng_shape_scalar();
  ck_assert_str_eq(eng_shape_str(&s, buf, sizeof buf), "[]");
  s = eng_shape_unknown();
  ck_assert_str_eq(eng_shape_str(&s, buf, sizeof buf), "<unknown>");
  s = shp(3, 1234567, 89, 0);
  ck_assert_str_eq(eng_shape_str(&s, buf, sizeof buf), "[1234567,89,0]");
  /* A short buffer truncates but stays terminated and in bounds. */
  char tiny[6];
  memset(tiny, 'x', sizeof tiny);
  eng_shape_str(&s, tiny, sizeof tiny);
  ck_assert_uint_lt(strlen(tiny), sizeof tiny);
  ck_assert(!strncmp(tiny, "[1234", 5));
}
END_TEST

/* --- allocation -------------------------------------------------------- */

START_TEST(alloc_zeroed_aligned) {
  const eng_dtype dts[] = {ENG_DT_FLOAT, ENG_DT_DOUBLE, ENG_DT_INT32, ENG_DT_INT64,
                           ENG_DT_UINT8, ENG_DT_BOOL,   ENG_DT_HALF,  ENG_DT_COMPLEX128};
  for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
    eng_shape s = shp(3, 3, 5, 7);
    eng_tensor t;
    td_err err;
    td_err_clear(&err);
    ck_assert_int_eq(eng_tensor_alloc(&t, dts[k], &s, &err), TD_OK);
    ck_assert_int_eq(t.dtype, dts[k]);
    ck_assert(!t.is_ref);
    ck_assert(eng_shape_equal(&t.shape, &s));
    ck_assert_int_eq(eng_tensor_numel(&t), 105);
    ck_assert_uint_eq(eng_tensor_nbytes(&t), 105 * eng_dtype_size(dts[k]));
    unsigned char *p = eng_tensor_data(&t);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq((uintptr_t)p % 64, 0);
    for (size_t i = 0; i < eng_tensor_nbytes(&t); i++) ck_assert_uint_eq(p[i], 0);
    memset(p, 0xab, eng_tensor_nbytes(&t)); /* the whole range is writable */
    ck_assert_ptr_null(eng_tensor_strs(&t));
    eng_tensor_release(&t);
    ck_assert_ptr_null(t.buf);
  }
}
END_TEST

START_TEST(alloc_scalar_and_empty) {
  eng_tensor t;
  eng_shape sc = eng_shape_scalar();
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &sc, NULL), TD_OK);
  ck_assert_int_eq(eng_tensor_numel(&t), 1);
  ck_assert_uint_eq(eng_tensor_nbytes(&t), 4);
  ck_assert_float_eq(*(float *)eng_tensor_data(&t), 0.0f);
  eng_tensor_release(&t);

  eng_shape z = shp(2, 0, 4, 0);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_INT64, &z, NULL), TD_OK);
  ck_assert_int_eq(eng_tensor_numel(&t), 0);
  ck_assert_uint_eq(eng_tensor_nbytes(&t), 0);
  ck_assert_ptr_nonnull(t.buf);
  eng_tensor_release(&t);
}
END_TEST

START_TEST(alloc_rejects_bad_shapes) {
  eng_tensor t = {0};
  td_err err;
  int64_t nine[ENG_MAX_RANK + 1] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  eng_shape s9 = {.rank = ENG_MAX_RANK + 1};
  memcpy(s9.dim, nine, sizeof s9.dim);
  td_err_clear(&err);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &s9, &err), TD_INVALID_ARGUMENT);
  ck_assert_int_eq(err.code, TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, "rank 9"), "message: %s", err.msg);
  ck_assert_ptr_null(t.buf);

  eng_shape neg = shp(2, 3, -1, 0);
  td_err_clear(&err);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &neg, &err), TD_INVALID_ARGUMENT);
  ck_assert_msg(strstr(err.msg, "[3,?]"), "message: %s", err.msg);
  ck_assert_ptr_null(t.buf);

  eng_shape unk = eng_shape_unknown();
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &unk, &err), TD_INVALID_ARGUMENT);

  /* Same checks on the string and explicit-length paths. */
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_STRING, &neg, &err), TD_INVALID_ARGUMENT);
  size_t lens[3] = {1, 2, 3};
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s9, lens, &err), TD_INVALID_ARGUMENT);
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &neg, lens, &err), TD_INVALID_ARGUMENT);

  /* Element counts that overflow int64 are refused, not wrapped. */
  eng_shape huge = shp(3, INT64_C(1) << 40, INT64_C(1) << 40, 1 << 20);
  td_err_clear(&err);
  td_code rc = eng_tensor_alloc(&t, ENG_DT_FLOAT, &huge, &err);
  ck_assert_int_ne(rc, TD_OK);
  ck_assert_ptr_null(t.buf);
  /* A count that fits int64 but not memory fails cleanly too. */
  eng_shape big = shp(1, INT64_C(1) << 61, 0, 0);
  rc = eng_tensor_alloc(&t, ENG_DT_DOUBLE, &big, &err);
  ck_assert_int_ne(rc, TD_OK);
  ck_assert_ptr_null(t.buf);
}
END_TEST

START_TEST(alloc_rejects_unstorable_dtypes) {
  eng_tensor t = {0};
  td_err err;
  eng_shape s = shp(1, 2, 0, 0);
  const eng_dtype bad[] = {ENG_DT_INVALID, ENG_DT_RESOURCE, ENG_DT_VARIANT, (eng_dtype)99};
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    td_err_clear(&err);
    ck_assert_int_eq(eng_tensor_alloc(&t, bad[k], &s, &err), TD_UNIMPLEMENTED);
    ck_assert_int_eq(err.code, TD_UNIMPLEMENTED);
    ck_assert_ptr_null(t.buf);
  }
}
END_TEST

/* --- strings ----------------------------------------------------------- */

START_TEST(strings_size_counts_entries_and_saturates) {
  /* A table entry and a NUL per element, then the bytes. */
  ck_assert_uint_eq(eng_tensor_strings_size(4, 17), 4 * (sizeof(eng_str) + 1) + 17);
  ck_assert_uint_eq(eng_tensor_strings_size(0, 0), 0);
  ck_assert_uint_eq(eng_tensor_strings_size(-1, 5), 5);
  ck_assert_uint_eq(eng_tensor_strings_size(INT64_MAX, 0), SIZE_MAX);
  ck_assert_uint_eq(eng_tensor_strings_size(1, SIZE_MAX), SIZE_MAX);
}
END_TEST

START_TEST(strings_explicit) {
  const char *words[] = {"", "a", "hello world", "\0bin\xff"};
  size_t lens[] = {0, 1, 11, 5};
  eng_shape s = shp(2, 2, 2, 0);
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s, lens, NULL), TD_OK);
  ck_assert_int_eq(t.dtype, ENG_DT_STRING);
  ck_assert_uint_eq(eng_tensor_nbytes(&t), 0);
  ck_assert_uint_eq((uintptr_t)eng_tensor_data(&t) % 64, 0);
  for (int i = 0; i < 4; i++) memcpy(eng_tensor_str_bytes(&t, i), words[i], lens[i]);
  eng_str *st = eng_tensor_strs(&t);
  ck_assert_ptr_nonnull(st);
  for (int i = 0; i < 4; i++) {
    ck_assert_uint_eq(st[i].len, lens[i]);
    ck_assert_mem_eq(st[i].data, words[i], lens[i]);
    ck_assert_int_eq(st[i].data[lens[i]], '\0'); /* kept terminated */
  }
  /* Strings do not overlap. */
  for (int i = 0; i + 1 < 4; i++)
    ck_assert((uintptr_t)(st[i].data + st[i].len) <= (uintptr_t)st[i + 1].data);
  eng_tensor_release(&t);
}
END_TEST

START_TEST(strings_alloc_empty) {
  eng_shape s = shp(1, 3, 0, 0);
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_STRING, &s, NULL), TD_OK);
  ck_assert_int_eq(t.dtype, ENG_DT_STRING);
  for (int i = 0; i < 3; i++) {
    ck_assert_uint_eq(eng_tensor_strs(&t)[i].len, 0);
    ck_assert_str_eq(eng_tensor_str_bytes(&t, i), "");
  }
  eng_tensor_release(&t);

  eng_shape z = shp(1, 0, 0, 0);
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_STRING, &z, NULL), TD_OK);
  ck_assert_int_eq(eng_tensor_numel(&t), 0);
  eng_tensor_release(&t);
}
END_TEST

/* --- handles ----------------------------------------------------------- */

START_TEST(handles) {
  eng_tensor h, r;
  ck_assert_int_eq(eng_tensor_alloc_handle(&h, 42, false, NULL), TD_OK);
  ck_assert_int_eq(h.dtype, ENG_DT_RESOURCE);
  ck_assert(!h.is_ref);
  ck_assert_int_eq(h.shape.rank, 0);
  ck_assert_int_eq(eng_tensor_handle(&h), 42);
  ck_assert_int_eq(eng_tensor_alloc_handle(&r, INT64_C(1) << 40, true, NULL), TD_OK);
  ck_assert(r.is_ref);
  ck_assert_int_eq(eng_tensor_handle(&r), INT64_C(1) << 40);

  eng_tensor c;
  ck_assert_int_eq(eng_tensor_copy(&c, &r, NULL), TD_OK);
  ck_assert_ptr_ne(c.buf, r.buf);
  ck_assert(c.is_ref);
  ck_assert_int_eq(c.dtype, ENG_DT_RESOURCE);
  ck_assert_int_eq(eng_tensor_handle(&c), INT64_C(1) << 40);
  eng_tensor_release(&c);
  eng_tensor_release(&h);
  eng_tensor_release(&r);
}
END_TEST

/* --- sharing and copies ------------------------------------------------- */

START_TEST(share_release_refcounts) {
  eng_shape s = shp(1, 4, 0, 0);
  eng_tensor a;
  ck_assert_int_eq(eng_tensor_alloc(&a, ENG_DT_INT32, &s, NULL), TD_OK);
  int32_t *d = eng_tensor_data(&a);
  for (int i = 0; i < 4; i++) d[i] = i * 10;
  eng_tensor b = eng_tensor_share(&a);
  eng_tensor c = eng_tensor_share(&b);
  ck_assert_ptr_eq(b.buf, a.buf);
  ck_assert_ptr_eq(c.buf, a.buf);
  ck_assert(eng_shape_equal(&b.shape, &a.shape));
  ck_assert_int_eq(b.dtype, ENG_DT_INT32);
  eng_tensor_release(&a);
  ck_assert_ptr_null(a.buf);
  /* b and c still hold the buffer (ASan would flag a use after free). */
  ck_assert_int_eq(((int32_t *)eng_tensor_data(&b))[3], 30);
  eng_tensor_release(&b);
  ck_assert_int_eq(((int32_t *)eng_tensor_data(&c))[2], 20);
  eng_tensor_release(&c);
  /* Releasing empty tensors is a no-op, twice over. */
  eng_tensor_release(&c);
  eng_tensor empty = {0};
  eng_tensor_release(&empty);
  eng_tensor e2 = eng_tensor_share(&empty);
  ck_assert_ptr_null(e2.buf);
  ck_assert_ptr_null(eng_tensor_data(&empty));
}
END_TEST

START_TEST(copy_numeric) {
  eng_shape s = shp(2, 3, 2, 0);
  eng_tensor a, b;
  ck_assert_int_eq(eng_tensor_alloc(&a, ENG_DT_DOUBLE, &s, NULL), TD_OK);
  double *d = eng_tensor_data(&a);
  for (int i = 0; i < 6; i++) d[i] = 1.5 * i - 2;
  ck_assert_int_eq(eng_tensor_copy(&b, &a, NULL), TD_OK);
  ck_assert_ptr_ne(b.buf, a.buf);
  ck_assert_int_eq(b.dtype, ENG_DT_DOUBLE);
  ck_assert(eng_shape_equal(&b.shape, &s));
  ck_assert_mem_eq(eng_tensor_data(&b), d, 6 * sizeof(double));
  d[0] = 99; /* independent buffers */
  ck_assert_double_eq(((double *)eng_tensor_data(&b))[0], -2);
  eng_tensor_release(&a);
  ck_assert_double_eq(((double *)eng_tensor_data(&b))[5], 5.5);
  eng_tensor_release(&b);
}
END_TEST

START_TEST(copy_strings) {
  size_t lens[] = {3, 0, 6};
  eng_shape s = shp(1, 3, 0, 0);
  eng_tensor a, b;
  ck_assert_int_eq(eng_tensor_alloc_strings(&a, &s, lens, NULL), TD_OK);
  memcpy(eng_tensor_str_bytes(&a, 0), "abc", 3);
  memcpy(eng_tensor_str_bytes(&a, 2), "xy\0z!?", 6);
  ck_assert_int_eq(eng_tensor_copy(&b, &a, NULL), TD_OK);
  ck_assert_ptr_ne(b.buf, a.buf);
  eng_tensor_release(&a);
  eng_str *st = eng_tensor_strs(&b);
  ck_assert_uint_eq(st[0].len, 3);
  ck_assert_mem_eq(st[0].data, "abc", 3);
  ck_assert_uint_eq(st[1].len, 0);
  ck_assert_uint_eq(st[2].len, 6);
  ck_assert_mem_eq(st[2].data, "xy\0z!?", 6);
  /* The copy's pointers point into its own buffer. */
  char *lo = eng_tensor_data(&b);
  for (int i = 0; i < 3; i++) ck_assert(st[i].data >= lo);
  eng_tensor_release(&b);
}
END_TEST

/* A product past int64 saturates even when the wrapped value is 0. */
START_TEST(numel_saturates_on_overflow) {
  int64_t wraps_to_zero[2] = {(int64_t)1 << 62, (int64_t)1 << 62};
  eng_shape s = eng_shape_make(2, wraps_to_zero);
  ck_assert_int_eq(eng_shape_numel(&s), INT64_MAX);
  int64_t with_zero[3] = {(int64_t)1 << 62, (int64_t)1 << 62, 0};
  s = eng_shape_make(3, with_zero);
  ck_assert_int_eq(eng_shape_numel(&s), 0);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("eng_tensor");
  TCase *tc = tcase_create("core");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, shape_numel);
  tcase_add_test(tc, shape_equal_and_fits);
  tcase_add_test(tc, shape_str);
  tcase_add_test(tc, alloc_zeroed_aligned);
  tcase_add_test(tc, alloc_scalar_and_empty);
  tcase_add_test(tc, alloc_rejects_bad_shapes);
  tcase_add_test(tc, alloc_rejects_unstorable_dtypes);
  tcase_add_test(tc, strings_explicit);
  tcase_add_test(tc, strings_alloc_empty);
  tcase_add_test(tc, handles);
  tcase_add_test(tc, share_release_refcounts);
  tcase_add_test(tc, copy_numeric);
  tcase_add_test(tc, copy_strings);
  tcase_add_test(tc, numel_saturates_on_overflow);
  tcase_add_test(tc, strings_size_counts_entries_and_saturates);
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
