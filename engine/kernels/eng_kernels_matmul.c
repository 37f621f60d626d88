/* Matrix products on OpenBLAS: MatMul (transpose_a/b), BatchMatMulV2/V3
 * (adj_x/adj_y, broadcasting batch dims) and two-operand Einsum.
 *
 * A single-row product goes to sgemv: OpenBLAS's sgemm is several times
 * slower there, and batch-1 dense layers are that case. Other products
 * with A not transposed (attention's, of two activations) run on
 * eng_gemm's kernels, B packed per call (eng_gemm_dynamic): OpenBLAS packs
 * both operands per call too, and on CPUs it does not know it falls back
 * to SSE3 kernels.
 * Einsum is lowered to one batched product: each label is a batch label (in
 * both operands and the output), a contracted label (in both, not in the
 * output) or a free label of one operand; the operands are permuted to
 * [batch, free, contracted] / [batch, contracted, free], multiplied, and the
 * result permuted to the output's order, or, when each operand already is
 * a strided matrix per batch index, multiplied in place; a constant B of
 * a dense layer (EinsumDense) is packed once at load like MatMul's, and
 * its fused epilogue runs in the packed kernel's registers (or, on the
 * other paths, over the output's last n columns afterwards).
 * Equations outside that form (repeated labels, one operand, labels summed
 * away) fail with UNIMPLEMENTED naming the equation. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "eng_einsum.h"
#include "eng_epilogue.h"
#include "eng_gemm.h"
#include "eng_kernels.h"
#include "eng_pool.h"

/* C[m,n] = op(A) op(B), row-major; lda/ldb are the stored row lengths. */
static void gemm_f32(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
                     const float *b, float *c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    memset(c, 0, sizeof *c * (size_t)(m * n));
    return;
  }
  int64_t lda = ta ? m : k, ldb = tb ? k : n;
  if (m == 1) {
    /* c = op(B)^T a: B stored [k,n] -> y = B^T x; stored [n,k] -> y = B x. */
    cblas_sgemv(CblasRowMajor, tb ? CblasNoTrans : CblasTrans, tb ? (int)n : (int)k,
                tb ? (int)k : (int)n, 1.0f, b, (int)ldb, a, ta ? (int)lda : 1, 0.0f, c, 1);
    return;
  }
  if (n == 1 && !tb) {
    cblas_sgemv(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, ta ? (int)k : (int)m,
                ta ? (int)m : (int)k, 1.0f, a, (int)lda, b, (int)ldb, 0.0f, c, 1);
    return;
  }
  if (!ta && eng_gemm_dynamic(a, lda, m, b, ldb, tb, k, n, c, n)) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (int)m, (int)n, (int)k, 1.0f, a, (int)lda, b, (int)ldb, 0.0f, c, (int)n);
}

static void gemm_f64(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
                     const double *b, double *c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    memset(c, 0, sizeof *c * (size_t)(m * n));
    return;
  }
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              (int)m, (int)n, (int)k, 1.0, a, (int)(ta ? m : k), b, (int)(tb ? k : n), 0.0, c,
              (int)n);
}

#define MAX_GEMM_DIM ((int64_t)1 << 30) /* BLAS takes int dims */

static td_code check_dims(eng_kctx *c, int64_t m, int64_t n, int64_t k) {
  if (m > MAX_GEMM_DIM || n > MAX_GEMM_DIM || k > MAX_GEMM_DIM)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "matrix dimension too large");
  return TD_OK;
}

td_code eng_s_matmul(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  if (in[0].rank != 2 || in[1].rank != 2) {
    if ((in[0].rank >= 0 && in[0].rank != 2) || (in[1].rank >= 0 && in[1].rank != 2))
      return td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (MatMul): inputs must be matrices",
                        n->name);
    out[0] = eng_shape_unknown();
    return TD_OK;
  }
  bool ta = eng_node_attr_bool(n, "transpose_a", false), tb = eng_node_attr_bool(n, "transpose_b", false);
  int64_t ka = in[0].dim[ta ? 0 : 1], kb = in[1].dim[tb ? 1 : 0];
  if (ka >= 0 && kb >= 0 && ka != kb)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "node '%s' (MatMul): Matrix size-incompatible: In[0] inner %lld, In[1] %lld",
                      n->name, (long long)ka, (long long)kb);
  int64_t d[2] = {in[0].dim[ta ? 1 : 0], in[1].dim[tb ? 0 : 1]};
  out[0] = eng_shape_make(2, d);
  return TD_OK;
}


