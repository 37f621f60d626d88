/* The body of eng_dwconv's vector kernel, included once per instruction set
 * by eng_dwconv.c after it defines:
 *   DW_FN(name)    the function name for this instruction set
 *   DW_TARGET      the target attribute string
 *   DW_W           floats per vector
 *   DW_PX          pixels per row of the 3x3 two-row kernel
 *   DW_WHELD       1: that kernel holds all nine weights in registers
 *   DW_NB          channel blocks side by side in the one-row kernel
 *   DW_EB          channel blocks side by side at pixels in the padding
 *   dw_v, dw_m     vector and lane-mask types
 *   DW_MASK(cw)    mask of the first cw lanes (0 <= cw <= DW_W)
 *   DW_ZERO()      DW_SET1(s)
 *   DW_LOAD(p, m)  masked load, zero in the other lanes (never faults there)
 *   DW_STORE(p, m, v)  masked store
 *   DW_LOADU(p), DW_STOREU(p, v)  the same on all DW_W lanes
 *   DW_FMA(a, b, c)    a * b + c
 *   DW_EPI(kind, v, k) one epilogue op
 * Not a header of its own: no include guard on purpose. */

/* Eight output pixels of one row side by side. */
#define DW_GROUP 8

/* Loads and stores of one channel block where `full` (a constant once
 * inlined) says whether all DW_W lanes are channels, and m is the mask when
 * they are not: plain moves on full blocks, masked ones on the last. */
#define DW_LD(p) (full ? DW_LOADU(p) : DW_LOAD((p), m))
#define DW_ST(p, v) (full ? DW_STOREU((p), (v)) : DW_STORE((p), m, (v)))

__attribute__((target(DW_TARGET))) static inline dw_v DW_FN(epi_k)(const eng_gemm_epi *epi, int i,
                                                                    int64_t cb, dw_m m) {
  return epi->op[i].k ? DW_LOAD(epi->op[i].k + cb, m) : DW_SET1(epi->op[i].s);
}

/* G neighbouring interior pixels of one row side by side, in NB channel
 * blocks (G x NB independent FMA chains; one weight load per tap and block
 * for the G). xi: input at tap (i0, 0) of the first pixel and block cb, xs:
 * step between pixels. Inlined with G, NB and full constant; NB > 1 only
 * with full blocks. */
__attribute__((target(DW_TARGET), always_inline)) static inline void DW_FN(group)(
    const eng_conv_geom *g, const float *xi, int64_t xs, const float *f, int64_t cb, dw_m m,
    int64_t i0, int64_t i1, const eng_gemm_epi *epi, float *yp, const int G, const int NB,
    const bool full) {
  const int64_t c = g->c;
  dw_v acc[DW_NB][DW_GROUP];
  for (int b = 0; b < NB; b++)
    for (int p = 0; p < G; p++) acc[b][p] = DW_ZERO();
  for (int64_t i = i0; i < i1; i++, xi += g->dh * g->w * c) {
    const float *fi = f + i * g->kw * c + cb;
    for (int64_t j = 0; j < g->kw; j++) {
      const float *xj = xi + j * g->dw * c;
      for (int b = 0; b < NB; b++) {
        dw_v wv = DW_LD(fi + j * c + b * DW_W);
        for (int p = 0; p < G; p++)
          acc[b][p] = DW_FMA(DW_LD(xj + p * xs + b * DW_W), wv, acc[b][p]);
      }
    }
  }
  for (int e = 0; epi && e < epi->n; e++) {
    int kind = epi->op[e].kind;
    for (int b = 0; b < NB; b++) {
      dw_v k = DW_FN(epi_k)(epi, e, cb + b * DW_W, m);
      for (int p = 0; p < G; p++) acc[b][p] = DW_EPI(kind, acc[b][p], k);
    }
  }
  for (int b = 0; b < NB; b++)
    for (int p = 0; p < G; p++) DW_ST(yp + p * c + cb + b * DW_W, acc[b][p]);
}

