/* Plans: a plan is the list of nodes to run in dependency order, plus a flat
 * value table layout (one slot per node output). Building it walks back from
 * fetches and targets, stops at fed tensors, and orders the reached nodes
 * with Kahn's algorithm over data and control edges. Each value slot also
 * records how many consumers read it, so a run releases intermediate tensors
 * as soon as their last reader is done. */
#include "eng_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "eng_frames.h"
#include "eng_gemm.h"
#include "eng_inline.h"
#include "eng_layout.h"
#include "eng_model_int.h"
#include "eng_op.h"
#include "eng_plan.h"
#include "eng_run.h"
#include "eng_window.h"
#include "eng_wino.h"




/* --- model ------------------------------------------------------------- */

static td_code assign_slots(eng_model *m, td_err *err) {
  int n = eng_graph_node_count(m->g);
  m->node_slot = malloc(sizeof *m->node_slot * (size_t)(n ? n : 1));
  m->slots = calloc((size_t)(n ? n : 1), sizeof *m->slots);
  if (!m->node_slot || !m->slots) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < n; i++) {
    const eng_node *nd = eng_graph_node(m->g, i);
    m->node_slot[i] = -1;
    if (strcmp(nd->op, "VarHandleOp") && strcmp(nd->op, "VariableV2") &&
        strcmp(nd->op, "HashTableV2") && strcmp(nd->op, "MutableHashTableV2"))
      continue; /* tables are slots too (eng_kernels_table.c) */
    const eng_attr *c = eng_node_attr(nd, "container");
    const eng_attr *s = eng_node_attr(nd, "shared_name");
    const char *cs = c && c->kind == ENG_ATTR_S ? c->s.data : "";
    const char *ss = s && s->kind == ENG_ATTR_S && s->s.len ? s->s.data : nd->name;
    size_t len = strlen(cs) + strlen(ss) + 2;
    char *key = malloc(len);
    if (!key) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    snprintf(key, len, "%s/%s", cs, ss);
    int found = -1;
    for (int k = 0; k < m->n_slots; k++)
      if (!strcmp(m->slots[k].key, key)) found = k;
    if (found >= 0) {
      free(key);
    } else {
      found = m->n_slots++;
      m->slots[found].key = key;
    }
    m->node_slot[i] = found;
  }
  return TD_OK;
}

td_code eng_model_create(eng_graph *graph, eng_library *lib, const eng_io *io, eng_model **out,
                         td_err *err) {
  eng_model *m = calloc(1, sizeof *m);
  if (!m) {
    eng_graph_destroy(graph);
    eng_library_destroy(lib);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  m->g = graph;
  m->lib = lib;
  if (io) m->io = *io;
  m->sub_lock_init = mtx_init(&m->sub_lock, mtx_plain) == thrd_success;
  m->pack_lock_init = mtx_init(&m->pack_lock, mtx_plain) == thrd_success;
  m->skip_node = -1;
  td_code rc = lib ? eng_inline_calls(graph, lib, err) : TD_OK;
  if (!rc) rc = eng_frames_lower(graph, err);
  if (!rc) rc = eng_layout_lower(graph, err);
  if (!rc) rc = assign_slots(m, err);
  if (rc) {
    eng_model_destroy(m);
    return rc;
  }
  /* Every call is inlined now (function bodies copied into the graph), and
   * nothing reads the library again: a Keras export's holds each layer's
   * functions several times over, so it goes now, not with the model. */
  eng_library_destroy(m->lib);
  m->lib = NULL;
  *out = m;
  return TD_OK;
}

void eng_model_destroy(eng_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n_sub; i++) eng_plan_destroy(m->sub[i].plan);
  free(m->sub);
  if (m->sub_lock_init) mtx_destroy(&m->sub_lock);
  for (int i = 0; i < m->n_packed; i++) {
    eng_gemm_free(m->packed[i].packed);
    eng_tensor_release(&m->packed[i].w);
    free(m->packed[i].scale);
  }
  free(m->packed);
  free(m->skip);
  if (m->pack_lock_init) mtx_destroy(&m->pack_lock);
  for (int i = 0; i < m->n_slots; i++) {
    free(m->slots[i].key);
    eng_tensor_release(&m->slots[i].value);
  }
  free(m->slots);
  free(m->node_slot);
  if (m->dev) m->dev_free(m->dev);
  eng_graph_destroy(m->g);
  eng_library_destroy(m->lib);
  free(m);
}

