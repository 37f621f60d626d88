/* ldr_bundle against TensorFlow-written checkpoints, against bundles this
 * file builds itself (Snappy blocks, many blocks, string tensors, several
 * shards, unsupported features), and against corrupted copies.
 *
 * The SSTable writer and reader here are a second, deliberately simple
 * implementation (trusting their input), so the reader under test is never
 * checked against itself. */
#include <check.h>
#include <dirent.h>
#include <snappy-c.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_tensor.h"
#include "ldr_bundle.h"
#include "ldr_crc32c.h"
#include "tensorflow/core/protobuf/tensor_bundle.pb-c.h"
#include "td_testcheck.h"

#define TF1 TD_FIXTURES "/models/half_plus_two_tf1/00000123/variables/variables"
#define TF2 TD_EXAMPLES "/half_plus_two/00000123/variables/variables"
#define MISSING TD_FIXTURES "/models/missing_var/00000001/variables/variables"
#define DATA1 ".data-00000-of-00001"
#define GRAPH_KEY "_CHECKPOINTABLE_OBJECT_GRAPH"
#define A2 "a/.ATTRIBUTES/VARIABLE_VALUE"
#define B2 "b/.ATTRIBUTES/VARIABLE_VALUE"
#define TABLE_MAGIC 0xdb4775248b80fb57ull

/* --- bytes and files --------------------------------------------------- */

typedef struct buf_t {
  uint8_t *p;
  size_t n, cap;
} buf_t;

static void buf_put(buf_t *b, const void *d, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 64;
    b->p = realloc(b->p, b->cap);
    ck_assert_ptr_nonnull(b->p);
  }
  if (n) memcpy(b->p + b->n, d, n);
  b->n += n;
}

static void buf_u8(buf_t *b, uint8_t v) { buf_put(b, &v, 1); }

static void buf_varint(buf_t *b, uint64_t v) {
  while (v >= 0x80) {
    buf_u8(b, (uint8_t)(v | 0x80));
    v >>= 7;
  }
  buf_u8(b, (uint8_t)v);
}

static void buf_fixed32(buf_t *b, uint32_t v) {
  for (int i = 0; i < 4; i++) buf_u8(b, (uint8_t)(v >> (8 * i)));
}

static uint64_t get_varint(const uint8_t **pp) {
  uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    uint8_t c = *(*pp)++;
    v |= (uint64_t)(c & 0x7f) << shift;
    if (!(c & 0x80)) return v;
  }
}

static uint32_t get_fixed32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint8_t *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  buf_t b = {0};
  uint8_t chunk[4096];
  size_t r;
  while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) buf_put(&b, chunk, r);
  fclose(f);
  buf_put(&b, "", 0);
  if (!b.p) b.p = malloc(1);
  *n = b.n;
  return b.p;
}

static void spit(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  ck_assert_msg(f != NULL, "cannot create %s", path);
  ck_assert_uint_eq(fwrite(d, 1, n, f), n);
  ck_assert_int_eq(fclose(f), 0);
}

static const char *pjoin(char *out, const char *a, const char *b) {
  snprintf(out, 512, "%s%s", a, b);
  return out;
}

/* A scratch directory holding one bundle, prefix <dir>/variables. */
typedef struct tmpb {
  char dir[256];
  char prefix[300];
} tmpb;

static void tmpb_init(tmpb *t) {
  const char *base = getenv("TMPDIR");
  snprintf(t->dir, sizeof t->dir, "%s/ldr_bundle_XXXXXX", base && *base ? base : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(t->dir));
  snprintf(t->prefix, sizeof t->prefix, "%s/variables", t->dir);
}

static void tmpb_copy(tmpb *t, const char *from) {
  char a[512], b[512];
  size_t n;
  uint8_t *d = slurp(pjoin(a, from, ".index"), &n);
  spit(pjoin(b, t->prefix, ".index"), d, n);
  free(d);
  d = slurp(pjoin(a, from, DATA1), &n);
  spit(pjoin(b, t->prefix, DATA1), d, n);
  free(d);
}

static void tmpb_cleanup(tmpb *t) {
  DIR *d = opendir(t->dir);
  if (!d) return;
  struct dirent *de;
  char p[600];
  while ((de = readdir(d)))
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", t->dir, de->d_name);
      unlink(p);
    }
  closedir(d);
  rmdir(t->dir);
}

/* --- a small SSTable writer and reader --------------------------------- */

typedef struct kv_t {
  uint8_t *key;
  size_t klen;
  uint8_t *val;
  size_t vlen;
} kv_t;

typedef struct kvs_t {
  kv_t *v;
  int n;
} kvs_t;

static void kvs_add(kvs_t *k, const void *key, size_t klen, const void *val, size_t vlen) {
  k->v = realloc(k->v, (size_t)(k->n + 1) * sizeof *k->v);
  ck_assert_ptr_nonnull(k->v);
  kv_t *e = &k->v[k->n++];
  e->key = malloc(klen + 1);
  e->val = malloc(vlen + 1);
  if (klen) memcpy(e->key, key, klen);
  if (vlen) memcpy(e->val, val, vlen);
  e->klen = klen;
  e->vlen = vlen;
}

static void kvs_free(kvs_t *k) {
  for (int i = 0; i < k->n; i++) {
    free(k->v[i].key);
    free(k->v[i].val);
  }
  free(k->v);
  *k = (kvs_t){0};
}

typedef struct bh_t {
  uint64_t off, size;
} bh_t;

/* Block contents with prefix-compressed keys and a restart point every
 * `interval` entries, as LevelDB's BlockBuilder lays them out. */
static void block_encode(buf_t *out, const kv_t *kv, int n, int interval) {
  buf_t restarts = {0};
  size_t base = out->n;
  for (int i = 0; i < n; i++) {
    size_t shared = 0;
    if (i % interval == 0) {
      buf_fixed32(&restarts, (uint32_t)(out->n - base));
    } else {
      const kv_t *p = &kv[i - 1];
      while (shared < p->klen && shared < kv[i].klen && p->key[shared] == kv[i].key[shared])
        shared++;
    }
    buf_varint(out, shared);
    buf_varint(out, kv[i].klen - shared);
    buf_varint(out, kv[i].vlen);
    buf_put(out, kv[i].key + shared, kv[i].klen - shared);
    buf_put(out, kv[i].val, kv[i].vlen);
  }
  if (n == 0) buf_fixed32(&restarts, 0);
  buf_put(out, restarts.p, restarts.n);
  buf_fixed32(out, (uint32_t)(restarts.n / 4));
  free(restarts.p);
}

/* Appends a block and its trailer; type 1 stores it Snappy-compressed. */
static bh_t block_write(buf_t *file, const uint8_t *c, size_t n, uint8_t type) {
  uint8_t *z = NULL;
  if (type == 1) {
    size_t zn = snappy_max_compressed_length(n);
    z = malloc(zn);
    ck_assert_int_eq(snappy_compress((const char *)c, n, (char *)z, &zn), SNAPPY_OK);
    c = z;
    n = zn;
  }
  bh_t h = {file->n, n};
  buf_put(file, c, n);
  buf_u8(file, type);
  buf_fixed32(file, ldr_crc32c_mask(ldr_crc32c_extend(ldr_crc32c(c, n), &type, 1)));
  free(z);
  return h;
}

