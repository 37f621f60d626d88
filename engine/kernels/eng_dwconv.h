/* eng_dwconv: depthwise 2-D convolution with channel multiplier 1 on NHWC
 * float32 (DepthwiseConv2dNative's common case: MobileNet's 3x3 layers),
 * with the fused bias / batch-norm / ReLU epilogue applied in registers.
 *
 * Direct kernel: for each output row, interior output pixels are
 * accumulated eight side by side (eight independent FMA chains) for one
 * block of channels (one vector) at a time. Windows 3 or 5 wide with column
 * stride 1 or 2 keep each window row's weight vectors in registers and load
 * each input vector of that row once for all eight pixels; other windows
 * load each tap's weight vector once for the eight (AVX-512: two channel
 * blocks at once). The row's remaining interior pixels go four, two and one
 * at a time. 3x3 stride-1 windows (MobileNet's) take two output rows by
 * four pixels at a time instead, loading each input vector once for every
 * accumulator it feeds, with the nine weights held in registers (AVX2,
 * whose 16 registers the eight accumulators half fill: each input row's
 * weight rows, reloaded from L1). Pixels whose window reaches into the
 * padding visit only the valid taps, over channel blocks side by side
 * (AVX-512 four, AVX2 eight: two FMA units' worth of chains). Every output sums its valid taps
 * in tap order (row-major over the window) starting from zero, whichever
 * path computes it, so every path gives the scalar loop's bits. AVX-512 and
 * AVX2+FMA are picked at run time (eng_isa_active), with a scalar loop for
 * generic; full channel blocks use plain loads and stores, the last partial
 * one masked loads and stores.
 *
 * Large calls split their output rows over the engine's thread pool
 * (eng_pool); each output is computed as on one thread, so results are
 * identical at any thread count.
 *
 * eng_dwconv_expand_run runs a 1x1 expansion (MobileNetV2's and
 * EfficientNet's inverted residual blocks) and the depthwise layer after
 * it together, a band of rows at a time: the band's expanded rows go into
 * a scratch buffer sized to stay in L2, and the depthwise rows read them
 * there, so the expanded tensor (the block's largest, several megabytes
 * at 112^2 x 96) never goes through main memory. The rows two bands share
 * (the window's overlap) are moved to the buffer's front instead of being
 * computed again. Each output is summed as the two calls apart would sum
 * it (eng_gemm's sums do not depend on the rows, the depthwise paths' on
 * the band), so the results are the two calls' bit for bit.
 *
 * Pure functions of their arguments; any number of threads may call them. */
#ifndef ENG_DWCONV_H
#define ENG_DWCONV_H

#include <stdbool.h>
#include <stdint.h>

#include "eng_gemm.h"
#include "eng_isa.h"

/* Geometry of a 2-D window over an NHWC input, resolved (TF's rules for
 * SAME / VALID / EXPLICIT already applied by the caller). */
typedef struct eng_conv_geom {
  int64_t n, h, w, c; /* input */
  int64_t kh, kw;     /* window */
  int64_t sh, sw, dh, dw;
  int64_t oh, ow; /* output */
  int64_t pt, pl; /* padding before (top, left) */
} eng_conv_geom;

/* y[n, oh, ow, c] = epi(sum over valid taps of x[n, ih, iw, c] * f[i, j, c])
 * for f laid out [kh, kw, c] (TF's [kh, kw, c, 1]); every element of y is
 * written. epi may be NULL. */
void eng_dwconv_run(const eng_conv_geom *g, const float *x, const float *f, float *y,
                    const eng_gemm_epi *epi);

/* The same on a given instruction set's code path (ENG_ISA_GENERIC: the
 * scalar loop), so tests can reach each one; false (y untouched) where
 * eng_isa_allows(isa) is false. */
bool eng_dwconv_run_isa(eng_isa isa, const eng_conv_geom *g, const float *x, const float *f,
                        float *y, const eng_gemm_epi *epi);

/* y = epi(depthwise(eepi(x * b))) over g, the depthwise layer's geometry:
 * x is [g->n, g->h, g->w, k] (k = eng_gemm_k(b)), b the expansion's packed
 * 1x1 filter with eng_gemm_n(b) == g->c, eepi its epilogue, f and epi as
 * eng_dwconv_run's. scratch holds `room` floats, the caller's (so that it
 * can come from recycled memory): with eng_dwconv_expand_scratch(g) every
 * thread of the pool takes bands, with less room fewer do (at least one
 * band's room is needed: eng_dwconv_expand_scratch at one thread). Either
 * epilogue may be NULL. */
void eng_dwconv_expand_run(const eng_conv_geom *g, const float *x, const eng_packed *b,
                           const eng_gemm_epi *eepi, const float *f, float *y,
                           const eng_gemm_epi *epi, float *scratch, int64_t room);
/* Floats of scratch eng_dwconv_expand_run needs for g (at least one band
 * per pool thread). */
int64_t eng_dwconv_expand_scratch(const eng_conv_geom *g);

#endif
