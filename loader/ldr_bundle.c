/* Tensor bundle reader.
 *
 * Open reads the whole .index into memory (one small entry per variable),
 * verifies every block and copies each entry's metadata into an array kept
 * in key order, so a read needs no index I/O and a lookup is a binary
 * search. Everything the file says about lengths and offsets is checked
 * against the bytes actually present before it is used, and allocations are
 * bounded by file sizes (a Snappy block expands at most ~22x). Data blocks
 * must lie in file order without overlap and keys must be strictly
 * increasing, as every SSTable writer produces them: that keeps the work
 * linear in the file size and makes the binary search valid.
 *
 * The layout is TensorFlow's: the SSTable of tensorflow/core/lib/io
 * (table_format), BundleHeaderProto / BundleEntryProto of
 * tensor_bundle.proto, and string tensors as varint lengths, a crc32c and
 * the bytes.
 *
 * Tensor bytes are read with pread into the tensor's own buffer, not
 * mapped: a shard truncated or rewritten while it loads then fails the load
 * (DATA_LOSS) where touching a mapping past the new end would raise SIGBUS. */
#include "ldr_bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <snappy-c.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ldr_crc32c.h"
#include "td_pbdepth.h"
#include "tensorflow/core/protobuf/tensor_bundle.pb-c.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "ldr_bundle copies little-endian tensor bytes as-is; big-endian hosts need byte swapping"
#endif

#define FOOTER_LEN 48 /* two BlockHandles padded to 40 bytes, then the magic */
#define TABLE_MAGIC 0xdb4775248b80fb57ull
#define BLOCK_TRAILER_LEN 5 /* type byte + masked CRC32C */
#define BLOCK_RAW 0
#define BLOCK_SNAPPY 1
#define SNAPPY_MAX_EXPANSION 32 /* a 3-byte copy tag yields <= 64 bytes */
#define MAX_SHARDS 99999        /* DataFilename prints the shard count as %05d */
#define BUNDLE_VERSION 1        /* kTensorBundleVersion */
#define KEY_SHOW_MAX 200        /* longest key echoed into an error message */
#define READ_CHUNK ((size_t)1 << 18) /* tensor bytes read, then checksummed, at a time */

typedef struct bundle_entry {
  char *key;
  size_t key_len;
  int tf_dtype;
  int rank; /* the entry's rank; shape holds it only when <= ENG_MAX_RANK */
  eng_shape shape;
  int64_t numel;
  int shard;
  uint64_t offset;
  uint64_t size;
  uint32_t crc; /* masked, as stored */
  bool sliced;
} bundle_entry;

struct ldr_bundle {
  char *prefix;
  char *index_path;
  int num_shards;
  int *fds;
  char **data_paths;
  bundle_entry *ents;
  int n;
  int cap;
};

/* --- small helpers ----------------------------------------------------- */

static uint32_t load_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool get_varint64(const uint8_t **pp, const uint8_t *end, uint64_t *v) {
  const uint8_t *p = *pp;
  uint64_t r = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    uint8_t b = *p++;
    if (shift == 63 && b > 1) return false; /* would overflow 64 bits */
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = r;
      *pp = p;
      return true;
    }
  }
  return false;
}

static bool get_varint32(const uint8_t **pp, const uint8_t *end, uint32_t *v) {
  const uint8_t *p = *pp;
  uint64_t r;
  if (!get_varint64(&p, end, &r) || r > UINT32_MAX || p - *pp > 5) return false;
  *v = (uint32_t)r;
  *pp = p;
  return true;
}

/* Keys come from files and callers: echo them printable and bounded. */
static const char *show_key(char *buf, size_t cap, const char *key, size_t len) {
  static const char hex[] = "0123456789abcdef";
  size_t o = 0;
  for (size_t i = 0; i < len && o + 5 < cap; i++) {
    unsigned char c = (unsigned char)key[i];
    if (o >= KEY_SHOW_MAX) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      buf[o++] = (char)c;
    } else {
      buf[o++] = '\\';
      buf[o++] = 'x';
      buf[o++] = hex[c >> 4];
      buf[o++] = hex[c & 15];
    }
  }
  buf[o] = '\0';
  return buf;
}
#define KEY_BUF (KEY_SHOW_MAX + 8)

/* Reads exactly n bytes at off; a short file is DATA_LOSS. */
static td_code pread_full(int fd, const char *path, void *buf, size_t n, uint64_t off,
                          td_err *err) {
  uint8_t *p = buf;
  while (n) {
    size_t chunk = n < (1u << 30) ? n : (1u << 30);
    ssize_t r = pread(fd, p, chunk, (off_t)off);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      return td_err_set(err, td_code_from_errno(errno), "%s: read failed: %s", path, strerror(errno));
    if (r == 0)
      return td_err_set(err, TD_DATA_LOSS, "%s: truncated: unexpected end of file at offset %llu",
                        path, (unsigned long long)off);
    p += r;
    off += (uint64_t)r;
    n -= (size_t)r;
  }
  return TD_OK;
}