static void footer_write(buf_t *file, bh_t meta, bh_t index) {
  size_t start = file->n;
  buf_varint(file, meta.off);
  buf_varint(file, meta.size);
  buf_varint(file, index.off);
  buf_varint(file, index.size);
  while (file->n < start + 40) buf_u8(file, 0);
  buf_fixed32(file, (uint32_t)TABLE_MAGIC);
  buf_fixed32(file, (uint32_t)(TABLE_MAGIC >> 32));
}

static void index_add(kvs_t *index, const kv_t *last, bh_t h) {
  buf_t hv = {0};
  buf_varint(&hv, h.off);
  buf_varint(&hv, h.size);
  kvs_add(index, last->key, last->klen, hv.p, hv.n);
  free(hv.p);
}

static void index_finish(buf_t *file, kvs_t *index) {
  buf_t c = {0};
  block_encode(&c, NULL, 0, 1);
  bh_t meta = block_write(file, c.p, c.n, 0);
  c.n = 0;
  block_encode(&c, index->v, index->n, 1);
  bh_t ih = block_write(file, c.p, c.n, 0);
  free(c.p);
  footer_write(file, meta, ih);
}

/* A whole table from sorted (or deliberately unsorted) entries, `per_block`
 * entries to a data block. The index key of each block is its last key, a
 * valid separator. */
static void table_build(buf_t *file, const kv_t *kv, int n, int per_block, uint8_t type) {
  kvs_t index = {0};
  for (int i = 0; i < n; i += per_block) {
    int m = n - i < per_block ? n - i : per_block;
    buf_t c = {0};
    block_encode(&c, kv + i, m, 16);
    bh_t h = block_write(file, c.p, c.n, type);
    free(c.p);
    index_add(&index, &kv[i + m - 1], h);
  }
  index_finish(file, &index);
  kvs_free(&index);
}

static void block_decode(const uint8_t *c, size_t n, kvs_t *out) {
  uint32_t nres = get_fixed32(c + n - 4);
  const uint8_t *p = c, *end = c + n - 4 - 4 * nres;
  buf_t key = {0};
  while (p < end) {
    uint64_t shared = get_varint(&p), unshared = get_varint(&p), vlen = get_varint(&p);
    key.n = shared;
    buf_put(&key, p, unshared);
    p += unshared;
    kvs_add(out, key.p, key.n, p, vlen);
    p += vlen;
  }
  free(key.p);
}

/* Block contents at h (decompressed when Snappy); the caller frees. */
static uint8_t *block_read(const uint8_t *f, bh_t h, size_t *n, uint8_t *type) {
  *type = f[h.off + h.size];
  if (*type == 0) {
    uint8_t *c = malloc(h.size + 1);
    memcpy(c, f + h.off, h.size);
    *n = h.size;
    return c;
  }
  ck_assert_int_eq(*type, 1);
  size_t un;
  ck_assert_int_eq(snappy_uncompressed_length((const char *)f + h.off, h.size, &un), SNAPPY_OK);
  uint8_t *c = malloc(un + 1);
  ck_assert_int_eq(snappy_uncompress((const char *)f + h.off, h.size, (char *)c, &un), SNAPPY_OK);
  *n = un;
  return c;
}

/* Reads a well-formed table: its data entries, its index entries, and where
 * every block lies (data blocks, then the metaindex, then the index). */
typedef struct table_t {
  kvs_t entries;
  kvs_t index;
  bh_t blocks[64];
  int nblocks;
  int snappy_blocks;
} table_t;

static void table_read(const uint8_t *f, size_t n, table_t *t) {
  *t = (table_t){0};
  ck_assert_uint_ge(n, 48);
  const uint8_t *p = f + n - 48;
  bh_t meta, ih;
  meta.off = get_varint(&p);
  meta.size = get_varint(&p);
  ih.off = get_varint(&p);
  ih.size = get_varint(&p);
  size_t len;
  uint8_t type;
  uint8_t *c = block_read(f, ih, &len, &type);
  block_decode(c, len, &t->index);
  free(c);
  for (int i = 0; i < t->index.n; i++) {
    const uint8_t *h = t->index.v[i].val;
    bh_t bh;
    bh.off = get_varint(&h);
    bh.size = get_varint(&h);
    ck_assert_int_lt(t->nblocks, 62);
    t->blocks[t->nblocks++] = bh;
    c = block_read(f, bh, &len, &type);
    t->snappy_blocks += type == 1;
    block_decode(c, len, &t->entries);
    free(c);
  }
  t->blocks[t->nblocks++] = meta;
  t->blocks[t->nblocks++] = ih;
}

static void table_free(table_t *t) {
  kvs_free(&t->entries);
  kvs_free(&t->index);
}

/* Recomputes every block's CRC in place, so a mutation gets past the
 * checksum and reaches the parser. */
static void fix_crcs(uint8_t *f, size_t n, const table_t *t) {
  for (int i = 0; i < t->nblocks; i++) {
    bh_t h = t->blocks[i];
    if (h.off + h.size + 5 > n) continue;
    uint32_t crc = ldr_crc32c_mask(ldr_crc32c(f + h.off, h.size + 1));
    for (int k = 0; k < 4; k++) f[h.off + h.size + 1 + k] = (uint8_t)(crc >> (8 * k));
  }
}

/* The Snappy path: the same table with every data block stored
 * Snappy-compressed (type 1) byte for byte as the original contents, with a
 * new index block and footer pointing at the new blocks. */
static void index_snappify(const uint8_t *f, size_t n, buf_t *out) {
  table_t t;
  table_read(f, n, &t);
  kvs_t index = {0};
  for (int i = 0; i < t.index.n; i++) {
    size_t len;
    uint8_t type;
    uint8_t *c = block_read(f, t.blocks[i], &len, &type);
    bh_t h = block_write(out, c, len, 1);
    free(c);
    index_add(&index, &t.index.v[i], h);
  }
  index_finish(out, &index);
  kvs_free(&index);
  table_free(&t);
}

/* --- bundles built here ------------------------------------------------ */

static size_t pack_header(uint8_t **out, int num_shards, int endianness, int min_consumer) {
  Tensorflow__VersionDef v = TENSORFLOW__VERSION_DEF__INIT;
  v.producer = 1;
  v.min_consumer = min_consumer;
  Tensorflow__BundleHeaderProto h = TENSORFLOW__BUNDLE_HEADER_PROTO__INIT;
  h.num_shards = num_shards;
  h.endianness = endianness;
  h.version = &v;
  size_t n = tensorflow__bundle_header_proto__get_packed_size(&h);
  *out = malloc(n + 1);
  tensorflow__bundle_header_proto__pack(&h, *out);
  return n;
}

typedef struct tspec {
  const char *key;
  int dtype;
  int rank;
  int64_t dims[10];
  int shard;
  const void *data;
  size_t size;
  bool has_crc; /* else mask(crc32c(data)) */
  uint32_t crc;
  bool sliced;
  int64_t size_delta; /* recorded size = size + delta */
  int64_t offset_delta;
} tspec;

