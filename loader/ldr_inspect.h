/* ldr_inspect: `tensord inspect DIR`, a report on a SavedModel version
 * directory in the manner of `saved_model_cli show --all`: every MetaGraph's
 * tags and SignatureDefs (aliases, dtypes, shapes, tensor names, method),
 * the op census of the graph and its function library, the ops the engine
 * lacks (with a node that uses each), and what a load does: whether it
 * succeeds, and per signature the steps a request runs (and which ops they
 * are), the values folded at load and the ops fused. A signature that
 * needs an op the engine lacks, or a node its kernel refuses, fails the
 * load: the report then names that op and node.
 *
 * Reads the directory; writes only to `out`. Not for the serving path. */
#ifndef LDR_INSPECT_H
#define LDR_INSPECT_H

#include <stdio.h>

#include "td_status.h"

/* Fails (NOT_FOUND, DATA_LOSS, ...) only when saved_model.pb cannot be read;
 * a model the engine cannot load is reported, not an error. */
td_code ldr_inspect_print(const char *dir, const char *tags, FILE *out, td_err *err);

#endif
