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
 * Then the fusion passes, in this order: epilogue chains (eng_fuse.h),
 * merged steps that need no packed weights (eng_merge.h), the depthwise
 * scales, the weights packed for eng_gemm (pack_weights), and the merges
 * that read packed weights. Each pass leaves a valid plan when memory runs
 * short, with less done. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_device.h"
#include "eng_einsum.h"
#include "eng_fuse.h"
#include "eng_gemm.h"
#include "eng_merge.h"
#include "eng_pass.h"
#include "eng_plan.h"
#include "eng_run.h"
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

/* The frontier of p's constant steps (cstep; cnode per graph node): the
 * values they make that the other steps or the fetches read, marked in
 * front[n_values]. */
static void frontier(const eng_plan *p, const bool *cstep, const bool *cnode, bool *front) {
  const eng_graph *g = eng_model_graph(p->m);
  for (int s = 0; s < p->n_steps; s++) {
    if (cstep[s]) continue;
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++) {
      int v = p->base[nd->in[k].node] + nd->in[k].index;
      if (cnode[nd->in[k].node] && !eng_pass_is_fed(p, v)) front[v] = true;
    }
  }
  for (int i = 0; i < p->n_outputs; i++) {
    int v = p->out_value[i];
    for (int s = 0; s < p->n_steps; s++)
      if (cstep[s] && v >= p->base[p->steps[s]] &&
          v < p->base[p->steps[s]] + eng_graph_node(g, p->steps[s])->n_out &&
          !eng_pass_is_fed(p, v))
        front[v] = true;
  }
}

/* Removes the steps marked constant (cstep; cnode per graph node) after
 * computing, with one sub-plan run fed `in` (may be none), the constant
 * values that the remaining steps or the fetches read; or, where `kept`
 * (per value, may be NULL) holds every one of them, taking them from it.
 * Leaves the plan untouched when that run fails. `known` (may be NULL) is a plan of the
 * same graph whose constants are reused as they are (fed to that run, or
 * taken directly): a shape specialisation then reads no variable again,
 * and shares its parent's weights, packed or not (a weight whose original
 * the model released after packing is never recomputed from it), the
 * sub-plan running the parent's packed weights (share_packed). */
