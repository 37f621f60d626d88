#include "ldr_objgraph.h"

#include <stdlib.h>
#include <string.h>

#include "tensorflow/core/protobuf/trackable_object_graph.pb-c.h"

#define OBJECT_GRAPH_KEY "_CHECKPOINTABLE_OBJECT_GRAPH"
#define VALUE_ATTRIBUTE "VARIABLE_VALUE"

typedef Tensorflow__TrackableObjectGraph objgraph;

/* The checkpoint key of the one variable object named `name` (len bytes),
 * or NULL when none is, or more than one (an ambiguous name binds nothing). */
static const char *key_for(const objgraph *g, const char *name, size_t len) {
  const char *found = NULL;
  for (size_t i = 0; i < g->n_nodes; i++) {
    const Tensorflow__TrackableObjectGraph__TrackableObject *o = g->nodes[i];
    for (size_t k = 0; k < o->n_attributes; k++) {
      const Tensorflow__TrackableObjectGraph__TrackableObject__SerializedTensor *a =
          o->attributes[k];
      if (strcmp(a->name, VALUE_ATTRIBUTE) || strlen(a->full_name) != len ||
          memcmp(a->full_name, name, len) || !*a->checkpoint_key)
        continue;
      if (found) return NULL;
      found = a->checkpoint_key;
    }
  }
  return found;
}

static bool has_key(const ldr_bundle *b, const char *key) {
  for (int i = 0; i < ldr_bundle_count(b); i++)
    if (!strcmp(ldr_bundle_key(b, i), key)) return true;
  return false;
}

/* The VarHandleOp's slot when it is still unset and has a plain shared_name
 * (no container), else -1. */
static int64_t unset_handle(eng_model *m, const eng_node *nd, int id, const eng_attr **name) {
  if (strcmp(nd->op, "VarHandleOp")) return -1;
  int64_t slot = eng_model_node_slot(m, id);
  if (slot < 0 || eng_model_slot_initialized(m, slot)) return -1;
  const eng_attr *c = eng_node_attr(nd, "container");
  if (c && c->kind == ENG_ATTR_S && c->s.len) return -1;
  *name = eng_node_attr(nd, "shared_name");
  if (!*name || (*name)->kind != ENG_ATTR_S || !(*name)->s.len) return -1;
  return slot;
}

static td_code read_objgraph(const ldr_bundle *b, objgraph **out, td_err *err) {
  eng_tensor t = {0};
  td_code rc = ldr_bundle_read(b, OBJECT_GRAPH_KEY, ENG_DT_STRING, &t, err);
  if (rc) return td_err_prefix(err, "reading the checkpoint's object graph");
  *out = NULL;
  if (eng_tensor_numel(&t) == 1) {
    const eng_str *s = eng_tensor_strs(&t);
    *out = tensorflow__trackable_object_graph__unpack(NULL, s->len, (const uint8_t *)s->data);
  }
  eng_tensor_release(&t);
  if (!*out)
    return td_err_set(err, TD_DATA_LOSS, "the checkpoint's object graph (%s) does not parse",
                      OBJECT_GRAPH_KEY);
  return TD_OK;
}

static td_code bind_one(eng_model *m, const ldr_bundle *b, const eng_node *nd, int64_t slot,
                        const char *key, td_err *err) {
  eng_dtype dt = eng_node_attr_type(nd, "dtype", ENG_DT_INVALID);
  eng_tensor v = {0};
  td_code rc = ldr_bundle_read(b, key, dt, &v, err);
  const eng_attr *shape = eng_node_attr(nd, "shape");
  if (!rc && shape && shape->kind == ENG_ATTR_SHAPE && !eng_shape_fits(&shape->shape, &v.shape))
    rc = td_err_set(err, TD_INVALID_ARGUMENT, "checkpoint value '%s' does not fit its shape", key);
  if (!rc) rc = eng_model_slot_write(m, slot, &v, err);
  eng_tensor_release(&v);
  return rc;
}

td_code ldr_objgraph_bind(eng_model *m, const ldr_bundle *b, int *bound, td_err *err) {
  if (bound) *bound = 0;
  if (!b) return TD_OK;
  const eng_graph *g = eng_model_graph(m);
  int n = eng_graph_node_count(g);
  bool any = false;
  for (int i = 0; i < n && !any; i++) {
    const eng_attr *name;
    any = unset_handle(m, eng_graph_node(g, i), i, &name) >= 0;
  }
  if (!any || !has_key(b, OBJECT_GRAPH_KEY)) return TD_OK;
  objgraph *og;
  td_code rc = read_objgraph(b, &og, err);
  if (rc) return rc;
  int count = 0;
  for (int i = 0; i < n && !rc; i++) {
    const eng_node *nd = eng_graph_node(g, i);
    const eng_attr *name;
    int64_t slot = unset_handle(m, nd, i, &name);
    if (slot < 0) continue;
    const char *key = key_for(og, name->s.data, name->s.len);
    if (!key) continue;
    rc = bind_one(m, b, nd, slot, key, err);
    if (rc)
      td_err_prefix(err, "variable '%.*s'", (int)name->s.len, name->s.data);
    else
      count++;
  }
  tensorflow__trackable_object_graph__free_unpacked(og, NULL);
  if (bound) *bound = count;
  return rc;
}