void eng_model_detach_io(eng_model *m) { m->io = (eng_io){0}; }

void *eng_model_dev(const eng_model *m) { return m->dev; }

void eng_model_set_dev(eng_model *m, void *dev, void (*free_fn)(void *)) {
  if (m->dev) m->dev_free(m->dev);
  m->dev = dev;
  m->dev_free = free_fn;
}

const eng_graph *eng_model_graph(const eng_model *m) { return m->g; }

int64_t eng_model_node_slot(const eng_model *m, int node_id) { return m->node_slot[node_id]; }

const char *eng_model_slot_name(const eng_model *m, int64_t slot) {
  const char *k = m->slots[slot].key;
  return k[0] == '/' ? k + 1 : k;
}

bool eng_model_slot_initialized(eng_model *m, int64_t slot) { return m->slots[slot].init; }

size_t eng_model_release_unserved(eng_model *m) {
  size_t freed = 0;
  for (int i = 0; i < m->n_slots; i++) {
    var_slot *v = &m->slots[i];
    if (v->served || !v->init || !v->value.buf) continue;
    if (!v->value.is_ref && v->value.dtype != ENG_DT_STRING) freed += eng_tensor_nbytes(&v->value);
    eng_tensor_release(&v->value);
    v->init = false;
  }
  return freed;
}

td_code eng_model_slot_read(eng_model *m, int64_t slot, eng_tensor *out, td_err *err) {
  if (slot < 0 || slot >= m->n_slots)
    return td_err_set(err, TD_INTERNAL, "variable slot %lld out of range", (long long)slot);
  if (!m->slots[slot].init)
    return td_err_set(err, TD_FAILED_PRECONDITION,
                      "attempting to use uninitialized variable '%s'", eng_model_slot_name(m, slot));
  *out = eng_tensor_share(&m->slots[slot].value);
  return TD_OK;
}

td_code eng_model_slot_write(eng_model *m, int64_t slot, const eng_tensor *value, td_err *err) {
  if (slot < 0 || slot >= m->n_slots)
    return td_err_set(err, TD_INTERNAL, "variable slot %lld out of range", (long long)slot);
  eng_tensor_release(&m->slots[slot].value);
  m->slots[slot].value = eng_tensor_share(value);
  m->slots[slot].init = true;
  return TD_OK;
}

td_code eng_model_restore(eng_model *m, const char *prefix, const char *key, eng_dtype dtype,
                          eng_tensor *out, td_err *err) {
  if (!m->io.restore)
    return td_err_set(err, TD_FAILED_PRECONDITION, "no checkpoint reader to restore '%s'", key);
  return m->io.restore(m->io.ctx, prefix, key, dtype, out, err);
}

td_code eng_model_read_asset(eng_model *m, const char *path, char **data, size_t *len,
                             td_err *err) {
  if (!m->io.read_asset)
    return td_err_set(err, TD_FAILED_PRECONDITION, "no asset reader to read '%s'", path);
  return m->io.read_asset(m->io.ctx, path, data, len, err);
}

/* --- plans ------------------------------------------------------------- */

void eng_plan_destroy(eng_plan *p) {
  if (!p) return;
  for (int i = 0; i < p->n_inputs; i++) free(p->in_name ? p->in_name[i] : NULL);
  free(p->in_name);
  eng_plan_free_specs(p);
  for (int i = 0; p->out_name && i < p->n_outputs; i++) free(p->out_name[i]);
  free(p->out_name);
  free(p->steps);
  free(p->ops);
  free(p->base);
  free(p->uses);
  free(p->in_value);
  free(p->in_shape);
  free(p->in_dtype);
  free(p->out_value);
  if (p->epi) {
    for (int s = 0; s < p->n_steps; s++) {
      if (!p->epi[s]) continue;
      for (int k = 0; k < p->epi[s]->n; k++) eng_tensor_release(&p->epi[s]->op[k].k);
      free(p->epi[s]);
    }
    free(p->epi);
  }
  free(p->packed); /* the packed weights are the model's */
  for (int i = 0; i < p->n_consts; i++) eng_tensor_release(&p->const_tensor[i]);
  free(p->const_value);
  free(p->const_tensor);
  free(p);
}

