/* ldr_objgraph: binds variables that the restore op leaves unset, through
 * the checkpoint's object graph.
 *
 * A TF2 checkpoint stores, besides the values, the object graph of the
 * program that saved it ("_CHECKPOINTABLE_OBJECT_GRAPH": a serialized
 * TrackableObjectGraph); each variable object names its value's checkpoint
 * key and the variable's own name (`full_name`). Python's
 * tf.saved_model.load restores variables through that graph, not through
 * the graph's restore op. Some exports depend on it: a Keras 3 model passed
 * to tf.saved_model.save directly has serving functions that read the Keras
 * variables' handles (shared_name "dense/kernel", ...), while its restore op
 * assigns other handles ("Variable", "Variable_1", ...) that nothing serving
 * reads.
 *
 * ldr_objgraph_bind runs after the restore op: every VarHandleOp whose slot
 * is still unset and whose shared_name is the full_name of exactly one
 * variable object in the checkpoint gets that object's value (read with the
 * handle's dtype, and checked against its declared shape). Handles already
 * set, and checkpoints without an object graph (TF1), are left as they are;
 * a handle no object matches stays unset, and a plan that reads it fails as
 * before. Runs on the loading thread, before any plan exists. */
#ifndef LDR_OBJGRAPH_H
#define LDR_OBJGRAPH_H

#include "eng_model.h"
#include "ldr_bundle.h"

/* Sets *bound (optional) to the number of variables bound. Fails on a
 * corrupt object graph, or a value whose dtype or shape does not match the
 * handle, naming the variable. */
td_code ldr_objgraph_bind(eng_model *m, const ldr_bundle *b, int *bound, td_err *err);

#endif
