"""Text models' failures, black-box: a string that is not a number answers
400 naming the op while the model keeps serving; a version whose regex
pattern RE2 refuses fails its load naming the node, and the version before
it keeps serving; a tables-from-assets version whose vocabulary file is
missing fails its load the same way. (What the text models compute is
checked against TensorFlow in test_coverage.py.)"""
import json
import os
import shutil

from conftest import ROOT
from test_coverage import COVERAGE, check_outputs
from test_lifecycle import stage, status, wait_for
from test_zoo import zoo_input


def body(entry, batch=1, **override):
    inputs = {alias: zoo_input(spec, batch) for alias, spec in entry["inputs"].items()}
    inputs.update(override)
    return json.dumps({"inputs": inputs})


def test_a_string_that_is_not_a_number_is_a_400_and_the_model_keeps_serving(serve):
    entry = COVERAGE["string_ops"]
    s = serve("m", os.path.dirname(os.path.join(ROOT, entry["dir"])))
    code, out = s.json("POST", "/v1/models/m:predict",
                       body(entry, numbers=[["1.5", "one and a half"]]))
    assert code == 400, out
    assert "StringToNumber" in out["error"] and "one and a half" in out["error"], out
    code, out = s.json("POST", "/v1/models/m:predict", body(entry))
    assert code == 200, out
    check_outputs(entry, out["outputs"], 1)


def failed_version(s, version):
    return wait_for(lambda: (lambda v: v if v and v["state"] == "END" else None)(
        status(s).get(version)), 15)


def test_a_pattern_re2_refuses_fails_the_load_and_the_old_version_keeps_serving(serve, tmp_path):
    entry = COVERAGE["text_ops"]
    src = os.path.join(ROOT, entry["dir"])
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(src, base / "1")
    s = serve("m", str(base), "--file_system_poll_wait_seconds=0.2", "--max_num_load_retries=0")
    assert s.json("POST", "/v1/models/m:predict", body(entry))[0] == 200

    def break_pattern(d):
        # Same length, so the protobuf stays well-formed: an unclosed group.
        pb = d / "saved_model.pb"
        data = pb.read_bytes()
        assert data.count(b"[[:punct:]]") == 1
        pb.write_bytes(data.replace(b"[[:punct:]]", b"([:punct:]]"))
    stage(base, 2, src, break_pattern)
    v = failed_version(s, 2)
    assert v, status(s)
    msg = v["status"]["error_message"]
    assert "StaticRegexReplace" in msg and "invalid pattern" in msg and "missing )" in msg, msg
    code, out = s.json("POST", "/v1/models/m:predict", body(entry))
    assert code == 200, out
    check_outputs(entry, out["outputs"], 1)


def test_a_missing_vocabulary_file_fails_the_load_naming_the_init_op(serve, tmp_path):
    entry = COVERAGE["tf1_vocab"]
    src = os.path.join(ROOT, entry["dir"])
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(src, base / "1")
    s = serve("m", str(base), "--file_system_poll_wait_seconds=0.2", "--max_num_load_retries=0")
    assert s.json("POST", "/v1/models/m:predict", body(entry))[0] == 200
    stage(base, 2, src, lambda d: os.remove(d / "assets" / "vocab.txt"))
    v = failed_version(s, 2)
    assert v, status(s)
    msg = v["status"]["error_message"]
    assert "InitializeTableFromTextFileV2" in msg and "vocab.txt" in msg, msg
    code, out = s.json("POST", "/v1/models/m:predict", body(entry))
    assert code == 200, out
    check_outputs(entry, out["outputs"], 1)
