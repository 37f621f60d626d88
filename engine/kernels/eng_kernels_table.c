/* Lookup tables as resource state: HashTableV2 names a slot of the model
 * (eng_model's variable slots, keyed by container + shared_name like a
 * variable), LookupTableImportV2 fills it, at load, from a key tensor and
 * a value tensor, and LookupTableFindV2 / LookupTableSizeV2 read it while
 * serving. The slot holds a scalar DT_VARIANT tensor whose payload is the
 * table: the key and value tensors (shared, immutable) and an
 * open-addressing index over the keys. A table is never written after the
 * import, so any number of requests may read it at once; it goes with the
 * slot, when the model (the version) is freed.
 *
 * MutableHashTableV2 is the same slot; LookupTableInsertV2 and
 * InitializeTableFromTextFileV2 (eng_kernels_vocab.c) fill it at load too.
 *
 * Keys: string, int64 or int32; values: any fixed-size dtype or string,
 * one row (values.shape[1:]) per key. A key imported twice with different
 * values is INVALID_ARGUMENT, as TensorFlow's static HashTable reports. */
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_model.h"

typedef struct table {
  eng_tensor keys, values;
  int64_t n, row, cap; /* keys, values per key, index size (a power of two) */
  int64_t *index;      /* key number, or -1 for an empty cell */
} table;

static void table_free(void *p) {
  table *t = p;
  eng_tensor_release(&t->keys);
  eng_tensor_release(&t->values);
  free(t->index);
}

static bool key_type(eng_dtype dt) {
  return dt == ENG_DT_STRING || dt == ENG_DT_INT64 || dt == ENG_DT_INT32;
}

static int64_t key_int(const eng_tensor *k, int64_t i) {
  return k->dtype == ENG_DT_INT64 ? ((const int64_t *)eng_tensor_data(k))[i]
                                  : ((const int32_t *)eng_tensor_data(k))[i];
}

static uint64_t key_hash(const eng_tensor *k, int64_t i) {
  uint64_t h;
  if (k->dtype == ENG_DT_STRING) {
    eng_str s = eng_tensor_strs(k)[i];
    h = 1469598103934665603ull; /* FNV-1a */
    for (size_t b = 0; b < s.len; b++) h = (h ^ (unsigned char)s.data[b]) * 1099511628211ull;
  } else {
    h = (uint64_t)key_int(k, i) * 0x9E3779B97F4A7C15ull;
  }
  return h ^ (h >> 29);
}

static bool key_equal(const eng_tensor *a, int64_t i, const eng_tensor *b, int64_t j) {
  if (a->dtype == ENG_DT_STRING) {
    eng_str x = eng_tensor_strs(a)[i], y = eng_tensor_strs(b)[j];
    return x.len == y.len && !memcmp(x.data, y.data, x.len);
  }
  return key_int(a, i) == key_int(b, j);
}

/* The key number of query element i of q, or -1. */
static int64_t table_find(const table *t, const eng_tensor *q, int64_t i) {
  if (!t->cap) return -1;
  for (uint64_t at = key_hash(q, i) & (uint64_t)(t->cap - 1);;
       at = (at + 1) & (uint64_t)(t->cap - 1)) {
    int64_t k = t->index[at];
    if (k < 0) return -1;
    if (key_equal(&t->keys, k, q, i)) return k;
  }
}

static bool rows_equal(const eng_tensor *v, int64_t row, int64_t a, int64_t b) {
  if (v->dtype == ENG_DT_STRING) {
    for (int64_t e = 0; e < row; e++) {
      eng_str x = eng_tensor_strs(v)[a * row + e], y = eng_tensor_strs(v)[b * row + e];
      if (x.len != y.len || memcmp(x.data, y.data, x.len)) return false;
    }
    return true;
  }
  size_t rb = (size_t)row * eng_dtype_size(v->dtype);
  const char *d = eng_tensor_data(v);
  return !memcmp(d + (size_t)a * rb, d + (size_t)b * rb, rb);
}

