/* Load-time optimisation of a plan (see eng_plan.h).
 *
 * Folding: once variables are restored, a serving plan's variable reads are
 * as constant as its Const nodes. A step is constant when it writes no
 * state, is not a Placeholder, RestoreV2 or a random source (ENG_OP_RANDOM),
 * and all its data and control inputs are constant and not fed. The
 * constant values that non-constant
 * steps (or fetches) read, the frontier, are computed once by running a
 * sub-plan that fetches them; the constant steps then leave the schedule.
 * Only plans that write no state are folded: a restore plan reads
 * variables while it assigns them.
 *
 * Fusion: a Conv2D, DepthwiseConv2dNative, MatMul, dense BatchMatMul or
 * dense-layer Einsum (EinsumDense: its per-channel constants span the
 * weight's free dims) whose output feeds a chain of single-consumer
 * elementwise ops with constant per-channel (or scalar) operands (BiasAdd,
 * Add/AddV2, Sub, Mul: biases and decomposed batch norm) and ReLU/ReLU6,
 * ending perhaps in a swish (x * sigmoid(x), Keras's silu with its
 * IdentityN) or, except after a depthwise convolution, a GELU (the eight
 * ops of TensorFlow's gelu(approximate=True), gelu_at, or the five of its
 * exact form, gelu_erfc_at), runs the chain in place on its own output.
 * The arithmetic is the same, element for element, as the separate
 * kernels', so results are bit-identical; what goes away is one output
 * allocation and one pass over memory per fused op. Keras's
 * LayerNormalization (its Mean and the chain after it) likewise becomes
 * one step (fuse_layer_norms), an inverted residual block's expansion
 * and depthwise layer one banded step (fuse_expand_depthwise), and a
 * per-channel scale and the 1x1 projection reading it one step
 * (fuse_scaled_conv). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_device.h"
#include "eng_einsum.h"
#include "eng_gemm.h"
#include "eng_plan.h"
#include "eng_run.h"
#include "eng_window.h"
#include "eng_wino.h"

static bool foldable_plan(const eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    if ((p->ops[s]->flags & (ENG_OP_STATEFUL | ENG_OP_DEAD_FLOW)) || !strcmp(nd->op, "RestoreV2"))
      return false;
  }
  return true;
}

static bool is_fed(const eng_plan *p, int v) {
  for (int i = 0; i < p->n_inputs; i++)
    if (p->in_value[i] == v) return true;
  return false;
}

static bool is_fetched(const eng_plan *p, int v) {
  for (int i = 0; i < p->n_outputs; i++)
    if (p->out_value[i] == v) return true;
  return false;
}

static void drop_steps(eng_plan *p, const bool *gone) {
  int k = 0;
  for (int s = 0; s < p->n_steps; s++) {
    if (gone[s]) continue;
    p->steps[k] = p->steps[s];
    p->ops[k] = p->ops[s];
    if (p->epi) p->epi[k] = p->epi[s];
    if (p->packed) p->packed[k] = p->packed[s];
    k++;
  }
  p->n_steps = k;
}

/* The "node:output" name of value v (value indices follow node order). */
static char *value_name(const eng_graph *g, const eng_plan *p, int v) {
  int lo = 0, hi = eng_graph_node_count(g) - 1;
  while (lo < hi) { /* the last node whose first value is <= v */
    int mid = lo + (hi - lo + 1) / 2;
    if (p->base[mid] <= v)
      lo = mid;
    else
      hi = mid - 1;
  }
  while (lo > 0 && eng_graph_node(g, lo)->n_out == 0) lo--;
  const eng_node *nd = eng_graph_node(g, lo);
  if (v < p->base[lo] || v >= p->base[lo] + nd->n_out) return NULL;
  size_t len = strlen(nd->name) + 16;
  char *name = malloc(len);
  if (name) snprintf(name, len, "%s:%d", nd->name, v - p->base[lo]);
  return name;
}

/* Gives the sub-plan that computes a shape specialisation's constants the
 * packed weights of the general plan `known` (may be NULL) for the same
 * nodes: a Shape of an activation is computed by running the layers before
 * it, and their weights may be held only packed (eng_model.h), their
 * originals hollow. Not the weights packed prescaled: without the
 * epilogue that carries the rest of the batch norm they would compute
 * other values. False when memory is short. */
static bool share_packed(eng_plan *sub, const eng_plan *known) {
  if (!known || !known->packed) return true;
  int n = eng_graph_node_count(eng_model_graph(sub->m));
  int *at = malloc(sizeof *at * ((size_t)n + 1));
  sub->packed = calloc((size_t)sub->n_steps + 1, sizeof *sub->packed);
  if (!at || !sub->packed) {
    free(at);
    return false;
  }
  for (int i = 0; i < n; i++) at[i] = -1;
  for (int s = 0; s < known->n_steps; s++) at[known->steps[s]] = s;
  for (int s = 0; s < sub->n_steps; s++) {
    int ks = at[sub->steps[s]];
    if (ks >= 0 && known->packed[ks] && !eng_gemm_prescaled(known->packed[ks]))
      sub->packed[s] = known->packed[ks];
  }
  free(at);
  return true;
}

/* Removes the steps marked constant (cstep; cnode per graph node) after
 * computing, with one sub-plan run fed `in` (may be none), the constant
 * values that the remaining steps or the fetches read. Leaves the plan
 * untouched when that run fails. `known` (may be NULL) is a plan of the
 * same graph whose constants are reused as they are (fed to that run, or
 * taken directly): a shape specialisation then reads no variable again,
 * and shares its parent's weights, packed or not (a weight whose original
 * the model released after packing is never recomputed from it), the
 * sub-plan running the parent's packed weights (share_packed). */
