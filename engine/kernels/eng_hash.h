/* eng_hash: the string hashes TensorFlow's hashing ops are defined by,
 * written from the published algorithms so that bucket numbers match
 * TensorFlow's exactly:
 *   - eng_hash_fingerprint64: farmhash's Fingerprint64 (the "na" 64-bit
 *     hash, TensorFlow's Fingerprint64 and StringToHashBucketFast);
 *   - eng_hash_siphash24: SipHash-2-4 under a 128-bit key given as two
 *     64-bit words (StringToHashBucketStrong's `key` attribute);
 *   - eng_hash_tf64: TensorFlow's legacy Hash64 (a MurmurHash64A variant
 *     seeded 0xDECAFCAFFE; StringToHashBucket).
 * Pure functions of their bytes: any thread, no state, no failure. Inputs
 * are read as little-endian words whatever the host. */
#ifndef ENG_HASH_H
#define ENG_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t eng_hash_fingerprint64(const char *s, size_t len);
uint64_t eng_hash_siphash24(uint64_t k0, uint64_t k1, const char *s, size_t len);
uint64_t eng_hash_tf64(const char *s, size_t len);

#endif
