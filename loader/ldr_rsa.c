/* RS256 signing: PEM/DER reading, then m^d mod n by Montgomery
 * multiplication on little-endian 32-bit limbs. */
#include "ldr_rsa.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_sha256.h"

#define LIMBS 130 /* 4096 bits and a little headroom */

typedef struct bn {
  uint32_t v[LIMBS];
} bn;

long ldr_base64_decode(const char *in, size_t n, uint8_t *out) {
  uint32_t acc = 0;
  int bits = 0;
  long len = 0;
  for (size_t i = 0; i < n; i++) {
    char c = in[i];
    int v;
    if (c >= 'A' && c <= 'Z')
      v = c - 'A';
    else if (c >= 'a' && c <= 'z')
      v = c - 'a' + 26;
    else if (c >= '0' && c <= '9')
      v = c - '0' + 52;
    else if (c == '+' || c == '-')
      v = 62;
    else if (c == '/' || c == '_')
      v = 63;
    else if (c == '=' || c == ' ' || c == '\n' || c == '\r' || c == '\t')
      continue;
    else
      return -1;
    acc = acc << 6 | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[len++] = (uint8_t)(acc >> bits);
    }
  }
  return len;
}

void ldr_base64url_encode(const uint8_t *in, size_t n, char *out) {
  static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                 (i + 2 < n ? in[i + 2] : 0);
    out[o++] = al[v >> 18 & 63];
    out[o++] = al[v >> 12 & 63];
    if (i + 1 < n) out[o++] = al[v >> 6 & 63];
    if (i + 2 < n) out[o++] = al[v & 63];
  }
  out[o] = 0;
}

/* --- DER ----------------------------------------------------------------------- */

typedef struct der {
  const uint8_t *p, *end;
} der;

/* Reads one element's tag and length; *body is its contents. */
static bool der_next(der *d, int *tag, der *body) {
  if (d->end - d->p < 2) return false;
  *tag = *d->p++;
  size_t len = *d->p++;
  if (len & 0x80) {
    int nb = (int)(len & 0x7f);
    if (nb < 1 || nb > 3 || d->end - d->p < nb) return false;
    len = 0;
    while (nb--) len = len << 8 | *d->p++;
  }
  if ((size_t)(d->end - d->p) < len) return false;
  body->p = d->p;
  body->end = d->p + len;
  d->p += len;
  return true;
}

static bool der_int(der *d, bn *out, size_t *bytes) {
  int tag;
  der b;
  if (!der_next(d, &tag, &b) || tag != 0x02) return false;
  while (b.end - b.p > 1 && *b.p == 0) b.p++;
  size_t n = (size_t)(b.end - b.p);
  if (n > (LIMBS - 2) * 4) return false;
  memset(out, 0, sizeof *out);
  for (size_t i = 0; i < n; i++) out->v[i / 4] |= (uint32_t)b.end[-1 - (long)i] << (8 * (i % 4));
  if (bytes) *bytes = n;
  return true;
}

/* RSAPrivateKey: SEQUENCE { version, n, e, d, ... }. */
static bool read_pkcs1(der d, bn *n, size_t *nbytes, bn *e, bn *dd) {
  int tag;
  der seq;
  bn version;
  return der_next(&d, &tag, &seq) && tag == 0x30 && der_int(&seq, &version, NULL) &&
         der_int(&seq, n, nbytes) && der_int(&seq, e, NULL) && der_int(&seq, dd, NULL);
}

/* PrivateKeyInfo: SEQUENCE { version, AlgorithmIdentifier, OCTET STRING }. */
static bool read_pkcs8(der d, bn *n, size_t *nbytes, bn *e, bn *dd) {
  int tag;
  der seq, alg, key;
  bn version;
  return der_next(&d, &tag, &seq) && tag == 0x30 && der_int(&seq, &version, NULL) &&
         der_next(&seq, &tag, &alg) && tag == 0x30 && der_next(&seq, &tag, &key) && tag == 0x04 &&
         read_pkcs1(key, n, nbytes, e, dd);
}

/* --- arithmetic (k limbs) --------------------------------------------------------- */

