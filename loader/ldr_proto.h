/* ldr_proto: converts TensorFlow's wire structs (protobuf-c) into engine
 * values: TensorProto -> eng_tensor, TensorShapeProto -> eng_shape,
 * AttrValue -> eng_attr. Used by the SavedModel importer and by transports
 * that receive TensorProtos; nothing past these edges sees protobuf.
 *
 * TensorProto decoding follows TensorFlow: tensor_content when present
 * (not for strings), else the typed repeated field, where fewer values than
 * the shape needs repeat the last one and none means zeros. Values that do
 * not fit the shape are INVALID_ARGUMENT naming the count.
 *
 * float16 and bfloat16 are widened to float32 here, in tensors and in type
 * attributes (T, dtype, DstT, ...): a model with low-precision weights
 * becomes a float32 graph at load, and computes in float32. Pure functions,
 * thread-safe. */
#ifndef LDR_PROTO_H
#define LDR_PROTO_H

#include <stdbool.h>

#include "eng_graph.h"
#include "tensorflow/core/framework/attr_value.pb-c.h"
#include "tensorflow/core/framework/tensor.pb-c.h"
#include "tensorflow/core/framework/tensor_shape.pb-c.h"

td_code ldr_proto_shape(const Tensorflow__TensorShapeProto *p, eng_shape *out, td_err *err);
td_code ldr_proto_tensor(const Tensorflow__TensorProto *p, eng_tensor *out, td_err *err);

/* What a TensorProto would decode to, found without allocating: everything
 * that can be refused from the proto alone (shape, dtype, a tensor_content
 * length other than the shape's, more values than elements) is refused
 * here, so a few bytes declaring a huge shape never reach an allocation.
 * ldr_proto_tensor runs it first. */
typedef struct ldr_proto_info {
  eng_dtype dtype; /* as sent: not yet widened, refs as their base type */
  bool is_ref;     /* the DataType was a _REF one */
  eng_shape shape;
  int64_t numel;
  size_t bytes; /* the decoded tensor's size (after widening), saturating */
  bool filled;  /* fewer values than elements: the last repeats (or zeros) */
} ldr_proto_info;
td_code ldr_proto_tensor_peek(const Tensorflow__TensorProto *p, ldr_proto_info *info, td_err *err);

/* For TensorProtos from requests: ldr_proto_tensor, but RESOURCE_EXHAUSTED
 * (naming the sizes) when the tensor would take more than max_bytes, or
 * more than LDR_PROTO_MAX_FILL_BYTES built by repeating fewer values than
 * it has elements (TensorFlow's compressed form, which lets a few bytes
 * declare any size). Model constants are not bounded this way: TensorFlow
 * writes large constants in that form itself. */
#define LDR_PROTO_MAX_FILL_BYTES (4 << 20)
td_code ldr_proto_tensor_bounded(const Tensorflow__TensorProto *p, size_t max_bytes,
                                 eng_tensor *out, td_err *err);
/* Fills a zeroed attribute (name already set) from an AttrValue. */
td_code ldr_proto_attr(const Tensorflow__AttrValue *v, eng_attr *a, td_err *err);

#endif
