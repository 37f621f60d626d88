/* The GPU executor: runs a plan's steps on the selected device (eng_devapi),
 * each op lowered to a few primitives, and the rest on the CPU.
 *
 * A lowering returns G_OK (outputs written to device scratch), G_DECLINE
 * (not this case: the step runs on the CPU, which also produces
 * TensorFlow's error for inputs no op could accept) or G_ERR (a device
 * failure, in err). A lowering declines rather than guess: other data
 * formats, dtypes other than float32 for arithmetic, broadcasts the
 * batched GEMM cannot express, and small arithmetic on values that only
 * live on the host (the shape bookkeeping of Keras graphs), which the CPU
 * does without two copies.
 *
 * Shape-only ops (Identity, Reshape, Squeeze, ExpandDims, ...) alias the
 * device buffer: their CPU kernel runs on a stand-in tensor of the same
 * shape, so the output shape and the errors are exactly the CPU's. */
#include "eng_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_device_int.h"
#include "eng_einsum.h"
#include "eng_kernels.h"
#include "eng_run.h"
#include "eng_window.h"

enum { G_OK, G_DECLINE, G_ERR };

/* Host arithmetic below this many elements stays on the CPU when no input
 * is on the device. */
static int64_t g_host_small = 4096;
#define HOST_SMALL g_host_small

void eng_gpu_set_host_small(int64_t n) { g_host_small = n; }

typedef struct gx {
  eng_run r;
  const eng_plan *p;
  eng_dev_model *dm;
  eng_dev_thread *t;
  const eng_devapi *api;
  eng_dev_val *dv; /* per value: device copy (d NULL: none) */
  bool *konst;     /* per value: a plan constant (cached per model) */
  td_err *err;
  int s;
  const eng_node *nd;
  const eng_op_def *op;
  int code; /* the lowering's primitive code (g_ops), for binary and unary ops */
} gx;

static int vin(const gx *g, int k) {
  const eng_edge e = g->nd->in[k];
  return g->p->base[e.node] + e.index;
}

static const eng_tensor *host(const gx *g, int k) {
  const eng_tensor *t = &g->r.values[vin(g, k)];
  return t->buf ? t : NULL;
}

static bool on_dev(const gx *g, int k) { return g->dv[vin(g, k)].d != NULL; }

static eng_shape shape_of(const gx *g, int k) {
  int v = vin(g, k);
  return g->dv[v].d ? g->dv[v].shape : g->r.values[v].shape;
}

static eng_dtype dtype_of(const gx *g, int k) {
  int v = vin(g, k);
  return g->dv[v].d ? g->dv[v].dtype : g->r.values[v].dtype;
}

static int dev_fail(gx *g, const char *what) {
  td_err_set(g->err, TD_INTERNAL, "node '%s' (%s): GPU %s failed: %s", g->nd->name, g->nd->op, what,
             g->api->error());
  return G_ERR;
}

#define DEV(call, what)                 \
  do {                                  \
    if (call) return dev_fail(g, what); \
  } while (0)

static int to_host_v(gx *g, int v) {
  eng_tensor *h = &g->r.values[v];
  if (h->buf) return G_OK;
  const eng_dev_val *d = &g->dv[v];
  if (!d->d) {
    td_err_set(g->err, TD_INTERNAL, "value %d was not computed", v);
    return G_ERR;
  }
  if (eng_tensor_alloc_raw(h, d->dtype, &d->shape, g->err)) return G_ERR;
  size_t n = eng_tensor_nbytes(h);
  if (n && g->api->download(g->t->stream, eng_tensor_data(h), d->d, n)) {
    eng_tensor_release(h);
    td_err_set(g->err, TD_INTERNAL, "copying a tensor from the GPU failed: %s", g->api->error());
    return G_ERR;
  }
  return G_OK;
}

static int to_host(gx *g, int k) { return to_host_v(g, vin(g, k)); }

/* Input k on the device: *d gets its buffer. Declines for tensors a device
 * cannot hold (strings, resources, TF1 variable references). */
static int to_dev(gx *g, int k, const void **d) {
  int v = vin(g, k);
  eng_dev_val *dv = &g->dv[v];
  if (!dv->d) {
    const eng_tensor *h = &g->r.values[v];
    if (!h->buf) {
      td_err_set(g->err, TD_INTERNAL, "node '%s': input %d was not computed", g->nd->name, k);
      return G_ERR;
    }
    if (h->is_ref || !eng_dtype_size(h->dtype)) return G_DECLINE;
    size_t n = eng_tensor_nbytes(h);
    void *p = NULL;
    if (g->konst[v] && n) {
      if (eng_dev_model_const(g->dm, g->t, h, &p, g->err)) return G_ERR;
    } else {
      p = eng_dev_scratch(g->t, n, g->err);
      if (!p) return G_ERR;
      if (n && g->api->upload(g->t->stream, p, eng_tensor_data(h), n)) return dev_fail(g, "upload");
    }
    *dv = (eng_dev_val){.d = p, .dtype = h->dtype, .shape = h->shape};
  }
  *d = dv->d;
  return G_OK;
}

/* Several float inputs on the device at once. */
#define NEED_DEV(k, ptr)           \
  do {                             \
    const void *vp_;               \
    int r_ = to_dev(g, (k), &vp_); \
    if (r_ != G_OK) return r_;     \
    (ptr) = vp_;                   \
  } while (0)

static int new_out(gx *g, eng_dev_val *out, eng_dtype dt, const eng_shape *s) {
  int64_t n = eng_shape_numel(s);
  if (n < 0) return G_DECLINE;
  void *d = eng_dev_scratch(g->t, (size_t)n * eng_dtype_size(dt), g->err);
  if (!d) return G_ERR;
  *out = (eng_dev_val){.d = d, .dtype = dt, .shape = *s};
  return G_OK;
}

static int host_ints(gx *g, int k, int64_t *vals, int max, int *n) {
  if (to_host(g, k) != G_OK) return G_ERR;
  const eng_tensor *t = host(g, k);
  if (t->dtype != ENG_DT_INT32 && t->dtype != ENG_DT_INT64) return G_DECLINE;
  int64_t cnt = eng_tensor_numel(t);
  if (cnt > max) return G_DECLINE;
  const void *d = eng_tensor_data(t);
  for (int64_t i = 0; i < cnt; i++)
    vals[i] = t->dtype == ENG_DT_INT32 ? ((const int32_t *)d)[i] : ((const int64_t *)d)[i];
  *n = (int)cnt;
  return G_OK;
}

static bool any_on_dev(const gx *g, int from, int to) {
  for (int k = from; k < to; k++)
    if (on_dev(g, k)) return true;
  return false;
}

/* Worth doing on the device: an input is already there, or the data is
 * big enough to repay the copies. */
static bool worth(const gx *g, int from, int to, int64_t numel) {
  return any_on_dev(g, from, to) || numel >= HOST_SMALL;
}

static void contig(const eng_shape *s, int64_t *st) {
  int64_t acc = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    st[d] = acc;
    acc *= s->dim[d];
  }
}

/* A host tensor of dtype dt and shape s backed by one element: a CPU
 * kernel or planner that reads only its input's shape runs on it. */
static int stand_in(gx *g, eng_dtype dt, const eng_shape *s, eng_tensor *t) {
  eng_shape one = eng_shape_make(1, (int64_t[]){1});
  if (eng_tensor_alloc_raw(t, dt, &one, g->err)) return G_ERR;
  t->shape = *s;
  return G_OK;
}

/* --- shape-only ops ------------------------------------------------------ */

