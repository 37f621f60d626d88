/* Epilogue fusion (see eng_fuse.h): the chain after each product is
 * matched op by op from the product's output. A value may be taken over
 * only when its one reader is the next op of the chain and it is neither
 * fed nor fetched; swish and GELU are matched as whole subgraphs (their
 * inputs have several readers, all inside the pattern). */
#include "eng_fuse.h"

#include <stdlib.h>
#include <string.h>

#include "eng_device.h"
#include "eng_einsum.h"
#include "eng_pass.h"

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
  if (!t || t->shape.rank != 1 || (t->dtype != ENG_DT_INT32 && t->dtype != ENG_DT_INT64))
    return false;
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
  if (readers[v] < 2 || readers[v] > 3 || eng_pass_is_fetched(p, v) || eng_pass_is_fed(p, v))
    return -1;
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
      const eng_tensor *k = eng_pass_const(p, v0 == v ? v1 : v0);
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
    if (sig >= 0 || readers[t] != 1 || eng_pass_is_fetched(p, t)) return -1;
    sig = s;
  }
  if (sig < 0 || mul < 0 || nr != 2 + (idn >= 0) || nr != readers[v]) return -1;
  int one[3] = {bmul, sig, mul}; /* a value index per step's output 0 */
  for (int i = 0; i < 3; i++)
    if (one[i] >= 0 && eng_graph_node(g, p->steps[one[i]])->n_out != 1) return -1;
  const eng_node *sn = eng_graph_node(g, p->steps[sig]), *mn = eng_graph_node(g, p->steps[mul]);
  int sv = p->base[p->steps[sig]], o = p->base[p->steps[mul]];
  if (p->base[sn->in[0].node] + sn->in[0].index != t || readers[sv] != 1 ||
      eng_pass_is_fetched(p, sv))
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
    if (iv != v && !eng_pass_const(p, iv)) return -1;
  }
  for (int k = 1; k < in->n_out; k++) {
    int ov = p->base[p->steps[idn]] + k;
    if (readers[ov] || eng_pass_is_fetched(p, ov)) return -1;
  }
  steps[(*n_steps)++] = idn;
  return p->base[p->steps[idn]];
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
  if (readers[x] != 3 || eng_pass_is_fetched(p, x) || eng_pass_is_fed(p, x)) return -1;
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
    const eng_tensor *k = eng_pass_scalar_beside(p, rs[i], x);
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
#define NEXT(s)                                                                        \
  (readers[p->base[p->steps[s]]] == 1 && !eng_pass_is_fetched(p, p->base[p->steps[s]]) \
       ? reader[p->base[p->steps[s]]]                                                  \
       : -1)
  int m1 = NEXT(pw);
  if (m1 < 0 || strcmp(p->ops[m1]->name, "Mul") ||
      !eng_pass_scalar_beside(p, m1, p->base[p->steps[pw]]) || NEXT(m1) != add ||
      !eng_pass_reads_both(p, add, p->ops[add]->name, x, p->base[p->steps[m1]]))
    return -1;
  int m2 = NEXT(add);
  if (m2 < 0 || strcmp(p->ops[m2]->name, "Mul") ||
      !eng_pass_scalar_beside(p, m2, p->base[p->steps[add]]))
    return -1;
  int th = NEXT(m2);
  if (th < 0 || strcmp(p->ops[th]->name, "Tanh") || eng_graph_node(g, p->steps[th])->n_in != 1 ||
      eng_graph_node(g, p->steps[th])->n_out != 1)
    return -1;
  int u = NEXT(th);
  if (u < 0 || (strcmp(p->ops[u]->name, "AddV2") && strcmp(p->ops[u]->name, "Add")) ||
      !eng_pass_scalar_beside(p, u, p->base[p->steps[th]]))
    return -1;
  int y = NEXT(u);
  if (y < 0 || NEXT(half) != y ||
      !eng_pass_reads_both(p, y, "Mul", p->base[p->steps[half]], p->base[p->steps[u]]))
    return -1;
#undef NEXT
  const int chain[8] = {pw, m1, add, m2, th, u, half, y};
  for (int i = 0; i < 8; i++) steps[i] = chain[i];
  c[0] = *(const float *)eng_tensor_data(eng_pass_scalar_beside(p, m1, p->base[p->steps[pw]]));
  c[1] = *(const float *)eng_tensor_data(eng_pass_scalar_beside(p, m2, p->base[p->steps[add]]));
  c[2] = *(const float *)eng_tensor_data(eng_pass_scalar_beside(p, u, p->base[p->steps[th]]));
  c[3] = *(const float *)eng_tensor_data(eng_pass_scalar_beside(p, half, x));
  return p->base[p->steps[y]];
}

/* GELU's exact form on value x, as TensorFlow's gelu(approximate=False)
 * writes it (Keras's default gelu):
 *   h = Mul(half, x), n = Neg(x), q = Mul(n, s), e = Erfc(q), y = Mul(h, e)
 * with half and s float scalar constants, x read by exactly the Mul and the
 * Neg, every other value by the next op only. Returns y's value, or -1;
 * fills the five steps and the constants (EPI_GELU_ERFC). */
