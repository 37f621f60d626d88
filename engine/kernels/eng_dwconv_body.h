/* The body of eng_dwconv's vector kernel, included once per instruction set
 * by eng_dwconv.c after it defines:
 *   DW_FN(name)    the function name for this instruction set
 *   DW_TARGET      the target attribute string
 *   DW_W           floats per vector
 *   dw_v, dw_m     vector and lane-mask types
 *   DW_MASK(cw)    mask of the first cw lanes (1 <= cw <= DW_W)
 *   DW_ZERO()      DW_SET1(s)
 *   DW_LOAD(p, m)  masked load, zero in the other lanes (never faults there)
 *   DW_STORE(p, m, v)  masked store
 *   DW_FMA(a, b, c)    a * b + c
 *   DW_EPI(kind, v, k) one epilogue op
 * Not a header of its own: no include guard on purpose. */

/* Eight output pixels of one row side by side. */
#define DW_GROUP 8

__attribute__((target(DW_TARGET))) static inline dw_v DW_FN(epi_k)(const eng_gemm_epi *epi, int i,
                                                                    int64_t cb, dw_m m) {
  return epi->op[i].k ? DW_LOAD(epi->op[i].k + cb, m) : DW_SET1(epi->op[i].s);
}

/* One pixel whose valid taps are rows [i0, i1) and columns [j0, j1) of the
 * window; xo is the input offset of (row of tap i = 0, column of tap j = 0),
 * which may lie outside the image: only valid taps are read. */
__attribute__((target(DW_TARGET))) static inline void DW_FN(pixel)(
    const eng_conv_geom *g, const float *x, int64_t xo, const float *f, int64_t cb, dw_m m,
    int64_t i0, int64_t i1, int64_t j0, int64_t j1, const eng_gemm_epi *epi, float *yp) {
  dw_v acc = DW_ZERO();
  for (int64_t i = i0; i < i1; i++)
    for (int64_t j = j0; j < j1; j++)
      acc = DW_FMA(DW_LOAD(x + xo + (i * g->dh * g->w + j * g->dw) * g->c + cb, m),
                   DW_LOAD(f + (i * g->kw + j) * g->c + cb, m), acc);
  for (int e = 0; epi && e < epi->n; e++)
    acc = DW_EPI(epi->op[e].kind, acc, DW_FN(epi_k)(epi, e, cb, m));
  DW_STORE(yp + cb, m, acc);
}

/* G neighbouring interior pixels of one row side by side (G independent
 * FMA chains; one weight load per tap for the G). xi: input at tap (i0, 0)
 * of the first pixel, xs: step between pixels. Inlined with G constant. */
__attribute__((target(DW_TARGET), always_inline)) static inline void DW_FN(group)(
    const eng_conv_geom *g, const float *xi, int64_t xs, const float *f, int64_t cb, dw_m m,
    int64_t i0, int64_t i1, const eng_gemm_epi *epi, float *yp, const int G) {
  const int64_t c = g->c;
  dw_v acc[DW_GROUP];
  for (int p = 0; p < G; p++) acc[p] = DW_ZERO();
  for (int64_t i = i0; i < i1; i++, xi += g->dh * g->w * c) {
    const float *fi = f + i * g->kw * c + cb;
    for (int64_t j = 0; j < g->kw; j++) {
      dw_v wv = DW_LOAD(fi + j * c, m);
      const float *xj = xi + j * g->dw * c;
      for (int p = 0; p < G; p++) acc[p] = DW_FMA(DW_LOAD(xj + p * xs, m), wv, acc[p]);
    }
  }
  for (int e = 0; epi && e < epi->n; e++) {
    dw_v k = DW_FN(epi_k)(epi, e, cb, m);
    int kind = epi->op[e].kind;
    for (int p = 0; p < G; p++) acc[p] = DW_EPI(kind, acc[p], k);
  }
  for (int p = 0; p < G; p++) DW_STORE(yp + p * c + cb, m, acc[p]);
}