static bool fold_steps(eng_plan *p, const bool *cstep, const bool *cnode, const eng_tensor *in,
                       const eng_plan *known, const eng_tensor *kept) {
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
  /* Except depthwise filters: eng_fuse_dw_scales may have rewritten those,
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
  frontier(p, cstep, cnode, front);
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
  bool all_kept = kept != NULL;
  for (int i = nd_known; i < nf && all_kept; i++) all_kept = kept[fv[i]].buf != NULL;
  for (int i = nd_known; i < nf && all_kept; i++) vals[i] = eng_tensor_share(&kept[fv[i]]);
  td_err err;
  td_err_clear(&err);
  if (nf > nd_known && !all_kept &&
      (eng_plan_build(p->m, n_feeds, in_names, nf - nd_known, (const char *const *)names, 0, NULL,
                      &sub, &err) ||
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
  eng_pass_drop_steps(p, cstep);
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
        c = cnode[nd->in[k].node] && !eng_pass_is_fed(p, p->base[nd->in[k].node] + nd->in[k].index);
      for (int k = 0; k < nd->n_ctrl && c; k++) c = cnode[nd->ctrl[k]];
      cnode[p->steps[s]] = cstep[s] = c;
      nconst += c;
    }
    if (nconst) fold_steps(p, cstep, cnode, NULL, NULL, NULL);
  }
  free(cstep);
  free(cnode);
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
    bool bmm = eng_pass_dense_bmm(nd), ein = !strcmp(nd->op, "Einsum");
    if ((!mm && !conv && !bmm && !ein) || nd->n_in != 2) continue;
    if (mm && eng_node_attr_bool(nd, "transpose_a", false)) continue;
    const eng_tensor *w = eng_pass_const(p, p->base[nd->in[1].node] + nd->in[1].index);
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

/* The passes after folding, for the general plan and its shape
 * specialisations alike. */
static void run_passes(eng_plan *p) {
  eng_fuse_chains(p);
  eng_merge_layer_norms(p);
  eng_merge_pad_views(p);
  eng_fuse_dw_scales(p);
  pack_weights(p);
  eng_merge_expand_depthwise(p);
  eng_merge_scaled_conv(p);
  recount_uses(p);
}

void eng_plan_compile(eng_plan *p) {
  if (!foldable_plan(p)) return;
  fold(p);
  run_passes(p);
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

/* Shape plans per plan: the first SPEC_FREE shapes get one whatever it
 * holds; after them, up to MAX_SPECS while what those later plans hold of
 * their own (spec_own_bytes) stays within SPEC_BUDGET. Most folded values
 * are shape vectors, a few hundred bytes a plan besides its schedule, so a
 * server that sees every batch size from 1 to 32 keeps a plan for each; a
 * model that folds activation-sized values (a Fill of a Shape) stops at
 * the first plan refused for the budget, and later shapes run the general
 * plan. */
#define SPEC_FREE 4
#define MAX_SPECS 32
#define SPEC_BUDGET ((size_t)16 << 20)

/* Marks the steps whose values follow from the input shapes (constants
 * among them); how many of those read a Shape of a value not constant
 * before (the steps the general plan could not fold), or -1 when memory
 * is short. */
static int shape_consts(eng_plan *p, bool *cnode, bool *cstep) {
  const eng_graph *g = eng_model_graph(p->m);
  int n = eng_graph_node_count(g), nv = 0;
  bool *snode = calloc(2 * ((size_t)n + 1), sizeof *snode);
  if (!snode) return -1;
  bool *dnode = snode + n + 1; /* reads a Shape that folds only here */
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    const eng_op_def *od = p->ops[s];
    bool v = strcmp(nd->op, "Placeholder") != 0 && !(od->flags & ENG_OP_RANDOM), sh = true;
    bool rule = od->flags & ENG_OP_SHAPED, d = false;
    for (int k = 0; k < nd->n_in; k++) {
      int in = nd->in[k].node;
      bool fed = eng_pass_is_fed(p, p->base[in] + nd->in[k].index);
      bool iv = !fed && cnode[in], is = fed || snode[in];
      v = v && iv;
      d = d || dnode[in];
      bool need_value = rule && (od->shape_values == ENG_SHAPE_LAST ? k == nd->n_in - 1
                                                                     : (od->shape_values >> k) & 1);
      sh = sh && (need_value ? iv : is);
    }
    for (int k = 0; k < nd->n_ctrl && v; k++) v = cnode[nd->ctrl[k]];
    if (!strcmp(nd->op, "Shape") && nd->n_in == 1 && !v) {
      int in = nd->in[0].node;
      v = d = eng_pass_is_fed(p, p->base[in] + nd->in[0].index) || snode[in];
    }
    cnode[p->steps[s]] = cstep[s] = v;
    snode[p->steps[s]] = v || (rule && sh);
    dnode[p->steps[s]] = v && d;
    nv += v && d;
  }
  free(snode);
  return nv;
}

static bool spec_match(const eng_spec *s, int n, const eng_tensor *in) {
  for (int i = 0; i < n; i++)
    if (s->dtypes[i] != in[i].dtype || !eng_shape_equal(&s->shapes[i], &in[i].shape)) return false;
  return true;
}

static void spec_build_free(eng_spec_build *b) {
  if (!b) return;
  for (int v = 0; b->kept && v < b->n_values; v++) eng_tensor_release(&b->kept[v]);
  eng_plan_destroy(b->sp);
  free(b->cnode);
  free(b->cstep);
  free(b->want);
  free(b->kept);
  free(b);
}

/* The schedule of p's specialisation to in's shapes, its steps marked
 * constant for them, and the values a run must keep to fold them; NULL
 * when there is nothing to fold or memory is short. */
static eng_spec_build *spec_begin(eng_plan *p) {
  eng_spec_build *b = calloc(1, sizeof *b);
  td_err err;
  td_err_clear(&err);
  if (!b || eng_plan_build(p->m, p->n_inputs, (const char *const *)p->in_name, p->n_outputs,
                           (const char *const *)p->out_name, 0, NULL, &b->sp, &err)) {
    spec_build_free(b);
    return NULL;
  }
  eng_plan *sp = b->sp;
  b->n_values = sp->n_values;
  int n = eng_graph_node_count(eng_model_graph(p->m));
  b->cnode = calloc((size_t)n + 1, sizeof *b->cnode);
  b->cstep = calloc((size_t)sp->n_steps + 1, sizeof *b->cstep);
  b->want = calloc((size_t)sp->n_values + 1, sizeof *b->want);
  b->kept = calloc((size_t)sp->n_values + 1, sizeof *b->kept);
  bool ok = b->cnode && b->cstep && b->want && b->kept;
  int folds = ok ? shape_consts(sp, b->cnode, b->cstep) : -1;
  if (folds <= 0) {
    /* Which steps fold follows from which values are fed, not from their
     * shapes: when none does, no later shape finds any either. */
    if (!folds) {
      mtx_lock(&p->spec_lock);
      p->spec_none = true;
      mtx_unlock(&p->spec_lock);
    }
    spec_build_free(b);
    return NULL;
  }
  frontier(sp, b->cstep, b->cnode, b->want);
  return b;
}

/* Folds b's constant steps (from b->kept where it holds them all, else by
 * a sub-plan run fed in) and runs the passes; the plan, or NULL. */
static eng_plan *spec_end(eng_plan *p, const eng_tensor *in, eng_spec_build *b) {
  eng_plan *sp = b->sp;
  if (!fold_steps(sp, b->cstep, b->cnode, in, p, b->kept)) return NULL;
  b->sp = NULL;
  run_passes(sp);
  sp->is_specialised = true;
  return sp;
}

/* Bytes sp holds that its general plan p does not: the constants it
 * folded (not those it shares with p) and its schedule's arrays. */
static size_t spec_own_bytes(const eng_plan *p, const eng_plan *sp) {
  size_t bytes = sizeof *sp + (size_t)sp->n_steps * (sizeof *sp->steps + sizeof *sp->ops +
                                                     sizeof *sp->epi + sizeof *sp->packed) +
                 (size_t)eng_graph_node_count(eng_model_graph(sp->m)) * sizeof *sp->base +
                 (size_t)sp->n_values * sizeof *sp->uses +
                 (size_t)sp->n_consts * (sizeof *sp->const_value + sizeof *sp->const_tensor);
  for (int i = 0; i < sp->n_consts; i++) {
    bool shared = false;
    for (int j = 0; j < p->n_consts && !shared; j++)
      shared = sp->const_tensor[i].buf == p->const_tensor[j].buf;
    if (!shared) bytes += eng_tensor_nbytes(&sp->const_tensor[i]);
  }
  return bytes;
}

/* Whether the cache takes no more plans (spec_lock held). */
static bool spec_full(const eng_plan *p) {
  return p->spec_none || p->n_specs >= MAX_SPECS ||
         (p->n_specs >= SPEC_FREE && p->spec_bytes > SPEC_BUDGET);
}

/* The cached plan for in's shapes and dtypes in *hit (NULL: none, or a
 * build that failed); false when there is none and room for one. */
static bool spec_cached(eng_plan *p, const eng_tensor *in, const eng_plan **hit) {
  bool found = false;
  *hit = NULL;
  mtx_lock(&p->spec_lock);
  for (int i = 0; i < p->n_specs && !found; i++)
    if (spec_match(&p->specs[i], p->n_inputs, in)) {
      *hit = p->specs[i].plan;
      found = true;
    }
  found = found || spec_full(p);
  mtx_unlock(&p->spec_lock);
  return found;
}

/* Stores sp (NULL: the build failed, remembered as such) as the plan for
 * in's shapes unless another thread was first or the cache is full (past
 * SPEC_FREE, a plan over the budget closes it); the plan now cached for
 * them, or NULL. */
static const eng_plan *spec_store(eng_plan *p, const eng_tensor *in, eng_plan *sp) {
  int n = p->n_inputs;
  size_t own = sp ? spec_own_bytes(p, sp) : 0;
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
  if (!found && !spec_full(p) && p->n_specs >= SPEC_FREE && own > SPEC_BUDGET - p->spec_bytes)
    p->spec_bytes = SIZE_MAX; /* over the budget: this shape and later ones run p */
  if (!found && p->specs && shapes && dtypes && !spec_full(p)) {
    if (p->n_specs >= SPEC_FREE) p->spec_bytes += own;
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

/* Whether in are feeds p accepts, with known ranks: a bad feed is the
 * general plan's to report. */
static bool feeds_ok(const eng_plan *p, const eng_tensor *in) {
  for (int i = 0; i < p->n_inputs; i++)
    if (eng_plan_check_feed(p, i, &in[i], NULL) || in[i].shape.rank < 0) return false;
  return true;
}

const eng_plan *eng_plan_specialised(eng_plan *p, const eng_tensor *in) {
  const eng_plan *hit;
  if (spec_cached(p, in, &hit) || !feeds_ok(p, in)) return hit;
  eng_spec_build *b = spec_begin(p);
  eng_plan *sp = b ? spec_end(p, in, b) : NULL; /* NULL when it fails: remembered as such */
  spec_build_free(b);
  return spec_store(p, in, sp);
}

const eng_plan *eng_plan_spec_find(eng_plan *p, const eng_tensor *in, eng_spec_build **build) {
  const eng_plan *hit;
  *build = NULL;
  if (spec_cached(p, in, &hit) || !feeds_ok(p, in)) return hit;
  if (!(*build = spec_begin(p))) return spec_store(p, in, NULL);
  return NULL;
}

const eng_plan *eng_plan_spec_finish(eng_plan *p, const eng_tensor *in, eng_spec_build *b,
                                     bool ran) {
  const eng_plan *result = NULL;
  if (ran) result = spec_store(p, in, spec_end(p, in, b));
  spec_build_free(b);
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