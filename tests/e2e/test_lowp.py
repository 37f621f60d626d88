"""Models whose weights are float16 or bfloat16 (Keras dtype policies, made by
scripts/make_fixtures.py --lowp): tensord widens them to float32 at load and
computes in float32, so its answers are closer to the exact values than
TensorFlow's own, which rounds every intermediate to 16 bits. The bound is
therefore TensorFlow's rounding, not ours: a few units of the 16-bit format's
precision (float16: 2^-11 ~ 4.9e-4, so 1e-2; bfloat16: 2^-8 ~ 3.9e-3, so 3e-2)
relative, with a 1e-2 floor on the denominator as in test_zoo."""
import json
import os

import pytest

from conftest import FIXTURES, ROOT
from test_zoo import flat, zoo_input

with open(os.path.join(FIXTURES, "lowp.json")) as f:
    LOWP = json.load(f)["models"]

BOUND = {"float16": 1e-2, "bfloat16": 3e-2}


@pytest.mark.parametrize("model,batch", [(m, b) for m in sorted(LOWP) for b in (1, 8)])
def test_low_precision_weights_match_tensorflow(serve, model, batch):
    entry = LOWP[model]
    s = serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])))
    x = zoo_input(entry["inputs"]["x"], batch)
    status, out = s.json("POST", f"/v1/models/{model}:predict", json.dumps({"instances": x}))
    assert status == 200, out
    want = entry["outputs"]["output_0"]["batch%d" % batch]["values"]
    got = flat(out["predictions"])
    assert len(got) == len(want)
    worst = max(abs(g - w) / max(abs(w), 1e-2) for g, w in zip(got, want))
    assert worst <= BOUND[entry["weights"]], worst
    # Metadata still says what the SavedModel declares.
    status, meta = s.json("GET", f"/v1/models/{model}/metadata")
    sig = meta["metadata"]["signature_def"]["signature_def"]["serving_default"]
    assert sig["outputs"]["output_0"]["dtype"] == {"float16": "DT_HALF",
                                                   "bfloat16": "DT_BFLOAT16"}[entry["weights"]]