td_code eng_k_matmul(eng_kctx *c) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  if (a->dtype != b->dtype || (a->dtype != ENG_DT_FLOAT && a->dtype != ENG_DT_DOUBLE))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s x %s products are not supported",
                     eng_dtype_name(a->dtype), eng_dtype_name(b->dtype));
  if (a->shape.rank != 2 || b->shape.rank != 2)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "In[0] and In[1] must be matrices, got rank %d and %d",
                     a->shape.rank, b->shape.rank);
  bool ta = eng_node_attr_bool(c->node, "transpose_a", false);
  bool tb = eng_node_attr_bool(c->node, "transpose_b", false);
  int64_t m = a->shape.dim[ta ? 1 : 0], k = a->shape.dim[ta ? 0 : 1];
  int64_t kb = b->shape.dim[tb ? 1 : 0], n = b->shape.dim[tb ? 0 : 1];
  if (k != kb) {
    char sa[64], sb[64];
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Matrix size-incompatible: In[0]: %s, In[1]: %s",
                     eng_shape_str(&a->shape, sa, sizeof sa), eng_shape_str(&b->shape, sb, sizeof sb));
  }
  td_code rc = check_dims(c, m, n, k);
  int64_t d[2] = {m, n};
  eng_shape s = eng_shape_make(2, d);
  if (!rc) rc = eng_kout_raw(c, 0, a->dtype, &s);
  if (rc) return rc;
  if (a->dtype == ENG_DT_FLOAT && c->packed && !ta && eng_gemm_k(c->packed) == k &&
      eng_gemm_n(c->packed) == n && m > 0) {
    float *y = eng_tensor_data(&c->out[0]);
    eng_gemm_epi ge;
    eng_gemm_run(eng_tensor_data(a), k, m, c->packed, y, n, eng_kgemm_epi(c, &ge));
  } else if (eng_tensor_hollow(b)) {
    /* Released after packing (eng_model.h); only the packed path reads it. */
    if (m > 0) return eng_kfail(c, TD_INTERNAL, "the weight is held only in packed form");
  } else if (a->dtype == ENG_DT_FLOAT) {
    gemm_f32(ta, tb, m, n, k, eng_tensor_data(a), eng_tensor_data(b), eng_tensor_data(&c->out[0]));
    eng_kepilogue(c, eng_tensor_data(&c->out[0]), m, n);
  }
  else
    gemm_f64(ta, tb, m, n, k, eng_tensor_data(a), eng_tensor_data(b), eng_tensor_data(&c->out[0]));
  return TD_OK;
}

/* --- BatchMatMul ---------------------------------------------------------- */

td_code eng_s_batch_matmul(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  if (in[0].rank < 0 || in[1].rank < 0) {
    out[0] = eng_shape_unknown();
    return TD_OK;
  }
  if (in[0].rank < 2 || in[1].rank < 2)
    return td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (%s): inputs must be rank >= 2",
                      n->name, n->op);
  eng_shape ba = in[0], bb = in[1];
  ba.rank -= 2;
  bb.rank -= 2;
  td_code rc = eng_broadcast_shape(&ba, &bb, &out[0], err);
  if (rc) return rc;
  bool ax = eng_node_attr_bool(n, "adj_x", false), ay = eng_node_attr_bool(n, "adj_y", false);
  if (out[0].rank + 2 > ENG_MAX_RANK) return td_err_set(err, TD_UNIMPLEMENTED, "rank too large");
  out[0].dim[out[0].rank++] = in[0].dim[in[0].rank - (ax ? 1 : 2)];
  out[0].dim[out[0].rank++] = in[1].dim[in[1].rank - (ay ? 2 : 1)];
  return TD_OK;
}

/* Below this many multiply-adds in all, a batch of products runs on one
 * thread. */
#define PAR_MIN_MACS (1 << 20)

/* Chunks (of *per products each) to split a batch of nb products of `macs`
 * multiply-adds over the engine's pool: 1 (all on the caller, each product
 * then free to split itself) when the batch is too small or has too few
 * products to share out evenly. A product inside a chunk runs on its
 * thread alone. */
static int64_t batch_chunks(int64_t nb, int64_t macs, int64_t *per) {
  int64_t threads = eng_pool_threads(NULL);
  *per = nb;
  if (threads < 2 || nb < 2 * threads || nb * macs < PAR_MIN_MACS) return 1;
  int64_t want = 4 * threads;
  *per = (nb + want - 1) / want;
  return (nb + *per - 1) / *per;
}

/* A BatchMatMul, as the pool's chunks see it: chunk i is products
 * [i * per, (i + 1) * per), their operands found by a broadcast iterator
 * of the chunk's own, advanced from a copy of the initial one. */