static size_t pack_entry(uint8_t **out, const tspec *t, int64_t offset) {
  Tensorflow__TensorShapeProto__Dim dims[10], *dp[10];
  Tensorflow__TensorShapeProto s = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
  for (int i = 0; i < t->rank; i++) {
    tensorflow__tensor_shape_proto__dim__init(&dims[i]);
    dims[i].size = t->dims[i];
    dp[i] = &dims[i];
  }
  s.n_dim = (size_t)t->rank;
  s.dim = dp;
  Tensorflow__TensorSliceProto slice = TENSORFLOW__TENSOR_SLICE_PROTO__INIT, *slp = &slice;
  Tensorflow__BundleEntryProto e = TENSORFLOW__BUNDLE_ENTRY_PROTO__INIT;
  e.dtype = t->dtype;
  e.shape = &s;
  e.shard_id = t->shard;
  e.offset = offset + t->offset_delta;
  e.size = (int64_t)t->size + t->size_delta;
  e.crc32c = t->has_crc ? t->crc : ldr_crc32c_mask(ldr_crc32c(t->data, t->size));
  if (t->sliced) {
    e.n_slices = 1;
    e.slices = &slp;
  }
  size_t n = tensorflow__bundle_entry_proto__get_packed_size(&e);
  *out = malloc(n + 1);
  tensorflow__bundle_entry_proto__pack(&e, *out);
  return n;
}

/* Writes <prefix>.index and its data shards; specs must be sorted by key. */
static void bundle_write(const char *prefix, int num_shards, int endianness, const tspec *t, int n,
                         int per_block, uint8_t type) {
  kvs_t kv = {0};
  uint8_t *v;
  size_t vn = pack_header(&v, num_shards, endianness, 0);
  kvs_add(&kv, "", 0, v, vn);
  free(v);
  buf_t *shard = calloc((size_t)num_shards, sizeof *shard);
  for (int i = 0; i < n; i++) {
    buf_t *d = &shard[t[i].shard < num_shards ? t[i].shard : 0];
    vn = pack_entry(&v, &t[i], (int64_t)d->n);
    buf_put(d, t[i].data, t[i].size);
    kvs_add(&kv, t[i].key, strlen(t[i].key), v, vn);
    free(v);
  }
  buf_t file = {0};
  table_build(&file, kv.v, kv.n, per_block, type);
  char path[512];
  spit(pjoin(path, prefix, ".index"), file.p, file.n);
  for (int s = 0; s < num_shards; s++) {
    snprintf(path, sizeof path, "%s.data-%05d-of-%05d", prefix, s, num_shards);
    spit(path, shard[s].p, shard[s].n);
    free(shard[s].p);
  }
  free(shard);
  free(file.p);
  kvs_free(&kv);
}

/* The bundle's string layout: varint64 lengths, the masked CRC of the
 * lengths (each as uint32 LE), then the bytes; *crc covers all three. */
static void encode_strings(buf_t *out, const char *const *s, const size_t *lens, int n,
                           uint32_t *crc) {
  uint32_t c = 0;
  for (int i = 0; i < n; i++) {
    buf_varint(out, lens[i]);
    uint8_t le[4];
    for (int k = 0; k < 4; k++) le[k] = (uint8_t)(lens[i] >> (8 * k));
    c = ldr_crc32c_extend(c, le, 4);
  }
  uint32_t m = ldr_crc32c_mask(c);
  uint8_t mb[4];
  for (int k = 0; k < 4; k++) mb[k] = (uint8_t)(m >> (8 * k));
  buf_put(out, mb, 4);
  c = ldr_crc32c_extend(c, mb, 4);
  for (int i = 0; i < n; i++) {
    buf_put(out, s[i], lens[i]);
    c = ldr_crc32c_extend(c, s[i], lens[i]);
  }
  *crc = ldr_crc32c_mask(c);
}

/* --- reading helpers --------------------------------------------------- */

static float read_scalar_float(const ldr_bundle *b, const char *key) {
  eng_tensor t;
  td_err err = {0};
  td_code rc = ldr_bundle_read(b, key, ENG_DT_FLOAT, &t, &err);
  ck_assert_msg(rc == TD_OK, "%s: %s", key, err.msg);
  ck_assert_int_eq(t.dtype, ENG_DT_FLOAT);
  ck_assert_int_eq(t.shape.rank, 0);
  float v;
  memcpy(&v, eng_tensor_data(&t), sizeof v);
  eng_tensor_release(&t);
  return v;
}

static ldr_bundle *open_ok(const char *prefix) {
  ldr_bundle *b = NULL;
  td_err err = {0};
  td_code rc = ldr_bundle_open(prefix, &b, &err);
  ck_assert_msg(rc == TD_OK, "open %s: %s", prefix, err.msg);
  ck_assert_ptr_nonnull(b);
  return b;
}

/* Opens and, when that works, reads every tensor; whatever the bytes, this
 * must return (the point is the absence of crashes and sanitizer reports). */
static td_code open_and_read_all(const char *prefix) {
  ldr_bundle *b = NULL;
  td_err err = {0};
  td_code rc = ldr_bundle_open(prefix, &b, &err);
  if (rc != TD_OK) {
    ck_assert_int_eq(err.code, rc);
    ck_assert_msg(err.msg[0] != '\0', "error without a message");
    return rc;
  }
  for (int i = 0; i < ldr_bundle_count(b); i++) {
    eng_tensor t = {0};
    const char *key = ldr_bundle_key(b, i);
    ck_assert_ptr_nonnull(key);
    if (ldr_bundle_read(b, key, ENG_DT_INVALID, &t, &err) == TD_OK) eng_tensor_release(&t);
  }
  ldr_bundle_close(b);
  return TD_OK;
}

/* --- TensorFlow-written fixtures --------------------------------------- */

START_TEST(test_tf1_values) {
  ldr_bundle *b = open_ok(TF1);
  /* TF Serving's half_plus_two variables: a = 0.5, b = 2, c = 3. */
  ck_assert_int_eq(ldr_bundle_count(b), 3);
  ck_assert_str_eq(ldr_bundle_key(b, 0), "a");
  ck_assert_str_eq(ldr_bundle_key(b, 1), "b");
  ck_assert_str_eq(ldr_bundle_key(b, 2), "c");
  ck_assert_ptr_null(ldr_bundle_key(b, 3));
  ck_assert_ptr_null(ldr_bundle_key(b, -1));
  ck_assert(read_scalar_float(b, "a") == 0.5f);
  ck_assert(read_scalar_float(b, "b") == 2.0f);
  ck_assert(read_scalar_float(b, "c") == 3.0f);
  /* ENG_DT_INVALID accepts whatever the entry holds. */
  eng_tensor t;
  td_err err = {0};
  ck_assert_int_eq(ldr_bundle_read(b, "b", ENG_DT_INVALID, &t, &err), TD_OK);
  ck_assert_int_eq(t.dtype, ENG_DT_FLOAT);
  ck_assert_int_eq(eng_tensor_numel(&t), 1);
  eng_tensor_release(&t);
  ldr_bundle_close(b);
}
END_TEST

START_TEST(test_tf2_keys_and_strings) {
  ldr_bundle *b = open_ok(TF2);
  ck_assert_int_eq(ldr_bundle_count(b), 3);
  ck_assert_str_eq(ldr_bundle_key(b, 0), GRAPH_KEY);
  ck_assert_str_eq(ldr_bundle_key(b, 1), A2);
  ck_assert_str_eq(ldr_bundle_key(b, 2), B2);
  ck_assert(read_scalar_float(b, A2) == 0.5f);
  ck_assert(read_scalar_float(b, B2) == 2.0f);
  eng_tensor t;
  td_err err = {0};
  td_code rc = ldr_bundle_read(b, GRAPH_KEY, ENG_DT_STRING, &t, &err);
  ck_assert_msg(rc == TD_OK, "%s", err.msg);
  ck_assert_int_eq(t.dtype, ENG_DT_STRING);
  ck_assert_int_eq(t.shape.rank, 0);
  eng_str *s = eng_tensor_strs(&t);
  ck_assert_uint_eq(s[0].len, 211);
  /* A serialized TrackableObjectGraph: field 1 (nodes), length-delimited. */
  ck_assert_uint_eq((uint8_t)s[0].data[0], 0x0a);
  ck_assert_ptr_nonnull(memmem(s[0].data, s[0].len, "VARIABLE_VALUE", 14));
  eng_tensor_release(&t);
  ldr_bundle_close(b);
}
END_TEST

