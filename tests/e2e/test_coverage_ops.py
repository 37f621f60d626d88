"""The numeric, image and control-flow ops of the long tail, black-box:
models made by scripts/make_fixtures.py --coverage-ops (Keras layers and
tf.function / TF1 graphs that hold them) served over REST against
TensorFlow's outputs, on the CPU and through the GPU executor on the
reference device (which runs the ops it does not lower on the host)."""
import json
import os

import pytest

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