eng_shape eng_plan_input_shape(const eng_plan *p, int i) { return p->in_shape[i]; }

static void fill_declared(const eng_node *nd, eng_shape *shape, eng_dtype *dtype) {
  *shape = eng_shape_unknown();
  *dtype = ENG_DT_INVALID;
  if (strcmp(nd->op, "Placeholder")) return;
  *dtype = eng_node_attr_type(nd, "dtype", ENG_DT_INVALID);
  const eng_attr *s = eng_node_attr(nd, "shape");
  if (s && s->kind == ENG_ATTR_SHAPE) *shape = s->shape;
}

/* The names list(string) attribute `attr` of node n: into names[max]. */
static int name_list(const eng_node *n, const char *attr, const char **names, int max) {
  const eng_attr *a = eng_node_attr(n, attr);
  if (!a || a->kind != ENG_ATTR_LIST || (a->n && a->list_kind != ENG_ATTR_S) || a->n > max)
    return -1;
  for (int i = 0; i < a->n; i++) names[i] = a->ls[i].data;
  return a->n;
}

td_code eng_model_subplan(eng_model *m, int node_id, const char *role, const eng_plan **out,
                          td_err *err) {
  const eng_node *nd = eng_graph_node(m->g, node_id);
  if (!m->sub_lock_init) return td_err_set(err, TD_INTERNAL, "no lock for subgraph plans");
  mtx_lock(&m->sub_lock);
  for (int i = 0; i < m->n_sub; i++)
    if (m->sub[i].node == node_id && !strcmp(m->sub[i].role, role)) {
      *out = m->sub[i].plan;
      mtx_unlock(&m->sub_lock);
      return TD_OK;
    }
  mtx_unlock(&m->sub_lock);
  /* Built outside the lock: a subgraph may hold control flow of its own,
   * whose plans this same call builds. */
  enum { MAX_ARGS = 1024 };
  const char **args = malloc(sizeof *args * MAX_ARGS), **rets = malloc(sizeof *rets * MAX_ARGS);
  char an[64], rn[64];
  snprintf(an, sizeof an, "_td_%s_args", role);
  snprintf(rn, sizeof rn, "_td_%s_rets", role);
  int na = args ? name_list(nd, an, args, MAX_ARGS) : -1;
  int nr = rets ? name_list(nd, rn, rets, MAX_ARGS) : -1;
  eng_plan *p = NULL;
  td_code rc = na < 0 || nr < 0
                   ? td_err_set(err, TD_INTERNAL, "node '%s' (%s): no %s subgraph", nd->name, nd->op,
                                role)
                   : eng_plan_create(m, na, args, nr, rets, 0, NULL, &p, err);
  free(args);
  free(rets);
  if (rc) return td_err_prefix(err, "node '%s' (%s), %s", nd->name, nd->op, role);
  mtx_lock(&m->sub_lock);
  for (int i = 0; i < m->n_sub; i++)
    if (m->sub[i].node == node_id && !strcmp(m->sub[i].role, role)) {
      /* Another thread was first: use its plan. */
      *out = m->sub[i].plan;
      mtx_unlock(&m->sub_lock);
      eng_plan_destroy(p);
      return TD_OK;
    }
  struct subplan *grown = realloc(m->sub, sizeof *grown * (size_t)(m->n_sub + 1));
  if (!grown) {
    mtx_unlock(&m->sub_lock);
    eng_plan_destroy(p);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  m->sub = grown;
  m->sub[m->n_sub].node = node_id;
  snprintf(m->sub[m->n_sub].role, sizeof m->sub[m->n_sub].role, "%s", role);
  m->sub[m->n_sub++].plan = p;
  *out = p;
  mtx_unlock(&m->sub_lock);
  return TD_OK;
}

/* Builds the subgraph plans of the plan's control-flow steps, so a body
 * that uses an op the engine lacks fails the load, not the first request. */
static td_code build_subplans(eng_plan *p, td_err *err) {
  static const char *const loop[] = {"cond", "body"}, *const branch[] = {"then", "else"};
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(p->m->g, p->steps[s]);
    if (!eng_inline_is_control_flow(nd)) continue;
    const char *const *roles = strstr(nd->op, "While") ? loop : branch;
    for (int r = 0; r < 2; r++) {
      const eng_plan *sp;
      td_code rc = eng_model_subplan(p->m, p->steps[s], roles[r], &sp, err);
      if (rc) return rc;
    }
  }
  return TD_OK;
}