static bool fold_steps(eng_plan *p, const bool *cstep, const bool *cnode, const eng_tensor *in,
                       const eng_plan *known) {
  const eng_graph *g = eng_model_graph(p->m);
  int nk = known ? known->n_consts : 0, n_in = in ? p->n_inputs : 0;
  bool *front = calloc((size_t)p->n_values + 1, sizeof *front);
  int *fv = malloc(sizeof *fv * ((size_t)p->n_values + 1));
  char **names = calloc((size_t)p->n_values + 1, sizeof *names);
  const char **in_names = calloc((size_t)(n_in + nk) + 1, sizeof *in_names);
  char **known_names = calloc((size_t)nk + 1, sizeof *known_names);
  eng_tensor *feeds = calloc((size_t)(n_in + nk) + 1, sizeof *feeds);
  int *known_at = malloc(sizeof *known_at * ((size_t)p->n_values + 1)); /* value -> const, -1 */
  eng_tensor *vals = NULL;
  eng_plan *sub = NULL;
  int nf = 0, nd_known = 0;
  bool ok = false;
  if (!front || !fv || !names || !in_names || !known_names || !feeds || !known_at) goto out;
  for (int v = 0; v < p->n_values; v++) known_at[v] = -1;
  for (int i = 0; i < nk; i++)
    if (known->const_value[i] < p->n_values) known_at[known->const_value[i]] = i;
  /* Except depthwise filters: scale_dw_filters may have rewritten those,
   * for an epilogue of its own plan. */
  for (int s = 0; known && s < known->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, known->steps[s]);
    if (nd->n_in == 2 && (!strcmp(known->ops[s]->name, "DepthwiseConv2dNative") ||
                          !strcmp(known->ops[s]->name, "_DepthwiseConv2dNativePadded")))
      known_at[known->base[nd->in[1].node] + nd->in[1].index] = -1;
    const eng_epilogue *e = known->epi ? known->epi[s] : NULL;
    for (int i = 0; e && i < e->n; i++) /* a depthwise step fused into this one */
      if (e->op[i].kind == EPI_DEPTHWISE) {
        const eng_node *dn = eng_graph_node(g, e->op[i].node);
        known_at[known->base[dn->in[1].node] + dn->in[1].index] = -1;
      }
  }
  for (int i = 0; i < n_in; i++) {
    in_names[i] = p->in_name[i];
    feeds[i] = in[i];
  }
  int n_feeds = n_in;
  for (int i = 0; i < nk; i++) {
    int v = known->const_value[i];
    if (v >= p->n_values || known_at[v] != i) continue;
    if (!(known_names[i] = value_name(g, p, v))) goto out;
    in_names[n_feeds] = known_names[i];
    feeds[n_feeds++] = known->const_tensor[i];
  }
  for (int s = 0; s < p->n_steps; s++) {
    if (cstep[s]) continue;
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++) {
      int v = p->base[nd->in[k].node] + nd->in[k].index;
      if (cnode[nd->in[k].node] && !is_fed(p, v)) front[v] = true;
    }
  }
  for (int i = 0; i < p->n_outputs; i++) {
    int v = p->out_value[i];
    for (int s = 0; s < p->n_steps; s++)
      if (cstep[s] && v >= p->base[p->steps[s]] &&
          v < p->base[p->steps[s]] + eng_graph_node(g, p->steps[s])->n_out && !is_fed(p, v))
        front[v] = true;
  }
  /* Known values first in fv (taken as they are), then those to compute. */
  for (int pass = 0; pass < 2; pass++)
    for (int s = 0; s < p->n_steps; s++) {
      if (!cstep[s]) continue;
      const eng_node *nd = eng_graph_node(g, p->steps[s]);
      for (int o = 0; o < nd->n_out; o++) {
        int v = p->base[p->steps[s]] + o;
        if (!front[v] || (known_at[v] >= 0) != (pass == 0)) continue;
        if (pass == 1) {
          size_t len = strlen(nd->name) + 16;
          names[nf - nd_known] = malloc(len);
          if (!names[nf - nd_known]) goto out;
          snprintf(names[nf - nd_known], len, "%s:%d", nd->name, o);
        } else {
          nd_known++;
        }
        fv[nf++] = v;
      }
    }
  vals = calloc((size_t)nf + 1, sizeof *vals);
  if (!vals) goto out;
  for (int i = 0; i < nd_known; i++) vals[i] = eng_tensor_share(&known->const_tensor[known_at[fv[i]]]);
  td_err err;
  td_err_clear(&err);
  if (nf > nd_known &&
      (eng_plan_build(p->m, n_feeds, in_names, nf - nd_known, (const char *const *)names, 0,
                      NULL, &sub, &err) ||
       !share_packed(sub, known) || eng_run_cpu(sub, feeds, vals + nd_known, &err)))
    goto out; /* leave the plan unfolded: the run reports the error */
  int *cv = realloc(p->const_value, sizeof *cv * ((size_t)(p->n_consts + nf) + 1));
  if (cv) p->const_value = cv;
  eng_tensor *ct = cv ? realloc(p->const_tensor, sizeof *ct * ((size_t)(p->n_consts + nf) + 1)) : NULL;
  if (ct) p->const_tensor = ct;
  if (!cv || !ct) goto out;
  for (int i = 0; i < nf; i++) {
    p->const_value[p->n_consts + i] = fv[i];
    p->const_tensor[p->n_consts + i] = vals[i];
    vals[i] = (eng_tensor){0};
  }
  p->n_consts += nf;
  drop_steps(p, cstep);
  ok = true;
out:
  if (vals)
    for (int i = 0; i < nf; i++) eng_tensor_release(&vals[i]);
  for (int i = 0; names && i < nf; i++) free(names[i]);
  for (int i = 0; known_names && i < nk; i++) free(known_names[i]);
  eng_plan_destroy(sub);
  free(vals);
  free(names);
  free(known_names);
  free(in_names);
  free(feeds);
  free(known_at);
  free(fv);
  free(front);
  return ok;
}

static void fold(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  int n = eng_graph_node_count(g), nconst = 0;
  bool *cnode = calloc((size_t)n + 1, sizeof *cnode);
  bool *cstep = calloc((size_t)p->n_steps + 1, sizeof *cstep);
  if (cnode && cstep) {
    for (int s = 0; s < p->n_steps; s++) {
      const eng_node *nd = eng_graph_node(g, p->steps[s]);
      bool c = strcmp(nd->op, "Placeholder") != 0 && !(p->ops[s]->flags & ENG_OP_RANDOM);
      for (int k = 0; k < nd->n_in && c; k++)
        c = cnode[nd->in[k].node] && !is_fed(p, p->base[nd->in[k].node] + nd->in[k].index);
      for (int k = 0; k < nd->n_ctrl && c; k++) c = cnode[nd->ctrl[k]];
      cnode[p->steps[s]] = cstep[s] = c;
      nconst += c;
    }
    if (nconst) fold_steps(p, cstep, cnode, NULL, NULL);
  }
  free(cstep);
  free(cnode);
}

static const eng_tensor *const_of(const eng_plan *p, int v) {
  for (int i = 0; i < p->n_consts; i++)
    if (p->const_value[i] == v) return &p->const_tensor[i];
  return NULL;
}

/* A constant usable per channel: float, one value, or C values laid out
 * along the last of at most `rank` dims. */
static bool channel_const(const eng_tensor *k, int64_t c, int rank) {
  if (!k || k->dtype != ENG_DT_FLOAT || k->shape.rank > rank) return false;
  int64_t n = eng_tensor_numel(k);
  if (n == 1) return true;
  if (c <= 0 || n != c) return false;
  return k->shape.dim[k->shape.rank - 1] == c;
}

/* The dims of a constant int32/int64 shape vector, all known (no -1). */
static bool const_dims(const eng_tensor *t, eng_shape *out) {
  if (!t || t->shape.rank != 1 || (t->dtype != ENG_DT_INT32 && t->dtype != ENG_DT_INT64)) return false;
  int64_t n = t->shape.dim[0];
  if (n < 1 || n > ENG_MAX_RANK) return false;
  out->rank = (int)n;
  for (int64_t i = 0; i < n; i++) {
    int64_t d = t->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(t))[i]
                                         : ((const int64_t *)eng_tensor_data(t))[i];
    if (d < 0) return false;
    out->dim[i] = d;
  }
  return true;
}

/* A constant usable per channel on a product of C channels viewed with
 * shape `s` (a Reshape of it): one value, or C values whose dims (leading
 * ones aside) are the trailing dims of s, so that broadcasting pairs
 * channel j of the product with element j of k. Never of higher rank than
 * s (broadcasting would add dims). */
static bool channel_const_in(const eng_tensor *k, int64_t c, const eng_shape *s) {
  if (!k || k->dtype != ENG_DT_FLOAT || k->shape.rank > s->rank) return false;
  int64_t n = eng_tensor_numel(k);
  if (n == 1) return true;
  if (c <= 0 || n != c) return false;
  int lead = 0;
  while (lead < k->shape.rank && k->shape.dim[lead] == 1) lead++;
  for (int i = lead; i < k->shape.rank; i++)
    if (k->shape.dim[i] != s->dim[s->rank - k->shape.rank + i]) return false;
  return true;
}

/* Pad (zeros on H and W, a Const amount) -> DepthwiseConv2dNative with
 * VALID padding, the Pad's only reader: Keras's ZeroPadding2D before a
 * stride-2 depthwise layer. The Pad step passes its input through and the
 * convolution applies the padding as its window's (skipping the padded
 * copy, its zero fill and one pass over the activations). Plan-internal
 * ops of the op table (ENG_OP_PLAN_ONLY), so the graph is untouched; names
 * of their own, so another executor that does not know them runs them on
 * the CPU. */
static void fold_pads(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  int *readers = calloc((size_t)p->n_values + 1, sizeof *readers);
  int *reader = malloc(sizeof *reader * ((size_t)p->n_values + 1));
  if (!readers || !reader) goto out;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++) {
      int v = p->base[nd->in[k].node] + nd->in[k].index;
      readers[v]++;
      reader[v] = s;
    }
    int ev = eng_epilogue_input(p->epi ? p->epi[s] : NULL);
    if (ev >= 0) {
      readers[ev]++;
      reader[ev] = s;
    }
  }
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    int64_t pads[4];
    if (strcmp(p->ops[s]->name, "Pad") || (p->epi && p->epi[s]) || !eng_pad_hw(g, nd, pads))
      continue;
    int v = p->base[p->steps[s]];
    if (readers[v] != 1 || is_fetched(p, v) || is_fed(p, v)) continue;
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

