/* Node names are indexed by an open-addressing hash table of node indices
 * (FNV-1a), grown at half load, so import and edge parsing stay linear in
 * graph size. */
#include "eng_graph.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct eng_graph {
  int n, cap;
  eng_node *nodes;
  int *slots; /* hash table of node index + 1; 0 = empty */
  size_t n_slots;
};

static uint64_t hash_name(const char *s, size_t len) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
  return h;
}

static char *dup_n(const char *s, size_t len) {
  char *p = malloc(len + 1);
  if (!p) return NULL;
  memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

eng_graph *eng_graph_create(void) { return calloc(1, sizeof(eng_graph)); }

void eng_attr_free(eng_attr *a) {
  free(a->name);
  switch (a->kind) {
    case ENG_ATTR_S: free(a->s.data); break;
    case ENG_ATTR_TENSOR: eng_tensor_release(&a->tensor); break;
    case ENG_ATTR_FUNC: free(a->func); break;
    case ENG_ATTR_LIST:
      if (a->list_kind == ENG_ATTR_S)
        for (int i = 0; i < a->n; i++) free(a->ls[i].data);
      if (a->list_kind == ENG_ATTR_FUNC)
        for (int i = 0; i < a->n; i++) free(a->lfunc[i]);
      free(a->li); /* every list array shares the union slot */
      break;
    default: break;
  }
  memset(a, 0, sizeof *a);
}

void eng_graph_destroy(eng_graph *g) {
  if (!g) return;
  for (int i = 0; i < g->n; i++) {
    eng_node *nd = &g->nodes[i];
    free(nd->name);
    free(nd->op);
    free(nd->in);
    free(nd->ctrl);
    for (int j = 0; j < nd->n_attr; j++) eng_attr_free(&nd->attr[j]);
    free(nd->attr);
  }
  free(g->nodes);
  free(g->slots);
  free(g);
}

int eng_graph_node_count(const eng_graph *g) { return g->n; }

eng_node *eng_graph_node(const eng_graph *g, int i) { return &g->nodes[i]; }

int eng_graph_find(const eng_graph *g, const char *name, size_t len) {
  if (!g->n_slots) return -1;
  size_t mask = g->n_slots - 1;
  for (size_t h = hash_name(name, len) & mask;; h = (h + 1) & mask) {
    int v = g->slots[h];
    if (!v) return -1;
    const char *nm = g->nodes[v - 1].name;
    if (strlen(nm) == len && !memcmp(nm, name, len)) return v - 1;
  }
}

static bool index_grow(eng_graph *g) {
  size_t n_slots = g->n_slots ? g->n_slots * 2 : 64;
  int *slots = calloc(n_slots, sizeof *slots);
  if (!slots) return false;
  for (int i = 0; i < g->n; i++) {
    const char *nm = g->nodes[i].name;
    size_t h = hash_name(nm, strlen(nm)) & (n_slots - 1);
    while (slots[h]) h = (h + 1) & (n_slots - 1);
    slots[h] = i + 1;
  }
  free(g->slots);
  g->slots = slots;
  g->n_slots = n_slots;
  return true;
}

int eng_graph_add_node(eng_graph *g, const char *name, const char *op, td_err *err) {
  size_t len = strlen(name);
  if (eng_graph_find(g, name, len) >= 0) {
    td_err_set(err, TD_INVALID_ARGUMENT, "duplicate node name '%s'", name);
    return -1;
  }
  if ((size_t)(g->n + 1) * 2 > g->n_slots && !index_grow(g)) goto oom;
  if (g->n == g->cap) {
    int cap = g->cap ? g->cap * 2 : 32;
    eng_node *nodes = realloc(g->nodes, (size_t)cap * sizeof *nodes);
    if (!nodes) goto oom;
    g->nodes = nodes;
    g->cap = cap;
  }
  eng_node *nd = &g->nodes[g->n];
  memset(nd, 0, sizeof *nd);
  nd->name = dup_n(name, len);
  nd->op = strdup(op);
  if (!nd->name || !nd->op) {
    free(nd->name);
    free(nd->op);
    goto oom;
  }
  size_t mask = g->n_slots - 1;
  size_t h = hash_name(name, len) & mask;
  while (g->slots[h]) h = (h + 1) & mask;
  g->slots[h] = g->n + 1;
  return g->n++;
oom:
  td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory adding node '%s'", name);
  return -1;
}

td_code eng_graph_add_input(eng_graph *g, int node, eng_edge e, td_err *err) {
  eng_node *nd = &g->nodes[node];
  eng_edge *in = realloc(nd->in, (size_t)(nd->n_in + 1) * sizeof *in);
  if (!in) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  in[nd->n_in++] = e;
  nd->in = in;
  return TD_OK;
}

td_code eng_graph_add_ctrl(eng_graph *g, int node, int from, td_err *err) {
  eng_node *nd = &g->nodes[node];
  for (int i = 0; i < nd->n_ctrl; i++)
    if (nd->ctrl[i] == from) return TD_OK;
  int *c = realloc(nd->ctrl, (size_t)(nd->n_ctrl + 1) * sizeof *c);
  if (!c) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  c[nd->n_ctrl++] = from;
  nd->ctrl = c;
  return TD_OK;
}

eng_attr *eng_graph_add_attr(eng_graph *g, int node, const char *name) {
  eng_node *nd = &g->nodes[node];
  eng_attr *a = realloc(nd->attr, (size_t)(nd->n_attr + 1) * sizeof *a);
  if (!a) return NULL;
  nd->attr = a;
  eng_attr *at = &a[nd->n_attr];
  memset(at, 0, sizeof *at);
  at->name = strdup(name);
  if (!at->name) return NULL;
  nd->n_attr++;
  return at;
}

td_code eng_graph_add_names(eng_graph *g, int node, const char *attr, char **names, int n,
                            td_err *err) {
  eng_attr *a = eng_graph_add_attr(g, node, attr);
  if (!a) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_S;
  a->ls = calloc((size_t)(n ? n : 1), sizeof *a->ls);
  if (!a->ls) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < n; i++) {
    a->ls[i].len = strlen(names[i]);
    a->ls[i].data = strdup(names[i]);
    if (!a->ls[i].data) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    a->n++;
  }
  return TD_OK;
}

