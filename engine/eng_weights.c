/* A model's weight memory: the table of weights packed for eng_gemm
 * (shared by every plan of the model), freeing the originals that only
 * their packed form needs, and what the model holds.
 *
 * Releasing rests on three facts: the buffers a model's plans, variables
 * and packed table share are counted (eng_tensor_refs), so a holder nobody
 * knows of keeps an original alive; a Conv2D, MatMul, dense BatchMatMul
 * or Einsum step with a packed weight runs the packed form whenever its
 * input's geometry allows (for Conv2D: input channels equal to the
 * filter's depth, which the graph must show, else the original stays; an
 * Einsum is packed only when every input runs it, eng_einsum_const_b);
 * and a hollow
 * original left in every place that named the weight keeps it findable in
 * the packed table (shape-specialised plans reuse the general plan's
 * constants, eng_compile.c). A step that would still read a hollow weight
 * fails cleanly (eng_run.c and the kernels check).
 *
 * Restoring only what is needed (eng_model_note_reads): a RestoreV2 output
 * is skipped when every node reading it (through Identity and IdentityN)
 * is an AssignVariableOp into a variable no noted plan touches. Any other
 * reader, anywhere in the graph, keeps it. */
#include <stdlib.h>
#include <string.h>

#include "eng_inline.h"
#include "eng_model_int.h"
#include "eng_plan.h"
#include "eng_wino.h"

static struct packed_weight *find_packed(eng_model *m, const eng_tensor *w, int64_t k, int64_t n,
                                         bool trans_b, const float *scale, int64_t nscale,
                                         bool wino) {
  for (int i = 0; i < m->n_packed; i++) {
    struct packed_weight *e = &m->packed[i];
    if (eng_tensor_data(&e->w) == eng_tensor_data(w) && e->k == k && e->n == n &&
        e->trans_b == trans_b && e->wino == wino && e->nscale == nscale &&
        (!nscale || !memcmp(e->scale, scale, sizeof *scale * (size_t)nscale)))
      return e;
  }
  return NULL;
}

static bool grow_packed(eng_model *m) {
  int cap = m->cap_packed ? 2 * m->cap_packed : 8;
  struct packed_weight *p = realloc(m->packed, sizeof *p * (size_t)cap);
  if (!p) return false;
  m->packed = p;
  m->cap_packed = cap;
  return true;
}

/* eng_model_pack and eng_model_pack_wino: wino, a filter [3, 3, k, n] in
 * eng_wino_pack's form. */
static const eng_packed *pack_form(eng_model *m, const eng_tensor *w, int64_t k, int64_t n,
                                   bool trans_b, const float *scale, int64_t nscale, bool wino) {
  if (!m->pack_lock_init) return NULL;
  if (!scale) nscale = 0;
  /* A hollow weight can only be found packed already, never packed anew. */
  bool hollow = eng_tensor_hollow(w);
  mtx_lock(&m->pack_lock);
  struct packed_weight *hit = find_packed(m, w, k, n, trans_b, scale, nscale, wino);
  mtx_unlock(&m->pack_lock);
  if (hit || hollow) return hit ? hit->packed : NULL;
  /* Packed outside the lock; a racing plan that packed the same weight
   * first wins and this copy is dropped. */
  eng_packed *pk = wino ? eng_wino_pack(eng_tensor_data(w), k, n, scale, nscale)
                        : eng_gemm_pack_scaled(eng_tensor_data(w), k, n, trans_b, scale, nscale);
  if (!pk) return NULL;
  float *sc = nscale ? malloc(sizeof *sc * (size_t)nscale) : NULL;
  if (nscale && !sc) {
    eng_gemm_free(pk);
    return NULL;
  }
  if (sc) memcpy(sc, scale, sizeof *sc * (size_t)nscale);
  const eng_packed *result = NULL;
  mtx_lock(&m->pack_lock);
  hit = find_packed(m, w, k, n, trans_b, scale, nscale, wino);
  if (hit) {
    result = hit->packed;
  } else if (m->n_packed < m->cap_packed || grow_packed(m)) {
    m->packed[m->n_packed++] =
        (struct packed_weight){eng_tensor_share(w), k, n, trans_b, wino, sc, nscale, pk};
    result = pk;
    pk = NULL;
    sc = NULL;
  }
  mtx_unlock(&m->pack_lock);
  eng_gemm_free(pk);
  free(sc);
  return result;
}

