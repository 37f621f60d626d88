/* ldr_servable: one model version loaded from a SavedModel directory and
 * ready to serve.
 *
 * ldr_servable_load does what TF Serving's SavedModel loader does, without
 * TensorFlow: read saved_model.pb, pick the MetaGraph whose tag set equals
 * the requested tags, import its graph and function library, open the
 * checkpoint (variables/variables), bind variables by running the graph's own
 * restore op with the checkpoint prefix fed (plus asset paths), run the init
 * op (__saved_model_init_op, saved_model_main_op or legacy_init_op), and
 * compile one plan per signature. Signatures that compute the same, input
 * and output by position in alias order (a Keras export's "serve" and
 * "serving_default" call one function), share one plan, built once, owned
 * by serving_default when it is one of them. Errors from a shared plan
 * (a feed of the wrong dtype or shape) name its owner's input tensors.
 *
 * Failure: a missing or unparsable saved_model.pb, a corrupt checkpoint, a
 * variable the checkpoint lacks, an op the engine lacks on the default
 * signature's path: each fails the load with a message naming the file or
 * node and the problem. A non-default signature that cannot be compiled does
 * not fail the load; it keeps its error and answers requests with it.
 *
 * Lifetime: reference counted. The creator holds one reference; every
 * request holds one while it runs (ldr_servable_ref/unref, thread-safe). The
 * last unref frees the model and its memory. Everything reachable from a
 * servable is read-only after load. */
#ifndef LDR_SERVABLE_H
#define LDR_SERVABLE_H

#include <stdint.h>

#include "eng_model.h"
#include "ldr_signature.h"
#include "td_status.h"

typedef struct ldr_servable ldr_servable;

/* tags: comma-separated ("serve"). */
td_code ldr_servable_load(const char *dir, int64_t version, const char *tags, ldr_servable **out,
                          td_err *err);
void ldr_servable_ref(ldr_servable *s);
void ldr_servable_unref(ldr_servable *s);
/* The current reference count (a snapshot): lets the owner of the last
 * long-lived reference see when every request holding the servable is done. */
int ldr_servable_refs(const ldr_servable *s);

int64_t ldr_servable_version(const ldr_servable *s);
/* Bytes of the variables restored from the version's checkpoint (weights
 * frozen into the graph as constants are not counted). */
uint64_t ldr_servable_variable_bytes(const ldr_servable *s);
/* The weights the loaded version holds: variables, packed layouts, and
 * the originals of packed weights still held beside them (the load frees
 * those that only their packed form needs; eng_model.h). */
eng_weight_stats ldr_servable_weight_stats(const ldr_servable *s);
const char *ldr_servable_path(const ldr_servable *s);
int ldr_servable_signature_count(const ldr_servable *s);
/* Signatures sorted by key. */
const ldr_signature *ldr_servable_signature_at(const ldr_servable *s, int i);
/* NULL when the servable has no signature with this key. */
const ldr_signature *ldr_servable_signature(const ldr_servable *s, const char *key);

#endif
