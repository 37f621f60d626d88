/* Tokens and ragged results: StringSplitV2 (strings to a sparse
 * [row, token] layout), StringNGrams (n-grams within the rows of a ragged
 * string tensor), RaggedTensorToTensor (a ragged tensor padded or cut to a
 * dense one) and RaggedBincount (counts per ragged row), as Keras
 * TextVectorization and tf.strings emit them. Semantics follow
 * TensorFlow's CPU kernels, including their padding and maxsplit corner
 * cases. */
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"

static bool ascii_space(unsigned char ch) {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
}

/* --- StringSplitV2 ------------------------------------------------------ */

typedef struct piece {
  const char *p;
  size_t n;
} piece;

typedef struct pieces {
  piece *v;
  int64_t n, cap;
} pieces;

static bool push(pieces *ps, const char *p, size_t n) {
  if (ps->n == ps->cap) {
    int64_t nc = ps->cap ? 2 * ps->cap : 64;
    piece *v = realloc(ps->v, sizeof *v * (size_t)nc);
    if (!v) return false;
    ps->v = v;
    ps->cap = nc;
  }
  ps->v[ps->n++] = (piece){p, n};
  return true;
}

/* Appends the tokens of s; false when out of memory. */
static bool split_one(eng_str s, eng_str sep, int64_t maxsplit, pieces *ps) {
  const char *t = s.data, *end = s.data + s.len;
  if (maxsplit == 0) return push(ps, t, s.len);
  int64_t splits = 0;
  if (!sep.len) {
    while (t < end && ascii_space((unsigned char)*t)) t++;
    while (t < end) {
      const char *b = t;
      while (t < end && !ascii_space((unsigned char)*t)) t++;
      if (!push(ps, b, (size_t)(t - b))) return false;
      while (t < end && ascii_space((unsigned char)*t)) t++;
      if (maxsplit > 0 && ++splits == maxsplit) return push(ps, t, (size_t)(end - t));
    }
    return true;
  }
  for (;;) {
    const char *hit = NULL;
    for (const char *q = t; q + sep.len <= end; q++)
      if (!memcmp(q, sep.data, sep.len)) {
        hit = q;
        break;
      }
    if (!hit) break;
    if (!push(ps, t, (size_t)(hit - t))) return false;
    t = hit + sep.len;
    if (maxsplit > 0 && ++splits == maxsplit) break;
  }
  return push(ps, t, (size_t)(end - t));
}

td_code eng_k_string_split_v2(eng_kctx *c) {
  const eng_tensor *in = &c->in[0], *sep = &c->in[1];
  if (in->dtype != ENG_DT_STRING || in->shape.rank != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must be a vector of strings");
  if (sep->dtype != ENG_DT_STRING || eng_tensor_numel(sep) != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "sep must be a scalar string");
  int64_t maxsplit = eng_node_attr_int(c->node, "maxsplit", -1);
  int64_t n = in->shape.dim[0], widest = 0;
  const eng_str *s = eng_tensor_strs(in);
  pieces ps = {0};
  int64_t *row = malloc(sizeof *row * (size_t)(n + 1));
  td_code rc = row ? TD_OK : eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int64_t i = 0; !rc && i < n; i++) {
    row[i] = ps.n;
    if (!split_one(s[i], eng_tensor_strs(sep)[0], maxsplit, &ps))
      rc = eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
    if (ps.n - row[i] > widest) widest = ps.n - row[i];
  }
  if (!rc) row[n] = ps.n;
  eng_shape si = eng_shape_make(2, (int64_t[]){ps.n, 2}), sv = eng_shape_make(1, &ps.n);
  eng_shape ss = eng_shape_make(1, (int64_t[]){2});
  if (!rc) rc = eng_kout_raw(c, 0, ENG_DT_INT64, &si);
  if (!rc) rc = eng_kout_raw(c, 2, ENG_DT_INT64, &ss);
  eng_strbuild b = {0};
  for (int64_t i = 0; !rc && i < n; i++)
    for (int64_t k = row[i]; k < row[i + 1]; k++) {
      int64_t *ix = (int64_t *)eng_tensor_data(&c->out[0]) + 2 * k;
      ix[0] = i;
      ix[1] = k - row[i];
    }
  for (int64_t k = 0; !rc && k < ps.n; k++) rc = eng_strbuild_add(c, &b, ps.v[k].p, ps.v[k].n);
  if (!rc) {
    int64_t *sh = eng_tensor_data(&c->out[2]);
    sh[0] = n;
    sh[1] = widest;
    rc = eng_strbuild_finish(c, &b, 1, &sv);
  } else {
    eng_strbuild_free(&b);
  }
  free(ps.v);
  free(row);
  return rc;
}