td_code eng_plan_create(eng_model *m, int n_inputs, const char *const *inputs, int n_outputs,
                        const char *const *outputs, int n_targets, const char *const *targets,
                        eng_plan **out, td_err *err) {
  td_code rc = eng_plan_build(m, n_inputs, inputs, n_outputs, outputs, n_targets, targets, out, err);
  if (!rc && (rc = build_subplans(*out, err))) {
    eng_plan_destroy(*out);
    *out = NULL;
  }
  if (!rc) eng_plan_compile(*out);
  if (!rc && n_inputs && !n_targets && (*out)->epi && mtx_init(&(*out)->spec_lock, mtx_plain) == thrd_success)
    (*out)->can_specialise = true; /* compiled (epi set) serving plan */
  return rc;
}

td_code eng_plan_build(eng_model *m, int n_inputs, const char *const *inputs, int n_outputs,
                       const char *const *outputs, int n_targets, const char *const *targets,
                       eng_plan **out, td_err *err) {
  const eng_graph *g = m->g;
  int n = eng_graph_node_count(g);
  td_code rc = TD_OK;
  eng_plan *p = calloc(1, sizeof *p);
  eng_edge *feeds = calloc((size_t)n_inputs + 1, sizeof *feeds);
  bool *need = calloc((size_t)n + 1, sizeof *need);
  int *stack = malloc(sizeof *stack * ((size_t)n + 1));
  int *indeg = calloc((size_t)n + 1, sizeof *indeg);
  if (!p || !feeds || !need || !stack || !indeg) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  p->m = m;
  p->n_inputs = n_inputs;
  p->n_outputs = n_outputs;
  p->in_value = calloc((size_t)n_inputs + 1, sizeof *p->in_value);
  p->in_shape = calloc((size_t)n_inputs + 1, sizeof *p->in_shape);
  p->in_dtype = calloc((size_t)n_inputs + 1, sizeof *p->in_dtype);
  p->in_name = calloc((size_t)n_inputs + 1, sizeof *p->in_name);
  p->out_name = calloc((size_t)n_outputs + 1, sizeof *p->out_name);
  for (int i = 0; p->out_name && i < n_outputs; i++)
    if (!(p->out_name[i] = strdup(outputs[i]))) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      goto fail;
    }
  p->out_value = calloc((size_t)n_outputs + 1, sizeof *p->out_value);
  p->base = malloc(sizeof *p->base * ((size_t)n + 1));
  if (!p->in_value || !p->in_shape || !p->in_dtype || !p->in_name || !p->out_value || !p->base) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  for (int i = 0; i < n_inputs; i++) {
    rc = eng_graph_parse_edge(g, inputs[i], &feeds[i], err);
    if (rc) goto fail;
    p->in_name[i] = strdup(inputs[i]);
    if (!p->in_name[i]) {
      rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
      goto fail;
    }
    fill_declared(eng_graph_node(g, feeds[i].node), &p->in_shape[i], &p->in_dtype[i]);
    if (feeds[i].index != 0) p->in_shape[i] = eng_shape_unknown();
  }

  /* Walk back from fetches and targets. */
  int sp = 0;
  eng_edge *fetch = calloc((size_t)n_outputs + 1, sizeof *fetch);
  if (!fetch) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  for (int i = 0; i < n_outputs && !rc; i++) rc = eng_graph_parse_edge(g, outputs[i], &fetch[i], err);
  if (rc) {
    free(fetch);
    goto fail;
  }
  for (int i = 0; i < n_outputs; i++) {
    bool fed = false;
    for (int k = 0; k < n_inputs; k++)
      if (feeds[k].node == fetch[i].node && feeds[k].index == fetch[i].index) fed = true;
    if (!fed && !need[fetch[i].node]) {
      need[fetch[i].node] = true;
      stack[sp++] = fetch[i].node;
    }
  }
  for (int i = 0; i < n_targets; i++) {
    int t = eng_graph_find(g, targets[i], strlen(targets[i]));
    if (t < 0) {
      free(fetch);
      rc = td_err_set(err, TD_NOT_FOUND, "target '%s' names no node of the graph", targets[i]);
      goto fail;
    }
    if (!need[t]) {
      need[t] = true;
      stack[sp++] = t;
    }
  }
  while (sp) {
    const eng_node *nd = eng_graph_node(g, stack[--sp]);
    for (int k = 0; k < nd->n_in; k++) {
      eng_edge e = nd->in[k];
      bool fed = false;
      for (int f = 0; f < n_inputs; f++)
        if (feeds[f].node == e.node && feeds[f].index == e.index) fed = true;
      if (!fed && !need[e.node]) {
        need[e.node] = true;
        stack[sp++] = e.node;
      }
    }
    for (int k = 0; k < nd->n_ctrl; k++)
      if (!need[nd->ctrl[k]]) {
        need[nd->ctrl[k]] = true;
        stack[sp++] = nd->ctrl[k];
      }
  }

  /* Value layout: every output of every node gets a slot; only the needed
   * and fed ones are ever written. */
  int nv = 0;
  for (int i = 0; i < n; i++) {
    p->base[i] = nv;
    nv += eng_graph_node(g, i)->n_out;
  }
  p->n_values = nv;
  p->uses = calloc((size_t)nv + 1, sizeof *p->uses);
  p->steps = malloc(sizeof *p->steps * ((size_t)n + 1));
  p->ops = malloc(sizeof *p->ops * ((size_t)n + 1));
  if (!p->uses || !p->steps || !p->ops) {
    free(fetch);
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  for (int i = 0; i < n_inputs; i++) p->in_value[i] = p->base[feeds[i].node] + feeds[i].index;
  for (int i = 0; i < n_outputs; i++) {
    p->out_value[i] = p->base[fetch[i].node] + fetch[i].index;
    p->uses[p->out_value[i]]++; /* fetches hold their value to the end */
  }
  free(fetch);

  /* Variables a serving plan (no targets: not restore or init) reads. */
  for (int i = 0; i < n && !n_targets; i++)
    if (need[i] && m->node_slot[i] >= 0) m->slots[m->node_slot[i]].served = true;

  /* Kahn's algorithm over the needed subgraph. indeg counts needed
   * producers (data inputs that are not fed, and control inputs). */
  int *succ_count = calloc((size_t)n + 1, sizeof *succ_count);
  if (!succ_count) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  for (int i = 0; i < n; i++) {
    if (!need[i]) continue;
    const eng_node *nd = eng_graph_node(g, i);
    const eng_op_def *op = eng_op_find(nd->op);
    if (!op || !op->cpu || (op->flags & ENG_OP_PLAN_ONLY)) {
      free(succ_count);
      rc = td_err_set(err, TD_UNIMPLEMENTED,
                      "node '%s': op '%s' is not supported by the tensord engine", nd->name, nd->op);
      goto fail;
    }
    int amin, amax;
    if (eng_op_arity(nd->op, &amin, &amax) && (nd->n_in < amin || (amax >= 0 && nd->n_in > amax))) {
      free(succ_count);
      char want[48];
      if (amax == amin)
        snprintf(want, sizeof want, "%d", amin);
      else if (amax < 0)
        snprintf(want, sizeof want, "at least %d", amin);
      else
        snprintf(want, sizeof want, "%d to %d", amin, amax);
      rc = td_err_set(err, TD_INVALID_ARGUMENT,
                      "node '%s': op '%s' takes %s data inputs, the node has %d", nd->name, nd->op,
                      want, nd->n_in);
      goto fail;
    }
    if (op->check && (rc = op->check(nd, err))) { /* one its kernel would refuse every run */
      free(succ_count);
      goto fail;
    }
    for (int k = 0; k < nd->n_in; k++) {
      eng_edge e = nd->in[k];
      p->uses[p->base[e.node] + e.index]++;
      if (need[e.node]) {
        bool fed = false;
        for (int f = 0; f < n_inputs; f++)
          if (feeds[f].node == e.node && feeds[f].index == e.index) fed = true;
        /* A producer that must run anyway still orders before us. */
        indeg[i]++;
        succ_count[e.node]++;
        (void)fed;
      }
    }
    for (int k = 0; k < nd->n_ctrl; k++) {
      indeg[i]++;
      succ_count[nd->ctrl[k]]++;
    }
  }
  /* Build successor lists (CSR) for the release of indegrees. */
  int *succ_off = calloc((size_t)n + 2, sizeof *succ_off);
  int total = 0;
  for (int i = 0; i < n; i++) total += succ_count[i];
  int *succ = malloc(sizeof *succ * ((size_t)total + 1));
  if (!succ_off || !succ) {
    free(succ_count);
    free(succ_off);
    free(succ);
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  for (int i = 0; i < n; i++) succ_off[i + 1] = succ_off[i] + succ_count[i];
  memset(succ_count, 0, sizeof *succ_count * (size_t)n);
  for (int i = 0; i < n; i++) {
    if (!need[i]) continue;
    const eng_node *nd = eng_graph_node(g, i);
    for (int k = 0; k < nd->n_in; k++)
      if (need[nd->in[k].node]) {
        int pnode = nd->in[k].node;
        succ[succ_off[pnode] + succ_count[pnode]++] = i;
      }
    for (int k = 0; k < nd->n_ctrl; k++) {
      int pnode = nd->ctrl[k];
      succ[succ_off[pnode] + succ_count[pnode]++] = i;
    }
  }
  sp = 0;
  for (int i = n - 1; i >= 0; i--)
    if (need[i] && indeg[i] == 0) stack[sp++] = i;
  int ns = 0;
  while (sp) {
    int v = stack[--sp];
    p->steps[ns] = v;
    p->ops[ns] = eng_op_find(eng_graph_node(g, v)->op);
    ns++;
    for (int k = succ_off[v]; k < succ_off[v + 1]; k++)
      if (--indeg[succ[k]] == 0) stack[sp++] = succ[k];
  }
  free(succ_count);
  free(succ_off);
  free(succ);
  int n_need = 0;
  for (int i = 0; i < n; i++) n_need += need[i];
  if (ns != n_need) {
    rc = td_err_set(err, TD_INVALID_ARGUMENT,
                    "the graph has a cycle among the nodes needed (TF1 control flow that is not a "
                    "tf.while_loop)");
    goto fail;
  }
  p->n_steps = ns;
  free(feeds);
  free(need);
  free(stack);
  free(indeg);
  *out = p;
  return TD_OK;
fail:
  free(feeds);
  free(need);
  free(stack);
  free(indeg);
  eng_plan_destroy(p);
  return rc;
}

td_code eng_plan_check_feed(const eng_plan *p, int i, const eng_tensor *t, td_err *err) {
  char want[128], got[128];
  if (p->in_dtype[i] != ENG_DT_INVALID && t->dtype != p->in_dtype[i])
    return td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': expected %s, got %s", p->in_name[i],
                      eng_dtype_name(p->in_dtype[i]), eng_dtype_name(t->dtype));
  if (!eng_shape_fits(&p->in_shape[i], &t->shape))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "input '%s': shape %s does not match the placeholder's shape %s",
                      p->in_name[i], eng_shape_str(&t->shape, got, sizeof got),
                      eng_shape_str(&p->in_shape[i], want, sizeof want));
  return TD_OK;
}

