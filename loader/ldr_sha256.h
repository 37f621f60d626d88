/* ldr_sha256: SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), the two
 * primitives AWS Signature Version 4 needs, plus lower-case hex.
 *
 * Plain functions on caller memory; no allocation, no state beyond the
 * context value; thread-safe. */
#ifndef LDR_SHA256_H
#define LDR_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define LDR_SHA256_LEN 32

typedef struct ldr_sha256 {
  uint32_t h[8];
  uint64_t total; /* bytes hashed so far */
  uint8_t block[64];
  size_t fill;
} ldr_sha256;

void ldr_sha256_init(ldr_sha256 *c);
void ldr_sha256_update(ldr_sha256 *c, const void *data, size_t n);
void ldr_sha256_final(ldr_sha256 *c, uint8_t out[LDR_SHA256_LEN]);
void ldr_sha256_digest(const void *data, size_t n, uint8_t out[LDR_SHA256_LEN]);
void ldr_hmac_sha256(const void *key, size_t key_len, const void *msg, size_t msg_len,
                     uint8_t out[LDR_SHA256_LEN]);
/* Writes 2n lower-case hex digits and a NUL into out (2n + 1 bytes). */
void ldr_hex(const uint8_t *data, size_t n, char *out);

#endif