/* --- StringNGrams ------------------------------------------------------- */

static int64_t split_at(const eng_tensor *t, int64_t i) {
  return t->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(t))[i]
                                  : ((const int64_t *)eng_tensor_data(t))[i];
}

typedef struct ngram_args {
  eng_str sep, lpad, rpad;
  int64_t pad_width;
} ngram_args;

static int64_t pad_for(const ngram_args *a, int64_t width) {
  int64_t p = a->pad_width < 0 ? width - 1 : a->pad_width;
  return p < width - 1 ? p : width - 1;
}

static int64_t ngram_count(const ngram_args *a, int64_t length, int64_t width) {
  int64_t k = length + 2 * pad_for(a, width) - width + 1;
  return k > 0 ? k : 0;
}

/* The k ngrams of `width` over tokens tok[0..len). */
static td_code make_ngrams(eng_kctx *c, eng_strbuild *b, const ngram_args *a, const eng_str *tok,
                           int64_t k, int64_t width) {
  int64_t pad = pad_for(a, width);
  td_code rc = TD_OK;
  for (int64_t g = 0; !rc && g < k; g++) {
    int64_t left = pad - g > 0 ? pad - g : 0;
    int64_t right = pad - (k - (g + 1)) > 0 ? pad - (k - (g + 1)) : 0;
    int64_t ntok = width - (left + right), first = left > 0 ? 0 : g - pad;
    rc = eng_strbuild_add(c, b, "", 0);
    int64_t parts = 0;
    for (int64_t j = 0; !rc && j < left; j++, parts++) {
      if (parts) rc = eng_strbuild_append(c, b, a->sep.data, a->sep.len);
      if (!rc) rc = eng_strbuild_append(c, b, a->lpad.data, a->lpad.len);
    }
    for (int64_t j = 0; !rc && j < ntok; j++, parts++) {
      if (parts) rc = eng_strbuild_append(c, b, a->sep.data, a->sep.len);
      if (!rc) rc = eng_strbuild_append(c, b, tok[first + j].data, tok[first + j].len);
    }
    for (int64_t j = 0; !rc && j < right; j++, parts++) {
      if (parts) rc = eng_strbuild_append(c, b, a->sep.data, a->sep.len);
      if (!rc) rc = eng_strbuild_append(c, b, a->rpad.data, a->rpad.len);
    }
  }
  return rc;
}

static eng_str attr_bytes(const eng_node *n, const char *name) {
  const eng_attr *a = eng_node_attr(n, name);
  return a && a->kind == ENG_ATTR_S ? (eng_str){a->s.data, a->s.len} : (eng_str){"", 0};
}