START_TEST(test_missing_key) {
  ldr_bundle *b = open_ok(MISSING);
  ck_assert_int_eq(ldr_bundle_count(b), 1);
  ck_assert_str_eq(ldr_bundle_key(b, 0), "a");
  ck_assert(read_scalar_float(b, "a") == 0.5f);
  eng_tensor t = {0};
  td_err err = {0};
  td_code rc = ldr_bundle_read(b, "b", ENG_DT_FLOAT, &t, &err);
  ck_err(rc, err, TD_NOT_FOUND, "Key b not found in checkpoint " MISSING);
  ck_assert_ptr_null(t.buf); /* out untouched */
  ck_err(ldr_bundle_read(b, "", ENG_DT_INVALID, &t, &err), err, TD_NOT_FOUND, "Key  not found");
  ck_err(ldr_bundle_read(b, "a0", ENG_DT_INVALID, &t, &err), err, TD_NOT_FOUND, "Key a0");
  ck_err(ldr_bundle_read(b, "A", ENG_DT_INVALID, &t, &err), err, TD_NOT_FOUND, "Key A");
  ldr_bundle_close(b);
}
END_TEST

START_TEST(test_wrong_dtype) {
  ldr_bundle *b = open_ok(TF2);
  eng_tensor t = {0};
  td_err err = {0};
  td_code rc = ldr_bundle_read(b, A2, ENG_DT_INT32, &t, &err);
  ck_err(rc, err, TD_INVALID_ARGUMENT, A2);
  ck_assert_ptr_nonnull(strstr(err.msg, "int32"));
  ck_assert_ptr_nonnull(strstr(err.msg, "float"));
  ck_err(ldr_bundle_read(b, GRAPH_KEY, ENG_DT_FLOAT, &t, &err), err, TD_INVALID_ARGUMENT,
         "restored dtype string");
  ck_assert_ptr_null(t.buf);
  ldr_bundle_close(b);
}
END_TEST

START_TEST(test_no_such_checkpoint) {
  ldr_bundle *b = NULL;
  td_err err = {0};
  td_code rc = ldr_bundle_open(TD_FIXTURES "/nope/variables", &b, &err);
  ck_err(rc, err, TD_NOT_FOUND, TD_FIXTURES "/nope/variables.index");
  ck_assert_ptr_null(b);
}
END_TEST

/* --- corruption of TF-written files ------------------------------------ */

START_TEST(test_corrupt_data_shard) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF1);
  char path[512];
  size_t n;
  uint8_t *d = slurp(pjoin(path, t.prefix, DATA1), &n);
  d[1] ^= 0x40; /* inside a's 4 bytes */
  spit(path, d, n);
  free(d);
  ldr_bundle *b = open_ok(t.prefix);
  eng_tensor x = {0};
  td_err err = {0};
  td_code rc = ldr_bundle_read(b, "a", ENG_DT_FLOAT, &x, &err);
  ck_err(rc, err, TD_DATA_LOSS, path);
  ck_assert_ptr_nonnull(strstr(err.msg, "checksum mismatch for tensor 'a'"));
  ck_assert_ptr_null(x.buf);
  ck_assert(read_scalar_float(b, "b") == 2.0f);
  ldr_bundle_close(b);
  tmpb_cleanup(&t);
}
END_TEST

START_TEST(test_truncated_data_shard) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF1);
  char path[512];
  ck_assert_int_eq(truncate(pjoin(path, t.prefix, DATA1), 6), 0);
  ldr_bundle *b = open_ok(t.prefix);
  ck_assert(read_scalar_float(b, "a") == 0.5f);
  eng_tensor x = {0};
  td_err err = {0};
  ck_err(ldr_bundle_read(b, "b", ENG_DT_FLOAT, &x, &err), err, TD_DATA_LOSS, path);
  ck_assert_ptr_nonnull(strstr(err.msg, "truncated"));
  ldr_bundle_close(b);
  tmpb_cleanup(&t);
}
END_TEST

START_TEST(test_corrupt_index_block) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF2);
  char path[512];
  size_t n;
  uint8_t *d = slurp(pjoin(path, t.prefix, ".index"), &n);
  d[20] ^= 0x01; /* a key byte in the data block at offset 0 */
  spit(path, d, n);
  free(d);
  ldr_bundle *b = NULL;
  td_err err = {0};
  td_code rc = ldr_bundle_open(t.prefix, &b, &err);
  ck_err(rc, err, TD_DATA_LOSS, path);
  ck_assert_ptr_nonnull(strstr(err.msg, "block checksum mismatch (block at offset 0)"));
  ck_assert_ptr_null(b);
  tmpb_cleanup(&t);
}
END_TEST

START_TEST(test_truncated_index) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF2);
  char path[512];
  size_t n;
  uint8_t *d = slurp(pjoin(path, t.prefix, ".index"), &n);
  for (size_t len = 0; len < n; len++) {
    spit(path, d, len);
    ldr_bundle *b = NULL;
    td_err err = {0};
    td_code rc = ldr_bundle_open(t.prefix, &b, &err);
    ck_err(rc, err, TD_DATA_LOSS, path);
    ck_assert_ptr_null(b);
    if (len < 48) ck_assert_ptr_nonnull(strstr(err.msg, "truncated"));
  }
  free(d);
  tmpb_cleanup(&t);
}
END_TEST

START_TEST(test_missing_data_shard) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF1);
  char path[512];
  ck_assert_int_eq(unlink(pjoin(path, t.prefix, DATA1)), 0);
  ldr_bundle *b = NULL;
  td_err err = {0};
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_NOT_FOUND, path);
  ck_assert_ptr_null(b);
  tmpb_cleanup(&t);
}
END_TEST

START_TEST(test_garbage_index) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF1);
  char path[512];
  pjoin(path, t.prefix, ".index");
  ldr_bundle *b = NULL;
  td_err err = {0};
  spit(path, "", 0);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, "truncated");
  ck_assert_ptr_nonnull(strstr(err.msg, path));
  uint8_t junk[1000];
  srand(1);
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)rand();
  spit(path, junk, sizeof junk);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS,
         "not a checkpoint index (bad magic)");
  ck_assert_ptr_nonnull(strstr(err.msg, path));
  /* The magic alone, with a footer of zero handles: a block of size 0 at
   * offset 0 runs into the footer. */
  memset(junk, 0, 48);
  for (int k = 0; k < 8; k++) junk[40 + k] = (uint8_t)(TABLE_MAGIC >> (8 * k));
  spit(path, junk, 48);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, path);
  /* A directory where the index should be. */
  unlink(path);
  ck_assert_int_eq(mkdir(path, 0700), 0);
  ck_assert_int_ne(ldr_bundle_open(t.prefix, &b, &err), TD_OK);
  ck_assert_ptr_null(b);
  rmdir(path);
  tmpb_cleanup(&t);
}
END_TEST

/* Every byte of the index flipped three ways, first as is (the CRCs catch
 * it), then with the CRCs recomputed so the parser itself sees the damage. */
