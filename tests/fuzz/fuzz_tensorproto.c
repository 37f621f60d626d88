/* TensorProto bytes -> td_pb_unpack -> ldr_proto_tensor_bounded: the
 * decoding of every tensor a gRPC request or a warmup record carries. */
#include "fuzz_util.h"
#include "ldr_proto.h"
#include "td_pbdepth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  td_err err;
  ProtobufCMessage *m = td_pb_unpack(&tensorflow__tensor_proto__descriptor, NULL, size, data, &err);
  if (!m) return 0;
  eng_tensor t = {0};
  if (ldr_proto_tensor_bounded((Tensorflow__TensorProto *)m, (size_t)64 << 20, &t, &err) == TD_OK)
    eng_tensor_release(&t);
  protobuf_c_message_free_unpacked(m, NULL);
  return 0;
}