static int g_alias(gx *g, eng_dev_val *out) {
  eng_shape s0 = shape_of(g, 0);
  if (!worth(g, 0, 1, eng_shape_numel(&s0)) || g->nd->n_out != 1) return G_DECLINE;
  int n = g->nd->n_in;
  {
    const void *d;
    int r = to_dev(g, 0, &d);
    if (r != G_OK) return r;
  }
  if (n > 4) return G_DECLINE;
  eng_tensor kin[4] = {{0}}, kout[1] = {{0}};
  if (stand_in(g, g->dv[vin(g, 0)].dtype, &g->dv[vin(g, 0)].shape, &kin[0]) != G_OK) return G_ERR;
  int res = G_OK;
  for (int k = 1; k < n && res == G_OK; k++) {
    res = to_host(g, k);
    if (res == G_OK) kin[k] = *host(g, k);
  }
  if (res == G_OK) {
    eng_kctx c = {.node = g->nd,
                  .node_id = g->p->steps[g->s],
                  .model = g->p->m,
                  .n_in = n,
                  .in = kin,
                  .n_out = 1,
                  .out = kout,
                  .err = g->err};
    if (g->op->cpu(&c)) {
      res = G_ERR;
    } else {
      *out = g->dv[vin(g, 0)];
      out->shape = kout[0].shape;
    }
    eng_tensor_release(&kout[0]);
  }
  eng_tensor_release(&kin[0]);
  return res;
}

static void bcast_strides(const eng_shape *s, const eng_shape *out, int64_t *st);

static bool castable_on_device(eng_dtype dt) {
  return dt == ENG_DT_FLOAT || dt == ENG_DT_INT32 || dt == ENG_DT_INT64 || dt == ENG_DT_BOOL;
}

/* Cast: to its own dtype (float16 models after widening: float to float)
 * the buffer passes through; between float, int32, int64 and bool one
 * kernel, with the CPU kernel's rules. */
static int g_cast(gx *g, eng_dev_val *out) {
  eng_dtype dt = dtype_of(g, 0), to = eng_node_attr_type(g->nd, "DstT", ENG_DT_INVALID);
  eng_shape s = shape_of(g, 0);
  if (!worth(g, 0, 1, eng_shape_numel(&s))) return G_DECLINE;
  if (to == dt && eng_dtype_size(dt) > 0) {
    const void *d;
    NEED_DEV(0, d);
    (void)d;
    *out = g->dv[vin(g, 0)];
    return G_OK;
  }
  if (!castable_on_device(dt) || !castable_on_device(to)) return G_DECLINE;
  const void *x;
  NEED_DEV(0, x);
  int r = new_out(g, out, to, &s);
  if (r != G_OK) return r;
  DEV(g->api->cast(g->t->stream, eng_shape_numel(&s), dt, to, x, out->d), "cast");
  return G_OK;
}

/* Comparisons and LogicalAnd / LogicalOr, broadcasting. */
static int g_compare(gx *g, eng_dev_val *out) {
  static const struct {
    const char *op;
    int code;
  } ops[] = {{"Equal", ENG_DC_EQUAL},
             {"Greater", ENG_DC_GREATER},
             {"GreaterEqual", ENG_DC_GREATER_EQUAL},
             {"Less", ENG_DC_LESS},
             {"LessEqual", ENG_DC_LESS_EQUAL},
             {"LogicalAnd", ENG_DC_AND},
             {"LogicalOr", ENG_DC_OR},
             {"NotEqual", ENG_DC_NOT_EQUAL}};
  int code = -1;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(g->nd->op, ops[i].op)) code = ops[i].code;
  eng_dtype dt = dtype_of(g, 0);
  bool logic = code == ENG_DC_AND || code == ENG_DC_OR;
  if (code < 0 || dtype_of(g, 1) != dt ||
      (logic ? dt != ENG_DT_BOOL : dt != ENG_DT_FLOAT && dt != ENG_DT_INT32 && dt != ENG_DT_INT64))
    return G_DECLINE;
  if (eng_node_attr_bool(g->nd, "incompatible_shape_error", true) == false) return G_DECLINE;
  eng_shape a = shape_of(g, 0), b = shape_of(g, 1), o;
  td_err scratch;
  if (eng_broadcast_shape(&a, &b, &o, &scratch)) return G_DECLINE;
  if (!worth(g, 0, 2, eng_shape_numel(&o))) return G_DECLINE;
  const void *da, *db;
  NEED_DEV(0, da);
  NEED_DEV(1, db);
  int r = new_out(g, out, ENG_DT_BOOL, &o);
  if (r != G_OK) return r;
  int64_t sa[ENG_MAX_RANK], sb[ENG_MAX_RANK];
  bcast_strides(&a, &o, sa);
  bcast_strides(&b, &o, sb);
  DEV(g->api->compare(g->t->stream, code, dt, o.rank, o.dim, da, sa, db, sb, out->d), "comparison");
  return G_OK;
}

/* SelectV2 (all three broadcast) and TF1 Select (cond a scalar, the
 * shape of then / else, or a vector over their first dim). */
static int g_select(gx *g, eng_dev_val *out) {
  eng_dtype dt = dtype_of(g, 1);
  if (dtype_of(g, 0) != ENG_DT_BOOL || dtype_of(g, 2) != dt || !eng_dtype_size(dt))
    return G_DECLINE;
  eng_shape c = shape_of(g, 0), a = shape_of(g, 1), b = shape_of(g, 2), ab, o;
  td_err scratch;
  if (!strcmp(g->nd->op, "Select")) {
    if (!eng_shape_equal(&a, &b)) return G_DECLINE;
    if (c.rank == 1 && a.rank > 1 && c.dim[0] == a.dim[0]) {
      eng_shape col = a; /* [n, 1, 1, ...] */
      for (int d = 1; d < col.rank; d++) col.dim[d] = 1;
      c = col;
    } else if (c.rank != 0 && !eng_shape_equal(&c, &a)) {
      return G_DECLINE;
    }
  }
  if (eng_broadcast_shape(&a, &b, &ab, &scratch) || eng_broadcast_shape(&c, &ab, &o, &scratch))
    return G_DECLINE;
  if (!worth(g, 0, 3, eng_shape_numel(&o))) return G_DECLINE;
  const void *dc, *da, *db;
  NEED_DEV(0, dc);
  NEED_DEV(1, da);
  NEED_DEV(2, db);
  int r = new_out(g, out, dt, &o);
  if (r != G_OK) return r;
  int64_t sc[ENG_MAX_RANK], sa[ENG_MAX_RANK], sb[ENG_MAX_RANK];
  bcast_strides(&c, &o, sc);
  bcast_strides(&a, &o, sa);
  bcast_strides(&b, &o, sb);
  DEV(g->api->select(g->t->stream, o.rank, o.dim, dc, sc, eng_dtype_size(dt), da, sa, db, sb,
                     out->d),
      "select");
  return G_OK;
}

/* IdentityN passes every input through; NoOp has nothing to do. */
static int g_identity_n(gx *g, eng_dev_val *out) {
  if (g->nd->n_out != g->nd->n_in || !worth(g, 0, g->nd->n_in, 0)) return G_DECLINE;
  for (int k = 0; k < g->nd->n_in; k++) {
    const void *d;
    NEED_DEV(k, d);
    (void)d;
    out[k] = g->dv[vin(g, k)];
  }
  return G_OK;
}

static int g_noop(gx *g, eng_dev_val *out) { return g->nd->n_out == 0 ? G_OK : G_DECLINE; }

/* --- elementwise ---------------------------------------------------------- */

/* Strides that broadcast shape s (right-aligned) over out's dims. */
static void bcast_strides(const eng_shape *s, const eng_shape *out, int64_t *st) {
  int64_t cs[ENG_MAX_RANK];
  contig(s, cs);
  int off = out->rank - s->rank;
  for (int d = 0; d < out->rank; d++) {
    int sd = d - off;
    st[d] = sd < 0 || s->dim[sd] == 1 ? 0 : cs[sd];
  }
}

