/* Unit tests for server/srv_jsonparse: rapidjson's grammar and error
 * messages, integer literals kept exact, NaN/Infinity, strings with escaped
 * NULs, and the accessors. */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_jsonparse.h"

/* ----------------------------------------------------------------- parsing */

static void parse_err(const char *body, size_t len, const char *msg) {
  cJSON sentinel;
  cJSON *root = &sentinel;
  td_err e = {0};
  td_code rc = srv_json_parse(body, len, &root, &e);
  ck_assert_msg(rc == TD_INVALID_ARGUMENT, "parse %s: rc %d", body, rc);
  ck_assert_int_eq(e.code, TD_INVALID_ARGUMENT);
  ck_assert_str_eq(e.msg, msg);
  ck_assert_ptr_eq(root, &sentinel); /* untouched on failure */
}

START_TEST(test_parse_errors) {
  parse_err("", 0, "JSON Parse error: The document is empty. at offset: 0");
  parse_err("   ", 3, "JSON Parse error: The document is empty. at offset: 3");
  parse_err("{", 1, "JSON Parse error: Missing a name for object member. at offset: 1");
  parse_err("{\"a\" 1}", 7, "JSON Parse error: Missing a colon after a name of object member. at offset: 5");
  parse_err("{\"a\":}", 6, "JSON Parse error: Invalid value. at offset: 5");
  parse_err("{\"a\":1 \"b\"}", 11,
            "JSON Parse error: Missing a comma or '}' after an object member. at offset: 7");
  parse_err("{\"a\":[1 2]}", 11,
            "JSON Parse error: Missing a comma or ']' after an array element. at offset: 8");
  parse_err("{\"a\":[1,]}", 10, "JSON Parse error: Invalid value. at offset: 8");
  parse_err("{\"a\":tru}", 9, "JSON Parse error: Invalid value. at offset: 8");
  parse_err("{\"a\":\"x", 7, "JSON Parse error: Missing a closing quotation mark in string. at offset: 7");
  parse_err("{\"a\":\"\\q\"}", 10, "JSON Parse error: Invalid escape character in string. at offset: 6");
  parse_err("{\"a\":\"\\u12x4\"}", 14,
            "JSON Parse error: Incorrect hex digit after \\u escape in string. at offset: 6");
  parse_err("{\"a\":\"\\ud800x\"}", 15,
            "JSON Parse error: The surrogate pair in string is invalid. at offset: 6");
  parse_err("{\"a\":\"\x01\"}", 8, "JSON Parse error: Invalid encoding in string. at offset: 6");
  parse_err("{\"a\":1.}", 8, "JSON Parse error: Miss fraction part in number. at offset: 7");
  parse_err("{\"a\":1e}", 8, "JSON Parse error: Miss exponent in number. at offset: 7");
  parse_err("{\"a\":1e999}", 11, "JSON Parse error: Number too big to be stored in double. at offset: 5");
  parse_err("{\"a\":-x}", 8, "JSON Parse error: Invalid value. at offset: 6");
  parse_err("{\"a\":Nan}", 9, "JSON Parse error: Invalid value. at offset: 7");
  parse_err("{\"a\":Infinit}", 13, "JSON Parse error: Invalid value. at offset: 12");
  parse_err("}", 1, "JSON Parse error: The document is empty. at offset: 0");
  parse_err("\xEF\xBB\xBF[", 4, "JSON Parse error: Invalid value. at offset: 4"); /* BOM skipped */
  parse_err("\xEF\xBB\xBF", 3, "JSON Parse error: The document is empty. at offset: 3");
  /* nesting bound */
  char deep[200];
  int n = 0;
  n += sprintf(deep, "{\"a\":");
  for (int i = 0; i < 70; i++) deep[n++] = '[';
  deep[n] = '\0';
  parse_err(deep, (size_t)n, "JSON Parse error: The document is nested more than 64 levels deep. at offset: 68");
  parse_err("{\"a\":[1]}", 8, "JSON Parse error: Missing a comma or '}' after an object member. "
            "at offset: 8"); /* only text[0..len) is read */
  parse_err("[1\0]", 4, "JSON Parse error: Missing a comma or ']' after an array element. at offset: 2");
}
END_TEST