/* 3x3, stride 1, no dilation: two output rows by DW_PX interior pixels at a
 * time, input-stationary. Each of the 4 x (DW_PX + 2) input vectors is
 * loaded once and multiplied into every accumulator whose window holds it,
 * the nine weight vectors stay in registers: about a third of a load per
 * FMA instead of more than one. An accumulator still receives its taps in
 * window order (input rows, then columns, ascending), from zero. Rows oh
 * and oh + 1 lie wholly inside the image; columns [ow0, ow0 + npx). */
__attribute__((target(DW_TARGET))) static void DW_FN(rows2)(const eng_conv_geom *g,
                                                             const float *x, const float *f,
                                                             float *y, const eng_gemm_epi *epi,
                                                             int64_t n, int64_t oh, int64_t ow0,
                                                             int64_t npx) {
  const int64_t c = g->c, ih0 = oh - g->pt;
  for (int64_t cb = 0; cb < c; cb += DW_W) {
    dw_m m = DW_MASK(c - cb < DW_W ? c - cb : DW_W);
    dw_v wv[3][3];
#pragma GCC unroll 3
    for (int i = 0; i < 3; i++)
#pragma GCC unroll 3
      for (int j = 0; j < 3; j++) wv[i][j] = DW_LOAD(f + (i * 3 + j) * c + cb, m);
    for (int64_t ow = ow0; ow < ow0 + npx; ow += DW_PX) {
      dw_v acc[2][DW_PX];
#pragma GCC unroll 2
      for (int o = 0; o < 2; o++)
#pragma GCC unroll 8
        for (int p = 0; p < DW_PX; p++) acc[o][p] = DW_ZERO();
      const float *xb = x + (((n * g->h + ih0) * g->w + ow - g->pl) * c + cb);
#pragma GCC unroll 4
      for (int r = 0; r < 4; r++)
#pragma GCC unroll 10
        for (int q = 0; q < DW_PX + 2; q++) {
          dw_v v = DW_LOAD(xb + (r * g->w + q) * c, m);
#pragma GCC unroll 2
          for (int o = 0; o < 2; o++)
#pragma GCC unroll 8
            for (int p = 0; p < DW_PX; p++) {
              int i = r - o, j = q - p;
              if (i >= 0 && i < 3 && j >= 0 && j < 3) acc[o][p] = DW_FMA(v, wv[i][j], acc[o][p]);
            }
        }
      for (int e = 0; epi && e < epi->n; e++) {
        dw_v k = DW_FN(epi_k)(epi, e, cb, m);
        int kind = epi->op[e].kind;
#pragma GCC unroll 2
        for (int o = 0; o < 2; o++)
#pragma GCC unroll 8
          for (int p = 0; p < DW_PX; p++) acc[o][p] = DW_EPI(kind, acc[o][p], k);
      }
#pragma GCC unroll 2
      for (int o = 0; o < 2; o++)
#pragma GCC unroll 8
        for (int p = 0; p < DW_PX; p++)
          DW_STORE(y + (((n * g->oh + oh + o) * g->ow + ow + p) * c + cb), m, acc[o][p]);
    }
  }
}

/* Output row oh of image n, all but the interior columns [lo, from) (which
 * the two-row kernel has done when from > lo). */
