#include "eng_inline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INLINED_NODES 2000000
/* Far beyond real exports (a few levels); a recursive function reaches it
 * after a few hundred small nodes, before names grow long. */
#define MAX_CALL_DEPTH 64

bool eng_inline_is_call(const eng_node *n, const eng_library *lib, const char **callee) {
  const char *f = NULL;
  if (!strcmp(n->op, "StatefulPartitionedCall") || !strcmp(n->op, "PartitionedCall"))
    f = eng_node_attr_func(n, "f");
  else if (eng_library_find(lib, n->op))
    f = n->op;
  if (callee) *callee = f;
  return f != NULL;
}

static int arg_index(const eng_node *n) {
  return !strcmp(n->op, "_Arg") ? (int)eng_node_attr_int(n, "index", -1) : -1;
}

/* True when a data or control input of bn comes from a body node other
 * than an _Arg: bn then runs after the call's entry through that node. */
static bool has_body_producer(const eng_graph *body, const eng_node *bn) {
  for (int k = 0; k < bn->n_in; k++)
    if (arg_index(eng_graph_node(body, bn->in[k].node)) < 0) return true;
  for (int k = 0; k < bn->n_ctrl; k++)
    if (arg_index(eng_graph_node(body, bn->ctrl[k])) < 0) return true;
  return false;
}

/* Adds a node named "<prefix>/<name>", adding a numeric suffix in the rare
 * case the name is taken. */
static int add_prefixed(eng_graph *g, const char *prefix, const char *name, const char *op,
                        td_err *err) {
  size_t len = strlen(prefix) + strlen(name) + 16;
  char *full = malloc(len);
  if (!full) {
    td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  snprintf(full, len, "%s/%s", prefix, name);
  for (int k = 1; eng_graph_find(g, full, strlen(full)) >= 0; k++)
    snprintf(full, len, "%s/%s_%d", prefix, name, k);
  int id = eng_graph_add_node(g, full, op, err);
  free(full);
  return id;
}

static td_code inline_one(eng_graph *g, int call, const eng_function *fn, td_err *err) {
  eng_node *cn = eng_graph_node(g, call);
  if (cn->n_in != fn->n_args)
    return td_err_set(err, TD_INVALID_ARGUMENT, "call '%s' passes %d inputs to '%s', which takes %d",
                      cn->name, cn->n_in, fn->name, fn->n_args);
  if (cn->n_out > fn->n_rets)
    return td_err_set(err, TD_INVALID_ARGUMENT, "call '%s' expects %d results from '%s', which returns %d",
                      cn->name, cn->n_out, fn->name, fn->n_rets);
  /* Copy what we need from the call node: adding nodes moves the array. */
  char *prefix = strdup(cn->name);
  int n_args = cn->n_in;
  eng_edge *args = malloc(sizeof *args * (size_t)(n_args ? n_args : 1));
  int n_cin = cn->n_ctrl;
  int *cin = malloc(sizeof *cin * (size_t)(n_cin ? n_cin : 1));
  int nb = eng_graph_node_count(fn->body);
  int *map = malloc(sizeof *map * (size_t)(nb ? nb : 1));
  td_code rc = TD_OK;
  if (!prefix || !args || !cin || !map) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory inlining '%s'", fn->name);
    goto done;
  }
  /* cn->in / cn->ctrl are NULL when empty: memcpy(NULL) is undefined. */
  if (n_args) memcpy(args, cn->in, sizeof *args * (size_t)n_args);
  if (n_cin) memcpy(cin, cn->ctrl, sizeof *cin * (size_t)n_cin);

  int entry = -1;
  if (n_cin) {
    entry = add_prefixed(g, prefix, "_entry", "NoOp", err);
    if (entry < 0) { rc = err ? err->code : TD_INTERNAL; goto done; }
    for (int i = 0; i < n_cin && !rc; i++) rc = eng_graph_add_ctrl(g, entry, cin[i], err);
    if (rc) goto done;
  }
  /* Pass 1: create the body's nodes (args map to nothing). */
  for (int b = 0; b < nb; b++) {
    const eng_node *bn = eng_graph_node(fn->body, b);
    int ai = arg_index(bn);
    if (ai >= 0) {
      if (ai >= n_args) {
        rc = td_err_set(err, TD_INVALID_ARGUMENT, "function '%s': _Arg index %d out of range",
                        fn->name, ai);
        goto done;
      }
      map[b] = -1;
      continue;
    }
    int id = add_prefixed(g, prefix, bn->name, bn->op, err);
    if (id < 0) { rc = err ? err->code : TD_INTERNAL; goto done; }
    map[b] = id;
    eng_graph_node(g, id)->n_out = bn->n_out;
    for (int a = 0; a < bn->n_attr && !rc; a++) rc = eng_graph_copy_attr(g, id, &bn->attr[a], err);
    if (rc) goto done;
  }
  /* Pass 2: wire inputs. */
  for (int b = 0; b < nb && !rc; b++) {
    if (map[b] < 0) continue;
    const eng_node *bn = eng_graph_node(fn->body, b);
    for (int k = 0; k < bn->n_in && !rc; k++) {
      eng_edge e = bn->in[k];
      int ai = arg_index(eng_graph_node(fn->body, e.node));
      eng_edge to = ai >= 0 ? args[ai] : (eng_edge){map[e.node], e.index};
      rc = eng_graph_add_input(g, map[b], to, err);
    }
    for (int k = 0; k < bn->n_ctrl && !rc; k++) {
      int from = bn->ctrl[k];
      int ai = arg_index(eng_graph_node(fn->body, from));
      rc = eng_graph_add_ctrl(g, map[b], ai >= 0 ? args[ai].node : map[from], err);
    }
    if (!rc && entry >= 0 && !has_body_producer(fn->body, bn))
      rc = eng_graph_add_ctrl(g, map[b], entry, err);
  }
  if (rc) goto done;

  /* The call node becomes an IdentityN over the returns. */
  cn = eng_graph_node(g, call);
  free(cn->op);
  cn->op = strdup("IdentityN");
  for (int a = 0; a < cn->n_attr; a++) eng_attr_free(&cn->attr[a]);
  cn->n_attr = 0;
  cn->n_in = 0;
  cn->n_ctrl = 0;
  if (!cn->op) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  for (int r = 0; r < cn->n_out && !rc; r++) {
    eng_edge e = fn->rets[r];
    int ai = arg_index(eng_graph_node(fn->body, e.node));
    rc = eng_graph_add_input(g, call, ai >= 0 ? args[ai] : (eng_edge){map[e.node], e.index}, err);
  }
  for (int r = 0; r < fn->n_ctrl_rets && !rc; r++)
    if (map[fn->ctrl_rets[r]] >= 0) rc = eng_graph_add_ctrl(g, call, map[fn->ctrl_rets[r]], err);
  /* A call with no data returns must still order after its entry. */
  if (!rc && entry >= 0) rc = eng_graph_add_ctrl(g, call, entry, err);
done:
  free(prefix);
  free(args);
  free(cin);
  free(map);
  return rc;
}