START_TEST(test_fuzz_index_flips) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF2);
  char path[512];
  size_t n;
  uint8_t *orig = slurp(pjoin(path, t.prefix, ".index"), &n);
  table_t tab;
  table_read(orig, n, &tab);
  uint8_t *d = malloc(n);
  static const uint8_t flips[] = {0x01, 0x80, 0xff, 0x7f};
  int ok = 0, failed = 0;
  for (int fix = 0; fix < 2; fix++)
    for (size_t pos = 0; pos < n; pos++)
      for (size_t k = 0; k < sizeof flips; k++) {
        memcpy(d, orig, n);
        d[pos] ^= flips[k];
        if (fix) fix_crcs(d, n, &tab);
        spit(path, d, n);
        if (open_and_read_all(t.prefix) == TD_OK)
          ok++;
        else
          failed++;
      }
  ck_assert_int_gt(failed, 0);
  ck_assert_int_gt(ok, 0); /* e.g. flips in the footer's padding */
  table_free(&tab);
  free(d);
  free(orig);
  tmpb_cleanup(&t);
}
END_TEST

/* Random multi-byte damage to a Snappy-compressed index, CRCs recomputed, so
 * the decompressor's input checks are exercised too. */
START_TEST(test_fuzz_snappy_index) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF2);
  char path[512];
  size_t n;
  uint8_t *raw = slurp(pjoin(path, t.prefix, ".index"), &n);
  buf_t z = {0};
  index_snappify(raw, n, &z);
  table_t tab;
  table_read(z.p, z.n, &tab);
  ck_assert_int_eq(tab.snappy_blocks, 1);
  uint8_t *d = malloc(z.n);
  srand(12345);
  for (int iter = 0; iter < 3000; iter++) {
    memcpy(d, z.p, z.n);
    int flips = 1 + rand() % 4;
    for (int k = 0; k < flips; k++) {
      /* Mostly inside the compressed data block. */
      size_t pos = rand() % 4 ? (size_t)rand() % (tab.blocks[0].size + 5) : (size_t)rand() % z.n;
      d[pos] = (uint8_t)rand();
    }
    fix_crcs(d, z.n, &tab);
    spit(path, d, z.n);
    open_and_read_all(t.prefix);
  }
  table_free(&tab);
  free(d);
  free(z.p);
  free(raw);
  tmpb_cleanup(&t);
}
END_TEST

/* Each byte of the data shard flipped: exactly the tensor holding it fails,
 * with DATA_LOSS naming the data file; the others still read. */
START_TEST(test_fuzz_data_flips) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF2);
  char path[512];
  size_t n;
  uint8_t *orig = slurp(pjoin(path, t.prefix, DATA1), &n);
  ck_assert_uint_eq(n, 225); /* a at 0, b at 4, the graph at 8..225 */
  uint8_t *d = malloc(n);
  ldr_bundle *b = open_ok(t.prefix);
  for (size_t pos = 0; pos < n; pos++)
    for (int bit = 0; bit < 8; bit += 3) {
      memcpy(d, orig, n);
      d[pos] ^= (uint8_t)(1u << bit);
      spit(path, d, n); /* same inode: the open descriptor sees it */
      const char *bad = pos < 4 ? A2 : pos < 8 ? B2 : GRAPH_KEY;
      for (int i = 0; i < 3; i++) {
        const char *key = ldr_bundle_key(b, i);
        eng_tensor x = {0};
        td_err err = {0};
        td_code rc = ldr_bundle_read(b, key, ENG_DT_INVALID, &x, &err);
        if (strcmp(key, bad) == 0) {
          ck_err(rc, err, TD_DATA_LOSS, path);
          ck_assert_ptr_null(x.buf);
        } else {
          ck_assert_msg(rc == TD_OK, "byte %zu: %s: %s", pos, key, err.msg);
          eng_tensor_release(&x);
        }
      }
    }
  ldr_bundle_close(b);
  free(d);
  free(orig);
  tmpb_cleanup(&t);
}
END_TEST

/* --- Snappy blocks ----------------------------------------------------- */

static void check_same_tensors(const char *want_prefix, const char *got_prefix) {
  ldr_bundle *w = open_ok(want_prefix), *g = open_ok(got_prefix);
  ck_assert_int_eq(ldr_bundle_count(w), ldr_bundle_count(g));
  for (int i = 0; i < ldr_bundle_count(w); i++) {
    const char *key = ldr_bundle_key(w, i);
    ck_assert_str_eq(key, ldr_bundle_key(g, i));
    eng_tensor a, b;
    td_err err = {0};
    ck_assert_msg(ldr_bundle_read(w, key, ENG_DT_INVALID, &a, &err) == TD_OK, "%s", err.msg);
    ck_assert_msg(ldr_bundle_read(g, key, ENG_DT_INVALID, &b, &err) == TD_OK, "%s", err.msg);
    ck_assert_int_eq(a.dtype, b.dtype);
    ck_assert(eng_shape_equal(&a.shape, &b.shape));
    if (a.dtype == ENG_DT_STRING) {
      for (int64_t k = 0; k < eng_tensor_numel(&a); k++) {
        eng_str sa = eng_tensor_strs(&a)[k], sb = eng_tensor_strs(&b)[k];
        ck_assert_uint_eq(sa.len, sb.len);
        ck_assert_int_eq(memcmp(sa.data, sb.data, sa.len), 0);
      }
    } else {
      ck_assert_uint_eq(eng_tensor_nbytes(&a), eng_tensor_nbytes(&b));
      ck_assert_int_eq(memcmp(eng_tensor_data(&a), eng_tensor_data(&b), eng_tensor_nbytes(&a)), 0);
    }
    eng_tensor_release(&a);
    eng_tensor_release(&b);
  }
  ldr_bundle_close(w);
  ldr_bundle_close(g);
}

START_TEST(test_snappy_fixture) {
  const char *srcs[] = {TF1, TF2, MISSING};
  for (size_t s = 0; s < sizeof srcs / sizeof *srcs; s++) {
    tmpb t;
    tmpb_init(&t);
    tmpb_copy(&t, srcs[s]);
    char path[512];
    size_t n;
    uint8_t *raw = slurp(pjoin(path, t.prefix, ".index"), &n);
    buf_t z = {0};
    index_snappify(raw, n, &z);
    spit(path, z.p, z.n);
    /* What we wrote really is a Snappy table with the same entries. */
    table_t a, b;
    table_read(raw, n, &a);
    table_read(z.p, z.n, &b);
    ck_assert_int_eq(a.snappy_blocks, 0);
    ck_assert_int_eq(b.snappy_blocks, a.nblocks - 2);
    ck_assert_int_eq(a.entries.n, b.entries.n);
    table_free(&a);
    table_free(&b);
    check_same_tensors(srcs[s], t.prefix);
    free(z.p);
    free(raw);
    tmpb_cleanup(&t);
  }
}
END_TEST

START_TEST(test_snappy_corrupt_stream) {
  tmpb t;
  tmpb_init(&t);
  tmpb_copy(&t, TF2);
  char path[512];
  size_t n;
  uint8_t *raw = slurp(pjoin(path, t.prefix, ".index"), &n);
  buf_t z = {0};
  index_snappify(raw, n, &z);
  table_t tab;
  table_read(z.p, z.n, &tab);
  ldr_bundle *b = NULL;
  td_err err = {0};
  /* A declared length the stream does not produce. */
  z.p[0] ^= 0x04;
  fix_crcs(z.p, z.n, &tab);
  spit(path, z.p, z.n);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, "corrupt Snappy block");
  ck_assert_ptr_nonnull(strstr(err.msg, path));
  /* An unknown compression type. */
  z.p[0] ^= 0x04;
  z.p[tab.blocks[0].size] = 2;
  fix_crcs(z.p, z.n, &tab);
  spit(path, z.p, z.n);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, "compression type 2");
  ck_assert_ptr_null(b);
  table_free(&tab);
  free(z.p);
  free(raw);
  tmpb_cleanup(&t);
}
END_TEST

