#include "eng_op.h"

#include <string.h>

#include "eng_kernels.h"

/* Sorted by name: eng_op_find bisects. */
static const eng_op_def ops[] = {
    {"Abs", 0, eng_s_unary, eng_k_unary},
    {"Add", 0, eng_s_binary, eng_k_add},
    {"AddN", 0, eng_s_add_n, eng_k_add_n},
    {"AddV2", 0, eng_s_binary, eng_k_add},
    {"All", 0, eng_s_unknown, eng_k_reduce},
    {"Any", 0, eng_s_unknown, eng_k_reduce},
    {"Assign", ENG_OP_REF_INPUT0 | ENG_OP_STATEFUL, NULL, eng_k_assign},
    {"AssignVariableOp", ENG_OP_STATEFUL, NULL, eng_k_assign_variable},
    {"AvgPool", 0, eng_s_pool, eng_k_avg_pool},
    {"BatchMatMul", 0, eng_s_batch_matmul, eng_k_batch_matmul},
    {"BatchMatMulV2", 0, eng_s_batch_matmul, eng_k_batch_matmul},
    {"BatchMatMulV3", 0, eng_s_batch_matmul, eng_k_batch_matmul},
    {"BiasAdd", 0, eng_s_unary, eng_k_bias_add},
    {"BroadcastTo", 0, eng_s_unknown, eng_k_broadcast_to},
    {"Cast", 0, eng_s_unary, eng_k_cast},
    {"Ceil", 0, eng_s_unary, eng_k_unary},
    {"CheckNumerics", 0, eng_s_identity, eng_k_identity},
    {"ConcatV2", 0, eng_s_unknown, eng_k_concat_v2},
    {"Const", 0, eng_s_const, eng_k_const},
    {"Conv2D", 0, eng_s_conv2d, eng_k_conv2d},
    {"Cos", 0, eng_s_unary, eng_k_unary},
    {"Cumsum", 0, eng_s_unary, eng_k_cumsum},
    {"DepthwiseConv2dNative", 0, eng_s_conv2d, eng_k_depthwise_conv2d},
    {"DisableCopyOnRead", 0, NULL, eng_k_noop},
    {"Einsum", 0, eng_s_unknown, eng_k_einsum},
    {"Elu", 0, eng_s_unary, eng_k_unary},
    {"EnsureShape", 0, eng_s_identity, eng_k_identity},
    {"Equal", 0, eng_s_binary, eng_k_compare},
    {"Erf", 0, eng_s_unary, eng_k_unary},
    {"Erfc", 0, eng_s_unary, eng_k_unary},
    {"Exp", 0, eng_s_unary, eng_k_unary},
    {"ExpandDims", 0, eng_s_unknown, eng_k_expand_dims},
    {"Expm1", 0, eng_s_unary, eng_k_unary},
    {"Fill", 0, eng_s_unknown, eng_k_fill},
    {"Floor", 0, eng_s_unary, eng_k_unary},
    {"FusedBatchNorm", 0, eng_s_unknown, eng_k_fused_batch_norm},
    {"FusedBatchNormV2", 0, eng_s_unknown, eng_k_fused_batch_norm},
    {"FusedBatchNormV3", 0, eng_s_unknown, eng_k_fused_batch_norm},
    {"GatherV2", 0, eng_s_unknown, eng_k_gather_v2},
    {"Greater", 0, eng_s_binary, eng_k_compare},
    {"GreaterEqual", 0, eng_s_binary, eng_k_compare},
    {"Identity", 0, eng_s_identity, eng_k_identity},
    {"IdentityN", 0, eng_s_identity, eng_k_identity_n},
    {"LeakyRelu", 0, eng_s_unary, eng_k_leaky_relu},
    {"Less", 0, eng_s_binary, eng_k_compare},
    {"LessEqual", 0, eng_s_binary, eng_k_compare},
    {"Log", 0, eng_s_unary, eng_k_unary},
    {"Log1p", 0, eng_s_unary, eng_k_unary},
    {"LogSoftmax", 0, eng_s_unary, eng_k_softmax},
    {"LogicalAnd", 0, eng_s_binary, eng_k_logical},
    {"LogicalNot", 0, eng_s_unary, eng_k_logical_not},
    {"LogicalOr", 0, eng_s_binary, eng_k_logical},
    {"MatMul", 0, eng_s_matmul, eng_k_matmul},
    {"Max", 0, eng_s_unknown, eng_k_reduce},
    {"MaxPool", 0, eng_s_pool, eng_k_max_pool},
    {"Maximum", 0, eng_s_binary, eng_k_maximum},
    {"Mean", 0, eng_s_unknown, eng_k_reduce},
    {"Min", 0, eng_s_unknown, eng_k_reduce},
    {"Minimum", 0, eng_s_binary, eng_k_minimum},
    {"MirrorPad", 0, eng_s_unknown, eng_k_mirror_pad},
    {"Mul", 0, eng_s_binary, eng_k_mul},
    {"Neg", 0, eng_s_unary, eng_k_unary},
    {"NoOp", 0, NULL, eng_k_noop},
    {"NotEqual", 0, eng_s_binary, eng_k_compare},
    {"OneHot", 0, eng_s_unknown, eng_k_one_hot},
    {"OnesLike", 0, eng_s_unary, eng_k_ones_like},
    {"Pack", 0, eng_s_pack, eng_k_pack},
    {"Pad", 0, eng_s_unknown, eng_k_pad},
    {"PadV2", 0, eng_s_unknown, eng_k_pad},
    {"ParseExample", 0, NULL, eng_k_parse_example},
    {"ParseExampleV2", 0, NULL, eng_k_parse_example_v2},
    {"Placeholder", 0, eng_s_placeholder, eng_k_placeholder},
    {"PlaceholderWithDefault", 0, eng_s_identity, eng_k_identity},
    {"Pow", 0, eng_s_binary, eng_k_pow},
    {"PreventGradient", 0, eng_s_identity, eng_k_identity},
    {"Prod", 0, eng_s_unknown, eng_k_reduce},
    {"Range", 0, eng_s_unknown, eng_k_range},
    {"ReadVariableOp", 0, NULL, eng_k_read_variable},
    {"RealDiv", 0, eng_s_binary, eng_k_real_div},
    {"Reciprocal", 0, eng_s_unary, eng_k_unary},
    {"Relu", 0, eng_s_unary, eng_k_unary},
    {"Relu6", 0, eng_s_unary, eng_k_unary},
    {"Reshape", 0, eng_s_unknown, eng_k_reshape},
    {"RestoreV2", 0, NULL, eng_k_restore_v2},
    {"Round", 0, eng_s_unary, eng_k_unary},
    {"Rsqrt", 0, eng_s_unary, eng_k_unary},
    {"Select", 0, eng_s_select, eng_k_select},
    {"SelectV2", 0, eng_s_select, eng_k_select_v2},
    {"Selu", 0, eng_s_unary, eng_k_unary},
    {"Shape", 0, eng_s_shape, eng_k_shape},
    {"Sigmoid", 0, eng_s_unary, eng_k_unary},
    {"Sign", 0, eng_s_unary, eng_k_unary},
    {"Sin", 0, eng_s_unary, eng_k_unary},
    {"Slice", 0, eng_s_unknown, eng_k_slice},
    {"Snapshot", 0, eng_s_identity, eng_k_identity},
    {"Softmax", 0, eng_s_unary, eng_k_softmax},
    {"Softplus", 0, eng_s_unary, eng_k_unary},
    {"Softsign", 0, eng_s_unary, eng_k_unary},
    {"Split", 0, eng_s_unknown, eng_k_split},
    {"SplitV", 0, eng_s_unknown, eng_k_split_v},
    {"Sqrt", 0, eng_s_unary, eng_k_unary},
    {"Square", 0, eng_s_unary, eng_k_unary},
    {"SquaredDifference", 0, eng_s_binary, eng_k_squared_difference},
    {"Squeeze", 0, eng_s_squeeze, eng_k_squeeze},
    {"StopGradient", 0, eng_s_identity, eng_k_identity},
    {"StridedSlice", 0, eng_s_unknown, eng_k_strided_slice},
    {"Sub", 0, eng_s_binary, eng_k_sub},
    {"Sum", 0, eng_s_unknown, eng_k_reduce},
    {"Tanh", 0, eng_s_unary, eng_k_unary},
    {"Tile", 0, eng_s_unknown, eng_k_tile},
    {"Transpose", 0, eng_s_unknown, eng_k_transpose},
    {"Unpack", 0, eng_s_unpack, eng_k_unpack},
    {"VarHandleOp", 0, eng_s_scalar, eng_k_var_handle},
    {"VarIsInitializedOp", 0, eng_s_scalar, eng_k_var_is_initialized},
    {"VariableV2", 0, NULL, eng_k_variable_v2},
    {"ZerosLike", 0, eng_s_unary, eng_k_zeros_like},
};

#define N_OPS ((int)(sizeof ops / sizeof ops[0]))

const eng_op_def *eng_op_find(const char *name) {
  int lo = 0, hi = N_OPS - 1;
  while (lo <= hi) {
    int mid = (lo + hi) / 2;
    int c = strcmp(name, ops[mid].name);
    if (!c) return &ops[mid];
    if (c < 0)
      hi = mid - 1;
    else
      lo = mid + 1;
  }
  return NULL;
}

int eng_op_count(void) { return N_OPS; }

const eng_op_def *eng_op_at(int i) { return i >= 0 && i < N_OPS ? &ops[i] : NULL; }
