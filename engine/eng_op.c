#include "eng_op.h"

#include <string.h>

#include "eng_kernels.h"

/* Sorted by name: eng_op_find bisects. */
static const eng_op_def ops[] = {
    {"Add", 0, eng_s_binary, eng_k_add},
    {"AddV2", 0, eng_s_binary, eng_k_add},
    {"Assign", ENG_OP_REF_INPUT0 | ENG_OP_STATEFUL, NULL, eng_k_assign},
    {"AssignVariableOp", ENG_OP_STATEFUL, NULL, eng_k_assign_variable},
    {"Const", 0, eng_s_const, eng_k_const},
    {"DisableCopyOnRead", 0, NULL, eng_k_noop},
    {"Identity", 0, eng_s_identity, eng_k_identity},
    {"IdentityN", 0, eng_s_identity, eng_k_identity_n},
    {"Maximum", 0, eng_s_binary, eng_k_maximum},
    {"Minimum", 0, eng_s_binary, eng_k_minimum},
    {"Mul", 0, eng_s_binary, eng_k_mul},
    {"NoOp", 0, NULL, eng_k_noop},
    {"Placeholder", 0, eng_s_placeholder, eng_k_placeholder},
    {"PlaceholderWithDefault", 0, eng_s_identity, eng_k_identity},
    {"ReadVariableOp", 0, NULL, eng_k_read_variable},
    {"RealDiv", 0, eng_s_binary, eng_k_real_div},
    {"RestoreV2", 0, NULL, eng_k_restore_v2},
    {"Snapshot", 0, eng_s_identity, eng_k_identity},
    {"StopGradient", 0, eng_s_identity, eng_k_identity},
    {"Sub", 0, eng_s_binary, eng_k_sub},
    {"VarHandleOp", 0, eng_s_scalar, eng_k_var_handle},
    {"VarIsInitializedOp", 0, eng_s_scalar, eng_k_var_is_initialized},
    {"VariableV2", 0, NULL, eng_k_variable_v2},
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
