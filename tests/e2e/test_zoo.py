"""The model zoo served over REST: each Keras / TF2 model from
tests/fixtures/models/zoo, fed the fixture script's deterministic inputs
through the columnar "inputs" object form (every input by name), compared
with TensorFlow's outputs in tests/fixtures/zoo.json. Bound: relative error
1e-4 with a 1e-2 floor on the denominator, as in tests/loader/test_ldr_zoo.c."""
import json
import os
import struct

import pytest

from conftest import FIXTURES, ROOT

with open(os.path.join(FIXTURES, "zoo.json")) as f:
    ZOO = json.load(f)["models"]


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def zoo_input(spec, batch):
    """scripts/make_fixtures.py zoo_input(), in plain Python: the double
    division and subtraction round to the same float32 (double rounding is
    innocuous for one basic operation at 53 >= 2*24+2 bits)."""
    shape = [batch] + spec["shape"]
    n = 1
    for d in shape:
        n *= d
    last = shape[-1]
    if spec["gen"] == "float":
        flat = [f32(f32(((i * 7919 + spec["seed"]) % 2001) / 1000.0) - 1.0) for i in range(n)]
    elif spec["gen"] == "int":
        flat = [(i * 31 + spec["seed"]) % spec["mod"] for i in range(n)]
    elif spec["gen"] == "words":
        flat = [spec["words"][(i * 31 + spec["seed"]) % len(spec["words"])] for i in range(n)]
    else:
        flat = [int(i % last < last - 3 * ((i // last) % 4)) for i in range(n)]

    def nest(vals, dims):
        if len(dims) == 1:
            return vals
        step = len(vals) // dims[0]
        return [nest(vals[k * step:(k + 1) * step], dims[1:]) for k in range(dims[0])]
    return nest(flat, shape)


def flat(x):
    if isinstance(x, list):
        return [v for item in x for v in flat(item)]
    return [x]


def check(name, got, want):
    vals = want["values"]
    got = flat(got)
    assert len(got) == len(vals)
    worst = max(abs(g - w) / max(abs(w), 1e-2) for g, w in zip(got, vals))
    assert worst <= 1e-4, (name, worst)


def check_outputs(entry, outs, batch):
    """A columnar predict answer against the zoo entry's TensorFlow outputs."""
    if len(entry["outputs"]) == 1:
        (alias, ref), = entry["outputs"].items()
        check(alias, outs, ref["batch%d" % batch])
    else:
        assert sorted(outs) == sorted(entry["outputs"])
        for alias, ref in entry["outputs"].items():
            check(alias, outs[alias], ref["batch%d" % batch])


CASES = [(m, b) for m in sorted(ZOO) for b in (1, 8) if not (m == "mobilenet_v2" and b == 8)]


@pytest.mark.parametrize("model,batch", CASES)
def test_zoo_predict_matches_tensorflow(serve, model, batch):
    entry = ZOO[model]
    s = serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])))
    inputs = {alias: zoo_input(spec, batch) for alias, spec in entry["inputs"].items()}
    status, out = s.json("POST", f"/v1/models/{model}:predict", json.dumps({"inputs": inputs}))
    assert status == 200, out
    check_outputs(entry, out["outputs"], batch)


def test_zoo_row_form_single_input(serve):
    # The row ("instances") form of a one-input model: a list of rows.
    entry = ZOO["mlp"]
    s = serve("mlp", os.path.dirname(os.path.join(ROOT, entry["dir"])))
    rows = zoo_input(entry["inputs"]["x"], 8)
    status, out = s.json("POST", "/v1/models/mlp:predict", json.dumps({"instances": rows}))
    assert status == 200, out
    check("output_0", out["predictions"], entry["outputs"]["output_0"]["batch8"])


def test_zoo_bad_shape_is_invalid_argument(serve):
    # A feature count the first MatMul cannot take: 400 naming the op, no crash.
    entry = ZOO["two_io"]
    s = serve("m", os.path.dirname(os.path.join(ROOT, entry["dir"])))
    body = {"inputs": {"features": [[1.0] * 8], "category": [[7]]}}
    status, out = s.json("POST", "/v1/models/m:predict", json.dumps(body))
    assert status == 400, out
    assert "GatherV2" in out["error"] or "indices" in out["error"], out
    status, out = s.json("POST", "/v1/models/m:predict", json.dumps(
        {"inputs": {"features": [[1.0] * 5], "category": [[1]]}}))
    assert status == 400, out


def test_intra_op_parallelism_flag(serve, tmp_path):
    # TF Serving's --tensorflow_intra_op_parallelism sets the engine's threads
    # per op; the answers do not depend on it.
    entry = ZOO["mlp"]
    s = serve("mlp", os.path.dirname(os.path.join(ROOT, entry["dir"])),
              "--tensorflow_intra_op_parallelism=1")
    rows = zoo_input(entry["inputs"]["x"], 8)
    status, out = s.json("POST", "/v1/models/mlp:predict", json.dumps({"instances": rows}))
    assert status == 200, out
    check("output_0", out["predictions"], entry["outputs"]["output_0"]["batch8"])
    import subprocess
    from conftest import BINARY
    bad = subprocess.run([BINARY, "--tensorflow_intra_op_parallelism=-1",
                          "--model_base_path=" + str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "--tensorflow_intra_op_parallelism must be >= 0" in bad.stderr


def test_inspect_reports_signatures_census_and_plan():
    import subprocess
    from conftest import BINARY
    d = os.path.join(ROOT, ZOO["two_io"]["dir"])
    r = subprocess.run([BINARY, "inspect", d], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "MetaGraphDef with tag-set: 'serve' contains the following SignatureDefs:" in out
    assert "signature_def['serving_default']:" in out
    assert "inputs['category'] tensor_info:" in out and "dtype: DT_INT32" in out
    assert "shape: (-1, 8)" in out
    assert "outputs['probs'] tensor_info:" in out
    assert "Method name is: tensorflow/serving/predict" in out
    assert "GatherV2" in out and "MatMul" in out
    # The save function's ops are census-only: the engine lacks them, serving does not need them.
    assert "SaveV2" in out and "(not supported by the engine)" in out
    assert "Loading with tags 'serve': OK" in out
    assert "ops fused" in out
    r = subprocess.run([BINARY, "inspect", "/nonexistent"], capture_output=True, text=True)
    assert r.returncode == 1 and "cannot open" in r.stderr


@pytest.mark.parametrize("model", ["mobilenet_v2", "cnn", "transformer"])
def test_repeated_batches_match_tensorflow(serve, model):
    # The engine decides on a model's first batch whether later batches may
    # run as slices of a few examples (MobileNetV2: yes; the CNN: its batch
    # fits the cache whole; the transformer: its ops mix the batch); every
    # answer must still be TensorFlow's.
    entry = ZOO[model]
    s = serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])))
    inputs = {alias: zoo_input(spec, 8) for alias, spec in entry["inputs"].items()}
    for _ in range(3):
        status, out = s.json("POST", f"/v1/models/{model}:predict", json.dumps({"inputs": inputs}))
        assert status == 200, out
        check_outputs(entry, out["outputs"], 8)