/* DW_GROUP neighbouring interior pixels of one row, weights stationary per
 * window row: for each row of the window its KW weight vectors are loaded
 * once, then the (DW_GROUP - 1) * S + KW input vectors the pixels' windows
 * span in that row are each loaded once and multiplied into every
 * accumulator whose window holds them (column stride S, no column
 * dilation). An accumulator still receives its taps in window order, from
 * zero, as in group. Inlined with KW, S and full constant. */
__attribute__((target(DW_TARGET), always_inline)) static inline void DW_FN(wrow)(
    const eng_conv_geom *g, const float *xi, const float *f, int64_t cb, dw_m m, int64_t i0,
    int64_t i1, const eng_gemm_epi *epi, float *yp, const int KW, const int S, const bool full) {
  const int64_t c = g->c;
  dw_v acc[DW_GROUP];
#pragma GCC unroll 8
  for (int p = 0; p < DW_GROUP; p++) acc[p] = DW_ZERO();
  for (int64_t i = i0; i < i1; i++, xi += g->dh * g->w * c) {
    const float *fi = f + i * KW * c + cb;
    dw_v wv[5];
#pragma GCC unroll 5
    for (int j = 0; j < KW; j++) wv[j] = DW_LD(fi + j * c);
#pragma GCC unroll 20
    for (int q = 0; q < (DW_GROUP - 1) * S + KW; q++) {
      dw_v v = DW_LD(xi + q * c);
#pragma GCC unroll 8
      for (int p = 0; p < DW_GROUP; p++) {
        int j = q - p * S;
        if (j >= 0 && j < KW) acc[p] = DW_FMA(v, wv[j], acc[p]);
      }
    }
  }
  for (int e = 0; epi && e < epi->n; e++) {
    dw_v k = DW_FN(epi_k)(epi, e, cb, m);
    int kind = epi->op[e].kind;
#pragma GCC unroll 8
    for (int p = 0; p < DW_GROUP; p++) acc[p] = DW_EPI(kind, acc[p], k);
  }
#pragma GCC unroll 8
  for (int p = 0; p < DW_GROUP; p++) DW_ST(yp + p * c + cb, acc[p]);
}

/* Whether wrow suits g's window: 3 or 5 wide, column stride 1 or 2, no
 * column dilation. */
static inline bool DW_FN(wrow_fits)(const eng_conv_geom *g) {
  return g->dw == 1 && (g->kw == 3 || g->kw == 5) && (g->sw == 1 || g->sw == 2);
}

/* wrow for one block of channels, with g's window as constants (g fits). */
__attribute__((target(DW_TARGET), always_inline)) static inline void DW_FN(wrow_any)(
    const eng_conv_geom *g, const float *xi, const float *f, int64_t cb, dw_m m, int64_t i0,
    int64_t i1, const eng_gemm_epi *epi, float *yp, const bool full) {
  if (g->kw == 3 && g->sw == 1)
    DW_FN(wrow)(g, xi, f, cb, m, i0, i1, epi, yp, 3, 1, full);
  else if (g->kw == 3)
    DW_FN(wrow)(g, xi, f, cb, m, i0, i1, epi, yp, 3, 2, full);
  else if (g->sw == 1)
    DW_FN(wrow)(g, xi, f, cb, m, i0, i1, epi, yp, 5, 1, full);
  else
    DW_FN(wrow)(g, xi, f, cb, m, i0, i1, epi, yp, 5, 2, full);
}

/* 3x3, stride 1, no dilation: two output rows by DW_PX interior pixels at a
 * time, input-stationary. Each of the 4 x (DW_PX + 2) input vectors is
 * loaded once and multiplied into every accumulator whose window holds it:
 * about a third of a load per FMA instead of more than one. With
 * DW_WHELD the nine weight vectors stay in registers for the whole call;
 * without (AVX2: 16 registers hold the 2 x 4 accumulators but not the
 * weights too), each input row loads the weight rows its accumulators meet
 * (at most two of three, from L1). An accumulator still receives its taps
 * in window order (input rows, then columns, ascending), from zero. Rows oh
 * and oh + 1 lie wholly inside the image; columns [ow0, ow0 + npx). */
