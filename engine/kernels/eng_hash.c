/* The three hashes of eng_hash.h. Fingerprint64 splits by length (0-16,
 * 17-32, 33-64 bytes, then a 64-byte block loop over two 32-byte lanes);
 * each piece follows farmhash's published "na" variant step by step, with
 * unsigned 64-bit wrap-around as the algorithm assumes. */
#include "eng_hash.h"

#include <string.h>

static const uint64_t k0 = 0xc3a5c85c97cb3127ull;
static const uint64_t k1 = 0xb492b66fbe98f273ull;
static const uint64_t k2 = 0x9ae16a3b2f90404full;

static uint64_t le64(const char *p) {
  const unsigned char *b = (const unsigned char *)p;
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
  return v;
}

static uint32_t le32(const char *p) {
  const unsigned char *b = (const unsigned char *)p;
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t ror(uint64_t v, int s) { return s ? v >> s | v << (64 - s) : v; }
static uint64_t shift_mix(uint64_t v) { return v ^ v >> 47; }

static uint64_t len16(uint64_t u, uint64_t v, uint64_t mul) {
  uint64_t a = (u ^ v) * mul;
  a ^= a >> 47;
  uint64_t b = (v ^ a) * mul;
  b ^= b >> 47;
  return b * mul;
}

static uint64_t len0to16(const char *s, size_t len) {
  if (len >= 8) {
    uint64_t mul = k2 + len * 2, a = le64(s) + k2, b = le64(s + len - 8);
    uint64_t c = ror(b, 37) * mul + a, d = (ror(a, 25) + b) * mul;
    return len16(c, d, mul);
  }
  if (len >= 4) {
    uint64_t mul = k2 + len * 2, a = le32(s);
    return len16(len + (a << 3), le32(s + len - 4), mul);
  }
  if (len > 0) {
    const unsigned char *b = (const unsigned char *)s;
    uint32_t y = (uint32_t)b[0] + ((uint32_t)b[len >> 1] << 8);
    uint32_t z = (uint32_t)len + ((uint32_t)b[len - 1] << 2);
    return shift_mix(y * k2 ^ z * k0) * k2;
  }
  return k2;
}

static uint64_t len17to32(const char *s, size_t len) {
  uint64_t mul = k2 + len * 2, a = le64(s) * k1, b = le64(s + 8);
  uint64_t c = le64(s + len - 8) * mul, d = le64(s + len - 16) * k2;
  return len16(ror(a + b, 43) + ror(c, 30) + d, a + ror(b + k2, 18) + c, mul);
}

static uint64_t len33to64(const char *s, size_t len) {
  uint64_t mul = k2 + len * 2, a = le64(s) * k2, b = le64(s + 8);
  uint64_t c = le64(s + len - 8) * mul, d = le64(s + len - 16) * k2;
  uint64_t y = ror(a + b, 43) + ror(c, 30) + d;
  uint64_t z = len16(y, a + ror(b + k2, 18) + c, mul);
  uint64_t e = le64(s + 16) * mul, f = le64(s + 24);
  uint64_t g = (y + le64(s + len - 32)) * mul, h = (z + le64(s + len - 24)) * mul;
  return len16(ror(e + f, 43) + ror(g, 30) + h, e + ror(f + a, 18) + g, mul);
}

typedef struct pair {
  uint64_t first, second;
} pair;

/* Hashes 32 bytes at s into two words, seeded by a and b. */
static pair weak32(const char *s, uint64_t a, uint64_t b) {
  uint64_t w = le64(s), x = le64(s + 8), y = le64(s + 16), z = le64(s + 24);
  a += w;
  b = ror(b + a + z, 21);
  uint64_t c = a;
  a += x;
  a += y;
  b += ror(a, 44);
  return (pair){a + z, b + c};
}

uint64_t eng_hash_fingerprint64(const char *s, size_t len) {
  if (len <= 16) return len0to16(s, len);
  if (len <= 32) return len17to32(s, len);
  if (len <= 64) return len33to64(s, len);
  const uint64_t seed = 81;
  uint64_t x = seed, y = seed * k1 + 113, z = shift_mix(y * k2 + 113) * k2, t;
  pair v = {0, 0}, w = {0, 0};
  x = x * k2 + le64(s);
  const char *end = s + ((len - 1) / 64) * 64;
  const char *last64 = end + ((len - 1) & 63) - 63;
  do {
    x = ror(x + y + v.first + le64(s + 8), 37) * k1;
    y = ror(y + v.second + le64(s + 48), 42) * k1;
    x ^= w.second;
    y += v.first + le64(s + 40);
    z = ror(z + w.first, 33) * k1;
    v = weak32(s, v.second * k1, x + w.first);
    w = weak32(s + 32, z + w.second, y + le64(s + 16));
    t = z, z = x, x = t;
    s += 64;
  } while (s != end);
  uint64_t mul = k1 + ((z & 0xff) << 1);
  s = last64;
  w.first += (len - 1) & 63;
  v.first += w.first;
  w.first += v.first;
  x = ror(x + y + v.first + le64(s + 8), 37) * mul;
  y = ror(y + v.second + le64(s + 48), 42) * mul;
  x ^= w.second * 9;
  y += v.first * 9 + le64(s + 40);
  z = ror(z + w.first, 33) * mul;
  v = weak32(s, v.second * mul, x + w.first);
  w = weak32(s + 32, z + w.second, y + le64(s + 16));
  t = z, z = x, x = t;
  return len16(len16(v.first, w.first, mul) + shift_mix(y) * k0 + z,
               len16(v.second, w.second, mul) + x, mul);
}

#define SIPROUND()                                     \
  do {                                                 \
    v0 += v1, v1 = ror(v1, 51) ^ v0, v0 = ror(v0, 32); \
    v2 += v3, v3 = ror(v3, 48) ^ v2;                   \
    v0 += v3, v3 = ror(v3, 43) ^ v0;                   \
    v2 += v1, v1 = ror(v1, 47) ^ v2, v2 = ror(v2, 32); \
  } while (0)

uint64_t eng_hash_siphash24(uint64_t key0, uint64_t key1, const char *s, size_t len) {
  /* Rotations right by 64 - r are SipHash's rotations left by r (13, 16,
   * 21, 17, and 32 both ways). */
  uint64_t v0 = key0 ^ 0x736f6d6570736575ull, v1 = key1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = key0 ^ 0x6c7967656e657261ull, v3 = key1 ^ 0x7465646279746573ull;
  size_t full = len & ~(size_t)7;
  for (size_t i = 0; i < full; i += 8) {
    uint64_t m = le64(s + i);
    v3 ^= m;
    SIPROUND();
    SIPROUND();
    v0 ^= m;
  }
  uint64_t last = (uint64_t)(len & 0xff) << 56;
  for (size_t i = 0; i < (len & 7); i++) last |= (uint64_t)(unsigned char)s[full + i] << (8 * i);
  v3 ^= last;
  SIPROUND();
  SIPROUND();
  v0 ^= last;
  v2 ^= 0xff;
  SIPROUND();
  SIPROUND();
  SIPROUND();
  SIPROUND();
  return v0 ^ v1 ^ v2 ^ v3;
}

uint64_t eng_hash_tf64(const char *s, size_t n) {
  const uint64_t m = 0xc6a4a7935bd1e995ull;
  uint64_t h = 0xDECAFCAFFEull ^ (n * m);
  for (; n >= 8; s += 8, n -= 8) {
    uint64_t k = le64(s) * m;
    k ^= k >> 47;
    h ^= k * m;
    h *= m;
  }
  if (n) {
    for (size_t i = n; i-- > 0;) h ^= (uint64_t)(unsigned char)s[i] << (8 * i);
    h *= m;
  }
  h ^= h >> 47;
  h *= m;
  return h ^ h >> 47;
}