static int cmp(const uint32_t *a, const uint32_t *b, int k) {
  for (int i = k - 1; i >= 0; i--)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

static void sub_in(uint32_t *a, const uint32_t *b, int k) {
  uint64_t borrow = 0;
  for (int i = 0; i < k; i++) {
    uint64_t t = (uint64_t)a[i] - b[i] - borrow;
    a[i] = (uint32_t)t;
    borrow = t >> 63;
  }
}

/* r = a * b / 2^(32k) mod n (CIOS); r may alias neither a nor b. */
static void mont_mul(uint32_t *r, const uint32_t *a, const uint32_t *b, const uint32_t *n,
                     uint32_t n0inv, int k) {
  uint32_t t[LIMBS + 2] = {0};
  for (int i = 0; i < k; i++) {
    uint64_t c = 0;
    for (int j = 0; j < k; j++) {
      uint64_t s = (uint64_t)a[j] * b[i] + t[j] + c;
      t[j] = (uint32_t)s;
      c = s >> 32;
    }
    uint64_t s = (uint64_t)t[k] + c;
    t[k] = (uint32_t)s;
    t[k + 1] = (uint32_t)(s >> 32);
    uint32_t m = t[0] * n0inv;
    c = ((uint64_t)m * n[0] + t[0]) >> 32;
    for (int j = 1; j < k; j++) {
      s = (uint64_t)m * n[j] + t[j] + c;
      t[j - 1] = (uint32_t)s;
      c = s >> 32;
    }
    s = (uint64_t)t[k] + c;
    t[k - 1] = (uint32_t)s;
    t[k] = t[k + 1] + (uint32_t)(s >> 32);
  }
  if (t[k] || cmp(t, n, k) >= 0) sub_in(t, n, k);
  memcpy(r, t, sizeof *r * (size_t)k);
}

/* out = m^d mod n. */
static void modexp(uint32_t *out, const uint32_t *m, const uint32_t *d, const uint32_t *n, int k) {
  uint32_t inv = 1; /* n[0]^-1 mod 2^32 by Newton's iteration */
  for (int i = 0; i < 5; i++) inv *= 2 - n[0] * inv;
  uint32_t n0inv = (uint32_t)(0u - inv);
  /* R mod n, then R^2 mod n, by doubling. */
  uint32_t rr[LIMBS] = {0}, one[LIMBS] = {0}, x[LIMBS], am[LIMBS], tmp[LIMBS];
  rr[0] = 1;
  for (int i = 0; i < 2 * 32 * k; i++) {
    uint32_t carry = 0;
    for (int j = 0; j < k; j++) {
      uint32_t nv = rr[j] << 1 | carry;
      carry = rr[j] >> 31;
      rr[j] = nv;
    }
    if (carry || cmp(rr, n, k) >= 0) sub_in(rr, n, k);
  }
  one[0] = 1;
  mont_mul(am, m, rr, n, n0inv, k);  /* m in Montgomery form */
  mont_mul(x, one, rr, n, n0inv, k); /* 1 in Montgomery form */
  for (int i = 32 * k - 1; i >= 0; i--) {
    mont_mul(tmp, x, x, n, n0inv, k);
    /* Multiply every step and keep the product only when the bit is set. */
    mont_mul(x, tmp, am, n, n0inv, k);
    if (!(d[i / 32] >> (i % 32) & 1)) memcpy(x, tmp, sizeof *x * (size_t)k);
  }
  mont_mul(out, x, one, n, n0inv, k);
}

/* --- signing ------------------------------------------------------------------- */

static const uint8_t SHA256_INFO[19] = {0x30, 0x31, 0x30, 0x0d, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01,
                                        0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20};

td_code ldr_rsa_sign_sha256(const char *pem, const void *msg, size_t len, uint8_t **sig,
                            size_t *sig_len, td_err *err) {
  bool pkcs8 = true;
  const char *a = strstr(pem, "-----BEGIN PRIVATE KEY-----");
  if (!a) {
    a = strstr(pem, "-----BEGIN RSA PRIVATE KEY-----");
    pkcs8 = false;
  }
  if (!a) return td_err_set(err, TD_INVALID_ARGUMENT, "private key: no PEM RSA key");
  a = strchr(a, '\n');
  const char *b = a ? strstr(a, "-----END") : NULL;
  if (!b) return td_err_set(err, TD_INVALID_ARGUMENT, "private key: unterminated PEM");
  uint8_t *raw = malloc((size_t)(b - a));
  if (!raw) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  long rl = ldr_base64_decode(a, (size_t)(b - a), raw);
  bn *k3 = calloc(4, sizeof *k3);
  td_code rc = TD_OK;
  size_t nbytes = 0;
  if (!k3) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    der d = {raw, raw + (rl > 0 ? rl : 0)};
    bool ok = rl > 0 && (pkcs8 ? read_pkcs8(d, &k3[0], &nbytes, &k3[1], &k3[2])
                               : read_pkcs1(d, &k3[0], &nbytes, &k3[1], &k3[2]));
    if (!ok || nbytes < 128 || nbytes > 512 || !(k3[0].v[0] & 1))
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "private key: not a readable RSA key");
  }
  uint8_t *out = rc ? NULL : malloc(nbytes);
  if (!rc && !out) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (!rc) {
    /* EM = 00 01 FF..FF 00 DigestInfo(SHA-256) H, as an integer < n. */
    uint8_t *em = out;
    memset(em, 0xff, nbytes);
    em[0] = 0;
    em[1] = 1;
    size_t t = nbytes - sizeof SHA256_INFO - LDR_SHA256_LEN;
    em[t - 1] = 0;
    memcpy(em + t, SHA256_INFO, sizeof SHA256_INFO);
    ldr_sha256_digest(msg, len, em + t + sizeof SHA256_INFO);
    int k = (int)((nbytes + 3) / 4);
    bn *m = &k3[3];
    memset(m, 0, sizeof *m);
    for (size_t i = 0; i < nbytes; i++)
      m->v[i / 4] |= (uint32_t)em[nbytes - 1 - i] << (8 * (i % 4));
    uint32_t s[LIMBS];
    modexp(s, m->v, k3[2].v, k3[0].v, k);
    for (size_t i = 0; i < nbytes; i++) out[nbytes - 1 - i] = (uint8_t)(s[i / 4] >> (8 * (i % 4)));
    memset(s, 0, sizeof s);
    *sig = out;
    *sig_len = nbytes;
  }
  if (k3) {
    memset(k3, 0, 4 * sizeof *k3);
    free(k3);
  }
  memset(raw, 0, (size_t)(b - a));
  free(raw);
  return rc;
}
