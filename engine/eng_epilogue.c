/* The epilogue's arithmetic (see eng_epilogue.h). */
#include "eng_epilogue.h"

#include "eng_gemm.h"
#include "eng_kernels.h"
#include "eng_model.h"
#include "eng_vmath.h"

/* Ops [i0, i1) of e over n floats of rows of c at y; add: the
 * EPI_ADD_VALUE operand's floats laid out as y's (or NULL). */
static void epilogue_rows(const eng_epilogue *e, int i0, int i1, float *restrict y,
                          const float *add, int64_t n, int64_t c) {
  const float *kp[ENG_EPI_MAX];
  bool scalar[ENG_EPI_MAX];
  for (int i = i0; i < i1; i++) {
    kp[i] = e->op[i].k.buf ? eng_tensor_data(&e->op[i].k) : NULL;
    scalar[i] = kp[i] && eng_tensor_numel(&e->op[i].k) == 1;
  }
  /* Row by row (one pixel's or one example's channels), all ops on a row
   * while it is in L1. */
  for (int64_t r = 0; r < n; r += c) {
    float *restrict row = y + r;
    for (int i = i0; i < i1; i++) {
      int kind = e->op[i].kind;
      if (kind == EPI_ADD_VALUE) {
        const float *restrict ar = add + r;
        for (int64_t j = 0; j < c; j++) row[j] = row[j] + ar[j];
        continue;
      }
      if (kind == EPI_RELU) {
        for (int64_t j = 0; j < c; j++) row[j] = row[j] > 0 ? row[j] : 0;
        continue;
      }
      if (kind == EPI_RELU6) {
        for (int64_t j = 0; j < c; j++) row[j] = row[j] > 0 ? (row[j] < 6 ? row[j] : 6) : 0;
        continue;
      }
      if (kind == EPI_SWISH) {
        float beta = kp[i] ? kp[i][0] : 1.0f, t[256];
        for (int64_t j0 = 0; j0 < c; j0 += 256) {
          int64_t w = c - j0 < 256 ? c - j0 : 256;
          for (int64_t j = 0; j < w; j++) t[j] = row[j0 + j] * beta;
          eng_vmath_sigmoid(t, t, w);
          for (int64_t j = 0; j < w; j++) row[j0 + j] = row[j0 + j] * t[j];
        }
        continue;
      }
      if (kind == EPI_GELU_TANH) {
        const float *gc = e->op[i].c;
        float t[256];
        for (int64_t j0 = 0; j0 < c; j0 += 256) {
          int64_t w = c - j0 < 256 ? c - j0 : 256;
          float *restrict x = row + j0;
          eng_vmath_powi(x, t, w, 3);
          for (int64_t j = 0; j < w; j++) t[j] = t[j] * gc[0];
          for (int64_t j = 0; j < w; j++) t[j] = x[j] + t[j];
          for (int64_t j = 0; j < w; j++) t[j] = t[j] * gc[1];
          eng_vmath_tanh(t, t, w);
          for (int64_t j = 0; j < w; j++) t[j] = t[j] + gc[2];
          for (int64_t j = 0; j < w; j++) x[j] = (x[j] * gc[3]) * t[j];
        }
        continue;
      }
      if (kind == EPI_GELU_ERFC) {
        const float *gc = e->op[i].c;
        float t[256];
        for (int64_t j0 = 0; j0 < c; j0 += 256) {
          int64_t w = c - j0 < 256 ? c - j0 : 256;
          float *restrict x = row + j0;
          for (int64_t j = 0; j < w; j++) t[j] = -x[j];
          for (int64_t j = 0; j < w; j++) t[j] = t[j] * gc[0];
          eng_vmath_erfc(t, t, w);
          for (int64_t j = 0; j < w; j++) x[j] = (x[j] * gc[1]) * t[j];
        }
        continue;
      }
      const float *restrict k = kp[i];
      if (scalar[i]) {
        float v = k[0];
        if (kind == EPI_ADD) for (int64_t j = 0; j < c; j++) row[j] = row[j] + v;
        else if (kind == EPI_SUB) for (int64_t j = 0; j < c; j++) row[j] = row[j] - v;
        else for (int64_t j = 0; j < c; j++) row[j] = row[j] * v;
      } else {
        if (kind == EPI_ADD) for (int64_t j = 0; j < c; j++) row[j] = row[j] + k[j];
        else if (kind == EPI_SUB) for (int64_t j = 0; j < c; j++) row[j] = row[j] - k[j];
        else for (int64_t j = 0; j < c; j++) row[j] = row[j] * k[j];
      }
    }
  }
}

/* The index of e's EPI_ADD_VALUE op, or -1. */
static int add_at(const eng_epilogue *e) {
  for (int i = 0; i < e->n; i++)
    if (e->op[i].kind == EPI_ADD_VALUE) return i;
  return -1;
}

int eng_epilogue_input(const eng_epilogue *e) { return e && add_at(e) >= 0 ? e->in_value : -1; }

/* Whether the operand can be added element for element to y. */
static bool add_fits(const eng_tensor *add, const eng_tensor *y) {
  return add && add->buf && y->buf && add->dtype == ENG_DT_FLOAT && y->dtype == ENG_DT_FLOAT &&
         eng_shape_equal(&add->shape, &y->shape);
}

static void apply_ops(const eng_epilogue *e, int i0, int i1, eng_tensor *t, const eng_tensor *add) {
  int64_t n = eng_tensor_numel(t), c = t->shape.rank ? t->shape.dim[t->shape.rank - 1] : 1;
  if (n > 0 && c > 0 && i0 < i1)
    epilogue_rows(e, i0, i1, eng_tensor_data(t), add ? eng_tensor_data(add) : NULL, n, c);
}