typedef struct bmm_args {
  bool ax, ay;
  int64_t m, n, k;
  size_t es;
  const char *ad, *bd;
  char *od;
  int64_t nb, per;
  const eng_bcast *it0;
} bmm_args;

static void bmm_chunk(void *arg, int64_t chunk) {
  const bmm_args *b = arg;
  int64_t m = b->m, n = b->n, k = b->k, i0 = chunk * b->per;
  int64_t i1 = i0 + b->per < b->nb ? i0 + b->per : b->nb;
  eng_bcast it = *b->it0;
  for (int64_t i = 0; i < i0; i++) eng_bcast_next(&it);
  for (int64_t i = i0; i < i1; i++, eng_bcast_next(&it)) {
    const char *pa = b->ad + (size_t)(it.off[0] * m * k) * b->es;
    const char *pb = b->bd + (size_t)(it.off[1] * k * n) * b->es;
    char *po = b->od + (size_t)(i * m * n) * b->es;
    if (b->es == 4)
      gemm_f32(b->ax, b->ay, m, n, k, (const float *)pa, (const float *)pb, (float *)po);
    else
      gemm_f64(b->ax, b->ay, m, n, k, (const double *)pa, (const double *)pb, (double *)po);
  }
}

static td_code batch_matmul(eng_kctx *c, const eng_tensor *a, const eng_tensor *b, bool ax,
                            bool ay, eng_tensor *out) {
  if (a->dtype != b->dtype || (a->dtype != ENG_DT_FLOAT && a->dtype != ENG_DT_DOUBLE))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s x %s products are not supported",
                     eng_dtype_name(a->dtype), eng_dtype_name(b->dtype));
  int ra = a->shape.rank, rb = b->shape.rank;
  if (ra < 2 || rb < 2)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "In[0] and In[1] must be at least rank 2, got %d and %d",
                     ra, rb);
  int64_t m = a->shape.dim[ra - (ax ? 1 : 2)], k = a->shape.dim[ra - (ax ? 2 : 1)];
  int64_t kb = b->shape.dim[rb - (ay ? 1 : 2)], n = b->shape.dim[rb - (ay ? 2 : 1)];
  if (k != kb) {
    char sa[128], sb[128];
    return eng_kfail(c, TD_INVALID_ARGUMENT,
                     "Matrix size-incompatible: In[0]: %s, In[1]: %s",
                     eng_shape_str(&a->shape, sa, sizeof sa), eng_shape_str(&b->shape, sb, sizeof sb));
  }
  eng_shape ba = a->shape, bb = b->shape, bo;
  ba.rank -= 2;
  bb.rank -= 2;
  td_code rc = eng_broadcast_shape(&ba, &bb, &bo, c->err);
  if (rc) return td_err_prefix(c->err, "node '%s' (%s): batch dims", c->node->name, c->node->op);
  if ((rc = check_dims(c, m, n, k))) return rc;
  eng_shape s = bo;
  s.dim[s.rank++] = m;
  s.dim[s.rank++] = n;
  rc = eng_tensor_alloc_raw(out, a->dtype, &s, c->err);
  if (rc) return td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  int64_t nb = eng_shape_numel(&bo);
  const eng_shape *in[2] = {&ba, &bb};
  eng_bcast it;
  eng_bcast_init(&it, &bo, 2, in);
  bmm_args ba_ = {ax, ay, m, n, k, eng_dtype_size(a->dtype), eng_tensor_data(a),
                  eng_tensor_data(b), eng_tensor_data(out), nb, 1, &it};
  int64_t chunks = batch_chunks(nb, m * n * k, &ba_.per);
  if (chunks > 1)
    eng_pool_run(NULL, chunks, bmm_chunk, &ba_);
  else
    bmm_chunk(&ba_, 0);
  return TD_OK;
}

/* A dense layer over all leading dims: A [..., k] times the weight packed
 * at load, [k, n]; the fused epilogue (if any) in registers. */
static td_code batch_matmul_packed(eng_kctx *c) {
  const eng_tensor *a = &c->in[0];
  int64_t k = eng_gemm_k(c->packed), n = eng_gemm_n(c->packed);
  eng_shape s = a->shape;
  s.dim[s.rank - 1] = n;
  td_code rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &s);
  if (rc) return rc;
  int64_t rows = eng_tensor_numel(a) / k;
  if (rows > 0 && n > 0) {
    eng_gemm_epi ge;
    eng_gemm_run(eng_tensor_data(a), k, rows, c->packed, eng_tensor_data(&c->out[0]), n,
                 eng_kgemm_epi(c, &ge));
  }
  return TD_OK;
}

