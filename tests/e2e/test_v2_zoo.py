"""The model zoo over the v2 protocol with the stock Triton clients: every
Keras / TF2 zoo model, fed the fixture script's deterministic inputs, over
REST (JSON tensors and binary tensors) and gRPC (raw and typed contents),
compared with TensorFlow's outputs in tests/fixtures/zoo.json with the bound
test_zoo.py uses (relative error 1e-4, 1e-2 floor on the denominator)."""
import json
import os

import numpy as np
import pytest
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp

from conftest import ROOT
from test_zoo import ZOO, check, zoo_input

CASES = [(m, b) for m in sorted(ZOO) for b in (1, 8) if not (m == "mobilenet_v2" and b == 8)]


def inputs_for(entry, batch):
    return {alias: np.array(zoo_input(spec, batch), dtype=spec.get("dtype", "float32"))
            for alias, spec in entry["inputs"].items()}


def v2_type(a):
    return {"float32": "FP32", "int32": "INT32", "int64": "INT64"}[str(a.dtype)]


def check_all(entry, got, batch):
    for alias, ref in entry["outputs"].items():
        check(alias, got[alias].flatten().tolist(), ref["batch%d" % batch])


@pytest.mark.parametrize("model,batch", CASES)
def test_v2_zoo_matches_tensorflow(serve, model, batch):
    entry = ZOO[model]
    s = serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])))
    data = inputs_for(entry, batch)
    names = sorted(entry["outputs"])

    http = thttp.InferenceServerClient(f"127.0.0.1:{s.rest_port}")
    for binary in (True, False):
        ins = []
        for alias, a in data.items():
            i = thttp.InferInput(alias, list(a.shape), v2_type(a))
            i.set_data_from_numpy(a, binary_data=binary)
            ins.append(i)
        outs = [thttp.InferRequestedOutput(n, binary_data=binary) for n in names]
        r = http.infer(model, ins, outputs=outs)
        check_all(entry, {n: r.as_numpy(n) for n in names}, batch)
        for n in names:
            assert list(r.as_numpy(n).shape)[0] == batch

    grpc = tgrpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
    ins = []
    for alias, a in data.items():
        i = tgrpc.InferInput(alias, list(a.shape), v2_type(a))
        i.set_data_from_numpy(a)  # raw_input_contents
        ins.append(i)
    r = grpc.infer(model, ins)
    check_all(entry, {n: r.as_numpy(n) for n in names}, batch)
    assert r.get_response().model_version == "1"


with open(os.path.join(ROOT, "tests", "fixtures", "lowp.json")) as f:
    LOWP = json.load(f)["models"]
LOWP_BOUND = {"float16": 1e-2, "bfloat16": 3e-2}


@pytest.mark.parametrize("model", sorted(LOWP))
def test_v2_low_precision_models(serve, model):
    """Half and bfloat16 models (test_lowp.py's bound): tensord computes and
    answers in float32, and the metadata says so; answers match TensorFlow
    over REST and gRPC."""
    entry = LOWP[model]
    s = serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])))
    x = np.array(zoo_input(entry["inputs"]["x"], 1), np.float32)
    want = entry["outputs"]["output_0"]["batch1"]["values"]
    http = thttp.InferenceServerClient(f"127.0.0.1:{s.rest_port}")
    md = http.get_model_metadata(model)
    i = thttp.InferInput("x", list(x.shape), "FP32")
    i.set_data_from_numpy(x)
    r = http.infer(model, [i])
    assert r.get_output("output_0")["datatype"] == md["outputs"][0]["datatype"]
    got_http = r.as_numpy("output_0")
    gi = tgrpc.InferInput("x", list(x.shape), "FP32")
    gi.set_data_from_numpy(x)
    grpc = tgrpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
    got_grpc = grpc.infer(model, [gi]).as_numpy("output_0")
    for got in (got_http, got_grpc):
        g = got.astype(np.float64).flatten().tolist()
        assert len(g) == len(want)
        worst = max(abs(a - b) / max(abs(b), 1e-2) for a, b in zip(g, want))
        assert worst <= LOWP_BOUND[entry["weights"]], worst