static td_code read_whole_file(const char *path, uint8_t **out, size_t *len, td_err *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return td_err_set(err, td_code_from_errno(errno), "%s: %s", path, strerror(errno));
  struct stat st;
  td_code rc = TD_OK;
  uint8_t *buf = NULL;
  if (fstat(fd, &st) != 0) {
    rc = td_err_set(err, td_code_from_errno(errno), "%s: %s", path, strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    rc = td_err_set(err, TD_FAILED_PRECONDITION, "%s: not a regular file", path);
  } else if ((uint64_t)st.st_size > SIZE_MAX - 1) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: file too large", path);
  } else if (!(buf = malloc((size_t)st.st_size + 1))) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: out of memory reading %lld bytes", path,
                    (long long)st.st_size);
  } else {
    rc = pread_full(fd, path, buf, (size_t)st.st_size, 0, err);
  }
  close(fd);
  if (rc) {
    free(buf);
    return rc;
  }
  *out = buf;
  *len = (size_t)st.st_size;
  return TD_OK;
}

/* --- blocks ------------------------------------------------------------ */

/* Iterates the entries of one decoded block, checking the restart array as
 * it goes: restart offsets must rise, each must land on an entry, and the
 * entries there must not share a prefix with the previous key. */
typedef struct block_iter {
  const uint8_t *data;
  size_t limit; /* where the entries end and the restart array begins */
  size_t pos;
  const uint8_t *restarts;
  uint32_t nres;
  uint32_t next_res;
  uint8_t *key;
  size_t key_len;
  size_t key_cap;
  const uint8_t *val;
  size_t val_len;
  const char *why; /* set when init or next fails */
  bool oom;
} block_iter;

static bool block_iter_init(block_iter *it, const uint8_t *data, size_t len) {
  *it = (block_iter){.data = data};
  if (len < 4) {
    it->why = "block too short for its restart count";
    return false;
  }
  uint32_t nres = load_le32(data + len - 4);
  if (nres == 0 || nres > (len - 4) / 4) {
    it->why = "bad restart count";
    return false;
  }
  it->nres = nres;
  it->limit = len - 4 - 4 * (size_t)nres;
  it->restarts = data + it->limit;
  if (load_le32(it->restarts) != 0) {
    it->why = "first restart point is not 0";
    return false;
  }
  return true;
}

/* 1: an entry is in key/val; 0: end of block; -1: corrupt (why) or oom. */
static int block_iter_next(block_iter *it) {
  if (it->pos == it->limit) {
    /* An empty block still carries the single restart point 0. */
    if (it->next_res != it->nres && !(it->limit == 0 && it->nres == 1)) {
      it->why = "restart point past the last entry";
      return -1;
    }
    return 0;
  }
  const uint8_t *p = it->data + it->pos, *end = it->data + it->limit;
  uint32_t shared, unshared, vlen;
  if (!get_varint32(&p, end, &shared) || !get_varint32(&p, end, &unshared) ||
      !get_varint32(&p, end, &vlen)) {
    it->why = "bad entry header";
    return -1;
  }
  if (shared > it->key_len) {
    it->why = "shared key prefix longer than the previous key";
    return -1;
  }
  if (unshared > (size_t)(end - p) || vlen > (size_t)(end - p) - unshared) {
    it->why = "entry runs past the end of the block";
    return -1;
  }
  if (it->next_res < it->nres) {
    uint32_t r = load_le32(it->restarts + 4 * (size_t)it->next_res);
    if (r == it->pos) {
      if (shared != 0) {
        it->why = "entry at a restart point shares a key prefix";
        return -1;
      }
      it->next_res++;
    } else if (r < it->pos) {
      it->why = "restart point does not start an entry";
      return -1;
    }
  }
  size_t klen = (size_t)shared + unshared;
  if (klen > it->key_cap || !it->key) {
    size_t cap = it->key_cap ? it->key_cap : 64; /* never NULL, even for "" */
    while (cap < klen) cap *= 2;
    uint8_t *k = realloc(it->key, cap);
    if (!k) {
      it->why = "out of memory";
      it->oom = true;
      return -1;
    }
    it->key = k;
    it->key_cap = cap;
  }
  if (unshared) memcpy(it->key + shared, p, unshared);
  it->key_len = klen;
  it->val = p + unshared;
  it->val_len = vlen;
  it->pos = (size_t)(it->val + vlen - it->data);
  return 1;
}

