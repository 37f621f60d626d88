"""The long tail of real exports, black-box: models made by
scripts/make_fixtures.py --coverage (export forms and layers beyond the zoo)
served over REST against TensorFlow's outputs (bound as in test_zoo), on the
CPU and through the GPU executor on the reference device."""
import json
import os

import pytest

from conftest import FIXTURES, ROOT
from test_zoo import check_outputs, zoo_input

with open(os.path.join(FIXTURES, "coverage.json")) as f:
    COVERAGE = json.load(f)["models"]

CASES = [(m, b) for m in sorted(COVERAGE) for b in (1, 8)]


@pytest.mark.parametrize("device", ["cpu", "reference"])
@pytest.mark.parametrize("model,batch", CASES)
def test_coverage_predict_matches_tensorflow(serve, model, batch, device):
    entry = COVERAGE[model]
    s = serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])), f"--device={device}")
    inputs = {alias: zoo_input(spec, batch) for alias, spec in entry["inputs"].items()}
    status, out = s.json("POST", f"/v1/models/{model}:predict", json.dumps({"inputs": inputs}))
    assert status == 200, out
    check_outputs(entry, out["outputs"], batch)


def test_keras_model_saved_directly_binds_its_variables_by_object_graph(serve):
    # tf.saved_model.save(keras_model): the restore op fills copies that no
    # function reads; the served variables come from the checkpoint's object
    # graph, and the load says how many it bound.
    entry = COVERAGE["keras_direct"]
    s = serve("m", os.path.dirname(os.path.join(ROOT, entry["dir"])))
    assert "variables bound through the checkpoint's object graph" in s.output()