static bool copy_bytes(eng_bytes *dst, const eng_bytes *src) {
  dst->len = src->len;
  dst->data = dup_n(src->data ? src->data : "", src->len);
  return dst->data != NULL;
}

td_code eng_graph_copy_attr(eng_graph *g, int node, const eng_attr *src, td_err *err) {
  eng_attr *a = eng_graph_add_attr(g, node, src->name);
  if (!a) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  char *name = a->name;
  *a = *src;
  a->name = name;
  bool ok = true;
  switch (src->kind) {
    case ENG_ATTR_S: ok = copy_bytes(&a->s, &src->s); break;
    case ENG_ATTR_TENSOR: a->tensor = eng_tensor_share(&src->tensor); break;
    case ENG_ATTR_FUNC: ok = (a->func = strdup(src->func)) != NULL; break;
    case ENG_ATTR_LIST: {
      size_t es = 0;
      switch (src->list_kind) {
        case ENG_ATTR_S: es = sizeof(eng_bytes); break;
        case ENG_ATTR_I: es = sizeof(int64_t); break;
        case ENG_ATTR_F: es = sizeof(float); break;
        case ENG_ATTR_B: es = sizeof(bool); break;
        case ENG_ATTR_TYPE: es = sizeof(eng_dtype); break;
        case ENG_ATTR_SHAPE: es = sizeof(eng_shape); break;
        case ENG_ATTR_FUNC: es = sizeof(char *); break;
        default: es = 0; break;
      }
      a->li = NULL;
      if (src->n && es) {
        /* Zeroed, so that after a failed string copy the elements not yet
         * copied are NULL rather than pointers into src (freed twice). */
        a->li = calloc((size_t)src->n, es);
        if (!a->li) {
          a->kind = ENG_ATTR_NONE;
          ok = false;
          break;
        }
        if (src->list_kind == ENG_ATTR_S)
          for (int i = 0; i < src->n && ok; i++) ok = copy_bytes(&a->ls[i], &src->ls[i]);
        else if (src->list_kind == ENG_ATTR_FUNC)
          for (int i = 0; i < src->n && ok; i++) ok = (a->lfunc[i] = strdup(src->lfunc[i])) != NULL;
        else
          memcpy(a->li, src->li, (size_t)src->n * es);
      }
      break;
    }
    default: break;
  }
  return ok ? TD_OK : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
}

