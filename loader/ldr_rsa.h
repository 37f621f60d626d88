/* ldr_rsa: RSASSA-PKCS1-v1_5 signatures with SHA-256 (RS256), what a GCS
 * service-account key signs its OAuth JWT with.
 *
 * The key is PEM text: PKCS#8 ("BEGIN PRIVATE KEY", as in Google's key
 * files) or PKCS#1 ("BEGIN RSA PRIVATE KEY"); moduli of 1024 to 4096 bits.
 * The arithmetic is our own: fixed-size 32-bit-limb integers and Montgomery
 * multiplication, exponentiation by the private exponent with a fixed
 * square-and-multiply sequence. It signs a few times an hour, so it favours
 * being small over being fast, and it makes no claim of resisting timing
 * side channels beyond that fixed sequence.
 *
 * Thread-safe (no state). Failure: INVALID_ARGUMENT naming what in the key
 * could not be read; the key's bytes never appear in an error. */
#ifndef LDR_RSA_H
#define LDR_RSA_H

#include <stddef.h>
#include <stdint.h>

#include "td_status.h"

/* *sig (caller frees) gets the modulus's length in bytes. */
td_code ldr_rsa_sign_sha256(const char *pem, const void *msg, size_t n, uint8_t **sig,
                            size_t *sig_len, td_err *err);

/* Base64 (standard alphabet, '=' padding, whitespace skipped) into out
 * (at least 3 * strlen(in) / 4 bytes); returns the length or -1. */
long ldr_base64_decode(const char *in, size_t n, uint8_t *out);
/* Base64url without padding (JWT); out needs 4 * ceil(n / 3) + 1 bytes. */
void ldr_base64url_encode(const uint8_t *in, size_t n, char *out);

#endif
