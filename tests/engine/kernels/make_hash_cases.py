#!/usr/bin/env python3
"""Writes tests/engine/kernels/hash_cases.inc: strings of every length from
0 to 130 bytes, a few longer ones (and a few words) with TensorFlow's Fingerprint64, its
StringToHashBucketStrong (SipHash-2-4, two keys) and its legacy
StringToHashBucket, each over a huge bucket count so that the bucket keeps
nearly all of the hash. Run by hand: python3 tests/engine/kernels/make_hash_cases.py
test_eng_hash.c includes the file."""
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np
import tensorflow as tf

BUCKETS = 2**63 - 1
KEYS = [(0, 0), (0x0706050403020100, 0x0f0e0d0c0b0a0908), (7, 7)]


def strings():
    out = [b"", b"cat", b"dog", b"the quick brown fox", "h\u00e9llo w\u00f6rld".encode()]
    for n in list(range(131)) + [191, 192, 193, 255, 256, 257, 300]:
        out.append(bytes(((i * 131 + n * 7 + 1) % 256) for i in range(n)))
    return out


def c_str(b):
    return '"' + "".join("\\x%02x" % c for c in b) + '"'


def main():
    ss = strings()
    t = tf.constant(ss)
    fp = tf.fingerprint(tf.reshape(t, [-1, 1])).numpy()
    fps = [int.from_bytes(bytes(r), "little") for r in fp]
    fast = tf.strings.to_hash_bucket_fast(t, BUCKETS).numpy()
    legacy = tf.raw_ops.StringToHashBucket(string_tensor=t, num_buckets=BUCKETS).numpy()
    strong = [tf.strings.to_hash_bucket_strong(t, BUCKETS, list(k)).numpy() for k in KEYS]
    assert all(f % BUCKETS == int(b) for f, b in zip(fps, fast))
    lines = ["/* Written by make_hash_cases.py from TensorFlow %s: do not edit. */" % tf.__version__,
             "#define HASH_BUCKETS 0x%xull" % BUCKETS,
             "static const uint64_t hash_keys[][2] = {%s};" %
             ", ".join("{0x%xull, 0x%xull}" % k for k in KEYS),
             "static const struct hash_case {", "  const char *s;", "  size_t len;",
             "  uint64_t fingerprint, legacy, strong[%d];" % len(KEYS), "} hash_cases[] = {"]
    for i, s in enumerate(ss):
        lines.append("    {%s, %d, 0x%xull, %dull, {%s}}," % (
            c_str(s), len(s), fps[i], int(legacy[i]),
            ", ".join("%dull" % int(st[i]) for st in strong)))
    lines.append("};")
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "hash_cases.inc"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