/* --- bundles built here ------------------------------------------------ */

START_TEST(test_many_keys_many_blocks) {
  enum { N = 1000 };
  static char keys[N][16];
  static float vals[N];
  static tspec specs[N];
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "layer%04d/w", i);
    vals[i] = (float)i * 0.25f;
    specs[i] = (tspec){.key = keys[i], .dtype = 1, .data = &vals[i], .size = 4};
  }
  for (uint8_t type = 0; type < 2; type++) {
    tmpb t;
    tmpb_init(&t);
    bundle_write(t.prefix, 1, 0, specs, N, 37, type); /* 37 per block: restarts at 0, 16, 32 */
    ldr_bundle *b = open_ok(t.prefix);
    ck_assert_int_eq(ldr_bundle_count(b), N);
    for (int i = 0; i < N; i++) {
      ck_assert_str_eq(ldr_bundle_key(b, i), keys[i]);
      ck_assert(read_scalar_float(b, keys[i]) == vals[i]);
    }
    eng_tensor x = {0};
    td_err err = {0};
    ck_err(ldr_bundle_read(b, "layer0500", ENG_DT_INVALID, &x, &err), err, TD_NOT_FOUND,
           "layer0500");
    ck_err(ldr_bundle_read(b, "layer9999/w", ENG_DT_INVALID, &x, &err), err, TD_NOT_FOUND, "9999");
    ck_err(ldr_bundle_read(b, "a", ENG_DT_INVALID, &x, &err), err, TD_NOT_FOUND, "Key a ");
    ldr_bundle_close(b);
    tmpb_cleanup(&t);
  }
}
END_TEST

START_TEST(test_dtypes_and_shapes) {
  int32_t i32[6] = {1, -2, 3, -4, 5, 2147483647};
  double f64[3] = {1.5, -2.25, 1e300};
  int64_t i64[2] = {-1, 9007199254740993LL};
  uint8_t u8[4] = {0, 1, 254, 255};
  uint8_t bools[3] = {1, 0, 1};
  uint16_t half[1] = {0x3c00};
  float empty[1] = {0};
  tspec specs[] = {
      {.key = "bool", .dtype = 10, .rank = 1, .dims = {3}, .data = bools, .size = 3},
      {.key = "double", .dtype = 2, .rank = 1, .dims = {3}, .data = f64, .size = 24},
      {.key = "empty", .dtype = 1, .rank = 2, .dims = {2, 0}, .data = empty, .size = 0},
      {.key = "half", .dtype = 19, .rank = 0, .data = half, .size = 2},
      {.key = "int32", .dtype = 3, .rank = 2, .dims = {2, 3}, .data = i32, .size = 24},
      {.key = "int64", .dtype = 9, .rank = 2, .dims = {1, 2}, .data = i64, .size = 16},
      {.key = "uint8", .dtype = 4, .rank = 3, .dims = {1, 2, 2}, .data = u8, .size = 4},
  };
  int n = (int)(sizeof specs / sizeof *specs);
  tmpb t;
  tmpb_init(&t);
  bundle_write(t.prefix, 1, 0, specs, n, 16, 1);
  ldr_bundle *b = open_ok(t.prefix);
  ck_assert_int_eq(ldr_bundle_count(b), n);
  for (int i = 0; i < n; i++) {
    eng_tensor x;
    td_err err = {0};
    td_code rc = ldr_bundle_read(b, specs[i].key, (eng_dtype)specs[i].dtype, &x, &err);
    ck_assert_msg(rc == TD_OK, "%s: %s", specs[i].key, err.msg);
    ck_assert_int_eq(x.dtype, specs[i].dtype);
    ck_assert_int_eq(x.shape.rank, specs[i].rank);
    for (int k = 0; k < specs[i].rank; k++) ck_assert_int_eq(x.shape.dim[k], specs[i].dims[k]);
    ck_assert_uint_eq(eng_tensor_nbytes(&x), specs[i].size);
    if (specs[i].size)
      ck_assert_int_eq(memcmp(eng_tensor_data(&x), specs[i].data, specs[i].size), 0);
    eng_tensor_release(&x);
  }
  ldr_bundle_close(b);
  tmpb_cleanup(&t);
}
END_TEST