static int gelu_erfc_at(const eng_plan *p, const int *readers, const int *reader, int x, int *steps,
                        float c[4]) {
  const eng_graph *g = eng_model_graph(p->m);
  if (readers[x] != 2 || eng_pass_is_fetched(p, x) || eng_pass_is_fed(p, x)) return -1;
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
    else if (!strcmp(p->ops[rs[i]]->name, "Mul") && eng_pass_scalar_beside(p, rs[i], x))
      half = rs[i];
  }
  if (neg < 0 || half < 0) return -1;
#define NEXT(s)                                                                        \
  (readers[p->base[p->steps[s]]] == 1 && !eng_pass_is_fetched(p, p->base[p->steps[s]]) \
       ? reader[p->base[p->steps[s]]]                                                  \
       : -1)
  int q = NEXT(neg);
  if (q < 0 || strcmp(p->ops[q]->name, "Mul") ||
      !eng_pass_scalar_beside(p, q, p->base[p->steps[neg]]))
    return -1;
  int er = NEXT(q);
  if (er < 0 || strcmp(p->ops[er]->name, "Erfc") || eng_graph_node(g, p->steps[er])->n_in != 1 ||
      eng_graph_node(g, p->steps[er])->n_out != 1)
    return -1;
  int y = NEXT(er);
  if (y < 0 || NEXT(half) != y ||
      !eng_pass_reads_both(p, y, "Mul", p->base[p->steps[half]], p->base[p->steps[er]]))
    return -1;
#undef NEXT
  const int chain[5] = {neg, q, er, half, y};
  for (int i = 0; i < 5; i++) steps[i] = chain[i];
  c[0] = *(const float *)eng_tensor_data(eng_pass_scalar_beside(p, q, p->base[p->steps[neg]]));
  c[1] = *(const float *)eng_tensor_data(eng_pass_scalar_beside(p, half, x));
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
  if (readers[v] != 1 || eng_pass_is_fetched(p, v) || eng_pass_is_fed(p, v)) return false;
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[reader[v]]);
  return nd->n_in == 1 && (!strcmp(nd->op, "Relu") || !strcmp(nd->op, "Relu6"));
}

void eng_fuse_chains(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  int *readers = calloc((size_t)p->n_values + 1, sizeof *readers);
  int *reader = malloc(sizeof *reader * ((size_t)p->n_values + 1));
  bool *gone = calloc((size_t)p->n_steps + 1, sizeof *gone);
  /* made[v]: the step that stores value v (-1: fed or constant), moved to
   * a product's step when its epilogue takes over the value. */
  int *made = malloc(sizeof *made * ((size_t)p->n_values + 1));
  p->epi = calloc((size_t)p->n_steps + 1, sizeof *p->epi);
  if (!readers || !reader || !gone || !made || !p->epi) goto out;
  eng_pass_count_readers(p, readers, reader);
  for (int v = 0; v < p->n_values; v++) made[v] = -1;
  for (int s = 0; s < p->n_steps; s++)
    for (int o = 0; o < eng_graph_node(g, p->steps[s])->n_out; o++)
      made[p->base[p->steps[s]] + o] = s;
  /* A run-time addend (a residual's shortcut) only on the CPU, and only
   * into a product's epilogue, whose kernels all take it. */
  bool host = !eng_device_active();
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    bool conv = !strcmp(nd->op, "Conv2D"), dw = !strcmp(nd->op, "DepthwiseConv2dNative");
    bool mm = !strcmp(nd->op, "MatMul"), bmm = eng_pass_dense_bmm(nd);
    bool ein = !strcmp(nd->op, "Einsum");
    if (gone[s] || (!conv && !dw && !mm && !bmm && !ein) || nd->n_in != 2) continue;
    const eng_tensor *w = eng_pass_const(p, p->base[nd->in[1].node] + nd->in[1].index);
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
      if (readers[v] != 1 || eng_pass_is_fetched(p, v) || eng_pass_is_fed(p, v)) break;
      int cs = reader[v];
      const eng_node *cn = eng_graph_node(g, p->steps[cs]);
      if (gone[cs] || cn->n_out != 1) break;
      if (!strcmp(cn->op, "Reshape") && (mm || bmm) && e.n == 0 && reshape_step < 0 &&
          cn->n_in == 2 && p->base[cn->in[0].node] + cn->in[0].index == v) {
        if (!const_dims(eng_pass_const(p, p->base[cn->in[1].node] + cn->in[1].index), &after))
          break;
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
        k = eng_pass_const(p, other);
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
  eng_pass_drop_steps(p, gone);
out:
  free(readers);
  free(reader);
  free(gone);
  free(made);
}

void eng_fuse_dw_scales(eng_plan *p) {
  const eng_graph *g = eng_model_graph(p->m);
  int *readers = calloc((size_t)p->n_values + 1, sizeof *readers);
  if (!readers || !p->epi) goto out;
  eng_pass_count_readers(p, readers, NULL);
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
    if (ci < 0 || readers[wv] != 1 || eng_pass_is_fetched(p, wv)) continue;
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