td_code eng_k_hash_table(eng_kctx *c) {
  if (!key_type(eng_node_attr_type(c->node, "key_dtype", ENG_DT_STRING)))
    return eng_kfail(c, TD_UNIMPLEMENTED, "tables keyed by %s",
                     eng_dtype_name(eng_node_attr_type(c->node, "key_dtype", ENG_DT_STRING)));
  return eng_tensor_alloc_handle(&c->out[0], eng_model_node_slot(c->model, c->node_id), false,
                                 c->err);
}

static td_code want_table_handle(eng_kctx *c) {
  if (c->in[0].dtype != ENG_DT_RESOURCE || eng_tensor_handle(&c->in[0]) < 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input 0 is %s, not a table",
                     eng_dtype_name(c->in[0].dtype));
  return TD_OK;
}

td_code eng_k_lookup_table_import(eng_kctx *c) {
  return eng_table_import(c, &c->in[1], &c->in[2], false);
}

td_code eng_table_import(eng_kctx *c, const eng_tensor *k, const eng_tensor *v, bool last_wins) {
  td_code rc = want_table_handle(c);
  if (rc) return rc;
  if (!key_type(k->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "tables keyed by %s", eng_dtype_name(k->dtype));
  if (v->dtype != ENG_DT_STRING && !eng_dtype_size(v->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "table values of %s", eng_dtype_name(v->dtype));
  int64_t n = eng_tensor_numel(k), nv = eng_tensor_numel(v);
  if (k->shape.rank != 1 || v->shape.rank < 1 || v->shape.dim[0] != n)
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "Expected shape [%lld, ...] for values, keys of rank 1", (long long)n);
  eng_tensor var = {0};
  if ((rc = eng_tensor_alloc_variant(&var, sizeof(table), table_free, c->err))) return rc;
  table *t = eng_tensor_data(&var);
  t->keys = eng_tensor_share(k);
  t->values = eng_tensor_share(v);
  t->n = n;
  t->row = n ? nv / n : 0;
  t->cap = 1;
  while (t->cap < 2 * n) t->cap *= 2;
  t->index = malloc(sizeof *t->index * (size_t)t->cap);
  if (!t->index) {
    eng_tensor_release(&var);
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for a table of %lld keys",
                     (long long)n);
  }
  memset(t->index, 0xff, sizeof *t->index * (size_t)t->cap); /* -1 */
  for (int64_t i = 0; i < n; i++) {
    uint64_t at = key_hash(k, i) & (uint64_t)(t->cap - 1);
    for (; t->index[at] >= 0; at = (at + 1) & (uint64_t)(t->cap - 1))
      if (key_equal(k, t->index[at], k, i)) break;
    if (t->index[at] >= 0) {
      if (last_wins) {
        t->index[at] = i;
      } else if (!rows_equal(v, t->row, t->index[at], i)) {
        eng_tensor_release(&var);
        return eng_kfail(c, TD_INVALID_ARGUMENT, "HashTable has different value for same key");
      }
      continue;
    }
    t->index[at] = i;
  }
  rc = eng_model_slot_write(c->model, eng_tensor_handle(&c->in[0]), &var, c->err);
  eng_tensor_release(&var);
  return rc;
}

/* The table behind input 0 (a reference held in *hold). */
static td_code table_of(eng_kctx *c, eng_tensor *hold, const table **t) {
  td_code rc = want_table_handle(c);
  if (rc) return rc;
  if (!eng_model_slot_initialized(c->model, eng_tensor_handle(&c->in[0])))
    return eng_kfail(c, TD_FAILED_PRECONDITION, "Table not initialized.");
  if ((rc = eng_model_slot_read(c->model, eng_tensor_handle(&c->in[0]), hold, c->err))) return rc;
  if (hold->dtype != ENG_DT_VARIANT) {
    eng_tensor_release(hold);
    return eng_kfail(c, TD_FAILED_PRECONDITION, "Table not initialized.");
  }
  *t = eng_tensor_data(hold);
  return TD_OK;
}

