/* srv_grpc: TF Serving's gRPC API on gRPC core's C API.
 *
 * Services (method paths as TF Serving's):
 *   tensorflow.serving.PredictionService  Predict, GetModelMetadata,
 *                                         Classify, Regress, MultiInference
 *   tensorflow.serving.ModelService       GetModelStatus,
 *                                         HandleReloadConfigRequest
 *   inference.GRPCInferenceService        the v2 protocol (srv_v2.h): ServerLive,
 *                                         ServerReady, ServerMetadata, ModelReady,
 *                                         ModelMetadata, ModelConfig, ModelInfer,
 *                                         ModelStatistics, RepositoryIndex,
 *                                         RepositoryModelLoad/-Unload
 *   grpc.health.v1.Health                 Check ("" and the two services
 *                                         above answer SERVING, NOT_SERVING
 *                                         once srv_grpc_drain was called);
 *                                         Watch answers UNIMPLEMENTED
 * Any other method answers UNIMPLEMENTED naming it. Request semantics and
 * error messages are TF Serving's, shared with REST through srv_api and the
 * one status table; messages over 1024 characters are cut and end in
 * "...TRUNCATED" as TF Serving's are.
 *
 * Threads. One completion queue per polling thread (n_threads of them);
 * each call is a small state machine whose context is the completion tag.
 * Polling threads decode requests, resolve models and queue engine work
 * (bat_queue); engine workers run the model and encode and send the
 * response. A run whose plan is known to be short (a measured average
 * under bat_queue's run-here limit, 100 us) while an engine worker is idle
 * runs on the polling thread itself, which then answers (with batching on,
 * only while the batcher has nothing to merge it with:
 * bat_batcher_try_run_here): TF Serving runs every request on the
 * handling thread, and for a tiny model the hand-off to a worker and back
 * costs more than the run. A
 * config reload, which blocks until models load, runs on a thread of its
 * own. The client's deadline travels with the engine task: a task whose
 * deadline has passed when a worker picks it up (or before a run here)
 * is dropped and the call answers DEADLINE_EXCEEDED.
 *
 * Listening: 0.0.0.0:port (port 0: none) and, with socket_path, also
 * unix:socket_path. Messages up to INT32_MAX bytes both ways. With
 * ssl_config_file (TF Serving's SSLConfig in text format: PEM server_key,
 * server_cert, optional custom_ca, client_verify) every listener uses TLS,
 * and with client_verify clients must present a certificate signed by
 * custom_ca. channel_args is TF Serving's --grpc_channel_arguments: "k=v"
 * pairs separated by commas; a value that parses as a 32-bit integer is
 * passed as one, anything else as a string; a key given here replaces
 * tensord's default for it.
 *
 * Shutdown (srv_grpc_stop): stop accepting, cancel calls in flight, wait
 * until no call context is alive (engine tasks already queued still finish
 * and answer into cancelled calls), then shut the queues down. Stop the
 * server before destroying the bat_queue it submits to.
 *
 * start/stop from one thread (main). grpc_init/grpc_shutdown are the
 * caller's. Errors: INVALID_ARGUMENT for bad options (channel arguments, an
 * unreadable or malformed SSL config), UNAVAILABLE when a listener cannot be
 * bound. */
#ifndef SRV_GRPC_H
#define SRV_GRPC_H

#include <stdbool.h>

#include "srv_api.h"
#include "td_status.h"

typedef struct srv_grpc_options {
  int port;                    /* TCP port on 0.0.0.0; 0: no TCP listener */
  const char *socket_path;     /* NULL or "": no UNIX socket */
  const char *channel_args;    /* NULL or "": none */
  int n_threads;               /* polling threads; < 1 means 1 */
  const char *ssl_config_file; /* NULL or "": plaintext */
  bool tensor_content;         /* Predict outputs in tensor_content */
  srv_api api;                 /* copied; what it points to outlives the server */
} srv_grpc_options;

typedef struct srv_grpc srv_grpc;

td_code srv_grpc_start(const srv_grpc_options *opt, srv_grpc **out, td_err *err);
/* The bound TCP port (useful with port 0 only when a listener was asked
 * for); 0 when there is no TCP listener. */
int srv_grpc_port(const srv_grpc *g);
/* Graceful shutdown, step zero (optional): health checks answer
 * NOT_SERVING from now on; every other call is served as before.
 * Thread-safe; cannot be undone. */
void srv_grpc_drain(srv_grpc *g);
/* Graceful shutdown, step one: the server stops listening and takes no
 * new calls; calls already started finish. srv_grpc_stop follows. */
void srv_grpc_quiesce(srv_grpc *g);
void srv_grpc_stop(srv_grpc *g);

#endif