const eng_packed *eng_model_pack(eng_model *m, const eng_tensor *w, int64_t k, int64_t n,
                                 bool trans_b, const float *scale, int64_t nscale) {
  return pack_form(m, w, k, n, trans_b, scale, nscale, false);
}

const eng_packed *eng_model_pack_wino(eng_model *m, const eng_tensor *w, const float *scale,
                                      int64_t nscale) {
  if (w->shape.rank != 4 || w->shape.dim[0] != 3 || w->shape.dim[1] != 3) return NULL;
  return pack_form(m, w, w->shape.dim[2], w->shape.dim[3], false, scale, nscale, true);
}

/* --- releasing the originals of packed weights ------------------------- */

typedef struct plan_list {
  int n, cap;
  const eng_plan **p;
} plan_list;

static bool plan_list_add(plan_list *l, const eng_plan *p) {
  if (!p) return true;
  if (l->n == l->cap) {
    int cap = l->cap ? 2 * l->cap : 16;
    const eng_plan **np = realloc(l->p, sizeof *np * (size_t)cap);
    if (!np) return false;
    l->p = np;
    l->cap = cap;
  }
  l->p[l->n++] = p;
  for (int i = 0; p->can_specialise && p->specs && i < p->n_specs; i++)
    if (!plan_list_add(l, p->specs[i].plan)) return false;
  return true;
}

/* True when some step of plan p reads a variable when it runs. */
static bool reads_variables(const eng_model *m, const eng_plan *p) {
  for (int s = 0; s < p->n_steps; s++)
    if (m->node_slot[p->steps[s]] >= 0) return true;
  for (int i = 0; i < p->n_consts; i++)
    if (p->const_tensor[i].dtype == ENG_DT_RESOURCE || p->const_tensor[i].is_ref) return true;
  return false;
}

static const eng_tensor *plan_const(const eng_plan *p, int v) {
  for (int i = 0; i < p->n_consts; i++)
    if (p->const_value[i] == v) return &p->const_tensor[i];
  return NULL;
}

static bool one_of(const char *op, const char *const *names) {
  for (; *names; names++)
    if (!strcmp(op, *names)) return true;
  return false;
}

static const char *const SAME_CHANNELS[] = {"Identity",
                                            "Relu",
                                            "Relu6",
                                            "Elu",
                                            "Selu",
                                            "LeakyRelu",
                                            "Sigmoid",
                                            "Tanh",
                                            "Softplus",
                                            "Softsign",
                                            "Neg",
                                            "Square",
                                            "Sqrt",
                                            "Rsqrt",
                                            "Exp",
                                            "Abs",
                                            "Cast",
                                            "StopGradient",
                                            "BiasAdd",
                                            "FusedBatchNorm",
                                            "FusedBatchNormV2",
                                            "FusedBatchNormV3",
                                            "Pad",
                                            "PadV2",
                                            "MirrorPad",
                                            "MaxPool",
                                            "AvgPool",
                                            NULL};
