/* gRPC request bytes for every RPC the server answers: the first byte picks
 * the method's message, the rest is unpacked as srv_gcall_unpack does
 * (td_pb_unpack) and then decoded the way its handler decodes it: Predict
 * inputs into tensors, ReloadConfig into a cfg_model_config. */
#include "cfg_model_config.h"
#include "fuzz_util.h"
#include "grpc/health/v1/health.pb-c.h"
#include "ldr_proto.h"
#include "td_pbdepth.h"
#include "tensord/raw_input.pb-c.h"
#include "tensorflow_serving/apis/get_model_metadata.pb-c.h"
#include "tensorflow_serving/apis/get_model_status.pb-c.h"
#include "tensorflow_serving/apis/model_management.pb-c.h"
#include "tensorflow_serving/apis/predict.pb-c.h"

static const ProtobufCMessageDescriptor *const methods[] = {
    &tensorflow__serving__predict_request__descriptor,
    &tensord__wire__infer_request_raw__descriptor, /* Classify, Regress */
    &tensord__wire__multi_inference_request_raw__descriptor,
    &tensorflow__serving__get_model_metadata_request__descriptor,
    &tensorflow__serving__get_model_status_request__descriptor,
    &tensorflow__serving__reload_config_request__descriptor,
    &grpc__health__v1__health_check_request__descriptor,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!size) return 0;
  const ProtobufCMessageDescriptor *d = methods[data[0] % (sizeof methods / sizeof methods[0])];
  td_err err;
  ProtobufCMessage *m = td_pb_unpack(d, NULL, size - 1, data + 1, &err);
  if (!m) return 0;
  if (d == &tensorflow__serving__predict_request__descriptor) {
    const Tensorflow__Serving__PredictRequest *r = (const Tensorflow__Serving__PredictRequest *)m;
    size_t budget = (size_t)64 << 20;
    for (size_t i = 0; i < r->n_inputs; i++) {
      if (!r->inputs[i]->value) continue;
      eng_tensor t = {0};
      if (ldr_proto_tensor_bounded(r->inputs[i]->value, budget, &t, &err) == TD_OK) {
        size_t used = eng_shape_numel(&t.shape) > 0 ? eng_tensor_nbytes(&t) : 0;
        budget -= used < budget ? used : budget;
        eng_tensor_release(&t);
      }
    }
  } else if (d == &tensorflow__serving__reload_config_request__descriptor) {
    const Tensorflow__Serving__ReloadConfigRequest *r =
        (const Tensorflow__Serving__ReloadConfigRequest *)m;
    cfg_model_config c;
    if (r->config && cfg_model_config_from_proto(r->config, &c, &err) == TD_OK)
      cfg_model_config_free(&c);
  }
  protobuf_c_message_free_unpacked(m, NULL);
  return 0;
}
