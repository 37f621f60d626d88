/* Unit tests for server/srv_jsonwrite: number formatting, string escaping,
 * base64, the PrettyWriter clone's layout and limits, and values quoted in
 * error messages. */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_jsonparse.h"
#include "srv_jsonwrite.h"

/* ----------------------------------------------------------------- helpers */

static char *fmtf(float v) {
  static char b[SRV_JSON_NUMBER_MAX];
  int n = srv_json_format_float(v, b, sizeof b);
  ck_assert_int_eq(n, (int)strlen(b));
  return b;
}

static char *fmtd(double v) {
  static char b[SRV_JSON_NUMBER_MAX];
  int n = srv_json_format_double(v, b, sizeof b);
  ck_assert_int_eq(n, (int)strlen(b));
  return b;
}

/* ------------------------------------------------------- number formatting */

START_TEST(test_format_float) {
  ck_assert_str_eq(fmtf(3.0f), "3.0");
  ck_assert_str_eq(fmtf(2.5f), "2.5");
  ck_assert_str_eq(fmtf(0.1f), "0.1");
  ck_assert_str_eq(fmtf(1e-05f), "1e-05");
  ck_assert_str_eq(fmtf(9e+06f), "9e+06");
  ck_assert_str_eq(fmtf(-4.0f), "-4.0");
  ck_assert_str_eq(fmtf(0.0f), "0.0");
  ck_assert_str_eq(fmtf(-0.0f), "-0.0");
  ck_assert_str_eq(fmtf(123456.0f), "123456.0");
  ck_assert_str_eq(fmtf(1435774336.0f), "1.43577434e+09");
  volatile float a = 0.1f, b = 0.2f;
  ck_assert_str_eq(fmtf(a + b), "0.3"); /* rounds to 0.3f in float */
  ck_assert_str_eq(fmtf(1.0f + 1.1920929e-07f), "1.00000012");
  ck_assert_str_eq(fmtf(16777215.0f), "16777215.0");
  ck_assert_str_eq(fmtf(NAN), "NaN");
  ck_assert_str_eq(fmtf(INFINITY), "Infinity");
  ck_assert_str_eq(fmtf(-INFINITY), "-Infinity");
  /* truncation is snprintf-like */
  char small[4];
  ck_assert_int_eq(srv_json_format_float(1435774336.0f, small, sizeof small), 14);
  ck_assert_str_eq(small, "1.4");
}
END_TEST

/* The definition srv_json_format_float must match byte for byte (TF's
 * WriteDecimal): snprintf %g, %.9g when that does not read back, ".0" on
 * plain integers. The fast path is checked against it on floats of
 * special interest and on about a million others. */
static void reference_float(float v, char *out) {
  if (isnan(v)) {
    strcpy(out, "NaN");
    return;
  }
  if (isinf(v)) {
    strcpy(out, v < 0 ? "-Infinity" : "Infinity");
    return;
  }
  int len = snprintf(out, 40, "%g", (double)v);
  if (strtof(out, NULL) != v) len = snprintf(out, 40, "%.9g", (double)v);
  if (!strchr(out, '.') && !strchr(out, 'e')) strcpy(out + len, ".0");
}

static void check_float(float v) {
  char want[48], got[SRV_JSON_NUMBER_MAX];
  reference_float(v, want);
  int n = srv_json_format_float(v, got, sizeof got);
  ck_assert_msg(!strcmp(got, want) && n == (int)strlen(want), "%a: got %s, want %s", (double)v,
                got, want);
}

START_TEST(test_format_float_matches_printf) {
  /* Decimal-looking values, powers of ten and their neighbours, ties. */
  for (int e = -45; e <= 38; e++) {
    char t[16];
    snprintf(t, sizeof t, "1e%d", e);
    float p = strtof(t, NULL);
    for (int k = -3; k <= 3; k++) {
      float q = p;
      for (int j = 0; j < (k < 0 ? -k : k); j++) q = nextafterf(q, k < 0 ? 0 : INFINITY);
      check_float(q);
      check_float(-q);
    }
  }
  for (int i = 0; i < 2000; i++) {
    check_float((float)i / 1000.0f);
    check_float((float)i * 0.1f);
    check_float(0.5f * (float)i + 2.0f);
    check_float((float)i + 0.5f);
  }
  /* Random bit patterns: every exponent, including subnormals. A fixed
   * sample: the exhaustive sweep is the srv_jsonwrite fuzzer's job. */
  uint32_t x = 2463534242u;
  for (int i = 0; i < 5000; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    float f;
    memcpy(&f, &x, 4);
    check_float(f);
  }
  check_float(0.0f);
  check_float(-0.0f);
  check_float(FLT_MAX);
  check_float(FLT_MIN);
  check_float(FLT_TRUE_MIN);
}
END_TEST

