/* eng_epilogue (internal to engine/): elementwise per-channel ops fused
 * after a Conv2D, DepthwiseConv2dNative, MatMul, dense BatchMatMul or
 * dense-layer Einsum step (bias, batch-norm scale and shift, ReLU / ReLU6,
 * swish, GELU), applied in place to the step's output.
 *
 * The compiler (eng_compile.c) builds an epilogue at load and hangs it on
 * the step (eng_plan.h); at run time a kernel that can apply it while its
 * output is hot does so (eng_kepilogue row by row, or eng_kgemm_epi inside
 * the GEMM's register tiles) and marks it done, else the run loop applies
 * it afterwards (eng_epilogue_apply). The arithmetic is the separate
 * kernels', element for element. An epilogue is read-only once built: any
 * number of runs may apply it at once. */
#ifndef ENG_EPILOGUE_H
#define ENG_EPILOGUE_H

#include "eng_op.h"

/* EPI_SWISH: y = y * sigmoid(y * k), k a scalar (Keras's beta; empty: 1),
 * the sigmoid eng_vmath_sigmoid's, so that it matches the Sigmoid and Mul
 * kernels it replaces bit for bit; always an epilogue's last op. */
/* EPI_GELU_TANH: TensorFlow's approximate GELU as its graph computes it,
 * with c = {a, b, one, half} its constants (0.044715, sqrt(2/pi), 1, 0.5):
 *   y = (half * x) * (one + tanh(b * (x + a * x^3)))
 * x^3 as the Pow kernel's fast path computes it (eng_vmath_powi), tanh as
 * the Tanh kernel's (eng_vmath_tanh), every other operation one float add
 * or multiply in that order, so that it matches the eight kernels it
 * replaces bit for bit; always an epilogue's last op, never after a
 * depthwise convolution (its kernel has no GELU). */
/* EPI_GELU_ERFC: its exact form, c = {s, half} (0.7071068, 0.5):
 *   y = (half * x) * erfc((-x) * s)
 * the erfc eng_vmath_erfc's; the same rules. */
/* EPI_ADD_VALUE: y = y + r, r a run-time value of the plan (in_value: a
 * residual block's shortcut), at most one per epilogue, only after a
 * Conv2D, MatMul, dense BatchMatMul or Einsum on the CPU (a device has no
 * form of it), and only where a ReLU or ReLU6 follows it. The step reads r
 * as it reads its inputs (uses, release, slicing). Where r has the
 * output's shape and is float, the kernel adds it element for element
 * where it applies the rest; otherwise the run loop runs the Add kernel
 * itself, broadcasting as the graph's Add would. */
/* EPI_LAYER_NORM: not applied in place: the two ops of a _LayerNorm step
 * (eng_merge_layer_norms), gamma with eps in c[0] (op 0) and
 * beta with, in c[0], how many graph ops the step stands for besides its
 * Mean (op 1, for eng_plan_get_info), which its kernel reads and applies
 * itself (it always sets epi_done). */
/* EPI_DEPTHWISE: not applied in place: in an _ExpandDepthwise step
 * (eng_merge_expand_depthwise, a 1x1 Conv2D and the depthwise
 * convolution reading it), the ops before it are the expansion's, k the
 * depthwise filter [kh, kw, c, 1] (already scaled, eng_fuse_dw_scales),
 * node the depthwise graph node (its attributes; a Pad node feeding it
 * is a folded one), and the ops after it the depthwise layer's. Its kernel
 * applies all of them itself. */
enum {
  EPI_ADD,
  EPI_SUB,
  EPI_MUL,
  EPI_RELU,
  EPI_RELU6,
  EPI_SWISH,
  EPI_GELU_TANH,
  EPI_GELU_ERFC,
  EPI_ADD_VALUE,
  EPI_LAYER_NORM,
  EPI_DEPTHWISE
};

#define ENG_EPI_MAX 8

typedef struct eng_epilogue {
  int n;
  struct {
    int kind;
    eng_tensor k; /* float constant: one value or one per channel; empty for activations */
    float c[4];   /* EPI_GELU_TANH's or EPI_GELU_ERFC's constants */
    int node;     /* EPI_DEPTHWISE's depthwise node */
  } op[ENG_EPI_MAX];
  int out_value; /* value index the result is stored as */
  int in_value;  /* with an EPI_ADD_VALUE op: the value it adds, */
  int in_node;   /* and the Add node it stands for (named in its errors) */
} eng_epilogue;

/* The run-time value e reads (EPI_ADD_VALUE's), or -1; e may be NULL. */
int eng_epilogue_input(const eng_epilogue *e);

/* Applies an epilogue in place to a float tensor whose last dim is the
 * channel dim; add is the EPI_ADD_VALUE operand, of t's shape (NULL
 * without one). */
void eng_epilogue_apply(const eng_epilogue *e, eng_tensor *t, const eng_tensor *add);
/* For the run loop: applies the kernel context's epilogue to its out[0]
 * after a kernel that did not. An EPI_ADD_VALUE operand not of out[0]'s
 * shape and dtype runs as the Add kernel (eng_k_add, broadcasting; out[0]
 * is replaced by the sum), between the ops before and after it. Fails only
 * as that Add would. */
td_code eng_epilogue_after(eng_kctx *c);

/* For kernels. Applies the kernel's fused epilogue (if any) to `rows` rows
 * of ch floats just written into out[0] (none of it applied yet: not after
 * eng_kgemm_epi), and marks it done; with an
 * EPI_ADD_VALUE operand not of out[0]'s shape and dtype, only the ops
 * before it (kctx's epi_part; the run loop does the rest). */
void eng_kepilogue(eng_kctx *c, float *y, int64_t rows, int64_t ch);
/* For a kernel that applies its epilogue itself over the pool's chunks:
 * eng_kepilogue_take, on the calling thread, decides which ops are the
 * kernel's (as eng_kgemm_epi: all, or those before an operand not of
 * out[0]'s shape and dtype; after a leading multiply that weights packed
 * prescaled already hold), marks them done (epi_done, or epi_part) and
 * keeps them in r. eng_kepilogue_rows applies them to `rows` rows of ch
 * floats of out[0] at y; it only reads r, so chunks may call it at once. */
typedef struct eng_kepi {
  const eng_epilogue *e;
  int from, to;     /* ops [from, to) */
  const float *add; /* the EPI_ADD_VALUE operand's data, laid out as out: */
  const float *out; /* out[0]'s */
} eng_kepi;
void eng_kepilogue_take(eng_kctx *c, eng_kepi *r);
void eng_kepilogue_rows(const eng_kepi *r, float *y, int64_t rows, int64_t ch);
/* The kernel's fused epilogue as eng_gemm applies it in registers (over n
 * output channels), for a product written into out[0] (allocated first);
 * NULL when there is none. Marks it done; with an EPI_ADD_VALUE operand
 * not of out[0]'s shape and dtype, it holds the ops before it only (and
 * sets epi_part instead). */
struct eng_gemm_epi;
const struct eng_gemm_epi *eng_kgemm_epi(eng_kctx *c, struct eng_gemm_epi *buf);

#endif