__attribute__((target(DW_TARGET), always_inline)) static inline void DW_FN(rows2_block)(
    const eng_conv_geom *g, const float *x, const float *f, float *y, const eng_gemm_epi *epi,
    int64_t n, int64_t oh, int64_t ow0, int64_t npx, int64_t cb, dw_m m, const bool full) {
  /* The geometry in locals: the vector stores may alias anything, g
   * included, and would make the compiler read its fields again. */
  const int64_t c = g->c, rs = g->w * c;
  const float *xb = x + ((n * g->h + oh - g->pt) * g->w + ow0 - g->pl) * c + cb;
  float *y0 = y + ((n * g->oh + oh) * g->ow + ow0) * c + cb, *y1 = y0 + g->ow * c;
  /* The weights of this channel block side by side, so that a load is a
   * constant offset from wb. */
  float wb[9][DW_W] __attribute__((aligned(64)));
#pragma GCC unroll 9
  for (int t = 0; t < 9; t++) DW_STOREU(wb[t], DW_LD(f + t * c + cb));
  dw_v wv[3][3];
#if DW_WHELD
#pragma GCC unroll 3
  for (int i = 0; i < 3; i++)
#pragma GCC unroll 3
    for (int j = 0; j < 3; j++) wv[i][j] = DW_LOADU(wb[i * 3 + j]);
#endif
  for (int64_t k = 0; k < npx; k += DW_PX, xb += DW_PX * c, y0 += DW_PX * c, y1 += DW_PX * c) {
    dw_v acc[2][DW_PX];
#pragma GCC unroll 2
    for (int o = 0; o < 2; o++)
#pragma GCC unroll 8
      for (int p = 0; p < DW_PX; p++) acc[o][p] = DW_ZERO();
    const float *xr = xb;
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++, xr += rs) {
#if !DW_WHELD
#pragma GCC unroll 2
      for (int o = 0; o < 2; o++)
        if (r - o >= 0 && r - o < 3)
#pragma GCC unroll 3
          for (int j = 0; j < 3; j++) wv[r - o][j] = DW_LOADU(wb[(r - o) * 3 + j]);
#endif
      const float *xq = xr;
#pragma GCC unroll 10
      for (int q = 0; q < DW_PX + 2; q++, xq += c) {
        dw_v v = DW_LD(xq);
#pragma GCC unroll 2
        for (int o = 0; o < 2; o++)
#pragma GCC unroll 8
          for (int p = 0; p < DW_PX; p++) {
            int i = r - o, j = q - p;
            if (i >= 0 && i < 3 && j >= 0 && j < 3) acc[o][p] = DW_FMA(v, wv[i][j], acc[o][p]);
          }
      }
    }
    for (int e = 0; epi && e < epi->n; e++) {
      dw_v kv = DW_FN(epi_k)(epi, e, cb, m);
      int kind = epi->op[e].kind;
#pragma GCC unroll 2
      for (int o = 0; o < 2; o++)
#pragma GCC unroll 8
        for (int p = 0; p < DW_PX; p++) acc[o][p] = DW_EPI(kind, acc[o][p], kv);
    }
#pragma GCC unroll 8
    for (int p = 0; p < DW_PX; p++) {
      DW_ST(y0 + p * c, acc[0][p]);
      DW_ST(y1 + p * c, acc[1][p]);
    }
  }
}

