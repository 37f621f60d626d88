"""The numeric, image, layout, text and control-flow ops of the long tail,
black-box: models made by scripts/make_fixtures.py --coverage-ops (Keras
layers and tf.function / TF1 graphs that hold them) served over REST against
TensorFlow's outputs, on the CPU and through the GPU executor on the
reference device (which runs the ops it does not lower on the host)."""
import json
import os

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from conftest import FIXTURES, ROOT
from test_coverage import check_outputs
from test_zoo import zoo_input

with open(os.path.join(FIXTURES, "coverage_ops.json")) as f:
    MODELS = json.load(f)["models"]

CASES = [(m, b) for m in sorted(MODELS) for b in (1, 8)]


@pytest.mark.parametrize("device", ["cpu", "reference"])
@pytest.mark.parametrize("model,batch", CASES)
def test_op_model_matches_tensorflow(serve, model, batch, device):
    entry = MODELS[model]
    s = serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])), f"--device={device}")
    inputs = {alias: zoo_input(spec, batch) for alias, spec in entry["inputs"].items()}
    status, out = s.json("POST", f"/v1/models/{model}:predict", json.dumps({"inputs": inputs}))
    assert status == 200, out
    check_outputs(entry, out["outputs"], batch)


def test_false_assertion_answers_invalid_argument_and_the_model_keeps_serving(serve):
    # tf.debugging.assert_less guards the ids: an id past the table fails
    # that request with the assertion's message (REST 400, gRPC
    # INVALID_ARGUMENT), and the next good request is answered.
    entry = MODELS["scatter_segments"]
    s = serve("m", os.path.dirname(os.path.join(ROOT, entry["dir"])))
    good = {alias: zoo_input(spec, 2) for alias, spec in entry["inputs"].items()}
    bad = dict(good, ids=[[1, 2, 3, 4, 5], [6, 7, 99, 8, 9]])
    status, out = s.json("POST", "/v1/models/m:predict", json.dumps({"inputs": bad}))
    assert status == 400, out
    assert "assertion failed" in out["error"] and "ids must be below 23" in out["error"], out
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "m"
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.asarray(good["x"], np.float32)))
    req.inputs["ids"].CopyFrom(tf.make_tensor_proto(np.asarray(bad["ids"], np.int64)))
    with grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}") as ch:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        with pytest.raises(grpc.RpcError) as e:
            stub.Predict(req, timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "ids must be below 23" in e.value.details()
    status, out = s.json("POST", "/v1/models/m:predict", json.dumps({"inputs": good}))
    assert status == 200, out
    assert sorted(out["outputs"]) == sorted(entry["outputs"])


def test_inspect_shows_tf1_loops_lowered_to_while():
    import subprocess
    from conftest import BINARY
    d = os.path.join(ROOT, MODELS["tf1_while"]["dir"])
    out = subprocess.run([BINARY, "inspect", d], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Loading with tags 'serve': OK" in out.stdout, out.stdout
    line = next(l for l in out.stdout.splitlines() if "ops run:" in l)
    assert "While x3" in line and "Enter" not in line, line
    assert "(TF1 loop, lowered to While)" in out.stdout
    lacks = next(l for l in out.stdout.splitlines() if l.startswith("Ops the engine lacks"))
    assert "Enter" not in lacks and "LoopCond" not in lacks, lacks