td_code eng_graph_parse_edge(const eng_graph *g, const char *ref, eng_edge *out, td_err *err) {
  if (ref[0] == '^')
    return td_err_set(err, TD_INVALID_ARGUMENT, "'%s' is a control input, not a tensor", ref);
  const char *colon = strrchr(ref, ':');
  size_t len = strlen(ref);
  long index = 0;
  if (colon) {
    char *end;
    errno = 0;
    index = strtol(colon + 1, &end, 10);
    if (colon[1] < '0' || colon[1] > '9' || *end || errno || index > 1000000)
      return td_err_set(err, TD_INVALID_ARGUMENT, "malformed tensor name '%s'", ref);
    len = (size_t)(colon - ref);
  }
  int node = eng_graph_find(g, ref, len);
  if (node < 0)
    return td_err_set(err, TD_NOT_FOUND, "tensor '%s' names no node of the graph", ref);
  if (index >= g->nodes[node].n_out)
    return td_err_set(err, TD_INVALID_ARGUMENT, "tensor '%s': node has %d outputs", ref,
                      g->nodes[node].n_out);
  *out = (eng_edge){node, (int)index};
  return TD_OK;
}

const eng_attr *eng_node_attr(const eng_node *n, const char *name) {
  for (int i = 0; i < n->n_attr; i++)
    if (!strcmp(n->attr[i].name, name)) return &n->attr[i];
  return NULL;
}

int64_t eng_node_attr_int(const eng_node *n, const char *name, int64_t dflt) {
  const eng_attr *a = eng_node_attr(n, name);
  return a && a->kind == ENG_ATTR_I ? a->i : dflt;
}

bool eng_node_attr_bool(const eng_node *n, const char *name, bool dflt) {
  const eng_attr *a = eng_node_attr(n, name);
  return a && a->kind == ENG_ATTR_B ? a->b : dflt;
}

eng_dtype eng_node_attr_type(const eng_node *n, const char *name, eng_dtype dflt) {
  const eng_attr *a = eng_node_attr(n, name);
  return a && a->kind == ENG_ATTR_TYPE ? a->type : dflt;
}

const char *eng_node_attr_func(const eng_node *n, const char *name) {
  const eng_attr *a = eng_node_attr(n, name);
  return a && a->kind == ENG_ATTR_FUNC ? a->func : NULL;
}

int eng_attr_ints(const eng_node *n, const char *name, int64_t *out, int max) {
  const eng_attr *a = eng_node_attr(n, name);
  if (!a || a->kind != ENG_ATTR_LIST || a->list_kind != ENG_ATTR_I) return 0;
  int k = a->n < max ? a->n : max;
  for (int i = 0; i < k; i++) out[i] = a->li[i];
  return a->n;
}

const char *eng_attr_str(const eng_node *n, const char *name, const char *dflt) {
  const eng_attr *a = eng_node_attr(n, name);
  return a && a->kind == ENG_ATTR_S ? a->s.data : dflt;
}

float eng_attr_float(const eng_node *n, const char *name, float dflt) {
  const eng_attr *a = eng_node_attr(n, name);
  return a && a->kind == ENG_ATTR_F ? a->f : dflt;
}

/* --- library ------------------------------------------------------------ */
struct eng_library {
  int n, cap;
  eng_function **fns;
};

eng_library *eng_library_create(void) { return calloc(1, sizeof(eng_library)); }

void eng_library_destroy(eng_library *lib) {
  if (!lib) return;
  for (int i = 0; i < lib->n; i++) {
    eng_function *f = lib->fns[i];
    free(f->name);
    eng_graph_destroy(f->body);
    free(f->rets);
    free(f->ctrl_rets);
    free(f);
  }
  free(lib->fns);
  free(lib);
}

const eng_function *eng_library_find(const eng_library *lib, const char *name) {
  if (!lib) return NULL;
  for (int i = 0; i < lib->n; i++)
    if (!strcmp(lib->fns[i]->name, name)) return lib->fns[i];
  return NULL;
}

int eng_library_count(const eng_library *lib) { return lib ? lib->n : 0; }

eng_function *eng_library_add(eng_library *lib, const char *name, td_err *err) {
  if (eng_library_find(lib, name)) {
    td_err_set(err, TD_INVALID_ARGUMENT, "duplicate function '%s'", name);
    return NULL;
  }
  if (lib->n == lib->cap) {
    int cap = lib->cap ? lib->cap * 2 : 16;
    eng_function **fns = realloc(lib->fns, (size_t)cap * sizeof *fns);
    if (!fns) goto oom;
    lib->fns = fns;
    lib->cap = cap;
  }
  eng_function *f = calloc(1, sizeof *f);
  if (!f) goto oom;
  f->name = strdup(name);
  f->body = eng_graph_create();
  if (!f->name || !f->body) {
    free(f->name);
    eng_graph_destroy(f->body);
    free(f);
    goto oom;
  }
  lib->fns[lib->n++] = f;
  return f;
oom:
  td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory adding function '%s'", name);
  return NULL;
}