static void block_iter_free(block_iter *it) {
  free(it->key);
  it->key = NULL;
}

typedef struct index_ctx {
  ldr_bundle *b;
  const char *path;
  const uint8_t *file;
  size_t size;
  uint8_t *last_key; /* the previous data entry's key, for the order check */
  size_t last_len;
  size_t last_cap;
  bool have_last;
} index_ctx;

/* Verifies the block at [off, off+size) plus its trailer and yields its
 * contents: a view into the file (raw) or a new buffer in *owned (Snappy). */
static td_code read_block(const index_ctx *c, uint64_t off, uint64_t size, uint8_t **owned,
                          const uint8_t **data, size_t *len, td_err *err) {
  uint64_t limit = c->size - FOOTER_LEN;
  *owned = NULL;
  if (off > limit || size > limit - off || limit - off - size < BLOCK_TRAILER_LEN)
    return td_err_set(err, TD_DATA_LOSS,
                      "%s: truncated or corrupt: block at offset %llu (size %llu) lies outside "
                      "the %zu-byte file",
                      c->path, (unsigned long long)off, (unsigned long long)size, c->size);
  const uint8_t *blk = c->file + off;
  uint8_t type = blk[size];
  uint32_t crc = ldr_crc32c_extend(ldr_crc32c(blk, (size_t)size), &type, 1);
  if (ldr_crc32c_mask(crc) != load_le32(blk + size + 1))
    return td_err_set(err, TD_DATA_LOSS, "%s: block checksum mismatch (block at offset %llu)",
                      c->path, (unsigned long long)off);
  if (type == BLOCK_RAW) {
    *data = blk;
    *len = (size_t)size;
    return TD_OK;
  }
  if (type != BLOCK_SNAPPY)
    return td_err_set(err, TD_DATA_LOSS,
                      "%s: unknown block compression type %u (block at offset %llu)", c->path,
                      (unsigned)type, (unsigned long long)off);
  size_t ulen;
  if (snappy_validate_compressed_buffer((const char *)blk, (size_t)size) != SNAPPY_OK ||
      snappy_uncompressed_length((const char *)blk, (size_t)size, &ulen) != SNAPPY_OK ||
      ulen / SNAPPY_MAX_EXPANSION > size)
    return td_err_set(err, TD_DATA_LOSS, "%s: corrupt Snappy block at offset %llu", c->path,
                      (unsigned long long)off);
  uint8_t *u = malloc(ulen ? ulen : 1);
  if (!u)
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: out of memory decompressing a block",
                      c->path);
  size_t got = ulen;
  if (snappy_uncompress((const char *)blk, (size_t)size, (char *)u, &got) != SNAPPY_OK ||
      got != ulen) {
    free(u);
    return td_err_set(err, TD_DATA_LOSS, "%s: corrupt Snappy block at offset %llu", c->path,
                      (unsigned long long)off);
  }
  *owned = u;
  *data = u;
  *len = ulen;
  return TD_OK;
}

/* --- entries ----------------------------------------------------------- */

static td_code parse_header(index_ctx *c, const uint8_t *val, size_t len, td_err *err) {
  td_err why;
  Tensorflow__BundleHeaderProto *h = (Tensorflow__BundleHeaderProto *)td_pb_unpack(
      &tensorflow__bundle_header_proto__descriptor, NULL, len, val, &why);
  if (!h)
    return td_err_set(err, TD_DATA_LOSS, "%s: cannot parse the bundle header: %s", c->path,
                      why.msg);
  td_code rc = TD_OK;
  if (h->endianness == TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__BIG) {
    rc = td_err_set(err, TD_UNIMPLEMENTED, "%s: big-endian checkpoints are not supported", c->path);
  } else if (h->endianness != TENSORFLOW__BUNDLE_HEADER_PROTO__ENDIANNESS__LITTLE) {
    rc = td_err_set(err, TD_DATA_LOSS, "%s: unknown endianness %d in the bundle header", c->path,
                    (int)h->endianness);
  } else if (h->num_shards < 1 || h->num_shards > MAX_SHARDS) {
    rc = td_err_set(err, TD_DATA_LOSS, "%s: bundle header has invalid num_shards %d", c->path,
                    (int)h->num_shards);
  } else if (h->version && h->version->min_consumer > BUNDLE_VERSION) {
    rc = td_err_set(err, TD_UNIMPLEMENTED,
                    "%s: checkpoint needs tensor bundle version >= %d; this reader supports %d",
                    c->path, (int)h->version->min_consumer, BUNDLE_VERSION);
  } else if (h->version) {
    for (size_t i = 0; i < h->version->n_bad_consumers; i++)
      if (h->version->bad_consumers[i] == BUNDLE_VERSION) {
        rc = td_err_set(err, TD_UNIMPLEMENTED, "%s: checkpoint disallows tensor bundle version %d",
                        c->path, BUNDLE_VERSION);
        break;
      }
  }
  if (!rc) c->b->num_shards = h->num_shards;
  tensorflow__bundle_header_proto__free_unpacked(h, NULL);
  return rc;
}