/* A depthwise convolution whose fused epilogue starts with a per-channel
 * (or scalar) multiply, a batch-norm scale, and whose constant filter no
 * other step reads: the plan's filter becomes a scaled copy and the
 * multiply leaves the epilogue (one op fewer per output). Each tap then
 * rounds once as w * s instead of the sum being scaled and rounded again:
 * the last bit may differ, the summation order does not. The plan's
 * constant and epilogue change together, so every executor sees the same. */
static void scale_dw_filters(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  int *readers = calloc((size_t)p->n_values + 1, sizeof *readers);
  if (!readers || !p->epi) goto out;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++) readers[p->base[nd->in[k].node] + nd->in[k].index]++;
    int ev = eng_epilogue_input(p->epi[s]);
    if (ev >= 0) readers[ev]++;
  }
  for (int s = 0; s < p->n_steps; s++) {
    eng_epilogue *e = p->epi[s];
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    if (!e || e->n < 1 || e->op[0].kind != EPI_MUL || !e->op[0].k.buf ||
        (strcmp(p->ops[s]->name, "DepthwiseConv2dNative") &&
         strcmp(p->ops[s]->name, "_DepthwiseConv2dNativePadded")) ||
        nd->n_in != 2)
      continue;
    int wv = p->base[nd->in[1].node] + nd->in[1].index, ci = -1;
    for (int i = 0; i < p->n_consts; i++)
      if (p->const_value[i] == wv) ci = i;
    if (ci < 0 || readers[wv] != 1 || is_fetched(p, wv)) continue;
    const eng_tensor *w = &p->const_tensor[ci], *k = &e->op[0].k;
    if (w->dtype != ENG_DT_FLOAT || w->shape.rank != 4) continue;
    int64_t oc = w->shape.dim[2] * w->shape.dim[3], nk = eng_tensor_numel(k);
    if (nk != 1 && nk != oc) continue;
    eng_tensor nw;
    if (eng_tensor_alloc_raw(&nw, ENG_DT_FLOAT, &w->shape, NULL)) continue;
    const float *src = eng_tensor_data(w), *kv = eng_tensor_data(k);
    float *dst = eng_tensor_data(&nw);
    int64_t n = eng_tensor_numel(w);
    for (int64_t i = 0; i < n; i++) dst[i] = src[i] * kv[nk == 1 ? 0 : i % oc];
    eng_tensor_release(&p->const_tensor[ci]);
    p->const_tensor[ci] = nw;
    eng_tensor_release(&e->op[0].k);
    for (int i = 1; i < e->n; i++) e->op[i - 1] = e->op[i];
    e->n--;
    e->op[e->n].k = (eng_tensor){0};
  }
out:
  free(readers);
}

/* A BatchMatMul whose left operand is not adjoint: with a constant matrix
 * (rank 2) on the right it is a dense layer over all leading dims, which
 * eng_k_batch_matmul runs through a packed weight with a fused epilogue.
 * BatchMatMulV3 only when it produces float. */
static bool dense_batch_matmul(const eng_node *nd) {
  bool v3 = !strcmp(nd->op, "BatchMatMulV3");
  if (!v3 && strcmp(nd->op, "BatchMatMulV2") && strcmp(nd->op, "BatchMatMul")) return false;
  if (v3 && eng_node_attr_type(nd, "Tout", ENG_DT_FLOAT) != ENG_DT_FLOAT) return false;
  return !eng_node_attr_bool(nd, "adj_x", false);
}

/* Swish on value v: Keras's silu, t = Mul(beta, v) (or v itself), s =
 * Sigmoid(t), o = Mul(v, s), and often IdentityN(o, v, beta) (its custom
 * gradient) whose outputs past the first nobody reads. Every reader of v
 * must be one of those steps. Returns the value standing for the result
 * (o, or the IdentityN's first output), or -1; fills the steps it spans
 * and beta (NULL: 1). */
static int swish_at(const eng_plan *p, const int *readers, int v, int *steps, int *n_steps,
                    const eng_tensor **beta) {
  const eng_graph *g = eng_model_graph(p->m);
  int rs[3], nr = 0, sig = -1, mul = -1, idn = -1, bmul = -1;
  if (readers[v] < 2 || readers[v] > 3 || is_fetched(p, v) || is_fed(p, v)) return -1;
  for (int s = 0; s < p->n_steps && nr < 3; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++)
      if (p->base[nd->in[k].node] + nd->in[k].index == v) {
        rs[nr++] = s;
        break;
      }
  }
  *beta = NULL;
  for (int i = 0; i < nr; i++) {
    const eng_node *nd = eng_graph_node(g, p->steps[rs[i]]);
    const char *op = p->ops[rs[i]]->name;
    if (!strcmp(op, "Sigmoid") && nd->n_in == 1) {
      sig = rs[i];
    } else if (!strcmp(op, "Mul") && nd->n_in == 2) {
      int v0 = p->base[nd->in[0].node] + nd->in[0].index;
      int v1 = p->base[nd->in[1].node] + nd->in[1].index;
      const eng_tensor *k = const_of(p, v0 == v ? v1 : v0);
      if (k && channel_const(k, -1, 0) && v0 != v1 && bmul < 0) { /* a float scalar: beta */
        bmul = rs[i];
        *beta = k;
      } else {
        mul = rs[i];
      }
    } else if (!strcmp(op, "IdentityN")) {
      idn = rs[i];
    }
  }
  int t = bmul >= 0 ? p->base[p->steps[bmul]] : v;
  if (bmul >= 0) { /* its only reader is the Sigmoid */
    int s = -1;
    for (int i = 0; i < p->n_steps && s < 0; i++) {
      const eng_node *nd = eng_graph_node(g, p->steps[i]);
      if (!strcmp(p->ops[i]->name, "Sigmoid") && nd->n_in == 1 &&
          p->base[nd->in[0].node] + nd->in[0].index == t)
        s = i;
    }
    if (sig >= 0 || readers[t] != 1 || is_fetched(p, t)) return -1;
    sig = s;
  }
  if (sig < 0 || mul < 0 || nr != 2 + (idn >= 0) || nr != readers[v]) return -1;
  int one[3] = {bmul, sig, mul}; /* a value index per step's output 0 */
  for (int i = 0; i < 3; i++)
    if (one[i] >= 0 && eng_graph_node(g, p->steps[one[i]])->n_out != 1) return -1;
  const eng_node *sn = eng_graph_node(g, p->steps[sig]), *mn = eng_graph_node(g, p->steps[mul]);
  int sv = p->base[p->steps[sig]], o = p->base[p->steps[mul]];
  if (p->base[sn->in[0].node] + sn->in[0].index != t || readers[sv] != 1 || is_fetched(p, sv))
    return -1;
  int m0 = p->base[mn->in[0].node] + mn->in[0].index,
      m1 = p->base[mn->in[1].node] + mn->in[1].index;
  if (!((m0 == v && m1 == sv) || (m0 == sv && m1 == v))) return -1;
  *n_steps = 0;
  if (bmul >= 0) steps[(*n_steps)++] = bmul;
  steps[(*n_steps)++] = sig;
  steps[(*n_steps)++] = mul;
  if (idn < 0) return o;
  const eng_node *in = eng_graph_node(g, p->steps[idn]);
  if (in->n_in < 1 || in->n_out < 1 || p->base[in->in[0].node] + in->in[0].index != o ||
      readers[o] != 1)
    return -1;
  for (int k = 1; k < in->n_in; k++) {
    int iv = p->base[in->in[k].node] + in->in[k].index;
    if (iv != v && !const_of(p, iv)) return -1;
  }
  for (int k = 1; k < in->n_out; k++) {
    int ov = p->base[p->steps[idn]] + k;
    if (readers[ov] || is_fetched(p, ov)) return -1;
  }
  steps[(*n_steps)++] = idn;
  return p->base[p->steps[idn]];
}