void eng_epilogue_apply(const eng_epilogue *e, eng_tensor *t, const eng_tensor *add) {
  apply_ops(e, 0, e->n, t, add); /* n 0: a Reshape's, which only renames the value */
}

td_code eng_epilogue_after(eng_kctx *c) {
  const eng_epilogue *e = c->epi;
  int at = add_at(e);
  if (at < 0 || add_fits(c->epi_in, &c->out[0])) {
    eng_epilogue_apply(e, &c->out[0], at < 0 ? NULL : c->epi_in);
    return TD_OK;
  }
  if (!c->epi_in || !c->epi_in->buf)
    return td_err_set(c->err, TD_INTERNAL, "node '%s': the fused add's operand was not computed",
                      c->node->name);
  apply_ops(e, c->epi_part, at, &c->out[0], NULL);
  eng_tensor ab[2] = {c->out[0], *c->epi_in}, sum = {0};
  eng_kctx k = *c;
  k.node = eng_graph_node(eng_model_graph(c->model), e->in_node);
  k.node_id = e->in_node;
  k.n_in = 2;
  k.in = ab;
  k.n_out = 1;
  k.out = &sum;
  k.epi = NULL;
  k.epi_in = NULL;
  td_code rc = eng_k_add(&k);
  if (rc) return rc;
  eng_tensor_release(&c->out[0]);
  c->out[0] = sum;
  if (sum.dtype == ENG_DT_FLOAT) apply_ops(e, at + 1, e->n, &c->out[0], NULL);
  return TD_OK;
}

/* For a kernel with an epilogue: the end of the ops it applies, all of
 * them (marked epi_done), or those before an EPI_ADD_VALUE operand not of
 * out[0]'s shape and dtype (marked epi_part: the run loop does the rest). */
static int kernel_ops_end(eng_kctx *c) {
  int at = add_at(c->epi);
  if (at >= 0 && !add_fits(c->epi_in, &c->out[0])) {
    c->epi_part = at;
    return at;
  }
  c->epi_done = true;
  return c->epi->n;
}

/* The ops a kernel applies row by row (eng_kepilogue_take), from the first
 * or, for weights packed prescaled, after the leading multiply they hold. */
static void take_ops(eng_kctx *c, eng_kepi *r, bool after_prescaled) {
  *r = (eng_kepi){.e = c->epi};
  if (!c->epi) return;
  r->to = kernel_ops_end(c);
  r->from = after_prescaled && c->packed && eng_gemm_prescaled(c->packed) ? 1 : 0;
  if (r->from > r->to) r->from = r->to;
  if (r->to == c->epi->n && add_at(c->epi) >= 0) {
    r->add = eng_tensor_data(c->epi_in);
    r->out = eng_tensor_data(&c->out[0]);
  }
}

const eng_gemm_epi *eng_kgemm_epi(eng_kctx *c, eng_gemm_epi *buf) {
  const eng_epilogue *e = c->epi;
  if (!e) return NULL;
  /* An operand that does not fit: the ops before it only (the run loop
   * does the rest), as a leading multiply may be in the packed weights. */
  int upto = kernel_ops_end(c);
  static const int kinds[] = {[EPI_ADD] = ENG_GEMM_ADD,
                              [EPI_SUB] = ENG_GEMM_SUB,
                              [EPI_MUL] = ENG_GEMM_MUL,
                              [EPI_RELU] = ENG_GEMM_RELU,
                              [EPI_RELU6] = ENG_GEMM_RELU6,
                              [EPI_SWISH] = ENG_GEMM_SWISH,
                              [EPI_GELU_TANH] = ENG_GEMM_GELU_TANH,
                              [EPI_GELU_ERFC] = ENG_GEMM_GELU_ERFC,
                              [EPI_ADD_VALUE] = ENG_GEMM_ADD_AT};
  /* The leading multiply is already in weights packed prescaled. */
  int skip = c->packed && eng_gemm_prescaled(c->packed) ? 1 : 0;
  buf->n = upto - skip;
  for (int i = 0; i < buf->n; i++) {
    const eng_tensor *k = &e->op[i + skip].k;
    buf->op[i].kind = kinds[e->op[i + skip].kind];
    buf->op[i].k = NULL;
    buf->op[i].s = e->op[i + skip].kind == EPI_SWISH ? 1.0f : 0.0f; /* swish's beta */
    buf->op[i].off = 0;
    if (e->op[i + skip].kind == EPI_ADD_VALUE) /* the operand beside out[0], byte for byte */
      buf->op[i].off = (intptr_t)eng_tensor_data(c->epi_in) - (intptr_t)eng_tensor_data(&c->out[0]);
    if (e->op[i + skip].kind == EPI_GELU_TANH || e->op[i + skip].kind == EPI_GELU_ERFC)
      buf->op[i].k = e->op[i + skip].c;
    if (k->buf && eng_tensor_numel(k) == 1)
      buf->op[i].s = *(const float *)eng_tensor_data(k);
    else if (k->buf)
      buf->op[i].k = eng_tensor_data(k); /* one per channel: checked when fused */
  }
  return buf;
}

void eng_kepilogue_take(eng_kctx *c, eng_kepi *r) { take_ops(c, r, true); }

void eng_kepilogue_rows(const eng_kepi *r, float *y, int64_t rows, int64_t ch) {
  if (!r->e || r->from >= r->to || rows <= 0 || ch <= 0) return;
  epilogue_rows(r->e, r->from, r->to, y, r->add ? r->add + (y - r->out) : NULL, rows * ch, ch);
}

void eng_kepilogue(eng_kctx *c, float *y, int64_t rows, int64_t ch) {
  eng_kepi r; /* from the first op: the caller's weights were not prescaled */
  take_ops(c, &r, false);
  eng_kepilogue_rows(&r, y, rows, ch);
}