START_TEST(test_parse_ok) {
  cJSON *root = NULL;
  td_err e = {0};
  const char *body = "  {\"signature_name\": \"sig\", \"x\": [1, -2, 1.0, 1e2, -0, 9223372036854775807, "
                     "-9223372036854775808, 18446744073709551615, 18446744073709551616, "
                     "9007199254740993, NaN, -Infinity, Inf], \"s\": \"a\\u0000b\\u00e9\\ud83d\\ude00\"}"
                     " trailing garbage is ignored";
  ck_assert_int_eq(srv_json_parse(body, strlen(body), &root, &e), TD_OK);
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(root, "x");
  ck_assert_int_eq(cJSON_GetArraySize(x), 13);
  int64_t i;
  uint64_t u;
  const cJSON *v = x->child;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_INT64);
  ck_assert_int_eq(i, 1);
  v = v->next;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_INT64);
  ck_assert_int_eq(i, -2);
  v = v->next;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_DOUBLE);
  ck_assert(v->valuedouble == 1.0);
  v = v->next;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_DOUBLE);
  v = v->next;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_INT64);
  ck_assert_int_eq(i, 0);
  v = v->next;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_INT64);
  ck_assert(i == INT64_MAX);
  v = v->next;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_INT64);
  ck_assert(i == INT64_MIN);
  v = v->next;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_UINT64);
  ck_assert(u == UINT64_MAX);
  v = v->next;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_DOUBLE); /* beyond uint64 */
  v = v->next;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_INT64);
  ck_assert(i == 9007199254740993LL); /* exact beyond 2^53 */
  v = v->next;
  ck_assert(isnan(v->valuedouble));
  v = v->next;
  ck_assert(isinf(v->valuedouble) && v->valuedouble < 0);
  v = v->next;
  ck_assert(isinf(v->valuedouble) && v->valuedouble > 0);
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(root, "s");
  ck_assert_int_eq(srv_json_string_len(s), 9);
  ck_assert(memcmp(s->valuestring, "a\0b\xc3\xa9\xf0\x9f\x98\x80", 9) == 0);
  /* the tree is an ordinary cJSON tree */
  char *printed = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "signature_name"));
  ck_assert_str_eq(printed, "\"sig\"");
  cJSON_free(printed);
  srv_json_free(root);

  /* any root value, a byte-order mark skipped */
  ck_assert_int_eq(srv_json_parse("\xEF\xBB\xBF 7", 5, &root, &e), TD_OK);
  ck_assert_int_eq(srv_json_number(root, &i, NULL), SRV_JSON_NUM_INT64);
  ck_assert_int_eq(i, 7);
  srv_json_free(root);
}
END_TEST

/* --------------------------------------------------------------- accessors */

/* Decimals take an exact fast path (Clinger) when they can; every value
 * must still equal what strtod reads, digit strings of every length and
 * exponents on both sides of the fast path's range alike. */
static void check_decimal(const char *text) {
  if (isinf(strtod(text, NULL))) return; /* refused as too big: tested above */
  cJSON *v = NULL;
  td_err err;
  ck_assert_msg(srv_json_parse(text, strlen(text), &v, &err) == TD_OK, "%s: %s", text, err.msg);
  double want = strtod(text, NULL);
  ck_assert_msg(v->valuedouble == want || (isnan(want) && isnan(v->valuedouble)),
                "%s: got %.17g, want %.17g", text, v->valuedouble, want);
  srv_json_free(v);
}

/* Fixed samples of each shape of decimal; the unbounded comparison with
 * strtod runs in the JSON fuzzer (tests/fuzz/fuzz_json.c). */