static int g_binary(gx *g, eng_dev_val *out) {
  if (dtype_of(g, 0) != ENG_DT_FLOAT || dtype_of(g, 1) != ENG_DT_FLOAT) return G_DECLINE;
  eng_shape a = shape_of(g, 0), b = shape_of(g, 1), o;
  if (!strcmp(g->nd->op, "BiasAdd")) {
    if (strcmp(eng_attr_str(g->nd, "data_format", "NHWC"), "NHWC") || a.rank < 1 || b.rank != 1 ||
        b.dim[0] != a.dim[a.rank - 1])
      return G_DECLINE;
  }
  td_err scratch;
  if (eng_broadcast_shape(&a, &b, &o, &scratch)) return G_DECLINE; /* the CPU reports it */
  if (!worth(g, 0, 2, eng_shape_numel(&o))) return G_DECLINE;
  const float *da, *db;
  NEED_DEV(0, da);
  NEED_DEV(1, db);
  int r = new_out(g, out, ENG_DT_FLOAT, &o);
  if (r != G_OK) return r;
  int64_t sa[ENG_MAX_RANK], sb[ENG_MAX_RANK];
  bcast_strides(&a, &o, sa);
  bcast_strides(&b, &o, sb);
  DEV(g->api->binary(g->t->stream, g->code, o.rank, o.dim, da, sa, db, sb, out->d),
      "elementwise op");
  return G_OK;
}

static int g_unary(gx *g, eng_dev_val *out) {
  if (dtype_of(g, 0) != ENG_DT_FLOAT) return G_DECLINE;
  eng_shape s = shape_of(g, 0);
  if (!worth(g, 0, 1, eng_shape_numel(&s))) return G_DECLINE;
  const float *x;
  NEED_DEV(0, x);
  int r = new_out(g, out, ENG_DT_FLOAT, &s);
  if (r != G_OK) return r;
  float alpha = eng_attr_float(g->nd, "alpha", 0.2f);
  DEV(g->api->unary(g->t->stream, g->code, eng_shape_numel(&s), x, out->d, alpha),
      "elementwise op");
  return G_OK;
}

/* --- matrix products ------------------------------------------------------ */

static int g_matmul(gx *g, eng_dev_val *out) {
  if (dtype_of(g, 0) != ENG_DT_FLOAT || dtype_of(g, 1) != ENG_DT_FLOAT) return G_DECLINE;
  eng_shape a = shape_of(g, 0), b = shape_of(g, 1);
  if (a.rank != 2 || b.rank != 2) return G_DECLINE;
  bool ta = eng_node_attr_bool(g->nd, "transpose_a", false);
  bool tb = eng_node_attr_bool(g->nd, "transpose_b", false);
  int64_t m = a.dim[ta ? 1 : 0], k = a.dim[ta ? 0 : 1], n = b.dim[tb ? 0 : 1];
  if (b.dim[tb ? 1 : 0] != k) return G_DECLINE;
  const float *da, *db;
  NEED_DEV(0, da);
  NEED_DEV(1, db);
  eng_shape o = eng_shape_make(2, (int64_t[]){m, n});
  int r = new_out(g, out, ENG_DT_FLOAT, &o);
  if (r != G_OK) return r;
  if (k == 0) {
    float z = 0;
    DEV(g->api->fill(g->t->stream, m * n, sizeof z, &z, out->d), "fill");
    return G_OK;
  }
  DEV(g->api->gemm(g->t->stream, ta, tb, m, n, k, da, ta ? m : k, 0, db, tb ? k : n, 0, out->d, n,
                   0, 1),
      "GEMM");
  return G_OK;
}

static int g_batch_matmul(gx *g, eng_dev_val *out) {
  if (dtype_of(g, 0) != ENG_DT_FLOAT || dtype_of(g, 1) != ENG_DT_FLOAT) return G_DECLINE;
  if (!strcmp(g->nd->op, "BatchMatMulV3") &&
      eng_node_attr_type(g->nd, "Tout", ENG_DT_FLOAT) != ENG_DT_FLOAT)
    return G_DECLINE;
  eng_shape a = shape_of(g, 0), b = shape_of(g, 1);
  if (a.rank < 2 || b.rank < 2) return G_DECLINE;
  bool ta = eng_node_attr_bool(g->nd, "adj_x", false),
       tb = eng_node_attr_bool(g->nd, "adj_y", false);
  int64_t m = a.dim[a.rank - (ta ? 1 : 2)], k = a.dim[a.rank - (ta ? 2 : 1)];
  int64_t n = b.dim[b.rank - (tb ? 2 : 1)];
  if (b.dim[b.rank - (tb ? 1 : 2)] != k) return G_DECLINE;
  /* Batch dims: each operand's either match the broadcast result or are
   * all ones (one matrix for every batch entry); anything else runs on
   * the CPU. */
  eng_shape ab = eng_shape_make(a.rank - 2, a.dim), bb = eng_shape_make(b.rank - 2, b.dim), ob;
  td_err scratch;
  if (eng_broadcast_shape(&ab, &bb, &ob, &scratch)) return G_DECLINE;
  int64_t nb = eng_shape_numel(&ob), na = eng_shape_numel(&ab), nbb = eng_shape_numel(&bb);
  if ((na != 1 && na != nb) || (nbb != 1 && nbb != nb)) return G_DECLINE;
  if (na == nb && ab.rank != ob.rank && na != 1) {
    /* Same count but a different layout (e.g. [2,1] vs [1,2]) is a real
     * broadcast: leave it to the CPU. */
    for (int d = 0; d < ab.rank; d++)
      if (ab.dim[d] != ob.dim[ob.rank - ab.rank + d]) return G_DECLINE;
  }
  if (nbb == nb && bb.rank != ob.rank && nbb != 1)
    for (int d = 0; d < bb.rank; d++)
      if (bb.dim[d] != ob.dim[ob.rank - bb.rank + d]) return G_DECLINE;
  if (na == nb && ab.rank == ob.rank)
    for (int d = 0; d < ab.rank; d++)
      if (ab.dim[d] != ob.dim[d]) return G_DECLINE;
  if (nbb == nb && bb.rank == ob.rank)
    for (int d = 0; d < bb.rank; d++)
      if (bb.dim[d] != ob.dim[d]) return G_DECLINE;
  const float *da, *db;
  NEED_DEV(0, da);
  NEED_DEV(1, db);
  int64_t od[ENG_MAX_RANK];
  if (ob.rank + 2 > ENG_MAX_RANK) return G_DECLINE;
  memcpy(od, ob.dim, sizeof(int64_t) * (size_t)ob.rank);
  od[ob.rank] = m;
  od[ob.rank + 1] = n;
  eng_shape o = eng_shape_make(ob.rank + 2, od);
  int r = new_out(g, out, ENG_DT_FLOAT, &o);
  if (r != G_OK) return r;
  if (nb == 0 || m == 0 || n == 0) return G_OK;
  if (k == 0) {
    float z = 0;
    DEV(g->api->fill(g->t->stream, nb * m * n, sizeof z, &z, out->d), "fill");
    return G_OK;
  }
  DEV(g->api->gemm(g->t->stream, ta, tb, m, n, k, da, ta ? m : k, na == 1 ? 0 : m * k, db,
                   tb ? k : n, nbb == 1 ? 0 : k * n, out->d, n, m * n, nb),
      "batched GEMM");
  return G_OK;
}

/* x (shape s, float) with its dims reordered so that dim d is source dim
 * perm[d]: x itself when perm is the identity, else a scratch copy. */