/* --- control flow: While / If bodies as detached subgraphs ---------------- */

/* The function attrs of a control-flow node, by role; NULL when n is none. */
static const char *const *cf_roles(const eng_node *n) {
  static const char *const loop[] = {"cond", "body", NULL};
  static const char *const branch[] = {"then_branch", "else_branch", NULL};
  if (!strcmp(n->op, "While") || !strcmp(n->op, "StatelessWhile")) return loop;
  if (!strcmp(n->op, "If") || !strcmp(n->op, "StatelessIf")) return branch;
  return NULL;
}

bool eng_inline_is_control_flow(const eng_node *n) { return cf_roles(n) != NULL; }

/* Copies fn's body into g as "<node>/<role>/..." with each _Arg replaced by
 * a Placeholder of its type, and records on the control-flow node the
 * arguments ("_td_<role>_args") and results ("_td_<role>_rets", "node:i")
 * a plan of that subgraph feeds and fetches. */
static td_code instantiate(eng_graph *g, int cf, const char *role, const eng_function *fn,
                           td_err *err) {
  size_t plen = strlen(eng_graph_node(g, cf)->name) + strlen(role) + 2;
  char *prefix = malloc(plen);
  int nb = eng_graph_node_count(fn->body);
  int *map = malloc(sizeof *map * (size_t)(nb ? nb : 1));
  char **args = calloc((size_t)fn->n_args + 1, sizeof *args);
  char **rets = calloc((size_t)fn->n_rets + 1, sizeof *rets);
  td_code rc = TD_OK;
  if (!prefix || !map || !args || !rets) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  snprintf(prefix, plen, "%s/%s", eng_graph_node(g, cf)->name, role);
  for (int b = 0; b < nb && !rc; b++) {
    const eng_node *bn = eng_graph_node(fn->body, b);
    int ai = arg_index(bn);
    if (ai >= fn->n_args) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "function '%s': _Arg index %d out of range",
                      fn->name, ai);
      break;
    }
    int id = add_prefixed(g, prefix, bn->name, ai >= 0 ? "Placeholder" : bn->op, err);
    if (id < 0) {
      rc = err ? err->code : TD_INTERNAL;
      break;
    }
    map[b] = id;
    eng_graph_node(g, id)->n_out = ai >= 0 ? 1 : bn->n_out;
    if (ai >= 0) {
      eng_attr *a = eng_graph_add_attr(g, id, "dtype");
      if (!a) {
        rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
      a->kind = ENG_ATTR_TYPE;
      a->type = eng_node_attr_type(bn, "T", ENG_DT_INVALID);
      args[ai] = strdup(eng_graph_node(g, id)->name);
      if (!args[ai]) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      for (int a = 0; a < bn->n_attr && !rc; a++) rc = eng_graph_copy_attr(g, id, &bn->attr[a], err);
    }
  }
  for (int b = 0; b < nb && !rc; b++) {
    const eng_node *bn = eng_graph_node(fn->body, b);
    if (arg_index(bn) >= 0) continue;
    for (int k = 0; k < bn->n_in && !rc; k++)
      rc = eng_graph_add_input(g, map[b], (eng_edge){map[bn->in[k].node], bn->in[k].index}, err);
    for (int k = 0; k < bn->n_ctrl && !rc; k++) rc = eng_graph_add_ctrl(g, map[b], map[bn->ctrl[k]], err);
  }
  for (int i = 0; i < fn->n_args && !rc; i++)
    if (!args[i]) rc = td_err_set(err, TD_INVALID_ARGUMENT, "function '%s' lacks _Arg %d", fn->name, i);
  for (int r = 0; r < fn->n_rets && !rc; r++) {
    const eng_node *src = eng_graph_node(g, map[fn->rets[r].node]);
    size_t len = strlen(src->name) + 24;
    rets[r] = malloc(len);
    if (!rets[r]) rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    else snprintf(rets[r], len, "%s:%d", src->name, fn->rets[r].index);
  }
  if (!rc) {
    char attr[64];
    snprintf(attr, sizeof attr, "_td_%s_args", role);
    rc = eng_graph_add_names(g, cf, attr, args, fn->n_args, err);
    snprintf(attr, sizeof attr, "_td_%s_rets", role);
    if (!rc) rc = eng_graph_add_names(g, cf, attr, rets, fn->n_rets, err);
  }