/* The float scalar (rank 0) constant step s reads beside value v, or NULL
 * (s reads v once, as one of two inputs). */
static const eng_tensor *scalar_beside(const eng_plan *p, int s, int v) {
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[s]);
  if (nd->n_in != 2 || nd->n_out != 1) return NULL;
  int v0 = p->base[nd->in[0].node] + nd->in[0].index, v1 = p->base[nd->in[1].node] + nd->in[1].index;
  if ((v0 == v) == (v1 == v)) return NULL;
  const eng_tensor *k = const_of(p, v0 == v ? v1 : v0);
  return k && channel_const(k, -1, 0) ? k : NULL;
}

/* Step s's op is `op` and reads value a and value b (in either order). */
static bool reads_both(const eng_plan *p, int s, const char *op, int a, int b) {
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[s]);
  if (strcmp(p->ops[s]->name, op) || nd->n_in != 2 || nd->n_out != 1) return false;
  int v0 = p->base[nd->in[0].node] + nd->in[0].index, v1 = p->base[nd->in[1].node] + nd->in[1].index;
  return (v0 == a && v1 == b) || (v0 == b && v1 == a);
}

/* GELU's tanh form on value x, as TensorFlow's gelu(approximate=True)
 * writes it (Keras's, keras-hub's BERT):
 *   p = Pow(x, 3), m1 = Mul(a, p), s = AddV2(x, m1), m2 = Mul(b, s),
 *   t = Tanh(m2), u = AddV2(one, t), h = Mul(half, x), y = Mul(h, u)
 * with a, b, one, half float scalar constants (operands of each in either
 * order), x read by exactly Pow, the AddV2 and the Mul by half, every
 * other value by the next op only. Returns y's value, or -1; fills the
 * eight steps and the constants (eng_epilogue.h's EPI_GELU_TANH). */
static int gelu_at(const eng_plan *p, const int *readers, const int *reader, int x, int *steps,
                   float c[4]) {
  const eng_graph *g = eng_model_graph(p->m);
  if (readers[x] != 3 || is_fetched(p, x) || is_fed(p, x)) return -1;
  int rs[3], nr = 0;
  for (int s = 0; s < p->n_steps && nr < 3; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++)
      if (p->base[nd->in[k].node] + nd->in[k].index == x) {
        rs[nr++] = s;
        break;
      }
  }
  if (nr != 3) return -1;
  int pw = -1, add = -1, half = -1;
  for (int i = 0; i < 3; i++) {
    const char *op = p->ops[rs[i]]->name;
    const eng_tensor *k = scalar_beside(p, rs[i], x);
    const eng_node *nd = eng_graph_node(g, p->steps[rs[i]]);
    if (!strcmp(op, "Pow") && k && p->base[nd->in[0].node] + nd->in[0].index == x &&
        *(const float *)eng_tensor_data(k) == 3.0f)
      pw = rs[i];
    else if (!strcmp(op, "Mul") && k)
      half = rs[i];
    else if (!strcmp(op, "AddV2") || !strcmp(op, "Add"))
      add = rs[i];
  }
  if (pw < 0 || add < 0 || half < 0) return -1;
  /* The value of step s when its only reader is one step: that step, else -1. */
#define NEXT(s) \
  (readers[p->base[p->steps[s]]] == 1 && !is_fetched(p, p->base[p->steps[s]]) ? reader[p->base[p->steps[s]]] : -1)
  int m1 = NEXT(pw);
  if (m1 < 0 || strcmp(p->ops[m1]->name, "Mul") || !scalar_beside(p, m1, p->base[p->steps[pw]]) ||
      NEXT(m1) != add || !reads_both(p, add, p->ops[add]->name, x, p->base[p->steps[m1]]))
    return -1;
  int m2 = NEXT(add);
  if (m2 < 0 || strcmp(p->ops[m2]->name, "Mul") || !scalar_beside(p, m2, p->base[p->steps[add]]))
    return -1;
  int th = NEXT(m2);
  if (th < 0 || strcmp(p->ops[th]->name, "Tanh") || eng_graph_node(g, p->steps[th])->n_in != 1 ||
      eng_graph_node(g, p->steps[th])->n_out != 1)
    return -1;
  int u = NEXT(th);
  if (u < 0 || (strcmp(p->ops[u]->name, "AddV2") && strcmp(p->ops[u]->name, "Add")) ||
      !scalar_beside(p, u, p->base[p->steps[th]]))
    return -1;
  int y = NEXT(u);
  if (y < 0 || NEXT(half) != y ||
      !reads_both(p, y, "Mul", p->base[p->steps[half]], p->base[p->steps[u]]))
    return -1;
#undef NEXT
  const int chain[8] = {pw, m1, add, m2, th, u, half, y};
  for (int i = 0; i < 8; i++) steps[i] = chain[i];
  c[0] = *(const float *)eng_tensor_data(scalar_beside(p, m1, p->base[p->steps[pw]]));
  c[1] = *(const float *)eng_tensor_data(scalar_beside(p, m2, p->base[p->steps[add]]));
  c[2] = *(const float *)eng_tensor_data(scalar_beside(p, u, p->base[p->steps[th]]));
  c[3] = *(const float *)eng_tensor_data(scalar_beside(p, half, x));
  return p->base[p->steps[y]];
}

/* GELU's exact form on value x, as TensorFlow's gelu(approximate=False)
 * writes it (Keras's default gelu):
 *   h = Mul(half, x), n = Neg(x), q = Mul(n, s), e = Erfc(q), y = Mul(h, e)
 * with half and s float scalar constants, x read by exactly the Mul and the
 * Neg, every other value by the next op only. Returns y's value, or -1;
 * fills the five steps and the constants (EPI_GELU_ERFC). */
static int gelu_erfc_at(const eng_plan *p, const int *readers, const int *reader, int x,
                        int *steps, float c[4]) {
  const eng_graph *g = eng_model_graph(p->m);
  if (readers[x] != 2 || is_fetched(p, x) || is_fed(p, x)) return -1;
  int rs[2], nr = 0;
  for (int s = 0; s < p->n_steps && nr < 2; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++)
      if (p->base[nd->in[k].node] + nd->in[k].index == x) {
        rs[nr++] = s;
        break;
      }
  }
  if (nr != 2) return -1;
  int neg = -1, half = -1;
  for (int i = 0; i < 2; i++) {
    const eng_node *nd = eng_graph_node(g, p->steps[rs[i]]);
    if (!strcmp(p->ops[rs[i]]->name, "Neg") && nd->n_in == 1 && nd->n_out == 1)
      neg = rs[i];
    else if (!strcmp(p->ops[rs[i]]->name, "Mul") && scalar_beside(p, rs[i], x))
      half = rs[i];
  }
  if (neg < 0 || half < 0) return -1;
#define NEXT(s) \
  (readers[p->base[p->steps[s]]] == 1 && !is_fetched(p, p->base[p->steps[s]]) ? reader[p->base[p->steps[s]]] : -1)
  int q = NEXT(neg);
  if (q < 0 || strcmp(p->ops[q]->name, "Mul") || !scalar_beside(p, q, p->base[p->steps[neg]]))
    return -1;
  int er = NEXT(q);
  if (er < 0 || strcmp(p->ops[er]->name, "Erfc") || eng_graph_node(g, p->steps[er])->n_in != 1 ||
      eng_graph_node(g, p->steps[er])->n_out != 1)
    return -1;
  int y = NEXT(er);
  if (y < 0 || NEXT(half) != y ||
      !reads_both(p, y, "Mul", p->base[p->steps[half]], p->base[p->steps[er]]))
    return -1;
#undef NEXT
  const int chain[5] = {neg, q, er, half, y};
  for (int i = 0; i < 5; i++) steps[i] = chain[i];
  c[0] = *(const float *)eng_tensor_data(scalar_beside(p, q, p->base[p->steps[neg]]));
  c[1] = *(const float *)eng_tensor_data(scalar_beside(p, half, x));
  c[2] = c[3] = 0;
  return p->base[p->steps[y]];
}

