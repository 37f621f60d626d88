/* eng_kernels: the CPU kernels and shape functions behind the op table,
 * and the helpers they share (argument reading, outputs, broadcasting).
 * Internal to engine/: the kernel files and the op table (eng_op.c)
 * include it, and the GPU lowering (device/eng_gpu.c), which reuses the
 * broadcasting rules and runs CPU kernels on stand-in tensors. Kernels run
 * on any thread; each call works only on its own eng_kctx. */
#ifndef ENG_KERNELS_H
#define ENG_KERNELS_H

#include "eng_epilogue.h"
#include "eng_op.h"

/* Broadcast two shapes NumPy-style (unknown dims stay unknown when they
 * cannot be decided). INVALID_ARGUMENT when incompatible. */
td_code eng_broadcast_shape(const eng_shape *a, const eng_shape *b, eng_shape *out, td_err *err);

/* eng_kernels_state.c: sources, identities, variables, checkpoints. */
td_code eng_k_const(eng_kctx *c);
td_code eng_k_placeholder(eng_kctx *c);
td_code eng_k_identity(eng_kctx *c);
td_code eng_k_identity_n(eng_kctx *c);
td_code eng_k_noop(eng_kctx *c);
td_code eng_k_var_handle(eng_kctx *c);
td_code eng_k_variable_v2(eng_kctx *c);
td_code eng_k_read_variable(eng_kctx *c);
td_code eng_k_assign_variable(eng_kctx *c);
td_code eng_k_assign(eng_kctx *c);
td_code eng_k_var_is_initialized(eng_kctx *c);
td_code eng_k_restore_v2(eng_kctx *c);