static const char *const BROADCAST[] = {
    "Add", "AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "SquaredDifference", NULL};

/* The last (channel) dim of value e of plan p as the graph shows it, or -1
 * when it does not: Placeholders, constants, convolutions' filters, ops
 * that keep their input's channels, broadcasting binary ops, and means
 * over the spatial axes. *budget bounds the walk. */
static int64_t channels_of(const eng_model *m, const eng_plan *p, eng_edge e, int *budget) {
  if (--*budget < 0) return -1;
  const eng_tensor *c = plan_const(p, p->base[e.node] + e.index);
  if (c) return c->shape.rank >= 1 ? c->shape.dim[c->shape.rank - 1] : 1;
  const eng_node *nd = eng_graph_node(m->g, e.node);
  if (e.index != 0) return -1;
  if (!strcmp(nd->op, "Placeholder")) {
    const eng_attr *a = eng_node_attr(nd, "shape");
    if (!a || a->kind != ENG_ATTR_SHAPE || a->shape.rank < 1) return -1;
    return a->shape.dim[a->shape.rank - 1];
  }
  if (nd->n_in < 1 || strcmp(eng_attr_str(nd, "data_format", "NHWC"), "NHWC")) return -1;
  bool conv = !strcmp(nd->op, "Conv2D"), dw = !strcmp(nd->op, "DepthwiseConv2dNative");
  if ((conv || dw) && nd->n_in == 2) {
    const eng_tensor *f = plan_const(p, p->base[nd->in[1].node] + nd->in[1].index);
    if (!f || f->shape.rank != 4) return -1;
    return conv ? f->shape.dim[3] : f->shape.dim[2] * f->shape.dim[3];
  }
  if (one_of(nd->op, SAME_CHANNELS)) return channels_of(m, p, nd->in[0], budget);
  if (!strcmp(nd->op, "Mean") && nd->n_in == 2 && eng_node_attr_bool(nd, "keep_dims", false)) {
    const eng_tensor *ax = plan_const(p, p->base[nd->in[1].node] + nd->in[1].index);
    if (!ax || (ax->dtype != ENG_DT_INT32 && ax->dtype != ENG_DT_INT64)) return -1;
    for (int64_t i = 0; i < eng_tensor_numel(ax); i++) {
      int64_t a = ax->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(ax))[i]
                                            : ((const int64_t *)eng_tensor_data(ax))[i];
      if (a != 1 && a != 2) return -1; /* only height and width, of NHWC */
    }
    return channels_of(m, p, nd->in[0], budget);
  }
  if (one_of(nd->op, BROADCAST) && nd->n_in == 2) {
    int64_t a = channels_of(m, p, nd->in[0], budget), b = channels_of(m, p, nd->in[1], budget);
    if (a == b) return a;
    if (a == 1 || b < 0) return a > 1 ? a : -1; /* [..., 1] or unknown against a > 1 */
    if (b == 1 || a < 0) return b > 1 ? b : -1;
    return -1; /* a mismatch: the op itself fails */
  }
  return -1;
}

/* The Conv2D's input channels are the filter's depth (otherwise it is a
 * grouped convolution, which reads the original). */
bool eng_plan_conv_runs_packed(const eng_model *m, const eng_plan *p, int s) {
  const eng_node *nd = eng_graph_node(m->g, p->steps[s]);
  const eng_tensor *f = plan_const(p, p->base[nd->in[1].node] + nd->in[1].index);
  int budget = 256;
  return f && f->shape.rank == 4 && channels_of(m, p, nd->in[0], &budget) == f->shape.dim[2];
}

/* Counts p's references to buffer b; false when one of them is fetched or
 * read by a step that does not run on the packed form. */
