"""Text-format SavedModels (saved_model.pbtxt), black-box.

tests/fixtures/pbtxt holds TensorFlow's own text rendering of three binary
fixtures (scripts/make_fixtures.py --pbtxt): the TF1 graph, and the Keras MLP
and transformer. Each test pairs one with its model's variables/ in a fresh
version directory that has no saved_model.pb, serves it, and compares with
TensorFlow's outputs for the binary original."""
import json
import os
import shutil

from conftest import FIXTURES, MODELS, ROOT
from test_zoo import ZOO, check, f32, flat, zoo_input

PBTXT = os.path.join(FIXTURES, "pbtxt")


def text_version(tmp_path, src_version_dir, pbtxt_name, version="1"):
    base = tmp_path / "model"
    dst = base / version
    shutil.copytree(src_version_dir, dst)
    os.remove(dst / "saved_model.pb")
    shutil.copy(os.path.join(PBTXT, pbtxt_name), dst / "saved_model.pbtxt")
    return str(base), str(dst)


def test_tf1_text_savedmodel_matches_tensorflow(serve, reference, tmp_path):
    key = "tests/fixtures/models/half_plus_two_tf1/00000123"
    base, _ = text_version(tmp_path, os.path.join(ROOT, key), "half_plus_two_tf1.pbtxt")
    s = serve("m", base)
    ref = reference["models"][key]
    for case in ref["cases"]:
        status, out = s.json("POST", "/v1/models/m:predict",
                             json.dumps({"instances": [[v] for v in case["x"]]}))
        assert status == 200, out
        assert [f32(v) for v in flat(out["predictions"])] == [f32(v) for v in case["y"]]
    status, meta = s.json("GET", "/v1/models/m/metadata")
    assert status == 200
    assert meta["metadata"]["signature_def"]["signature_def"]["serving_default"]["method_name"] \
        == "tensorflow/serving/predict"


def test_keras_text_savedmodels_match_tensorflow(serve, tmp_path):
    for model, name in (("mlp", "zoo_mlp.pbtxt"), ("transformer", "zoo_transformer.pbtxt")):
        entry = ZOO[model]
        base, _ = text_version(tmp_path / model, os.path.join(ROOT, entry["dir"]), name)
        s = serve(model, base)
        inputs = {alias: zoo_input(spec, 8) for alias, spec in entry["inputs"].items()}
        status, out = s.json("POST", f"/v1/models/{model}:predict", json.dumps({"inputs": inputs}))
        assert status == 200, out
        (alias, ref), = entry["outputs"].items()
        check(alias, out["outputs"], ref["batch8"])


def test_corrupt_text_savedmodel_is_reported_and_others_serve(serve, tmp_path):
    # Version 1 is a good binary SavedModel; version 2's pbtxt is cut short.
    # The server keeps serving version 1 and reports version 2's problem
    # with the parser's line and column.
    base = tmp_path / "model"
    shutil.copytree(os.path.join(MODELS, "half_plus_two_tf1", "00000123"), base / "1")
    _, v2 = text_version(tmp_path, os.path.join(MODELS, "half_plus_two_tf1", "00000123"),
                         "half_plus_two_tf1.pbtxt", version="2")
    text = open(os.path.join(v2, "saved_model.pbtxt")).read()
    open(os.path.join(v2, "saved_model.pbtxt"), "w").write(text[: len(text) // 2])
    s = serve("m", str(base), "--file_system_poll_wait_seconds=0.2")
    import time
    deadline = time.time() + 60
    msg = ""
    while time.time() < deadline:
        status, st = s.json("GET", "/v1/models/m")
        by_version = {v["version"]: v for v in st["model_version_status"]}
        if "2" in by_version and "line" in by_version["2"]["status"]["error_message"]:
            msg = by_version["2"]["status"]["error_message"]
            break
        time.sleep(0.1)
    assert "saved_model.pbtxt" in msg and "line" in msg and "column" in msg, st
    status, out = s.json("POST", "/v1/models/m/versions/1:predict",
                         json.dumps({"instances": [[1.0]]}))
    assert status == 200 and out["predictions"] == [[2.5]], out


def test_inspect_reads_text_savedmodels(tmp_path):
    import subprocess
    from conftest import BINARY
    _, v = text_version(tmp_path, os.path.join(ROOT, ZOO["mlp"]["dir"]), "zoo_mlp.pbtxt")
    out = subprocess.run([BINARY, "inspect", v], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "saved_model.pbtxt" in out.stdout
    assert "Loading with tags 'serve': OK" in out.stdout
