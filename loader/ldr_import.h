/* ldr_import: turns a GraphDef and its FunctionDefLibrary (protobuf-c) into
 * the engine's graph IR.
 *
 * Node inputs in both syntaxes are resolved to (node, flat output index):
 * "node:i" in the top-level graph, "node:out_arg:i" and "arg" inside
 * function bodies, the latter through the producing op's OpDef output args
 * (a list arg's length comes from its number_attr or type_list_attr). OpDefs
 * come from the MetaGraph's stripped_op_list and, for calls, from the
 * callee's signature. Attributes a TF2 export stripped because they equal
 * their defaults are filled from the same OpDefs.
 *
 * Errors name the node or function at fault (INVALID_ARGUMENT for
 * inconsistent graphs). Load-time only; not thread-safe on shared outputs. */
#ifndef LDR_IMPORT_H
#define LDR_IMPORT_H

#include "eng_graph.h"
#include "tensorflow/core/framework/graph.pb-c.h"
#include "tensorflow/core/framework/op_def.pb-c.h"

/* op_list may be NULL. On success *graph and *lib are new objects owned by
 * the caller (lib is empty when the graph has no library). */
td_code ldr_import_graph(const Tensorflow__GraphDef *gd, const Tensorflow__OpList *op_list,
                         eng_graph **graph, eng_library **lib, td_err *err);

#endif