td_code eng_k_lookup_table_find(eng_kctx *c) {
  eng_tensor hold = {0};
  const table *t;
  td_code rc = table_of(c, &hold, &t);
  if (rc) return rc;
  const eng_tensor *q = &c->in[1], *dflt = &c->in[2], *v = &t->values;
  if (q->dtype != t->keys.dtype || dflt->dtype != v->dtype) {
    eng_tensor_release(&hold);
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Expected (%s, %s) keys and default, got (%s, %s)",
                     eng_dtype_name(t->keys.dtype), eng_dtype_name(v->dtype),
                     eng_dtype_name(q->dtype), eng_dtype_name(dflt->dtype));
  }
  int64_t row = t->row, nd = eng_tensor_numel(dflt);
  if (nd != 1 && nd != row) {
    eng_tensor_release(&hold);
    return eng_kfail(c, TD_INVALID_ARGUMENT, "default_value has %lld elements, values rows %lld",
                     (long long)nd, (long long)row);
  }
  eng_shape s = q->shape;
  if (s.rank + v->shape.rank - 1 > ENG_MAX_RANK) {
    eng_tensor_release(&hold);
    return eng_kfail(c, TD_UNIMPLEMENTED, "rank above %d", ENG_MAX_RANK);
  }
  for (int d = 1; d < v->shape.rank; d++) s.dim[s.rank++] = v->shape.dim[d];
  int64_t n = eng_tensor_numel(q);
  if (v->dtype == ENG_DT_STRING) {
    size_t *lens = malloc(sizeof *lens * (size_t)(n * row + 1));
    const eng_str **from = malloc(sizeof *from * (size_t)(n * row + 1));
    rc = lens && from ? TD_OK : eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
    for (int64_t i = 0; !rc && i < n; i++) {
      int64_t k = table_find(t, q, i);
      for (int64_t e = 0; e < row; e++) {
        from[i * row + e] =
            k >= 0 ? &eng_tensor_strs(v)[k * row + e] : &eng_tensor_strs(dflt)[nd == 1 ? 0 : e];
        lens[i * row + e] = from[i * row + e]->len;
      }
    }
    if (!rc) rc = eng_tensor_alloc_strings(&c->out[0], &s, lens, c->err);
    for (int64_t i = 0; !rc && i < n * row; i++)
      if (lens[i]) memcpy(eng_tensor_str_bytes(&c->out[0], i), from[i]->data, lens[i]);
    free(lens);
    free(from);
  } else if (!(rc = eng_kout_raw(c, 0, v->dtype, &s))) {
    size_t es = eng_dtype_size(v->dtype), rb = (size_t)row * es;
    const char *vd = eng_tensor_data(v), *dd = eng_tensor_data(dflt);
    char *out = eng_tensor_data(&c->out[0]);
    for (int64_t i = 0; i < n; i++, out += rb) {
      int64_t k = table_find(t, q, i);
      if (k >= 0)
        memcpy(out, vd + (size_t)k * rb, rb);
      else if (nd == row)
        memcpy(out, dd, rb);
      else
        for (int64_t e = 0; e < row; e++) memcpy(out + (size_t)e * es, dd, es);
    }
  }
  eng_tensor_release(&hold);
  return rc;
}

td_code eng_k_lookup_table_size(eng_kctx *c) {
  eng_tensor hold = {0};
  const table *t;
  td_code rc = table_of(c, &hold, &t);
  if (rc) return rc;
  eng_shape s = eng_shape_scalar();
  if (!(rc = eng_kout_raw(c, 0, ENG_DT_INT64, &s))) {
    /* Distinct keys: duplicates with equal values were imported once. */
    int64_t size = 0;
    for (int64_t i = 0; i < t->cap; i++) size += t->index[i] >= 0;
    *(int64_t *)eng_tensor_data(&c->out[0]) = size;
  }
  eng_tensor_release(&hold);
  return rc;
}

