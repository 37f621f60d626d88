#include "eng_slice.h"

#include <stdlib.h>
#include <string.h>


/* Per-slice budget for the largest activation: a slice's working set then
 * stays within the core's share of L2 and L3. (MobileNetV2 at batch 32 on
 * the development VM: 0.5 to 2 MiB all gave about 1.35x the whole batch's
 * throughput; 4 MiB and more lost most of it.) */
#define SLICE_BUDGET_BYTES ((int64_t)1 << 20)

/* An int32 / int64 tensor's values, at most max of them. */
static bool tensor_ints(const eng_tensor *t, int64_t *out, int max, int *n) {
  if (t->dtype != ENG_DT_INT32 && t->dtype != ENG_DT_INT64) return false;
  int64_t cnt = eng_tensor_numel(t);
  if (cnt > max) return false;
  for (int64_t k = 0; k < cnt; k++)
    out[k] = t->dtype == ENG_DT_INT32 ? ((const int32_t *)eng_tensor_data(t))[k]
                                      : ((const int64_t *)eng_tensor_data(t))[k];
  *n = (int)cnt;
  return true;
}

/* The values of plan constant v. */
static bool const_ints(const eng_plan *p, int v, int64_t *out, int max, int *n) {
  for (int i = 0; i < p->n_consts; i++)
    if (p->const_value[i] == v) return tensor_ints(&p->const_tensor[i], out, max, n);
  return false;
}

/* A graph Const node's integer values. */
static bool graph_ints(const eng_graph *g, eng_edge e, int64_t *out, int max, int *n) {
  const eng_node *nd = eng_graph_node(g, e.node);
  const eng_attr *a = strcmp(nd->op, "Const") ? NULL : eng_node_attr(nd, "value");
  return a && a->kind == ENG_ATTR_TENSOR && tensor_ints(&a->tensor, out, max, n);
}

/* Reshape(x, Pack([Shape(x)[0], c1, c2, ...])), as Keras's Flatten and
 * Reshape layers write it: dim 0 stays x's, so it keeps the batch. */
static bool reshape_keeps_batch(const eng_graph *g, const eng_node *rs) {
  if (rs->n_in != 2) return false;
  const eng_node *pk = eng_graph_node(g, rs->in[1].node);
  if (strcmp(pk->op, "Pack") || pk->n_in < 1 || eng_node_attr_int(pk, "axis", 0) != 0) return false;
  const eng_node *ss = eng_graph_node(g, pk->in[0].node);
  if (strcmp(ss->op, "StridedSlice") || ss->n_in != 4 || pk->in[0].index != 0 ||
      !(eng_node_attr_int(ss, "shrink_axis_mask", 0) & 1) ||
      eng_node_attr_int(ss, "begin_mask", 0) || eng_node_attr_int(ss, "ellipsis_mask", 0) ||
      eng_node_attr_int(ss, "new_axis_mask", 0))
    return false;
  int64_t v[ENG_MAX_RANK];
  int n = 0;
  for (int k = 1; k < 4; k++)
    if (!graph_ints(g, ss->in[k], v, ENG_MAX_RANK, &n) || n < 1 ||
        v[0] != (k == 2   ? 1
                 : k == 1 ? 0
                          : 1))
      return false;
  const eng_node *sh = eng_graph_node(g, ss->in[0].node);
  if (strcmp(sh->op, "Shape") || sh->n_in != 1 || sh->in[0].node != rs->in[0].node ||
      sh->in[0].index != rs->in[0].index)
    return false;
  for (int k = 1; k < pk->n_in; k++) {
    int64_t d;
    if (!graph_ints(g, pk->in[k], &d, 1, &n) || n != 1 || d < -1) return false;
  }
  return true;
}

/* The step that stores each value (-1: fed, a constant, or none), into
 * made (room for p->n_values). */
static void makers(const eng_plan *p, int *made) {
  const eng_graph *g = eng_model_graph(p->m);
  for (int v = 0; v < p->n_values; v++) made[v] = -1;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_epilogue *epi = p->epi ? p->epi[s] : NULL;
    int n_out = eng_graph_node(g, p->steps[s])->n_out;
    for (int o = 0; o < n_out; o++)
      made[o == 0 && epi ? epi->out_value : p->base[p->steps[s]] + o] = s;
  }
}

