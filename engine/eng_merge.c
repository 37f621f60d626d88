/* Merged steps (see eng_merge.h). Each pass matches its pattern from one
 * step through eng_pass's queries; a merge happens only where every value
 * it would stop storing has no reader outside the pattern and is neither
 * fed nor fetched. */
#include "eng_merge.h"

#include <stdlib.h>
#include <string.h>

#include "eng_gemm.h"
#include "eng_pass.h"
#include "eng_window.h"
#include "eng_wino.h"

void eng_merge_pad_views(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  int *readers = calloc((size_t)p->n_values + 1, sizeof *readers);
  int *reader = malloc(sizeof *reader * ((size_t)p->n_values + 1));
  if (!readers || !reader) goto out;
  eng_pass_count_readers(p, readers, reader);
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    int64_t pads[4];
    if (strcmp(p->ops[s]->name, "Pad") || (p->epi && p->epi[s]) || !eng_pad_hw(g, nd, pads))
      continue;
    int v = p->base[p->steps[s]];
    if (readers[v] != 1 || eng_pass_is_fetched(p, v) || eng_pass_is_fed(p, v)) continue;
    int d = reader[v];
    const eng_node *dn = eng_graph_node(g, p->steps[d]);
    if (strcmp(p->ops[d]->name, "DepthwiseConv2dNative") || dn->n_in != 2 ||
        p->base[dn->in[0].node] + dn->in[0].index != v ||
        strcmp(eng_attr_str(dn, "padding", "VALID"), "VALID") ||
        strcmp(eng_attr_str(dn, "data_format", "NHWC"), "NHWC"))
      continue;
    p->ops[s] = eng_op_find("_PadView");
    p->ops[d] = eng_op_find("_DepthwiseConv2dNativePadded");
  }
out:
  free(readers);
  free(reader);
}

/* --- LayerNorm ----------------------------------------------------------------
 *
 * Keras's LayerNormalization (centred and scaled, over one axis) as its
 * TensorFlow graph computes it from x:
 *   m = Mean(x, axis, keep_dims), g = StopGradient(m) (or m itself),
 *   d = SquaredDifference(x, g), v = Mean(d, axis, keep_dims),
 *   a = AddV2(v, eps), r = Rsqrt(a), i = Mul(r, gamma), n = Neg(m),
 *   t = Mul(n, i), u = AddV2(t, beta), w = Mul(x, i), y = AddV2(w, u)
 * with eps a float scalar, gamma and beta float constants laid out along
 * their last dim (binary ops' operands in either order), every value
 * between x and y read by the next ops of the chain only. The Mean step
 * becomes the plan-internal _LayerNorm (its node still reads x and the
 * axis); an epilogue carries gamma with eps (op 0) and beta (op 1) and
 * stores the result as y; the other eleven steps go. The kernel
 * (eng_k_layer_norm) computes each of those ops on a row as its own kernel
 * would, so the result is the same bit for bit; what goes away is ten
 * passes over the activations. CPU only: a device runs the ops as they
 * are. */

/* The only reader of step s's value (eng_pass_sole_reader). */
static int only_reader(const eng_plan *p, int s) {
  return eng_pass_sole_reader(p, p->base[p->steps[s]]);
}

/* A float constant with one value per element of its last dim (leading
 * dims 1): gamma or beta as Keras reshapes them for broadcasting. */
static const eng_tensor *last_dim_const(const eng_plan *p, int v) {
  const eng_tensor *k = eng_pass_const(p, v);
  if (!k || k->dtype != ENG_DT_FLOAT || k->shape.rank < 1) return NULL;
  for (int i = 0; i + 1 < k->shape.rank; i++)
    if (k->shape.dim[i] != 1) return NULL;
  return k;
}

/* Step s (an add or a multiply) reads value a and a last_dim_const: that
 * constant, else NULL. */
static const eng_tensor *const_beside(const eng_plan *p, int s, int a) {
  int v0 = eng_pass_in(p, s, 0), v1 = eng_pass_in(p, s, 1);
  if ((v0 == a) == (v1 == a)) return NULL;
  return last_dim_const(p, v0 == a ? v1 : v0);
}

static bool is_add(const eng_plan *p, int s) {
  return eng_pass_step_is(p, s, "AddV2", 2) || eng_pass_step_is(p, s, "Add", 2);
}