td_code eng_k_string_ngrams(eng_kctx *c) {
  const eng_tensor *data = &c->in[0], *splits = &c->in[1];
  if (data->dtype != ENG_DT_STRING || data->shape.rank != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "data must be a vector of strings");
  if ((splits->dtype != ENG_DT_INT32 && splits->dtype != ENG_DT_INT64) || splits->shape.rank != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "data_splits must be an integer vector");
  int64_t widths[16];
  int nw = eng_attr_ints(c->node, "ngram_widths", widths, 16);
  for (int w = 0; w < nw; w++)
    if (widths[w] < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "ngram_widths must be >= 1");
  ngram_args a = {attr_bytes(c->node, "separator"), attr_bytes(c->node, "left_pad"),
                  attr_bytes(c->node, "right_pad"), eng_node_attr_int(c->node, "pad_width", 0)};
  bool preserve = eng_node_attr_bool(c->node, "preserve_short_sequences", false);
  int64_t nsplit = splits->shape.dim[0], nd = data->shape.dim[0];
  if (nsplit < 1 && nd)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Input data_splits must have at least one value");
  for (int64_t i = 0; i < nsplit; i++) {
    int64_t v = split_at(splits, i);
    if (v < (i ? split_at(splits, i - 1) : 0) || v > nd || (i == nsplit - 1 && v != nd) ||
        (!i && v != 0))
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "Invalid split value %lld at %lld: splits must start at 0, not decrease "
                       "and end at %lld",
                       (long long)v, (long long)i, (long long)nd);
  }
  int64_t rows = nsplit ? nsplit - 1 : 0;
  eng_shape ss = eng_shape_make(1, &nsplit);
  td_code rc = eng_kout_raw(c, 1, splits->dtype, &ss);
  if (rc) return rc;
  eng_strbuild b = {0};
  const eng_str *tok = eng_tensor_strs(data);
  for (int64_t i = 0; !rc && i < rows; i++) {
    int64_t lo = split_at(splits, i), len = split_at(splits, i + 1) - lo, before = b.n;
    if (splits->dtype == ENG_DT_INT32)
      ((int32_t *)eng_tensor_data(&c->out[1]))[i] = (int32_t)before;
    else
      ((int64_t *)eng_tensor_data(&c->out[1]))[i] = before;
    for (int w = 0; !rc && w < nw; w++)
      rc = make_ngrams(c, &b, &a, tok + lo, ngram_count(&a, len, widths[w]), widths[w]);
    if (!rc && preserve && b.n == before && len > 0) {
      /* A sequence too short for any width: one ngram of all of it, padded. */
      int64_t p = a.pad_width < 0 ? 0 : a.pad_width;
      rc = make_ngrams(c, &b, &a, tok + lo, 1, len + 2 * p);
    }
  }
  if (!rc && nsplit) {
    if (splits->dtype == ENG_DT_INT32)
      ((int32_t *)eng_tensor_data(&c->out[1]))[rows] = (int32_t)b.n;
    else
      ((int64_t *)eng_tensor_data(&c->out[1]))[rows] = b.n;
  }
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  eng_shape so = eng_shape_make(1, &b.n);
  return eng_strbuild_finish(c, &b, 0, &so);
}

/* --- RaggedTensorToTensor ----------------------------------------------- */

/* The row partitions as row splits, whatever the node's types (ROW_SPLITS
 * at every level, or FIRST_DIM_SIZE + VALUE_ROWIDS for one level): each
 * level an array of nrows + 1 offsets into the level below. */
typedef struct ragged {
  int levels;
  int64_t nrows[ENG_MAX_RANK];
  int64_t *splits[ENG_MAX_RANK];
} ragged;

static void ragged_free(ragged *r) {
  for (int l = 0; l < r->levels; l++) free(r->splits[l]);
}

static int64_t any_int(const eng_tensor *t, int64_t i) {
  return t->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(t))[i]
                                  : ((const int64_t *)eng_tensor_data(t))[i];
}