static int permuted(gx *g, const float *x, const eng_shape *s, const int *perm, const float **y) {
  bool ident = true;
  for (int d = 0; d < s->rank; d++) ident &= perm[d] == d;
  if (ident) {
    *y = x;
    return G_OK;
  }
  int64_t cs[ENG_MAX_RANK], ss[ENG_MAX_RANK], ds[ENG_MAX_RANK];
  eng_shape o = {.rank = s->rank};
  contig(s, cs);
  for (int d = 0; d < s->rank; d++) {
    o.dim[d] = s->dim[perm[d]];
    ss[d] = cs[perm[d]];
  }
  contig(&o, ds);
  float *p = eng_dev_scratch(g->t, sizeof(float) * (size_t)eng_shape_numel(&o), g->err);
  if (!p) return G_ERR;
  DEV(g->api->copy(g->t->stream, o.rank, o.dim, sizeof(float), x, ss, p, ds), "transpose");
  *y = p;
  return G_OK;
}

/* Einsum through eng_einsum's plan: permute, one batched GEMM, permute. */
static int g_einsum(gx *g, eng_dev_val *out) {
  if (g->nd->n_in != 2 || dtype_of(g, 0) != ENG_DT_FLOAT || dtype_of(g, 1) != ENG_DT_FLOAT)
    return G_DECLINE;
  eng_shape a = shape_of(g, 0), b = shape_of(g, 1);
  eng_einsum e;
  td_err scratch;
  if (eng_einsum_plan(eng_attr_str(g->nd, "equation", ""), &a, &b, &e, &scratch)) return G_DECLINE;
  if (!worth(g, 0, 2, e.batch * e.m * e.n)) return G_DECLINE;
  const float *da, *db, *pa, *pb;
  NEED_DEV(0, da);
  NEED_DEV(1, db);
  int r = permuted(g, da, &a, e.perm_a, &pa);
  if (r == G_OK) r = permuted(g, db, &b, e.perm_b, &pb);
  if (r != G_OK) return r;
  int64_t total = e.batch * e.m * e.n;
  bool ident = true;
  for (int d = 0; d < e.out.rank; d++) ident &= e.perm_out[d] == d;
  /* The product lands in the output when no permutation follows. */
  r = new_out(g, out, ENG_DT_FLOAT, ident ? &e.out : &e.prod);
  if (r != G_OK) return r;
  if (total == 0) {
    out->shape = e.out;
    return G_OK;
  }
  float *prod = out->d;
  if (e.k == 0) {
    float z = 0;
    DEV(g->api->fill(g->t->stream, total, sizeof z, &z, prod), "fill");
  } else {
    DEV(g->api->gemm(g->t->stream, false, false, e.m, e.n, e.k, pa, e.k, e.m * e.k, pb, e.n,
                     e.k * e.n, prod, e.n, e.m * e.n, e.batch),
        "Einsum GEMM");
  }
  if (!ident) {
    const float *po;
    if ((r = permuted(g, prod, &e.prod, e.perm_out, &po)) != G_OK) return r;
    *out = (eng_dev_val){.d = (void *)po, .dtype = ENG_DT_FLOAT, .shape = e.out};
  }
  return G_OK;
}

/* --- windows: convolution, depthwise, pooling ----------------------------- */

/* The window of a conv/pool step over input 0 (NHWC float). kh, kw: the
 * filter's, or 0 to read ksize (pooling). Declines anything unusual: the
 * CPU kernel then runs and reports errors in TensorFlow's words. */
static bool window_of(gx *g, int64_t kh, int64_t kw, eng_dev_window *w) {
  if (strcmp(eng_attr_str(g->nd, "data_format", "NHWC"), "NHWC")) return false;
  eng_shape x = shape_of(g, 0);
  if (x.rank != 4 || dtype_of(g, 0) != ENG_DT_FLOAT) return false;
  int64_t st[4] = {1, 1, 1, 1}, dl[4] = {1, 1, 1, 1}, ep[8] = {0}, ks[4] = {1, 1, 1, 1};
  int nst = eng_attr_ints(g->nd, "strides", st, 4);
  int ndl = eng_attr_ints(g->nd, "dilations", dl, 4);
  int nep = eng_attr_ints(g->nd, "explicit_paddings", ep, 8);
  if (nst != 4 || (ndl && ndl != 4) || st[0] != 1 || st[3] != 1 || dl[0] != 1 || dl[3] != 1)
    return false;
  if (!kh) {
    if (eng_attr_ints(g->nd, "ksize", ks, 4) != 4 || ks[0] != 1 || ks[3] != 1) return false;
    kh = ks[1];
    kw = ks[2];
  }
  const char *pad = eng_attr_str(g->nd, "padding", "VALID");
  if (!strcmp(pad, "EXPLICIT") && nep != 8) return false;
  *w = (eng_dev_window){.n = x.dim[0],
                        .h = x.dim[1],
                        .w = x.dim[2],
                        .c = x.dim[3],
                        .kh = kh,
                        .kw = kw,
                        .sh = st[1],
                        .sw = st[2],
                        .dh = dl[1],
                        .dw = dl[2],
                        .mult = 1};
  return eng_window_1d(pad, w->h, kh, w->sh, w->dh, ep + 2, &w->oh, &w->pad_t) == ENG_WINDOW_OK &&
         eng_window_1d(pad, w->w, kw, w->sw, w->dw, ep + 4, &w->ow, &w->pad_l) == ENG_WINDOW_OK;
}

static int g_conv2d(gx *g, eng_dev_val *out) {
  eng_shape f = shape_of(g, 1);
  eng_dev_window w;
  if (f.rank != 4 || dtype_of(g, 1) != ENG_DT_FLOAT || !window_of(g, f.dim[0], f.dim[1], &w) ||
      f.dim[2] != w.c)
    return G_DECLINE;
  const float *x, *k;
  NEED_DEV(0, x);
  NEED_DEV(1, k);
  int64_t oc = f.dim[3], rows = w.n * w.oh * w.ow, kk = w.kh * w.kw * w.c;
  eng_shape o = eng_shape_make(4, (int64_t[]){w.n, w.oh, w.ow, oc});
  int r = new_out(g, out, ENG_DT_FLOAT, &o);
  if (r != G_OK) return r;
  if (rows == 0 || oc == 0) return G_OK;
  const float *a = x;
  bool direct = w.kh == 1 && w.kw == 1 && w.sh == 1 && w.sw == 1 && w.pad_t == 0 && w.pad_l == 0 &&
                w.oh == w.h && w.ow == w.w;
  if (!direct) {
    float *col = eng_dev_scratch(g->t, sizeof(float) * (size_t)(rows * kk), g->err);
    if (!col) return G_ERR;
    DEV(g->api->im2col(g->t->stream, &w, x, col), "im2col");
    a = col;
  }
  if (kk == 0) {
    float z = 0;
    DEV(g->api->fill(g->t->stream, rows * oc, sizeof z, &z, out->d), "fill");
    return G_OK;
  }
  DEV(g->api->gemm(g->t->stream, false, false, rows, oc, kk, a, kk, 0, k, oc, 0, out->d, oc, 0, 1),
      "convolution GEMM");
  return G_OK;
}

/* pads (top, bottom, left, right), or NULL: the padding of a Pad folded
 * into a VALID depthwise convolution at load (eng_merge_pad_views'
 * _DepthwiseConv2dNativePadded over a _PadView). */
static int depthwise_with(gx *g, eng_dev_val *out, const int64_t *pads) {
  eng_shape f = shape_of(g, 1);
  eng_dev_window w;
  if (f.rank != 4 || dtype_of(g, 1) != ENG_DT_FLOAT || !window_of(g, f.dim[0], f.dim[1], &w) ||
      f.dim[2] != w.c)
    return G_DECLINE;
  if (pads) {
    int64_t effh = (w.kh - 1) * w.dh + 1, effw = (w.kw - 1) * w.dw + 1;
    w.oh = (w.h + pads[0] + pads[1] - effh) / w.sh + 1;
    w.ow = (w.w + pads[2] + pads[3] - effw) / w.sw + 1;
    w.pad_t = pads[0];
    w.pad_l = pads[2];
    if (w.oh < 0 || w.ow < 0) return G_DECLINE;
  }
  w.mult = f.dim[3];
  const float *x, *k;
  NEED_DEV(0, x);
  NEED_DEV(1, k);
  eng_shape o = eng_shape_make(4, (int64_t[]){w.n, w.oh, w.ow, w.c * w.mult});
  int r = new_out(g, out, ENG_DT_FLOAT, &o);
  if (r != G_OK) return r;
  if (eng_shape_numel(&o) == 0) return G_OK;
  DEV(g->api->depthwise(g->t->stream, &w, x, k, out->d), "depthwise convolution");
  return G_OK;
}

