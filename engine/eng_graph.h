/* eng_graph: the engine's graph IR, decoded once from a GraphDef or a
 * FunctionDef body by the loader. Nothing here knows protobuf.
 *
 * A graph is an array of nodes. A node has a name, an op name, data inputs
 * (edges: producer node index + flat output index), control inputs (node
 * indices), typed attributes, and an output count. Names are unique within a
 * graph and indexed for lookup.
 *
 * A function (eng_function) is a graph whose parameters are "_Arg" nodes
 * (attr "index"), plus the edges it returns and the nodes it must run
 * (control returns). A library holds functions by name.
 *
 * Ownership: the graph owns every string, attribute and tensor inside it.
 * Builders copy what they are given. A graph is not thread-safe while being
 * built; once built it is read-only and may be read from any thread. */
#ifndef ENG_GRAPH_H
#define ENG_GRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_tensor.h"
#include "td_status.h"

typedef enum {
  ENG_ATTR_NONE = 0,
  ENG_ATTR_S,      /* bytes */
  ENG_ATTR_I,      /* int64 */
  ENG_ATTR_F,      /* float */
  ENG_ATTR_B,      /* bool */
  ENG_ATTR_TYPE,   /* dtype */
  ENG_ATTR_SHAPE,  /* shape */
  ENG_ATTR_TENSOR, /* tensor value */
  ENG_ATTR_FUNC,   /* function name */
  ENG_ATTR_LIST,   /* list of one of the kinds above (list_kind) */
} eng_attr_kind;

typedef struct eng_bytes {
  char *data; /* NUL-terminated copy */
  size_t len;
} eng_bytes;

typedef struct eng_attr {
  char *name;
  eng_attr_kind kind;
  union {
    eng_bytes s;
    int64_t i;
    float f;
    bool b;
    eng_dtype type;
    eng_shape shape;
    eng_tensor tensor;
    char *func;
  };
  /* ENG_ATTR_LIST: list_kind is S, I, F, B, TYPE, SHAPE or FUNC (NONE for
   * an empty list), n elements in the matching array. */
  eng_attr_kind list_kind;
  int n;
  union {
    eng_bytes *ls;
    int64_t *li;
    float *lf;
    bool *lb;
    eng_dtype *ltype;
    eng_shape *lshape;
    char **lfunc;
  };
} eng_attr;

typedef struct eng_edge {
  int node;  /* producer */
  int index; /* flat output index */
} eng_edge;

typedef struct eng_node {
  char *name;
  char *op;
  int n_in;
  eng_edge *in;
  int n_ctrl;
  int *ctrl;
  int n_attr;
  eng_attr *attr;
  int n_out; /* number of outputs */
} eng_node;

typedef struct eng_graph eng_graph;

eng_graph *eng_graph_create(void);
void eng_graph_destroy(eng_graph *g);

int eng_graph_node_count(const eng_graph *g);
/* Pointers stay valid until the next eng_graph_add_node. */
eng_node *eng_graph_node(const eng_graph *g, int i);
/* Index of the node called `name` (len bytes), or -1. */
int eng_graph_find(const eng_graph *g, const char *name, size_t len);

/* Adds a node; returns its index, or -1 with INVALID_ARGUMENT for a
 * duplicate name (or RESOURCE_EXHAUSTED). */
int eng_graph_add_node(eng_graph *g, const char *name, const char *op, td_err *err);
td_code eng_graph_add_input(eng_graph *g, int node, eng_edge e, td_err *err);
td_code eng_graph_add_ctrl(eng_graph *g, int node, int from, td_err *err);
/* Adds an attribute named `name` and returns it zeroed (kind NONE) for the
 * caller to fill; NULL when out of memory. Memory the caller hangs on it
 * (strings, arrays, tensors) then belongs to the graph. */
eng_attr *eng_graph_add_attr(eng_graph *g, int node, const char *name);
/* Adds a list(string) attribute `attr` holding copies of the n names. */
td_code eng_graph_add_names(eng_graph *g, int node, const char *attr, char **names, int n,
                            td_err *err);
/* Deep-copies src into a new attribute of node (name included). */
td_code eng_graph_copy_attr(eng_graph *g, int node, const eng_attr *src, td_err *err);

/* Parses "node", "node:3" or "^node" against g. Control syntax is rejected
 * here (callers split it off). */
td_code eng_graph_parse_edge(const eng_graph *g, const char *ref, eng_edge *out, td_err *err);

/* Attribute lookup; NULL when absent. */
const eng_attr *eng_node_attr(const eng_node *n, const char *name);
int64_t eng_node_attr_int(const eng_node *n, const char *name, int64_t dflt);
bool eng_node_attr_bool(const eng_node *n, const char *name, bool dflt);
eng_dtype eng_node_attr_type(const eng_node *n, const char *name, eng_dtype dflt);
const char *eng_node_attr_func(const eng_node *n, const char *name);
/* A node's list(int) attr, into out[max]; returns the count (0 if absent). */
int eng_attr_ints(const eng_node *n, const char *name, int64_t *out, int max);
/* A node's string attr (NUL-terminated), or dflt. */
const char *eng_attr_str(const eng_node *n, const char *name, const char *dflt);
float eng_attr_float(const eng_node *n, const char *name, float dflt);

void eng_attr_free(eng_attr *a);

/* Whether fetching outputs_b[k] with inputs_b[j] fed computes, for any
 * feed values, what fetching outputs_a[k] with inputs_a[j] fed computes
 * when given the same values (eng_graph_same.c): both subgraphs are the
 * same nodes up to their names (the "_class" colocation attribute aside),
 * reading the same state (the same variable, handle or table nodes: a
 * node without data inputs other than a Const or NoOp pairs only with
 * itself),
 * down to the fed nodes, which are single-output
 * nodes of the same op and attributes paired by position. Names are
 * "node" or "node:index". False whenever that cannot be shown: a
 * difference, a name not in g, a node fed on one side only, TF1 loop or
 * branch primitives in the way (their cycles are not compared), or out of
 * memory. Linear in the nodes both subgraphs reach. */
bool eng_graph_same_values(const eng_graph *g, int n_inputs, const char *const *inputs_a,
                           const char *const *inputs_b, int n_outputs,
                           const char *const *outputs_a, const char *const *outputs_b);

/* --- functions ---------------------------------------------------------- */
typedef struct eng_function {
  char *name;
  eng_graph *body;
  int n_args;
  int n_rets;
  eng_edge *rets; /* in the order of the signature's output args */
  int n_ctrl_rets;
  int *ctrl_rets;
} eng_function;

typedef struct eng_library eng_library;

eng_library *eng_library_create(void);
void eng_library_destroy(eng_library *lib);
/* Adds an empty function named `name` (body created) and returns it, or NULL
 * (duplicate name or out of memory; err says which). */
eng_function *eng_library_add(eng_library *lib, const char *name, td_err *err);
const eng_function *eng_library_find(const eng_library *lib, const char *name);
int eng_library_count(const eng_library *lib);

#endif
