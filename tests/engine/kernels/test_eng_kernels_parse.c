/* ParseExample / ParseExampleV2 (eng_kernels_parse.c), called through the
 * op table on hand-built tf.Example wire bytes: dense float / int64 / bytes
 * features, defaults, protobuf merge semantics (context ++ example), the
 * error messages, and every truncation of a valid message failing cleanly. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_op.h"

/* --- a tiny protobuf writer ------------------------------------------------ */
typedef struct pb {
  uint8_t b[4096];
  size_t n;
} pb;

static void varint(pb *p, uint64_t v) {
  do {
    uint8_t c = v & 0x7F;
    v >>= 7;
    p->b[p->n++] = c | (v ? 0x80 : 0);
  } while (v);
}
static void tag(pb *p, int num, int type) { varint(p, (uint64_t)num << 3 | (uint64_t)type); }
static void bytes(pb *p, int num, const void *d, size_t n) {
  tag(p, num, 2);
  varint(p, n);
  memcpy(p->b + p->n, d, n);
  p->n += n;
}
static void sub(pb *p, int num, const pb *inner) { bytes(p, num, inner->b, inner->n); }

/* Feature with a packed float list. */
static pb feature_floats(const float *v, int n) {
  pb list = {0}, f = {0};
  bytes(&list, 1, v, (size_t)n * 4);
  sub(&f, 2, &list);
  return f;
}
static pb feature_ints(const int64_t *v, int n, bool packed) {
  pb list = {0}, f = {0}, pk = {0};
  if (packed) {
    for (int i = 0; i < n; i++) varint(&pk, (uint64_t)v[i]);
    bytes(&list, 1, pk.b, pk.n);
  } else {
    for (int i = 0; i < n; i++) {
      tag(&list, 1, 0);
      varint(&list, (uint64_t)v[i]);
    }
  }
  sub(&f, 3, &list);
  return f;
}
static pb feature_bytes(const char *const *v, int n) {
  pb list = {0}, f = {0};
  for (int i = 0; i < n; i++) bytes(&list, 1, v[i], strlen(v[i]));
  sub(&f, 1, &list);
  return f;
}

/* Example{features{feature{key: value}...}} from (key, Feature) pairs. */
static pb example(int n, const char *const *keys, const pb *feats) {
  pb features = {0}, ex = {0};
  for (int i = 0; i < n; i++) {
    pb entry = {0};
    bytes(&entry, 1, keys[i], strlen(keys[i]));
    sub(&entry, 2, &feats[i]);
    sub(&features, 1, &entry);
  }
  sub(&ex, 1, &features);
  return ex;
}

/* --- tensors and the kernel call -------------------------------------------- */
static eng_tensor strings(int rank, int64_t n, const pb *const *items) {
  size_t lens[16];
  for (int64_t i = 0; i < n; i++) lens[i] = items[i]->n;
  eng_shape s = rank ? eng_shape_make(1, (int64_t[]){n}) : eng_shape_scalar();
  eng_tensor t = {0};
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s, lens, NULL), TD_OK);
  for (int64_t i = 0; i < n; i++) memcpy(eng_tensor_str_bytes(&t, i), items[i]->b, items[i]->n);
  return t;
}

static eng_tensor keys_tensor(int n, const char *const *keys) {
  size_t lens[16];
  for (int i = 0; i < n; i++) lens[i] = strlen(keys[i]);
  eng_shape s = eng_shape_make(1, (int64_t[]){n});
  eng_tensor t = {0};
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s, lens, NULL), TD_OK);
  for (int i = 0; i < n; i++) memcpy(eng_tensor_str_bytes(&t, i), keys[i], lens[i]);
  return t;
}

static eng_tensor empty_strings(void) {
  eng_shape s = eng_shape_make(1, (int64_t[]){0});
  eng_tensor t = {0};
  ck_assert_int_eq(eng_tensor_alloc_strings(&t, &s, NULL, NULL), TD_OK);
  return t;
}

static eng_tensor floats(int n, const float *v) {
  eng_shape s = eng_shape_make(1, (int64_t[]){n});
  eng_tensor t = {0};
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &s, NULL), TD_OK);
  if (n) memcpy(eng_tensor_data(&t), v, (size_t)n * 4);
  return t;
}

