/* gRPC Classify, Regress and MultiInference. They share TF Serving's
 * semantics with REST :classify/:regress through srv_infer, which is not in
 * the tree yet; until it is, these answer UNIMPLEMENTED. */
#include "srv_grpc_call.h"

void srv_grpc_classify(srv_gcall *c, const uint8_t *req, size_t len) {
  srv_gcall_failf(c, TD_UNIMPLEMENTED, "Classify is not implemented in tensord yet");
}

void srv_grpc_regress(srv_gcall *c, const uint8_t *req, size_t len) {
  srv_gcall_failf(c, TD_UNIMPLEMENTED, "Regress is not implemented in tensord yet");
}

void srv_grpc_multi_inference(srv_gcall *c, const uint8_t *req, size_t len) {
  srv_gcall_failf(c, TD_UNIMPLEMENTED, "MultiInference is not implemented in tensord yet");
}