td_code eng_s_const(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
td_code eng_s_placeholder(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
td_code eng_s_identity(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
td_code eng_s_scalar(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);

/* eng_kernels_binary.c: elementwise binary arithmetic with broadcasting. */
td_code eng_k_add(eng_kctx *c);
td_code eng_k_sub(eng_kctx *c);
td_code eng_k_mul(eng_kctx *c);
td_code eng_k_real_div(eng_kctx *c);
td_code eng_k_maximum(eng_kctx *c);
td_code eng_k_minimum(eng_kctx *c);
td_code eng_s_binary(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);

/* eng_kernels_parse.c: serialized tf.Example -> dense tensors (dense
 * features with known shapes only; sparse/ragged/variable-length fail
 * UNIMPLEMENTED). Output shapes are known only at run time. */
td_code eng_k_parse_example(eng_kctx *c);
td_code eng_k_parse_example_v2(eng_kctx *c);

/* --- helpers shared by the kernel files (eng_kernel_args.c) -------------- */
/* Fails with `code` and "node 'N' (Op): <message>". */
td_code eng_kfail(eng_kctx *c, td_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Reads int32/int64 input i (any shape) into out[max]; *n gets the count.
 * INVALID_ARGUMENT naming the input when it is not an integer tensor or holds
 * more than max values. */
td_code eng_karg_ints(eng_kctx *c, int i, int64_t *out, int max, int *n);
/* Reads a scalar (or one-element) int32/int64 input. */
td_code eng_karg_int(eng_kctx *c, int i, int64_t *out);
/* Allocates output i, zero-filled; errors carry the node. */
td_code eng_kout(eng_kctx *c, int i, eng_dtype dt, const eng_shape *s);
/* The same, uninitialised: for kernels that write every element. */
td_code eng_kout_raw(eng_kctx *c, int i, eng_dtype dt, const eng_shape *s);
/* Requires input i to have dtype dt (or any float/int class, see below). */
td_code eng_kwant(eng_kctx *c, int i, eng_dtype dt);
/* Normalises axis against rank (negative counts from the end). */
td_code eng_kaxis(eng_kctx *c, int64_t axis, int rank, int *out);

/* n-dimensional copy of dims[] elements of size es, with element strides on
 * both sides (negative source strides allowed; a source stride of 0 repeats
 * an element); eng_kernels_copy.c. A large copy is split over the engine's
 * pool by rows, so it must not be called with src and dst overlapping. */
void eng_copy_nd(int rank, const int64_t *dims, size_t es, const char *src, const int64_t *sst,
                 char *dst, const int64_t *dstst);
/* Row-major element strides of a concrete shape. */
void eng_contig_strides(const eng_shape *s, int64_t *st);

/* Broadcast iteration over up to three inputs: st[k][d] is input k's stride
 * along output dim d (0 where broadcast); off[k] follows the odometer.
 * Adjacent dims every input walks alike are merged at init (the offsets
 * and their order are those of the output's row-major walk), so `dim` and
 * `rank` describe the merged walk, not the output shape. Rows: the
 * innermost merged dim (length eng_bcast_row_len) is one run in which each
 * input's stride is st[k][rank - 1] (1 or 0); eng_bcast_next_row moves to
 * the next run's start. */
typedef struct eng_bcast {
  int rank, n;
  int64_t dim[ENG_MAX_RANK], idx[ENG_MAX_RANK];
  int64_t st[3][ENG_MAX_RANK];
  int64_t off[3];
} eng_bcast;
void eng_bcast_init(eng_bcast *it, const eng_shape *out, int n, const eng_shape *const *in);
/* Advances the odometer from dim `inner` outwards. */
static inline void eng_bcast_step(eng_bcast *it, int inner) {
  for (int d = inner; d >= 0; d--) {
    if (++it->idx[d] < it->dim[d]) {
      for (int k = 0; k < it->n; k++) it->off[k] += it->st[k][d];
      return;
    }
    for (int k = 0; k < it->n; k++) it->off[k] -= it->st[k][d] * (it->idx[d] - 1);
    it->idx[d] = 0;
  }
}
static inline void eng_bcast_next(eng_bcast *it) { eng_bcast_step(it, it->rank - 1); }
static inline int64_t eng_bcast_row_len(const eng_bcast *it) {
  return it->rank > 0 ? it->dim[it->rank - 1] : 1;
}
static inline int64_t eng_bcast_row_stride(const eng_bcast *it, int k) {
  return it->rank > 0 ? it->st[k][it->rank - 1] : 0;
}
static inline void eng_bcast_next_row(eng_bcast *it) { eng_bcast_step(it, it->rank - 2); }
/* Moves a walk just initialised (at its start) to the start of row `row`,
 * as `row` calls of eng_bcast_next_row would: where a split of the walk
 * over the pool begins a range. */
void eng_bcast_seek_row(eng_bcast *it, int64_t row);

/* eng_kernels_unary.c: elementwise math, activations, Cast, *Like. */
td_code eng_k_unary(eng_kctx *c);
td_code eng_k_leaky_relu(eng_kctx *c);
td_code eng_k_cast(eng_kctx *c);
td_code eng_k_zeros_like(eng_kctx *c);
td_code eng_k_ones_like(eng_kctx *c);
td_code eng_k_logical_not(eng_kctx *c);
td_code eng_s_unary(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);

/* eng_kernels_compare.c: comparisons, logic, Select, Pow, SquaredDifference,
 * AddN, BiasAdd. */
td_code eng_k_compare(eng_kctx *c);
td_code eng_k_logical(eng_kctx *c);
td_code eng_k_select_v2(eng_kctx *c);
td_code eng_k_select(eng_kctx *c);
td_code eng_k_pow(eng_kctx *c);
td_code eng_k_squared_difference(eng_kctx *c);
td_code eng_k_add_n(eng_kctx *c);
td_code eng_k_bias_add(eng_kctx *c);
td_code eng_s_select(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
td_code eng_s_add_n(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);

/* eng_kernels_shape.c: ops that only restate a shape. */
td_code eng_k_reshape(eng_kctx *c);
td_code eng_k_shape(eng_kctx *c);
td_code eng_k_squeeze(eng_kctx *c);
td_code eng_k_expand_dims(eng_kctx *c);
td_code eng_k_fill(eng_kctx *c);
td_code eng_k_range(eng_kctx *c);
td_code eng_k_broadcast_to(eng_kctx *c);
td_code eng_k_broadcast_args(eng_kctx *c);
td_code eng_k_lin_space(eng_kctx *c);
td_code eng_s_shape(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
td_code eng_s_squeeze(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
td_code eng_s_unknown(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);

/* eng_kernels_array.c: ops that move elements. */
td_code eng_k_strided_slice(eng_kctx *c);
/* StridedSlice's geometry, from input 0's shape and the begin / end /
 * strides inputs (1-3) with the node's masks: the result shape, and the
 * source walk (offset, sizes and element strides over input 0's rank) that
 * produces it densely. TensorFlow's errors, naming the node. */
typedef struct eng_slice {
  int rank;
  int64_t offset;
  int64_t size[ENG_MAX_RANK];
  int64_t src_stride[ENG_MAX_RANK];
  eng_shape out;
} eng_slice;
td_code eng_strided_slice_plan(eng_kctx *c, eng_slice *sl);
td_code eng_k_slice(eng_kctx *c);
td_code eng_k_pack(eng_kctx *c);
td_code eng_k_unpack(eng_kctx *c);
td_code eng_k_concat_v2(eng_kctx *c);
td_code eng_k_gather_v2(eng_kctx *c);
td_code eng_k_transpose(eng_kctx *c);
td_code eng_k_pad(eng_kctx *c);
td_code eng_k_tile(eng_kctx *c);
td_code eng_k_split(eng_kctx *c);
td_code eng_k_split_v(eng_kctx *c);
td_code eng_k_one_hot(eng_kctx *c);
td_code eng_k_mirror_pad(eng_kctx *c);
td_code eng_s_pack(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
td_code eng_s_unpack(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);

/* eng_kernels_reduce.c: Sum, Mean, Max, Min, Prod, All, Any; the scans
 * Cumsum and Cumprod; L2Loss (a scalar, accumulated in double). */
td_code eng_k_reduce(eng_kctx *c);
/* _LayerNorm (plan-internal, eng_merge_layer_norms): in 0 is x,
 * in 1 the normalised axis (x's last), the step's epilogue its gamma with
 * eps and its beta (EPI_LAYER_NORM); out 0 has x's shape. Each row's mean
 * and variance are the Mean kernel's, every other value the Rsqrt, Neg,
 * Mul and AddV2 kernels' as Keras's graph chains them. */
td_code eng_k_layer_norm(eng_kctx *c);
td_code eng_k_cumsum(eng_kctx *c);
td_code eng_k_cumprod(eng_kctx *c);
td_code eng_k_l2_loss(eng_kctx *c);

/* eng_kernels_matmul.c: MatMul, BatchMatMul, Einsum (OpenBLAS). */
td_code eng_k_matmul(eng_kctx *c);
td_code eng_k_batch_matmul(eng_kctx *c);
td_code eng_k_einsum(eng_kctx *c);
td_code eng_s_matmul(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
td_code eng_s_batch_matmul(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);

/* eng_kernels_control.c: While / If over subgraph plans, TensorLists. */
td_code eng_k_while(eng_kctx *c);
td_code eng_k_if(eng_kctx *c);
td_code eng_k_tensor_list_reserve(eng_kctx *c);
td_code eng_k_tensor_list_from_tensor(eng_kctx *c);
td_code eng_k_tensor_list_get_item(eng_kctx *c);
td_code eng_k_tensor_list_set_item(eng_kctx *c);
td_code eng_k_tensor_list_stack(eng_kctx *c);
td_code eng_k_tensor_list_length(eng_kctx *c);
td_code eng_k_switch(eng_kctx *c);
td_code eng_k_merge(eng_kctx *c);

/* eng_kernels_nn.c: convolutions, pools, batch norm, softmax. */
td_code eng_k_conv2d(eng_kctx *c);
td_code eng_k_depthwise_conv2d(eng_kctx *c);
td_code eng_k_max_pool(eng_kctx *c);
td_code eng_k_avg_pool(eng_kctx *c);
td_code eng_k_fused_batch_norm(eng_kctx *c);
td_code eng_k_softmax(eng_kctx *c);
td_code eng_s_conv2d(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
td_code eng_s_pool(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err);
/* DepthwiseConv2dNative (VALID) reading, as input 0, the unpadded input of
 * the Pad node feeding it (that Pad's step passes its input through): the
 * padding is applied as the window's own. The op table's plan-internal
 * _DepthwiseConv2dNativePadded, placed by eng_merge_pad_views. */
td_code eng_k_depthwise_conv2d_padded(eng_kctx *c);
/* _ExpandDepthwise (plan-internal, eng_merge_expand_depthwise):
 * a 1x1 Conv2D (in 0 x, its weight packed) and the depthwise convolution
 * reading its output, run band by band (eng_dwconv_expand_run); the
 * step's epilogue holds the expansion's ops, EPI_DEPTHWISE (the depthwise
 * filter and node) and the depthwise layer's ops; out 0 is the depthwise
 * output. Every value is the two kernels' apart, bit for bit. */
td_code eng_k_expand_depthwise(eng_kctx *c);
/* _ScaledConv1x1 (plan-internal, eng_merge_scaled_conv): a Mul
 * (in 0 and in 1, as the Mul node reads them) and the 1x1 stride-1 Conv2D
 * reading its product (its weight packed, its epilogue the step's); out 0
 * is the convolution's output. When one operand is an NHWC tensor x and the
 * other one value per image (or for all images) and channel of it, the
 * product's rows are scaled as the GEMM reads them (eng_gemm_run_scaled);
 * any other broadcast runs the Mul kernel into a temporary first. Every
 * value is the two kernels' apart, bit for bit. */
td_code eng_k_scaled_conv1x1(eng_kctx *c);

/* eng_kernels_check.c: the op table's load-time checks (eng_op.h). */
td_code eng_c_float(const eng_node *n, td_err *err);      /* T float32 */
td_code eng_c_conv(const eng_node *n, td_err *err);       /* T float32, NHWC, strides */
td_code eng_c_pool(const eng_node *n, td_err *err);       /* the same and ksize */
td_code eng_c_batch_norm(const eng_node *n, td_err *err); /* T, U float32, NHWC */
td_code eng_c_matmul(const eng_node *n, td_err *err);     /* T float32 or float64 */
td_code eng_c_einsum(const eng_node *n, td_err *err);     /* two operands, a plannable equation */
td_code eng_c_movable(const eng_node *n, td_err *err);    /* T fixed-size or string */
td_code eng_c_real(const eng_node *n, td_err *err);       /* T float32/64, int32/64 */
td_code eng_c_floats(const eng_node *n, td_err *err);     /* T float32/64 */
td_code eng_c_numeric(const eng_node *n, td_err *err);    /* T a fixed-size number, not bool */
/* Math, reductions and comparisons TensorFlow runs on complex tensors and
 * these kernels do not: T anything but complex64/128. */
td_code eng_c_not_complex(const eng_node *n, td_err *err);
td_code eng_c_image(const eng_node *n, td_err *err);      /* T float32, int32 or uint8 */
td_code eng_c_shape_ints(const eng_node *n, td_err *err); /* T int32/64 (BroadcastArgs) */
td_code eng_c_lin_space(const eng_node *n, td_err *err);  /* T float32/64, Tidx int32/64 */
/* XlaDynamicUpdateSlice: T fixed-size, Tindices int32/64. */
td_code eng_c_dynamic_update_slice(const eng_node *n, td_err *err);

/* eng_kernels_strmove.c: string inputs through an element-moving kernel
 * (numeric), by element numbers; other calls go straight to numeric. The
 * table's kernels for Tile, GatherV2, ConcatV2, Pack, Unpack, Slice,
 * StridedSlice, Transpose, Split, SplitV, BroadcastTo, Select, SelectV2. */
td_code eng_kmove_strings(eng_kctx *c, eng_kernel_fn numeric);
td_code eng_k_tile_any(eng_kctx *c);
td_code eng_k_gather_v2_any(eng_kctx *c);
td_code eng_k_concat_v2_any(eng_kctx *c);
td_code eng_k_pack_any(eng_kctx *c);
td_code eng_k_unpack_any(eng_kctx *c);
td_code eng_k_slice_any(eng_kctx *c);
td_code eng_k_strided_slice_any(eng_kctx *c);
td_code eng_k_transpose_any(eng_kctx *c);
td_code eng_k_split_any(eng_kctx *c);
td_code eng_k_split_v_any(eng_kctx *c);
td_code eng_k_broadcast_to_any(eng_kctx *c);
td_code eng_k_select_v2_any(eng_kctx *c);
td_code eng_k_select_any(eng_kctx *c);

/* eng_kernels_math.c: FloorDiv, FloorMod, Atan2 (broadcasting), IsFinite,
 * Bucketize. */
td_code eng_k_floor_div(eng_kctx *c);
td_code eng_k_floor_mod(eng_kctx *c);
td_code eng_k_atan2(eng_kctx *c);
td_code eng_k_is_finite(eng_kctx *c);
td_code eng_k_bucketize(eng_kctx *c);

/* eng_kernels_index.c: ArgMax, ArgMin, TopKV2, Where (one argument),
 * GatherNd, ReverseV2, Roll, MatrixBandPart (the *_any: strings too). */
td_code eng_k_arg_max(eng_kctx *c);
td_code eng_k_arg_min(eng_kctx *c);
td_code eng_k_top_k(eng_kctx *c);
td_code eng_k_where(eng_kctx *c);
td_code eng_k_gather_nd(eng_kctx *c);
td_code eng_k_reverse_v2(eng_kctx *c);
td_code eng_k_roll(eng_kctx *c);
td_code eng_k_matrix_band_part(eng_kctx *c);
td_code eng_k_gather_nd_any(eng_kctx *c);
td_code eng_k_reverse_v2_any(eng_kctx *c);
td_code eng_k_roll_any(eng_kctx *c);

/* eng_kernels_space.c: SpaceToBatchND, BatchToSpaceND (dilated convs). */
td_code eng_k_space_to_batch_nd(eng_kctx *c);
td_code eng_k_batch_to_space_nd(eng_kctx *c);

/* eng_kernels_resize.c: ResizeBilinear, ResizeNearestNeighbor (NHWC). */
/* The output size of a resize (input 1, two positive elements) checked
 * against image input 0 (rank 4, non-empty; align_corners and
 * half_pixel_centers not both set); fails the kernel otherwise. */
td_code eng_resize_size(eng_kctx *c, int64_t *oh, int64_t *ow);
/* Source pixels per output pixel along one axis. */
float eng_resize_scale(int64_t in, int64_t out, bool align);
td_code eng_k_resize_bilinear(eng_kctx *c);
td_code eng_k_resize_nearest(eng_kctx *c);

/* eng_kernels_table.c: lookup tables in model slots (HashTableV2,
 * LookupTableImportV2 at load, LookupTableFindV2 / SizeV2 serving). */
td_code eng_k_hash_table(eng_kctx *c);
td_code eng_k_lookup_table_import(eng_kctx *c);
td_code eng_k_lookup_table_find(eng_kctx *c);
td_code eng_k_lookup_table_size(eng_kctx *c);
/* MutableHashTableV2 shares eng_k_hash_table; LookupTableInsertV2 (at
 * load) replaces the table with the old entries and the new, later values
 * winning; LookupTableExportV2 gives the distinct keys and their values in
 * import order. */
td_code eng_k_lookup_table_insert(eng_kctx *c);
td_code eng_k_lookup_table_export(eng_kctx *c);
/* eng_kernels_vocab.c: InitializeTableFromTextFileV2 (asset files, at load). */
td_code eng_k_init_table_from_text_file(eng_kctx *c);
/* Fills the table behind c's input 0 from keys (rank 1) and values (one
 * row per key): a key given twice with different values is
 * INVALID_ARGUMENT, or (last_wins) takes the later row. */
td_code eng_table_import(eng_kctx *c, const eng_tensor *keys, const eng_tensor *values,
                         bool last_wins);

/* eng_kernels_count.c: Size, DenseBincount. */
td_code eng_k_size(eng_kctx *c);
td_code eng_k_dense_bincount(eng_kctx *c);

/* eng_kernels_conv3d.c: Conv3D, Conv2DBackpropInput, Conv3DBackpropInputV2
 * (im2col / col2im around sgemm), MaxPool3D, AvgPool3D; channels last,
 * float32. Their load-time checks: T float32, channels last, VALID/SAME. */
td_code eng_k_conv3d(eng_kctx *c);
td_code eng_k_conv2d_backprop_input(eng_kctx *c);
td_code eng_k_conv3d_backprop_input(eng_kctx *c);
td_code eng_k_max_pool3d(eng_kctx *c);
td_code eng_k_avg_pool3d(eng_kctx *c);
td_code eng_c_conv3d(const eng_node *n, td_err *err);
td_code eng_c_pool3d(const eng_node *n, td_err *err);
td_code eng_c_conv2d_backprop(const eng_node *n, td_err *err);

/* eng_kernels_image.c: ResizeBicubic, ResizeArea, CropAndResize (float32
 * results from float/int/uint8 images; eng_c_pixels checks T), RGBToHSV,
 * HSVToRGB, AdjustSaturation, AdjustHue, AdjustContrastv2 (float32). */
td_code eng_k_resize_bicubic(eng_kctx *c);
td_code eng_k_resize_area(eng_kctx *c);
td_code eng_k_crop_and_resize(eng_kctx *c);
td_code eng_k_rgb_to_hsv(eng_kctx *c);
td_code eng_k_hsv_to_rgb(eng_kctx *c);
td_code eng_k_adjust_saturation(eng_kctx *c);
td_code eng_k_adjust_hue(eng_kctx *c);
td_code eng_k_adjust_contrast_v2(eng_kctx *c);
td_code eng_c_pixels(const eng_node *n, td_err *err);

/* eng_kernels_scatter.c: ScatterNd, TensorScatterUpdate/Add/Sub/Max/Min,
 * Segment{Sum,Mean,Max,Min,Prod}, UnsortedSegment{Sum,Max,Min,Prod},
 * SparseSegment{Sum,Mean,SqrtN}[WithNumSegments]; XlaDynamicUpdateSlice. */
td_code eng_k_scatter_nd(eng_kctx *c);
td_code eng_k_xla_dynamic_update_slice(eng_kctx *c);
td_code eng_k_tensor_scatter_update(eng_kctx *c);
td_code eng_k_tensor_scatter_add(eng_kctx *c);
td_code eng_k_tensor_scatter_sub(eng_kctx *c);
td_code eng_k_tensor_scatter_max(eng_kctx *c);
td_code eng_k_tensor_scatter_min(eng_kctx *c);
td_code eng_k_segment_sum(eng_kctx *c);
td_code eng_k_segment_mean(eng_kctx *c);
td_code eng_k_segment_max(eng_kctx *c);
td_code eng_k_segment_min(eng_kctx *c);
td_code eng_k_segment_prod(eng_kctx *c);
td_code eng_k_unsorted_segment_sum(eng_kctx *c);
td_code eng_k_unsorted_segment_max(eng_kctx *c);
td_code eng_k_unsorted_segment_min(eng_kctx *c);
td_code eng_k_unsorted_segment_prod(eng_kctx *c);
td_code eng_k_sparse_segment_sum(eng_kctx *c);
td_code eng_k_sparse_segment_mean(eng_kctx *c);
td_code eng_k_sparse_segment_sqrt_n(eng_kctx *c);
/* ResourceGather: GatherV2 over a variable's value. */
td_code eng_k_resource_gather(eng_kctx *c);

/* eng_kernels_unique.c: Unique, UniqueWithCounts (1-D, first-seen order;
 * numbers, bools and strings: eng_c_unique). */
td_code eng_k_unique(eng_kctx *c);
td_code eng_k_unique_with_counts(eng_kctx *c);
td_code eng_c_unique(const eng_node *n, td_err *err);

/* eng_kernels_assert.c: Assert (a false one fails the request with
 * INVALID_ARGUMENT and its data), CheckNumerics (NaN / Inf fail). */
td_code eng_k_assert(eng_kctx *c);
td_code eng_k_check_numerics(eng_kctx *c);

/* eng_kernels_random.c: RandomUniform, RandomStandardNormal,
 * TruncatedNormal (float32/64; eng_c_random checks dtype). */
td_code eng_k_random_uniform(eng_kctx *c);
td_code eng_k_random_standard_normal(eng_kctx *c);
td_code eng_k_truncated_normal(eng_kctx *c);
td_code eng_c_random(const eng_node *n, td_err *err);

/* --- text: strings, hashing, regexes, ragged results ----------------------
 * eng_kernels_string.c: a string output built element by element (add
 * starts the next element, append extends it; finish allocates output
 * `out` of shape s, which must hold exactly the elements added, and frees
 * the builder either way). */
typedef struct eng_strbuild {
  char *bytes;
  int64_t len, cap;
  size_t *lens;
  int64_t n, cap_n;
} eng_strbuild;
td_code eng_strbuild_add(eng_kctx *c, eng_strbuild *b, const char *s, size_t n);
td_code eng_strbuild_append(eng_kctx *c, eng_strbuild *b, const char *s, size_t n);
td_code eng_strbuild_finish(eng_kctx *c, eng_strbuild *b, int out, const eng_shape *s);
void eng_strbuild_free(eng_strbuild *b);
td_code eng_k_as_string(eng_kctx *c);
td_code eng_k_string_length(eng_kctx *c);
td_code eng_k_string_join(eng_kctx *c);
td_code eng_k_string_lower(eng_kctx *c);
td_code eng_k_string_upper(eng_kctx *c);
td_code eng_k_string_strip(eng_kctx *c);
td_code eng_k_substr(eng_kctx *c);
td_code eng_k_string_to_number(eng_kctx *c);
/* Equal / NotEqual: strings compared here (broadcasting), others by eng_k_compare. */
td_code eng_k_equal_any(eng_kctx *c);
td_code eng_k_unsorted_segment_join(eng_kctx *c);
td_code eng_c_as_string(const eng_node *n, td_err *err);        /* T and format attrs */
td_code eng_c_string_unit(const eng_node *n, td_err *err);      /* unit BYTE or UTF8_CHAR */
td_code eng_c_string_case(const eng_node *n, td_err *err);      /* encoding "" or "utf-8" */
td_code eng_c_string_to_number(const eng_node *n, td_err *err); /* out_type float/int 32/64 */

/* eng_kernels_unicode.c: StringLower / StringUpper with encoding "utf-8"
 * (upper: which one), UnicodeDecode(WithOffsets), UnicodeEncode,
 * UnicodeTranscode; eng_c_unicode checks encodings, errors and
 * replacement_char. */
td_code eng_k_string_case_utf8(eng_kctx *c, bool upper);
td_code eng_k_unicode_decode(eng_kctx *c);
td_code eng_k_unicode_decode_with_offsets(eng_kctx *c);
td_code eng_k_unicode_encode(eng_kctx *c);
td_code eng_k_unicode_transcode(eng_kctx *c);
td_code eng_c_unicode(const eng_node *n, td_err *err);

/* eng_kernels_strfmt.c: StringFormat (tensors printed as TensorFlow's
 * summarize does; eng_c_string_format checks the template against T) and
 * dense ReduceJoin. */
td_code eng_k_string_format(eng_kctx *c);
td_code eng_k_reduce_join(eng_kctx *c);
td_code eng_c_string_format(const eng_node *n, td_err *err);

/* eng_kernels_hash.c: StringToHashBucketFast / Strong / (legacy). */
td_code eng_k_string_to_hash_bucket_fast(eng_kctx *c);
td_code eng_k_string_to_hash_bucket_strong(eng_kctx *c);
td_code eng_k_string_to_hash_bucket(eng_kctx *c);

/* eng_kernels_regex.c: StaticRegexReplace / StaticRegexFullMatch (pattern
 * compiled by the check), RegexReplace / RegexFullMatch (pattern input). */
td_code eng_k_static_regex_replace(eng_kctx *c);
td_code eng_k_static_regex_full_match(eng_kctx *c);
td_code eng_k_regex_replace(eng_kctx *c);
td_code eng_k_regex_full_match(eng_kctx *c);
td_code eng_c_static_regex(const eng_node *n, td_err *err); /* RE2 present, pattern compiles */
td_code eng_c_regex(const eng_node *n, td_err *err);        /* RE2 present */

/* eng_kernels_ragged.c: StringSplitV2, StringNGrams, RaggedTensorToTensor,
 * RaggedBincount. */
td_code eng_k_string_split_v2(eng_kctx *c);
td_code eng_k_string_ngrams(eng_kctx *c);
td_code eng_k_ragged_tensor_to_tensor(eng_kctx *c);
td_code eng_k_ragged_bincount(eng_kctx *c);

/* eng_kernels_fft.c: FFT/IFFT (1-3 D, complex64/128), RFFT/IRFFT (1-3 D,
 * float32/64 with fft_length cropping or zero-padding the signal), Complex,
 * Real, Imag, ComplexAbs, Conj, Angle; Cast to or from a complex dtype
 * (eng_k_cast hands over when eng_cast_complex_handles says so). Transforms
 * accumulate in double (eng_fft.h). */
td_code eng_k_fft(eng_kctx *c);
td_code eng_k_fft2d(eng_kctx *c);
td_code eng_k_fft3d(eng_kctx *c);
td_code eng_k_ifft(eng_kctx *c);
td_code eng_k_ifft2d(eng_kctx *c);
td_code eng_k_ifft3d(eng_kctx *c);
td_code eng_k_rfft(eng_kctx *c);
td_code eng_k_rfft2d(eng_kctx *c);
td_code eng_k_rfft3d(eng_kctx *c);
td_code eng_k_irfft(eng_kctx *c);
td_code eng_k_irfft2d(eng_kctx *c);
td_code eng_k_irfft3d(eng_kctx *c);
td_code eng_k_complex(eng_kctx *c);
td_code eng_k_real(eng_kctx *c);
td_code eng_k_imag(eng_kctx *c);
td_code eng_k_complex_abs(eng_kctx *c);
td_code eng_k_angle(eng_kctx *c);
td_code eng_k_conj(eng_kctx *c);
/* eng_k_unary's complex inputs: Neg, Exp, Expm1, Log, Log1p, Sqrt, Rsqrt,
 * Square, Reciprocal, Sign, Sin, Cos, Tanh, Sigmoid (UNIMPLEMENTED for the
 * other unary ops, which TensorFlow does not run on complex tensors). */
td_code eng_unary_complex(eng_kctx *c);
bool eng_cast_complex_handles(eng_dtype from, eng_dtype to);
td_code eng_cast_complex(eng_kctx *c, eng_dtype to);
td_code eng_c_fft(const eng_node *n, td_err *err);          /* Tcomplex complex64/128 */
td_code eng_c_rfft(const eng_node *n, td_err *err);         /* Treal float32/64, Tcomplex */
td_code eng_c_complex(const eng_node *n, td_err *err);      /* T float32/64, Tout complex */
td_code eng_c_complex_part(const eng_node *n, td_err *err); /* T complex, Tout float32/64 */
td_code eng_c_conj(const eng_node *n, td_err *err);         /* T complex64/128 */

#endif