/* Whether Mean steps a and b reduce over the same one constant axis with
 * keep_dims. */
static bool same_one_axis(const eng_plan *p, int a, int b) {
  const eng_graph *g = eng_model_graph(p->m);
  const eng_tensor *ka = eng_pass_const(p, eng_pass_in(p, a, 1)),
                   *kb = eng_pass_const(p, eng_pass_in(p, b, 1));
  if (!ka || !kb || eng_tensor_numel(ka) != 1 || eng_tensor_numel(kb) != 1 ||
      ka->dtype != kb->dtype || (ka->dtype != ENG_DT_INT32 && ka->dtype != ENG_DT_INT64) ||
      memcmp(eng_tensor_data(ka), eng_tensor_data(kb), eng_dtype_size(ka->dtype)))
    return false;
  return eng_node_attr_bool(eng_graph_node(g, p->steps[a]), "keep_dims", false) &&
         eng_node_attr_bool(eng_graph_node(g, p->steps[b]), "keep_dims", false);
}

/* Matches the chain from Mean step sm; fills steps[11] (the chain after
 * sm), gamma, beta and eps, and returns y's value, or -1. */
static int layer_norm_at(const eng_plan *p, int sm, int steps[11], const eng_tensor **gamma,
                         const eng_tensor **beta, float *eps) {
  if (!eng_pass_step_is(p, sm, "Mean", 2)) return -1;
  int x = eng_pass_in(p, sm, 0), m = p->base[p->steps[sm]], rm[2];
  if (eng_pass_is_fetched(p, m) || eng_pass_is_fed(p, m) || eng_pass_readers_of(p, m, rm, 2) != 2)
    return -1;
  int sneg = eng_pass_step_is(p, rm[0], "Neg", 1)   ? rm[0]
             : eng_pass_step_is(p, rm[1], "Neg", 1) ? rm[1]
                                                    : -1;
  if (sneg < 0) return -1;
  int sg = rm[0] == sneg ? rm[1] : rm[0], sd = sg, gv = m;
  if (eng_pass_step_is(p, sg, "StopGradient", 1)) {
    sd = only_reader(p, sg);
    gv = p->base[p->steps[sg]];
  } else {
    sg = -1;
  }
  if (sd < 0 || !eng_pass_reads_both(p, sd, "SquaredDifference", x, gv)) return -1;
  int sv = only_reader(p, sd);
  if (sv < 0 || !eng_pass_step_is(p, sv, "Mean", 2) ||
      eng_pass_in(p, sv, 0) != p->base[p->steps[sd]] || !same_one_axis(p, sm, sv))
    return -1;
  int sa = only_reader(p, sv);
  const eng_tensor *e =
      sa >= 0 && is_add(p, sa) ? eng_pass_scalar_beside(p, sa, p->base[p->steps[sv]]) : NULL;
  int sr = e ? only_reader(p, sa) : -1;
  if (sr < 0 || !eng_pass_step_is(p, sr, "Rsqrt", 1)) return -1;
  int smul = only_reader(p, sr);
  if (smul < 0 || !eng_pass_step_is(p, smul, "Mul", 2) ||
      !(*gamma = const_beside(p, smul, p->base[p->steps[sr]])))
    return -1;
  int inv = p->base[p->steps[smul]], ri[2];
  if (eng_pass_is_fetched(p, inv) || eng_pass_is_fed(p, inv) ||
      eng_pass_readers_of(p, inv, ri, 2) != 2)
    return -1;
  int smul1 = only_reader(p, sneg);
  if (smul1 < 0 || !eng_pass_reads_both(p, smul1, "Mul", p->base[p->steps[sneg]], inv)) return -1;
  int smul2 = ri[0] == smul1 ? ri[1] : ri[0];
  if (smul2 == smul1 || !eng_pass_reads_both(p, smul2, "Mul", x, inv)) return -1;
  int sadd1 = only_reader(p, smul1);
  if (sadd1 < 0 || !is_add(p, sadd1) || !(*beta = const_beside(p, sadd1, p->base[p->steps[smul1]])))
    return -1;
  int sadd2 = only_reader(p, smul2);
  if (sadd2 < 0 || !is_add(p, sadd2) || only_reader(p, sadd1) != sadd2 ||
      !eng_pass_reads_both(p, sadd2, p->ops[sadd2]->name, p->base[p->steps[smul2]],
                           p->base[p->steps[sadd1]]))
    return -1;
  if (eng_tensor_numel(*gamma) != eng_tensor_numel(*beta)) return -1;
  const int chain[11] = {sg, sd, sv, sa, sr, smul, sneg, smul1, sadd1, smul2, sadd2};
  for (int i = 0; i < 11; i++) steps[i] = chain[i];
  *eps = *(const float *)eng_tensor_data(e);
  return p->base[p->steps[sadd2]];
}

