/* NCHW -> NHWC rewriting (eng_layout.h). */
#include "eng_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const ops[] = {"Conv2D",          "DepthwiseConv2dNative", "MaxPool",
                                  "AvgPool",         "FusedBatchNorm",        "FusedBatchNormV2",
                                  "FusedBatchNormV3"};

static bool wanted(const eng_node *n) {
  bool op = false;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) op |= !strcmp(n->op, ops[i]);
  return op && n->n_in > 0 && !strcmp(eng_attr_str(n, "data_format", "NHWC"), "NCHW") &&
         strcmp(eng_attr_str(n, "padding", "VALID"), "EXPLICIT");
}

static td_code oom(td_err *err) { return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory"); }

static int add_perm(eng_graph *g, const char *name, const int32_t *perm, td_err *err) {
  int id = eng_graph_add_node(g, name, "Const", err);
  if (id < 0) return -1;
  eng_graph_node(g, id)->n_out = 1;
  eng_attr *dt = eng_graph_add_attr(g, id, "dtype");
  if (!dt) return oom(err), -1;
  dt->kind = ENG_ATTR_TYPE;
  dt->type = ENG_DT_INT32;
  eng_attr *v = eng_graph_add_attr(g, id, "value");
  if (!v) return oom(err), -1;
  eng_shape s = eng_shape_make(1, (int64_t[]){4});
  if (eng_tensor_alloc(&v->tensor, ENG_DT_INT32, &s, err)) return -1;
  v->kind = ENG_ATTR_TENSOR;
  memcpy(eng_tensor_data(&v->tensor), perm, 4 * sizeof *perm);
  return id;
}

static td_code add_type(eng_graph *g, int node, const char *name, eng_dtype t, td_err *err) {
  eng_attr *a = eng_graph_add_attr(g, node, name);
  if (!a) return oom(err);
  a->kind = ENG_ATTR_TYPE;
  a->type = t;
  return TD_OK;
}

/* A Transpose node named name of edge x by the permutation Const perm. */
static int add_transpose(eng_graph *g, const char *name, eng_edge x, int perm, eng_dtype t,
                         td_err *err) {
  int id = eng_graph_add_node(g, name, "Transpose", err);
  if (id < 0) return -1;
  eng_graph_node(g, id)->n_out = 1;
  if (eng_graph_add_input(g, id, x, err) || eng_graph_add_input(g, id, (eng_edge){perm, 0}, err) ||
      add_type(g, id, "T", t, err) || add_type(g, id, "Tperm", ENG_DT_INT32, err))
    return -1;
  return id;
}

/* The NHWC copy of node x: its inputs with input 0 from `in`, its attrs
 * with data_format NHWC and the 4-element layout lists permuted. */
static int add_core(eng_graph *g, int x, const char *name, int in, td_err *err) {
  int id = eng_graph_add_node(g, name, eng_graph_node(g, x)->op, err);
  if (id < 0) return -1;
  eng_graph_node(g, id)->n_out = eng_graph_node(g, x)->n_out;
  if (eng_graph_add_input(g, id, (eng_edge){in, 0}, err)) return -1;
  for (int i = 1; i < eng_graph_node(g, x)->n_in; i++)
    if (eng_graph_add_input(g, id, eng_graph_node(g, x)->in[i], err)) return -1;
  for (int i = 0; i < eng_graph_node(g, x)->n_attr; i++) {
    const eng_attr *a = &eng_graph_node(g, x)->attr[i];
    if (!strcmp(a->name, "data_format")) continue;
    if (eng_graph_copy_attr(g, id, a, err)) return -1;
    eng_node *c = eng_graph_node(g, id);
    eng_attr *b = &c->attr[c->n_attr - 1];
    bool layout =
        !strcmp(b->name, "strides") || !strcmp(b->name, "dilations") || !strcmp(b->name, "ksize");
    if (layout && b->kind == ENG_ATTR_LIST && b->list_kind == ENG_ATTR_I && b->n == 4) {
      int64_t ch = b->li[1];
      b->li[1] = b->li[2];
      b->li[2] = b->li[3];
      b->li[3] = ch;
    }
  }
  eng_attr *f = eng_graph_add_attr(g, id, "data_format");
  if (!f) return oom(err), -1;
  f->kind = ENG_ATTR_S;
  f->s.data = strdup("NHWC");
  if (!f->s.data) return oom(err), -1;
  f->s.len = 4;
  return id;
}

/* Node x becomes op `op` over the given inputs, with no attrs (the caller
 * adds them); its control inputs stay. */
static td_code repurpose(eng_graph *g, int x, const char *op, const eng_edge *in, int n_in,
                         td_err *err) {
  eng_node *n = eng_graph_node(g, x);
  char *o = strdup(op);
  eng_edge *e = malloc(sizeof *e * (size_t)n_in);
  if (!o || !e) {
    free(o), free(e);
    return oom(err);
  }
  for (int i = 0; i < n->n_attr; i++) eng_attr_free(&n->attr[i]);
  free(n->attr);
  n->attr = NULL;
  n->n_attr = 0;
  free(n->op);
  n->op = o;
  free(n->in);
  memcpy(e, in, sizeof *e * (size_t)n_in);
  n->in = e;
  n->n_in = n_in;
  return TD_OK;
}

static td_code lower_one(eng_graph *g, int x, td_err *err) {
  static const int32_t to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};
  const eng_node *n = eng_graph_node(g, x);
  eng_dtype t = eng_node_attr_type(n, "T", ENG_DT_FLOAT);
  eng_dtype u = eng_node_attr_type(n, "U", ENG_DT_FLOAT);
  bool bn = !strncmp(n->op, "FusedBatchNorm", 14);
  int n_out = n->n_out;
  eng_edge in0 = n->in[0];
  char name[512];
  int len = snprintf(name, sizeof name, "%s/_td_nhwc", n->name);
  if (len < 0 || (size_t)len + 16 >= sizeof name)
    return td_err_set(err, TD_INVALID_ARGUMENT, "node name '%.64s...' is too long", n->name);
  strcpy(name + len, "/perm_in");
  int pin = add_perm(g, name, to_nhwc, err);
  strcpy(name + len, "/perm_out");
  int pout = pin < 0 ? -1 : add_perm(g, name, to_nchw, err);
  strcpy(name + len, "/in");
  int tin = pout < 0 ? -1 : add_transpose(g, name, in0, pin, t, err);
  name[len] = 0;
  int core = tin < 0 ? -1 : add_core(g, x, name, tin, err);
  if (core < 0) return err ? err->code : TD_RESOURCE_EXHAUSTED;
  if (!bn) {
    eng_edge e[2] = {{core, 0}, {pout, 0}};
    if (repurpose(g, x, "Transpose", e, 2, err) || add_type(g, x, "T", t, err) ||
        add_type(g, x, "Tperm", ENG_DT_INT32, err))
      return err ? err->code : TD_RESOURCE_EXHAUSTED;
    return TD_OK;
  }
  strcpy(name + len, "/out");
  int tout = add_transpose(g, name, (eng_edge){core, 0}, pout, t, err);
  if (tout < 0) return err ? err->code : TD_RESOURCE_EXHAUSTED;
  eng_edge e[6] = {{tout, 0}};
  for (int i = 1; i < n_out && i < 6; i++) e[i] = (eng_edge){core, i};
  int k = n_out < 6 ? n_out : 6;
  if (repurpose(g, x, "IdentityN", e, k, err)) return err ? err->code : TD_RESOURCE_EXHAUSTED;
  eng_attr *a = eng_graph_add_attr(g, x, "T");
  if (!a) return oom(err);
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_TYPE;
  a->ltype = calloc(6, sizeof *a->ltype);
  if (!a->ltype) return oom(err);
  a->n = k;
  for (int i = 0; i < k; i++) a->ltype[i] = i ? u : t;
  return TD_OK;
}

td_code eng_layout_lower(eng_graph *g, td_err *err) {
  for (int i = 0, n = eng_graph_node_count(g); i < n; i++)
    if (wanted(eng_graph_node(g, i))) {
      td_code rc = lower_one(g, i, err);
      if (rc) return rc;
    }
  return TD_OK;
}
