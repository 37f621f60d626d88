"""The keras.applications zoo against TensorFlow, black-box: every model that
`scripts/make_fixtures.py --applications DIR` made (one member of every
family, random weights, smallest input) served by one build/tensord from one
model_config_list, asked over REST and over gRPC (the stock
tensorflow-serving-api client) for the batch of 2 TensorFlow answered, and
inspected with `tensord inspect`.

Bound, per element: |got - want| <= max(1e-4 * |want|, 1e-5 * S), S the
largest |want| of the output: 1e-4 relative, or, for elements near zero,
1e-5 absolute in units of the output's magnitude. (A fixed absolute bound
fits no zoo: NASNetMobile's logits reach 37, where TensorFlow with and
without oneDNN, or at batch 1 and 2, differs from itself by 2e-5 to 3e-5;
VGG16's stay below 1e-3.) DIR comes from
TENSORD_APPLICATIONS_DIR (scripts/test.d/55-applications.sh sets it); the
worst errors per model go to DIR/errors.json for docs/models.md."""
import json
import os
import subprocess
import re
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "e2e"))
from conftest import BINARY, Server  # noqa: E402

DIR = os.environ.get("TENSORD_APPLICATIONS_DIR", "")
if not DIR or not os.path.exists(os.path.join(DIR, "applications.json")):
    raise RuntimeError("TENSORD_APPLICATIONS_DIR must name a directory made by "
                       "scripts/make_fixtures.py --applications (found %r)" % DIR)
with open(os.path.join(DIR, "applications.json")) as f:
    MODELS = json.load(f)["models"]
NAMES = sorted(MODELS)
ERRORS = {}
# Every version loads before tensord opens its ports; many large networks on
# a loaded 2-core box take minutes, so the wait is generous (it ends as soon
# as the REST port opens).
LOAD_DEADLINE_S = 1800


class ZooServer(Server):
    def _wait_ready(self, timeout=LOAD_DEADLINE_S):
        return super()._wait_ready(timeout)


def io(name):
    with np.load(os.path.join(DIR, name, "io.npz")) as z:
        return z["input"], z["output"]


def worst(got, want):
    got = np.asarray(got, dtype=np.float64).reshape(want.shape)
    want = want.astype(np.float64)
    err = np.abs(got - want)
    bound = np.maximum(1e-4 * np.abs(want), 1e-5 * float(np.abs(want).max()))
    # Relative error where the reference is not near zero (1e-3 and up).
    big = np.abs(want) >= 1e-3
    rel = float((err[big] / np.abs(want[big])).max(initial=0.0))
    return float(err.max()), rel, float((err / bound).max())


def record(name, api, got, want):
    abs_err, rel_err, ratio = worst(got, want)
    ERRORS.setdefault(name, {})[api] = {"max_abs": abs_err, "max_rel": rel_err,
                                        "max_over_bound": ratio,
                                        "max_abs_output": float(np.abs(want).max())}
    assert ratio <= 1.0, (name, api, "worst element at %.3g x the bound" % ratio,
                          ERRORS[name][api])


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    cfg = tmp_path_factory.mktemp("applications") / "models.config"
    cfg.write_text("model_config_list {\n" + "".join(
        "  config { name: '%s' base_path: '%s' model_platform: 'tensorflow' }\n" %
        (n, os.path.join(DIR, n)) for n in NAMES) + "}\n")
    s = ZooServer("unused", "/unused", ["--model_config_file=%s" % cfg,
                                        "--max_num_load_retries=0"])
    yield s
    s.stop()
    with open(os.path.join(DIR, "errors.json"), "w") as f:
        json.dump(ERRORS, f, indent=1, sort_keys=True)
        f.write("\n")
    assert s.proc.returncode == 0, "tensord did not exit cleanly:\n" + s.output()


def available(s, name):
    status, out = s.json("GET", "/v1/models/%s" % name)
    assert status == 200, out
    states = {v["version"]: v for v in out["model_version_status"]}
    v = states.get("1")
    assert v and v["state"] == "AVAILABLE", (name, out)


@pytest.mark.parametrize("name", NAMES)
def test_rest_predict_matches_tensorflow(server, name):
    available(server, name)
    x, want = io(name)
    entry = MODELS[name]
    body = json.dumps({"inputs": {entry["input"]: x.tolist()}})
    status, out = server.json("POST", "/v1/models/%s:predict" % name, body)
    assert status == 200, out
    record(name, "rest", out["outputs"], want)


@pytest.fixture(scope="module")
def grpc_stub(server):
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc
    ch = grpc.insecure_channel("127.0.0.1:%d" % server.grpc_port,
                               options=[("grpc.max_receive_message_length", 64 << 20)])
    grpc.channel_ready_future(ch).result(timeout=60)
    yield prediction_service_pb2_grpc.PredictionServiceStub(ch)
    ch.close()


@pytest.mark.parametrize("name", NAMES)
def test_grpc_predict_matches_tensorflow(server, grpc_stub, name):
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    available(server, name)
    x, want = io(name)
    entry = MODELS[name]
    req = predict_pb2.PredictRequest()
    req.model_spec.name = name
    req.model_spec.signature_name = "serving_default"
    req.inputs[entry["input"]].CopyFrom(tf.make_tensor_proto(x))
    resp = grpc_stub.Predict(req, timeout=300)
    assert list(resp.outputs) == [entry["output"]]
    got = tf.make_ndarray(resp.outputs[entry["output"]])
    assert got.dtype == np.float32 and got.shape == want.shape, (got.dtype, got.shape)
    record(name, "grpc", got, want)


# The checkpoint-writing ops only the SavedModel's save function holds: a
# server never runs them (TF Serving neither), and inspect lists them as
# lacking with that note. Any other lacking op fails the test.
SAVE_ONLY = {"SaveV2", "MergeV2Checkpoints", "ShardedFilename"}


@pytest.mark.parametrize("name", NAMES)
def test_inspect_finds_every_op_the_signature_runs(name):
    out = subprocess.run([BINARY, "inspect", os.path.join(DIR, name, "1")], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    lacks = next(line for line in lines if line.startswith("Ops the engine lacks:"))
    lacking = set(re.findall(r"(\w+) \(e\.g\. node", lacks))
    assert lacking <= SAVE_ONLY, lacks
    assert "Loading with tags 'serve': OK" in lines, out.stdout[-4000:]
    sig = [line.split() for line in lines if line.startswith("  serving_default ")]
    # "serving_default  N steps per request, ..." (not "not servable: ...")
    assert sig and sig[0][1].isdigit() and sig[0][2:5] == ["steps", "per", "request,"], sig
