"""The long tail of real exports, black-box: models made by
scripts/make_fixtures.py --coverage (export forms and layers beyond the zoo)
served over REST against TensorFlow's outputs (bound as in test_zoo), on the
CPU and through the GPU executor on the reference device."""
import json
import os
import shutil

import pytest

from conftest import FIXTURES, ROOT
from test_zoo import check, flat, zoo_input

with open(os.path.join(FIXTURES, "coverage.json")) as f:
    COVERAGE = json.load(f)["models"]

CASES = [(m, b) for m in sorted(COVERAGE) for b in (1, 8)]


def check_outputs(entry, outs, batch):
    """Floats within test_zoo's bound; integers, bools and strings exactly."""
    if len(entry["outputs"]) == 1:
        outs = {next(iter(entry["outputs"])): outs}
    assert sorted(outs) == sorted(entry["outputs"])
    for alias, ref in entry["outputs"].items():
        want = ref["batch%d" % batch]
        if ref["dtype"].startswith("float"):
            check(alias, outs[alias], want)
        else:
            got = flat(outs[alias])
            if ref["dtype"] == "bool":
                got = [int(v) for v in got]
            assert got == want["values"], (alias, got, want["values"])


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


def test_version_that_cannot_serve_fails_its_load_and_the_old_one_keeps_serving(serve, tmp_path):
    # An Einsum summing a label away runs in TensorFlow but not in tensord's
    # kernel: the load-time check refuses version 2, naming the node and
    # the op, instead of a version that loads and fails every request.
    from test_lifecycle import stage, status, wait_for
    base = tmp_path / "m"
    base.mkdir()
    entry = COVERAGE["keras_direct"]
    shutil.copytree(os.path.join(ROOT, entry["dir"]), base / "1")
    s = serve("m", str(base), "--file_system_poll_wait_seconds=0.2", "--max_num_load_retries=0")
    inputs = {alias: zoo_input(spec, 1) for alias, spec in entry["inputs"].items()}
    body = json.dumps({"inputs": inputs})
    assert s.json("POST", "/v1/models/m:predict", body)[0] == 200
    stage(base, 2, os.path.join(FIXTURES, "models", "refused", "einsum_summed", "1"))
    v = wait_for(lambda: (lambda x: x if x and x["state"] == "END" else None)(status(s).get(2)), 10)
    assert v, status(s)
    msg = v["status"]["error_message"]
    assert "Einsum" in msg and "ij,jk->i" in msg and "not supported" in msg, msg
    status_code, out = s.json("POST", "/v1/models/m:predict", body)
    assert status_code == 200, out
    check_outputs(entry, out["outputs"], 1)


def test_inspect_lists_the_ops_each_signature_runs_and_names_a_refused_node():
    import subprocess
    from conftest import BINARY
    d = os.path.join(ROOT, COVERAGE["string_head"]["dir"])
    out = subprocess.run([BINARY, "inspect", d], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    line = next(l for l in out.stdout.splitlines() if "ops run:" in l)
    assert "Tile" in line and "GatherV2 x2" in line and "TopKV2" in line, line
    d = os.path.join(FIXTURES, "models", "refused", "einsum_summed", "1")
    out = subprocess.run([BINARY, "inspect", d], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Loading with tags 'serve': FAILS" in out.stdout
    assert "(Einsum): Einsum equation 'ij,jk->i' is not supported" in out.stdout, out.stdout
