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

#include "eng_graph.h"
#include "tensorflow/core/framework/attr_value.pb-c.h"
#include "tensorflow/core/framework/tensor.pb-c.h"
#include "tensorflow/core/framework/tensor_shape.pb-c.h"

td_code ldr_proto_shape(const Tensorflow__TensorShapeProto *p, eng_shape *out, td_err *err);
td_code ldr_proto_tensor(const Tensorflow__TensorProto *p, eng_tensor *out, td_err *err);
/* Fills a zeroed attribute (name already set) from an AttrValue. */
td_code ldr_proto_attr(const Tensorflow__AttrValue *v, eng_attr *a, td_err *err);

#endif
