/* The epilogue's arithmetic (see eng_epilogue.h). */
#include "eng_epilogue.h"

#include "eng_gemm.h"
#include "eng_vmath.h"

static void epilogue_rows(const eng_epilogue *e, float *restrict y, int64_t n, int64_t c) {
  const float *kp[ENG_EPI_MAX];
  bool scalar[ENG_EPI_MAX];
  for (int i = 0; i < e->n; i++) {
    kp[i] = e->op[i].k.buf ? eng_tensor_data(&e->op[i].k) : NULL;
    scalar[i] = kp[i] && eng_tensor_numel(&e->op[i].k) == 1;
  }
  /* Row by row (one pixel's or one example's channels), all ops on a row
   * while it is in L1. */
  for (int64_t r = 0; r < n; r += c) {
    float *restrict row = y + r;
    for (int i = 0; i < e->n; i++) {
      int kind = e->op[i].kind;
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

void eng_epilogue_apply(const eng_epilogue *e, eng_tensor *t) {
  if (!e->n) return; /* a Reshape's: it only renames the value */
  int64_t n = eng_tensor_numel(t), c = t->shape.rank ? t->shape.dim[t->shape.rank - 1] : 1;
  if (n > 0 && c > 0) epilogue_rows(e, eng_tensor_data(t), n, c);
}

const eng_gemm_epi *eng_kgemm_epi(eng_kctx *c, eng_gemm_epi *buf) {
  const eng_epilogue *e = c->epi;
  if (!e) return NULL;
  static const int kinds[] = {
      [EPI_ADD] = ENG_GEMM_ADD,   [EPI_SUB] = ENG_GEMM_SUB,     [EPI_MUL] = ENG_GEMM_MUL,
      [EPI_RELU] = ENG_GEMM_RELU, [EPI_RELU6] = ENG_GEMM_RELU6, [EPI_SWISH] = ENG_GEMM_SWISH,
      [EPI_GELU_TANH] = ENG_GEMM_GELU_TANH, [EPI_GELU_ERFC] = ENG_GEMM_GELU_ERFC};
  /* The leading multiply is already in weights packed prescaled. */
  int skip = c->packed && eng_gemm_prescaled(c->packed) ? 1 : 0;
  buf->n = e->n - skip;
  for (int i = 0; i < buf->n; i++) {
    const eng_tensor *k = &e->op[i + skip].k;
    buf->op[i].kind = kinds[e->op[i + skip].kind];
    buf->op[i].k = NULL;
    buf->op[i].s = e->op[i + skip].kind == EPI_SWISH ? 1.0f : 0.0f; /* swish's beta */
    if (e->op[i + skip].kind == EPI_GELU_TANH || e->op[i + skip].kind == EPI_GELU_ERFC)
      buf->op[i].k = e->op[i + skip].c;
    if (k->buf && eng_tensor_numel(k) == 1)
      buf->op[i].s = *(const float *)eng_tensor_data(k);
    else if (k->buf)
      buf->op[i].k = eng_tensor_data(k); /* one per channel: checked when fused */
  }
  c->epi_done = true;
  return buf;
}

void eng_kepilogue(eng_kctx *c, float *y, int64_t rows, int64_t ch) {
  if (!c->epi) return;
  if (rows > 0 && ch > 0) epilogue_rows(c->epi, y, rows * ch, ch);
  c->epi_done = true;
}