done:
  for (int i = 0; args && i < fn->n_args; i++) free(args[i]);
  for (int i = 0; rets && i < fn->n_rets; i++) free(rets[i]);
  free(args);
  free(rets);
  free(prefix);
  free(map);
  return rc;
}

static td_code instantiate_control_flow(eng_graph *g, int cf, const eng_library *lib, td_err *err) {
  const char *const *roles = cf_roles(eng_graph_node(g, cf));
  for (int r = 0; roles[r]; r++) {
    const char *fname = eng_node_attr_func(eng_graph_node(g, cf), roles[r]);
    const eng_function *fn = fname ? eng_library_find(lib, fname) : NULL;
    if (!fn)
      return td_err_set(err, TD_NOT_FOUND, "node '%s' (%s): its %s function '%s' is not in the library",
                        eng_graph_node(g, cf)->name, eng_graph_node(g, cf)->op, roles[r],
                        fname ? fname : "");
    const char *role = roles[r];
    /* then_branch / else_branch are recorded as "then" / "else". */
    char shortrole[16];
    snprintf(shortrole, sizeof shortrole, "%.*s", (int)strcspn(role, "_"), role);
    td_code rc = instantiate(g, cf, shortrole, fn, err);
    if (rc) return rc;
  }
  return TD_OK;
}

td_code eng_inline_calls(eng_graph *g, const eng_library *lib, td_err *err) {
  /* Newly added nodes are visited too, which flattens nested calls. depth[i]
   * counts the calls node i was inlined through. */
  int cap = eng_graph_node_count(g) + 1;
  int *depth = calloc((size_t)cap, sizeof *depth);
  if (!depth) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  td_code rc = TD_OK;
  for (int i = 0; i < eng_graph_node_count(g) && !rc; i++) {
    if (eng_graph_node_count(g) > MAX_INLINED_NODES) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT,
                      "inlining function calls exceeded %d nodes (recursive functions?)",
                      MAX_INLINED_NODES);
      break;
    }
    const char *callee;
    eng_node *n = eng_graph_node(g, i);
    bool cf = eng_inline_is_control_flow(n);
    if (!cf && !eng_inline_is_call(n, lib, &callee)) continue;
    if (cf && depth[i] >= MAX_CALL_DEPTH) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "control flow nests more than %d deep at '%s'",
                      MAX_CALL_DEPTH, n->name);
      break;
    }
    const eng_function *fn = NULL;
    if (!cf) {
      fn = eng_library_find(lib, callee);
      if (!fn) {
        rc = td_err_set(err, TD_NOT_FOUND, "node '%s' calls function '%s', which the library lacks",
                        n->name, callee);
        break;
      }
      if (depth[i] >= MAX_CALL_DEPTH) {
        rc = td_err_set(err, TD_INVALID_ARGUMENT,
                        "function calls nest more than %d deep at a call of '%s' (recursive "
                        "function?)",
                        MAX_CALL_DEPTH, callee);
        break;
      }
    }
    int before = eng_graph_node_count(g);
    rc = cf ? instantiate_control_flow(g, i, lib, err) : inline_one(g, i, fn, err);
    int after = eng_graph_node_count(g);
    if (!rc && after > cap) {
      int ncap = after > 2 * cap ? after : 2 * cap;
      int *nd = realloc(depth, sizeof *nd * (size_t)ncap);
      if (!nd) {
        rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
      depth = nd;
      cap = ncap;
    }
    for (int k = before; !rc && k < after; k++) depth[k] = depth[i] + 1;
  }
  free(depth);
  return rc;
}
