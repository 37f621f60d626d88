/* ldr_bundle: reads a TensorFlow checkpoint (tensor bundle V2).
 *
 * A bundle is `<prefix>.index`, a LevelDB-style SSTable mapping checkpoint
 * keys to BundleEntryProto records (blocks raw or Snappy-compressed, each
 * with a masked CRC32C), plus data shards `<prefix>.data-SSSSS-of-NNNNN`
 * holding the raw little-endian tensor bytes (string tensors in the bundle's
 * varint-length layout).
 *
 * ldr_bundle_open reads and verifies the whole index (footer magic, block
 * CRCs, Snappy blocks, restart arrays, key order, entry protos, header) and
 * opens every data shard the header names, keeping the descriptors until
 * close (a missing shard is NOT_FOUND naming it). ldr_bundle_read reads one
 * tensor, checking its dtype, size and CRC. Every error message names the
 * file and the problem, e.g.
 * "…/variables/variables.index: block checksum mismatch (block at offset 0)"
 * or "Key b not found in checkpoint …/variables/variables" (NOT_FOUND).
 * Corrupt bytes give DATA_LOSS; unsupported features (partitioned variables,
 * big-endian bundles, dtypes the engine cannot store, rank > ENG_MAX_RANK)
 * give UNIMPLEMENTED, the per-tensor ones only when that tensor is read.
 * Memory is bounded by the files' sizes whatever their contents; on failure
 * out-parameters are left untouched.
 *
 * A bundle is immutable after open; reads from several threads at once are
 * safe (each read uses pread on shard descriptors opened at open time). */
#ifndef LDR_BUNDLE_H
#define LDR_BUNDLE_H

#include <stdint.h>

#include "eng_tensor.h"
#include "td_status.h"

typedef struct ldr_bundle ldr_bundle;

/* prefix: e.g. "/models/m/1/variables/variables". */
td_code ldr_bundle_open(const char *prefix, ldr_bundle **out, td_err *err);
void ldr_bundle_close(ldr_bundle *b);

/* Number of tensor entries (the header entry is not counted) and their keys,
 * in the index's (sorted, bytewise) order. ldr_bundle_key returns NULL for i
 * out of range; the string lives until ldr_bundle_close. The slice-part
 * entries of partitioned variables (keys starting with a NUL byte) are not
 * listed; the partitioned variable itself is. */
int ldr_bundle_count(const ldr_bundle *b);
const char *ldr_bundle_key(const ldr_bundle *b, int i);

/* Reads tensor `key` into *out (a new tensor owned by the caller). When
 * `want` is not ENG_DT_INVALID the entry's dtype must equal it
 * (INVALID_ARGUMENT otherwise, naming key and both dtypes). */
td_code ldr_bundle_read(const ldr_bundle *b, const char *key, eng_dtype want, eng_tensor *out,
                        td_err *err);

/* Makes every check ldr_bundle_read makes on tensor `key`, its checksum
 * included, without keeping its bytes (read through a small buffer), and
 * gives the dtype (float32 when widened) and shape a read would return. */
td_code ldr_bundle_verify(const ldr_bundle *b, const char *key, eng_dtype want, eng_dtype *dtype,
                          eng_shape *shape, td_err *err);

#endif
