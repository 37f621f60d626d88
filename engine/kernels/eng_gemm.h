/* eng_gemm: matrix products against a constant right-hand side packed once
 * at load (weights of MatMul and Conv2D), C[m,n] = A[m,k] B[k,n].
 *
 * OpenBLAS repacks B on every call, which at the batch sizes a server sees
 * (1 to 64 rows) costs as much as the arithmetic. Packed here, B is laid
 * out in panels of NR columns, k rows each, so the micro-kernel streams it
 * with aligned vector loads while a block of MR rows of A is broadcast from
 * L1. Panels are 32 columns wide (AVX-512) or 16 (AVX2), and the last
 * columns go to a 16- and/or 8-wide panel, so that layers with few output
 * channels (8, 24, 48) are not computed mostly on padding. AVX-512 and
 * AVX2+FMA kernels are chosen at run time (eng_isa_active: CPUID lowered by
 * the TENSORD_ENGINE_ISA cap); where neither is allowed, eng_gemm_pack
 * returns NULL and callers keep using BLAS.
 *
 * Each element of C is the sum over k in order, from zero, of one FMA per
 * term, whatever the panel width or entry point.
 *
 * Products big enough to pay for it are split over the engine's thread pool
 * (eng_pool): by blocks of rows of C, and by groups of column panels when
 * the rows are few; never along k, so every element is computed as above
 * at any thread count. Called from inside a pool chunk, a product runs on
 * the calling thread alone.
 *
 * A packed matrix is immutable and may be shared by any number of threads. */
#ifndef ENG_GEMM_H
#define ENG_GEMM_H

#include <stdbool.h>
#include <stdint.h>

#include "eng_isa.h"

typedef struct eng_packed eng_packed;

/* Packs B ([k,n] row-major, or [n,k] when trans_b). NULL when the active
 * instruction set is generic or memory is short. */
eng_packed *eng_gemm_pack(const float *b, int64_t k, int64_t n, bool trans_b);
/* The same with every column j of B multiplied by scale[j] (scale[0] for
 * all when nscale is 1) as it is packed: a per-channel multiply that would
 * follow the product (a batch-norm scale) done once at load. Each element
 * then rounds once as w * s instead of the sum being scaled and rounded
 * again: a different last bit, not a different order. The packed matrix
 * remembers it (eng_gemm_prescaled). */
eng_packed *eng_gemm_pack_scaled(const float *b, int64_t k, int64_t n, bool trans_b,
                                 const float *scale, int64_t nscale);
bool eng_gemm_prescaled(const eng_packed *p);
/* A set of `parts` products of the same k and n packed together (a
 * Winograd convolution's transformed filter: eng_wino.h). fn writes part t
 * ([k,n] row-major) into b, a buffer of k * n floats, and each part is
 * packed before the next is asked for, so the set's source is never
 * whole in memory; scale as eng_gemm_pack_scaled, the same for every part.
 * The set itself is not a product (its panels are empty): run its parts,
 * eng_gemm_part(p, t), each an ordinary packed matrix of k x n.
 * eng_gemm_parts is 0 for a matrix packed otherwise; eng_gemm_k and
 * eng_gemm_n give a part's dims. NULL as eng_gemm_pack_scaled. */
typedef void (*eng_gemm_part_fn)(void *arg, int64_t t, float *b);
eng_packed *eng_gemm_pack_parts(int64_t parts, int64_t k, int64_t n, eng_gemm_part_fn fn, void *arg,
                                const float *scale, int64_t nscale);
int64_t eng_gemm_parts(const eng_packed *p);
const eng_packed *eng_gemm_part(const eng_packed *p, int64_t i);
/* eng_gemm_pack_scaled for a given instruction set (ENG_ISA_AVX512 or
 * ENG_ISA_AVX2), so that tests reach the kernels of both on one CPU; NULL
 * for ENG_ISA_GENERIC and where eng_isa_allows(isa) is false (the CPU lacks
 * it, or the cap forbids it). */
eng_packed *eng_gemm_pack_isa(eng_isa isa, const float *b, int64_t k, int64_t n, bool trans_b,
                              const float *scale, int64_t nscale);