typedef struct dense {
  const char *key;
  eng_dtype dt;
  eng_shape shape;
  eng_tensor dflt; /* empty (numel 0) = required */
} dense;

/* Runs ParseExampleV2 on `ser` for dense specs; returns the code, outputs in out[]. */
static td_code run_v2(eng_tensor *ser, int nd, dense *d, eng_tensor *out, td_err *err,
                      int64_t num_sparse) {
  eng_dtype types[8];
  eng_shape shapes[8];
  const char *keys[8];
  for (int k = 0; k < nd; k++) {
    types[k] = d[k].dt;
    shapes[k] = d[k].shape;
    keys[k] = d[k].key;
  }
  eng_attr attrs[3] = {
      {.name = "Tdense", .kind = ENG_ATTR_LIST, .list_kind = ENG_ATTR_TYPE, .n = nd, .ltype = types},
      {.name = "dense_shapes", .kind = ENG_ATTR_LIST, .list_kind = ENG_ATTR_SHAPE, .n = nd,
       .lshape = shapes},
      {.name = "num_sparse", .kind = ENG_ATTR_I, .i = num_sparse},
  };
  eng_node node = {.name = "parse", .op = "ParseExampleV2", .n_attr = 3, .attr = attrs,
                   .n_out = nd};
  eng_tensor in[12] = {0};
  in[0] = *ser;
  in[1] = empty_strings();
  in[2] = empty_strings();
  in[3] = keys_tensor(nd, keys);
  in[4] = empty_strings();
  for (int k = 0; k < nd; k++) in[5 + k] = d[k].dflt;
  eng_kctx c = {.node = &node, .n_in = 5 + nd, .in = in, .n_out = nd, .out = out, .err = err};
  const eng_op_def *op = eng_op_find("ParseExampleV2");
  ck_assert_ptr_nonnull(op);
  td_code rc = op->cpu(&c);
  for (int i = 1; i < 5; i++) eng_tensor_release(&in[i]);
  return rc;
}

static dense fdense(const char *key, int n, const float *dflt) {
  return (dense){key, ENG_DT_FLOAT, eng_shape_make(1, (int64_t[]){n}),
                 dflt ? floats(n, dflt) : floats(0, NULL)};
}

static void release_all(eng_tensor *t, int n) {
  for (int i = 0; i < n; i++) eng_tensor_release(&t[i]);
}

START_TEST(dense_floats_with_default) {
  const char *k1[] = {"x"};
  pb f1[] = {feature_floats((float[]){2.0f}, 1)};
  pb e1 = example(1, k1, f1);
  const char *k2[] = {"x", "x2"};
  pb f2[] = {feature_floats((float[]){-3.5f}, 1), feature_floats((float[]){7.0f}, 1)};
  pb e2 = example(2, k2, f2);
  const pb *items[] = {&e1, &e2};
  eng_tensor ser = strings(1, 2, items);
  dense d[] = {fdense("x", 1, NULL), fdense("x2", 1, (float[]){0.25f})};
  eng_tensor out[2] = {0};
  td_err err;
  td_code rc = run_v2(&ser, 2, d, out, &err, 0);
  ck_assert_msg(rc == TD_OK, "%s", err.msg);
  ck_assert_int_eq(out[0].shape.rank, 2);
  ck_assert_int_eq(out[0].shape.dim[0], 2);
  ck_assert_int_eq(out[0].shape.dim[1], 1);
  const float *x = eng_tensor_data(&out[0]), *x2 = eng_tensor_data(&out[1]);
  ck_assert(x[0] == 2.0f && x[1] == -3.5f);
  ck_assert(x2[0] == 0.25f && x2[1] == 7.0f); /* default, then given */
  release_all(out, 2);
  release_all((eng_tensor[]){ser, d[0].dflt, d[1].dflt}, 3);
}
END_TEST