/* Whether value v's one reader is a Relu or Relu6 of it. A run-time add is
 * fused only with the activation after it (a ResNet block's): alone (a
 * MobileNetV2 or EfficientNet block's, whose sum feeds the next block
 * directly) it saved less than it cost at batch 32 in one-example slices,
 * where the buffers the recycling cache then hands the next slice's first
 * layers came back colder (docs/benchmarks.md). */
static bool relu_next(const eng_plan *p, const int *readers, const int *reader, int v) {
  if (readers[v] != 1 || is_fetched(p, v) || is_fed(p, v)) return false;
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[reader[v]]);
  return nd->n_in == 1 && (!strcmp(nd->op, "Relu") || !strcmp(nd->op, "Relu6"));
}

static void fuse(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  int *readers = calloc((size_t)p->n_values + 1, sizeof *readers);
  int *reader = malloc(sizeof *reader * ((size_t)p->n_values + 1));
  bool *gone = calloc((size_t)p->n_steps + 1, sizeof *gone);
  /* made[v]: the step that stores value v (-1: fed or constant), moved to
   * a product's step when its epilogue takes over the value. */
  int *made = malloc(sizeof *made * ((size_t)p->n_values + 1));
  p->epi = calloc((size_t)p->n_steps + 1, sizeof *p->epi);
  if (!readers || !reader || !gone || !made || !p->epi) goto out;
  for (int v = 0; v < p->n_values; v++) made[v] = -1;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++) {
      int v = p->base[nd->in[k].node] + nd->in[k].index;
      readers[v]++;
      reader[v] = s;
    }
    for (int o = 0; o < nd->n_out; o++) made[p->base[p->steps[s]] + o] = s;
  }
  /* A run-time addend (a residual's shortcut) only on the CPU, and only
   * into a product's epilogue, whose kernels all take it. */
  bool host = !eng_device_active();
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    bool conv = !strcmp(nd->op, "Conv2D"), dw = !strcmp(nd->op, "DepthwiseConv2dNative");
    bool mm = !strcmp(nd->op, "MatMul"), bmm = dense_batch_matmul(nd);
    bool ein = !strcmp(nd->op, "Einsum");
    if (gone[s] || (!conv && !dw && !mm && !bmm && !ein) || nd->n_in != 2) continue;
    const eng_tensor *w = const_of(p, p->base[nd->in[1].node] + nd->in[1].index);
    /* Rank of the weight, and the most a per-channel constant may have (not
     * above the output's, or broadcasting would add dims; a batch matmul's
     * output rank is not known here, so only vectors and scalars). */
    int rank = mm || bmm ? 2 : 4, krank = bmm ? 1 : rank;
    int64_t ch = -1;
    /* A float constant weight: the output is then float (or the op fails). */
    if (!w || w->dtype != ENG_DT_FLOAT) continue;
    eng_shape after = {.rank = -1};
    if (ein) {
      /* A dense-layer Einsum: its n columns are the output's last dims
       * (the weight's free dims), which a per-channel constant must match
       * as after a Reshape. */
      if (!eng_einsum_const_b_dims(eng_attr_str(nd, "equation", ""), &w->shape, &after)) continue;
      ch = eng_shape_numel(&after);
    } else if (w->shape.rank == rank) {
      if (conv) ch = w->shape.dim[3];
      if (dw) ch = w->shape.dim[2] * w->shape.dim[3];
      if (mm) ch = w->shape.dim[eng_node_attr_bool(nd, "transpose_b", false) ? 0 : 1];
      if (bmm) ch = w->shape.dim[eng_node_attr_bool(nd, "adj_y", false) ? 0 : 1];
    } else if (bmm) {
      continue;
    }
    eng_epilogue e = {0};
    int absorbed[ENG_EPI_MAX];
    int v = p->base[p->steps[s]];
    /* A Reshape with a constant shape straight after a product (Keras's
     * dense layers on 3-D inputs: MatMul -> Reshape -> BiasAdd) stays a
     * step, reading the product; the ops after it move into the product's
     * epilogue and the Reshape's result stands for the last of them. */
    int reshape_step = -1;
    int swish[8], n_swish = 0;
    while (e.n < ENG_EPI_MAX) {
      const eng_tensor *beta;
      /* GELU (its tanh form), the chain's last op; not after a depthwise
       * convolution, whose kernel does not have it. */
      int ng = 8, gk = EPI_GELU_TANH;
      int gl = dw ? -1 : gelu_at(p, readers, reader, v, swish, e.op[e.n].c);
      if (gl < 0 && !dw) {
        ng = 5;
        gk = EPI_GELU_ERFC;
        gl = gelu_erfc_at(p, readers, reader, v, swish, e.op[e.n].c);
      }
      for (int i = 0; i < ng && gl >= 0; i++)
        if (gone[swish[i]]) gl = -1;
      if (gl >= 0) {
        e.op[e.n].kind = gk;
        e.op[e.n++].k = (eng_tensor){0};
        n_swish = ng;
        v = gl;
        break;
      }
      int sw = swish_at(p, readers, v, swish, &n_swish, &beta);
      for (int i = 0; i < n_swish && sw >= 0; i++)
        if (gone[swish[i]]) sw = -1;
      if (sw >= 0) { /* the chain's last op */
        e.op[e.n].kind = EPI_SWISH;
        e.op[e.n++].k = beta ? eng_tensor_share(beta) : (eng_tensor){0};
        v = sw;
        break;
      }
      n_swish = 0;
      if (readers[v] != 1 || is_fetched(p, v) || is_fed(p, v)) break;
      int cs = reader[v];
      const eng_node *cn = eng_graph_node(g, p->steps[cs]);
      if (gone[cs] || cn->n_out != 1) break;
      if (!strcmp(cn->op, "Reshape") && (mm || bmm) && e.n == 0 && reshape_step < 0 &&
          cn->n_in == 2 && p->base[cn->in[0].node] + cn->in[0].index == v) {
        if (!const_dims(const_of(p, p->base[cn->in[1].node] + cn->in[1].index), &after)) break;
        reshape_step = cs;
        v = p->base[p->steps[cs]];
        continue;
      }
      int kind = -1;
      const eng_tensor *k = NULL;
      int other = -1;
      if (cn->n_in == 2) {
        int v0 = p->base[cn->in[0].node] + cn->in[0].index;
        int v1 = p->base[cn->in[1].node] + cn->in[1].index;
        other = v0 == v ? v1 : v0;
        if (v0 == v1) break;
        k = const_of(p, other);
      }
      bool first = cn->n_in >= 1 && p->base[cn->in[0].node] + cn->in[0].index == v;
      bool add = !strcmp(cn->op, "Add") || !strcmp(cn->op, "AddV2");
      if (!strcmp(cn->op, "BiasAdd") && first && k &&
          !strcmp(eng_attr_str(cn, "data_format", "NHWC"), "NHWC") && k->shape.rank == 1)
        kind = EPI_ADD;
      else if (add && k)
        kind = EPI_ADD;
      else if (add && host && !dw && reshape_step < 0 && other >= 0 && !k && made[other] < s &&
               eng_epilogue_input(&e) < 0 && relu_next(p, readers, reader, p->base[p->steps[cs]]))
        kind = EPI_ADD_VALUE; /* computed before this step: it can read it */
      else if (!strcmp(cn->op, "Sub") && first && k)
        kind = EPI_SUB;
      else if (!strcmp(cn->op, "Mul") && k)
        kind = EPI_MUL;
      else if (!strcmp(cn->op, "Relu") && cn->n_in == 1 && first)
        kind = EPI_RELU;
      else if (!strcmp(cn->op, "Relu6") && cn->n_in == 1 && first)
        kind = EPI_RELU6;
      if (kind < 0) break;
      if (kind != EPI_RELU && kind != EPI_RELU6 && kind != EPI_ADD_VALUE &&
          !(after.rank < 0 ? channel_const(k, ch, krank) : channel_const_in(k, ch, &after)))
        break;
      if (kind == EPI_ADD_VALUE) {
        e.in_value = other;
        e.in_node = p->steps[cs];
      }
      e.op[e.n].kind = kind;
      e.op[e.n].k = k && kind != EPI_RELU && kind != EPI_RELU6 && kind != EPI_ADD_VALUE
                        ? eng_tensor_share(k)
                        : (eng_tensor){0};
      absorbed[e.n++] = cs;
      v = p->base[p->steps[cs]];
    }
    if (!e.n) continue;
    e.out_value = v;
    if (reshape_step >= 0) {
      /* The product keeps its own value (the Reshape reads it); the
       * Reshape, with no ops of its own, stores its result as the last
       * fused node's value. */
      eng_epilogue *re = calloc(1, sizeof *re);
      if (!re) {
        for (int i = 0; i < e.n; i++) eng_tensor_release(&e.op[i].k);
        continue;
      }
      re->out_value = v;
      p->epi[reshape_step] = re;
      e.out_value = p->base[p->steps[s]];
    }
    p->epi[s] = malloc(sizeof e);
    if (!p->epi[s]) {
      for (int i = 0; i < e.n; i++) eng_tensor_release(&e.op[i].k);
      continue;
    }
    *p->epi[s] = e;
    made[e.out_value] = s;
    for (int i = 0; i < e.n - (n_swish > 0); i++) gone[absorbed[i]] = true;
    for (int i = 0; i < n_swish; i++) gone[swish[i]] = true;
  }
  drop_steps(p, gone);
