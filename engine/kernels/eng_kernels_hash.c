/* Hashing strings into buckets (Keras Hashing, feature columns):
 * StringToHashBucketFast (Fingerprint64), StringToHashBucketStrong
 * (SipHash-2-4 under the node's two-word key) and the legacy
 * StringToHashBucket (TensorFlow's Hash64), each the hash modulo
 * num_buckets as an unsigned 64-bit number, shape kept. The hashes are
 * eng_hash.c's. */
#include "eng_hash.h"
#include "eng_kernels.h"

typedef enum { FAST, STRONG, LEGACY } hash_kind;

static td_code hash_bucket(eng_kctx *c, hash_kind kind) {
  int64_t nb = eng_node_attr_int(c->node, "num_buckets", 0);
  if (nb < 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "num_buckets must be >= 1, got %lld", (long long)nb);
  int64_t key[2] = {0, 0};
  if (kind == STRONG && eng_attr_ints(c->node, "key", key, 2) != 2)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Key must have 2 elements");
  td_code rc = eng_kwant(c, 0, ENG_DT_STRING);
  if (rc || (rc = eng_kout_raw(c, 0, ENG_DT_INT64, &c->in[0].shape))) return rc;
  int64_t n = eng_tensor_numel(&c->in[0]), *out = eng_tensor_data(&c->out[0]);
  const eng_str *s = eng_tensor_strs(&c->in[0]);
  for (int64_t i = 0; i < n; i++) {
    uint64_t h = kind == FAST ? eng_hash_fingerprint64(s[i].data, s[i].len)
                 : kind == STRONG
                     ? eng_hash_siphash24((uint64_t)key[0], (uint64_t)key[1], s[i].data, s[i].len)
                     : eng_hash_tf64(s[i].data, s[i].len);
    out[i] = (int64_t)(h % (uint64_t)nb);
  }
  return TD_OK;
}

td_code eng_k_string_to_hash_bucket_fast(eng_kctx *c) { return hash_bucket(c, FAST); }
td_code eng_k_string_to_hash_bucket_strong(eng_kctx *c) { return hash_bucket(c, STRONG); }
td_code eng_k_string_to_hash_bucket(eng_kctx *c) { return hash_bucket(c, LEGACY); }