/* Checks what open can check about an entry; what depends on the caller
 * (dtype support, engine rank limit, slices) waits for ldr_bundle_read. */
static td_code entry_from_proto(index_ctx *c, const char *key,
                                const Tensorflow__BundleEntryProto *p, bundle_entry *e,
                                td_err *err) {
  char kb[KEY_BUF];
  *e = (bundle_entry){.tf_dtype = (int)p->dtype, .sliced = p->n_slices > 0};
  if (e->sliced) return TD_OK; /* shard, offset, size and crc are unused */
  const Tensorflow__TensorShapeProto *s = p->shape;
  size_t rank = s ? s->n_dim : 0;
  if (s && s->unknown_rank)
    return td_err_set(err, TD_DATA_LOSS, "%s: entry for key '%s' has an unknown rank", c->path,
                      show_key(kb, sizeof kb, key, strlen(key)));
  if (rank > INT_MAX)
    return td_err_set(err, TD_DATA_LOSS, "%s: entry for key '%s' has an invalid shape", c->path,
                      show_key(kb, sizeof kb, key, strlen(key)));
  int64_t numel = 1;
  for (size_t i = 0; i < rank; i++) {
    int64_t d = s->dim[i]->size;
    if (d < 0 || (d && numel > INT64_MAX / d))
      return td_err_set(err, TD_DATA_LOSS, "%s: entry for key '%s' has an invalid shape", c->path,
                        show_key(kb, sizeof kb, key, strlen(key)));
    numel *= d;
    if (i < ENG_MAX_RANK) e->shape.dim[i] = d;
  }
  e->rank = (int)rank;
  e->shape.rank = rank <= ENG_MAX_RANK ? (int)rank : -1;
  e->numel = numel;
  if (p->shard_id < 0 || p->shard_id >= c->b->num_shards)
    return td_err_set(err, TD_DATA_LOSS, "%s: entry for key '%s' names shard %d of %d", c->path,
                      show_key(kb, sizeof kb, key, strlen(key)), (int)p->shard_id,
                      c->b->num_shards);
  if (p->offset < 0 || p->size < 0 || p->offset > INT64_MAX - p->size)
    return td_err_set(
        err, TD_DATA_LOSS, "%s: entry for key '%s' has an invalid offset %lld / size %lld", c->path,
        show_key(kb, sizeof kb, key, strlen(key)), (long long)p->offset, (long long)p->size);
  e->shard = p->shard_id;
  e->offset = (uint64_t)p->offset;
  e->size = (uint64_t)p->size;
  e->crc = p->crc32c;
  return TD_OK;
}

static int key_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
  size_t m = an < bn ? an : bn;
  int r = m ? memcmp(a, b, m) : 0; /* a may be NULL when an == 0 */
  if (r) return r;
  return an < bn ? -1 : an > bn;
}

static td_code add_entry(index_ctx *c, const uint8_t *key, size_t klen, const uint8_t *val,
                         size_t vlen, td_err *err) {
  char kb[KEY_BUF];
  if (c->have_last && key_cmp(c->last_key, c->last_len, key, klen) >= 0)
    return td_err_set(err, TD_DATA_LOSS, "%s: keys out of order at '%s'", c->path,
                      show_key(kb, sizeof kb, (const char *)key, klen));
  if (!c->have_last && klen != 0)
    return td_err_set(err, TD_DATA_LOSS, "%s: missing the bundle header entry (key \"\")", c->path);
  if (klen > c->last_cap) {
    uint8_t *k = realloc(c->last_key, klen);
    if (!k) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: out of memory", c->path);
    c->last_key = k;
    c->last_cap = klen;
  }
  if (klen) memcpy(c->last_key, key, klen);
  c->last_len = klen;
  bool first = !c->have_last;
  c->have_last = true;
  if (first) return parse_header(c, val, vlen, err);

  /* Slice-part keys (checkpoint::EncodeTensorNameSlice) start with a NUL
   * byte; they are parts of partitioned variables, which no C-string key can
   * name, so they stay out of the table. */
  if (klen && memchr(key, '\0', klen)) return TD_OK;

  ldr_bundle *b = c->b;
  if (b->n == b->cap) {
    if (b->cap >= INT_MAX / 2)
      return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: too many entries", c->path);
    int cap = b->cap ? b->cap * 2 : 16;
    bundle_entry *ents = realloc(b->ents, (size_t)cap * sizeof *ents);
    if (!ents) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: out of memory", c->path);
    b->ents = ents;
    b->cap = cap;
  }
  char *k = malloc(klen + 1);
  if (!k) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: out of memory", c->path);
  memcpy(k, key, klen);
  k[klen] = '\0';
  td_err why;
  Tensorflow__BundleEntryProto *p = (Tensorflow__BundleEntryProto *)td_pb_unpack(
      &tensorflow__bundle_entry_proto__descriptor, NULL, vlen, val, &why);
  if (!p) {
    td_err_set(err, TD_DATA_LOSS, "%s: cannot parse the bundle entry for key '%s': %s", c->path,
               show_key(kb, sizeof kb, k, klen), why.msg);
    free(k);
    return TD_DATA_LOSS;
  }
  bundle_entry e;
  td_code rc = entry_from_proto(c, k, p, &e, err);
  tensorflow__bundle_entry_proto__free_unpacked(p, NULL);
  if (rc) {
    free(k);
    return rc;
  }
  e.key = k;
  e.key_len = klen;
  b->ents[b->n++] = e;
  return TD_OK;
}

