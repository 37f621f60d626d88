/* eng_kernels: the CPU kernels and shape functions behind the op table.
 * Internal to engine/: only eng_op.c and the kernel files include it. */
#ifndef ENG_KERNELS_H
#define ENG_KERNELS_H

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

#endif