out:
  free(readers);
  free(reader);
  free(gone);
  free(made);
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

/* How many steps read value v (as an input or a fused addend); the first
 * max of them, in schedule order, into out. */
static int readers_of(const eng_plan *p, int v, int *out, int max) {
  const eng_graph *g = eng_model_graph(p->m);
  int n = 0;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    bool reads = eng_epilogue_input(p->epi ? p->epi[s] : NULL) == v;
    for (int k = 0; k < nd->n_in && !reads; k++)
      reads = p->base[nd->in[k].node] + nd->in[k].index == v;
    if (reads) {
      if (n < max) out[n] = s;
      n++;
    }
  }
  return n;
}

/* Step s's op is `op` and it has n_in inputs and one output. */
static bool step_is(const eng_plan *p, int s, const char *op, int n_in) {
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[s]);
  return !strcmp(p->ops[s]->name, op) && nd->n_in == n_in && nd->n_out == 1;
}

static int in_value(const eng_plan *p, int s, int k) {
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[s]);
  return p->base[nd->in[k].node] + nd->in[k].index;
}

/* The only step reading value v, when a fusion may drop v (no other
 * reader, not fetched, not fed); else -1. */
static int sole_reader(const eng_plan *p, int v) {
  int r;
  if (is_fetched(p, v) || is_fed(p, v) || readers_of(p, v, &r, 1) != 1) return -1;
  return r;
}

/* The same for step s's value. */
static int only_reader(const eng_plan *p, int s) { return sole_reader(p, p->base[p->steps[s]]); }

/* A float constant with one value per element of its last dim (leading
 * dims 1): gamma or beta as Keras reshapes them for broadcasting. */
static const eng_tensor *last_dim_const(const eng_plan *p, int v) {
  const eng_tensor *k = const_of(p, v);
  if (!k || k->dtype != ENG_DT_FLOAT || k->shape.rank < 1) return NULL;
  for (int i = 0; i + 1 < k->shape.rank; i++)
    if (k->shape.dim[i] != 1) return NULL;
  return k;
}

/* Step s (an add or a multiply) reads value a and a last_dim_const: that
 * constant, else NULL. */
static const eng_tensor *const_beside(const eng_plan *p, int s, int a) {
  int v0 = in_value(p, s, 0), v1 = in_value(p, s, 1);
  if ((v0 == a) == (v1 == a)) return NULL;
  return last_dim_const(p, v0 == a ? v1 : v0);
}

static bool is_add(const eng_plan *p, int s) {
  return step_is(p, s, "AddV2", 2) || step_is(p, s, "Add", 2);
}

/* Whether Mean steps a and b reduce over the same one constant axis with
 * keep_dims. */
static bool same_one_axis(const eng_plan *p, int a, int b) {
  const eng_graph *g = eng_model_graph(p->m);
  const eng_tensor *ka = const_of(p, in_value(p, a, 1)), *kb = const_of(p, in_value(p, b, 1));
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
  if (!step_is(p, sm, "Mean", 2)) return -1;
  int x = in_value(p, sm, 0), m = p->base[p->steps[sm]], rm[2];
  if (is_fetched(p, m) || is_fed(p, m) || readers_of(p, m, rm, 2) != 2) return -1;
  int sneg = step_is(p, rm[0], "Neg", 1) ? rm[0] : step_is(p, rm[1], "Neg", 1) ? rm[1] : -1;
  if (sneg < 0) return -1;
  int sg = rm[0] == sneg ? rm[1] : rm[0], sd = sg, gv = m;
  if (step_is(p, sg, "StopGradient", 1)) {
    sd = only_reader(p, sg);
    gv = p->base[p->steps[sg]];
  } else {
    sg = -1;
  }
  if (sd < 0 || !reads_both(p, sd, "SquaredDifference", x, gv)) return -1;
  int sv = only_reader(p, sd);
  if (sv < 0 || !step_is(p, sv, "Mean", 2) || in_value(p, sv, 0) != p->base[p->steps[sd]] ||
      !same_one_axis(p, sm, sv))
    return -1;
  int sa = only_reader(p, sv);
  const eng_tensor *e =
      sa >= 0 && is_add(p, sa) ? scalar_beside(p, sa, p->base[p->steps[sv]]) : NULL;
  int sr = e ? only_reader(p, sa) : -1;
  if (sr < 0 || !step_is(p, sr, "Rsqrt", 1)) return -1;
  int smul = only_reader(p, sr);
  if (smul < 0 || !step_is(p, smul, "Mul", 2) ||
      !(*gamma = const_beside(p, smul, p->base[p->steps[sr]])))
    return -1;
  int inv = p->base[p->steps[smul]], ri[2];
  if (is_fetched(p, inv) || is_fed(p, inv) || readers_of(p, inv, ri, 2) != 2) return -1;
  int smul1 = only_reader(p, sneg);
  if (smul1 < 0 || !reads_both(p, smul1, "Mul", p->base[p->steps[sneg]], inv)) return -1;
  int smul2 = ri[0] == smul1 ? ri[1] : ri[0];
  if (smul2 == smul1 || !reads_both(p, smul2, "Mul", x, inv)) return -1;
  int sadd1 = only_reader(p, smul1);
  if (sadd1 < 0 || !is_add(p, sadd1) || !(*beta = const_beside(p, sadd1, p->base[p->steps[smul1]])))
    return -1;
  int sadd2 = only_reader(p, smul2);
  if (sadd2 < 0 || !is_add(p, sadd2) || only_reader(p, sadd1) != sadd2 ||
      !reads_both(p, sadd2, p->ops[sadd2]->name, p->base[p->steps[smul2]],
                  p->base[p->steps[sadd1]]))
    return -1;
  if (eng_tensor_numel(*gamma) != eng_tensor_numel(*beta)) return -1;
  const int chain[11] = {sg, sd, sv, sa, sr, smul, sneg, smul1, sadd1, smul2, sadd2};
  for (int i = 0; i < 11; i++) steps[i] = chain[i];
  *eps = *(const float *)eng_tensor_data(e);
  return p->base[p->steps[sadd2]];
}