static td_code block_error(const index_ctx *c, const block_iter *it, uint64_t off, td_err *err) {
  if (it->oom) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: out of memory", c->path);
  return td_err_set(err, TD_DATA_LOSS, "%s: corrupt block at offset %llu: %s", c->path,
                    (unsigned long long)off, it->why);
}

static td_code parse_data_block(index_ctx *c, uint64_t off, uint64_t size, td_err *err) {
  uint8_t *owned;
  const uint8_t *data;
  size_t len;
  td_code rc = read_block(c, off, size, &owned, &data, &len, err);
  if (rc) return rc;
  block_iter it;
  int r = 0;
  if (!block_iter_init(&it, data, len)) {
    rc = block_error(c, &it, off, err);
  } else {
    while ((r = block_iter_next(&it)) == 1)
      if ((rc = add_entry(c, it.key, it.key_len, it.val, it.val_len, err))) break;
    if (!rc && r < 0) rc = block_error(c, &it, off, err);
  }
  block_iter_free(&it);
  free(owned);
  return rc;
}

static td_code parse_index(index_ctx *c, td_err *err) {
  if (c->size < FOOTER_LEN)
    return td_err_set(err, TD_DATA_LOSS,
                      "%s: truncated: %zu bytes is too short for a checkpoint index", c->path,
                      c->size);
  const uint8_t *foot = c->file + c->size - FOOTER_LEN;
  uint64_t magic = (uint64_t)load_le32(foot + 44) << 32 | load_le32(foot + 40);
  if (magic != TABLE_MAGIC)
    return td_err_set(err, TD_DATA_LOSS, "%s: not a checkpoint index (bad magic)", c->path);
  const uint8_t *p = foot, *pend = foot + 40;
  uint64_t meta_off, meta_size, idx_off, idx_size;
  if (!get_varint64(&p, pend, &meta_off) || !get_varint64(&p, pend, &meta_size) ||
      !get_varint64(&p, pend, &idx_off) || !get_varint64(&p, pend, &idx_size))
    return td_err_set(err, TD_DATA_LOSS, "%s: corrupt table footer", c->path);

  /* The metaindex names filter blocks, which bundles do not use: verify and
   * ignore it. */
  uint8_t *owned;
  const uint8_t *data;
  size_t len;
  td_code rc = read_block(c, meta_off, meta_size, &owned, &data, &len, err);
  free(owned);
  if (rc) return rc;

  rc = read_block(c, idx_off, idx_size, &owned, &data, &len, err);
  if (rc) return rc;
  block_iter it;
  int r = 0;
  uint64_t next_min = 0; /* data blocks come in file order, without overlap */
  if (!block_iter_init(&it, data, len)) {
    rc = block_error(c, &it, idx_off, err);
  } else {
    while ((r = block_iter_next(&it)) == 1) {
      const uint8_t *h = it.val, *hend = it.val + it.val_len;
      uint64_t boff, bsize;
      if (!get_varint64(&h, hend, &boff) || !get_varint64(&h, hend, &bsize)) {
        rc = td_err_set(err, TD_DATA_LOSS, "%s: corrupt block handle in the index block", c->path);
        break;
      }
      if (boff < next_min) {
        rc = td_err_set(err, TD_DATA_LOSS,
                        "%s: data block at offset %llu overlaps or precedes the previous one",
                        c->path, (unsigned long long)boff);
        break;
      }
      if ((rc = parse_data_block(c, boff, bsize, err))) break;
      next_min = boff + bsize + BLOCK_TRAILER_LEN; /* in range: read_block checked it */
    }
    if (!rc && r < 0) rc = block_error(c, &it, idx_off, err);
  }
  block_iter_free(&it);
  free(owned);
  if (!rc && !c->have_last)
    rc = td_err_set(err, TD_DATA_LOSS, "%s: missing the bundle header entry (key \"\")", c->path);
  return rc;
}

