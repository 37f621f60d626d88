/* srv_tensorproto: engine tensors as TensorFlow TensorProtos, for gRPC
 * responses.
 *
 * Two layouts, as TensorFlow's Tensor::AsProtoField and
 * AsProtoTensorContent write them (TF Serving picks the second with
 * --enable_serialization_as_tensor_content):
 *   typed fields    float_val, double_val, int_val (int32, int16, int8,
 *                   uint8, uint16), int64_val, bool_val, half_val (half,
 *                   bfloat16: the 16-bit patterns), uint32_val, uint64_val,
 *                   scomplex_val / dcomplex_val (real, imaginary pairs),
 *                   string_val; every element is written;
 *   tensor_content  the raw little-endian element bytes; strings still go
 *                   in string_val.
 * plus dtype and tensor_shape (one dim per axis, no names).
 *
 * No copy where the layouts agree: float, double, int32, int64, uint32,
 * uint64 and complex values, tensor_content, and string bytes point into
 * the tensor's buffer, so the tensor must stay alive and unchanged until the
 * proto has been packed. Other types are widened into storage the
 * srv_tensorproto owns.
 *
 * Failure: UNIMPLEMENTED for dtypes a TensorProto cannot carry here
 * (resource, variant), RESOURCE_EXHAUSTED when memory runs out; the
 * srv_tensorproto is then empty and srv_tensorproto_clear is still safe.
 * No shared state: any thread. */
#ifndef SRV_TENSORPROTO_H
#define SRV_TENSORPROTO_H

#include <stdbool.h>

#include "eng_tensor.h"
#include "td_status.h"
#include "tensorflow/core/framework/tensor.pb-c.h"

typedef struct srv_tensorproto {
  Tensorflow__TensorProto proto;
  Tensorflow__TensorShapeProto shape;
  Tensorflow__TensorShapeProto__Dim dims[ENG_MAX_RANK];
  Tensorflow__TensorShapeProto__Dim *dimp[ENG_MAX_RANK];
  void *owned; /* widened values or the string_val array */
} srv_tensorproto;

td_code srv_tensorproto_encode(const eng_tensor *t, bool tensor_content, srv_tensorproto *out,
                               td_err *err);
/* Frees what encode allocated; the struct may then be encoded again. */
void srv_tensorproto_clear(srv_tensorproto *tp);

#endif
