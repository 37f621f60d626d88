/* Whether two feed -> fetch subgraphs of one graph compute the same values
 * (eng_graph.h, eng_graph_same_values).
 *
 * A claim "node a computes what node b computes" is recorded per a-side node
 * (same[a] = b) and checked once: same op, same attributes, same output
 * count, and pairwise the same data inputs (with the same output index) and
 * control inputs, each of which becomes a claim in turn. A node already
 * claimed for another partner, or a difference anywhere, answers false, so
 * nothing is ever undone. The fed nodes are claimed first, input k of one
 * side for input k of the other, and their inputs are not followed: what a
 * fed value was computed from does not matter. On a graph without cycles
 * (loops are refused) the claims then hold by induction in topological
 * order: every node of the a-side subgraph is a deterministic function of
 * its inputs, attributes and the state it names, exactly as its partner is.
 * State is the same only through the same node: two variables of equal
 * attributes are still two variables. */
#include <stdlib.h>
#include <string.h>

#include "eng_graph.h"

/* The TF1 loop and branch primitives: subgraphs with them may have cycles. */
static bool is_control_flow(const char *op) {
  static const char *const ops[] = {"Enter",         "Exit",      "Merge",           "Switch",
                                    "NextIteration", "LoopCond",  "RefEnter",        "RefExit",
                                    "RefMerge",      "RefSwitch", "RefNextIteration"};
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(op, ops[i])) return true;
  return false;
}

/* Nodes that create or name state, whose identity can be their own name
 * (a VariableV2 or VarHandleOp with an empty shared_name is the variable of
 * that node name; a TensorArray or stack is made per node): equal only to
 * themselves. So is any node without data inputs other than a constant or
 * a NoOp (a placeholder nobody feeds, a table, a queue). */
static bool is_own_identity(const eng_node *n) {
  static const char *const ops[] = {"Variable",          "VariableV2",  "VarHandleOp",
                                    "TemporaryVariable", "TensorArray", "TensorArrayV2",
                                    "TensorArrayV3",     "Stack",       "StackV2"};
  if (!n->n_in && strcmp(n->op, "Const") && strcmp(n->op, "NoOp")) return true;
  for (size_t i = 0; i < sizeof ops / sizeof *ops; i++)
    if (!strcmp(n->op, ops[i])) return true;
  return false;
}

static bool same_bytes(const eng_bytes *a, const eng_bytes *b) {
  return a->len == b->len && !memcmp(a->data, b->data, a->len);
}

static bool same_shape(const eng_shape *a, const eng_shape *b) {
  if (a->rank != b->rank) return false;
  for (int i = 0; i < a->rank && i < ENG_MAX_RANK; i++)
    if (a->dim[i] != b->dim[i]) return false;
  return true;
}

static bool same_tensor(const eng_tensor *a, const eng_tensor *b) {
  if (a->dtype != b->dtype || a->is_ref != b->is_ref || !same_shape(&a->shape, &b->shape))
    return false;
  if (a->buf == b->buf) return true;
  if (a->dtype == ENG_DT_VARIANT || a->dtype == ENG_DT_RESOURCE) return false;
  if (a->dtype == ENG_DT_STRING) {
    int64_t n = eng_shape_numel(&a->shape);
    if (n < 0) return false;
    const eng_str *sa = eng_tensor_strs(a), *sb = eng_tensor_strs(b);
    if (n && (!sa || !sb)) return false;
    for (int64_t i = 0; i < n; i++)
      if (sa[i].len != sb[i].len || (sa[i].len && memcmp(sa[i].data, sb[i].data, sa[i].len)))
        return false;
    return true;
  }
  size_t na = eng_tensor_nbytes(a);
  if (na != eng_tensor_nbytes(b)) return false;
  if (!na) return true;
  const void *da = eng_tensor_data(a), *db = eng_tensor_data(b);
  return da && db && !memcmp(da, db, na);
}

static bool same_attr(const eng_attr *a, const eng_attr *b) {
  if (a->kind != b->kind) return false;
  switch (a->kind) {
    case ENG_ATTR_NONE:
      return true;
    case ENG_ATTR_S:
      return same_bytes(&a->s, &b->s);
    case ENG_ATTR_I:
      return a->i == b->i;
    case ENG_ATTR_F:
      return !memcmp(&a->f, &b->f, sizeof a->f);
    case ENG_ATTR_B:
      return a->b == b->b;
    case ENG_ATTR_TYPE:
      return a->type == b->type;
    case ENG_ATTR_SHAPE:
      return same_shape(&a->shape, &b->shape);
    case ENG_ATTR_TENSOR:
      return same_tensor(&a->tensor, &b->tensor);
    case ENG_ATTR_FUNC:
      return !strcmp(a->func, b->func);
    case ENG_ATTR_LIST:
      break;
  }
  if (a->list_kind != b->list_kind || a->n != b->n) return false;
  for (int i = 0; i < a->n; i++) {
    bool eq = false;
    switch (a->list_kind) {
      case ENG_ATTR_S:
        eq = same_bytes(&a->ls[i], &b->ls[i]);
        break;
      case ENG_ATTR_I:
        eq = a->li[i] == b->li[i];
        break;
      case ENG_ATTR_F:
        eq = !memcmp(&a->lf[i], &b->lf[i], sizeof a->lf[i]);
        break;
      case ENG_ATTR_B:
        eq = a->lb[i] == b->lb[i];
        break;
      case ENG_ATTR_TYPE:
        eq = a->ltype[i] == b->ltype[i];
        break;
      case ENG_ATTR_SHAPE:
        eq = same_shape(&a->lshape[i], &b->lshape[i]);
        break;
      case ENG_ATTR_FUNC:
        eq = !strcmp(a->lfunc[i], b->lfunc[i]);
        break;
      default:
        eq = false;
        break;
    }
    if (!eq) return false;
  }
  return true;
}