static td_code open_shards(ldr_bundle *b, td_err *err) {
  b->fds = malloc((size_t)b->num_shards * sizeof *b->fds);
  b->data_paths = calloc((size_t)b->num_shards, sizeof *b->data_paths);
  if (!b->fds || !b->data_paths)
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: out of memory", b->index_path);
  for (int i = 0; i < b->num_shards; i++) b->fds[i] = -1;
  for (int i = 0; i < b->num_shards; i++) {
    if (asprintf(&b->data_paths[i], "%s.data-%05d-of-%05d", b->prefix, i, b->num_shards) < 0) {
      b->data_paths[i] = NULL;
      return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: out of memory", b->index_path);
    }
    b->fds[i] = open(b->data_paths[i], O_RDONLY | O_CLOEXEC);
    if (b->fds[i] < 0) {
      int e = errno;
      if (e == ENOENT)
        return td_err_set(err, TD_NOT_FOUND, "%s: checkpoint data file not found",
                          b->data_paths[i]);
      return td_err_set(err, td_code_from_errno(e), "%s: %s", b->data_paths[i], strerror(e));
    }
  }
  return TD_OK;
}

/* --- API --------------------------------------------------------------- */

td_code ldr_bundle_open(const char *prefix, ldr_bundle **out, td_err *err) {
  ldr_bundle *b = calloc(1, sizeof *b);
  if (!b) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  if (!(b->prefix = strdup(prefix)) || asprintf(&b->index_path, "%s.index", prefix) < 0) {
    b->index_path = NULL;
    ldr_bundle_close(b);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  index_ctx c = {.b = b, .path = b->index_path};
  uint8_t *file = NULL;
  td_code rc = read_whole_file(b->index_path, &file, &c.size, err);
  if (!rc) {
    c.file = file;
    rc = parse_index(&c, err);
    free(file);
    free(c.last_key);
  }
  if (!rc) rc = open_shards(b, err);
  if (rc) {
    ldr_bundle_close(b);
    return rc;
  }
  *out = b;
  return TD_OK;
}

void ldr_bundle_close(ldr_bundle *b) {
  if (!b) return;
  for (int i = 0; i < b->num_shards; i++) {
    if (b->fds && b->fds[i] >= 0) close(b->fds[i]);
    if (b->data_paths) free(b->data_paths[i]);
  }
  free(b->fds);
  free(b->data_paths);
  for (int i = 0; i < b->n; i++) free(b->ents[i].key);
  free(b->ents);
  free(b->index_path);
  free(b->prefix);
  free(b);
}

int ldr_bundle_count(const ldr_bundle *b) { return b->n; }

const char *ldr_bundle_key(const ldr_bundle *b, int i) {
  return i >= 0 && i < b->n ? b->ents[i].key : NULL;
}

static const bundle_entry *find_entry(const ldr_bundle *b, const char *key) {
  size_t klen = strlen(key);
  int lo = 0, hi = b->n;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    const bundle_entry *e = &b->ents[mid];
    int r = key_cmp((const uint8_t *)e->key, e->key_len, (const uint8_t *)key, klen);
    if (r == 0) return e;
    if (r < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return NULL;
}

static td_code read_strings(const ldr_bundle *b, const bundle_entry *e, eng_tensor *out,
                            td_err *err) {
  char kb[KEY_BUF];
  const char *path = b->data_paths[e->shard];
  const char *key = show_key(kb, sizeof kb, e->key, e->key_len);
  /* Each element needs at least one length byte, then the 4-byte length CRC;
   * this also bounds the lengths array by the (already checked) file size. */
  if (e->size < 4 || (uint64_t)e->numel > e->size - 4)
    return td_err_set(err, TD_DATA_LOSS,
                      "%s: invalid size in bundle entry for key '%s': %llu bytes cannot hold "
                      "%lld strings",
                      b->index_path, key, (unsigned long long)e->size, (long long)e->numel);
  size_t n = (size_t)e->numel, size = (size_t)e->size;
  uint8_t *raw = malloc(size);
  size_t *lens = malloc((n ? n : 1) * sizeof *lens);
  td_code rc = TD_OK;
  if (!raw || !lens) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory reading tensor '%s'", key);
    goto done;
  }
  if ((rc = pread_full(b->fds[e->shard], path, raw, size, e->offset, err))) goto done;

  /* The CRC covers each length as a fixed-width LE integer (not the varint
   * bytes), then the stored masked length CRC, then the string bytes. */
  const uint8_t *p = raw, *end = raw + size - 4;
  uint32_t crc = 0;
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) {
    uint64_t len;
    if (!get_varint64(&p, end, &len)) {
      rc = td_err_set(err, TD_DATA_LOSS, "%s: corrupt string lengths for tensor '%s'", path, key);
      goto done;
    }
    /* total stays <= size, so the sum cannot overflow. */
    if (len > size - total) {
      rc = td_err_set(err, TD_DATA_LOSS,
                      "%s: string tensor '%s': lengths exceed the entry's %zu bytes", path, key,
                      size);
      goto done;
    }
    total += len;
    lens[i] = (size_t)len;
    uint8_t le[8];
    for (int j = 0; j < 8; j++) le[j] = (uint8_t)(len >> (8 * j));
    crc = ldr_crc32c_extend(crc, le, len <= UINT32_MAX ? 4 : 8);
  }
  if (ldr_crc32c_unmask(load_le32(p)) != crc) {
    rc = td_err_set(err, TD_DATA_LOSS, "%s: length checksum mismatch for tensor '%s'", path, key);
    goto done;
  }
  crc = ldr_crc32c_extend(crc, p, 4);
  p += 4;
  size_t rest = size - (size_t)(p - raw);
  if (total != rest) {
    rc = td_err_set(err, TD_DATA_LOSS,
                    "%s: string tensor '%s': lengths add up to %llu bytes but the entry holds %zu",
                    path, key, (unsigned long long)total, rest);
    goto done;
  }
  crc = ldr_crc32c_extend(crc, p, rest);
  if (ldr_crc32c_mask(crc) != e->crc) {
    rc = td_err_set(err, TD_DATA_LOSS, "%s: checksum mismatch for tensor '%s'", path, key);
    goto done;
  }
  eng_tensor t;
  if ((rc = eng_tensor_alloc_strings(&t, &e->shape, lens, err))) goto done;
  for (size_t i = 0; i < n; i++) {
    memcpy(eng_tensor_str_bytes(&t, (int64_t)i), p, lens[i]);
    p += lens[i];
  }
  *out = t;
done:
  free(lens);
  free(raw);
  return rc;
}