/* --- mutable tables: insert and export, at load --------------------------
 * A MutableHashTableV2 is the same slot and table; LookupTableInsertV2 (an
 * init op) builds a new table from the old entries followed by the new,
 * the later value winning for a key, and replaces the slot's. Serving
 * plans only read tables (ENG_OP_STATEFUL keeps inserts out of them). */

/* Runs an element-moving kernel on three inputs (a, b, an int32 scalar)
 * into *out, for the table's own tensors. */
static td_code move3(eng_kctx *c, eng_kernel_fn fn, const eng_tensor *a, const eng_tensor *b,
                     int32_t arg, eng_tensor *out) {
  eng_tensor in[3] = {*a, *b, {0}};
  eng_shape sc = eng_shape_scalar();
  td_code rc = eng_tensor_alloc(&in[2], ENG_DT_INT32, &sc, c->err);
  if (rc) return rc;
  *(int32_t *)eng_tensor_data(&in[2]) = arg;
  eng_kctx sub = *c;
  sub.in = in;
  sub.n_in = 3;
  sub.out = out;
  sub.n_out = 1;
  sub.epi = NULL;
  rc = fn(&sub);
  eng_tensor_release(&in[2]);
  return rc;
}

td_code eng_k_lookup_table_insert(eng_kctx *c) {
  td_code rc = want_table_handle(c);
  if (rc) return rc;
  if (!eng_model_slot_initialized(c->model, eng_tensor_handle(&c->in[0])))
    return eng_table_import(c, &c->in[1], &c->in[2], true);
  eng_tensor hold = {0}, keys = {0}, values = {0};
  const table *t;
  if ((rc = table_of(c, &hold, &t))) return rc;
  if (t->keys.dtype != c->in[1].dtype || t->values.dtype != c->in[2].dtype)
    rc = eng_kfail(c, TD_INVALID_ARGUMENT, "Expected (%s, %s) keys and values, got (%s, %s)",
                   eng_dtype_name(t->keys.dtype), eng_dtype_name(t->values.dtype),
                   eng_dtype_name(c->in[1].dtype), eng_dtype_name(c->in[2].dtype));
  if (!rc) rc = move3(c, eng_k_concat_v2_any, &t->keys, &c->in[1], 0, &keys);
  if (!rc) rc = move3(c, eng_k_concat_v2_any, &t->values, &c->in[2], 0, &values);
  eng_tensor_release(&hold); /* the slot keeps the old table until replaced */
  if (!rc) rc = eng_table_import(c, &keys, &values, true);
  eng_tensor_release(&keys);
  eng_tensor_release(&values);
  return rc;
}

td_code eng_k_lookup_table_export(eng_kctx *c) {
  eng_tensor hold = {0}, live = {0};
  const table *t;
  td_code rc = table_of(c, &hold, &t);
  if (rc) return rc;
  int64_t n = 0;
  for (int64_t i = 0; i < t->cap; i++) n += t->index[i] >= 0;
  eng_shape s = eng_shape_make(1, &n);
  if (!(rc = eng_tensor_alloc(&live, ENG_DT_INT64, &s, c->err))) {
    /* The live key numbers in import order: the table's own order. */
    int64_t *ids = eng_tensor_data(&live), k = 0;
    for (int64_t i = 0; i < t->n; i++)
      if (table_find(t, &t->keys, i) == i) ids[k++] = i;
    rc = move3(c, eng_k_gather_v2_any, &t->keys, &live, 0, &c->out[0]);
    if (!rc) rc = move3(c, eng_k_gather_v2_any, &t->values, &live, 0, &c->out[1]);
  }
  eng_tensor_release(&live);
  eng_tensor_release(&hold);
  return rc;
}