/* Calls fn(arg, s, v) for every value v step s reads. */
static void each_read(const eng_plan *p, int s, void (*fn)(void *, int, int), void *arg) {
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[s]);
  for (int k = 0; k < nd->n_in; k++) fn(arg, s, p->base[nd->in[k].node] + nd->in[k].index);
  int ev = eng_epilogue_input(p->epi ? p->epi[s] : NULL);
  if (ev >= 0) fn(arg, s, ev);
}

typedef struct frontier_scan {
  const int *made;
  bool *seen;
  int cut, n;
  int *fv;
} frontier_scan;

static void frontier_add(void *arg, int s, int v) {
  frontier_scan *f = arg;
  (void)s;
  if (f->made[v] >= 0 && f->made[v] < f->cut && !f->seen[v]) f->seen[f->fv[f->n++] = v] = true;
}

int eng_slice_frontier(const eng_plan *p, int cut, int *fv) {
  int *made = malloc(sizeof *made * ((size_t)p->n_values + 1));
  bool *seen = calloc((size_t)p->n_values + 1, sizeof *seen);
  frontier_scan f = {made, seen, cut, -1, fv};
  if (made && seen) {
    makers(p, made);
    f.n = 0;
    for (int s = cut; s < p->n_steps; s++) each_read(p, s, frontier_add, &f);
    for (int i = 0; i < p->n_outputs; i++) frontier_add(&f, -1, p->out_value[i]);
  }
  free(made);
  free(seen);
  return f.n;
}

/* The tail's search (eng_slice_separable). */
typedef struct tail_scan {
  const eng_plan *p;
  int *last;     /* per value: the last step that reads it */
  bool *counted; /* per value: a constant already in weights */
  int64_t weights;
} tail_scan;

static void note_last(void *arg, int s, int v) {
  tail_scan *t = arg;
  if (s > t->last[v]) t->last[v] = s;
}

static void add_const(void *arg, int s, int v) {
  tail_scan *t = arg;
  (void)s;
  if (t->counted[v]) return;
  for (int i = 0; i < t->p->n_consts; i++)
    if (t->p->const_value[i] == v) {
      const eng_tensor *c = &t->p->const_tensor[i];
      t->weights += eng_tensor_numel(c) * (int64_t)eng_dtype_size(c->dtype);
      t->counted[v] = true;
    }
}

/* The first step of a separable plan's tail, or p->n_steps. Run in slices
 * of `slice` examples, the steps from c on read their weights once per
 * slice and keep their activations in cache; run once over the whole
 * batch, they read the weights once and move each activation through
 * memory (written, read back). Per example that is a gain of about
 *   W(c) / slice - 2 A(c)
 * with W(c) the bytes of the constants those steps read and A(c) the
 * bytes per example of the batch-dependent values they make. The tail
 * starts at the c of most gain, when that is positive, reads at least
 * ENG_SLICE_TAIL_WEIGHTS of weights, and no tail step reads a value of the
 * steps before c that is not split by batch (their slices' stacked values
 * are all the tail sees): the classifier after a global pooling, and the
 * last stages of a convolutional net whose layers hold more weights than
 * activations (ResNet50's 7x7 blocks). */
static int find_tail(const eng_plan *p, const eng_shape *shapes, const eng_dtype *dtypes,
                     const bool *dep, int64_t batch, int64_t slice) {
  const eng_graph *g = eng_model_graph(p->m);
  int n = p->n_steps, cut = n;
  int *made = malloc(sizeof *made * ((size_t)p->n_values + 1));
  int *last = malloc(sizeof *last * ((size_t)p->n_values + 1));
  bool *counted = calloc((size_t)p->n_values + 1, sizeof *counted);
  int *cross = calloc((size_t)n + 2, sizeof *cross);
  if (!made || !last || !counted || !cross || slice < 1) goto out;
  makers(p, made);
  tail_scan t = {p, last, counted, 0};
  for (int v = 0; v < p->n_values; v++) last[v] = -1;
  for (int s = 0; s < n; s++) each_read(p, s, note_last, &t);
  /* cross[c] > 0: some value not split by batch is made before c and read
   * from c on. */
  for (int v = 0; v < p->n_values; v++)
    if (made[v] >= 0 && !dep[v] && last[v] > made[v]) {
      cross[made[v] + 1]++;
      cross[last[v] + 1]--;
    }
  for (int c = 1; c <= n; c++) cross[c] += cross[c - 1];
  int64_t act = 0;
  double best = 0;
  for (int c = n - 1; c >= 1; c--) {
    each_read(p, c, add_const, &t);
    const eng_epilogue *epi = p->epi ? p->epi[c] : NULL;
    int n_out = eng_graph_node(g, p->steps[c])->n_out;
    for (int o = 0; o < n_out; o++) {
      int v = o == 0 && epi ? epi->out_value : p->base[p->steps[c]] + o;
      if (dep[v] && eng_dtype_size(dtypes[v]))
        act += eng_shape_numel(&shapes[v]) / batch * (int64_t)eng_dtype_size(dtypes[v]);
    }
    double gain = (double)t.weights / (double)slice - 2.0 * (double)act;
    if (!cross[c] && t.weights >= ENG_SLICE_TAIL_WEIGHTS && gain > best) {
      best = gain;
      cut = c;
    }
  }
out:
  free(made);
  free(last);
  free(counted);
  free(cross);
  return cut;
}