static int g_depthwise(gx *g, eng_dev_val *out) { return depthwise_with(g, out, NULL); }

static int g_depthwise_padded(gx *g, eng_dev_val *out) {
  const eng_graph *gr = eng_model_graph(g->p->m);
  int64_t pads[4];
  if (!eng_pad_hw(gr, eng_graph_node(gr, g->nd->in[0].node), pads)) return G_DECLINE;
  return depthwise_with(g, out, pads);
}

static int g_pool(gx *g, eng_dev_val *out) {
  eng_dev_window w;
  if (!window_of(g, 0, 0, &w) || w.dh != 1 || w.dw != 1) return G_DECLINE;
  const float *x;
  NEED_DEV(0, x);
  eng_shape o = eng_shape_make(4, (int64_t[]){w.n, w.oh, w.ow, w.c});
  int r = new_out(g, out, ENG_DT_FLOAT, &o);
  if (r != G_OK) return r;
  if (eng_shape_numel(&o) == 0) return G_OK;
  DEV(g->api->pool(g->t->stream, &w, !strcmp(g->nd->op, "MaxPool"), x, out->d), "pooling");
  return G_OK;
}

/* --- softmax, reductions -------------------------------------------------- */

static int g_softmax(gx *g, eng_dev_val *out) {
  eng_shape s = shape_of(g, 0);
  if (dtype_of(g, 0) != ENG_DT_FLOAT || s.rank < 1) return G_DECLINE;
  const float *x;
  NEED_DEV(0, x);
  int r = new_out(g, out, ENG_DT_FLOAT, &s);
  if (r != G_OK) return r;
  int64_t cols = s.dim[s.rank - 1], n = eng_shape_numel(&s);
  if (n == 0) return G_OK;
  DEV(g->api->softmax(g->t->stream, n / cols, cols, !strcmp(g->nd->op, "LogSoftmax"), x, out->d),
      "softmax");
  return G_OK;
}

static int g_reduce(gx *g, eng_dev_val *out) {
  static const struct {
    const char *op;
    int code;
  } ops[] = {{"Max", ENG_DR_MAX},
             {"Mean", ENG_DR_MEAN},
             {"Min", ENG_DR_MIN},
             {"Prod", ENG_DR_PROD},
             {"Sum", ENG_DR_SUM}};
  int code = -1;
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (!strcmp(g->nd->op, ops[i].op)) code = ops[i].code;
  eng_shape s = shape_of(g, 0);
  if (code < 0 || dtype_of(g, 0) != ENG_DT_FLOAT || !worth(g, 0, 1, eng_shape_numel(&s)))
    return G_DECLINE;
  int64_t ax[ENG_MAX_RANK];
  int na = 0, r = host_ints(g, 1, ax, ENG_MAX_RANK, &na);
  if (r != G_OK) return r;
  bool red[ENG_MAX_RANK] = {false};
  for (int i = 0; i < na; i++) {
    int64_t a = ax[i] < 0 ? ax[i] + s.rank : ax[i];
    if (a < 0 || a >= s.rank) return G_DECLINE;
    red[a] = true;
  }
  /* The reduced axes must be one contiguous run: [outer, r, inner]. */
  int first = -1, last = -1;
  for (int d = 0; d < s.rank; d++)
    if (red[d]) {
      if (first < 0)
        first = d;
      else if (last != d - 1)
        return G_DECLINE;
      last = d;
    }
  if (first < 0) return G_DECLINE;
  int64_t outer = 1, rr = 1, inner = 1, od[ENG_MAX_RANK];
  int orank = 0;
  bool keep = eng_node_attr_bool(g->nd, "keep_dims", false);
  for (int d = 0; d < s.rank; d++) {
    if (d < first)
      outer *= s.dim[d];
    else if (d > last)
      inner *= s.dim[d];
    else
      rr *= s.dim[d];
    if (!red[d])
      od[orank++] = s.dim[d];
    else if (keep)
      od[orank++] = 1;
  }
  const float *x;
  NEED_DEV(0, x);
  eng_shape o = eng_shape_make(orank, od);
  r = new_out(g, out, ENG_DT_FLOAT, &o);
  if (r != G_OK) return r;
  DEV(g->api->reduce(g->t->stream, code, outer, rr, inner, x, out->d), "reduction");
  return G_OK;
}

/* --- moving elements ------------------------------------------------------ */

static int g_transpose(gx *g, eng_dev_val *out) {
  eng_dtype dt = dtype_of(g, 0);
  eng_shape s = shape_of(g, 0);
  if (!eng_dtype_size(dt) || !worth(g, 0, 1, eng_shape_numel(&s))) return G_DECLINE;
  int64_t perm[ENG_MAX_RANK];
  int n = 0, r = host_ints(g, 1, perm, ENG_MAX_RANK, &n);
  if (r != G_OK) return r;
  if (n != s.rank) return G_DECLINE;
  int64_t cs[ENG_MAX_RANK], ss[ENG_MAX_RANK], od[ENG_MAX_RANK], ds[ENG_MAX_RANK];
  bool seen[ENG_MAX_RANK] = {false};
  contig(&s, cs);
  for (int d = 0; d < n; d++) {
    if (perm[d] < 0 || perm[d] >= n || seen[perm[d]]) return G_DECLINE;
    seen[perm[d]] = true;
    od[d] = s.dim[perm[d]];
    ss[d] = cs[perm[d]];
  }
  const void *x;
  NEED_DEV(0, x);
  eng_shape o = eng_shape_make(n, od);
  r = new_out(g, out, dt, &o);
  if (r != G_OK) return r;
  contig(&o, ds);
  DEV(g->api->copy(g->t->stream, n, od, eng_dtype_size(dt), x, ss, out->d, ds), "transpose");
  return G_OK;
}

/* ConcatV2 (inputs..., axis) and Pack (inputs..., attr axis: a new dim). */
static int g_concat(gx *g, eng_dev_val *out) {
  bool pack = !strcmp(g->nd->op, "Pack");
  int n = pack ? g->nd->n_in : g->nd->n_in - 1;
  if (n < 1 || !worth(g, 0, n, 0)) return G_DECLINE;
  eng_dtype dt = dtype_of(g, 0);
  eng_shape s0 = shape_of(g, 0);
  if (!eng_dtype_size(dt)) return G_DECLINE;
  int64_t axis;
  int rank = pack ? s0.rank + 1 : s0.rank;
  if (pack) {
    axis = eng_node_attr_int(g->nd, "axis", 0);
  } else {
    int na = 0;
    int r = host_ints(g, n, &axis, 1, &na);
    if (r != G_OK) return r;
    if (na != 1) return G_DECLINE;
  }
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || rank > ENG_MAX_RANK || rank < 1) return G_DECLINE;
  int64_t od[ENG_MAX_RANK];
  for (int d = 0, sd = 0; d < rank; d++) od[d] = pack && d == axis ? n : s0.dim[sd++];
  if (!pack) od[axis] = 0;
  for (int k = 0; k < n; k++) {
    eng_shape s = shape_of(g, k);
    if (dtype_of(g, k) != dt || s.rank != s0.rank) return G_DECLINE;
    for (int d = 0; d < s.rank; d++)
      if (pack ? s.dim[d] != s0.dim[d] : (d != axis && s.dim[d] != s0.dim[d])) return G_DECLINE;
    if (!pack) od[axis] += s.dim[axis];
  }
  eng_shape o = eng_shape_make(rank, od);
  int r = new_out(g, out, dt, &o);
  if (r != G_OK) return r;
  int64_t ds[ENG_MAX_RANK];
  contig(&o, ds);
  size_t es = eng_dtype_size(dt);
  int64_t at = 0;
  for (int k = 0; k < n; k++) {
    const void *x;
    NEED_DEV(k, x);
    eng_shape s = shape_of(g, k);
    int64_t dims[ENG_MAX_RANK], ss[ENG_MAX_RANK], cs[ENG_MAX_RANK];
    contig(&s, cs);
    for (int d = 0, sd = 0; d < rank; d++) {
      if (pack && d == axis) {
        dims[d] = 1;
        ss[d] = 0;
      } else {
        dims[d] = s.dim[sd];
        ss[d] = cs[sd];
        sd++;
      }
    }
    DEV(g->api->copy(g->t->stream, rank, dims, es, x, ss,
                     (char *)out->d + at * ds[axis] * (int64_t)es, ds),
        "concatenation");
    at += dims[axis];
  }
  return G_OK;
}

