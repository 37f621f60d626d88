/* eng_wino: 3x3 convolutions of stride 1 by Winograd's minimal filtering
 * algorithm F(2x2, 3x3), on NHWC float32.
 *
 * Each 2x2 block of output pixels (a tile) is computed from the 4x4 input
 * window under it as Y = A^T [sum over input channels of U . V] A, with
 * V = B^T d B the window's transform and U = G g G^T the filter's: 16
 * multiply-adds per tile and channel pair where the direct sum takes 36.
 * The filter's transform (16 matrices of [cin, cout]) is computed in double
 * and packed once at load (eng_wino_pack, eng_gemm_pack_parts); a run
 * transforms a block of input tiles into 16 matrices of [tiles, cin],
 * multiplies each by its part with the packed GEMM and transforms the 16
 * products back while the block is in cache, then applies the fused
 * epilogue to the rows it wrote. Tiles past the output's bottom or right
 * edge are computed on zeros and not stored.
 *
 * The transforms add and subtract inputs before they are multiplied, so
 * results differ from the direct sum by rounding: a few units in the last
 * place of the largest terms (tests/engine/test_eng_wino.c bounds it
 * against a sum in double). The order of every sum is fixed, so the
 * result does not depend on the thread count or the batch.
 *
 * Plans pack this form for the Conv2D steps eng_wino_suits accepts
 * (eng_compile.c) unless the environment variable TENSORD_ENGINE_WINOGRAD
 * is 0, read once. */
#ifndef ENG_WINO_H
#define ENG_WINO_H

#include <stdbool.h>
#include <stdint.h>

#include "eng_dwconv.h"
#include "eng_gemm.h"
#include "eng_op.h"

/* False when TENSORD_ENGINE_WINOGRAD is 0. */
bool eng_wino_enabled(void);
/* Whether a Conv2D of this filter and these strides and dilations (along
 * height and width) runs as F(2x2, 3x3): a 3x3 window, stride and
 * dilation 1, enough channels that the transforms pay (at least 16 in and
 * 16 out) and not so many that the layer is likely one of a small feature
 * map (at most 256 x 256 channel pairs; see eng_wino.c). */
bool eng_wino_suits(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t dh, int64_t dw,
                    int64_t cin, int64_t cout);
/* Transforms and packs a filter f [3, 3, cin, cout] (TensorFlow's HWIO),
 * each output channel j multiplied by scale[j] (scale[0] for all when
 * nscale is 1; none when scale is NULL) as eng_gemm_pack_scaled does. NULL
 * when the active instruction set is generic or memory is short. */
eng_packed *eng_wino_pack(const float *f, int64_t cin, int64_t cout, const float *scale,
                          int64_t nscale);
/* Whether p is a filter eng_wino_pack made for cin and cout. */
bool eng_wino_form(const eng_packed *p, int64_t cin, int64_t cout);
/* The convolution of x by the filter of c->packed (eng_wino_form) over g
 * (kh = kw = 3, strides and dilations 1, g->c input channels), into y
 * [n, oh, ow, cout], then the kernel's epilogue (eng_kepilogue_take).
 * Tile blocks run over the engine's pool. Fails only when memory for a
 * block's transforms is short. */
td_code eng_wino_run(eng_kctx *c, const eng_conv_geom *g, const float *x, float *y, int64_t cout);

#endif