bool eng_slice_separable(const eng_plan *p, const eng_shape *shapes, const eng_dtype *dtypes,
                         int64_t batch, int64_t *bytes, int *cut) {
  const eng_graph *g = eng_model_graph(p->m);
  /* dep: the value has the batch as dim 0 and depends on it; shp: the
   * value is computed from the shape of such a value (Shape, then the
   * slicing and packing of Keras's Reshape layer). */
  bool *dep = calloc((size_t)p->n_values + 1, sizeof *dep);
  bool *shp = calloc((size_t)p->n_values + 1, sizeof *shp);
  if (!dep || !shp || batch < 2) {
    free(dep);
    free(shp);
    return false;
  }
  bool ok = true;
  int64_t most = 0;
  for (int i = 0; i < p->n_inputs; i++) dep[p->in_value[i]] = true;
  for (int s = 0; s < p->n_steps && ok; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    eng_slice_kind kind = p->ops[s]->slice;
    bool any = false, of_shape = false;
    for (int k = 0; k < nd->n_in; k++) {
      any |= dep[p->base[nd->in[k].node] + nd->in[k].index];
      of_shape |= shp[p->base[nd->in[k].node] + nd->in[k].index];
    }
    /* A fused run-time addend is read as an input of the output's shape. */
    int ev = eng_epilogue_input(p->epi ? p->epi[s] : NULL);
    if (ev >= 0 && (dep[ev] || shp[ev])) any = true;
    if (!any && !of_shape) continue; /* constants only: the same for every slice */
    if (!any || (!of_shape && nd->n_in == 1 && !strcmp(nd->op, "Shape"))) {
      /* A batch-dependent shape, or its first element sliced out and
       * packed with constants: each slice computes its own, and only the
       * Reshape of reshape_keeps_batch may read the result. */
      ok = nd->n_out == 1 && (any || !strcmp(nd->op, "StridedSlice") || !strcmp(nd->op, "Pack")) &&
           !(p->epi && p->epi[s]);
      if (ok) shp[p->base[p->steps[s]]] = true;
      continue;
    }
    if (of_shape && !(kind == ENG_SLICE_RESHAPE && reshape_keeps_batch(g, nd))) {
      ok = false;
      break;
    }
    const eng_epilogue *epi = p->epi ? p->epi[s] : NULL;
    int v0 = epi ? epi->out_value : p->base[p->steps[s]];
    const eng_shape *os = &shapes[v0];
    if (nd->n_out < 1 || !eng_dtype_size(dtypes[v0]) || os->rank < 1 || os->dim[0] != batch) {
      ok = false;
      break;
    }
    for (int o = 0; o < nd->n_out; o++) dep[o == 0 ? v0 : p->base[p->steps[s]] + o] = true;
    /* Each input: batch-dependent ones carry the batch as dim 0. */
    int in_dep[8] = {0};
    for (int k = 0; k < nd->n_in && ok; k++) {
      int v = p->base[nd->in[k].node] + nd->in[k].index;
      if (k < 8) in_dep[k] = dep[v];
      if (dep[v])
        ok = shapes[v].rank >= 1 && shapes[v].dim[0] == batch && eng_dtype_size(dtypes[v]) > 0;
    }
    if (!ok || nd->n_in > 8 || (ev >= 0 && !dep[ev])) {
      ok = false;
      break;
    }
    if (kind == ENG_SLICE_UNARY) {
      ok = nd->n_in == 1;
    } else if (kind == ENG_SLICE_VIEW) {
      ok = true;
    } else if (kind == ENG_SLICE_EACH) {
      ok = nd->n_in == nd->n_out;
    } else if (kind == ENG_SLICE_ELEMENTWISE) {
      for (int k = 0; k < nd->n_in && ok; k++) {
        const eng_shape *is = &shapes[p->base[nd->in[k].node] + nd->in[k].index];
        ok = in_dep[k] ? is->rank == os->rank : (is->rank < os->rank || is->dim[0] == 1);
      }
    } else if (kind == ENG_SLICE_WINDOW) {
      ok = in_dep[0] && !strcmp(eng_attr_str(nd, "data_format", "NHWC"), "NHWC");
      for (int k = 1; k < nd->n_in && ok; k++) ok = !in_dep[k];
    } else if (kind == ENG_SLICE_PAD) {
      int64_t pads[2 * ENG_MAX_RANK];
      int n = 0;
      ok = in_dep[0] && !in_dep[1] &&
           const_ints(p, p->base[nd->in[1].node] + nd->in[1].index, pads, 2 * ENG_MAX_RANK, &n) &&
           n >= 2 && pads[0] == 0 && pads[1] == 0 && (nd->n_in < 3 || !in_dep[2]);
    } else if (kind == ENG_SLICE_MATMUL) {
      ok = in_dep[0] && !in_dep[1] && !eng_node_attr_bool(nd, "transpose_a", false);
    } else if (kind == ENG_SLICE_REDUCE) {
      int64_t ax[ENG_MAX_RANK];
      int n = 0;
      int rank = shapes[p->base[nd->in[0].node] + nd->in[0].index].rank;
      ok = in_dep[0] && !in_dep[1] &&
           const_ints(p, p->base[nd->in[1].node] + nd->in[1].index, ax, ENG_MAX_RANK, &n) && n > 0;
      for (int k = 0; k < n && ok; k++) ok = ax[k] != 0 && ax[k] != -rank;
    } else if (kind == ENG_SLICE_SOFTMAX) {
      ok = os->rank >= 2;
    } else if (kind == ENG_SLICE_RESHAPE) {
      int64_t t[ENG_MAX_RANK];
      int n = 0;
      if (in_dep[0] && reshape_keeps_batch(g, nd)) {
        ok = true;
      } else {
        ok = in_dep[0] && !in_dep[1] &&
             const_ints(p, p->base[nd->in[1].node] + nd->in[1].index, t, ENG_MAX_RANK, &n) &&
             n >= 1 && t[0] == -1;
        for (int k = 1; k < n && ok; k++) ok = t[k] >= 0;
      }
    } else {
      ok = false;
    }
    if (ok) {
      int64_t per = eng_shape_numel(os) / batch * (int64_t)eng_dtype_size(dtypes[v0]);
      if (per > most) most = per;
    }
  }
  for (int i = 0; i < p->n_outputs && ok; i++) {
    int v = p->out_value[i];
    ok =
        dep[v] && shapes[v].rank >= 1 && shapes[v].dim[0] == batch && eng_dtype_size(dtypes[v]) > 0;
  }
  int64_t slice = eng_slice_size(most > 0 ? most : 1, eng_slice_weight_bytes(p));
  *cut = ok ? find_tail(p, shapes, dtypes, dep, batch, slice) : p->n_steps;
  free(dep);
  free(shp);
  *bytes = most > 0 ? most : 1;
  return ok;
}

int64_t eng_slice_weight_bytes(const eng_plan *p) {
  int64_t sum = 0;
  for (int i = 0; i < p->n_consts; i++) {
    const eng_tensor *t = &p->const_tensor[i];
    sum += eng_tensor_numel(t) * (int64_t)eng_dtype_size(t->dtype);
  }
  return sum;
}

int64_t eng_slice_size(int64_t bytes, int64_t weights) {
  if (bytes < 1) bytes = 1;
  int64_t least = weights <= ENG_SLICE_WEIGHT_RATIO * bytes ? 1 : ENG_SLICE_MIN;
  int64_t c = SLICE_BUDGET_BYTES / bytes;
  return c < least ? least : c;
}