/* StridedSlice through the CPU kernel's own geometry (eng_strided_slice_plan
 * on a stand-in of input 0's shape), then one strided copy. */
static int g_strided_slice(gx *g, eng_dev_val *out) {
  eng_dtype dt = dtype_of(g, 0);
  eng_shape s = shape_of(g, 0);
  if (g->nd->n_in != 4 || !eng_dtype_size(dt) || !worth(g, 0, 1, eng_shape_numel(&s)))
    return G_DECLINE;
  eng_tensor kin[4] = {{0}};
  for (int k = 1; k < 4; k++) {
    int r = to_host(g, k);
    if (r != G_OK) return r;
    kin[k] = *host(g, k);
  }
  if (stand_in(g, dt, &s, &kin[0]) != G_OK) return G_ERR;
  eng_kctx c = {.node = g->nd,
                .node_id = g->p->steps[g->s],
                .model = g->p->m,
                .n_in = 4,
                .in = kin,
                .n_out = 1,
                .err = g->err};
  eng_slice sl;
  td_code rc = eng_strided_slice_plan(&c, &sl);
  eng_tensor_release(&kin[0]);
  if (rc) return G_ERR;
  const char *x;
  NEED_DEV(0, x);
  int r = new_out(g, out, dt, &sl.out);
  if (r != G_OK) return r;
  eng_shape dense = eng_shape_make(sl.rank, sl.size);
  int64_t ds[ENG_MAX_RANK];
  contig(&dense, ds);
  size_t es = eng_dtype_size(dt);
  DEV(g->api->copy(g->t->stream, sl.rank, sl.size, es, x + sl.offset * (int64_t)es, sl.src_stride,
                   out->d, ds),
      "strided slice");
  return G_OK;
}

static int g_slice(gx *g, eng_dev_val *out) {
  eng_dtype dt = dtype_of(g, 0);
  eng_shape s = shape_of(g, 0);
  if (!eng_dtype_size(dt) || !worth(g, 0, 1, eng_shape_numel(&s))) return G_DECLINE;
  int64_t b[ENG_MAX_RANK], z[ENG_MAX_RANK];
  int nb = 0, nz = 0, r = host_ints(g, 1, b, ENG_MAX_RANK, &nb);
  if (r == G_OK) r = host_ints(g, 2, z, ENG_MAX_RANK, &nz);
  if (r != G_OK) return r;
  if (nb != s.rank || nz != s.rank) return G_DECLINE;
  int64_t cs[ENG_MAX_RANK], ds[ENG_MAX_RANK], off = 0;
  contig(&s, cs);
  for (int d = 0; d < s.rank; d++) {
    if (z[d] == -1) z[d] = s.dim[d] - b[d];
    if (b[d] < 0 || z[d] < 0 || b[d] + z[d] > s.dim[d]) return G_DECLINE;
    off += b[d] * cs[d];
  }
  const char *x;
  NEED_DEV(0, x);
  eng_shape o = eng_shape_make(s.rank, z);
  r = new_out(g, out, dt, &o);
  if (r != G_OK) return r;
  contig(&o, ds);
  size_t es = eng_dtype_size(dt);
  DEV(g->api->copy(g->t->stream, s.rank, z, es, x + off * (int64_t)es, cs, out->d, ds), "slice");
  return G_OK;
}

static int g_pad(gx *g, eng_dev_val *out) {
  eng_dtype dt = dtype_of(g, 0);
  eng_shape s = shape_of(g, 0);
  if (!eng_dtype_size(dt) || !worth(g, 0, 1, eng_shape_numel(&s))) return G_DECLINE;
  int64_t pd[2 * ENG_MAX_RANK];
  int np = 0, r = host_ints(g, 1, pd, 2 * ENG_MAX_RANK, &np);
  if (r != G_OK) return r;
  if (np != 2 * s.rank) return G_DECLINE;
  char value[8] = {0};
  size_t es = eng_dtype_size(dt);
  if (g->nd->n_in > 2) {
    if ((r = to_host(g, 2)) != G_OK) return r;
    const eng_tensor *c = host(g, 2);
    if (c->dtype != dt || eng_tensor_numel(c) != 1) return G_DECLINE;
    memcpy(value, eng_tensor_data(c), es);
  }
  int64_t od[ENG_MAX_RANK], cs[ENG_MAX_RANK], ds[ENG_MAX_RANK], off = 0;
  for (int d = 0; d < s.rank; d++) {
    if (pd[2 * d] < 0 || pd[2 * d + 1] < 0) return G_DECLINE;
    od[d] = s.dim[d] + pd[2 * d] + pd[2 * d + 1];
  }
  const void *x;
  NEED_DEV(0, x);
  eng_shape o = eng_shape_make(s.rank, od);
  r = new_out(g, out, dt, &o);
  if (r != G_OK) return r;
  contig(&s, cs);
  contig(&o, ds);
  for (int d = 0; d < s.rank; d++) off += pd[2 * d] * ds[d];
  DEV(g->api->fill(g->t->stream, eng_shape_numel(&o), es, value, out->d), "fill");
  DEV(g->api->copy(g->t->stream, s.rank, s.dim, es, x, cs, (char *)out->d + off * (int64_t)es, ds),
      "pad");
  return G_OK;
}

/* GatherV2 without batch dims. The indices are checked on the host, so an
 * index out of range declines and the CPU kernel reports it as TensorFlow
 * does (TensorFlow's own GPU kernel writes zeros there instead). */
