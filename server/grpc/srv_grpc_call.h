/* srv_grpc_call: the contract between the gRPC call machine (srv_grpc.c)
 * and the method handlers (srv_grpc_predict.c, srv_grpc_model.c,
 * srv_grpc_infer.c, srv_grpc_v2.c, srv_grpc_v2infer.c). Private to
 * server/grpc/.
 *
 * The machine accepts a call, reads its one request message and hands the
 * serialized bytes to the method's handler on a polling (completion-queue)
 * thread. The handler decodes them, and then either answers at once (also
 * after a model run taken on this thread) or queues engine work whose done()
 * callback answers from an engine worker.
 * gRPC types stay in srv_grpc.c: handlers see protobuf-c messages, td_err
 * and srv_call only.
 *
 * Rules for handlers:
 *   - Answer exactly once, with srv_gcall_reply or srv_gcall_fail, from any
 *     thread. After that call the handler must not touch the srv_gcall: the
 *     machine may free it at once on another thread.
 *   - The request bytes are valid only during the handler call.
 *   - What must outlive the answer is released by the machine when it
 *     frees the call, after the response is on its way: first `cleanup`
 *     (when set; per-method state), then srv_call_end(&call) (the servable
 *     reference and the tensors a response was packed from; a no-op on the
 *     zeroed srv_call of a handler that made no engine call).
 *   - Never block on a polling thread: it also drives gRPC's network I/O.
 *     Model runs go through srv_call_try_run_here (which takes only runs
 *     known to be short, and answers on this thread) or srv_call_submit.
 *     Blocking work (a config reload) gets its own thread. */
#ifndef SRV_GRPC_CALL_H
#define SRV_GRPC_CALL_H

#include <protobuf-c/protobuf-c.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "srv_api.h"
#include "td_status.h"
#include "tensorflow_serving/apis/model.pb-c.h"

/* Server-wide settings handlers read. */
typedef struct srv_grpc_config {
  bool tensor_content;  /* --enable_serialization_as_tensor_content */
  atomic_bool draining; /* srv_grpc_drain: health checks answer NOT_SERVING */
} srv_grpc_config;

typedef struct srv_gcall srv_gcall;
struct srv_gcall {
  srv_api *api;
  const srv_grpc_config *cfg;
  uint64_t deadline_ns; /* the client's deadline on td_now_ns()'s clock; 0 = none */
  srv_call call;        /* zeroed; for the handler's engine call */
  void *state;          /* the handler's own */
  void (*cleanup)(srv_gcall *c);
};

typedef void (*srv_gmethod_fn)(srv_gcall *c, const uint8_t *req, size_t len);

/* Packs `msg` and answers OK with it. If packing fails (out of memory) the
 * call answers RESOURCE_EXHAUSTED instead. */
void srv_gcall_reply(srv_gcall *c, const ProtobufCMessage *msg);
/* Answers with e's code and message (cut at 1024 characters with
 * "...TRUNCATED" appended, as TF Serving does). */
void srv_gcall_fail(srv_gcall *c, const td_err *e);
/* The end of a handler that prepared a model call in c->call: frees the
 * request message `req` (srv_gcall_free), then answers with *err when rc is
 * set; else runs the call with the client's deadline, answering through
 * `done` (which must answer c): on this polling thread when
 * srv_call_try_run_here takes it, else from an engine worker. A call that
 * cannot be queued is answered with the error here. */
void srv_gcall_run(srv_gcall *c, ProtobufCMessage *req, td_code rc, const td_err *err,
                   void (*done)(srv_call *call));
void srv_gcall_failf(srv_gcall *c, td_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Unpacks a request into memory of the call (a small arena, then malloc)
 * through td_pb_unpack; on failure answers INTERNAL as gRPC's C++ servers
 * do for bytes that are not the method's message (INVALID_ARGUMENT for
 * messages nested past TD_PB_MAX_DEPTH), and returns NULL. Release the message with
 * srv_gcall_free (never with a NULL allocator) before answering, or it
 * leaks what did not fit the arena. One request message per call. */
ProtobufCMessage *srv_gcall_unpack(srv_gcall *c, const ProtobufCMessageDescriptor *desc,
                                   const uint8_t *req, size_t len);
void srv_gcall_free(srv_gcall *c, ProtobufCMessage *msg);

/* ModelSpec <-> srv_model_spec (srv_grpc_model.c). A NULL ms gives an
 * empty spec (callers that require one check first). Strings point into
 * ms. */
void srv_gspec_from_proto(const Tensorflow__Serving__ModelSpec *ms, srv_model_spec *out);

/* A response ModelSpec, as TF Serving's MakeModelSpec: name, version, and
 * the signature name when `signature` is non-NULL ("" becomes
 * "serving_default"). Strings are borrowed. */
typedef struct srv_gspec {
  Tensorflow__Serving__ModelSpec spec;
  Google__Protobuf__Int64Value version;
} srv_gspec;
void srv_gspec_make(srv_gspec *o, const char *name, int64_t version, const char *signature);

/* Handlers, one per RPC. */
void srv_grpc_predict(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_get_model_metadata(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_get_model_status(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_reload_config(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_health_check(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_classify(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_regress(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_multi_inference(srv_gcall *c, const uint8_t *req, size_t len);
/* inference.GRPCInferenceService (v2): srv_grpc_v2.c, srv_grpc_v2infer.c. */
void srv_grpc_v2_server_live(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_server_ready(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_server_metadata(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_model_ready(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_model_metadata(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_model_config(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_model_infer(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_model_statistics(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_repository_index(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_repository_load(srv_gcall *c, const uint8_t *req, size_t len);
void srv_grpc_v2_repository_unload(srv_gcall *c, const uint8_t *req, size_t len);

#endif
