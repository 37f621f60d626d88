/* The transforms of eng_wino, included once per instruction set by
 * eng_wino.c after it defines:
 *   WN_FN(name)  the function name for this instruction set
 *   WN_TARGET    the target attribute string
 *   WN_W         floats per vector
 * The arithmetic is written once, as macros over any type with + and -
 * (eng_wino.c's WINO_IN and WINO_OUT): GCC's vector extensions give it the
 * instruction set's vectors, and the channels left over past the last full
 * vector run the same macros on floats. Not a header of its own: no
 * include guard on purpose. */

typedef float WN_FN(vec) __attribute__((vector_size(WN_W * 4), aligned(4)));

/* One tile's window: d[i] (i = row * 4 + column) points at that input
 * pixel's channels (or at zeros); its 16 transformed values go to
 * v + i * vs, channel by channel. */
__attribute__((target(WN_TARGET))) static void WN_FN(tin)(const float *const *d, float *v,
                                                          int64_t vs, int64_t ch) {
  int64_t c = 0;
  for (; c + WN_W <= ch; c += WN_W) {
    WN_FN(vec) x[16], o[16];
    for (int i = 0; i < 16; i++) x[i] = *(const WN_FN(vec) *)(d[i] + c);
    WINO_IN(x, o);
    for (int i = 0; i < 16; i++) *(WN_FN(vec) *)(v + i * vs + c) = o[i];
  }
  for (; c < ch; c++) {
    float x[16], o[16];
    for (int i = 0; i < 16; i++) x[i] = d[i][c];
    WINO_IN(x, o);
    for (int i = 0; i < 16; i++) v[i * vs + c] = o[i];
  }
}

/* One tile's products m + i * ms (i < 16) back to its 2x2 output pixels
 * y[0..3] (row-major; those past the edge point at a scratch row). */
__attribute__((target(WN_TARGET))) static void WN_FN(tout)(const float *m, int64_t ms,
                                                           float *const *y, int64_t ch) {
  int64_t c = 0;
  for (; c + WN_W <= ch; c += WN_W) {
    WN_FN(vec) x[16], o[4];
    for (int i = 0; i < 16; i++) x[i] = *(const WN_FN(vec) *)(m + i * ms + c);
    WINO_OUT(x, o);
    for (int i = 0; i < 4; i++) *(WN_FN(vec) *)(y[i] + c) = o[i];
  }
  for (; c < ch; c++) {
    float x[16], o[4];
    for (int i = 0; i < 16; i++) x[i] = m[i * ms + c];
    WINO_OUT(x, o);
    for (int i = 0; i < 4; i++) y[i][c] = o[i];
  }
}