START_TEST(test_string_tensors) {
  static char big[70000];
  memset(big, 'x', sizeof big);
  big[0] = 'A';
  big[sizeof big - 1] = 'Z';
  const char *strs[] = {"", "hello", big, "a\0b"};
  size_t lens[] = {0, 5, sizeof big, 3};
  buf_t s4 = {0}, s0 = {0}, bad = {0};
  uint32_t crc4, crc0, crc_bad;
  encode_strings(&s4, strs, lens, 4, &crc4);
  encode_strings(&s0, NULL, NULL, 0, &crc0);
  encode_strings(&bad, strs, lens, 2, &crc_bad);
  bad.p[0] = 1; /* lengths 1, 5: the length CRC no longer matches */
  tspec specs[] = {
      {.key = "s0",
       .dtype = 7,
       .rank = 1,
       .dims = {0},
       .data = s0.p,
       .size = s0.n,
       .has_crc = true,
       .crc = crc0},
      {.key = "s4",
       .dtype = 7,
       .rank = 2,
       .dims = {2, 2},
       .data = s4.p,
       .size = s4.n,
       .has_crc = true,
       .crc = crc4},
      {.key = "s_badlen",
       .dtype = 7,
       .rank = 1,
       .dims = {2},
       .data = bad.p,
       .size = bad.n,
       .has_crc = true,
       .crc = crc_bad},
      {.key = "s_badsize",
       .dtype = 7,
       .rank = 1,
       .dims = {4},
       .data = s4.p,
       .size = s4.n,
       .has_crc = true,
       .crc = crc4,
       .size_delta = -1},
      {.key = "s_crc",
       .dtype = 7,
       .rank = 1,
       .dims = {4},
       .data = s4.p,
       .size = s4.n,
       .has_crc = true,
       .crc = crc4 ^ 1},
      {.key = "s_toomany",
       .dtype = 7,
       .rank = 1,
       .dims = {1000000},
       .data = s4.p,
       .size = s4.n,
       .has_crc = true,
       .crc = crc4},
  };
  tmpb t;
  tmpb_init(&t);
  bundle_write(t.prefix, 1, 0, specs, (int)(sizeof specs / sizeof *specs), 2, 0);
  ldr_bundle *b = open_ok(t.prefix);
  eng_tensor x;
  td_err err = {0};
  ck_assert_msg(ldr_bundle_read(b, "s4", ENG_DT_STRING, &x, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(x.shape.rank, 2);
  ck_assert_int_eq(eng_tensor_numel(&x), 4);
  eng_str *s = eng_tensor_strs(&x);
  for (int i = 0; i < 4; i++) {
    ck_assert_uint_eq(s[i].len, lens[i]);
    ck_assert_int_eq(memcmp(s[i].data, strs[i], lens[i]), 0);
  }
  eng_tensor_release(&x);
  ck_assert_msg(ldr_bundle_read(b, "s0", ENG_DT_STRING, &x, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(eng_tensor_numel(&x), 0);
  eng_tensor_release(&x);
  char path[512];
  pjoin(path, t.prefix, DATA1);
  x = (eng_tensor){0};
  ck_err(ldr_bundle_read(b, "s_badlen", ENG_DT_STRING, &x, &err), err, TD_DATA_LOSS,
         "length checksum mismatch for tensor 's_badlen'");
  ck_assert_ptr_nonnull(strstr(err.msg, path));
  ck_err(ldr_bundle_read(b, "s_badsize", ENG_DT_STRING, &x, &err), err, TD_DATA_LOSS, "s_badsize");
  ck_err(ldr_bundle_read(b, "s_crc", ENG_DT_STRING, &x, &err), err, TD_DATA_LOSS,
         "checksum mismatch for tensor 's_crc'");
  ck_err(ldr_bundle_read(b, "s_toomany", ENG_DT_STRING, &x, &err), err, TD_DATA_LOSS, "s_toomany");
  ck_assert_ptr_null(x.buf);
  ldr_bundle_close(b);
  tmpb_cleanup(&t);
  free(s4.p);
  free(s0.p);
  free(bad.p);
}
END_TEST

START_TEST(test_shards) {
  float a = 1.0f, b2 = 2.0f, c = 3.0f;
  tspec specs[] = {
      {.key = "a", .dtype = 1, .shard = 1, .data = &a, .size = 4},
      {.key = "b", .dtype = 1, .shard = 0, .data = &b2, .size = 4},
      {.key = "c", .dtype = 1, .shard = 2, .data = &c, .size = 4},
  };
  tmpb t;
  tmpb_init(&t);
  bundle_write(t.prefix, 3, 0, specs, 3, 16, 0);
  ldr_bundle *b = open_ok(t.prefix);
  ck_assert(read_scalar_float(b, "a") == 1.0f);
  ck_assert(read_scalar_float(b, "b") == 2.0f);
  ck_assert(read_scalar_float(b, "c") == 3.0f);
  ldr_bundle_close(b);
  char path[512];
  snprintf(path, sizeof path, "%s.data-00002-of-00003", t.prefix);
  ck_assert_int_eq(unlink(path), 0);
  td_err err = {0};
  b = NULL;
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_NOT_FOUND, path);
  ck_assert_ptr_null(b);
  tmpb_cleanup(&t);
}
END_TEST

START_TEST(test_bad_entries) {
  float v[2] = {1.0f, 2.0f};
  tspec base = {.key = "x", .dtype = 1, .rank = 1, .dims = {2}, .data = v, .size = 8};
  struct {
    const char *what;
    tspec spec;
    td_code code;
    const char *msg;
  } cases[] = {
      {"shard", base, TD_DATA_LOSS, "names shard 1 of 1"},
      {"neg dim", base, TD_DATA_LOSS, "invalid shape"},
      {"neg offset", base, TD_DATA_LOSS, "invalid offset"},
      {"huge shape", base, TD_DATA_LOSS, "invalid shape"},
  };
  cases[0].spec.shard = 1;
  cases[1].spec.dims[0] = -1;
  cases[2].spec.offset_delta = -5;
  cases[3].spec.rank = 3;
  cases[3].spec.dims[0] = cases[3].spec.dims[1] = cases[3].spec.dims[2] = 1LL << 40;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    tmpb t;
    tmpb_init(&t);
    bundle_write(t.prefix, 1, 0, &cases[i].spec, 1, 16, 0);
    ldr_bundle *b = NULL;
    td_err err = {0};
    char path[512];
    ck_err(ldr_bundle_open(t.prefix, &b, &err), err, cases[i].code, cases[i].msg);
    ck_assert_msg(strstr(err.msg, pjoin(path, t.prefix, ".index")), "%s: %s", cases[i].what,
                  err.msg);
    ck_assert_ptr_null(b);
    tmpb_cleanup(&t);
  }
}
END_TEST

START_TEST(test_unsupported_at_read) {
  float v[2] = {1.0f, 2.0f};
  uint8_t nine[1] = {7};
  tspec specs[] = {
      {.key = "beyond",
       .dtype = 1,
       .rank = 1,
       .dims = {2},
       .data = v,
       .size = 8,
       .offset_delta = 100},
      {.key = "part", .dtype = 1, .rank = 1, .dims = {2}, .data = v, .size = 8, .sliced = true},
      {.key = "rank9",
       .dtype = 4,
       .rank = 9,
       .dims = {1, 1, 1, 1, 1, 1, 1, 1, 1},
       .data = nine,
       .size = 1},
      {.key = "size", .dtype = 1, .rank = 1, .dims = {3}, .data = v, .size = 8},
      {.key = "variant", .dtype = 21, .rank = 0, .data = v, .size = 4},
      {.key = "weird", .dtype = 99, .rank = 0, .data = v, .size = 4},
  };
  tmpb t;
  tmpb_init(&t);
  bundle_write(t.prefix, 1, 0, specs, (int)(sizeof specs / sizeof *specs), 16, 0);
  ldr_bundle *b = open_ok(t.prefix);
  eng_tensor x = {0};
  td_err err = {0};
  char data[512], index[512];
  pjoin(data, t.prefix, DATA1);
  pjoin(index, t.prefix, ".index");
  ck_err(ldr_bundle_read(b, "beyond", ENG_DT_FLOAT, &x, &err), err, TD_DATA_LOSS, data);
  ck_assert_ptr_nonnull(strstr(err.msg, "truncated"));
  ck_err(ldr_bundle_read(b, "part", ENG_DT_FLOAT, &x, &err), err, TD_UNIMPLEMENTED,
         "partitioned variable");
  ck_assert_ptr_nonnull(strstr(err.msg, "'part'"));
  ck_err(ldr_bundle_read(b, "rank9", ENG_DT_INVALID, &x, &err), err, TD_UNIMPLEMENTED, "rank 9");
  ck_err(ldr_bundle_read(b, "size", ENG_DT_FLOAT, &x, &err), err, TD_DATA_LOSS,
         "invalid size in bundle entry for key 'size'");
  ck_assert_ptr_nonnull(strstr(err.msg, index));
  ck_err(ldr_bundle_read(b, "variant", ENG_DT_INVALID, &x, &err), err, TD_UNIMPLEMENTED,
         "'variant'");
  ck_err(ldr_bundle_read(b, "weird", ENG_DT_INVALID, &x, &err), err, TD_UNIMPLEMENTED, "'weird'");
  ck_err(ldr_bundle_read(b, "weird", ENG_DT_FLOAT, &x, &err), err, TD_INVALID_ARGUMENT,
         "restored dtype 99");
  ck_assert_ptr_null(x.buf);
  ldr_bundle_close(b);
  tmpb_cleanup(&t);
}
END_TEST

START_TEST(test_header_checks) {
  float v = 1.0f;
  tspec spec = {.key = "v", .dtype = 1, .data = &v, .size = 4};
  tmpb t;
  tmpb_init(&t);
  ldr_bundle *b = NULL;
  td_err err = {0};
  bundle_write(t.prefix, 1, 1, &spec, 1, 16, 0);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_UNIMPLEMENTED, "big-endian");
  bundle_write(t.prefix, 0, 0, NULL, 0, 16, 0);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, "num_shards 0");

  /* A future bundle version, and a table whose first key is not "". */
  kvs_t kv = {0};
  uint8_t *hv;
  size_t hn = pack_header(&hv, 1, 0, 2);
  kvs_add(&kv, "", 0, hv, hn);
  buf_t file = {0};
  table_build(&file, kv.v, kv.n, 16, 0);
  char path[512];
  spit(pjoin(path, t.prefix, ".index"), file.p, file.n);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_UNIMPLEMENTED, "version");
  kvs_free(&kv);
  kvs_add(&kv, "a", 1, hv, hn);
  file.n = 0;
  table_build(&file, kv.v, kv.n, 16, 0);
  spit(path, file.p, file.n);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, "missing the bundle header");
  /* No entries at all. */
  file.n = 0;
  table_build(&file, kv.v, 0, 16, 0);
  spit(path, file.p, file.n);
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, "missing the bundle header");
  ck_assert_ptr_null(b);
  kvs_free(&kv);
  free(hv);
  free(file.p);
  tmpb_cleanup(&t);
}
END_TEST

