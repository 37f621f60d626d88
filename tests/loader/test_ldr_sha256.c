/* SHA-256 and HMAC-SHA256 against published vectors (FIPS 180-4 examples,
 * RFC 4231), and S3's SigV4 against signatures botocore computes for the
 * same requests. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_s3.h"
#include "ldr_sha256.h"

static void hex_of(const void *data, size_t n, char out[65]) {
  uint8_t h[LDR_SHA256_LEN];
  ldr_sha256_digest(data, n, h);
  ldr_hex(h, sizeof h, out);
}

START_TEST(test_sha256_vectors) {
  char hx[65];
  hex_of("", 0, hx);
  ck_assert_str_eq(hx, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  hex_of("abc", 3, hx);
  ck_assert_str_eq(hx, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  hex_of(two, strlen(two), hx);
  ck_assert_str_eq(hx, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  /* A million 'a's, fed in uneven pieces across block boundaries. */
  char *a = malloc(1000000);
  memset(a, 'a', 1000000);
  ldr_sha256 c;
  ldr_sha256_init(&c);
  for (size_t off = 0, step = 1; off < 1000000; off += step, step = step * 3 % 1000 + 1)
    ldr_sha256_update(&c, a + off, off + step > 1000000 ? 1000000 - off : step);
  uint8_t h[32];
  ldr_sha256_final(&c, h);
  ldr_hex(h, 32, hx);
  ck_assert_str_eq(hx, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  free(a);
}
END_TEST

START_TEST(test_hmac_rfc4231) {
  uint8_t out[32];
  char hx[65];
  ldr_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, out);
  ldr_hex(out, 32, hx);
  ck_assert_str_eq(hx, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  /* Case 6: a key longer than the block is hashed first. */
  uint8_t key[131];
  memset(key, 0xaa, sizeof key);
  const char *msg = "Test Using Larger Than Block-Size Key - Hash Key First";
  ldr_hmac_sha256(key, sizeof key, msg, strlen(msg), out);
  ldr_hex(out, 32, hx);
  ck_assert_str_eq(hx, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}
END_TEST

static ldr_s3_key example_key(const char *token) {
  ldr_s3_key k = {0};
  strcpy(k.id, "AKIDEXAMPLE");
  strcpy(k.secret, "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY");
  strcpy(k.token, token);
  return k;
}

START_TEST(test_sigv4_matches_botocore) {
  ldr_s3_key k = example_key("");
  char *h[8];
  int n = ldr_s3_sign(&k, "us-east-1", "GET", "127.0.0.1:9000", "/models",
                      "list-type=2&prefix=a%2Fb", "20130524T000000Z", h);
  ck_assert_int_eq(n, 3);
  ck_assert_str_eq(h[0],
                   "Authorization: AWS4-HMAC-SHA256 "
                   "Credential=AKIDEXAMPLE/20130524/us-east-1/s3/aws4_request, "
                   "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                   "Signature=9954f0a0ae074f6785f040a9160656c63b3e7f550c67b2609676173c08617bf7");
  ck_assert_str_eq(h[1], "x-amz-date: 20130524T000000Z");
  for (int i = 0; i < n; i++) free(h[i]);

  k = example_key("session/token+x=");
  n = ldr_s3_sign(&k, "us-east-1", "GET", "127.0.0.1:9000", "/models", "list-type=2&prefix=a%2Fb",
                  "20130524T000000Z", h);
  ck_assert_int_eq(n, 4);
  ck_assert_ptr_nonnull(strstr(h[0],
                               "SignedHeaders=host;x-amz-content-sha256;x-amz-date;"
                               "x-amz-security-token, Signature=136bbc91a8e46981c3f9515e1ad7"
                               "bfd8db903ea44cb6a056c08a02e1de80e6cf"));
  ck_assert_str_eq(h[3], "x-amz-security-token: session/token+x=");
  for (int i = 0; i < n; i++) free(h[i]);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_sha256");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_sha256_vectors);
  tcase_add_test(tc, test_hmac_rfc4231);
  tcase_add_test(tc, test_sigv4_matches_botocore);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