td_code eng_model_run(eng_model *m, int n_feeds, const eng_feed *feeds, int n_fetch,
                      const char *const *fetch, eng_tensor *outs, int n_targets,
                      const char *const *targets, td_err *err) {
  const char **names = calloc((size_t)n_feeds + 1, sizeof *names);
  eng_tensor *vals = calloc((size_t)n_feeds + 1, sizeof *vals);
  if (!names || !vals) {
    free(names);
    free(vals);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (int i = 0; i < n_feeds; i++) {
    names[i] = feeds[i].name;
    vals[i] = feeds[i].tensor;
  }
  eng_plan *p = NULL;
  td_code rc = eng_plan_create(m, n_feeds, names, n_fetch, fetch, n_targets, targets, &p, err);
  if (!rc) rc = eng_run_cpu(p, vals, outs, err);
  eng_plan_destroy(p);
  free(names);
  free(vals);
  return rc;
}

/* --- what a plan runs (eng_model.h) ------------------------------------- */

eng_plan_info eng_plan_get_info(const eng_plan *p) {
  eng_plan_info info = {.steps = p->n_steps,
                        .consts = p->n_consts,
                        .slice_examples = atomic_load(&((eng_plan *)p)->slice_each)};
  int cut = atomic_load(&((eng_plan *)p)->slice_cut);
  if (info.slice_examples > 0 && cut > 0) info.tail_steps = p->n_steps - cut;
  const eng_graph *g = eng_model_graph(p->m);
  for (int s = 0; p->epi && s < p->n_steps; s++) {
    const eng_epilogue *e = p->epi[s];
    if (!e) continue;
    info.fused_ops += e->op[0].kind == EPI_LAYER_NORM ? (int)e->op[1].c[0] : e->n;
    info.fused_ops += !strcmp(p->ops[s]->name, "_ScaledConv1x1"); /* its Conv2D */
    for (int i = 0; i < e->n; i++) /* EPI_DEPTHWISE counts its node; a folded Pad too */
      if (e->op[i].kind == EPI_DEPTHWISE) {
        int64_t pads[4];
        const eng_node *dn = eng_graph_node(g, e->op[i].node);
        info.fused_ops += eng_pad_hw(g, eng_graph_node(g, dn->in[0].node), pads);
      }
  }
  for (int s = 0; p->packed && s < p->n_steps; s++)
    info.winograd_steps += p->packed[s] && eng_wino_form(p->packed[s], eng_gemm_k(p->packed[s]),
                                                         eng_gemm_n(p->packed[s]));
  if (p->can_specialise) {
    mtx_lock((mtx_t *)&p->spec_lock);
    for (int i = 0; i < p->n_specs; i++) {
      if (!p->specs[i].plan) continue;
      if (!info.shape_plans++) info.shape_plan_steps = p->specs[i].plan->n_steps;
    }
    mtx_unlock((mtx_t *)&p->spec_lock);
  }
  return info;
}

void eng_plan_op_list(const eng_plan *p, char *buf, size_t n) {
  if (!n) return;
  buf[0] = 0;
  size_t used = 0;
  for (int s = 0; s < p->n_steps; s++) {
    const char *name = p->ops[s]->name;
    bool seen = false;
    for (int t = 0; t < s && !seen; t++) seen = p->ops[t] == p->ops[s];
    if (seen) continue;
    int count = 0;
    for (int t = s; t < p->n_steps; t++) count += p->ops[t] == p->ops[s];
    char item[160];
    int len = count > 1 ? snprintf(item, sizeof item, "%s%s x%d", used ? ", " : "", name, count)
                        : snprintf(item, sizeof item, "%s%s", used ? ", " : "", name);
    if (len < 0) return;
    if (used + (size_t)len + 4 >= n) {
      snprintf(buf + used, n - used, "%s", used + 4 < n ? ", ..." : "");
      return;
    }
    memcpy(buf + used, item, (size_t)len + 1);
    used += (size_t)len;
  }
}