/* The checks every read makes before touching data: the entry exists, is
 * whole, has a storable dtype (`want`'s, or one widened to it), a supported
 * rank, a size matching its shape, and lies inside its shard. */
static td_code check_entry(const ldr_bundle *b, const char *key, eng_dtype want,
                           const bundle_entry **out, eng_dtype *dtype, bool *widen_out,
                           td_err *err) {
  char kb[KEY_BUF];
  const bundle_entry *e = find_entry(b, key);
  const char *skey = show_key(kb, sizeof kb, key, strlen(key));
  if (!e)
    return td_err_set(err, TD_NOT_FOUND, "Key %s not found in checkpoint %s", skey, b->prefix);
  if (e->sliced)
    return td_err_set(err, TD_UNIMPLEMENTED,
                      "%s: tensor '%s' is a partitioned variable (saved in slices), which is not "
                      "supported",
                      b->prefix, skey);
  bool is_ref = false;
  eng_dtype dt = eng_dtype_from_tf(e->tf_dtype, &is_ref);
  if (is_ref) dt = ENG_DT_INVALID; /* a checkpoint stores values, never refs */
  /* Half and bfloat16 checkpoints feed graphs widened to float32. */
  bool widen = want == ENG_DT_FLOAT && eng_dtype_widened(dt) == ENG_DT_FLOAT && dt != want;
  if (want != ENG_DT_INVALID && dt != want && !widen) {
    char num[16];
    snprintf(num, sizeof num, "%d", e->tf_dtype);
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "tensor_name = %s; expected dtype %s does not equal restored dtype %s", skey,
                      eng_dtype_name(want), dt != ENG_DT_INVALID ? eng_dtype_name(dt) : num);
  }
  size_t es = eng_dtype_size(dt);
  if (dt != ENG_DT_STRING && es == 0)
    return td_err_set(err, TD_UNIMPLEMENTED,
                      "%s: tensor '%s' has dtype %d, which the checkpoint reader does not support",
                      b->prefix, skey, e->tf_dtype);
  if (e->rank > ENG_MAX_RANK)
    return td_err_set(err, TD_UNIMPLEMENTED, "%s: tensor '%s' has rank %d; at most %d is supported",
                      b->prefix, skey, e->rank, ENG_MAX_RANK);
  if (dt != ENG_DT_STRING &&
      ((uint64_t)e->numel > UINT64_MAX / es || (uint64_t)e->numel * es != e->size))
    return td_err_set(err, TD_DATA_LOSS,
                      "%s: invalid size in bundle entry for key '%s': stored size %llu, expected "
                      "%lld elements of %zu bytes",
                      b->index_path, skey, (unsigned long long)e->size, (long long)e->numel, es);

  /* Allocate only what the data file can back. */
  const char *path = b->data_paths[e->shard];
  struct stat st;
  if (fstat(b->fds[e->shard], &st) != 0)
    return td_err_set(err, td_code_from_errno(errno), "%s: %s", path, strerror(errno));
  uint64_t fsize = st.st_size > 0 ? (uint64_t)st.st_size : 0;
  if (e->offset > fsize || e->size > fsize - e->offset)
    return td_err_set(err, TD_DATA_LOSS,
                      "%s: truncated: tensor '%s' needs bytes [%llu, %llu) but the file has %llu",
                      path, skey, (unsigned long long)e->offset,
                      (unsigned long long)(e->offset + e->size), (unsigned long long)fsize);
  if (e->size > SIZE_MAX)
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: tensor '%s' is too large", path, skey);
  *out = e;
  *dtype = dt;
  *widen_out = widen;
  return TD_OK;
}