static int g_gather(gx *g, eng_dev_val *out) {
  eng_dtype dt = dtype_of(g, 0);
  eng_shape ps = shape_of(g, 0);
  if (!eng_dtype_size(dt) || eng_node_attr_int(g->nd, "batch_dims", 0) != 0 || g->nd->n_in < 3 ||
      !worth(g, 0, 1, eng_shape_numel(&ps)))
    return G_DECLINE;
  int64_t axis;
  int na = 0, r = host_ints(g, 2, &axis, 1, &na);
  if (r != G_OK) return r;
  if (na != 1) return G_DECLINE;
  if (axis < 0) axis += ps.rank;
  if (axis < 0 || axis >= ps.rank) return G_DECLINE;
  if ((r = to_host(g, 1)) != G_OK) return r;
  const eng_tensor *ix = host(g, 1);
  if ((ix->dtype != ENG_DT_INT32 && ix->dtype != ENG_DT_INT64) ||
      ps.rank - 1 + ix->shape.rank > ENG_MAX_RANK)
    return G_DECLINE;
  int64_t n = eng_tensor_numel(ix), limit = ps.dim[axis], outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= ps.dim[d];
  for (int d = (int)axis + 1; d < ps.rank; d++) inner *= ps.dim[d];
  int64_t *idx = eng_dev_scratch(g->t, sizeof(int64_t) * (size_t)(n ? n : 1), g->err);
  if (!idx) return G_ERR;
  /* Checked and widened on the host, then uploaded. */
  int64_t buf[512];
  int64_t *h = n <= 512 ? buf : malloc(sizeof *h * (size_t)n);
  if (!h) return G_DECLINE;
  const void *iv = eng_tensor_data(ix);
  bool ok = true;
  for (int64_t i = 0; i < n && ok; i++) {
    h[i] = ix->dtype == ENG_DT_INT32 ? ((const int32_t *)iv)[i] : ((const int64_t *)iv)[i];
    ok = h[i] >= 0 && h[i] < limit;
  }
  int up = ok && n ? g->api->upload(g->t->stream, idx, h, sizeof(int64_t) * (size_t)n) : 0;
  if (h != buf) free(h);
  if (!ok) return G_DECLINE;
  if (up) return dev_fail(g, "upload");
  const void *pd;
  NEED_DEV(0, pd);
  eng_shape o = {.rank = ps.rank - 1 + ix->shape.rank};
  int k = 0;
  for (int d = 0; d < axis; d++) o.dim[k++] = ps.dim[d];
  for (int d = 0; d < ix->shape.rank; d++) o.dim[k++] = ix->shape.dim[d];
  for (int d = (int)axis + 1; d < ps.rank; d++) o.dim[k++] = ps.dim[d];
  r = new_out(g, out, dt, &o);
  if (r != G_OK) return r;
  DEV(g->api->gather(g->t->stream, outer, n, limit, inner, eng_dtype_size(dt), pd, idx, out->d),
      "gather");
  return G_OK;
}

/* --- the table -------------------------------------------------------------- */

typedef int (*gfn)(gx *g, eng_dev_val *out);

/* The device's lowering table: an op's lowering and, for elementwise ops,
 * the primitive's code (eng_devapi.h). */
static const struct gop {
  const char *name;
  gfn fn;
  int code;
} g_ops[] = {
    /* sorted by name (bisected) */
    {"Abs", g_unary, ENG_DU_ABS},
    {"Add", g_binary, ENG_DB_ADD},
    {"AddV2", g_binary, ENG_DB_ADD},
    {"AvgPool", g_pool, 0},
    {"BatchMatMul", g_batch_matmul, 0},
    {"BatchMatMulV2", g_batch_matmul, 0},
    {"BatchMatMulV3", g_batch_matmul, 0},
    {"BiasAdd", g_binary, ENG_DB_ADD},
    {"Cast", g_cast, 0},
    {"ConcatV2", g_concat, 0},
    {"Conv2D", g_conv2d, 0},
    {"Cos", g_unary, ENG_DU_COS},
    {"DepthwiseConv2dNative", g_depthwise, 0},
    {"Einsum", g_einsum, 0},
    {"Elu", g_unary, ENG_DU_ELU},
    {"EnsureShape", g_alias, 0},
    {"Equal", g_compare, 0},
    {"Erf", g_unary, ENG_DU_ERF},
    {"Erfc", g_unary, ENG_DU_ERFC},
    {"Exp", g_unary, ENG_DU_EXP},
    {"ExpandDims", g_alias, 0},
    {"Expm1", g_unary, ENG_DU_EXPM1},
    {"Floor", g_unary, ENG_DU_FLOOR},
    {"GatherV2", g_gather, 0},
    {"Greater", g_compare, 0},
    {"GreaterEqual", g_compare, 0},
    {"Identity", g_alias, 0},
    {"IdentityN", g_identity_n, 0},
    {"LeakyRelu", g_unary, ENG_DU_LEAKY_RELU},
    {"Less", g_compare, 0},
    {"LessEqual", g_compare, 0},
    {"Log", g_unary, ENG_DU_LOG},
    {"Log1p", g_unary, ENG_DU_LOG1P},
    {"LogSoftmax", g_softmax, 0},
    {"LogicalAnd", g_compare, 0},
    {"LogicalOr", g_compare, 0},
    {"MatMul", g_matmul, 0},
    {"Max", g_reduce, 0},
    {"MaxPool", g_pool, 0},
    {"Maximum", g_binary, ENG_DB_MAX},
    {"Mean", g_reduce, 0},
    {"Min", g_reduce, 0},
    {"Minimum", g_binary, ENG_DB_MIN},
    {"Mul", g_binary, ENG_DB_MUL},
    {"Neg", g_unary, ENG_DU_NEG},
    {"NoOp", g_noop, 0},
    {"NotEqual", g_compare, 0},
    {"Pack", g_concat, 0},
    {"Pad", g_pad, 0},
    {"PadV2", g_pad, 0},
    {"Pow", g_binary, ENG_DB_POW},
    {"PreventGradient", g_alias, 0},
    {"Prod", g_reduce, 0},
    {"RealDiv", g_binary, ENG_DB_DIV},
    {"Reciprocal", g_unary, ENG_DU_RECIPROCAL},
    {"Relu", g_unary, ENG_DU_RELU},
    {"Relu6", g_unary, ENG_DU_RELU6},
    {"Reshape", g_alias, 0},
    {"Round", g_unary, ENG_DU_ROUND},
    {"Rsqrt", g_unary, ENG_DU_RSQRT},
    {"Select", g_select, 0},
    {"SelectV2", g_select, 0},
    {"Selu", g_unary, ENG_DU_SELU},
    {"Sigmoid", g_unary, ENG_DU_SIGMOID},
    {"Sign", g_unary, ENG_DU_SIGN},
    {"Sin", g_unary, ENG_DU_SIN},
    {"Slice", g_slice, 0},
    {"Snapshot", g_alias, 0},
    {"Softmax", g_softmax, 0},
    {"Softplus", g_unary, ENG_DU_SOFTPLUS},
    {"Softsign", g_unary, ENG_DU_SOFTSIGN},
    {"Sqrt", g_unary, ENG_DU_SQRT},
    {"Square", g_unary, ENG_DU_SQUARE},
    {"SquaredDifference", g_binary, ENG_DB_SQDIFF},
    {"Squeeze", g_alias, 0},
    {"StopGradient", g_alias, 0},
    {"StridedSlice", g_strided_slice, 0},
    {"Sub", g_binary, ENG_DB_SUB},
    {"Sum", g_reduce, 0},
    {"Tanh", g_unary, ENG_DU_TANH},
    {"Transpose", g_transpose, 0},
    {"_DepthwiseConv2dNativePadded", g_depthwise_padded, 0},
    {"_PadView", g_alias, 0},
};

static const struct gop *find_op(const char *name) {
  int lo = 0, hi = (int)(sizeof g_ops / sizeof g_ops[0]) - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2, c = strcmp(name, g_ops[mid].name);
    if (!c) return &g_ops[mid];
    if (c < 0)
      hi = mid - 1;
    else
      lo = mid + 1;
  }
  return NULL;
}

bool eng_gpu_step_supported(const eng_plan *p, int s) {
  return find_op(p->ops[s]->name) != NULL && !(p->ops[s]->flags & ENG_OP_STATEFUL);
}

int eng_gpu_op_count(void) { return (int)(sizeof g_ops / sizeof g_ops[0]); }
const char *eng_gpu_op_name(int i) {
  return i >= 0 && i < eng_gpu_op_count() ? g_ops[i].name : NULL;
}

/* --- the run loop ----------------------------------------------------------------- */

/* Applies a fused epilogue to the device result of output 0 in place, in
 * one pass. */