static td_code ragged_read(eng_kctx *c, int first, int64_t nvals, ragged *r) {
  const eng_attr *types = eng_node_attr(c->node, "row_partition_types");
  if (!types || types->kind != ENG_ATTR_LIST || types->list_kind != ENG_ATTR_S || !types->n)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "row_partition_types is missing");
  int k = 0, in = first;
  if (!strcmp(types->ls[0].data, "FIRST_DIM_SIZE")) k = 1, in = first + 1;
  *r = (ragged){0};
  for (; k < types->n; k++, in++) {
    if (in >= c->n_in || r->levels >= ENG_MAX_RANK - 1)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "more row partition types than tensors");
    const eng_tensor *t = &c->in[in];
    if ((t->dtype != ENG_DT_INT32 && t->dtype != ENG_DT_INT64) || t->shape.rank != 1)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "row partition %d must be an integer vector", k);
    int64_t n = t->shape.dim[0];
    const char *ty = types->ls[k].data;
    /* The size of the level below: the values, or the next level's rows. */
    bool last = k == types->n - 1;
    if (!strcmp(ty, "ROW_SPLITS")) {
      if (n < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "row_splits must not be empty");
      int64_t *sp = malloc(sizeof *sp * (size_t)n);
      if (!sp) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
      r->splits[r->levels] = sp;
      r->nrows[r->levels++] = n - 1;
      for (int64_t i = 0; i < n; i++) {
        sp[i] = any_int(t, i);
        if (sp[i] < (i ? sp[i - 1] : 0) || (!i && sp[i]))
          return eng_kfail(c, TD_INVALID_ARGUMENT, "row_splits must start at 0 and not decrease");
      }
      if (last && sp[n - 1] != nvals)
        return eng_kfail(c, TD_INVALID_ARGUMENT,
                         "row_splits end at %lld, but there are %lld values", (long long)sp[n - 1],
                         (long long)nvals);
    } else if (!strcmp(ty, "VALUE_ROWIDS") && k == 1 && types->n == 2) {
      const eng_tensor *fd = &c->in[first];
      if (eng_tensor_numel(fd) != 1)
        return eng_kfail(c, TD_INVALID_ARGUMENT, "FIRST_DIM_SIZE must be a scalar");
      int64_t rows = any_int(fd, 0);
      if (rows < 0 || n != nvals)
        return eng_kfail(c, TD_INVALID_ARGUMENT, "value_rowids must have one id per value");
      int64_t *sp = calloc((size_t)rows + 1, sizeof *sp);
      if (!sp) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
      r->splits[r->levels] = sp;
      r->nrows[r->levels++] = rows;
      for (int64_t i = 0; i < n; i++) {
        int64_t id = any_int(t, i);
        if (id < 0 || id >= rows || (i && id < any_int(t, i - 1)))
          return eng_kfail(c, TD_INVALID_ARGUMENT, "value_rowids must be sorted ids below %lld",
                           (long long)rows);
        sp[id + 1]++;
      }
      for (int64_t i = 0; i < rows; i++) sp[i + 1] += sp[i];
    } else {
      return eng_kfail(c, TD_UNIMPLEMENTED, "row partition type '%s' in this position", ty);
    }
  }
  for (int l = 0; l + 1 < r->levels; l++)
    if (r->splits[l][r->nrows[l]] != r->nrows[l + 1])
      return eng_kfail(c, TD_INVALID_ARGUMENT, "row partition %d ends at %lld, expected %lld", l,
                       (long long)r->splits[l][r->nrows[l]], (long long)r->nrows[l + 1]);
  return TD_OK;
}

/* Fills src[] (value row per output row, -1 for padding) for level l's
 * rows [lo, hi) laid out over out dims l.. (dim[] the output's ragged
 * dims). */
static void place(const ragged *r, const int64_t *dim, int l, int64_t lo, int64_t hi, int64_t *src,
                  int64_t at, int64_t span) {
  /* span: output rows (value rows) under one output index of dim l. */
  for (int64_t i = 0; i < dim[l]; i++) {
    int64_t row = lo + i, base = at + i * span;
    if (row >= hi) break;
    int64_t clo = r->splits[l][row], chi = r->splits[l][row + 1];
    if (l + 1 == r->levels) {
      for (int64_t j = 0; j < dim[l + 1] && clo + j < chi; j++) src[base + j] = clo + j;
    } else if (dim[l + 1]) {
      place(r, dim, l + 1, clo, chi, src, base, span / dim[l + 1]);
    }
  }
}

