"""REST API tests against the real tensord binary, with TensorFlow's numbers
(tests/fixtures/reference.json, written by scripts/make_fixtures.py)."""
import http.client
import json
import os
import socket
import struct
import subprocess

import pytest

from conftest import BINARY, EXAMPLES, MODELS, ROOT


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def flat(x):
    if isinstance(x, list):
        return [v for item in x for v in flat(item)]
    return [x]


# --- the quick-start example ------------------------------------------------

def test_example_predict_matches_readme(serve):
    s = serve("half_plus_two", os.path.join(EXAMPLES, "half_plus_two"))
    status, headers, body = s.request("POST", "/v1/models/half_plus_two:predict",
                                      '{"instances": [1.0, 2.0, 5.0]}')
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"predictions": [2.5, 3.0, 4.5]}
    # TF Serving's number formatting: shortest %g that round-trips, ".0" on whole numbers.
    assert b"[2.5, 3.0, 4.5" in body


def test_example_columnar_and_version_path(serve):
    s = serve("half_plus_two", os.path.join(EXAMPLES, "half_plus_two"))
    status, out = s.json("POST", "/v1/models/half_plus_two/versions/123:predict",
                         '{"inputs": [2.0, 3.0, 4.0]}')
    assert status == 200
    assert out == {"outputs": [3.0, 3.5, 4.0]}


def test_concurrent_small_and_large_requests_all_answer(serve):
    # Small requests of a tiny model run inline on the HTTP threads once the
    # engine has measured them; requests larger than any seen go to the one
    # engine worker. Mixed and concurrent, every answer is right, and errors
    # stay errors on either path.
    import concurrent.futures
    s = serve("half_plus_two", os.path.join(EXAMPLES, "half_plus_two"),
              "--tensord_num_workers=1", "--rest_api_num_threads=2")

    def one(i):
        n = 3 if i % 3 else 512 + i
        xs = [float(i % 7 + k) for k in range(n)]
        status, out = s.json("POST", "/v1/models/half_plus_two:predict",
                             json.dumps({"instances": xs}))
        assert status == 200, out
        assert out["predictions"] == [0.5 * x + 2 for x in xs]
        if i % 5 == 0:
            status, out = s.json("POST", "/v1/models/half_plus_two:predict",
                                 '{"instances": ["a"]}')
            assert status == 400 and "error" in out

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(200)))


# --- TensorFlow's numbers, TF1 and TF2 forms ---------------------------------

MODEL_DIRS = {
    "examples/half_plus_two/00000123": os.path.join(EXAMPLES, "half_plus_two"),
    "tests/fixtures/models/half_plus_two_tf1/00000123": os.path.join(MODELS, "half_plus_two_tf1"),
    "tests/fixtures/models/half_plus_three_tf2/00000002": os.path.join(MODELS, "half_plus_three_tf2"),
}


@pytest.mark.parametrize("key", sorted(MODEL_DIRS))
def test_predictions_equal_tensorflow(serve, reference, key):
    ref = reference["models"][key]
    s = serve("m", MODEL_DIRS[key])
    column_shape = ref.get("tf_feed_shape") == [-1, 1]
    for case in ref["cases"]:
        xs = [[v] for v in case["x"]] if column_shape else case["x"]
        for form, out_key in (("instances", "predictions"), ("inputs", "outputs")):
            status, out = s.json("POST", "/v1/models/m:predict", json.dumps({form: xs}))
            assert status == 200, out
            got = flat(out[out_key])
            want = [f32(v) for v in case["y"]]
            assert len(got) == len(want)
            # Same float32 arithmetic as TensorFlow: bit-identical after rounding.
            assert [f32(v) for v in got] == want, (form, case["x"])


def test_tf1_accepts_rank1_feed_like_tf_serving(serve):
    # x:0 is an Identity, not a Placeholder: TF Serving does not hold the
    # request to the signature's [?,1] shape.
    s = serve("m", os.path.join(MODELS, "half_plus_two_tf1"))
    status, out = s.json("POST", "/v1/models/m:predict", '{"instances": [1.0, 2.0, 5.0]}')
    assert status == 200
    assert out == {"predictions": [2.5, 3.0, 4.5]}


