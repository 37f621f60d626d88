/* Load-time optimisation of a plan (see eng_plan.h).
 *
 * Folding: once variables are restored, a serving plan's variable reads are
 * as constant as its Const nodes. A step is constant when it writes no
 * state, is not a Placeholder or RestoreV2, and all its data and control
 * inputs are constant and not fed. The constant values that non-constant
 * steps (or fetches) read, the frontier, are computed once by running a
 * sub-plan that fetches them; the constant steps then leave the schedule.
 * Only plans that write no state are folded: a restore plan reads
 * variables while it assigns them.
 *
 * Fusion: a Conv2D, DepthwiseConv2dNative or MatMul whose output feeds a
 * chain of single-consumer elementwise ops with constant per-channel (or
 * scalar) operands (BiasAdd, Add/AddV2, Sub, Mul: biases and decomposed
 * batch norm) and ReLU/ReLU6 runs the chain in place on its own output.
 * The arithmetic is the same, element for element, as the separate
 * kernels', so results are bit-identical; what goes away is one output
 * allocation and one pass over memory per fused op. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gemm.h"
#include "eng_kernels.h"
#include "eng_plan.h"

static bool foldable_plan(const eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    if ((p->ops[s]->flags & ENG_OP_STATEFUL) || !strcmp(nd->op, "RestoreV2")) return false;
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
    k++;
  }
  p->n_steps = k;
}

static void fold(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  int n = eng_graph_node_count(g);
  bool *cnode = calloc((size_t)n + 1, sizeof *cnode);
  bool *cstep = calloc((size_t)p->n_steps + 1, sizeof *cstep);
  bool *front = calloc((size_t)p->n_values + 1, sizeof *front);
  int *fv = malloc(sizeof *fv * ((size_t)p->n_values + 1));
  char **names = calloc((size_t)p->n_values + 1, sizeof *names);
  eng_tensor *vals = NULL;
  eng_plan *sub = NULL;
  int nf = 0, nconst = 0;
  if (!cnode || !cstep || !front || !fv || !names) goto out;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    bool c = strcmp(nd->op, "Placeholder") != 0;
    for (int k = 0; k < nd->n_in && c; k++)
      c = cnode[nd->in[k].node] && !is_fed(p, p->base[nd->in[k].node] + nd->in[k].index);
    for (int k = 0; k < nd->n_ctrl && c; k++) c = cnode[nd->ctrl[k]];
    cnode[p->steps[s]] = cstep[s] = c;
    nconst += c;
  }
  if (!nconst) goto out;
  /* The frontier: constant values read by steps that stay, or fetched. */
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
  for (int s = 0; s < p->n_steps; s++) {
    if (!cstep[s]) continue;
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int o = 0; o < nd->n_out; o++) {
      int v = p->base[p->steps[s]] + o;
      if (!front[v]) continue;
      size_t len = strlen(nd->name) + 16;
      names[nf] = malloc(len);
      if (!names[nf]) goto out;
      snprintf(names[nf], len, "%s:%d", nd->name, o);
      fv[nf++] = v;
    }
  }
  vals = calloc((size_t)nf + 1, sizeof *vals);
  if (!vals) goto out;
  td_err err;
  td_err_clear(&err);
  if (nf && (eng_plan_build(p->m, 0, NULL, nf, (const char *const *)names, 0, NULL, &sub, &err) ||
             eng_plan_run(sub, NULL, vals, &err)))
    goto out; /* leave the plan unfolded: the run reports the error */
  p->const_value = malloc(sizeof *p->const_value * ((size_t)nf + 1));
  p->const_tensor = calloc((size_t)nf + 1, sizeof *p->const_tensor);
  if (!p->const_value || !p->const_tensor) {
    free(p->const_value);
    free(p->const_tensor);
    p->const_value = NULL;
    p->const_tensor = NULL;
    goto out;
  }
  for (int i = 0; i < nf; i++) {
    p->const_value[i] = fv[i];
    p->const_tensor[i] = vals[i];
    vals[i] = (eng_tensor){0};
  }
  p->n_consts = nf;
  drop_steps(p, cstep);
out:
  if (vals)
    for (int i = 0; i < nf; i++) eng_tensor_release(&vals[i]);
  for (int i = 0; i < nf; i++) free(names[i]);
  eng_plan_destroy(sub);
  free(vals);
  free(names);
  free(fv);
  free(front);
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