/* "_class" holds colocation hints naming other nodes ("loc:@name"): it
 * places, it does not compute. */
static bool ignored_attr(const char *name) { return !strcmp(name, "_class"); }

static bool same_attrs(const eng_node *a, const eng_node *b) {
  int na = 0, nb = 0;
  for (int i = 0; i < a->n_attr; i++) {
    if (ignored_attr(a->attr[i].name)) continue;
    na++;
    const eng_attr *o = eng_node_attr(b, a->attr[i].name);
    if (!o || !same_attr(&a->attr[i], o)) return false;
  }
  for (int i = 0; i < b->n_attr; i++) nb += !ignored_attr(b->attr[i].name);
  return na == nb;
}

typedef struct claims {
  int *same;  /* per a-side node: its partner + 1, 0 when unclaimed */
  int *fed_a; /* per node: fed as input k of side a (k + 1), else 0 */
  int *fed_b;
  int *stack; /* a-side nodes whose claim is still to check */
  int top;
} claims;

/* Records a claim; false on a conflicting one. */
static bool claim(claims *c, int a, int b) {
  if (c->same[a]) return c->same[a] == b + 1;
  c->same[a] = b + 1;
  c->stack[c->top++] = a;
  return true;
}

static bool parse(const eng_graph *g, const char *name, eng_edge *e) {
  td_err err;
  td_err_clear(&err);
  return name && !eng_graph_parse_edge(g, name, e, &err);
}

bool eng_graph_same_values(const eng_graph *g, int n_inputs, const char *const *inputs_a,
                           const char *const *inputs_b, int n_outputs, const char *const *outputs_a,
                           const char *const *outputs_b) {
  int n = eng_graph_node_count(g);
  if (n <= 0 || n_inputs < 0 || n_outputs <= 0) return false;
  claims c = {.same = calloc((size_t)n, sizeof(int)),
              .fed_a = calloc((size_t)n, sizeof(int)),
              .fed_b = calloc((size_t)n, sizeof(int)),
              .stack = malloc((size_t)n * sizeof(int))};
  bool ok = c.same && c.fed_a && c.fed_b && c.stack;
  /* The fed nodes: each fed once, output 0 of a node with one output (a
   * placeholder), so the feed replaces everything the node computes. */
  for (int k = 0; ok && k < n_inputs; k++) {
    eng_edge ea, eb;
    ok = parse(g, inputs_a[k], &ea) && parse(g, inputs_b[k], &eb) && ea.index == 0 &&
         eb.index == 0 && eng_graph_node(g, ea.node)->n_out == 1 &&
         eng_graph_node(g, eb.node)->n_out == 1 && !c.fed_a[ea.node] && !c.fed_b[eb.node];
    if (!ok) break;
    c.fed_a[ea.node] = k + 1;
    c.fed_b[eb.node] = k + 1;
    const eng_node *na = eng_graph_node(g, ea.node), *nb = eng_graph_node(g, eb.node);
    ok = !strcmp(na->op, nb->op) && same_attrs(na, nb);
  }
  for (int k = 0; ok && k < n_inputs; k++) {
    eng_edge ea, eb;
    parse(g, inputs_a[k], &ea);
    parse(g, inputs_b[k], &eb);
    ok = claim(&c, ea.node, eb.node);
  }
  c.top = 0; /* fed claims are not followed */
  for (int k = 0; ok && k < n_outputs; k++) {
    eng_edge ea, eb;
    ok = parse(g, outputs_a[k], &ea) && parse(g, outputs_b[k], &eb) && ea.index == eb.index &&
         claim(&c, ea.node, eb.node);
  }
  while (ok && c.top) {
    int a = c.stack[--c.top], b = c.same[a] - 1;
    /* A node fed on one side only: computed there, replaced here. */
    if (c.fed_a[a] || c.fed_b[b]) {
      ok = c.fed_a[a] && c.fed_a[a] == c.fed_b[b];
      continue;
    }
    const eng_node *na = eng_graph_node(g, a), *nb = eng_graph_node(g, b);
    if (a != b && (is_own_identity(na) || is_own_identity(nb))) {
      ok = false;
      break;
    }
    ok = !strcmp(na->op, nb->op) && !is_control_flow(na->op) && na->n_out == nb->n_out &&
         na->n_in == nb->n_in && na->n_ctrl == nb->n_ctrl && same_attrs(na, nb);
    for (int i = 0; ok && i < na->n_in; i++)
      ok = na->in[i].index == nb->in[i].index && claim(&c, na->in[i].node, nb->in[i].node);
    for (int i = 0; ok && i < na->n_ctrl; i++) ok = claim(&c, na->ctrl[i], nb->ctrl[i]);
  }
  free(c.same);
  free(c.fed_a);
  free(c.fed_b);
  free(c.stack);
  return ok;
}