td_code eng_k_ragged_tensor_to_tensor(eng_kctx *c) {
  const eng_tensor *shp = &c->in[0], *vals = &c->in[1], *dflt = &c->in[2];
  if (c->n_in < 4) return eng_kfail(c, TD_INVALID_ARGUMENT, "no row partition tensors");
  int64_t nvals = vals->shape.rank ? vals->shape.dim[0] : 0;
  if (vals->shape.rank < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "values must have rank >= 1");
  ragged r;
  td_code rc = ragged_read(c, 3, nvals, &r);
  if (rc) {
    ragged_free(&r);
    return rc;
  }
  int inner = vals->shape.rank - 1, rank = r.levels + 1 + inner;
  if (rank > ENG_MAX_RANK) {
    ragged_free(&r);
    return eng_kfail(c, TD_UNIMPLEMENTED, "rank above %d", ENG_MAX_RANK);
  }
  /* Natural sizes: rows of level 0, then each level's longest row. */
  eng_shape out = {.rank = rank};
  out.dim[0] = r.nrows[0];
  for (int l = 0; l < r.levels; l++) {
    int64_t m = 0;
    for (int64_t i = 0; i < r.nrows[l]; i++)
      if (r.splits[l][i + 1] - r.splits[l][i] > m) m = r.splits[l][i + 1] - r.splits[l][i];
    out.dim[l + 1] = m;
  }
  for (int d = 0; d < inner; d++) out.dim[r.levels + 1 + d] = vals->shape.dim[1 + d];
  /* The shape input: -1 (or an unknown-rank scalar) keeps a natural size. */
  int64_t ns = eng_tensor_numel(shp);
  if (shp->shape.rank == 1 && ns > 0) {
    if (ns != rank) {
      ragged_free(&r);
      return eng_kfail(c, TD_INVALID_ARGUMENT, "shape has %lld dims, the result %d", (long long)ns,
                       rank);
    }
    for (int d = 0; d < rank; d++) {
      int64_t v = any_int(shp, d);
      if (v >= 0 && d > r.levels && v != out.dim[d]) {
        ragged_free(&r);
        return eng_kfail(c, TD_INVALID_ARGUMENT, "shape dim %d is %lld, the values' %lld", d,
                         (long long)v, (long long)out.dim[d]);
      }
      if (v >= 0) out.dim[d] = v;
    }
  }
  int64_t row_elems = 1;
  for (int d = r.levels + 1; d < rank; d++) row_elems *= out.dim[d];
  int64_t nd = eng_tensor_numel(dflt);
  if (nd != 1 && nd != row_elems) {
    ragged_free(&r);
    return eng_kfail(c, TD_INVALID_ARGUMENT, "default_value must be a scalar or one value row");
  }
  int64_t nrows_out = 1;
  for (int d = 0; d <= r.levels; d++) nrows_out *= out.dim[d];
  int64_t *src = malloc(sizeof *src * (size_t)(nrows_out + 1));
  if (!src) {
    ragged_free(&r);
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (int64_t i = 0; i < nrows_out; i++) src[i] = -1;
  int64_t span = nrows_out / (out.dim[0] ? out.dim[0] : 1);
  if (nrows_out) place(&r, out.dim, 0, 0, r.nrows[0], src, 0, span);
  ragged_free(&r);
  if (vals->dtype == ENG_DT_STRING) {
    eng_strbuild b = {0};
    for (int64_t i = 0; !rc && i < nrows_out; i++)
      for (int64_t e = 0; !rc && e < row_elems; e++) {
        eng_str s = src[i] >= 0 ? eng_tensor_strs(vals)[src[i] * row_elems + e]
                                : eng_tensor_strs(dflt)[nd == 1 ? 0 : e];
        rc = eng_strbuild_add(c, &b, s.data, s.len);
      }
    if (!rc)
      rc = eng_strbuild_finish(c, &b, 0, &out);
    else
      eng_strbuild_free(&b);
  } else if (vals->dtype != dflt->dtype) {
    rc = eng_kfail(c, TD_INVALID_ARGUMENT, "default_value is %s, values %s",
                   eng_dtype_name(dflt->dtype), eng_dtype_name(vals->dtype));
  } else if (!(rc = eng_kout_raw(c, 0, vals->dtype, &out))) {
    size_t es = eng_dtype_size(vals->dtype), rb = (size_t)row_elems * es;
    const char *vd = eng_tensor_data(vals), *dd = eng_tensor_data(dflt);
    char *o = eng_tensor_data(&c->out[0]);
    for (int64_t i = 0; i < nrows_out; i++, o += rb) {
      if (src[i] >= 0)
        memcpy(o, vd + (size_t)src[i] * rb, rb);
      else if (nd == row_elems)
        memcpy(o, dd, rb);
      else
        for (int64_t e = 0; e < row_elems; e++) memcpy(o + (size_t)e * es, dd, es);
    }
  }
  free(src);
  return rc;
}

/* --- RaggedBincount ----------------------------------------------------- */

/* Per row of a ragged int tensor (splits, values), how often each value in
 * [0, size) occurs, the sum of its weights, or 1 (binary_output); values at
 * or above size are dropped, negative ones are INVALID_ARGUMENT, as
 * TensorFlow's CPU kernel does. Output dtype T (the weights'). */
td_code eng_k_ragged_bincount(eng_kctx *c) {
  const eng_tensor *sp = &c->in[0], *vals = &c->in[1], *w = &c->in[3];
  int64_t size;
  td_code rc = eng_karg_int(c, 2, &size);
  if (rc) return rc;
  if (size < 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "size (%lld) must be non-negative", (long long)size);
  if (sp->dtype != ENG_DT_INT64 || sp->shape.rank != 1 ||
      (vals->dtype != ENG_DT_INT32 && vals->dtype != ENG_DT_INT64))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "splits must be an int64 vector, values integers");
  eng_dtype t = eng_node_attr_type(c->node, "T", w->dtype);
  if (t != ENG_DT_FLOAT && t != ENG_DT_DOUBLE && t != ENG_DT_INT32 && t != ENG_DT_INT64)
    return eng_kfail(c, TD_UNIMPLEMENTED, "T %s", eng_dtype_name(t));
  bool binary = eng_node_attr_bool(c->node, "binary_output", false);
  int64_t nv = eng_tensor_numel(vals), nw = eng_tensor_numel(w), ns = sp->shape.dim[0];
  if (nw && (nw != nv || w->dtype != t))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "weights must be empty or one %s per value",
                     eng_dtype_name(t));
  const int64_t *s = eng_tensor_data(sp);
  if (ns < 1 || s[0] != 0 || s[ns - 1] != nv)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "splits must start at 0 and end at %lld",
                     (long long)nv);
  for (int64_t i = 1; i < ns; i++)
    if (s[i] < s[i - 1]) return eng_kfail(c, TD_INVALID_ARGUMENT, "splits must not decrease");
  eng_shape so = eng_shape_make(2, (int64_t[]){ns - 1, size});
  if ((rc = eng_kout(c, 0, t, &so))) return rc;
  char *out = eng_tensor_data(&c->out[0]);
  for (int64_t b = 0; b + 1 < ns; b++)
    for (int64_t k = s[b]; k < s[b + 1]; k++) {
      int64_t v = any_int(vals, k);
      if (v < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "Input must be non-negative");
      if (v >= size) continue;
      int64_t at = b * size + v;
      double wt = !nw                  ? 1.0
                  : t == ENG_DT_FLOAT  ? ((const float *)eng_tensor_data(w))[k]
                  : t == ENG_DT_DOUBLE ? ((const double *)eng_tensor_data(w))[k]
                  : t == ENG_DT_INT32  ? ((const int32_t *)eng_tensor_data(w))[k]
                                       : (double)((const int64_t *)eng_tensor_data(w))[k];
      switch (t) {
        case ENG_DT_FLOAT: {
          float *o = (float *)out + at;
          *o = binary ? 1.0f : *o + (float)wt;
          break;
        }
        case ENG_DT_DOUBLE: {
          double *o = (double *)out + at;
          *o = binary ? 1.0 : *o + wt;
          break;
        }
        case ENG_DT_INT32: {
          int32_t *o = (int32_t *)out + at;
          *o = binary ? 1 : *o + (int32_t)wt;
          break;
        }
        default: {
          int64_t *o = (int64_t *)out + at;
          *o = binary ? 1 : *o + (int64_t)wt;
          break;
        }
      }
    }
  return TD_OK;
}
