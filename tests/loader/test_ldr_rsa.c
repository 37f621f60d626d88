/* RS256 against signatures Python's cryptography package made with the same
 * throwaway key (PKCS#1 v1.5 signatures are deterministic), and the base64
 * helpers. The key below was generated for this test only. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_rsa.h"
#include "ldr_sha256.h"
#include "td_testcheck.h"

static const char *PKCS8 =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDDBXWvdYTzcnmC\n"
    "DO1sNCMnKTkp3DCljm4hRYBA39nTZ2/acCLXEMycOH7eOcdjkG0kxorvNNGz2bqm\n"
    "gkS2nJ+xFzbPqZHkffEJ5KcE8szu1JqOjP2BdEGy8q6O1iF2pmCKvwBDjZ8b9mJM\n"
    "xdykNTf4S2YzKyrWaIp43wRtasCD08Qhl+L07Brn02A2hJy6AR0mkvCAoxRTWRD+\n"
    "5DjDincv4sSWAzna9ANXygK4C6GlZOnNnlC75g2sWQLZy+GRQw7Ct3/FmuvbeWyL\n"
    "2bcv0QlBtSRiAqlavEKUFRzSplyESZMUhxFDGxNS0Jn61CWreug+gwJGyts02m2M\n"
    "c27EOu1zAgMBAAECggEACkZ2XelGOQF2D3kY5VOV6pFMdr0oPwDTIqOjz0c8Fdxk\n"
    "U1EHNOeosC512MWYkNFiPsbLOTFCP0SghfdlIW39J/p+I9DeY/iSw5+tgSA91fOT\n"
    "tSEOlkyGzaPluJblqne3rHfFzslecb24jiz6pBg9u7JVTyreFe/qI9Y0SIOQYyGk\n"
    "rUIbLsd48SjnpeLBcvyh9jdB9RScDthkq3xUsshKRdYAGhnMDWlj/kWj32e86e+0\n"
    "2Zu2pkGyVPXahBr2WLljL7QBci0V716UtMF7/cwPFXpak7Qc5OYsflLqfb556h11\n"
    "J9qrCJhAF9Q5qqwXa9AGniDORgpGyF/TGaJCgbPq6QKBgQDlKWfQ8Cg/ZOBzIBIy\n"
    "J+/EZYW5MttPw+DS8VAdhVxnbf82YJmA7sunXHa9siYsuQdR/2VsumtNQGyZZdSL\n"
    "yiv9dbFANNbKoo3epBDUK04Cmac9jmImzntQ9y5yNlaObDeDDmpFu0UhAvNokt+H\n"
    "eDg1v7606kmUJVSIpc16M3tPXQKBgQDZ3HnhK32rRlCmvu8EpjozZko4GCLfqU+A\n"
    "kG7NF7Pzk09IgtIsC0NQz9VMNgqAllGsK5hJpttPdcUoSdHvkGVKTn4xdzkcqok9\n"
    "vJ89XxrxyKSMALnlJq3S9PJ32dlbbqL7r9QS1REh1C1yusk9dOn+66UPZJ6TTQNN\n"
    "GwmWQ5zzDwKBgQCreiBFKG/1f/a0LvturJOt0ooN2xBgz6IcNpZMgM50VsryVbaH\n"
    "1ChwQ7BWokgOjyX7JbEvew9v7xVUc+5n7BCeyMKp2OAhISInx30QRpdJOtD6LuEj\n"
    "SL7eBxiqPh7m0/N2DgNXypof6aVaSw0YwczN6304w1frk0N+PRNUrdFHwQKBgDNO\n"
    "cv2OSngthQzf5lZH92jnbA8tz/iwXOLAIPf33w873+4JsQliVaYQbAEYsPx7ahyL\n"
    "379opjleWOIWEHTEorYPKjToCPExUETTyQShAy1xvR6jhSPsKf+GZBvJmCCqO4Pe\n"
    "cqlEuFYpK9LbHk103S6FvEeVwKqb9m0QMv/KSIoNAoGAOxkEjWsyhcWQolMCyxXO\n"
    "TuM9S7sHsLMW0LpdXGJdmbPN70emaYC3dLDta5x2KWBxoqxAB7jqW0pp4INLAS+r\n"
    "qxy8F5CosTFaHukQgOMlAdB59X2HZC9RPqhMGlcXKOQLKr0w1/8g8C5YFV/jz6a3\n"
    "9YzURW//LTf6ecLxkPhqy7c=\n"
    "-----END PRIVATE KEY-----\n";
static const char *PKCS1 =
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEAwwV1r3WE83J5ggztbDQjJyk5KdwwpY5uIUWAQN/Z02dv2nAi\n"
    "1xDMnDh+3jnHY5BtJMaK7zTRs9m6poJEtpyfsRc2z6mR5H3xCeSnBPLM7tSajoz9\n"
    "gXRBsvKujtYhdqZgir8AQ42fG/ZiTMXcpDU3+EtmMysq1miKeN8EbWrAg9PEIZfi\n"
    "9Owa59NgNoScugEdJpLwgKMUU1kQ/uQ4w4p3L+LElgM52vQDV8oCuAuhpWTpzZ5Q\n"
    "u+YNrFkC2cvhkUMOwrd/xZrr23lsi9m3L9EJQbUkYgKpWrxClBUc0qZchEmTFIcR\n"
    "QxsTUtCZ+tQlq3roPoMCRsrbNNptjHNuxDrtcwIDAQABAoIBAApGdl3pRjkBdg95\n"
    "GOVTleqRTHa9KD8A0yKjo89HPBXcZFNRBzTnqLAuddjFmJDRYj7GyzkxQj9EoIX3\n"
    "ZSFt/Sf6fiPQ3mP4ksOfrYEgPdXzk7UhDpZMhs2j5biW5ap3t6x3xc7JXnG9uI4s\n"
    "+qQYPbuyVU8q3hXv6iPWNEiDkGMhpK1CGy7HePEo56XiwXL8ofY3QfUUnA7YZKt8\n"
    "VLLISkXWABoZzA1pY/5Fo99nvOnvtNmbtqZBslT12oQa9li5Yy+0AXItFe9elLTB\n"
    "e/3MDxV6WpO0HOTmLH5S6n2+eeoddSfaqwiYQBfUOaqsF2vQBp4gzkYKRshf0xmi\n"
    "QoGz6ukCgYEA5Sln0PAoP2TgcyASMifvxGWFuTLbT8Pg0vFQHYVcZ23/NmCZgO7L\n"
    "p1x2vbImLLkHUf9lbLprTUBsmWXUi8or/XWxQDTWyqKN3qQQ1CtOApmnPY5iJs57\n"
    "UPcucjZWjmw3gw5qRbtFIQLzaJLfh3g4Nb++tOpJlCVUiKXNejN7T10CgYEA2dx5\n"
    "4St9q0ZQpr7vBKY6M2ZKOBgi36lPgJBuzRez85NPSILSLAtDUM/VTDYKgJZRrCuY\n"
    "SabbT3XFKEnR75BlSk5+MXc5HKqJPbyfPV8a8cikjAC55Sat0vTyd9nZW26i+6/U\n"
    "EtURIdQtcrrJPXTp/uulD2Sek00DTRsJlkOc8w8CgYEAq3ogRShv9X/2tC77bqyT\n"
    "rdKKDdsQYM+iHDaWTIDOdFbK8lW2h9QocEOwVqJIDo8l+yWxL3sPb+8VVHPuZ+wQ\n"
    "nsjCqdjgISEiJ8d9EEaXSTrQ+i7hI0i+3gcYqj4e5tPzdg4DV8qaH+mlWksNGMHM\n"
    "zet9OMNX65NDfj0TVK3RR8ECgYAzTnL9jkp4LYUM3+ZWR/do52wPLc/4sFziwCD3\n"
    "998PO9/uCbEJYlWmEGwBGLD8e2oci9+/aKY5XljiFhB0xKK2Dyo06AjxMVBE08kE\n"
    "oQMtcb0eo4Uj7Cn/hmQbyZggqjuD3nKpRLhWKSvS2x5NdN0uhbxHlcCqm/ZtEDL/\n"
    "ykiKDQKBgDsZBI1rMoXFkKJTAssVzk7jPUu7B7CzFtC6XVxiXZmzze9HpmmAt3Sw\n"
    "7WucdilgcaKsQAe46ltKaeCDSwEvq6scvBeQqLExWh7pEIDjJQHQefV9h2QvUT6o\n"
    "TBpXFyjkCyq9MNf/IPAuWBVf48+mt/WM1EVv/y03+nnC8ZD4asu3\n"
    "-----END RSA PRIVATE KEY-----\n";
static const char *MSG = "eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJ0ZW5zb3JkIn0";
static const char *SIG =
    "73b7db5d6f08afa8284d262dd29c6c0df6cd61e6b4ea7947c33044c67aa2e008bda0ccac3fb12326afef99cc0821bc"
    "bf8c09263d3a6fca4f1e1f05452616f46d0afff469768f720e95da62964b274d5a01bd6261edb361ea158cb678a767"
    "7bae64e906f42677230c70b3e5d97e23b98cef53d119738558a346c2168895b803639961b7b78a67943c0210302295"
    "84350ec3ab596ffa19703b99a0b8b3dfd3c208fb0b92739eb903d2ecb78c01d1bf0db3fcf89873ca6fbb15b50c30fa"
    "1d5e9e04b6e60780e33e2aeebfc88ac8a73470b3048a25f2b28cb2ee4aa09a1dc23bc730ca2ba40df172f635e8cb19"
    "7ffe488cdc7074cf7963ea969bfbcfcd1944f09b37";

static void check_sign(const char *pem) {
  uint8_t *sig = NULL;
  size_t n = 0;
  td_err err;
  ck_ok(ldr_rsa_sign_sha256(pem, MSG, strlen(MSG), &sig, &n, &err), err);
  ck_assert_uint_eq(n, 256);
  char hx[513];
  ldr_hex(sig, n, hx);
  ck_assert_str_eq(hx, SIG);
  free(sig);
}

START_TEST(test_pkcs8) { check_sign(PKCS8); }
END_TEST

START_TEST(test_pkcs1) { check_sign(PKCS1); }
END_TEST

START_TEST(test_bad_keys) {
  uint8_t *sig = NULL;
  size_t n = 0;
  td_err err;
  ck_err(ldr_rsa_sign_sha256("not a key", "m", 1, &sig, &n, &err), err, TD_INVALID_ARGUMENT,
         "no PEM RSA key");
  ck_err(ldr_rsa_sign_sha256("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "m",
                             1, &sig, &n, &err),
         err, TD_INVALID_ARGUMENT, "not a readable RSA key");
  ck_assert_ptr_null(sig);
}
END_TEST

START_TEST(test_base64) {
  uint8_t out[16];
  ck_assert_int_eq(ldr_base64_decode("aGVsbG8=", 8, out), 5);
  ck_assert(!memcmp(out, "hello", 5));
  ck_assert_int_eq(ldr_base64_decode("fSl\nDMg==", 9, out), 4);
  ck_assert_uint_eq(out[0], 0x7d);
  ck_assert_int_eq(ldr_base64_decode("a*b", 3, out), -1);
  char enc[16];
  ldr_base64url_encode((const uint8_t *)"\xfb\xff", 2, enc);
  ck_assert_str_eq(enc, "-_8");
  ldr_base64url_encode((const uint8_t *)"abc", 3, enc);
  ck_assert_str_eq(enc, "YWJj");
}
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_rsa");
  TCase *tc = tcase_create("core");
  tcase_add_test(tc, test_pkcs8);
  tcase_add_test(tc, test_pkcs1);
  tcase_add_test(tc, test_bad_keys);
  tcase_add_test(tc, test_base64);
  suite_add_tcase(s, tc);
  SRunner *r = srunner_create(s);
  srunner_run_all(r, CK_NORMAL);
  int failed = srunner_ntests_failed(r);
  srunner_free(r);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
