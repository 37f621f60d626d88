/* eng_einsum: a two-operand Einsum equation as one batched matrix product.
 *
 * Each label of "ab...,cd...->ef..." is a batch label (in both operands and
 * the output), a contracted label (in both operands, not the output) or a
 * free label of one operand (in it and the output). Then
 *   A permuted to [batch..., free_a..., contracted...] = [B, m, k],
 *   B permuted to [batch..., contracted..., free_b...] = [B, k, n],
 *   their product [batch..., free_a..., free_b...] permuted to the output.
 * An ellipsis ("...") stands for an operand's dims beyond its letters,
 * aligned on the right as NumPy aligns them; the output's "..." for the
 * longer of the two (dims that would broadcast 1 against n are
 * INVALID_ARGUMENT, not broadcast).
 * Equations outside that form (a label repeated in one operand,
 * a label summed away, one operand) are UNIMPLEMENTED naming the equation;
 * operand ranks or label sizes that disagree are INVALID_ARGUMENT. Both
 * the CPU kernel and the GPU lowering run the plan this makes. */
#ifndef ENG_EINSUM_H
#define ENG_EINSUM_H

#include "eng_tensor.h"

typedef struct eng_einsum {
  /* The labels: of A, B and the output, and by class. */
  char la[ENG_MAX_RANK], lb[ENG_MAX_RANK], lo[ENG_MAX_RANK];
  int na, nb, no;
  char lbatch[ENG_MAX_RANK], lfa[ENG_MAX_RANK], lfb[ENG_MAX_RANK], lct[ENG_MAX_RANK];
  int nbt, nfa, nfb, nct;
  int perm_a[ENG_MAX_RANK]; /* source dim of A for each permuted dim */
  int perm_b[ENG_MAX_RANK];
  int n_batch;
  int64_t batch_dim[ENG_MAX_RANK];
  int64_t batch, m, n, k; /* batch = the product of batch_dim */
  eng_shape prod;          /* [batch..., free_a..., free_b...] */
  int perm_out[ENG_MAX_RANK]; /* prod dim for each output dim */
  eng_shape out;
} eng_einsum;

td_code eng_einsum_plan(const char *eq, const eng_shape *a, const eng_shape *b, eng_einsum *e,
                        td_err *err);

/* A planned Einsum as one matrix product per batch index on A, B and the
 * output in place (no permuted copies): each operand's free and contracted
 * labels, and the output's free labels, merge into one memory dimension
 * each (in the same order everywhere), one of each operand's two unit-
 * stride. ta / tb: A / B stored transposed; lda, ldb, ldc: their row
 * strides; per batch label i, its size bdim[i] and its element stride in
 * A, B and the output st[0..2][i]; total is the number of products. */
typedef struct eng_einsum_gemm {
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  int nb;
  int64_t total;
  int64_t bdim[ENG_MAX_RANK], st[3][ENG_MAX_RANK];
} eng_einsum_gemm;

/* Whether e, planned for A of shape a and B of shape b, runs in place as
 * above (false when it does not, or when m, n or k is 0); fills g. */
bool eng_einsum_in_place(const eng_einsum *e, const eng_shape *a, const eng_shape *b,
                         eng_einsum_gemm *g);

/* Whether eq multiplies EVERY A it accepts by a constant B of shape b as
 * one in-place matrix product with no batch labels and A not transposed
 * (A [m, k] times B [k, n]: Keras's EinsumDense kernels), so that B can be
 * packed once at load and the original is never read; *k, *n and *trans_b
 * (B stored [n, k]) describe B as that matrix. The form depends only on the
 * order of the labels, not on their sizes, which is what makes "every A"
 * hold; equations with an ellipsis are not considered. */
bool eng_einsum_const_b(const char *eq, const eng_shape *b, int64_t *k, int64_t *n, bool *trans_b);
/* For such an equation, the sizes of B's free labels in B's order (*free:
 * n as a shape), which are the output's last dims in that order: a
 * per-channel constant over the product's n columns matches them. False
 * when eng_einsum_const_b is. */
bool eng_einsum_const_b_dims(const char *eq, const eng_shape *b, eng_shape *free);
/* Whether eng_einsum_plan can plan eq for some shapes (the load-time
 * check): UNIMPLEMENTED naming the equation when it cannot. */
td_code eng_einsum_check(const char *eq, td_err *err);

#endif