START_TEST(context_then_example_merges) {
  /* TF Serving feeds context bytes followed by example bytes: a key in both
   * takes the example's value; a key only in the context is kept. */
  const char *kc[] = {"x", "x2"};
  pb fc[] = {feature_floats((float[]){7.0f}, 1), feature_floats((float[]){9.0f}, 1)};
  pb ctx = example(2, kc, fc);
  const char *ke[] = {"x"};
  pb fe[] = {feature_floats((float[]){1.0f}, 1)};
  pb ex = example(1, ke, fe);
  pb both = ctx;
  memcpy(both.b + both.n, ex.b, ex.n);
  both.n += ex.n;
  const pb *items[] = {&both, &ctx};
  eng_tensor ser = strings(1, 2, items);
  dense d[] = {fdense("x", 1, NULL), fdense("x2", 1, NULL)};
  eng_tensor out[2] = {0};
  td_err err;
  ck_assert_msg(run_v2(&ser, 2, d, out, &err, 0) == TD_OK, "%s", err.msg);
  const float *x = eng_tensor_data(&out[0]), *x2 = eng_tensor_data(&out[1]);
  ck_assert(x[0] == 1.0f && x[1] == 7.0f);
  ck_assert(x2[0] == 9.0f && x2[1] == 9.0f);
  release_all(out, 2);
  release_all((eng_tensor[]){ser, d[0].dflt, d[1].dflt}, 3);
}
END_TEST