static void fuse_layer_norms(eng_plan *p) {
  if (!p->epi || eng_device_active()) return;
  const eng_op_def *ln = eng_op_find("_LayerNorm");
  bool *gone = calloc((size_t)p->n_steps + 1, sizeof *gone);
  if (!ln || !gone) {
    free(gone);
    return;
  }
  bool any = false;
  for (int s = 0; s < p->n_steps; s++) {
    int steps[11];
    const eng_tensor *gamma, *beta;
    float eps;
    if (gone[s] || p->epi[s]) continue;
    int y = layer_norm_at(p, s, steps, &gamma, &beta, &eps);
    for (int i = 0; i < 11 && y >= 0; i++)
      if (steps[i] >= 0 && (gone[steps[i]] || p->epi[steps[i]])) y = -1;
    if (y < 0) continue;
    eng_epilogue *e = calloc(1, sizeof *e);
    if (!e) break;
    e->n = 2;
    e->op[0].kind = e->op[1].kind = EPI_LAYER_NORM;
    e->op[0].k = eng_tensor_share(gamma);
    e->op[0].c[0] = eps;
    e->op[1].k = eng_tensor_share(beta);
    e->out_value = y;
    p->epi[s] = e;
    p->ops[s] = ln;
    for (int i = 0; i < 11; i++)
      if (steps[i] >= 0) {
        gone[steps[i]] = true;
        e->op[1].c[0]++;
      }
    any = true;
  }
  if (any) drop_steps(p, gone);
  free(gone);
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
  const eng_tensor *w = const_of(p, in_value(p, s, 1));
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

static void fuse_expand_depthwise(eng_plan *p) {
  const eng_op_def *op = eng_op_find("_ExpandDepthwise");
  if (!op || !p->epi || !p->packed || eng_device_active()) return;
  const eng_graph *g = eng_model_graph(p->m);
  bool *gone = calloc((size_t)p->n_steps + 1, sizeof *gone);
  if (!gone) return;
  bool any = false;
  for (int s = 0; s < p->n_steps; s++) {
    eng_epilogue *e = p->epi[s];
    if (gone[s] || !expansion_at(p, s) || !band_epi_ok(e)) continue;
    int v = e ? e->out_value : p->base[p->steps[s]], d = sole_reader(p, v), pad = -1;
    if (d >= 0 && !strcmp(p->ops[d]->name, "_PadView")) {
      pad = d;
      v = p->base[p->steps[pad]];
      d = sole_reader(p, v);
      if (d >= 0 && strcmp(p->ops[d]->name, "_DepthwiseConv2dNativePadded")) d = -1;
    } else if (d >= 0 && strcmp(p->ops[d]->name, "DepthwiseConv2dNative")) {
      d = -1;
    }
    if (d < 0 || gone[d]) continue;
    const eng_node *dn = eng_graph_node(g, p->steps[d]);
    eng_epilogue *de = p->epi[d];
    const eng_tensor *f = dn->n_in == 2 ? const_of(p, in_value(p, d, 1)) : NULL;
    if (!f || in_value(p, d, 0) != v || f->dtype != ENG_DT_FLOAT || f->shape.rank != 4 ||
        f->shape.dim[3] != 1 || f->shape.dim[2] != eng_gemm_n(p->packed[s]) || !band_epi_ok(de) ||
        (e ? e->n : 0) + 1 + (de ? de->n : 0) > ENG_EPI_MAX)
      continue;
    if (!e && !(e = calloc(1, sizeof *e))) break;
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
    any = true;
  }
  if (any) drop_steps(p, gone);
  free(gone);
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
static void fuse_scaled_conv(eng_plan *p) {
  const eng_op_def *op = eng_op_find("_ScaledConv1x1");
  if (!op || !p->epi || !p->packed || eng_device_active()) return;
  const eng_graph *g = eng_model_graph(p->m);
  bool *gone = calloc((size_t)p->n_steps + 1, sizeof *gone);
  if (!gone) return;
  bool any = false;
  for (int s = 0; s < p->n_steps; s++) {
    if (gone[s] || strcmp(p->ops[s]->name, "Mul") || p->epi[s] || p->packed[s] ||
        eng_graph_node(g, p->steps[s])->n_in != 2)
      continue;
    int v = p->base[p->steps[s]], d = sole_reader(p, v);
    if (d < 0 || gone[d] || !expansion_at(p, d) || in_value(p, d, 0) != v || !p->epi[d]) continue;
    p->ops[s] = op;
    p->packed[s] = p->packed[d];
    p->epi[s] = p->epi[d];
    p->packed[d] = NULL;
    p->epi[d] = NULL;
    gone[d] = true;
    any = true;
  }
  if (any) drop_steps(p, gone);
  free(gone);
}

static void recount_uses(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  memset(p->uses, 0, sizeof *p->uses * (size_t)p->n_values);
  for (int i = 0; i < p->n_outputs; i++) p->uses[p->out_value[i]]++;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++) p->uses[p->base[nd->in[k].node] + nd->in[k].index]++;
    int ev = eng_epilogue_input(p->epi ? p->epi[s] : NULL);
    if (ev >= 0) p->uses[ev]++;
  }
}

/* Whether Conv2D node nd with filter w runs as Winograd's F(2x2, 3x3)
 * (eng_wino.h): its attributes allow it, on the CPU. */
static bool wino_conv(const eng_node *nd, const eng_tensor *w) {
  int64_t st[4] = {1, 1, 1, 1}, dl[4] = {1, 1, 1, 1};
  int nst = eng_attr_ints(nd, "strides", st, 4), ndl = eng_attr_ints(nd, "dilations", dl, 4);
  const int64_t *d = w->shape.dim;
  return eng_wino_enabled() && !eng_device_active() && nst == 4 && (!ndl || ndl == 4) &&
         !strcmp(eng_attr_str(nd, "data_format", "NHWC"), "NHWC") &&
         eng_wino_suits(d[0], d[1], st[1], st[2], dl[1], dl[2], d[2], d[3]);
}

/* Packs the constant weight of every MatMul (A not transposed), dense
 * BatchMatMul, Conv2D (3x3 ones in Winograd's form where wino_conv says so)
 * and dense-layer Einsum. */
static void pack_weights(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  p->packed = calloc((size_t)p->n_steps + 1, sizeof *p->packed);
  if (!p->packed) return;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    bool mm = !strcmp(nd->op, "MatMul"), conv = !strcmp(nd->op, "Conv2D");
    bool bmm = dense_batch_matmul(nd), ein = !strcmp(nd->op, "Einsum");
    if ((!mm && !conv && !bmm && !ein) || nd->n_in != 2) continue;
    if (mm && eng_node_attr_bool(nd, "transpose_a", false)) continue;
    const eng_tensor *w = const_of(p, p->base[nd->in[1].node] + nd->in[1].index);
    if (ein) {
      /* Einsum's dense layers (EinsumDense): packed when every input runs
       * the in-place product against it (eng_einsum_const_b). */
      int64_t k, n;
      bool tb;
      if (w && w->dtype == ENG_DT_FLOAT &&
          eng_einsum_const_b(eng_attr_str(nd, "equation", ""), &w->shape, &k, &n, &tb))
        p->packed[s] = eng_model_pack(p->m, w, k, n, tb, NULL, 0);
      continue;
    }
    if (!w || w->dtype != ENG_DT_FLOAT || w->shape.rank != (mm || bmm ? 2 : 4)) continue;
    /* A per-channel (or scalar) multiply first in the fused epilogue (a
     * batch-norm scale) goes into the packed weights; eng_kgemm_epi then
     * skips it. Not for BatchMatMul, which may still run unpacked. */
    const eng_epilogue *e = p->epi ? p->epi[s] : NULL;
    const float *scale = NULL;
    int64_t nscale = 0;
    if (!bmm && e && e->n > 0 && e->op[0].kind == EPI_MUL && e->op[0].k.buf) {
      scale = eng_tensor_data(&e->op[0].k);
      nscale = eng_tensor_numel(&e->op[0].k);
    }
    if (conv && wino_conv(nd, w)) {
      p->packed[s] = eng_model_pack_wino(p->m, w, scale, nscale);
      if (!p->packed[s] && scale && eng_tensor_hollow(w))
        p->packed[s] = eng_model_pack_wino(p->m, w, NULL, 0);
      if (p->packed[s]) continue;
    }
    bool tb = (mm || bmm) && eng_node_attr_bool(nd, mm ? "transpose_b" : "adj_y", false);
    const int64_t *d = w->shape.dim;
    int64_t k = mm || bmm ? d[tb ? 1 : 0] : d[0] * d[1] * d[2], n = mm || bmm ? d[tb ? 0 : 1] : d[3];
    p->packed[s] = eng_model_pack(p->m, w, k, n, tb, scale, nscale);
    /* A weight held only packed (a shape plan built after its original was
     * freed) has only the forms packed so far: without its scaled form,
     * the unscaled one, the multiply staying in the epilogue. */
    if (!p->packed[s] && scale && eng_tensor_hollow(w))
      p->packed[s] = eng_model_pack(p->m, w, k, n, tb, NULL, 0);
  }
}