void eng_gemm_free(eng_packed *p);
int64_t eng_gemm_k(const eng_packed *p);
int64_t eng_gemm_n(const eng_packed *p);

/* Elementwise ops applied to the product in registers before it is stored
 * (a fused bias / batch-norm / activation chain), in order. k is a vector
 * over the n columns, or NULL for the scalar s; activations ignore both,
 * except swish, v * sigmoid(v * s) (s: Keras's beta, 1 for silu), whose
 * sigmoid is eng_vmath_sigmoid's to the bit (eng_vmath_sigmoid16/8), and
 * GELU's tanh and exact forms, k then pointing at their constants
 * (eng_epilogue.h's EPI_GELU_TANH: the cube eng_vmath_powi's, the tanh
 * eng_vmath_tanh's, eng_vmath_tanh16/8; EPI_GELU_ERFC: the erfc
 * eng_vmath_erfc's, eng_vmath_erfc16/8). ENG_GEMM_ADD_AT adds a run-time
 * tensor laid out like the whole output (a residual's shortcut): the
 * element written at byte address x of C gets the float at x + off added,
 * whichever rows, columns or leading dim the call covers. */
enum {
  ENG_GEMM_ADD,
  ENG_GEMM_SUB,
  ENG_GEMM_MUL,
  ENG_GEMM_RELU,
  ENG_GEMM_RELU6,
  ENG_GEMM_SWISH,
  ENG_GEMM_GELU_TANH,
  ENG_GEMM_GELU_ERFC,
  ENG_GEMM_ADD_AT
};
#define ENG_GEMM_EPI_MAX 8
typedef struct eng_gemm_epi {
  int n;
  struct {
    int kind;
    const float *k;
    float s;
    intptr_t off; /* ENG_GEMM_ADD_AT's */
  } op[ENG_GEMM_EPI_MAX];
} eng_gemm_epi;

/* C[m, n] = epi(A[m, k] * B), A rows lda apart, C rows ldc apart; epi may
 * be NULL. */
void eng_gemm_run(const float *a, int64_t lda, int64_t m, const eng_packed *b, float *c,
                  int64_t ldc, const eng_gemm_epi *epi);

/* The same with A given implicitly, as a convolution reads its input in
 * place: row r of A is nseg segments of seg_len floats, segment s starting
 * at rows[r] + s * seg_stride (k = nseg * seg_len). rows holds m pointers. */
void eng_gemm_run_rows(const float *const *rows, int64_t m, int64_t nseg, int64_t seg_stride,
                       int64_t seg_len, const eng_packed *b, float *c, int64_t ldc,
                       const eng_gemm_epi *epi);

/* eng_gemm_run on A's columns scaled: row r of the product is computed
 * exactly as eng_gemm_run computes it for the row a[r][i] * scale[i] (each
 * element that float product, as a Mul kernel rounds it), but the scaled
 * rows exist only a row block at a time in `scratch` (room floats, at
 * least eng_gemm_scaled_scratch(m, b): one block per thread that works on
 * the call), so the product never goes through memory (squeeze-and-
 * excitation's scale before a 1x1 projection). A leading dim lda of A;
 * k = eng_gemm_k(b). */
int64_t eng_gemm_scaled_scratch(int64_t m, const eng_packed *b);
void eng_gemm_run_scaled(const float *a, int64_t lda, int64_t m, const float *scale,
                         const eng_packed *b, float *c, int64_t ldc, const eng_gemm_epi *epi,
                         float *scratch, int64_t room);

/* C[m, n] = A[m, k] * B for a B computed at run time (attention's
 * products of two activations): B, rows ldb apart ([k,n], or [n,k] when
 * trans_b), is packed (over the pool's threads when large) into a buffer
 * the calling thread keeps for its next call (grown to the largest B so
 * far, freed when the thread exits; a pool helper running the call as a
 * chunk keeps one too, for the life of the process), then
 * multiplied as eng_gemm_run does, with the same summation order. Returns
 * false, C untouched, when the active instruction set is generic or memory
 * is short: the caller then uses BLAS. */
bool eng_gemm_dynamic(const float *a, int64_t lda, int64_t m, const float *b, int64_t ldb,
                      bool trans_b, int64_t k, int64_t n, float *c, int64_t ldc);

#endif