START_TEST(test_format_double) {
  ck_assert_str_eq(fmtd(3.0), "3.0");
  ck_assert_str_eq(fmtd(2.5), "2.5");
  ck_assert_str_eq(fmtd(0.1), "0.1");
  ck_assert_str_eq(fmtd(1e-05), "1e-05");
  ck_assert_str_eq(fmtd(9e+06), "9e+06");
  ck_assert_str_eq(fmtd(16777217.0), "16777217.0");
  volatile double a = 0.1, b = 0.2;
  ck_assert_str_eq(fmtd(a + b), "0.30000000000000004");
  ck_assert_str_eq(fmtd((double)0.1f), "0.10000000149011612");
  ck_assert_str_eq(fmtd(1e300), "1e+300");
  ck_assert_str_eq(fmtd(NAN), "NaN");
  ck_assert_str_eq(fmtd(INFINITY), "Infinity");
  ck_assert_str_eq(fmtd(-INFINITY), "-Infinity");
}
END_TEST

START_TEST(test_append_string) {
  td_buf b;
  td_buf_init(&b);
  srv_json_append_string(&b, "a\"b\\c\n\t\x01\x1f/\xc3\xa9", 12);
  ck_assert_str_eq(b.data, "\"a\\\"b\\\\c\\n\\t\\u0001\\u001F/\xc3\xa9\"");
  td_buf_reset(&b);
  srv_json_append_string(&b, "a\0b", 3);
  ck_assert_str_eq(b.data, "\"a\\u0000b\"");
  td_buf_free(&b);
}
END_TEST

START_TEST(test_base64) {
  char out[64];
  size_t n = 0;
  ck_assert(srv_json_b64_decode("aGVsbG8=", 8, out, &n));
  ck_assert_int_eq(n, 5);
  ck_assert(memcmp(out, "hello", 5) == 0);
  ck_assert(srv_json_b64_decode("aGVsbG8", 7, NULL, &n)); /* padding optional */
  ck_assert_int_eq(n, 5);
  ck_assert(srv_json_b64_decode("aGVs\nbG8=", 9, NULL, &n)); /* whitespace skipped */
  ck_assert_int_eq(n, 5);
  ck_assert(srv_json_b64_decode("", 0, NULL, &n));
  ck_assert_int_eq(n, 0);
  ck_assert(!srv_json_b64_decode("a", 1, NULL, NULL));       /* 6 leftover bits */
  ck_assert(!srv_json_b64_decode("aGVsbG8==", 9, NULL, NULL)); /* wrong padding */
  ck_assert(!srv_json_b64_decode("aGV*", 4, NULL, NULL));
  ck_assert(!srv_json_b64_decode("aG=s", 4, NULL, NULL));
  td_buf b;
  td_buf_init(&b);
  srv_json_b64_encode(&b, "hello", 5);
  ck_assert_str_eq(b.data, "aGVsbG8=");
  td_buf_reset(&b);
  srv_json_b64_encode(&b, "\xff\x00", 2);
  ck_assert_str_eq(b.data, "/wA=");
  td_buf_free(&b);
}
END_TEST

/* ------------------------------------------------------------------ writer */

START_TEST(test_writer_layout) {
  td_buf b;
  td_buf_init(&b);
  td_buf_puts(&b, "pre:"); /* the writer appends, leaving earlier bytes alone */
  srv_json_writer w;
  srv_json_writer_init(&w, &b);
  srv_json_writer_begin_object(&w);
  srv_json_writer_key(&w, "a", 1);
  srv_json_writer_int64(&w, INT64_MIN);
  srv_json_writer_key(&w, "b", 1);
  srv_json_writer_begin_array(&w);
  srv_json_writer_uint64(&w, UINT64_MAX);
  srv_json_writer_bool(&w, true);
  srv_json_writer_raw(&w, "null", 4);
  srv_json_writer_string(&w, "s\n", 2);
  srv_json_writer_end_array(&w);
  srv_json_writer_key(&w, "c", 1);
  srv_json_writer_begin_object(&w);
  srv_json_writer_end_object(&w);
  srv_json_writer_key(&w, "d", 1);
  srv_json_writer_begin_array(&w);
  srv_json_writer_end_array(&w);
  srv_json_writer_end_object(&w);
  ck_assert_str_eq(b.data,
                   "pre:{\n    \"a\": -9223372036854775808,\n    \"b\": [\n"
                   "        18446744073709551615,\n        true,\n        null,\n"
                   "        \"s\\n\"\n    ],\n    \"c\": {},\n    \"d\": []\n}");
  ck_assert(!w.truncated);
  ck_assert_int_eq(w.depth, 0);

  /* single-line arrays, as rapidjson's kFormatSingleLineArray */
  td_buf_reset(&b);
  srv_json_writer_init(&w, &b);
  w.single_line = true;
  srv_json_writer_begin_array(&w);
  srv_json_writer_float(&w, 1.5f);
  srv_json_writer_double(&w, 0.1);
  srv_json_writer_begin_array(&w);
  srv_json_writer_float(&w, NAN);
  srv_json_writer_end_array(&w);
  srv_json_writer_end_array(&w);
  ck_assert_str_eq(b.data, "[1.5, 0.1, [NaN]]");
  td_buf_free(&b);
}
END_TEST