static void fuse(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  int *readers = calloc((size_t)p->n_values + 1, sizeof *readers);
  int *reader = malloc(sizeof *reader * ((size_t)p->n_values + 1));
  bool *gone = calloc((size_t)p->n_steps + 1, sizeof *gone);
  p->epi = calloc((size_t)p->n_steps + 1, sizeof *p->epi);
  if (!readers || !reader || !gone || !p->epi) goto out;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++) {
      int v = p->base[nd->in[k].node] + nd->in[k].index;
      readers[v]++;
      reader[v] = s;
    }
  }
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    bool conv = !strcmp(nd->op, "Conv2D"), dw = !strcmp(nd->op, "DepthwiseConv2dNative");
    bool mm = !strcmp(nd->op, "MatMul");
    if (gone[s] || (!conv && !dw && !mm) || nd->n_in != 2) continue;
    const eng_tensor *w = const_of(p, p->base[nd->in[1].node] + nd->in[1].index);
    int rank = mm ? 2 : 4;
    int64_t ch = -1;
    /* A float constant weight: the output is then float (or the op fails). */
    if (!w || w->dtype != ENG_DT_FLOAT) continue;
    if (w->shape.rank == rank) {
      if (conv) ch = w->shape.dim[3];
      if (dw) ch = w->shape.dim[2] * w->shape.dim[3];
      if (mm) ch = w->shape.dim[eng_node_attr_bool(nd, "transpose_b", false) ? 0 : 1];
    }
    eng_epilogue e = {0};
    int absorbed[ENG_EPI_MAX];
    int v = p->base[p->steps[s]];
    while (e.n < ENG_EPI_MAX && readers[v] == 1 && !is_fetched(p, v) && !is_fed(p, v)) {
      int cs = reader[v];
      const eng_node *cn = eng_graph_node(g, p->steps[cs]);
      if (gone[cs] || cn->n_out != 1) break;
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
      if (!strcmp(cn->op, "BiasAdd") && first && k &&
          !strcmp(eng_attr_str(cn, "data_format", "NHWC"), "NHWC") && k->shape.rank == 1)
        kind = EPI_ADD;
      else if ((!strcmp(cn->op, "Add") || !strcmp(cn->op, "AddV2")) && k)
        kind = EPI_ADD;
      else if (!strcmp(cn->op, "Sub") && first && k)
        kind = EPI_SUB;
      else if (!strcmp(cn->op, "Mul") && k)
        kind = EPI_MUL;
      else if (!strcmp(cn->op, "Relu") && cn->n_in == 1 && first)
        kind = EPI_RELU;
      else if (!strcmp(cn->op, "Relu6") && cn->n_in == 1 && first)
        kind = EPI_RELU6;
      if (kind < 0) break;
      if (kind != EPI_RELU && kind != EPI_RELU6 && !channel_const(k, ch, rank)) break;
      e.op[e.n].kind = kind;
      e.op[e.n].k = k && kind != EPI_RELU && kind != EPI_RELU6 ? eng_tensor_share(k) : (eng_tensor){0};
      absorbed[e.n++] = cs;
      v = p->base[p->steps[cs]];
    }
    if (!e.n) continue;
    e.out_value = v;
    p->epi[s] = malloc(sizeof e);
    if (!p->epi[s]) {
      for (int i = 0; i < e.n; i++) eng_tensor_release(&e.op[i].k);
      continue;
    }
    *p->epi[s] = e;
    for (int i = 0; i < e.n; i++) gone[absorbed[i]] = true;
  }
  drop_steps(p, gone);
out:
  free(readers);
  free(reader);
  free(gone);
}

static void recount_uses(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  memset(p->uses, 0, sizeof *p->uses * (size_t)p->n_values);
  for (int i = 0; i < p->n_outputs; i++) p->uses[p->out_value[i]]++;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k < nd->n_in; k++) p->uses[p->base[nd->in[k].node] + nd->in[k].index]++;
  }
}

/* Packs the constant weight of every MatMul (A not transposed) and Conv2D. */
static void pack_weights(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  p->packed = calloc((size_t)p->n_steps + 1, sizeof *p->packed);
  if (!p->packed) return;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    bool mm = !strcmp(nd->op, "MatMul"), conv = !strcmp(nd->op, "Conv2D");
    if ((!mm && !conv) || nd->n_in != 2) continue;
    if (mm && eng_node_attr_bool(nd, "transpose_a", false)) continue;
    const eng_tensor *w = const_of(p, p->base[nd->in[1].node] + nd->in[1].index);
    if (!w || w->dtype != ENG_DT_FLOAT || w->shape.rank != (mm ? 2 : 4)) continue;
    const float *wd = eng_tensor_data(w);
    if (mm) {
      bool tb = eng_node_attr_bool(nd, "transpose_b", false);
      p->packed[s] = eng_gemm_pack(wd, w->shape.dim[tb ? 1 : 0], w->shape.dim[tb ? 0 : 1], tb);
    } else {
      const int64_t *d = w->shape.dim;
      p->packed[s] = eng_gemm_pack(wd, d[0] * d[1] * d[2], d[3], false);
    }
  }
}