__attribute__((target(DW_TARGET))) static void DW_FN(rows2)(const eng_conv_geom *g,
                                                             const float *x, const float *f,
                                                             float *y, const eng_gemm_epi *epi,
                                                             int64_t n, int64_t oh, int64_t ow0,
                                                             int64_t npx) {
  for (int64_t cb = 0; cb < g->c; cb += DW_W)
    if (g->c - cb >= DW_W)
      DW_FN(rows2_block)(g, x, f, y, epi, n, oh, ow0, npx, cb, DW_MASK(DW_W), true);
    else
      DW_FN(rows2_block)(g, x, f, y, epi, n, oh, ow0, npx, cb, DW_MASK(g->c - cb), false);
}

/* NB channel blocks from cb of one pixel whose window reaches into the
 * padding: NB independent FMA chains over its valid taps, rows [i0, i1) and
 * columns [j0, j1) of the window. xp: input at (row of tap i = 0, column of
 * tap j = 0) and channel cb, which may lie outside the image: only valid
 * taps are read; rs, cs: input steps between window rows and columns.
 * Inlined with NB and full constant; !full masks every block (lanes past c
 * off). */
__attribute__((target(DW_TARGET), always_inline)) static inline void DW_FN(edge_blocks)(
    const float *xp, const float *fp, int64_t rs, int64_t cs, int64_t kw, int64_t c, int64_t cb,
    int64_t i0, int64_t i1, int64_t j0, int64_t j1, const eng_gemm_epi *epi, float *yp,
    const int NB, const bool full) {
  dw_m m[DW_EB];
  dw_v acc[DW_EB];
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++) {
    int64_t left = c - cb - b * DW_W;
    m[b] = DW_MASK(left <= 0 ? 0 : left < DW_W ? left : DW_W);
    acc[b] = DW_ZERO();
  }
  for (int64_t i = i0; i < i1; i++)
    for (int64_t j = j0; j < j1; j++) {
      const float *xt = xp + i * rs + j * cs, *ft = fp + (i * kw + j) * c;
#pragma GCC unroll 8
      for (int b = 0; b < NB; b++)
        acc[b] = full ? DW_FMA(DW_LOADU(xt + b * DW_W), DW_LOADU(ft + b * DW_W), acc[b])
                      : DW_FMA(DW_LOAD(xt + b * DW_W, m[b]), DW_LOAD(ft + b * DW_W, m[b]), acc[b]);
    }
  for (int e = 0; epi && e < epi->n; e++) {
    int kind = epi->op[e].kind;
#pragma GCC unroll 8
    for (int b = 0; b < NB; b++)
      acc[b] = DW_EPI(kind, acc[b], DW_FN(epi_k)(epi, e, cb + b * DW_W, m[b]));
  }
#pragma GCC unroll 8
  for (int b = 0; b < NB; b++)
    if (full)
      DW_STOREU(yp + b * DW_W, acc[b]);
    else
      DW_STORE(yp + b * DW_W, m[b], acc[b]);
}

/* One pixel whose window reaches into the padding, over every channel:
 * DW_EB channel blocks side by side (a single FMA chain would wait on the
 * FMA latency at every tap; two FMA units of four cycles' latency want
 * eight chains), the channels left over four blocks at a time, the last
 * four masked. xo is the input offset of (row of tap i = 0, column of tap
 * j = 0). */