static bool packed_only(const eng_model *m, const eng_plan *p, const eng_buffer *b, int *refs) {
  /* An epilogue operand is read as data. */
  for (int s = 0; p->epi && s < p->n_steps; s++)
    for (int k = 0; p->epi[s] && k < p->epi[s]->n; k++)
      if (p->epi[s]->op[k].k.buf == b) return false;
  for (int i = 0; i < p->n_consts; i++) {
    if (p->const_tensor[i].buf != b) continue;
    (*refs)++;
    int v = p->const_value[i];
    for (int o = 0; o < p->n_outputs; o++)
      if (p->out_value[o] == v) return false;
    for (int s = 0; s < p->n_steps; s++) {
      const eng_node *nd = eng_graph_node(m->g, p->steps[s]);
      for (int k = 0; k < nd->n_in; k++) {
        if (p->base[nd->in[k].node] + nd->in[k].index != v) continue;
        /* Kernels that run a packed weight on every input they accept. */
        const char *op = p->ops[s]->name;
        bool packed =
            p->packed && p->packed[s] && k == 1 &&
            (!strcmp(op, "MatMul") || !strncmp(op, "BatchMatMul", 11) || !strcmp(op, "Einsum") ||
             ((!strcmp(op, "Conv2D") || !strcmp(op, "_ExpandDepthwise")) &&
              eng_plan_conv_runs_packed(m, p, s)));
        if (!packed) return false;
      }
    }
  }
  return true;
}

static void replace_buffer(eng_tensor *t, const eng_buffer *b, const eng_tensor *with) {
  if (t->buf != b) return;
  eng_tensor_release(t);
  *t = eng_tensor_share(with);
}

size_t eng_model_release_packed_sources(eng_model *m, int n_plans, eng_plan *const *plans) {
  if (m->dev || !m->n_packed) return 0;
  plan_list l = {0};
  bool ok = true;
  for (int i = 0; i < n_plans && ok; i++) ok = plan_list_add(&l, plans[i]);
  for (int i = 0; i < m->n_sub && ok; i++) ok = plan_list_add(&l, m->sub[i].plan);
  for (int i = 0; i < l.n && ok; i++) ok = !reads_variables(m, l.p[i]);
  size_t freed = 0;
  for (int e = 0; e < m->n_packed && ok; e++) {
    const eng_tensor *w = &m->packed[e].w;
    const eng_buffer *b = w->buf;
    if (!b || eng_tensor_hollow(w) || w->dtype != ENG_DT_FLOAT) continue;
    int known = 0;
    bool only = true;
    for (int i = 0; i < m->n_packed; i++) known += m->packed[i].w.buf == b;
    for (int i = 0; i < m->n_slots; i++) known += m->slots[i].value.buf == b;
    for (int i = 0; i < l.n && only; i++) only = packed_only(m, l.p[i], b, &known);
    if (!only || eng_tensor_refs(w) != known) continue;
    eng_tensor hollow;
    if (eng_tensor_alloc_hollow(&hollow, w->dtype, &w->shape, NULL)) break;
    freed += eng_tensor_nbytes(w);
    for (int i = 0; i < l.n; i++) {
      eng_plan *p = (eng_plan *)l.p[i];
      for (int c = 0; c < p->n_consts; c++) replace_buffer(&p->const_tensor[c], b, &hollow);
    }
    for (int i = 0; i < m->n_slots; i++) replace_buffer(&m->slots[i].value, b, &hollow);
    /* Last: this entry's own share may be the last reference to b. */
    for (int i = m->n_packed - 1; i >= 0; i--) replace_buffer(&m->packed[i].w, b, &hollow);
    eng_tensor_release(&hollow);
  }
  free(l.p);
  m->released += freed;
  return freed;
}

eng_weight_stats eng_model_weight_stats(const eng_model *m) {
  eng_weight_stats st = {.released_bytes = m->released};
  for (int i = 0; i < m->n_slots; i++) {
    const eng_tensor *v = &m->slots[i].value;
    if (v->buf && !v->is_ref && v->dtype != ENG_DT_STRING && v->dtype != ENG_DT_RESOURCE &&
        !eng_tensor_hollow(v))
      st.variable_bytes += eng_tensor_nbytes(v);
  }
  for (int i = 0; i < m->n_packed; i++) {
    const eng_tensor *w = &m->packed[i].w;
    bool first = true; /* a weight packed twice (two scales) counts once */
    for (int j = 0; j < i && first; j++) first = m->packed[j].w.buf != w->buf;
    if (first && !eng_tensor_hollow(w)) st.packed_sources += eng_tensor_nbytes(w);
    const eng_packed *pk = m->packed[i].packed;
    int64_t parts = eng_gemm_parts(pk) ? eng_gemm_parts(pk) : 1;
    st.packed_bytes += sizeof(float) * (size_t)(parts * eng_gemm_k(pk) * eng_gemm_n(pk));
  }
  return st;
}

