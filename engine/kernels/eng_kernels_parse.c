/* ParseExample / ParseExampleV2: serialized tf.Example protos -> dense
 * tensors, for the Classify/Regress path (TF Serving feeds serialized
 * Examples to such graphs).
 *
 * Design note. A small protobuf wire reader walks each serialized Example
 * once and remembers, per requested dense key, where the key's latest
 * Feature lives; only those Features are decoded. Protobuf's merge rules
 * are kept, because TF Serving feeds "context bytes ++ example bytes": a
 * map entry seen later replaces an earlier one with the same key, a Feature
 * field repeated inside one entry merges (lists append), and a oneof keeps
 * its last kind. Only dense features with fully known shapes are handled
 * (Tdense, dense_shapes, dense_defaults); sparse, ragged and variable-length
 * dense features fail UNIMPLEMENTED with a message naming the node. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"

#define MAX_DENSE 64
#define MAX_CHUNKS 16 /* Feature fields of one map entry (merged) */

/* The engine prefixes kernel errors with the node's name and op. */
static td_code pfail(eng_kctx *c, td_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static td_code pfail(eng_kctx *c, td_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  td_err_vset(c->err, code, fmt, ap);
  va_end(ap);
  return code;
}

typedef struct wire {
  const uint8_t *p, *end;
} wire;

static bool rd_varint(wire *w, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (w->p >= w->end) return false;
    uint8_t b = *w->p++;
    x |= (uint64_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return false;
}

/* Reads a tag; for wire type 2 also the payload range. Skips nothing. */
typedef struct field {
  uint32_t num;
  int type;
  uint64_t varint;
  const uint8_t *data; /* LEN payload, or the 4/8 fixed bytes */
  size_t len;
} field;

static bool rd_field(wire *w, field *f) {
  uint64_t tag;
  if (!rd_varint(w, &tag) || (tag >> 3) == 0 || (tag >> 3) > UINT32_MAX) return false;
  f->num = (uint32_t)(tag >> 3);
  f->type = (int)(tag & 7);
  switch (f->type) {
    case 0:
      return rd_varint(w, &f->varint);
    case 1:
    case 5: {
      size_t n = f->type == 1 ? 8 : 4;
      if ((size_t)(w->end - w->p) < n) return false;
      f->data = w->p;
      f->len = n;
      w->p += n;
      return true;
    }
    case 2: {
      uint64_t n;
      if (!rd_varint(w, &n) || n > (uint64_t)(w->end - w->p)) return false;
      f->data = w->p;
      f->len = (size_t)n;
      w->p += n;
      return true;
    }
    default: /* groups are not part of tf.Example */
      return false;
  }
}

typedef struct chunk {
  const uint8_t *p;
  size_t len;
} chunk;

/* The latest map entry seen for one dense key: its Feature fields. */
typedef struct found {
  bool seen;
  int n;
  chunk c[MAX_CHUNKS];
} found;

typedef struct dense_spec {
  const char *key;
  size_t key_len;
  eng_dtype dt;
  eng_shape shape;  /* per example */
  int64_t numel;    /* per example */
  const eng_tensor *dflt; /* numel 0: required */
  eng_tensor *out;
} dense_spec;

typedef struct parse_job {
  eng_kctx *c;
  int nd;
  dense_spec d[MAX_DENSE];
  const eng_tensor *names;
} parse_job;

static td_code bad_example(parse_job *j, int64_t i, const char *data, size_t len) {
  return pfail(j->c, TD_INVALID_ARGUMENT, "Could not parse example input, value: '%.*s'",
                   (int)(len > 64 ? 64 : len), data);
}

static const char *example_name(parse_job *j, int64_t i, char *buf, size_t n) {
  if (j->names && eng_tensor_numel(j->names) > i) {
    const eng_str *s = &eng_tensor_strs(j->names)[i];
    snprintf(buf, n, "%.*s", (int)(s->len > 200 ? 200 : s->len), s->data);
    return buf;
  }
  return "<unknown>";
}

/* One map entry (Features.feature): key, then the Feature value fields. */
static bool scan_entry(parse_job *j, const uint8_t *p, size_t len, found *fs) {
  wire w = {p, p + len};
  const uint8_t *key = NULL;
  size_t key_len = 0;
  chunk vals[MAX_CHUNKS];
  int nv = 0;
  field f;
  while (w.p < w.end) {
    if (!rd_field(&w, &f)) return false;
    if (f.num == 1 && f.type == 2) {
      key = f.data;
      key_len = f.len;
    } else if (f.num == 2 && f.type == 2) {
      if (nv == MAX_CHUNKS) return false;
      vals[nv++] = (chunk){f.data, f.len};
    }
  }
  for (int k = 0; k < j->nd; k++) {
    if (j->d[k].key_len != key_len || (key_len && memcmp(j->d[k].key, key, key_len))) continue;
    fs[k].seen = true; /* a later entry replaces an earlier one */
    fs[k].n = nv;
    memcpy(fs[k].c, vals, (size_t)nv * sizeof *vals);
  }
  return true;
}

static bool scan_example(parse_job *j, const uint8_t *p, size_t len, found *fs) {
  wire w = {p, p + len};
  field f;
  while (w.p < w.end) {
    if (!rd_field(&w, &f)) return false;
    if (f.num != 1 || f.type != 2) continue; /* Example.features */
    wire fw = {f.data, f.data + f.len};
    field e = {0};
    while (fw.p < fw.end) {
      if (!rd_field(&fw, &e)) return false;
      if (e.num == 1 && e.type == 2 && !scan_entry(j, e.data, e.len, fs)) return false;
    }
  }
  return true;
}

/* Feature kinds are its oneof field numbers: 1 bytes, 2 float, 3 int64. */
static eng_dtype kind_dtype(uint32_t kind) {
  return kind == 1 ? ENG_DT_STRING : kind == 2 ? ENG_DT_FLOAT : kind == 3 ? ENG_DT_INT64 : ENG_DT_INVALID;
}

/* Walks the (merged) Feature of one key: finds its final kind and the point
 * from which fields of that kind accumulate. */
static bool feature_kind(const found *fd, uint32_t *kind, int *from_chunk, const uint8_t **from) {
  *kind = 0;
  *from_chunk = 0;
  *from = fd->n ? fd->c[0].p : NULL;
  for (int ci = 0; ci < fd->n; ci++) {
    wire w = {fd->c[ci].p, fd->c[ci].p + fd->c[ci].len};
    while (w.p < w.end) {
      const uint8_t *at = w.p;
      field f;
      if (!rd_field(&w, &f)) return false;
      if (f.type != 2 || f.num < 1 || f.num > 3) continue;
      if (f.num != *kind) {
        *kind = f.num;
        *from_chunk = ci;
        *from = at;
      }
    }
  }
  return true;
}

/* Visits every value of the final kind: counts them, and with dst writes
 * the first cap (floats, int64s, or chunk views for bytes). */
static bool feature_values(const found *fd, uint32_t kind, int from_chunk, const uint8_t *from,
                           int64_t *count, int64_t cap, void *dst) {
  int64_t n = 0;
  for (int ci = from_chunk; ci < fd->n; ci++) {
    wire w = {ci == from_chunk ? from : fd->c[ci].p, fd->c[ci].p + fd->c[ci].len};
    while (w.p < w.end) {
      field f;
      if (!rd_field(&w, &f)) return false;
      if (f.type != 2 || f.num < 1 || f.num > 3) continue;
      if (f.num != kind) return false; /* cannot happen past `from` */
      wire lw = {f.data, f.data + f.len};
      field v;
      while (lw.p < lw.end) {
        if (!rd_field(&lw, &v)) return false;
        if (v.num != 1) continue;
        if (kind == 1) { /* BytesList.value */
          if (v.type != 2) return false;
          if (dst && n < cap) ((chunk *)dst)[n] = (chunk){v.data, v.len};
          n++;
        } else if (kind == 2) { /* FloatList.value: packed or not */
          if (v.type == 5) {
            if (dst && n < cap) memcpy((float *)dst + n, v.data, 4);
            n++;
          } else if (v.type == 2 && v.len % 4 == 0) {
            int64_t k = (int64_t)(v.len / 4);
            if (dst && n + k <= cap) memcpy((float *)dst + n, v.data, v.len);
            n += k;
          } else {
            return false;
          }
        } else { /* Int64List.value: packed or not */
          if (v.type == 0) {
            if (dst && n < cap) ((int64_t *)dst)[n] = (int64_t)v.varint;
            n++;
          } else if (v.type == 2) {
            wire pw = {v.data, v.data + v.len};
            uint64_t x;
            while (pw.p < pw.end) {
              if (!rd_varint(&pw, &x)) return false;
              if (dst && n < cap) ((int64_t *)dst)[n] = (int64_t)x;
              n++;
            }
          } else {
            return false;
          }
        }
      }
    }
  }
  *count = n;
  return true;
}

/* Little-endian floats are what the wire holds; this engine runs on
 * little-endian hosts only (static check). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "ParseExample assumes little-endian");

/* Writes example i's values for dense key k into the output; strings are
 * only measured (lens) on the first pass and copied on the second. */
static td_code fill_dense(parse_job *j, int64_t i, int k, const found *fd, size_t *lens,
                          bool copy_strings) {
  dense_spec *d = &j->d[k];
  const size_t es = eng_dtype_size(d->dt);
  char nb[256];
  uint32_t kind = 0;
  int from_chunk = 0;
  const uint8_t *from = NULL;
  if (fd->seen && !feature_kind(fd, &kind, &from_chunk, &from))
    return pfail(j->c, TD_INVALID_ARGUMENT, "Name: %s, Key: %s, Index: %" PRId64
                     ".  Could not parse the feature.", example_name(j, i, nb, sizeof nb), d->key, i);
  if (!fd->seen || !kind) { /* missing (or an empty Feature) */
    if (!eng_tensor_numel(d->dflt))
      return pfail(j->c, TD_INVALID_ARGUMENT,
                       "Name: %s, Feature: %s (data type: %s) is required but could not be found.",
                       example_name(j, i, nb, sizeof nb), d->key, eng_dtype_name(d->dt));
    if (d->dt == ENG_DT_STRING) {
      const eng_str *ds = eng_tensor_strs(d->dflt);
      for (int64_t v = 0; v < d->numel; v++) {
        if (!copy_strings) lens[i * d->numel + v] = ds[v].len;
        else memcpy(eng_tensor_str_bytes(d->out, i * d->numel + v), ds[v].data, ds[v].len);
      }
    } else if (!copy_strings) {
      memcpy((char *)eng_tensor_data(d->out) + (size_t)(i * d->numel) * es,
             eng_tensor_data(d->dflt), (size_t)d->numel * es);
    }
    return TD_OK;
  }
  if (kind_dtype(kind) != d->dt)
    return pfail(j->c, TD_INVALID_ARGUMENT,
                     "Name: %s, Key: %s, Index: %" PRId64 ".  Data types don't match. Expected type: %s, "
                     "Actual type: %s",
                     example_name(j, i, nb, sizeof nb), d->key, i, eng_dtype_name(d->dt),
                     eng_dtype_name(kind_dtype(kind)));
  int64_t n = 0;
  if (!feature_values(fd, kind, from_chunk, from, &n, 0, NULL))
    return pfail(j->c, TD_INVALID_ARGUMENT, "Name: %s, Key: %s, Index: %" PRId64
                     ".  Could not parse the feature.", example_name(j, i, nb, sizeof nb), d->key, i);
  if (n != d->numel) {
    char sb[96];
    return pfail(j->c, TD_INVALID_ARGUMENT,
                     "Name: %s, Key: %s, Index: %" PRId64 ".  Number of %s values != expected.  "
                     "Values size: %" PRId64 " but output shape: %s",
                     example_name(j, i, nb, sizeof nb), d->key, i,
                     d->dt == ENG_DT_STRING ? "bytes" : eng_dtype_name(d->dt), n,
                     eng_shape_str(&d->shape, sb, sizeof sb));
  }
  if (d->dt == ENG_DT_STRING) {
    chunk *strs = malloc((size_t)d->numel * sizeof *strs + 1);
    if (!strs) return pfail(j->c, TD_RESOURCE_EXHAUSTED, "out of memory");
    feature_values(fd, kind, from_chunk, from, &n, d->numel, strs);
    for (int64_t v = 0; v < d->numel; v++) {
      if (!copy_strings) lens[i * d->numel + v] = strs[v].len;
      else memcpy(eng_tensor_str_bytes(d->out, i * d->numel + v), strs[v].p, strs[v].len);
    }
    free(strs);
    return TD_OK;
  }
  if (!copy_strings) {
    char *dst = (char *)eng_tensor_data(d->out) + (size_t)(i * d->numel) * es;
    feature_values(fd, kind, from_chunk, from, &n, d->numel, dst);
  }
  return TD_OK;
}

/* Shared by both ops once inputs are located: keys[k] is a scalar string
 * tensor element, defaults[k] a tensor. */
static td_code run_parse(parse_job *j, const eng_tensor *serialized, int first_dense_out) {
  eng_kctx *c = j->c;
  if (serialized->dtype != ENG_DT_STRING)
    return pfail(c, TD_INVALID_ARGUMENT, "serialized must be a string tensor");
  if (serialized->shape.rank > 1)
    return pfail(c, TD_INVALID_ARGUMENT, "serialized must be a vector or a scalar, got rank %d",
                     serialized->shape.rank);
  const bool scalar = serialized->shape.rank == 0;
  const int64_t batch = eng_tensor_numel(serialized);
  const eng_str *ser = eng_tensor_strs(serialized);
  td_code rc = TD_OK;
  size_t *lens[MAX_DENSE] = {0};
  bool any_string = false;
  for (int k = 0; k < j->nd && !rc; k++) {
    dense_spec *d = &j->d[k];
    eng_shape s = d->shape;
    if (!scalar) {
      if (s.rank + 1 > ENG_MAX_RANK)
        return pfail(c, TD_UNIMPLEMENTED, "dense feature '%s' has too many dims", d->key);
      memmove(s.dim + 1, s.dim, (size_t)s.rank * sizeof s.dim[0]);
      s.dim[0] = batch;
      s.rank++;
    }
    if (d->numel && batch > INT64_MAX / 16 / d->numel)
      return pfail(c, TD_INVALID_ARGUMENT, "dense feature '%s': %" PRId64 " examples are too many",
                   d->key, batch);
    int oi = first_dense_out + k;
    if (oi >= c->n_out) { /* output never consumed: parse for errors only */
      d->out = NULL;
      continue;
    }
    d->out = &c->out[oi];
    if (d->dt == ENG_DT_STRING) {
      any_string = true;
      lens[k] = calloc((size_t)(batch * d->numel) + 1, sizeof(size_t));
      if (!lens[k]) rc = pfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
      d->out->shape = s; /* allocated after lengths are known */
    } else {
      rc = eng_tensor_alloc(d->out, d->dt, &s, c->err);
    }
  }
  /* Pass 1: locate, check, write fixed-size values, measure strings. */
  found fs[MAX_DENSE];
  for (int64_t i = 0; i < batch && !rc; i++) {
    memset(fs, 0, (size_t)j->nd * sizeof fs[0]);
    if (!scan_example(j, (const uint8_t *)ser[i].data, ser[i].len, fs)) {
      rc = bad_example(j, i, ser[i].data, ser[i].len);
      break;
    }
    for (int k = 0; k < j->nd && !rc; k++) {
      if (!j->d[k].out) {
        /* Unused output: still enforce required features. */
        if (!fs[k].seen && !eng_tensor_numel(j->d[k].dflt)) {
          char nb[256];
          rc = pfail(c, TD_INVALID_ARGUMENT,
                         "Name: %s, Feature: %s (data type: %s) is required but could not be found.",
                         example_name(j, i, nb, sizeof nb), j->d[k].key, eng_dtype_name(j->d[k].dt));
        }
        continue;
      }
      rc = fill_dense(j, i, k, &fs[k], lens[k], false);
    }
  }
  /* Pass 2: strings. */
  for (int k = 0; k < j->nd && !rc && any_string; k++) {
    dense_spec *d = &j->d[k];
    if (d->dt != ENG_DT_STRING || !d->out) continue;
    eng_shape s = d->out->shape;
    d->out->shape = (eng_shape){0};
    rc = eng_tensor_alloc_strings(d->out, &s, lens[k], c->err);
    for (int64_t i = 0; i < batch && !rc; i++) {
      memset(fs, 0, (size_t)j->nd * sizeof fs[0]);
      scan_example(j, (const uint8_t *)ser[i].data, ser[i].len, fs);
      rc = fill_dense(j, i, k, &fs[k], lens[k], true);
    }
  }
  for (int k = 0; k < j->nd; k++) free(lens[k]);
  if (rc)
    for (int k = 0; k < j->nd; k++)
      if (j->d[k].out) eng_tensor_release(j->d[k].out);
  return rc;
}

/* Reads dense key k's spec from attrs and the default tensor. */
static td_code dense_setup(parse_job *j, int k, const eng_tensor *key_tensor, int64_t key_index,
                           const eng_attr *tdense, const eng_attr *shapes,
                           const eng_tensor *dflt) {
  eng_kctx *c = j->c;
  dense_spec *d = &j->d[k];
  if (key_tensor->dtype != ENG_DT_STRING || eng_tensor_numel(key_tensor) <= key_index)
    return pfail(c, TD_INVALID_ARGUMENT, "dense_keys must be strings");
  const eng_str *ks = &eng_tensor_strs(key_tensor)[key_index];
  d->key = ks->data;
  d->key_len = ks->len;
  if (!tdense || tdense->kind != ENG_ATTR_LIST || tdense->list_kind != ENG_ATTR_TYPE ||
      tdense->n <= k)
    return pfail(c, TD_INVALID_ARGUMENT, "attr Tdense is missing or short");
  if (!shapes || shapes->kind != ENG_ATTR_LIST || shapes->n <= k ||
      shapes->list_kind != ENG_ATTR_SHAPE)
    return pfail(c, TD_INVALID_ARGUMENT, "attr dense_shapes is missing or short");
  d->dt = tdense->ltype[k];
  if (d->dt != ENG_DT_FLOAT && d->dt != ENG_DT_INT64 && d->dt != ENG_DT_STRING)
    return pfail(c, TD_INVALID_ARGUMENT, "dense feature '%.*s': unsupported dtype %s",
                     (int)d->key_len, d->key, eng_dtype_name(d->dt));
  d->shape = shapes->lshape[k];
  d->numel = eng_shape_numel(&d->shape);
  if (d->shape.rank < 0 || d->numel < 0)
    return pfail(c, TD_UNIMPLEMENTED,
                     "dense feature '%.*s' has a variable-length shape (FixedLenSequenceFeature): "
                     "not supported by tensord",
                     (int)d->key_len, d->key);
  if (dflt->dtype != d->dt && eng_tensor_numel(dflt))
    return pfail(c, TD_INVALID_ARGUMENT, "dense_defaults[%d] has dtype %s, expected %s", k,
                     eng_dtype_name(dflt->dtype), eng_dtype_name(d->dt));
  if (eng_tensor_numel(dflt) && eng_tensor_numel(dflt) != d->numel)
    return pfail(c, TD_INVALID_ARGUMENT,
                     "dense_defaults[%d] has %" PRId64 " values, the feature needs %" PRId64, k,
                     eng_tensor_numel(dflt), d->numel);
  d->dflt = dflt;
  return TD_OK;
}

/* Keys are NUL-free in practice; messages print them with %s, so keep a
 * terminated copy per key for the job's lifetime. */
typedef struct key_copies {
  char *k[MAX_DENSE];
} key_copies;

static td_code own_keys(parse_job *j, key_copies *kc) {
  for (int k = 0; k < j->nd; k++) {
    kc->k[k] = strndup(j->d[k].key, j->d[k].key_len);
    if (!kc->k[k]) return pfail(j->c, TD_RESOURCE_EXHAUSTED, "out of memory");
    j->d[k].key = kc->k[k];
  }
  return TD_OK;
}

static void free_keys(key_copies *kc) {
  for (int k = 0; k < MAX_DENSE; k++) free(kc->k[k]);
}

td_code eng_k_parse_example_v2(eng_kctx *c) {
  const eng_node *n = c->node;
  parse_job j = {.c = c};
  if (c->n_in < 5) return pfail(c, TD_INVALID_ARGUMENT, "expects at least 5 inputs");
  if (eng_node_attr_int(n, "num_sparse", 0) > 0 || eng_tensor_numel(&c->in[2]) > 0)
    return pfail(c, TD_UNIMPLEMENTED, "sparse features (VarLenFeature, SparseFeature) are "
                                          "not supported by tensord");
  if (eng_tensor_numel(&c->in[4]) > 0)
    return pfail(c, TD_UNIMPLEMENTED, "ragged features are not supported by tensord");
  const eng_tensor *keys = &c->in[3];
  int64_t nd = eng_tensor_numel(keys);
  if (nd > MAX_DENSE || nd != c->n_in - 5)
    return pfail(c, TD_INVALID_ARGUMENT, "%" PRId64 " dense keys for %d dense_defaults", nd,
                     c->n_in - 5);
  j.nd = (int)nd;
  j.names = eng_tensor_numel(&c->in[1]) ? &c->in[1] : NULL;
  const eng_attr *tdense = eng_node_attr(n, "Tdense");
  const eng_attr *shapes = eng_node_attr(n, "dense_shapes");
  key_copies kc = {0};
  td_code rc = TD_OK;
  for (int k = 0; k < j.nd && !rc; k++)
    rc = dense_setup(&j, k, keys, k, tdense, shapes, &c->in[5 + k]);
  if (!rc) rc = own_keys(&j, &kc);
  if (!rc) rc = run_parse(&j, &c->in[0], 0);
  free_keys(&kc);
  return rc;
}

td_code eng_k_parse_example(eng_kctx *c) {
  const eng_node *n = c->node;
  parse_job j = {.c = c};
  int64_t ns = eng_node_attr_int(n, "Nsparse", 0);
  int64_t nd = eng_node_attr_int(n, "Ndense", 0);
  if (ns > 0)
    return pfail(c, TD_UNIMPLEMENTED, "sparse features (VarLenFeature, SparseFeature) are "
                                          "not supported by tensord");
  if (nd > MAX_DENSE || nd < 0 || c->n_in != 2 + 2 * nd)
    return pfail(c, TD_INVALID_ARGUMENT, "expects %" PRId64 " inputs, got %d", 2 + 2 * nd,
                     c->n_in);
  j.nd = (int)nd;
  j.names = eng_tensor_numel(&c->in[1]) ? &c->in[1] : NULL;
  const eng_attr *tdense = eng_node_attr(n, "Tdense");
  const eng_attr *shapes = eng_node_attr(n, "dense_shapes");
  key_copies kc = {0};
  td_code rc = TD_OK;
  for (int k = 0; k < j.nd && !rc; k++)
    rc = dense_setup(&j, k, &c->in[2 + k], 0, tdense, shapes, &c->in[2 + nd + k]);
  if (!rc) rc = own_keys(&j, &kc);
  if (!rc) rc = run_parse(&j, &c->in[0], 0);
  free_keys(&kc);
  return rc;
}
