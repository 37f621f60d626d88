/* eng_window (internal to engine/): the geometry of convolution and pooling
 * windows, once for the CPU kernels and the GPU lowering alike.
 *
 * Along one spatial dim, as TensorFlow computes it (kernels/ops_util,
 * conv_ops): with eff = (k - 1) * dilation + 1, VALID gives
 * (in - eff + stride) / stride outputs and no padding, SAME gives
 * ceil(in / stride) with the odd padding cell at the end, EXPLICIT takes
 * the two explicit paddings. Pure functions, any thread. */
#ifndef ENG_WINDOW_H
#define ENG_WINDOW_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "eng_graph.h"

typedef enum {
  ENG_WINDOW_OK,
  ENG_WINDOW_BAD_STEP,     /* window, stride or dilation not positive */
  ENG_WINDOW_BAD_EXPLICIT, /* a negative explicit padding */
  ENG_WINDOW_BAD_PADDING,  /* an unknown padding (or EXPLICIT without paddings) */
  ENG_WINDOW_NEGATIVE,     /* the window does not fit: *out < 0 */
} eng_window_status;

/* Output size *out and padding before the first cell *before of a window of
 * k cells, stride s and dilation d over in cells, padding pad ("VALID",
 * "SAME", "EXPLICIT" with explicit_pad = {before, after}). Inline: kernels
 * call it per run, twice per convolution or pool. */
static inline eng_window_status eng_window_1d(const char *pad, int64_t in, int64_t k, int64_t s, int64_t d,
                                const int64_t *explicit_pad, int64_t *out, int64_t *before) {
  if (s <= 0 || d <= 0 || k <= 0) return ENG_WINDOW_BAD_STEP;
  int64_t eff = (k - 1) * d + 1;
  if (!strcmp(pad, "VALID")) {
    *out = (in - eff + s) / s;
    *before = 0;
  } else if (!strcmp(pad, "SAME")) {
    *out = (in + s - 1) / s;
    int64_t total = (*out - 1) * s + eff - in;
    *before = total > 0 ? total / 2 : 0;
  } else if (!strcmp(pad, "EXPLICIT") && explicit_pad) {
    if (explicit_pad[0] < 0 || explicit_pad[1] < 0) return ENG_WINDOW_BAD_EXPLICIT;
    *out = (in + explicit_pad[0] + explicit_pad[1] - eff + s) / s;
    *before = explicit_pad[0];
  } else {
    return ENG_WINDOW_BAD_PADDING;
  }
  return *out < 0 ? ENG_WINDOW_NEGATIVE : ENG_WINDOW_OK;
}

/* A Pad node (zeros) of an NHWC tensor by a Const amount on H and W only:
 * out = (top, bottom, left, right). False for any other Pad. */
bool eng_pad_hw(const eng_graph *g, const eng_node *pad, int64_t out[4]);

#endif