__attribute__((target(DW_TARGET))) static void DW_FN(row)(const eng_conv_geom *g, const float *x,
                                                           const float *f, float *y,
                                                           const eng_gemm_epi *epi, int64_t lo,
                                                           int64_t hi, int64_t n, int64_t oh,
                                                           int64_t from) {
  const int64_t c = g->c, xs = g->sw * c; /* input step between neighbouring pixels */
  int64_t ih0 = oh * g->sh - g->pt;
  int64_t i0 = ih0 >= 0 ? 0 : (-ih0 + g->dh - 1) / g->dh;
  int64_t i1 = ih0 > g->h - 1 ? 0 : (g->h - 1 - ih0) / g->dh + 1;
  if (i1 > g->kh) i1 = g->kh;
  if (i1 < i0) i1 = i0;
  /* Input offset of (row ih0, column of output 0's tap j = 0). */
  int64_t xrow = ((n * g->h + ih0) * g->w - g->pl) * c;
  float *yrow = y + (n * g->oh + oh) * g->ow * c;
  for (int64_t cb = 0; cb < c; cb += DW_W) {
    dw_m m = DW_MASK(c - cb < DW_W ? c - cb : DW_W);
    int64_t ow = 0;
    for (; ow < lo; ow++) {
      int64_t iw0 = ow * g->sw - g->pl;
      int64_t j0 = iw0 >= 0 ? 0 : (-iw0 + g->dw - 1) / g->dw;
      int64_t j1 = iw0 > g->w - 1 ? 0 : (g->w - 1 - iw0) / g->dw + 1;
      if (j1 > g->kw) j1 = g->kw;
      if (j1 < j0) j1 = j0;
      DW_FN(pixel)(g, x, xrow + ow * xs, f, cb, m, i0, i1, j0, j1, epi, yrow + ow * c);
    }
    if (from > ow) ow = from;
    /* Interior pixels eight at a time, the rest four, two, one. */
    for (; ow + DW_GROUP <= hi; ow += DW_GROUP)
      DW_FN(group)(g, x + (xrow + ow * xs + i0 * g->dh * g->w * c + cb), xs, f, cb, m, i0, i1,
                   epi, yrow + ow * c, DW_GROUP);
    if (ow + 4 <= hi) {
      DW_FN(group)(g, x + (xrow + ow * xs + i0 * g->dh * g->w * c + cb), xs, f, cb, m, i0, i1,
                   epi, yrow + ow * c, 4);
      ow += 4;
    }
    if (ow + 2 <= hi) {
      DW_FN(group)(g, x + (xrow + ow * xs + i0 * g->dh * g->w * c + cb), xs, f, cb, m, i0, i1,
                   epi, yrow + ow * c, 2);
      ow += 2;
    }
    if (ow < hi) {
      DW_FN(group)(g, x + (xrow + ow * xs + i0 * g->dh * g->w * c + cb), xs, f, cb, m, i0, i1,
                   epi, yrow + ow * c, 1);
      ow++;
    }
    for (; ow < g->ow; ow++) {
      int64_t iw0 = ow * g->sw - g->pl;
      int64_t j1 = iw0 > g->w - 1 ? 0 : (g->w - 1 - iw0) / g->dw + 1;
      if (j1 > g->kw) j1 = g->kw;
      /* ow >= lo, so the window starts inside the image. */
      DW_FN(pixel)(g, x, xrow + ow * xs, f, cb, m, i0, i1, 0, j1, epi, yrow + ow * c);
    }
  }
}

/* Output rows [q0, q1) of the n * oh rows of all images. */
__attribute__((target(DW_TARGET))) static void DW_FN(dw)(const eng_conv_geom *g, const float *x,
                                                          const float *f, float *y,
                                                          const eng_gemm_epi *epi, int64_t q0,
                                                          int64_t q1) {
  /* Output columns whose whole window lies inside the input: [lo, hi). */
  int64_t lo = (g->pl + g->sw - 1) / g->sw, span = (g->kw - 1) * g->dw;
  int64_t hi = g->w - 1 + g->pl - span < 0 ? 0 : (g->w - 1 + g->pl - span) / g->sw + 1;
  if (lo > g->ow) lo = g->ow;
  if (hi > g->ow) hi = g->ow;
  if (hi < lo) hi = lo;
  bool k3s1 = g->kh == 3 && g->kw == 3 && g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1;
  int64_t npx = (hi - lo) / DW_PX * DW_PX; /* interior columns for the two-row kernel */
  for (int64_t q = q0; q < q1;) {
    int64_t n = q / g->oh, oh = q % g->oh;
    int64_t ih0 = oh - g->pt; /* stride 1 when k3s1 */
    if (k3s1 && npx > 0 && oh + 1 < g->oh && q + 1 < q1 && ih0 >= 0 && ih0 + 3 <= g->h - 1) {
      /* Rows oh and oh + 1 both lie wholly inside the image. */
      DW_FN(rows2)(g, x, f, y, epi, n, oh, lo, npx);
      DW_FN(row)(g, x, f, y, epi, lo, hi, n, oh, lo + npx);
      DW_FN(row)(g, x, f, y, epi, lo, hi, n, oh + 1, lo + npx);
      q += 2;
    } else {
      DW_FN(row)(g, x, f, y, epi, lo, hi, n, oh, lo);
      q++;
    }
  }
}

#undef DW_GROUP