/* --- restoring only what noted plans need ------------------------------- */

void eng_model_note_reads(eng_model *m, int n_inputs, const char *const *inputs, int n_outputs,
                          const char *const *outputs, int n_targets, const char *const *targets) {
  if (m->noting < 0) return;
  eng_plan *p = NULL;
  td_err err;
  if (eng_plan_build(m, n_inputs, inputs, n_outputs, outputs, n_targets, targets, &p, &err)) {
    m->noting = -1;
    return;
  }
  bool nested = false; /* subgraph plans read variables this walk does not see */
  for (int s = 0; s < p->n_steps; s++) {
    int64_t slot = m->node_slot[p->steps[s]];
    if (slot >= 0) m->slots[slot].noted = true;
    nested |= eng_inline_is_control_flow(eng_graph_node(m->g, p->steps[s]));
  }
  eng_plan_destroy(p);
  m->noting = nested ? -1 : 1;
}

/* The edge e stands for once Identity and IdentityN are looked through. */
static eng_edge through_identities(const eng_graph *g, eng_edge e) {
  for (int hops = 0; hops < 64; hops++) {
    const eng_node *nd = eng_graph_node(g, e.node);
    if (!strcmp(nd->op, "Identity") && nd->n_in >= 1)
      e = nd->in[0];
    else if (!strcmp(nd->op, "IdentityN") && e.index < nd->n_in)
      e = nd->in[e.index];
    else
      break;
  }
  return e;
}

static bool build_skips(eng_model *m, int node) {
  const eng_graph *g = m->g;
  int n_out = eng_graph_node(g, node)->n_out, n = eng_graph_node_count(g);
  bool *skip = malloc(sizeof *skip * ((size_t)n_out + 1));
  if (!skip) return false;
  for (int i = 0; i < n_out; i++) skip[i] = true;
  for (int j = 0; j < n; j++) {
    const eng_node *nd = eng_graph_node(g, j);
    if (!strcmp(nd->op, "Identity") || !strcmp(nd->op, "IdentityN")) continue;
    for (int k = 0; k < nd->n_in; k++) {
      eng_edge src = through_identities(g, nd->in[k]);
      if (src.node != node || src.index >= n_out) continue;
      bool unneeded = false;
      if (!strcmp(nd->op, "AssignVariableOp") && k == 1) {
        int64_t slot = m->node_slot[through_identities(g, nd->in[0]).node];
        unneeded = slot >= 0 && !m->slots[slot].noted;
      }
      if (!unneeded) skip[src.index] = false;
    }
  }
  free(m->skip);
  m->skip = skip;
  m->n_skip = n_out;
  m->skip_node = node;
  return true;
}

bool eng_model_restore_skips(eng_model *m, int node, int i) {
  if (m->noting != 1 || !m->io.verify) return false;
  if (m->skip_node != node && !build_skips(m, node)) return false;
  return i >= 0 && i < m->n_skip && m->skip[i];
}

td_code eng_model_verify(eng_model *m, const char *prefix, const char *key, eng_dtype dtype,
                         eng_dtype *out_dtype, eng_shape *out_shape, td_err *err) {
  if (!m->io.verify)
    return td_err_set(err, TD_FAILED_PRECONDITION, "no checkpoint reader to check '%s'", key);
  return m->io.verify(m->io.ctx, prefix, key, dtype, out_dtype, out_shape, err);
}
