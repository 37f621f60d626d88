"""Control flow, black-box: Keras LSTM and GRU/SimpleRNN exports (While loops
over TensorLists) and a tf.function with a data-dependent tf.cond and
tf.while_loop (StatelessIf, While), made by scripts/make_fixtures.py
--control, against TensorFlow's outputs (bound as in test_zoo). Each also
runs through the GPU executor on the reference device, where loop bodies
run on the CPU inside a device run."""
import json
import os

import pytest

from conftest import FIXTURES, ROOT
from test_zoo import check_outputs, zoo_input

with open(os.path.join(FIXTURES, "control.json")) as f:
    CONTROL = json.load(f)["models"]

CASES = [(m, key) for m in sorted(CONTROL)
         for key in sorted(next(iter(CONTROL[m]["outputs"].values())))
         if key != "dtype"]


def case_input(entry, key):
    spec = entry["inputs"]["x"]
    if key == "negated_batch8":
        neg = lambda v: [neg(x) for x in v] if isinstance(v, list) else -v  # noqa: E731
        return neg(zoo_input(spec, 8))
    return zoo_input(spec, int(key[len("batch"):]))


@pytest.mark.parametrize("device", ["cpu", "reference"])
@pytest.mark.parametrize("model,key", CASES)
def test_control_flow_matches_tensorflow(serve, model, key, device):
    entry = CONTROL[model]
    s = serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])), f"--device={device}")
    status, out = s.json("POST", f"/v1/models/{model}:predict",
                         json.dumps({"inputs": {"x": case_input(entry, key)}}))
    assert status == 200, out
    entry_for_key = dict(entry, outputs={a: {"batch0": o[key]} for a, o in entry["outputs"].items()})
    check_outputs(entry_for_key, out["outputs"], 0)


def test_inspect_lists_control_flow_ops(tmp_path):
    import subprocess
    from conftest import BINARY
    d = os.path.join(ROOT, CONTROL["lstm"]["dir"])
    out = subprocess.run([BINARY, "inspect", d], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "While" in out.stdout and "TensorListReserve" in out.stdout
    assert "Loading with tags 'serve': OK" in out.stdout


def test_loop_body_with_an_unsupported_op_fails_the_load_naming_it(serve):
    # The version is reported with the op and the node inside the loop
    # body; the server itself keeps running and answers.
    import time
    s = serve("bad", os.path.join(ROOT, "tests/fixtures/models/control/loop_unsupported"),
              "--max_num_load_retries=0")
    deadline = time.time() + 60
    st = {}
    while time.time() < deadline:
        status, st = s.json("GET", "/v1/models/bad")
        v = st.get("model_version_status", [{}])[0]
        if v.get("state") == "END":
            break
        time.sleep(0.1)
    msg = st["model_version_status"][0]["status"]["error_message"]
    assert "Lgamma" in msg and "body" in msg and "not supported" in msg, msg
