/* srv_grpc: the gRPC listener on gRPC core's C API.
 *
 * For now it accepts connections and answers every call with UNIMPLEMENTED
 * and a message naming the method, so stock clients get a clean status. The
 * PredictionService and ModelService handlers plug into the same call state
 * machine (see srv_grpc.c).
 *
 * One completion queue per polling thread; each call is a small state
 * machine whose context is the tag. Shutdown follows the pattern from the
 * platform notes: shut the server down, cancel calls, and shut the queues
 * only once no call context is alive.
 *
 * Threads: create/destroy from the main thread; the polling threads are the
 * module's own. grpc_init/grpc_shutdown are the caller's. */
#ifndef SRV_GRPC_H
#define SRV_GRPC_H

#include "td_status.h"

typedef struct srv_grpc srv_grpc;

/* addr: "0.0.0.0:8500". Fails (UNAVAILABLE) when the port cannot be bound. */
td_code srv_grpc_start(const char *addr, int n_threads, srv_grpc **out, td_err *err);
int srv_grpc_port(const srv_grpc *g);
void srv_grpc_stop(srv_grpc *g);

#endif