void eng_plan_compile(eng_plan *p) {
  if (!foldable_plan(p)) return;
  fold(p);
  fuse(p);
  pack_weights(p);
  recount_uses(p);
}

static void epilogue_rows(const eng_epilogue *e, float *restrict y, int64_t n, int64_t c) {
  const float *kp[ENG_EPI_MAX];
  bool scalar[ENG_EPI_MAX];
  for (int i = 0; i < e->n; i++) {
    kp[i] = e->op[i].k.buf ? eng_tensor_data(&e->op[i].k) : NULL;
    scalar[i] = kp[i] && eng_tensor_numel(&e->op[i].k) == 1;
  }
  /* Row by row (one pixel's or one example's channels), all ops on a row
   * while it is in L1. */
  for (int64_t r = 0; r < n; r += c) {
    float *restrict row = y + r;
    for (int i = 0; i < e->n; i++) {
      int kind = e->op[i].kind;
      if (kind == EPI_RELU) {
        for (int64_t j = 0; j < c; j++) row[j] = row[j] > 0 ? row[j] : 0;
        continue;
      }
      if (kind == EPI_RELU6) {
        for (int64_t j = 0; j < c; j++) row[j] = row[j] > 0 ? (row[j] < 6 ? row[j] : 6) : 0;
        continue;
      }
      const float *restrict k = kp[i];
      if (scalar[i]) {
        float v = k[0];
        if (kind == EPI_ADD) for (int64_t j = 0; j < c; j++) row[j] = row[j] + v;
        else if (kind == EPI_SUB) for (int64_t j = 0; j < c; j++) row[j] = row[j] - v;
        else for (int64_t j = 0; j < c; j++) row[j] = row[j] * v;
      } else {
        if (kind == EPI_ADD) for (int64_t j = 0; j < c; j++) row[j] = row[j] + k[j];
        else if (kind == EPI_SUB) for (int64_t j = 0; j < c; j++) row[j] = row[j] - k[j];
        else for (int64_t j = 0; j < c; j++) row[j] = row[j] * k[j];
      }
    }
  }
}

void eng_epilogue_apply(const eng_epilogue *e, eng_tensor *t) {
  int64_t n = eng_tensor_numel(t), c = t->shape.rank ? t->shape.dim[t->shape.rank - 1] : 1;
  if (n > 0 && c > 0) epilogue_rows(e, eng_tensor_data(t), n, c);
}

const eng_gemm_epi *eng_kgemm_epi(eng_kctx *c, eng_gemm_epi *buf) {
  const eng_epilogue *e = c->epi;
  if (!e) return NULL;
  static const int kinds[] = {[EPI_ADD] = ENG_GEMM_ADD, [EPI_SUB] = ENG_GEMM_SUB,
                              [EPI_MUL] = ENG_GEMM_MUL, [EPI_RELU] = ENG_GEMM_RELU,
                              [EPI_RELU6] = ENG_GEMM_RELU6};
  buf->n = e->n;
  for (int i = 0; i < e->n; i++) {
    const eng_tensor *k = &e->op[i].k;
    buf->op[i].kind = kinds[e->op[i].kind];
    buf->op[i].k = NULL;
    buf->op[i].s = 0;
    if (k->buf && eng_tensor_numel(k) == 1)
      buf->op[i].s = *(const float *)eng_tensor_data(k);
    else if (k->buf)
      buf->op[i].k = eng_tensor_data(k); /* one per channel: checked when fused */
  }
  c->epi_done = true;
  return buf;
}

void eng_kepilogue(eng_kctx *c, float *y, int64_t rows, int64_t ch) {
  if (!c->epi) return;
  if (rows > 0 && ch > 0) epilogue_rows(c->epi, y, rows * ch, ch);
  c->epi_done = true;
}

eng_plan_info eng_plan_get_info(const eng_plan *p) {
  eng_plan_info info = {.steps = p->n_steps, .consts = p->n_consts};
  for (int s = 0; p->epi && s < p->n_steps; s++)
    if (p->epi[s]) info.fused_ops += p->epi[s]->n;
  return info;
}