td_code eng_k_batch_matmul(eng_kctx *c) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  bool adj_x = eng_node_attr_bool(c->node, "adj_x", false);
  if (c->packed && !adj_x && a->dtype == ENG_DT_FLOAT && b->dtype == ENG_DT_FLOAT &&
      b->shape.rank == 2 && a->shape.rank >= 2 && a->shape.dim[a->shape.rank - 1] > 0 &&
      a->shape.dim[a->shape.rank - 1] == eng_gemm_k(c->packed))
    return batch_matmul_packed(c);
  if (eng_tensor_hollow(b)) { /* kept only packed (eng_model.h): these shapes cannot use it */
    char sa[64], sb[64];
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Matrix size-incompatible: In[0]: %s, In[1]: %s",
                     eng_shape_str(&a->shape, sa, sizeof sa), eng_shape_str(&b->shape, sb, sizeof sb));
  }
  return batch_matmul(c, a, b, adj_x, eng_node_attr_bool(c->node, "adj_y", false), &c->out[0]);
}

/* --- Einsum ------------------------------------------------------------------- */

/* Permutes x so that its dims come in the order perm (perm[d] = source dim). */
static td_code permute(eng_kctx *c, const eng_tensor *x, const int *perm, eng_tensor *out) {
  int r = x->shape.rank;
  bool ident = true;
  for (int d = 0; d < r; d++) ident &= perm[d] == d;
  if (ident) {
    *out = eng_tensor_share(x);
    return TD_OK;
  }
  int64_t st[ENG_MAX_RANK], sst[ENG_MAX_RANK], dst[ENG_MAX_RANK];
  eng_shape s = {.rank = r};
  eng_contig_strides(&x->shape, st);
  for (int d = 0; d < r; d++) {
    s.dim[d] = x->shape.dim[perm[d]];
    sst[d] = st[perm[d]];
  }
  td_code rc = eng_tensor_alloc_raw(out, x->dtype, &s, c->err);
  if (rc) return td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  eng_contig_strides(&s, dst);
  eng_copy_nd(r, s.dim, eng_dtype_size(x->dtype), eng_tensor_data(x), sst, eng_tensor_data(out),
              dst);
  return TD_OK;
}

/* einsum_in_place's products, as the pool's chunks see them: chunk i is
 * batch indices [i * per, (i + 1) * per) of the odometer over the batch
 * labels (sizes bdim, each tensor's strides st[t]). */
typedef struct ein_args {
  const eng_einsum_gemm *g;
  const float *ad, *bd;
  float *od;
  int64_t per;
} ein_args;

static void ein_chunk(void *arg, int64_t chunk) {
  const ein_args *e = arg;
  const eng_einsum_gemm *g = e->g;
  int64_t i0 = chunk * e->per, i1 = i0 + e->per < g->total ? i0 + e->per : g->total;
  int64_t idx[ENG_MAX_RANK] = {0}, off[3] = {0};
  for (int64_t rem = i0, d = g->nb - 1; d >= 0; d--) { /* the odometer at i0 */
    idx[d] = rem % g->bdim[d];
    rem /= g->bdim[d];
    for (int t = 0; t < 3; t++) off[t] += idx[d] * g->st[t][d];
  }
  for (int64_t it = i0; it < i1; it++) {
    if (g->ta || g->m < 2 ||
        !eng_gemm_dynamic(e->ad + off[0], g->lda, g->m, e->bd + off[1], g->ldb, g->tb, g->k, g->n,
                          e->od + off[2], g->ldc))
      cblas_sgemm(CblasRowMajor, g->ta ? CblasTrans : CblasNoTrans,
                  g->tb ? CblasTrans : CblasNoTrans, (int)g->m, (int)g->n, (int)g->k, 1.0f,
                  e->ad + off[0], (int)g->lda, e->bd + off[1], (int)g->ldb, 0.0f, e->od + off[2],
                  (int)g->ldc);
    for (int d = g->nb - 1; d >= 0; d--) {
      for (int t = 0; t < 3; t++) off[t] += g->st[t][d];
      if (++idx[d] < g->bdim[d]) break;
      for (int t = 0; t < 3; t++) off[t] -= g->st[t][d] * g->bdim[d];
      idx[d] = 0;
    }
  }
}

/* A float Einsum whose operands and output are each a strided matrix per
 * batch index (eng_einsum_in_place): one product per batch index on the
 * tensors in place, without the permuted copies of the general path
 * (attention's "BTNH,BSNH->BNTS" and "BNTS,BSNH->BTNH"). A constant B
 * packed at load (eng_einsum_const_b: no batch labels, A not transposed)
 * runs the packed kernel, the same kernel and summation order as packing
 * it per call. False when the equation is not of that form; otherwise *rc
 * is the result. */
