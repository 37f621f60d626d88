"""The v2 model repository extension over REST and gRPC with the stock
Triton clients: index, unload and load mapped onto the lifecycle manager,
while another model keeps serving without a single failed request."""
import json
import os
import threading

import numpy as np
import pytest
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from tritonclient.utils import InferenceServerException

from conftest import EXAMPLES, MODELS, ROOT

HPT = os.path.join(EXAMPLES, "half_plus_two")
MLP = os.path.join(ROOT, "tests", "fixtures", "models", "zoo", "mlp")
TF1 = os.path.join(MODELS, "half_plus_two_tf1")


@pytest.fixture
def two(serve, tmp_path):
    cfg = tmp_path / "models.config"
    cfg.write_text(
        "model_config_list {\n"
        f"  config {{ name: 'hpt' base_path: '{HPT}' model_platform: 'tensorflow' }}\n"
        f"  config {{ name: 'mlp' base_path: '{MLP}' model_platform: 'tensorflow'\n"
        "           version_labels { key: 'stable' value: 1 } }\n"
        "}\n")
    s = serve("unused", HPT, f"--model_config_file={cfg}")
    return (s, thttp.InferenceServerClient(f"127.0.0.1:{s.rest_port}"),
            tgrpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}"))


class Hammer:
    """Infers on hpt over gRPC from a thread until stopped; counts failures."""

    def __init__(self, port):
        self.client = tgrpc.InferenceServerClient(f"127.0.0.1:{port}")
        self.stop = threading.Event()
        self.ok = 0
        self.failures = []
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        i = tgrpc.InferInput("x", [2], "FP32")
        i.set_data_from_numpy(np.array([1.0, 2.0], np.float32))
        while not self.stop.is_set():
            try:
                r = self.client.infer("hpt", [i])
                assert r.as_numpy("y").tolist() == [2.5, 3.0]
                self.ok += 1
            except Exception as e:  # noqa: BLE001 - every failure is recorded
                self.failures.append(repr(e))

    def finish(self):
        self.stop.set()
        self.thread.join()
        return self.ok, self.failures


def mlp_ready(h):
    return h.is_model_ready("mlp")


def test_index_unload_load_while_another_serves(two):
    s, h, g = two
    assert h.get_model_repository_index() == [
        {"name": "hpt", "version": "123", "state": "READY", "reason": ""},
        {"name": "mlp", "version": "1", "state": "READY", "reason": ""}]
    hammer = Hammer(s.grpc_port)
    try:
        h.unload_model("mlp")
        assert not mlp_ready(h)
        idx = h.get_model_repository_index()
        assert {"name": "mlp", "state": "UNAVAILABLE", "reason": "unloaded"} in idx
        assert [m["name"] for m in g.get_model_repository_index(as_json=True)["models"]] == \
            ["hpt", "mlp"]
        status, _, raw = s.request("POST", "/v2/repository/index", '{"ready": true}')
        assert status == 200 and [m["name"] for m in json.loads(raw)] == ["hpt"]
        assert [m.name for m in g.get_model_repository_index().models] == ["hpt", "mlp"]
        # the unloaded model answers as TF Serving does for an unknown one
        status, out = s.json("GET", "/v1/models/mlp")
        assert status == 404
        g.load_model("mlp")  # back from memory: its base path and labels
        assert mlp_ready(h)
        status, out = s.json("POST", "/v1/models/mlp/labels/stable:predict",
                             json.dumps({"instances": [[0.0] * 784]}))
        assert status == 200, out
        g.unload_model("mlp")
        assert not g.is_model_ready("mlp")
        h.load_model("mlp")
        assert g.is_model_ready("mlp")
    finally:
        ok, failures = hammer.finish()
    assert not failures, failures[:3]
    assert ok > 0


def test_load_new_model_by_base_path_and_errors(two):
    s, h, g = two
    with pytest.raises(InferenceServerException) as e:
        h.load_model("tf1")
    assert e.value.status() == "404" and "not in the model repository" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        g.load_model("tf1")
    assert e.value.status() == "StatusCode.NOT_FOUND"
    status, _, raw = s.request("POST", "/v2/repository/models/tf1/load",
                               json.dumps({"parameters": {"base_path": TF1}}))
    assert status == 200, raw
    assert h.is_model_ready("tf1")
    assert [m["name"] for m in h.get_model_repository_index()] == ["hpt", "mlp", "tf1"]
    # a base path with no loadable version: the load reports the manager's
    # verdict (UNKNOWN, 500), and the model goes back out of the config, so
    # the server stays ready
    status, _, raw = s.request("POST", "/v2/repository/models/bad/load",
                               json.dumps({"parameters": {"base_path": "/nonexistent"}}))
    assert status == 500, raw
    assert "1 model(s) did not become available" in json.loads(raw)["error"]
    assert {"name": "bad", "state": "UNAVAILABLE", "reason": "unloaded"} in \
        h.get_model_repository_index()
    assert h.is_server_ready()
    with pytest.raises(InferenceServerException) as e:
        h.unload_model("never")
    assert e.value.status() == "404"
    status, _, raw = s.request("POST", "/v2/repository/models/x/load", "[1]")
    assert status == 400 and json.loads(raw)["error"] == "the request body must be a JSON object"
    # everything else still serves
    assert h.is_model_ready("hpt") and h.is_model_ready("mlp")