START_TEST(test_decimals_match_strtod) {
  uint64_t x = 88172645463325252ULL;
  char t[64];
  for (int i = 0; i < 3000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double r;
    uint64_t bits = x;
    memcpy(&r, &bits, 8);
    if (!isfinite(r)) continue;
    int prec = 1 + (int)(x % 19);
    snprintf(t, sizeof t, "%.*g", prec, r);
    if (!strchr(t, '.') && !strchr(t, 'e')) strcat(t, ".5");
    check_decimal(t);
    snprintf(t, sizeof t, "%.*f", (int)(x % 9) + 1, (double)(x % 100000000) / 1000.0);
    check_decimal(t);
    snprintf(t, sizeof t, "-%llu.%llue%d", (unsigned long long)(x % 1000000),
             (unsigned long long)(x >> 40), (int)(x % 61) - 30);
    check_decimal(t);
  }
  /* Decimals of 16 to 19 digits over a negative power of ten (clients print
   * floats this way), and near-halfway points between adjacent doubles. */
  for (int i = 0; i < 3000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double r = (double)(x >> 11) / (double)(1ULL << 53) * pow(10.0, (double)(x % 13) - 6.0);
    snprintf(t, sizeof t, "%.*g", 16 + (int)(x % 4), r);
    check_decimal(t);
    long double mid = ((long double)r + (long double)nextafter(r, INFINITY)) / 2;
    snprintf(t, sizeof t, "%.*Lg", 17 + (int)(x % 3), mid);
    check_decimal(t);
    snprintf(t, sizeof t, "0.%018llu", (unsigned long long)(x % 1000000000000000000ULL));
    check_decimal(t);
  }
  const char *edge[] = {"0.0", "-0.0", "1e22", "1e23", "9007199254740993.0", "0.1e-22",
                        "0.41900000000000004", "-0.081000000000000003", "123456789.12345678",
                        "0.000000000000000000001", "999999999999999999e-21",
                        "100000000000000000e-18", "0.9999999999999999999",
                        "123456789012345678901234567890.5", "1.7976931348623157e308",
                        "4.9e-324", "2.2250738585072011e-308", "0.30000000000000004",
                        "9007199254740992.5", "1e-5", "1.5e0", "0.000000000000000000000001"};
  for (size_t i = 0; i < sizeof edge / sizeof *edge; i++) check_decimal(edge[i]);
}
END_TEST

START_TEST(test_accessors) {
  cJSON *root = NULL;
  const char *text = "[{\"b64\": \"AA==\"}, {\"b64\": 1}, {\"b64\": \"\", \"x\": 1}, "
                     "{\"B64\": \"\"}, \"s\", 1.5, 2]";
  ck_assert_int_eq(srv_json_parse(text, strlen(text), &root, NULL), TD_OK);
  const cJSON *v = root->child;
  ck_assert(srv_json_is_b64_object(v));
  ck_assert(!srv_json_is_b64_object(v = v->next));
  ck_assert(!srv_json_is_b64_object(v = v->next));
  ck_assert(!srv_json_is_b64_object(v = v->next));
  v = v->next; /* "s" */
  ck_assert(!srv_json_is_b64_object(v));
  int64_t i = 42;
  uint64_t u = 42;
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_DOUBLE); /* not a number */
  ck_assert_int_eq(srv_json_string_len(v), 1);
  v = v->next; /* 1.5 */
  ck_assert_int_eq(srv_json_number(v, &i, &u), SRV_JSON_NUM_DOUBLE);
  ck_assert_int_eq(srv_json_string_len(v), 0); /* not a string */
  ck_assert(i == 42 && u == 42);
  v = v->next; /* 2 */
  ck_assert_int_eq(srv_json_number(v, NULL, NULL), SRV_JSON_NUM_INT64);
  srv_json_free(root);

  /* plain cJSON trees carry no marks: integers read as doubles */
  cJSON *plain = cJSON_Parse("[2, \"ab\"]");
  ck_assert_int_eq(srv_json_number(plain->child, &i, &u), SRV_JSON_NUM_DOUBLE);
  ck_assert_int_eq(srv_json_string_len(plain->child->next), 2);
  cJSON_Delete(plain);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("srv_jsonparse");
  TCase *tc = tcase_create("parse");
  tcase_add_test(tc, test_parse_errors);
  tcase_add_test(tc, test_parse_ok);
  tcase_add_test(tc, test_decimals_match_strtod);
  tcase_add_test(tc, test_accessors);
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
