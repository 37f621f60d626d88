#include "ldr_import.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_proto.h"

typedef struct importer {
  const Tensorflow__OpList *ops;
  const Tensorflow__FunctionDefLibrary *lib;
  td_err *err;
} importer;

static const Tensorflow__OpDef *find_opdef(const importer *im, const char *op) {
  if (im->ops)
    for (size_t i = 0; i < im->ops->n_op; i++)
      if (!strcmp(im->ops->op[i]->name, op)) return im->ops->op[i];
  if (im->lib)
    for (size_t i = 0; i < im->lib->n_function; i++) {
      const Tensorflow__OpDef *sig = im->lib->function[i]->signature;
      if (sig && !strcmp(sig->name, op)) return sig;
    }
  return NULL;
}

/* Number of tensors an output arg stands for on this node. */
static int arg_size(const eng_node *n, const Tensorflow__OpDef__ArgDef *a) {
  if (a->number_attr && *a->number_attr) return (int)eng_node_attr_int(n, a->number_attr, -1);
  if (a->type_list_attr && *a->type_list_attr) {
    const eng_attr *l = eng_node_attr(n, a->type_list_attr);
    return l && l->kind == ENG_ATTR_LIST ? l->n : -1;
  }
  return 1;
}

static int count_outputs(const eng_node *n, const Tensorflow__OpDef *od) {
  int total = 0;
  for (size_t i = 0; i < od->n_output_arg; i++) {
    int s = arg_size(n, od->output_arg[i]);
    if (s < 0) return -1;
    total += s;
  }
  return total;
}

/* Adds the node's attributes, then the OpDef defaults it lacks. */
static td_code add_attrs(eng_graph *g, int id, const Tensorflow__NodeDef *nd,
                         const Tensorflow__OpDef *od, td_err *err) {
  for (size_t i = 0; i < nd->n_attr; i++) {
    eng_attr *a = eng_graph_add_attr(g, id, nd->attr[i]->key);
    if (!a) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    if (nd->attr[i]->value) {
      td_code rc = ldr_proto_attr(nd->attr[i]->value, a, err);
      if (rc) return td_err_prefix(err, "node '%s' attr '%s'", nd->name, nd->attr[i]->key);
    }
  }
  if (!od) return TD_OK;
  for (size_t i = 0; i < od->n_attr; i++) {
    const Tensorflow__OpDef__AttrDef *ad = od->attr[i];
    if (!ad->default_value || eng_node_attr(eng_graph_node(g, id), ad->name)) continue;
    eng_attr *a = eng_graph_add_attr(g, id, ad->name);
    if (!a) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    td_code rc = ldr_proto_attr(ad->default_value, a, err);
    if (rc) return td_err_prefix(err, "node '%s' default attr '%s'", nd->name, ad->name);
  }
  return TD_OK;
}

/* Pass 1 for a graph or a body: create nodes with attributes and output
 * counts. Ops without an OpDef get their count from the references to them
 * (grown in pass 2). */
static td_code add_nodes(const importer *im, eng_graph *g, Tensorflow__NodeDef **nodes, size_t n) {
  td_err *err = im->err;
  for (size_t i = 0; i < n; i++) {
    const Tensorflow__NodeDef *nd = nodes[i];
    int id = eng_graph_add_node(g, nd->name, nd->op, err);
    if (id < 0) return err ? err->code : TD_INVALID_ARGUMENT;
    const Tensorflow__OpDef *od = find_opdef(im, nd->op);
    td_code rc = add_attrs(g, id, nd, od, err);
    if (rc) return rc;
    eng_node *en = eng_graph_node(g, id);
    en->n_out = od ? count_outputs(en, od) : 1;
    if (en->n_out < 0)
      return td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (%s): cannot size its outputs",
                        nd->name, nd->op);
    if (!od && !strcmp(nd->op, "NoOp")) en->n_out = 0;
  }
  return TD_OK;
}

/* Flat output index of "<arg>:<idx>" for ops with several output args,
 * when the MetaGraph carries no OpDef for them; -1 for an unknown arg. */