START_TEST(test_writer_limits) {
  td_buf b;
  td_buf_init(&b);
  srv_json_writer w;
  srv_json_writer_init(&w, &b);
  w.limit = 8;
  srv_json_writer_string(&w, "abcdefghijkl", 12); /* cut inside the string, unclosed */
  ck_assert(w.truncated);
  ck_assert_str_eq(b.data, "\"abcdefgh");
  srv_json_writer_int64(&w, 1); /* ignored once truncated */
  ck_assert_str_eq(b.data, "\"abcdefgh");

  /* nesting past SRV_JSON_WRITER_DEPTH stops output rather than overflow */
  td_buf_reset(&b);
  srv_json_writer_init(&w, &b);
  w.single_line = true;
  for (int i = 0; i <= SRV_JSON_WRITER_DEPTH; i++) srv_json_writer_begin_array(&w);
  ck_assert(w.truncated);
  ck_assert_int_eq(w.depth, SRV_JSON_WRITER_DEPTH);
  ck_assert_uint_eq(b.len, SRV_JSON_WRITER_DEPTH);
  td_buf_free(&b);
}
END_TEST

/* ----------------------------------------------------- values in messages */

static char *quote(const char *json) {
  cJSON *root = NULL;
  ck_assert_int_eq(srv_json_parse(json, strlen(json), &root, NULL), TD_OK);
  td_buf b;
  td_buf_init(&b);
  srv_json_append_value(&b, root);
  srv_json_free(root);
  return td_buf_take(&b, NULL);
}

START_TEST(test_append_value) {
  char *s = quote("[1, 1.5, 1e-7, 1e30, -0.0, 18446744073709551615, \"a\\u0000b\", true, null, "
                  "{}]");
  ck_assert_str_eq(s, "[\n    1,\n    1.5,\n    1e-7,\n    1e30,\n    -0.0,\n"
                      "    18446744073709551615,\n    \"a\\u0000b\",\n    true,\n    null,\n"
                      "    {}\n]");
  free(s);
  /* a decimal at the top level prints as TF's float (double beyond float range) */
  s = quote("0.1");
  ck_assert_str_eq(s, "0.1");
  free(s);
  s = quote("1e300");
  ck_assert_str_eq(s, "1e+300");
  free(s);
  s = quote("{\"k\": [NaN]}");
  ck_assert_str_eq(s, "{\n    \"k\": [\n        NaN\n    ]\n}");
  free(s);

  td_buf b;
  td_buf_init(&b);
  srv_json_append_value(&b, NULL);
  ck_assert_str_eq(b.data, "null");

  /* cut after SRV_JSON_VALUE_TEXT_MAX bytes, "..." appended */
  char long_json[1024];
  long_json[0] = '"';
  memset(long_json + 1, 'x', 600);
  strcpy(long_json + 601, "\"");
  s = quote(long_json);
  ck_assert_uint_eq(strlen(s), 1 + SRV_JSON_VALUE_TEXT_MAX + 3);
  ck_assert_str_eq(s + strlen(s) - 4, "x...");
  free(s);

  /* trees not built by srv_json_parse have no integer marks */
  cJSON *plain = cJSON_Parse("[1]");
  td_buf_reset(&b);
  srv_json_append_value(&b, plain);
  ck_assert_str_eq(b.data, "[\n    1.0\n]");
  cJSON_Delete(plain);
  td_buf_free(&b);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("srv_jsonwrite");
  TCase *tc = tcase_create("format");
  tcase_add_test(tc, test_format_float);
  tcase_add_test(tc, test_format_float_matches_printf);
  tcase_add_test(tc, test_format_double);
  tcase_add_test(tc, test_append_string);
  tcase_add_test(tc, test_base64);
  suite_add_tcase(s, tc);
  tc = tcase_create("writer");
  tcase_add_test(tc, test_writer_layout);
  tcase_add_test(tc, test_writer_limits);
  tcase_add_test(tc, test_append_value);
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