def test_highest_version_is_served(serve):
    s = serve("m", os.path.join(MODELS, "half_plus_three_tf2"))
    status, out = s.json("GET", "/v1/models/m")
    assert status == 200
    assert [v["version"] for v in out["model_version_status"]] == ["2"]
    status, out = s.json("POST", "/v1/models/m:predict", '{"instances": [2.0]}')
    assert out == {"predictions": [5.0]}  # version 2: 0.5 * x + 4
    status, out = s.json("POST", "/v1/models/m/versions/1:predict", '{"instances": [2.0]}')
    assert status == 404
    assert out == {"error": "Servable not found for request: Specific(m, 1)"}


# --- status -----------------------------------------------------------------

def test_status_like_tf_serving(serve):
    s = serve("half_plus_two", os.path.join(EXAMPLES, "half_plus_two"))
    status, out = s.json("GET", "/v1/models/half_plus_two")
    assert status == 200
    assert out == {"model_version_status": [{
        "version": "123", "state": "AVAILABLE",
        "status": {"error_code": "OK", "error_message": ""}}]}
    status, out = s.json("GET", "/v1/models/half_plus_two/versions/123")
    assert status == 200 and out["model_version_status"][0]["version"] == "123"
    status, out = s.json("GET", "/v1/models/half_plus_two/versions/7")
    assert status == 404
    assert out == {"error": "Could not find version 7 of model half_plus_two"}
    status, out = s.json("GET", "/v1/models/nope")
    assert status == 404
    assert out == {"error": "Could not find any versions of model nope"}


# --- request errors ---------------------------------------------------------

@pytest.mark.parametrize("method,path,body,code,message", [
    ("POST", "/v1/models/nope:predict", '{"instances": [1.0]}', 404,
     "Servable not found for request: Latest(nope)"),
    ("POST", "/v1/models/half_plus_two:predict", '{"instances": [1.0], "signature_name": "foo"}',
     400, 'Serving signature name: "foo" not found in signature def'),
    ("POST", "/v1/models/half_plus_two:predict", '{"instances": ["a"]}', 400, None),
    ("POST", "/v1/models/half_plus_two:predict", '{"instances": [1.0', 400, None),
    ("POST", "/v1/models/half_plus_two:predict", '', 400, None),
    ("POST", "/v1/models/half_plus_two:predict", '[1.0]', 400, None),
    ("POST", "/v1/models/half_plus_two:predict", '{"instances": [[1.0], 2.0]}', 400, None),
    ("POST", "/v1/models/half_plus_two:predict", '{"foo": 1}', 400,
     "Missing 'inputs' or 'instances' key"),
    ("POST", "/v1/models/half_plus_two:PREDICT", '{}', 400,
     "Malformed request: POST /v1/models/half_plus_two:PREDICT"),
    ("GET", "/v1/models/half_plus_two:predict", None, 400,
     "Malformed request: GET /v1/models/half_plus_two:predict"),
    ("POST", "/v1/models/half_plus_two/versions/x:predict", '{}', 400,
     "Malformed request: POST /v1/models/half_plus_two/versions/x:predict"),
    ("POST", "/v1/models/half_plus_two/labels/stable:predict", '{"instances": [1.0]}', 400,
     "Unrecognized servable version label: stable"),
])
def test_request_errors(serve, method, path, body, code, message):
    s = serve("half_plus_two", os.path.join(EXAMPLES, "half_plus_two"))
    status, headers, raw = s.request(method, path, body)
    assert status == code, raw
    assert headers["Content-Type"] == "application/json"
    out = json.loads(raw)
    assert set(out) == {"error"} and out["error"]
    if message:
        assert out["error"] == message
    # The server is unharmed.
    status, out = s.json("POST", "/v1/models/half_plus_two:predict", '{"instances": [1.0]}')
    assert out == {"predictions": [2.5]}


def test_paths_outside_v1_are_plain_404(serve):
    s = serve("half_plus_two", os.path.join(EXAMPLES, "half_plus_two"))
    status, headers, _ = s.request("GET", "/healthz-not-yet")
    assert status == 404
    assert headers["Content-Type"] != "application/json"