static int merge_layer_norm(eng_plan *p, int s, const eng_op_def *op, bool *gone) {
  int steps[11];
  const eng_tensor *gamma, *beta;
  float eps;
  if (p->epi[s]) return 0;
  int y = layer_norm_at(p, s, steps, &gamma, &beta, &eps);
  for (int i = 0; i < 11 && y >= 0; i++)
    if (steps[i] >= 0 && (gone[steps[i]] || p->epi[steps[i]])) y = -1;
  if (y < 0) return 0;
  eng_epilogue *e = calloc(1, sizeof *e);
  if (!e) return -1;
  e->n = 2;
  e->op[0].kind = e->op[1].kind = EPI_LAYER_NORM;
  e->op[0].k = eng_tensor_share(gamma);
  e->op[0].c[0] = eps;
  e->op[1].k = eng_tensor_share(beta);
  e->out_value = y;
  p->epi[s] = e;
  p->ops[s] = op;
  for (int i = 0; i < 11; i++)
    if (steps[i] >= 0) {
      gone[steps[i]] = true;
      e->op[1].c[0]++;
    }
  return 1;
}

void eng_merge_layer_norms(eng_plan *p) {
  eng_pass_rewrite(p, "_LayerNorm", false, merge_layer_norm);
}

/* --- expansion and depthwise ------------------------------------------------
 *
 * An inverted residual block's 1x1 expansion (a Conv2D, stride 1, its
 * weight packed and not in Winograd's form) whose output, after its fused
 * epilogue, only a depthwise convolution with multiplier 1 reads (directly,
 * or through a Pad folded into it) becomes one _ExpandDepthwise step,
 * which runs both band by band (eng_dwconv_expand_run): the expanded
 * tensor, the block's largest, then stays in cache. Its epilogue holds
 * the expansion's ops, an EPI_DEPTHWISE op (the depthwise filter, already
 * scaled by scale_dw_filters, and node) and the depthwise layer's ops;
 * the depthwise step and the Pad's leave the plan. Runs after the weights
 * are packed, CPU only. Bit-identical to the two steps apart. */

/* Epilogue ops both the GEMM's and the depthwise kernel's registers apply. */
static bool band_epi_ok(const eng_epilogue *e) {
  for (int i = 0; e && i < e->n; i++) {
    int k = e->op[i].kind;
    if (k != EPI_ADD && k != EPI_SUB && k != EPI_MUL && k != EPI_RELU && k != EPI_RELU6 &&
        k != EPI_SWISH)
      return false;
  }
  return true;
}

/* Step s is a 1x1 stride-1 NHWC Conv2D with a packed (not Winograd)
 * weight, never grouped. */
static bool expansion_at(const eng_plan *p, int s) {
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[s]);
  if (strcmp(p->ops[s]->name, "Conv2D") || nd->n_in != 2 || !p->packed[s] ||
      eng_gemm_parts(p->packed[s]))
    return false;
  const eng_packed *b = p->packed[s];
  const eng_tensor *w = eng_pass_const(p, eng_pass_in(p, s, 1));
  int64_t st[4] = {1, 1, 1, 1}, dl[4] = {1, 1, 1, 1};
  int nst = eng_attr_ints(nd, "strides", st, 4), ndl = eng_attr_ints(nd, "dilations", dl, 4);
  if (!w || w->shape.rank != 4 || w->shape.dim[0] != 1 || w->shape.dim[1] != 1 ||
      eng_gemm_k(b) != w->shape.dim[2] || eng_gemm_n(b) != w->shape.dim[3] ||
      eng_wino_form(b, eng_gemm_k(b), eng_gemm_n(b)))
    return false;
  for (int i = 0; i < 4; i++)
    if (st[i] != 1 || dl[i] != 1) return false;
  return nst == 4 && eng_plan_conv_runs_packed(p->m, p, s) && (!ndl || ndl == 4) &&
         !strcmp(eng_attr_str(nd, "data_format", "NHWC"), "NHWC") &&
         strcmp(eng_attr_str(nd, "padding", "VALID"), "EXPLICIT");
}

