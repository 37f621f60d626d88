"""Graceful drain on SIGTERM (--tensord_drain_seconds): readiness fails at
once while requests are still served, then the listeners close, requests in
flight finish, and the process exits 0 without failing any request."""
import concurrent.futures
import json
import os
import signal

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from conftest import EXAMPLES, prometheus_flag, queue_depth, wait_for

HPT = os.path.join(EXAMPLES, "half_plus_two")  # y = 0.5x + 2
SERVING, NOT_SERVING = 1, 2


def predict_request(x=(1.0, 2.0, 5.0)):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "half_plus_two"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array(x, dtype=np.float32)))
    return req


def health(ch):
    # grpc.health.v1 HealthCheckRequest {} encoded by hand; field 1 of the
    # response is the status.
    resp = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=None,
                          response_deserializer=None)(b"", timeout=10)
    return resp[1] if resp else 0


def rest_predict(s, x):
    status, out = s.json("POST", "/v1/models/half_plus_two:predict",
                         json.dumps({"instances": x}))
    assert status == 200, out
    return out["predictions"]


def test_drain_fails_readiness_and_keeps_serving(serve):
    # A long drain ended by a second signal: nothing here depends on how
    # fast the machine is.
    s = serve("half_plus_two", HPT, "--tensord_drain_seconds=600")
    ch = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
    assert s.json("GET", "/readyz")[0] == 200
    assert health(ch) == SERVING

    s.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: s.json("GET", "/readyz")[0] == 503, "/readyz to turn 503")
    status, body = s.json("GET", "/readyz")
    assert status == 503 and body["ready"] is False and body["draining"] is True
    assert health(ch) == NOT_SERVING
    # Liveness stays up and every API still answers, on new connections too
    # (urllib opens one per request).
    assert s.json("GET", "/healthz")[0] == 200
    for _ in range(5):
        assert rest_predict(s, [1.0, 2.0]) == [2.5, 3.0]
        assert list(stub.Predict(predict_request(), timeout=10).outputs["y"].float_val) == [
            2.5, 3.0, 4.5]
    assert s.json("GET", "/v1/models/half_plus_two")[0] == 200
    assert s.proc.poll() is None

    s.proc.send_signal(signal.SIGTERM)  # the second signal ends the drain
    assert s.proc.wait(timeout=30) == 0, s.output()
    ch.close()
    log = s.output()
    assert "draining" in log and "shutting down" in log


def test_drain_period_ends_by_itself(serve):
    s = serve("half_plus_two", HPT, "--tensord_drain_seconds=0.5")
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=30) == 0, s.output()
    assert "drain period over" in s.output()


def test_requests_in_flight_at_close_finish(serve, tmp_path):
    # Requests wait in the batch queue (a 3 s batch window) when the
    # listeners close; every one of them must still get its answer. They are
    # sent during the drain, as a load balancer that has not yet seen the
    # readiness change would, and the second signal follows a second later.
    cfg = tmp_path / "batching.txt"
    cfg.write_text("max_batch_size { value: 64 }\n"
                   "batch_timeout_micros { value: 3000000 }\n"
                   "num_batch_threads { value: 1 }\n")
    s = serve("half_plus_two", HPT, "--tensord_drain_seconds=600", "--enable_batching",
              f"--batching_parameters_file={cfg}", "--tensord_shutdown_grace_seconds=30",
              prometheus_flag(tmp_path))
    ch = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
    assert list(stub.Predict(predict_request(), timeout=30).outputs["y"].float_val) == [
        2.5, 3.0, 4.5]  # connected before the signal
    s.proc.send_signal(signal.SIGTERM)
    wait_for(lambda: s.json("GET", "/readyz")[0] == 503, "/readyz to turn 503")
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        grpc_calls = [pool.submit(stub.Predict, predict_request((float(i),)), 60)
                      for i in range(4)]
        rest_calls = [pool.submit(rest_predict, s, [float(i)]) for i in range(4)]
        calls = grpc_calls + rest_calls
        # Each request is either waiting in the batch or already answered.
        wait_for(lambda: queue_depth(s, "half_plus_two") + sum(f.done() for f in calls) >= 8,
                 "all 8 requests to reach the server")
        s.proc.send_signal(signal.SIGTERM)
        for i, f in enumerate(grpc_calls):
            assert list(f.result().outputs["y"].float_val) == [0.5 * i + 2]
        for i, f in enumerate(rest_calls):
            assert f.result() == [0.5 * i + 2]
    assert s.proc.wait(timeout=60) == 0, s.output()
    ch.close()