static int apply_epi(gx *g, const eng_epilogue *e, eng_dev_val *y) {
  if (y->dtype != ENG_DT_FLOAT || e->n > ENG_DEV_EPI_MAX) return G_DECLINE;
  for (int i = 0; i < e->n; i++)
    if (e->op[i].kind >= EPI_GELU_TANH) return G_DECLINE;
  int64_t n = eng_shape_numel(&y->shape), c = y->shape.rank ? y->shape.dim[y->shape.rank - 1] : 1;
  if (n <= 0 || c <= 0) return G_OK;
  static const int kinds[] = {[EPI_ADD] = ENG_DE_ADD,
                              [EPI_SUB] = ENG_DE_SUB,
                              [EPI_MUL] = ENG_DE_MUL,
                              [EPI_RELU] = ENG_DE_RELU,
                              [EPI_RELU6] = ENG_DE_RELU6};
  /* A swish (always last) runs as the device's own Sigmoid and Mul would,
   * after the ops before it. */
  bool swish = e->n > 0 && e->op[e->n - 1].kind == EPI_SWISH;
  const eng_tensor *bk = swish ? &e->op[e->n - 1].k : NULL;
  if (swish && bk->buf && *(const float *)eng_tensor_data(bk) != 1.0f) return G_DECLINE;
  eng_dev_epi de = {.n = e->n - swish};
  for (int i = 0; i < de.n; i++) {
    const eng_tensor *k = &e->op[i].k;
    de.op[i].kind = kinds[e->op[i].kind];
    if (!k->buf) continue;
    if (eng_tensor_numel(k) == 1) {
      de.op[i].s = *(const float *)eng_tensor_data(k);
    } else {
      void *d;
      if (eng_tensor_numel(k) != c) return G_DECLINE;
      if (eng_dev_model_const(g->dm, g->t, k, &d, g->err)) return G_ERR;
      de.op[i].k = d;
    }
  }
  if (de.n) DEV(g->api->epilogue(g->t->stream, n / c, c, &de, y->d), "fused epilogue");
  if (swish) {
    eng_dev_val sg;
    int r = new_out(g, &sg, ENG_DT_FLOAT, &y->shape);
    if (r != G_OK) return r;
    int64_t st[ENG_MAX_RANK];
    bcast_strides(&y->shape, &y->shape, st);
    DEV(g->api->unary(g->t->stream, ENG_DU_SIGMOID, n, y->d, sg.d, 0), "fused swish");
    DEV(g->api->binary(g->t->stream, ENG_DB_MUL, y->shape.rank, y->shape.dim, y->d, st, sg.d, st,
                       y->d),
        "fused swish");
  }
  return G_OK;
}

static td_code step(gx *g, int s) {
  const eng_plan *p = g->p;
  g->s = s;
  g->op = p->ops[s];
  g->nd = eng_graph_node(g->r.g, p->steps[s]);
  const struct gop *lw = find_op(g->op->name);
  gfn fn = lw ? lw->fn : NULL;
  g->code = lw ? lw->code : 0;
  int res = G_DECLINE;
  eng_dev_val outs[16];
  const eng_epilogue *epi = p->epi ? p->epi[s] : NULL;
  /* A fused GELU or run-time add has no device form: the step runs on the
   * CPU (the compiler fuses no run-time add where a device is active). */
  for (int i = 0; epi && i < epi->n; i++)
    if (epi->op[i].kind >= EPI_GELU_TANH) fn = NULL;
  if (fn && g->nd->n_out <= 16 && !(g->op->flags & (ENG_OP_STATEFUL | ENG_OP_REF_INPUT0))) {
    bool refs = false;
    for (int k = 0; k < g->nd->n_in; k++) refs |= g->r.values[vin(g, k)].is_ref;
    if (!refs) {
      memset(outs, 0, sizeof outs);
      res = fn(g, outs);
      if (res == G_OK && epi) res = apply_epi(g, epi, &outs[0]);
    }
  }
  if (res == G_ERR) {
    if (g->err && !strstr(g->err->msg, g->nd->name))
      td_err_prefix(g->err, "node '%s' (%s)", g->nd->name, g->nd->op);
    return g->err ? g->err->code : TD_INTERNAL;
  }
  if (res == G_OK) {
    for (int o = 0; o < g->nd->n_out; o++) {
      int vi = o == 0 && epi ? epi->out_value : p->base[p->steps[s]] + o;
      if (!g->r.fed[vi] && g->r.left[vi] > 0) g->dv[vi] = outs[o];
    }
    eng_run_drop_inputs(&g->r, s);
    return TD_OK;
  }
  for (int k = 0; k < g->nd->n_in; k++)
    if (to_host(g, k) != G_OK) return g->err ? g->err->code : TD_INTERNAL;
  int ev = eng_epilogue_input(epi);
  if (ev >= 0 && to_host_v(g, ev) != G_OK) return g->err ? g->err->code : TD_INTERNAL;
  return eng_run_step_cpu(&g->r, s, g->err);
}

static td_code gpu_run(eng_dev_model *dm, const eng_plan *p, const eng_tensor *in, eng_tensor *out,
                       td_err *err);

/* Runs nested in a run of this thread (a While or If body) take the CPU:
 * the thread's device value table and scratch belong to the outer run. */
static _Thread_local int g_depth;

td_code eng_gpu_run(eng_dev_model *dm, const eng_plan *p, const eng_tensor *in, eng_tensor *out,
                    td_err *err) {
  if (g_depth) return eng_run_cpu(p, in, out, err);
  /* TF1 Switch / Merge plans carry dead values the device table does not
   * track: they run on the CPU. */
  for (int s = 0; s < p->n_steps; s++)
    if (p->ops[s]->flags & ENG_OP_DEAD_FLOW) return eng_run_cpu(p, in, out, err);
  g_depth++;
  td_code rc = gpu_run(dm, p, in, out, err);
  g_depth--;
  return rc;
}

static td_code gpu_run(eng_dev_model *dm, const eng_plan *p, const eng_tensor *in, eng_tensor *out,
                       td_err *err) {
  gx g = {.p = p, .dm = dm, .api = eng_dev_api(), .err = err};
  if (!g.api) return td_err_set(err, TD_INTERNAL, "no device is selected");
  g.t = eng_dev_thread_get(err);
  if (!g.t) return err ? err->code : TD_INTERNAL;
  size_t nv = (size_t)p->n_values + 1;
  size_t need = nv * (sizeof(eng_dev_val) + sizeof(bool));
  if (g.t->dv_cap < need) {
    void *np = realloc(g.t->dv, need);
    if (!np) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    g.t->dv = np;
    g.t->dv_cap = need;
  }
  memset(g.t->dv, 0, need);
  g.dv = g.t->dv;
  g.konst = (bool *)(g.dv + nv);
  td_code rc = eng_run_begin(&g.r, p, in, err);
  for (int i = 0; i < p->n_consts && !rc; i++)
    g.konst[p->const_value[i]] = !g.r.fed[p->const_value[i]];
  for (int s = 0; s < p->n_steps && !rc; s++) rc = step(&g, s);
  for (int i = 0; i < p->n_outputs && !rc; i++)
    if (to_host_v(&g, p->out_value[i]) != G_OK) rc = err ? err->code : TD_INTERNAL;
  eng_dev_thread_end(g.t);
  return eng_run_finish(&g.r, rc, out, err);
}

int eng_device_plan_report(const eng_plan *p, char *cpu_ops, size_t len) {
  int on = 0;
  size_t used = 0;
  if (len) cpu_ops[0] = 0;
  for (int s = 0; s < p->n_steps; s++) {
    if (eng_gpu_step_supported(p, s)) {
      on++;
      continue;
    }
    const char *name = p->ops[s]->name;
    /* List each op once. */
    size_t nl = strlen(name);
    bool seen = false;
    for (const char *q = cpu_ops; q && *q && !seen;) {
      const char *e = strchr(q, ',');
      size_t l = e ? (size_t)(e - q) : strlen(q);
      seen = l == nl && !strncmp(q, name, nl);
      q = e ? e + 2 : NULL;
    }
    if (!seen && used + nl + 3 < len) {
      used += (size_t)snprintf(cpu_ops + used, len - used, "%s%s", used ? ", " : "", name);
    }
  }
  return on;
}