static int merge_expand_depthwise(eng_plan *p, int s, const eng_op_def *op, bool *gone) {
  eng_epilogue *e = p->epi[s];
  if (!expansion_at(p, s) || !band_epi_ok(e)) return 0;
  int v = e ? e->out_value : p->base[p->steps[s]], d = eng_pass_sole_reader(p, v), pad = -1;
  if (d >= 0 && !strcmp(p->ops[d]->name, "_PadView")) {
    pad = d;
    v = p->base[p->steps[pad]];
    d = eng_pass_sole_reader(p, v);
    if (d >= 0 && strcmp(p->ops[d]->name, "_DepthwiseConv2dNativePadded")) d = -1;
  } else if (d >= 0 && strcmp(p->ops[d]->name, "DepthwiseConv2dNative")) {
    d = -1;
  }
  if (d < 0 || gone[d]) return 0;
  const eng_node *dn = eng_graph_node(eng_model_graph(p->m), p->steps[d]);
  eng_epilogue *de = p->epi[d];
  const eng_tensor *f = dn->n_in == 2 ? eng_pass_const(p, eng_pass_in(p, d, 1)) : NULL;
  if (!f || eng_pass_in(p, d, 0) != v || f->dtype != ENG_DT_FLOAT || f->shape.rank != 4 ||
      f->shape.dim[3] != 1 || f->shape.dim[2] != eng_gemm_n(p->packed[s]) || !band_epi_ok(de) ||
      (e ? e->n : 0) + 1 + (de ? de->n : 0) > ENG_EPI_MAX)
    return 0;
  if (!e && !(e = calloc(1, sizeof *e))) return -1;
  e->op[e->n].kind = EPI_DEPTHWISE;
  e->op[e->n].k = eng_tensor_share(f);
  e->op[e->n].node = p->steps[d];
  e->n++;
  for (int i = 0; de && i < de->n; i++) { /* the depthwise layer's ops move over */
    e->op[e->n++] = de->op[i];
    de->op[i].k = (eng_tensor){0};
  }
  e->out_value = de ? de->out_value : p->base[p->steps[d]];
  free(de);
  p->epi[d] = NULL;
  p->epi[s] = e;
  p->ops[s] = op;
  gone[d] = true;
  if (pad >= 0) gone[pad] = true;
  return 1;
}

void eng_merge_expand_depthwise(eng_plan *p) {
  eng_pass_rewrite(p, "_ExpandDepthwise", true, merge_expand_depthwise);
}

/* --- a scale before a 1x1 convolution -----------------------------------
 *
 * A Mul (squeeze-and-excitation's excite: the block's activations times
 * one gate per image and channel) whose product only a 1x1 stride-1
 * Conv2D with a packed weight reads (a block's projection) becomes one
 * _ScaledConv1x1 step at the Mul's place: the GEMM scales each block of
 * rows as it reads them (eng_gemm_run_scaled), so the product, as large as
 * the activations, is never written and read back. The Conv2D's packed
 * weight and epilogue move to the Mul's step and the Conv2D's step leaves
 * the plan. The operands' shapes are only known at run time: the kernel
 * runs any other broadcast as the Mul kernel into a temporary first. Runs
 * after the weights are packed, CPU only. Bit-identical to the two steps
 * apart. */
static int merge_scaled_conv(eng_plan *p, int s, const eng_op_def *op, bool *gone) {
  if (!eng_pass_step_is(p, s, "Mul", 2) || p->epi[s] || p->packed[s]) return 0;
  int v = p->base[p->steps[s]], d = eng_pass_sole_reader(p, v);
  if (d < 0 || gone[d] || !expansion_at(p, d) || eng_pass_in(p, d, 0) != v || !p->epi[d]) return 0;
  p->ops[s] = op;
  p->packed[s] = p->packed[d];
  p->epi[s] = p->epi[d];
  p->packed[d] = NULL;
  p->epi[d] = NULL;
  gone[d] = true;
  return 1;
}

void eng_merge_scaled_conv(eng_plan *p) {
  eng_pass_rewrite(p, "_ScaledConv1x1", true, merge_scaled_conv);
}