__attribute__((target(DW_TARGET))) static void DW_FN(edge)(
    const eng_conv_geom *g, const float *x, int64_t xo, const float *f, int64_t i0, int64_t i1,
    int64_t j0, int64_t j1, const eng_gemm_epi *epi, float *yp) {
  const int64_t c = g->c, rs = g->dh * g->w * c, cs = g->dw * c, kw = g->kw;
  int64_t cb = 0;
  for (; c - cb >= DW_EB * DW_W; cb += DW_EB * DW_W)
    DW_FN(edge_blocks)(x + xo + cb, f + cb, rs, cs, kw, c, cb, i0, i1, j0, j1, epi, yp + cb,
                       DW_EB, true);
  for (; c - cb >= 4 * DW_W; cb += 4 * DW_W)
    DW_FN(edge_blocks)(x + xo + cb, f + cb, rs, cs, kw, c, cb, i0, i1, j0, j1, epi, yp + cb, 4,
                       true);
  if (cb < c)
    DW_FN(edge_blocks)(x + xo + cb, f + cb, rs, cs, kw, c, cb, i0, i1, j0, j1, epi, yp + cb, 4,
                       false);
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
  for (int64_t ow = 0; ow < lo; ow++) {
    int64_t iw0 = ow * g->sw - g->pl;
    int64_t j0 = iw0 >= 0 ? 0 : (-iw0 + g->dw - 1) / g->dw;
    int64_t j1 = iw0 > g->w - 1 ? 0 : (g->w - 1 - iw0) / g->dw + 1;
    if (j1 > g->kw) j1 = g->kw;
    if (j1 < j0) j1 = j0;
    DW_FN(edge)(g, x, xrow + ow * xs, f, i0, i1, j0, j1, epi, yrow + ow * c);
  }
  for (int64_t ow = hi > lo ? hi : lo; ow < g->ow; ow++) {
    int64_t iw0 = ow * g->sw - g->pl;
    int64_t j1 = iw0 > g->w - 1 ? 0 : (g->w - 1 - iw0) / g->dw + 1;
    if (j1 > g->kw) j1 = g->kw;
    /* ow >= lo, so the window starts inside the image. */
    DW_FN(edge)(g, x, xrow + ow * xs, f, i0, i1, 0, j1, epi, yrow + ow * c);
  }
  const float *xi = x + (xrow + i0 * g->dh * g->w * c);
  int64_t ow = from > lo ? from : lo;
  /* Interior pixels eight at a time over every channel block, the rest
   * four, two, one. */
  bool ws = DW_FN(wrow_fits)(g);
  for (; ws && ow + DW_GROUP <= hi; ow += DW_GROUP)
    for (int64_t cb = 0; cb < c; cb += DW_W) {
      bool full = c - cb >= DW_W;
      DW_FN(wrow_any)(g, xi + ow * xs + cb, f, cb, DW_MASK(full ? DW_W : c - cb), i0, i1, epi,
                      yrow + ow * c, full);
    }
  for (; ow + DW_GROUP <= hi; ow += DW_GROUP) {
    int64_t cb = 0;
    for (; c - cb >= DW_NB * DW_W; cb += DW_NB * DW_W)
      DW_FN(group)(g, xi + ow * xs + cb, xs, f, cb, DW_MASK(DW_W), i0, i1, epi, yrow + ow * c,
                   DW_GROUP, DW_NB, true);
    for (; cb < c; cb += DW_W)
      if (c - cb >= DW_W)
        DW_FN(group)(g, xi + ow * xs + cb, xs, f, cb, DW_MASK(DW_W), i0, i1, epi, yrow + ow * c,
                     DW_GROUP, 1, true);
      else
        DW_FN(group)(g, xi + ow * xs + cb, xs, f, cb, DW_MASK(c - cb), i0, i1, epi,
                     yrow + ow * c, DW_GROUP, 1, false);
  }
  for (int64_t cb = 0; cb < c; cb += DW_W) {
    bool full = c - cb >= DW_W;
    dw_m m = DW_MASK(full ? DW_W : c - cb);
    int64_t o = ow;
    if (o + 4 <= hi) {
      DW_FN(group)(g, xi + o * xs + cb, xs, f, cb, m, i0, i1, epi, yrow + o * c, 4, 1, full);
      o += 4;
    }
    if (o + 2 <= hi) {
      DW_FN(group)(g, xi + o * xs + cb, xs, f, cb, m, i0, i1, epi, yrow + o * c, 2, 1, full);
      o += 2;
    }
    if (o < hi) DW_FN(group)(g, xi + o * xs + cb, xs, f, cb, m, i0, i1, epi, yrow + o * c, 1, 1, full);
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
#undef DW_LD
#undef DW_ST