START_TEST(ints_and_bytes) {
  const char *k[] = {"ids", "ids2", "tags"};
  pb f[] = {feature_ints((int64_t[]){5, -1}, 2, true), feature_ints((int64_t[]){1LL << 40}, 1, false),
            feature_bytes((const char *[]){"ab", ""}, 2)};
  pb e = example(3, k, f);
  const pb *items[] = {&e};
  eng_tensor ser = strings(0, 1, items); /* a scalar: no batch dim */
  eng_tensor no_default = {0};
  eng_shape s0 = eng_shape_make(1, (int64_t[]){0});
  ck_assert_int_eq(eng_tensor_alloc(&no_default, ENG_DT_INT64, &s0, NULL), TD_OK);
  eng_tensor no_default2 = eng_tensor_share(&no_default);
  eng_tensor no_default_s = empty_strings();
  dense d[] = {{"ids", ENG_DT_INT64, eng_shape_make(1, (int64_t[]){2}), no_default},
               {"ids2", ENG_DT_INT64, eng_shape_make(1, (int64_t[]){1}), no_default2},
               {"tags", ENG_DT_STRING, eng_shape_make(1, (int64_t[]){2}), no_default_s}};
  eng_tensor out[3] = {0};
  td_err err;
  ck_assert_msg(run_v2(&ser, 3, d, out, &err, 0) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(out[0].shape.rank, 1);
  const int64_t *ids = eng_tensor_data(&out[0]), *ids2 = eng_tensor_data(&out[1]);
  ck_assert(ids[0] == 5 && ids[1] == -1 && ids2[0] == 1LL << 40);
  const eng_str *tags = eng_tensor_strs(&out[2]);
  ck_assert(tags[0].len == 2 && !memcmp(tags[0].data, "ab", 2) && tags[1].len == 0);
  release_all(out, 3);
  release_all((eng_tensor[]){ser, no_default, no_default2, no_default_s}, 4);
}
END_TEST

static void expect_error(const pb *e, dense *d, int nd, td_code code, const char *needle) {
  const pb *items[] = {e};
  eng_tensor ser = strings(1, 1, items);
  eng_tensor out[4] = {0};
  td_err err;
  td_err_clear(&err);
  td_code rc = run_v2(&ser, nd, d, out, &err, 0);
  ck_assert_msg(rc == code, "want %s, got %s (%s)", td_code_name(code), td_code_name(rc), err.msg);
  ck_assert_msg(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
  for (int i = 0; i < nd; i++) ck_assert_ptr_null(out[i].buf); /* nothing leaks out */
  eng_tensor_release(&ser);
}

START_TEST(errors_name_the_feature) {
  dense d[] = {fdense("x", 1, NULL)};
  const char *k[] = {"y"};
  pb f[] = {feature_floats((float[]){1}, 1)};
  pb e = example(1, k, f);
  expect_error(&e, d, 1, TD_INVALID_ARGUMENT,
               "Name: <unknown>, Feature: x (data type: float) is required but could not be found.");
  const char *kx[] = {"x"};
  pb fi[] = {feature_ints((int64_t[]){1}, 1, true)};
  e = example(1, kx, fi);
  expect_error(&e, d, 1, TD_INVALID_ARGUMENT, "Key: x, Index: 0.  Data types don't match.");
  pb f2[] = {feature_floats((float[]){1, 2}, 2)};
  e = example(1, kx, f2);
  expect_error(&e, d, 1, TD_INVALID_ARGUMENT,
               "Number of float values != expected.  Values size: 2 but output shape: [1]");
  pb junk = {.b = {0xFF, 0xFF, 0xFF}, .n = 3};
  expect_error(&junk, d, 1, TD_INVALID_ARGUMENT, "Could not parse example input");
  eng_tensor_release(&d[0].dflt);
}
END_TEST

START_TEST(sparse_is_unimplemented) {
  dense d[] = {fdense("x", 1, NULL)};
  pb e = {0};
  const pb *items[] = {&e};
  eng_tensor ser = strings(1, 1, items);
  eng_tensor out[1] = {0};
  td_err err;
  ck_assert_int_eq(run_v2(&ser, 1, d, out, &err, 1), TD_UNIMPLEMENTED);
  ck_assert_ptr_nonnull(strstr(err.msg, "sparse"));
  release_all((eng_tensor[]){ser, d[0].dflt}, 2);
}
END_TEST

START_TEST(every_truncation_fails_cleanly) {
  const char *k[] = {"x", "tags"};
  pb f[] = {feature_floats((float[]){1.5f}, 1), feature_bytes((const char *[]){"abc"}, 1)};
  pb e = example(2, k, f);
  for (size_t cut = 0; cut < e.n; cut++) {
    pb t = e;
    t.n = cut;
    const pb *items[] = {&t};
    eng_tensor ser = strings(1, 1, items);
    dense d[] = {fdense("x", 1, (float[]){0})};
    eng_tensor out[1] = {0};
    td_err err;
    td_code rc = run_v2(&ser, 1, d, out, &err, 0);
    ck_assert_msg(rc == TD_OK || rc == TD_INVALID_ARGUMENT, "cut %zu: %s", cut, td_code_name(rc));
    release_all(out, 1);
    release_all((eng_tensor[]){ser, d[0].dflt}, 2);
  }
}
END_TEST

START_TEST(v1_parse_example) {
  const char *k[] = {"x"};
  pb f[] = {feature_floats((float[]){4.0f}, 1)};
  pb e = example(1, k, f);
  const pb *items[] = {&e, &e};
  eng_dtype types[] = {ENG_DT_FLOAT};
  eng_shape shapes[] = {eng_shape_make(1, (int64_t[]){1})};
  eng_attr attrs[] = {
      {.name = "Nsparse", .kind = ENG_ATTR_I, .i = 0},
      {.name = "Ndense", .kind = ENG_ATTR_I, .i = 1},
      {.name = "Tdense", .kind = ENG_ATTR_LIST, .list_kind = ENG_ATTR_TYPE, .n = 1, .ltype = types},
      {.name = "dense_shapes", .kind = ENG_ATTR_LIST, .list_kind = ENG_ATTR_SHAPE, .n = 1,
       .lshape = shapes},
  };
  eng_node node = {.name = "p", .op = "ParseExample", .n_attr = 4, .attr = attrs, .n_out = 1};
  eng_tensor key = {0};
  eng_shape sc = eng_shape_scalar();
  size_t one = 1;
  ck_assert_int_eq(eng_tensor_alloc_strings(&key, &sc, &one, NULL), TD_OK);
  memcpy(eng_tensor_str_bytes(&key, 0), "x", 1);
  eng_tensor in[4] = {strings(1, 2, items), empty_strings(), key, floats(0, NULL)};
  eng_tensor out[1] = {0};
  td_err err;
  eng_kctx c = {.node = &node, .n_in = 4, .in = in, .n_out = 1, .out = out, .err = &err};
  ck_assert_msg(eng_op_find("ParseExample")->cpu(&c) == TD_OK, "%s", err.msg);
  const float *x = eng_tensor_data(&out[0]);
  ck_assert(out[0].shape.dim[0] == 2 && x[0] == 4.0f && x[1] == 4.0f);
  release_all(out, 1);
  release_all(in, 4);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_kernels_parse");
  TCase *tc = tcase_create("parse");
  tcase_add_test(tc, dense_floats_with_default);
  tcase_add_test(tc, context_then_example_merges);
  tcase_add_test(tc, ints_and_bytes);
  tcase_add_test(tc, errors_name_the_feature);
  tcase_add_test(tc, sparse_is_unimplemented);
  tcase_add_test(tc, every_truncation_fails_cleanly);
  tcase_add_test(tc, v1_parse_example);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? 1 : 0;
}
