/* ldr_savedmodel: reads a version directory's SavedModel file, binary
 * (saved_model.pb) or text (saved_model.pbtxt), into the protobuf-c
 * message. The binary file wins when both exist, as in TensorFlow.
 *
 * Text files go through config/'s text-format parser, skipping fields the
 * project's own .proto files leave out (protobuf's binary parser skips them
 * the same way). Errors: NOT_FOUND when neither file exists; DATA_LOSS for
 * a file that does not parse (truncated, still being written, or corrupt),
 * with the parser's line and column for text; INVALID_ARGUMENT for a
 * SavedModel with no MetaGraph, or a file over 2 GiB; RESOURCE_EXHAUSTED
 * for a binary file whose messages nest past TD_PB_MAX_DEPTH (checked
 * before protobuf-c recurses). Thread-safe. */
#ifndef LDR_SAVEDMODEL_H
#define LDR_SAVEDMODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "td_status.h"
#include "tensorflow/core/protobuf/saved_model.pb-c.h"

/* *out: free with tensorflow__saved_model__free_unpacked (binary) or
 * protobuf_c_message_free_unpacked (either): use ldr_savedmodel_free. *bytes
 * (optional) gets the file's size, *text (optional) whether it was text. */
td_code ldr_savedmodel_read(const char *dir, Tensorflow__SavedModel **out, size_t *bytes, bool *text,
                        td_err *err);
void ldr_savedmodel_free(Tensorflow__SavedModel *sm);

#endif