static int builtin_output(const char *op, const char *arg, int idx) {
  static const struct {
    const char *op;
    const char *args[6];
  } multi[] = {
      {"FusedBatchNorm", {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"}},
      {"FusedBatchNormV2", {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2"}},
      {"FusedBatchNormV3",
       {"y", "batch_mean", "batch_variance", "reserve_space_1", "reserve_space_2", "reserve_space_3"}},
  };
  for (size_t i = 0; i < sizeof multi / sizeof multi[0]; i++) {
    if (strcmp(op, multi[i].op)) continue;
    for (int a = 0; a < 6 && multi[i].args[a]; a++)
      if (!strcmp(arg, multi[i].args[a])) return idx == 0 ? a : -1;
    return -1;
  }
  return idx;
}

static td_code parse_index(const char *s, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *end || errno || v < 0 || v > 1000000) return TD_INVALID_ARGUMENT;
  *out = (int)v;
  return TD_OK;
}

/* Resolves one input string of a function body node. */
static td_code resolve_body_input(const importer *im, eng_graph *g, const char *ref, eng_edge *e) {
  td_err *err = im->err;
  char *copy = strdup(ref);
  if (!copy) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  char *parts[3] = {copy, NULL, NULL};
  int np = 1;
  for (char *p = copy; *p && np < 3; p++)
    if (*p == ':') {
      *p = '\0';
      parts[np++] = p + 1;
    }
  td_code rc = TD_OK;
  int node = eng_graph_find(g, parts[0], strlen(parts[0]));
  if (node < 0) {
    rc = td_err_set(err, TD_INVALID_ARGUMENT, "input '%s' names no node or argument", ref);
    goto out;
  }
  const eng_node *src = eng_graph_node(g, node);
  if (np == 1) {
    *e = (eng_edge){node, 0};
  } else if (np == 2) {
    /* "arg:0" for a parameter, or a plain flat index. */
    int idx;
    if (parse_index(parts[1], &idx)) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "malformed input '%s'", ref);
      goto out;
    }
    *e = (eng_edge){node, idx};
  } else {
    int idx;
    const Tensorflow__OpDef *od = find_opdef(im, src->op);
    if (parse_index(parts[2], &idx)) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "cannot resolve input '%s'", ref);
      goto out;
    }
    if (!od) {
      /* stripped_op_list leaves out ops used only inside While / If
       * functions. Without an OpDef the output is placed by the few ops
       * with several output args the engine runs; every other op has one
       * output arg, whose index is the flat index. */
      int flat = builtin_output(src->op, parts[1], idx);
      if (flat < 0) {
        rc = td_err_set(err, TD_INVALID_ARGUMENT, "cannot resolve input '%s' (no OpDef for %s)",
                        ref, src->op);
        goto out;
      }
      *e = (eng_edge){node, flat};
      goto grow;
    }
    int flat = 0;
    bool found = false;
    for (size_t a = 0; a < od->n_output_arg; a++) {
      int size = arg_size(src, od->output_arg[a]);
      if (!strcmp(od->output_arg[a]->name, parts[1])) {
        if (idx >= size) break;
        found = true;
        flat += idx;
        break;
      }
      flat += size;
    }
    if (!found) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': op %s has no output '%s:%d'", ref,
                      src->op, parts[1], idx);
      goto out;
    }
    *e = (eng_edge){node, flat};
  }
grow:;
  eng_node *srcn = eng_graph_node(g, node);
  if (e->index >= srcn->n_out) {
    if (find_opdef(im, srcn->op)) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT, "input '%s': node has %d outputs", ref, srcn->n_out);
      goto out;
    }
    srcn->n_out = e->index + 1;
  }
out:
  free(copy);
  return rc;
}

static td_code resolve_graph_input(const importer *im, eng_graph *g, const char *ref, eng_edge *e) {
  const char *colon = strrchr(ref, ':');
  size_t len = colon ? (size_t)(colon - ref) : strlen(ref);
  int idx = 0;
  if (colon && parse_index(colon + 1, &idx))
    return td_err_set(im->err, TD_INVALID_ARGUMENT, "malformed input '%s'", ref);
  int node = eng_graph_find(g, ref, len);
  if (node < 0) return td_err_set(im->err, TD_INVALID_ARGUMENT, "input '%s' names no node", ref);
  eng_node *src = eng_graph_node(g, node);
  if (idx >= src->n_out) {
    if (find_opdef(im, src->op))
      return td_err_set(im->err, TD_INVALID_ARGUMENT, "input '%s': node has %d outputs", ref,
                        src->n_out);
    src->n_out = idx + 1;
  }
  *e = (eng_edge){node, idx};
  return TD_OK;
}