static bool einsum_in_place(eng_kctx *c, const eng_einsum *e, td_code *rc) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  eng_einsum_gemm g;
  if (!eng_einsum_in_place(e, &a->shape, &b->shape, &g)) return false;
  bool packed =
      c->packed && !g.nb && !g.ta && eng_gemm_k(c->packed) == g.k && eng_gemm_n(c->packed) == g.n;
  if (!packed && check_dims(c, g.m, g.n, g.k)) return false;
  if ((*rc = eng_kout_raw(c, 0, ENG_DT_FLOAT, &e->out))) return true;
  const float *ad = eng_tensor_data(a), *bd = eng_tensor_data(b);
  float *od = eng_tensor_data(&c->out[0]);
  *rc = TD_OK;
  if (packed) {
    eng_gemm_epi ge;
    eng_gemm_run(ad, g.lda, g.m, c->packed, od, g.ldc, eng_kgemm_epi(c, &ge));
    return true;
  }
  if (eng_tensor_hollow(b)) {
    *rc = eng_kfail(c, TD_INTERNAL, "the weight is held only in packed form");
    return true;
  }
  ein_args ea = {.g = &g, .ad = ad, .bd = bd, .od = od, .per = 1};
  int64_t chunks = batch_chunks(g.total, g.m * g.n * g.k, &ea.per);
  if (chunks > 1)
    eng_pool_run(NULL, chunks, ein_chunk, &ea);
  else
    ein_chunk(&ea, 0);
  return true;
}

static td_code einsum(eng_kctx *c, const eng_einsum *pe);

td_code eng_k_einsum(eng_kctx *c) {
  const char *eq = eng_attr_str(c->node, "equation", "");
  if (c->n_in != 2) return eng_kfail(c, TD_UNIMPLEMENTED, "Einsum equation '%s' is not supported", eq);
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  eng_einsum e;
  td_code prc = eng_einsum_plan(eq, &a->shape, &b->shape, &e, c->err);
  if (prc && c->err) return td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  if (prc) return prc;
  td_code rc = einsum(c, &e);
  /* A fused epilogue (a dense layer's: eng_einsum_const_b held, so the
   * output's last dims are its n columns) that no packed product took (one
   * that took the ops before a run-time add left the rest to the run loop:
   * epi_part). */
  if (!rc && c->epi && !c->epi_done && !c->epi_part && c->out[0].dtype == ENG_DT_FLOAT && e.n > 0)
    eng_kepilogue(c, eng_tensor_data(&c->out[0]), eng_tensor_numel(&c->out[0]) / e.n, e.n);
  return rc;
}

static td_code einsum(eng_kctx *c, const eng_einsum *pe) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  eng_einsum e = *pe;
  if (a->dtype == ENG_DT_FLOAT && b->dtype == ENG_DT_FLOAT) {
    td_code frc;
    if (einsum_in_place(c, &e, &frc)) return frc;
  }
  if (eng_tensor_hollow(b)) {
    /* Kept only packed (eng_model.h): an empty product reads nothing. */
    if (eng_shape_numel(&e.out) == 0) return eng_kout_raw(c, 0, a->dtype, &e.out);
    return eng_kfail(c, TD_INTERNAL, "the weight is held only in packed form");
  }
  eng_tensor ta = {0}, tb = {0}, prod = {0};
  td_code rc = permute(c, a, e.perm_a, &ta);
  if (!rc) rc = permute(c, b, e.perm_b, &tb);
  if (!rc) {
    /* View as [batch..., m, k] x [batch..., k, n]. */
    int nb = e.n_batch;
    ta.shape.rank = nb + 2;
    tb.shape.rank = nb + 2;
    for (int i = 0; i < nb; i++) ta.shape.dim[i] = tb.shape.dim[i] = e.batch_dim[i];
    ta.shape.dim[nb] = e.m;
    ta.shape.dim[nb + 1] = e.k;
    tb.shape.dim[nb] = e.k;
    tb.shape.dim[nb + 1] = e.n;
    rc = batch_matmul(c, &ta, &tb, false, false, &prod);
  }
  if (!rc) {
    /* prod is [batch..., fa..., fb...]; permute to the output's order. */
    prod.shape = e.prod;
    rc = permute(c, &prod, e.perm_out, &c->out[0]);
  }
  eng_tensor_release(&ta);
  eng_tensor_release(&tb);
  eng_tensor_release(&prod);
  return rc;
}