void eng_plan_compile(eng_plan *p) {
  if (!foldable_plan(p)) return;
  fold(p);
  fuse(p);
  fuse_layer_norms(p);
  fold_pads(p);
  scale_dw_filters(p);
  pack_weights(p);
  fuse_expand_depthwise(p);
  fuse_scaled_conv(p);
  recount_uses(p);
}

/* --- shape specialisation --------------------------------------------------
 *
 * Dynamic-shape Keras graphs compute shapes at run time (Shape ->
 * StridedSlice -> Pack -> Reshape, tensordot's GatherV2/Prod/ConcatV2).
 * Given the shapes of the fed inputs, every value computed from shapes and
 * constants alone is fixed, so a plan specialised to one set of input
 * shapes folds them as constants. Two flags per node, from the inputs
 * forward: V (its value depends on no fed data: constants, variables, the
 * Shape of a tensor whose shape is known) and S (its shape is known: from
 * the feeds' shapes and the V inputs that ops read shapes from, the op
 * table's ENG_OP_SHAPED and shape_values). The V steps are
 * then folded like constants, evaluated once on the first request of that
 * shape (their values cannot depend on its data). */

#define MAX_SPECS 4

/* Marks the steps whose values follow from the input shapes; true when
 * there is any. */
static bool shape_consts(eng_plan *p, bool *cnode, bool *cstep) {
  const eng_graph *g = eng_model_graph(p->m);
  int n = eng_graph_node_count(g), nv = 0;
  bool *snode = calloc((size_t)n + 1, sizeof *snode);
  if (!snode) return false;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    const eng_op_def *od = p->ops[s];
    bool v = strcmp(nd->op, "Placeholder") != 0 && !(od->flags & ENG_OP_RANDOM), sh = true;
    bool rule = od->flags & ENG_OP_SHAPED;
    for (int k = 0; k < nd->n_in; k++) {
      int in = nd->in[k].node;
      bool fed = is_fed(p, p->base[in] + nd->in[k].index);
      bool iv = !fed && cnode[in], is = fed || snode[in];
      v = v && iv;
      bool need_value = rule && (od->shape_values == ENG_SHAPE_LAST ? k == nd->n_in - 1
                                                                     : (od->shape_values >> k) & 1);
      sh = sh && (need_value ? iv : is);
    }
    for (int k = 0; k < nd->n_ctrl && v; k++) v = cnode[nd->ctrl[k]];
    if (!strcmp(nd->op, "Shape") && nd->n_in == 1) {
      int in = nd->in[0].node;
      v = v || is_fed(p, p->base[in] + nd->in[0].index) || snode[in];
    }
    cnode[p->steps[s]] = cstep[s] = v;
    snode[p->steps[s]] = v || (rule && sh);
    nv += v;
  }
  free(snode);
  return nv > 0;
}

static bool spec_match(const eng_spec *s, int n, const eng_tensor *in) {
  for (int i = 0; i < n; i++)
    if (s->dtypes[i] != in[i].dtype || !eng_shape_equal(&s->shapes[i], &in[i].shape)) return false;
  return true;
}

static eng_plan *build_spec(eng_plan *p, const eng_tensor *in) {
  eng_plan *sp = NULL;
  td_err err;
  td_err_clear(&err);
  if (eng_plan_build(p->m, p->n_inputs, (const char *const *)p->in_name, p->n_outputs,
                     (const char *const *)p->out_name, 0, NULL, &sp, &err))
    return NULL;
  const eng_graph *g = eng_model_graph(p->m);
  int n = eng_graph_node_count(g);
  bool *cnode = calloc((size_t)n + 1, sizeof *cnode);
  bool *cstep = calloc((size_t)sp->n_steps + 1, sizeof *cstep);
  bool ok = cnode && cstep && shape_consts(sp, cnode, cstep) &&
            fold_steps(sp, cstep, cnode, in, p);
  free(cnode);
  free(cstep);
  if (!ok) {
    eng_plan_destroy(sp);
    return NULL;
  }
  fuse(sp);
  fuse_layer_norms(sp);
  fold_pads(sp);
  scale_dw_filters(sp);
  pack_weights(sp);
  fuse_expand_depthwise(sp);
  fuse_scaled_conv(sp);
  recount_uses(sp);
  sp->is_specialised = true;
  return sp;
}

const eng_plan *eng_plan_specialised(eng_plan *p, const eng_tensor *in) {
  int n = p->n_inputs;
  mtx_lock(&p->spec_lock);
  for (int i = 0; i < p->n_specs; i++)
    if (spec_match(&p->specs[i], n, in)) {
      eng_plan *hit = p->specs[i].plan;
      mtx_unlock(&p->spec_lock);
      return hit;
    }
  bool full = p->n_specs >= MAX_SPECS;
  mtx_unlock(&p->spec_lock);
  if (full) return NULL;
  for (int i = 0; i < n; i++) /* a bad feed is the general plan's to report */
    if (eng_plan_check_feed(p, i, &in[i], NULL) || in[i].shape.rank < 0) return NULL;
  eng_plan *sp = build_spec(p, in); /* NULL when it fails: remembered as such */
  eng_shape *shapes = malloc(sizeof *shapes * ((size_t)n + 1));
  eng_dtype *dtypes = malloc(sizeof *dtypes * ((size_t)n + 1));
  const eng_plan *result = NULL;
  bool found = false;
  mtx_lock(&p->spec_lock);
  if (!p->specs) p->specs = calloc(MAX_SPECS, sizeof *p->specs);
  for (int i = 0; i < p->n_specs && !found; i++)
    if (spec_match(&p->specs[i], n, in)) { /* another thread was first */
      result = p->specs[i].plan;
      found = true;
    }
  if (!found && p->specs && shapes && dtypes && p->n_specs < MAX_SPECS) {
    for (int i = 0; i < n; i++) {
      shapes[i] = in[i].shape;
      dtypes[i] = in[i].dtype;
    }
    p->specs[p->n_specs++] = (eng_spec){shapes, dtypes, sp};
    result = sp;
    sp = NULL;
    shapes = NULL;
    dtypes = NULL;
  }
  mtx_unlock(&p->spec_lock);
  eng_plan_destroy(sp); /* not stored */
  free(shapes);
  free(dtypes);
  return result;
}

void eng_plan_prepare(eng_plan *p, int64_t batch) {
  if (!p->can_specialise || p->n_inputs > 64) return;
  eng_tensor in[64] = {0};
  int n = 0;
  td_err err;
  for (; n < p->n_inputs; n++) {
    eng_shape s = p->in_shape[n];
    bool known = s.rank >= 1 && eng_dtype_size(p->in_dtype[n]) > 0;
    if (known && s.dim[0] < 0) s.dim[0] = batch;
    for (int d = 0; known && d < s.rank; d++) known = s.dim[d] >= 0;
    if (!known || eng_tensor_alloc(&in[n], p->in_dtype[n], &s, &err)) break;
  }
  if (n == p->n_inputs) eng_plan_specialised(p, in); /* values are not read */
  for (int i = 0; i < n; i++) eng_tensor_release(&in[i]);
}

void eng_plan_free_specs(eng_plan *p) {
  if (!p->can_specialise) return;
  for (int i = 0; p->specs && i < p->n_specs; i++) {
    eng_plan_destroy(p->specs[i].plan);
    free(p->specs[i].shapes);
    free(p->specs[i].dtypes);
  }
  free(p->specs);
  mtx_destroy(&p->spec_lock);
}
