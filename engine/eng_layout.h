/* eng_layout: channels-first 2-D image ops turned into the channels-last
 * ones the kernels, the compiler's fusions and the GPU lowering know.
 *
 * A node of Conv2D, DepthwiseConv2dNative, MaxPool, AvgPool or
 * FusedBatchNorm(V2/V3) with data_format "NCHW" becomes, once at load:
 * a Transpose of its input 0 to NHWC ("<name>/_td_nhwc/in"), the same op
 * in NHWC with its strides / dilations / ksize permuted ("<name>/_td_nhwc"),
 * and, under the node's own name (so signatures and consumers still find
 * it), a Transpose of the result back to NCHW; FusedBatchNorm's node
 * becomes an IdentityN of that Transpose and the other outputs. Nodes with
 * EXPLICIT padding are left as they are (their check fails the load).
 * Only the graph itself is rewritten: function bodies run by While / If
 * keep their NCHW nodes, which fail the load naming them.
 *
 * Runs at load time, single-threaded, on a graph being prepared (after
 * eng_inline_calls). Fails only when memory runs out. */
#ifndef ENG_LAYOUT_H
#define ENG_LAYOUT_H

#include "eng_graph.h"

td_code eng_layout_lower(eng_graph *g, td_err *err);

#endif