def test_oversized_body_is_413_without_reading_it(serve):
    s = serve("half_plus_two", os.path.join(EXAMPLES, "half_plus_two"))
    conn = http.client.HTTPConnection("127.0.0.1", s.rest_port, timeout=10)
    conn.putrequest("POST", "/v1/models/half_plus_two:predict")
    conn.putheader("Content-Length", str(300 << 20))
    conn.endheaders()  # no body is sent: the answer must come anyway
    r = conn.getresponse()
    assert r.status == 413
    assert "error" in json.loads(r.read())
    conn.close()


# --- load failures: reported, and the process keeps running -------------------

def corrupt_truncate(vdir):
    pb = os.path.join(vdir, "saved_model.pb")
    data = open(pb, "rb").read()
    open(pb, "wb").write(data[: len(data) // 2])
    return "saved_model.pb"


def corrupt_remove(vdir):
    os.remove(os.path.join(vdir, "saved_model.pb"))
    return "saved_model.pb"


def corrupt_data_crc(vdir):
    data = os.path.join(vdir, "variables", "variables.data-00000-of-00001")
    raw = bytearray(open(data, "rb").read())
    raw[-1] ^= 0xFF  # inside the last tensor's bytes
    open(data, "wb").write(bytes(raw))
    return "variables.data-00000-of-00001"


@pytest.mark.parametrize("corrupt", [corrupt_truncate, corrupt_remove, corrupt_data_crc])
@pytest.mark.parametrize("src", ["half_plus_two_tf1/00000123", "tf2"])
def test_broken_version_fails_to_load_and_is_reported(serve, model_copy, corrupt, src):
    src_dir = (os.path.join(EXAMPLES, "half_plus_two", "00000123") if src == "tf2"
               else os.path.join(MODELS, src))
    base, vdir = model_copy(src_dir, "1")
    fname = corrupt(vdir)
    s = serve("m", base, "--max_num_load_retries=0")
    status, out = s.json("GET", "/v1/models/m")
    assert status == 200
    (v,) = out["model_version_status"]
    # A version whose saved_model.pb is missing or does not parse may still
    # be being copied: it waits in START (reported, checked again every
    # poll) instead of failing. A complete one whose load fails ends in END.
    waits = corrupt in (corrupt_truncate, corrupt_remove)
    assert v["version"] == "1" and v["state"] == ("START" if waits else "END")
    assert v["status"]["error_code"] != "OK"
    assert fname in v["status"]["error_message"], v
    status, out = s.json("POST", "/v1/models/m:predict", '{"instances": [1.0]}')
    assert status == 503 and "error" in out
    assert s.proc.poll() is None


def test_missing_variable_fails_to_load(serve):
    s = serve("m", os.path.join(MODELS, "missing_var"), "--max_num_load_retries=0")
    status, out = s.json("GET", "/v1/models/m")
    (v,) = out["model_version_status"]
    assert v["state"] == "END"
    assert v["status"]["error_code"] == "NOT_FOUND"
    msg = v["status"]["error_message"]
    assert "Key b not found in checkpoint" in msg and "variables/variables" in msg, msg


def test_grpc_port_listens(serve):
    s = serve("half_plus_two", os.path.join(EXAMPLES, "half_plus_two"))
    with socket.create_connection(("127.0.0.1", s.grpc_port), timeout=5):
        pass


# --- command line -------------------------------------------------------------

def run_cli(*args):
    return subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=30)


def test_help_lists_flags():
    r = run_cli("--help")
    assert r.returncode == 0
    for flag in ("--port", "--rest_api_port", "--model_name", "--model_base_path"):
        assert flag in r.stdout


# An unknown flag alone is only a warning, as in TF Serving (test_dropin.py);
# here it comes with a command line that fails for another reason.
@pytest.mark.parametrize("args", [
    ("--no_such_flag=1",),
    ("--port=abc", "--model_base_path=/tmp"),
    ("--port",),
    ("--model_name=x",),
    ("positional",),
])
def test_bad_command_lines_exit_nonzero_with_usage(args):
    r = run_cli(*args)
    assert r.returncode != 0
    assert "usage:" in r.stderr