td_code ldr_bundle_read(const ldr_bundle *b, const char *key, eng_dtype want, eng_tensor *out,
                        td_err *err) {
  char kb[KEY_BUF];
  const char *skey = show_key(kb, sizeof kb, key, strlen(key));
  const bundle_entry *e;
  eng_dtype dt;
  bool widen;
  td_code rc = check_entry(b, key, want, &e, &dt, &widen, err);
  if (rc) return rc;
  const char *path = b->data_paths[e->shard];
  if (dt == ENG_DT_STRING) return read_strings(b, e, out, err);

  /* Read straight into the tensor (no zero fill first), the checksum
   * following each chunk while it is still in cache: one pass over the
   * bytes instead of three. */
  eng_tensor t;
  rc = eng_tensor_alloc_raw(&t, dt, &e->shape, err);
  if (rc) return rc;
  uint8_t *dst = eng_tensor_data(&t);
  uint32_t crc = 0;
  for (uint64_t done = 0; !rc && done < e->size;) {
    size_t chunk = e->size - done < READ_CHUNK ? (size_t)(e->size - done) : READ_CHUNK;
    rc = pread_full(b->fds[e->shard], path, dst + done, chunk, e->offset + done, err);
    if (!rc) crc = ldr_crc32c_extend(crc, dst + done, chunk);
    done += chunk;
  }
  if (!rc && ldr_crc32c_mask(crc) != e->crc)
    rc = td_err_set(err, TD_DATA_LOSS, "%s: checksum mismatch for tensor '%s'", path, skey);
  if (!rc && widen) rc = eng_tensor_widen(&t, err);
  if (rc) {
    eng_tensor_release(&t);
    return rc;
  }
  *out = t;
  return TD_OK;
}

td_code ldr_bundle_verify(const ldr_bundle *b, const char *key, eng_dtype want, eng_dtype *dtype,
                          eng_shape *shape, td_err *err) {
  char kb[KEY_BUF];
  const char *skey = show_key(kb, sizeof kb, key, strlen(key));
  const bundle_entry *e;
  eng_dtype dt;
  bool widen;
  td_code rc = check_entry(b, key, want, &e, &dt, &widen, err);
  if (rc) return rc;
  if (dt == ENG_DT_STRING) { /* small, and their checks are read_strings' own */
    eng_tensor t;
    if ((rc = read_strings(b, e, &t, err))) return rc;
    eng_tensor_release(&t);
  } else {
    const char *path = b->data_paths[e->shard];
    uint8_t *buf = malloc(READ_CHUNK);
    if (!buf) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    uint32_t crc = 0;
    for (uint64_t done = 0; !rc && done < e->size;) {
      size_t chunk = e->size - done < READ_CHUNK ? (size_t)(e->size - done) : READ_CHUNK;
      rc = pread_full(b->fds[e->shard], path, buf, chunk, e->offset + done, err);
      if (!rc) crc = ldr_crc32c_extend(crc, buf, chunk);
      done += chunk;
    }
    free(buf);
    if (!rc && ldr_crc32c_mask(crc) != e->crc)
      rc = td_err_set(err, TD_DATA_LOSS, "%s: checksum mismatch for tensor '%s'", path, skey);
    if (rc) return rc;
  }
  *dtype = widen ? ENG_DT_FLOAT : dt;
  *shape = e->shape;
  return TD_OK;
}