/* Pass 2: wire data and control inputs. */
static td_code wire(const importer *im, eng_graph *g, Tensorflow__NodeDef **nodes, size_t n,
                    bool body) {
  for (size_t i = 0; i < n; i++) {
    const Tensorflow__NodeDef *nd = nodes[i];
    int id = eng_graph_find(g, nd->name, strlen(nd->name));
    for (size_t k = 0; k < nd->n_input; k++) {
      const char *ref = nd->input[k];
      td_code rc;
      if (ref[0] == '^') {
        int from = eng_graph_find(g, ref + 1, strlen(ref + 1));
        if (from < 0)
          return td_err_set(im->err, TD_INVALID_ARGUMENT, "node '%s': control input '%s' names no node",
                            nd->name, ref);
        rc = eng_graph_add_ctrl(g, id, from, im->err);
      } else {
        eng_edge e;
        rc = body ? resolve_body_input(im, g, ref, &e) : resolve_graph_input(im, g, ref, &e);
        if (rc) return td_err_prefix(im->err, "node '%s'", nd->name);
        rc = eng_graph_add_input(g, id, e, im->err);
      }
      if (rc) return rc;
    }
  }
  return TD_OK;
}

static const char *map_get(Tensorflow__FunctionDef__RetEntry **m, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(m[i]->key, key)) return m[i]->value;
  return NULL;
}

static td_code import_function(const importer *im, const Tensorflow__FunctionDef *fd,
                               eng_library *lib) {
  td_err *err = im->err;
  const Tensorflow__OpDef *sig = fd->signature;
  if (!sig || !sig->name) return td_err_set(err, TD_INVALID_ARGUMENT, "function without a signature");
  eng_function *fn = eng_library_add(lib, sig->name, err);
  if (!fn) return err ? err->code : TD_INTERNAL;
  for (size_t i = 0; i < sig->n_input_arg; i++) {
    const Tensorflow__OpDef__ArgDef *a = sig->input_arg[i];
    if ((a->number_attr && *a->number_attr) || (a->type_list_attr && *a->type_list_attr))
      return td_err_set(err, TD_UNIMPLEMENTED, "function '%s': list argument '%s' is not supported",
                        sig->name, a->name);
    int id = eng_graph_add_node(fn->body, a->name, "_Arg", err);
    if (id < 0) return td_err_prefix(err, "function '%s'", sig->name);
    eng_attr *at = eng_graph_add_attr(fn->body, id, "index");
    if (!at) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    at->kind = ENG_ATTR_I;
    at->i = (int64_t)i;
    eng_graph_node(fn->body, id)->n_out = 1;
  }
  fn->n_args = (int)sig->n_input_arg;
  td_code rc = add_nodes(im, fn->body, fd->node_def, fd->n_node_def);
  if (!rc) rc = wire(im, fn->body, fd->node_def, fd->n_node_def, true);
  if (rc) return td_err_prefix(err, "function '%s'", sig->name);

  fn->rets = calloc(sig->n_output_arg + 1, sizeof *fn->rets);
  fn->ctrl_rets = calloc(fd->n_control_ret + 1, sizeof *fn->ctrl_rets);
  if (!fn->rets || !fn->ctrl_rets) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (size_t i = 0; i < sig->n_output_arg; i++) {
    const char *ref = map_get(fd->ret, fd->n_ret, sig->output_arg[i]->name);
    if (!ref)
      return td_err_set(err, TD_INVALID_ARGUMENT, "function '%s': output '%s' is not returned",
                        sig->name, sig->output_arg[i]->name);
    rc = resolve_body_input(im, fn->body, ref, &fn->rets[i]);
    if (rc) return td_err_prefix(err, "function '%s' return '%s'", sig->name, sig->output_arg[i]->name);
  }
  fn->n_rets = (int)sig->n_output_arg;
  for (size_t i = 0; i < fd->n_control_ret; i++) {
    const char *name = fd->control_ret[i]->value;
    int id = eng_graph_find(fn->body, name, strlen(name));
    if (id < 0)
      return td_err_set(err, TD_INVALID_ARGUMENT, "function '%s': control return '%s' names no node",
                        sig->name, name);
    fn->ctrl_rets[fn->n_ctrl_rets++] = id;
  }
  return TD_OK;
}

td_code ldr_import_graph(const Tensorflow__GraphDef *gd, const Tensorflow__OpList *op_list,
                         eng_graph **graph, eng_library **lib, td_err *err) {
  importer im = {.ops = op_list, .lib = gd->library, .err = err};
  eng_graph *g = eng_graph_create();
  eng_library *l = eng_library_create();
  td_code rc = TD_OK;
  if (!g || !l) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  if (gd->library)
    for (size_t i = 0; i < gd->library->n_function && !rc; i++)
      rc = import_function(&im, gd->library->function[i], l);
  if (!rc) rc = add_nodes(&im, g, gd->node, gd->n_node);
  if (!rc) rc = wire(&im, g, gd->node, gd->n_node, false);
  if (rc) goto fail;
  *graph = g;
  *lib = l;
  return TD_OK;
fail:
  eng_graph_destroy(g);
  eng_library_destroy(l);
  return rc;
}
