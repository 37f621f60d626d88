"""The statistics extension and the metrics page read one set of counters:
per model version success / failure counts and times, rows, executions and
the queue / compute split, whatever API asked (v2 REST and gRPC, TF
Serving's REST and gRPC). Read with the stock tritonclient and a plain
scrape of the Prometheus page.

Counts are final when a client holds its answer (a run is recorded before
its answer is written), so they are read right after the requests, without
waiting. Times are checked only for what the server guarantees (a batch
with a timeout waits at least that long in the queue), never for speed."""
import json
import os
import re

import grpc
import numpy as np
import pytest
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from conftest import EXAMPLES

HPT = os.path.join(EXAMPLES, "half_plus_two")
TIMEOUT_US = 100000  # the batch timeout: a lone request waits this long in the queue
PHASES = ("queue", "compute_input", "compute_infer", "compute_output")
FAMILIES = {
    "success": "tensord_inference_request_success_total",
    "fail": "tensord_inference_request_failure_total",
    "inference_count": "tensord_inference_count_total",
    "execution_count": "tensord_inference_exec_count_total",
    "success_ns": "tensord_inference_request_duration_total",
    "queue_ns": "tensord_inference_queue_duration_total",
    "compute_input_ns": "tensord_inference_compute_input_duration_total",
    "compute_infer_ns": "tensord_inference_compute_infer_duration_total",
    "compute_output_ns": "tensord_inference_compute_output_duration_total",
}


@pytest.fixture
def batched(serve, tmp_path):
    mon = tmp_path / "monitoring.txt"
    mon.write_text('prometheus_config { enable: true path: "/metrics" }\n')
    bp = tmp_path / "batching.txt"
    bp.write_text(f"max_batch_size {{ value: 32 }} batch_timeout_micros {{ value: {TIMEOUT_US} }}\n")
    s = serve("hpt", HPT, f"--monitoring_config_file={mon}", "--enable_batching",
              f"--batching_parameters_file={bp}")
    return (s, thttp.InferenceServerClient(f"127.0.0.1:{s.rest_port}"),
            tgrpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}"))


def scrape(s):
    status, _, body = s.request("GET", "/metrics")
    assert status == 200
    out = {}
    for key, fam in FAMILIES.items():
        m = re.search(rf'^{fam}\{{model_name="hpt",version="123"\}} (\d+)$', body.decode(), re.M)
        out[key] = int(m.group(1)) if m else None
    return out


def send_every_api(s, h, g):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    i = thttp.InferInput("x", [3], "FP32")
    i.set_data_from_numpy(x, binary_data=True)
    assert list(h.infer("hpt", [i]).as_numpy("y")) == [2.5, 3.0, 3.5]
    gi = tgrpc.InferInput("x", [2], "FP32")
    gi.set_data_from_numpy(x[:2])
    assert list(g.infer("hpt", [gi]).as_numpy("y")) == [2.5, 3.0]
    status, body = s.json("POST", "/v1/models/hpt:predict", json.dumps({"instances": [1.0]}))
    assert status == 200 and body["predictions"] == [2.5]
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "hpt"
    t = req.inputs["x"]
    t.dtype = 1  # DT_FLOAT
    t.tensor_shape.dim.add().size = 4
    t.float_val.extend([4.0, 5.0, 6.0, 7.0])
    with grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}") as ch:
        resp = prediction_service_pb2_grpc.PredictionServiceStub(ch).Predict(req, timeout=30)
    assert list(resp.outputs["y"].float_val) == [4.0, 4.5, 5.0, 5.5]
    return 4, 3 + 2 + 1 + 4  # runs, rows


def test_stats_and_metrics_are_one_set_of_counters(batched):
    s, h, g = batched
    before = h.get_inference_statistics("hpt")["model_stats"][0]
    assert before["execution_count"] == 0
    runs, rows = send_every_api(s, h, g)
    st = h.get_inference_statistics("hpt", "123")["model_stats"][0]
    inf = st["inference_stats"]
    assert st["execution_count"] == runs and st["inference_count"] == rows
    assert inf["success"]["count"] == runs and inf["fail"]["count"] == 0
    for p in PHASES:
        assert inf[p]["count"] == runs, p
    # Every request waited for the batch timeout: a batch of one leaves
    # only then (libuv timers have millisecond resolution: allow 1 ms).
    assert inf["queue"]["ns"] >= runs * (TIMEOUT_US - 1000) * 1000, inf
    assert inf["compute_infer"]["ns"] > 0 and inf["compute_input"]["ns"] > 0
    assert inf["compute_output"]["ns"] == 0  # not measured apart (documented)
    parts = sum(inf[p]["ns"] for p in PHASES)
    assert parts <= inf["success"]["ns"], (parts, inf)

    # gRPC statistics: the same numbers.
    gs = g.get_inference_statistics("hpt", "123").model_stats[0]
    assert gs.execution_count == runs and gs.inference_count == rows
    assert gs.inference_stats.queue.ns == inf["queue"]["ns"]
    assert gs.inference_stats.compute_infer.ns == inf["compute_infer"]["ns"]
    assert gs.inference_stats.success.ns == inf["success"]["ns"]

    # The metrics page: the very counters the statistics read.
    m = scrape(s)
    assert m == {"success": runs, "fail": 0, "inference_count": rows, "execution_count": runs,
                 "success_ns": inf["success"]["ns"], "queue_ns": inf["queue"]["ns"],
                 "compute_input_ns": inf["compute_input"]["ns"],
                 "compute_infer_ns": inf["compute_infer"]["ns"], "compute_output_ns": 0}, m


def test_stats_without_metrics_page(serve):
    """The statistics count with the metrics page off too (no monitoring
    config): the counters are the same, only the page is not served."""
    s = serve("hpt", HPT)
    h = thttp.InferenceServerClient(f"127.0.0.1:{s.rest_port}")
    x = np.array([1.0, 2.0], np.float32)
    i = thttp.InferInput("x", [2], "FP32")
    i.set_data_from_numpy(x)
    h.infer("hpt", [i])
    h.infer("hpt", [i])
    inf = h.get_inference_statistics("hpt")["model_stats"][0]["inference_stats"]
    assert inf["success"]["count"] == 2 and inf["compute_infer"]["count"] == 2
    assert inf["compute_infer"]["ns"] > 0
    assert sum(inf[p]["ns"] for p in PHASES) <= inf["success"]["ns"]
    status, _, _ = s.request("GET", "/metrics")
    assert status == 404