START_TEST(test_key_order_and_slice_keys) {
  uint8_t *hv, *ev;
  size_t hn = pack_header(&hv, 1, 0, 0);
  float v = 4.0f;
  tspec spec = {.key = "k", .dtype = 1, .data = &v, .size = 4};
  size_t en = pack_entry(&ev, &spec, 0);
  tmpb t;
  tmpb_init(&t);
  char path[512];
  spit(pjoin(path, t.prefix, DATA1), &v, 4);
  pjoin(path, t.prefix, ".index");
  ldr_bundle *b = NULL;
  td_err err = {0};
  buf_t file = {0};
  /* Out of order, across two blocks and within one; and a duplicate. */
  const char *orders[][3] = {{"", "b", "a"}, {"", "a", "a"}};
  for (int o = 0; o < 2; o++)
    for (int per = 1; per <= 3; per += 2) {
      kvs_t kv = {0};
      kvs_add(&kv, "", 0, hv, hn);
      kvs_add(&kv, orders[o][1], 1, ev, en);
      kvs_add(&kv, orders[o][2], 1, ev, en);
      file.n = 0;
      table_build(&file, kv.v, kv.n, per, 0);
      spit(path, file.p, file.n);
      ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, "out of order");
      kvs_free(&kv);
    }
  /* A slice-part key (leading NUL, as EncodeTensorNameSlice writes) stays
   * out of the listing; the named entry remains readable. */
  kvs_t kv = {0};
  kvs_add(&kv, "", 0, hv, hn);
  kvs_add(&kv, "\0\x01k", 3, ev, en);
  kvs_add(&kv, "k", 1, ev, en);
  file.n = 0;
  table_build(&file, kv.v, kv.n, 16, 1);
  spit(path, file.p, file.n);
  b = open_ok(t.prefix);
  ck_assert_int_eq(ldr_bundle_count(b), 1);
  ck_assert_str_eq(ldr_bundle_key(b, 0), "k");
  ck_assert(read_scalar_float(b, "k") == 4.0f);
  ldr_bundle_close(b);
  kvs_free(&kv);
  free(file.p);
  free(hv);
  free(ev);
  tmpb_cleanup(&t);
}
END_TEST

/* The restart array of a 20-entry block (restarts at entries 0 and 16),
 * damaged in ways the CRC cannot see because it is recomputed. */
START_TEST(test_corrupt_restarts) {
  enum { N = 19 };
  static char keys[N][8];
  static float vals[N];
  static tspec specs[N];
  for (int i = 0; i < N; i++) {
    snprintf(keys[i], sizeof keys[i], "v%02d", i);
    specs[i] = (tspec){.key = keys[i], .dtype = 1, .data = &vals[i], .size = 4};
  }
  tmpb t;
  tmpb_init(&t);
  bundle_write(t.prefix, 1, 0, specs, N, 20, 0); /* header + 19 = one block of 20 */
  char path[512];
  size_t n;
  uint8_t *orig = slurp(pjoin(path, t.prefix, ".index"), &n);
  table_t tab;
  table_read(orig, n, &tab);
  ck_assert_int_eq(tab.nblocks, 3);
  size_t end = tab.blocks[0].off + tab.blocks[0].size; /* end of the data block's contents */
  ck_assert_uint_eq(get_fixed32(orig + end - 4), 2);
  uint32_t r1 = get_fixed32(orig + end - 8);
  struct {
    size_t at;
    uint32_t value;
    const char *msg;
  } cases[] = {
      {end - 8, r1 + 1, "restart point does not start an entry"},
      {end - 8, r1 - 1, "restart point does not start an entry"},
      {end - 8, 100000, "restart point past the last entry"},
      {end - 12, 3, "first restart point is not 0"},
      {end - 4, 0, "bad restart count"},
      {end - 4, 0x40000000u, "bad restart count"},
  };
  uint8_t *d = malloc(n);
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    memcpy(d, orig, n);
    for (int k = 0; k < 4; k++) d[cases[i].at + k] = (uint8_t)(cases[i].value >> (8 * k));
    fix_crcs(d, n, &tab);
    spit(path, d, n);
    ldr_bundle *b = NULL;
    td_err err = {0};
    ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, cases[i].msg);
    ck_assert_ptr_nonnull(strstr(err.msg, path));
  }
  /* An entry at a restart point that claims a shared prefix. */
  memcpy(d, orig, n);
  ck_assert_uint_eq(d[tab.blocks[0].off + r1], 0);
  d[tab.blocks[0].off + r1] = 1;
  fix_crcs(d, n, &tab);
  spit(path, d, n);
  ldr_bundle *b = NULL;
  td_err err = {0};
  ck_err(ldr_bundle_open(t.prefix, &b, &err), err, TD_DATA_LOSS, "shares a key prefix");
  spit(path, orig, n);
  b = open_ok(t.prefix);
  ck_assert_int_eq(ldr_bundle_count(b), N);
  ldr_bundle_close(b);
  table_free(&tab);
  free(d);
  free(orig);
  tmpb_cleanup(&t);
}
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_bundle");
  TCase *tc = tcase_create("fixtures");
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_tf1_values);
  tcase_add_test(tc, test_tf2_keys_and_strings);
  tcase_add_test(tc, test_missing_key);
  tcase_add_test(tc, test_wrong_dtype);
  tcase_add_test(tc, test_no_such_checkpoint);
  suite_add_tcase(s, tc);

  tc = tcase_create("corruption");
  tcase_set_timeout(tc, 300); /* the fuzz loops open thousands of files; slower under ASan */
  tcase_add_test(tc, test_corrupt_data_shard);
  tcase_add_test(tc, test_truncated_data_shard);
  tcase_add_test(tc, test_corrupt_index_block);
  tcase_add_test(tc, test_truncated_index);
  tcase_add_test(tc, test_missing_data_shard);
  tcase_add_test(tc, test_garbage_index);
  tcase_add_test(tc, test_fuzz_index_flips);
  tcase_add_test(tc, test_fuzz_snappy_index);
  tcase_add_test(tc, test_fuzz_data_flips);
  tcase_add_test(tc, test_corrupt_restarts);
  suite_add_tcase(s, tc);

  tc = tcase_create("built");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_snappy_fixture);
  tcase_add_test(tc, test_snappy_corrupt_stream);
  tcase_add_test(tc, test_many_keys_many_blocks);
  tcase_add_test(tc, test_dtypes_and_shapes);
  tcase_add_test(tc, test_string_tensors);
  tcase_add_test(tc, test_shards);
  tcase_add_test(tc, test_bad_entries);
  tcase_add_test(tc, test_unsupported_at_read);
  tcase_add_test(tc, test_header_checks);
  tcase_add_test(tc, test_key_order_and_slice_keys);
  suite_add_tcase(s, tc);

  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
