"""REST conformance suite (issue 4): every URL form, request shape and
documented error of TF Serving's REST API,
status/metadata JSON against protobuf's own JSON printer (the golden
signature_def JSON in reference.json comes from make_fixtures.py), number
formatting, limits, CORS, gzip, timeouts, and tensord's list/health/ready
endpoints. Real binary, standard-library HTTP only."""
import gzip
import http.client
import json
import os
import shutil
import socket

import pytest

from conftest import EXAMPLES, MODELS, Server

TF1 = os.path.join(MODELS, "half_plus_two_tf1")
TF1_KEY = "tests/fixtures/models/half_plus_two_tf1/00000123"
TF2 = os.path.join(EXAMPLES, "half_plus_two")
TF2_KEY = "examples/half_plus_two/00000123"
MLP = os.path.join(MODELS, "zoo", "mlp")


@pytest.fixture(scope="module")
def tf1():
    """One server for the read-only checks: the TF1 model (predict, classify,
    regress signatures) served as "default", like TF Serving's own tests."""
    s = Server("default", TF1, ("--rest_api_timeout_in_ms=5000",))
    yield s
    s.stop()
    assert s.proc.returncode == 0, s.output()


def post(s, path, body, headers=None):
    status, hdrs, raw = s.request("POST", path, body, headers)
    return status, hdrs, raw


def err_of(raw):
    out = json.loads(raw)
    assert set(out) == {"error"}, out
    return out["error"]


# --- URL forms ----------------------------------------------------------------

@pytest.mark.parametrize("path", [
    "/v1/models/default",
    "/v1/models/default/versions/123",
    "/v1/models/default/labels/anything",  # TF Serving ignores the label here
    "/V1/MODELS/default",
])
def test_status_forms(tf1, path):
    status, headers, raw = tf1.request("GET", path)
    assert status == 200 and headers["Content-Type"] == "application/json"
    # protobuf's JSON printer layout, byte for byte.
    assert raw == (b'{\n "model_version_status": [\n  {\n   "version": "123",\n'
                   b'   "state": "AVAILABLE",\n   "status": {\n    "error_code": "OK",\n'
                   b'    "error_message": ""\n   }\n  }\n ]\n}\n')


@pytest.mark.parametrize("path", ["/v1/models/default/metadata",
                                  "/v1/models/default/versions/123/metadata"])
def test_metadata_matches_protobuf_printer(tf1, reference, path):
    status, headers, raw = tf1.request("GET", path)
    assert status == 200 and headers["Content-Type"] == "application/json"
    out = json.loads(raw)
    assert out["model_spec"] == {"name": "default", "signature_name": "", "version": "123"}
    assert list(out["metadata"]) == ["signature_def"]
    want = reference["models"][TF1_KEY]["signature_def_json"]
    assert out["metadata"]["signature_def"] == {"signature_def": want}
    # TF Serving's hand-joined envelope around the two printer outputs.
    assert raw.startswith(b'{\n"model_spec":{\n "name": "default",\n')
    assert b'\n}\n,\n"metadata": {"signature_def": {\n "signature_def": {\n' in raw
    assert raw.endswith(b"}\n}\n}\n")


def test_metadata_tf2_and_init_op_signature(serve, reference):
    s = serve("half_plus_two", TF2)
    status, out = s.json("GET", "/v1/models/half_plus_two/metadata")
    assert status == 200
    want = reference["models"][TF2_KEY]["signature_def_json"]
    assert out["metadata"]["signature_def"]["signature_def"] == want
    assert "__saved_model_init_op" in want  # TF Serving lists it too
    tensor = want["serving_default"]["inputs"]["x"]
    assert tensor["tensor_shape"]["dim"] == [{"size": "-1", "name": ""}]


@pytest.mark.parametrize("path,code,msg", [
    ("/v1/models/nope/metadata", 404, "Servable not found for request: Latest(nope)"),
    ("/v1/models/default/versions/9/metadata", 404,
     "Servable not found for request: Specific(default, 9)"),
    ("/v1/models/default/labels/canary/metadata", 400,
     "Unrecognized servable version label: canary"),
])
def test_metadata_errors(tf1, path, code, msg):
    status, _, raw = tf1.request("GET", path)
    assert status == code and err_of(raw) == msg


@pytest.mark.parametrize("path", ["/v1/models/default:predict",
                                  "/v1/models/default/versions/123:predict"])
def test_predict_forms(tf1, path):
    status, headers, raw = post(tf1, path, '{"instances": [[2.0], [3.0], [4.0]]}')
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert raw == b'{\n    "predictions": [[3.0], [3.5], [4.0]\n    ]\n}'
    status, _, raw = post(tf1, path, '{"inputs": [[2.0], [3.0], [4.0]]}')
    assert status == 200
    assert json.loads(raw) == {"outputs": [[3.0], [3.5], [4.0]]}


def test_url_decoding_of_model_names(serve):
    s = serve("half two", TF2)
    status, out = s.json("POST", "/v1/models/half%20two:predict", '{"instances": [2.0]}')
    assert status == 200 and out == {"predictions": [3.0]}
    status, out = s.json("GET", "/v1/models/half%20two")
    assert status == 200


# --- classify and regress ---------------------------------------------------------

def infer_cases(reference):
    return reference["models"][TF1_KEY]["infer_cases"]


def test_tf_serving_own_classify_and_regress(tf1):
    # tensorflow_model_server_test.py testClassifyREST / testRegressREST
    status, _, raw = post(tf1, "/v1/models/default:classify",
                          '{"signature_name":"classify_x_to_y","examples":[{"x":2.0}]}')
    assert status == 200 and json.loads(raw) == {"results": [[["", 3.0]]]}
    assert raw == b'{\n    "results": [[["", 3.0]]\n    ]\n}'
    status, _, raw = post(tf1, "/v1/models/default:regress",
                          '{"signature_name":"regress_x_to_y","examples":[{"x":2.0}]}')
    assert status == 200 and raw == b'{\n    "results": [3.0]\n}'


def test_classify_regress_match_tensorflow(tf1, reference):
    for case in infer_cases(reference):
        verb = "classify" if case["signature"].startswith("classify") else "regress"
        body = dict(case["body"], signature_name=case["signature"])
        status, _, raw = post(tf1, f"/v1/models/default/versions/123:{verb}", json.dumps(body))
        if "tf_error" in case:  # TensorFlow refused this input; so must we
            assert status == 400, raw
            continue
        assert status == 200, raw
        results = json.loads(raw)["results"]
        got = [r[0][1] for r in results] if verb == "classify" else results
        want = case["values"]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g == pytest.approx(w, rel=1e-6, abs=0), (case, got)


@pytest.mark.parametrize("verb,body,msg", [
    ("classify", '{"signature_name": "classify_x_to_y"}',
     "When method is classify, key 'examples' is expected and was not found"),
    ("regress", '{"signature_name": "regress_x_to_y"}',
     "When method is classify, key 'examples' is expected and was not found"),
    ("regress", '{"signature_name": "regress_x_to_y", "examples": {}}',
     "Expecting 'examples' value to be an list/array"),
    ("regress", '{"signature_name": "regress_x_to_y", "examples": []}',
     "'examples' value is an empty array"),
])
def test_examples_envelope_errors(tf1, verb, body, msg):
    status, _, raw = post(tf1, f"/v1/models/default:{verb}", body)
    assert status == 400
    e = err_of(raw)
    assert e.startswith("JSON Value: ") and e.endswith(" " + msg), e


@pytest.mark.parametrize("body,msg", [
    ('{"signature_name": "regress_x_to_y", "examples": [[1]]}',
     "Example must be JSON object but got JSON Array"),
    ('{"signature_name": "regress_x_to_y", "examples": [{"x": [1.0, "a"]}]}',
     "Unexpected element type in feature: x expecting type: float"),
    ('{"signature_name": "regress_x_to_y", "examples": [{"x": null}]}',
     "Feature: x has element with unexpected JSON type: Null"),
    ('{"signature_name": "regress_x_to_y", "examples": [{"x": [[1.0]]}]}',
     "Feature: x has element with unexpected JSON type: Array"),
    ('{"signature_name": "regress_x_to_y", "examples": [{"x": 18446744073709551615}]}',
     "Feature: x has uint64 element. Only int64 is supported."),
    ('{"signature_name": "regress_x_to_y", "context": 3, "examples": [{"x": 1.0}]}',
     "Example must be JSON object but got JSON Number"),
    ('{"signature_name": "nope", "examples": [{"x": 1.0}]}',
     "No signature was found with the name: nope"),
    ('{"signature_name": "regress_x2_to_y3", "examples": [{"x2": 1.0}]}',
     "Expects arg[0] to be float but string is provided"),
    # serving_default (x -> y) has no "inputs": TF's message dumps the signature.
    ('{"examples": [{"x": 1.0}]}', "No regression inputs found in SignatureDef: inputs {"),
])
def test_example_errors(tf1, body, msg):
    status, _, raw = post(tf1, "/v1/models/default:regress", body)
    assert status == 400 and err_of(raw).startswith(msg), raw


def test_classify_signature_checks(tf1):
    status, _, raw = post(tf1, "/v1/models/default:classify",
                          '{"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}]}')
    assert status == 400
    assert err_of(raw).startswith("Expected classification signature outputs to contain at least "
                                  'one of "classes" or "scores". Signature was: ')
    status, _, raw = post(tf1, "/v1/models/default:regress",
                          '{"signature_name": "regress_x_to_y", "examples": [{"x2": 1.0}]}')
    assert status == 400 and "Feature: x (data type: float) is required" in err_of(raw)


def test_feature_kinds(tf1):
    # Booleans and integers are int64 features, strings and b64 bytes: x must
    # be float, so each kind reaches the graph and is refused there by type.
    for v in ('true', '3', '"s"', '{"b64": "AAE="}'):
        status, _, raw = post(tf1, "/v1/models/default:regress",
                              '{"signature_name": "regress_x_to_y", "examples": [{"x": %s}]}' % v)
        assert status == 400 and "Data types don't match" in err_of(raw), (v, raw)
    # An exponent makes a float.
    status, _, raw = post(tf1, "/v1/models/default:regress",
                          '{"signature_name": "regress_x_to_y", "examples": [{"x": 2e0}]}')
    assert status == 200 and json.loads(raw) == {"results": [3.0]}


# --- predict request shapes and errors --------------------------------------------

@pytest.mark.parametrize("body,code,msg", [
    ("", 400, "JSON Parse error: The document is empty"),
    ('{"instances": [1.0', 400, None),
    ("[1]", 400, "JSON Value: [\n    1\n] Is not object"),
    ('{"signature_name": 1, "instances": [1.0]}', 400, None),
    ('{"instances": [1.0], "inputs": [1.0]}', 400, None),
    ('{"x": 1}', 400, "Missing 'inputs' or 'instances' key"),
    ('{"instances": 1.0}', 400, None),
    ('{"instances": []}', 400, None),
    ('{"instances": [[1.0], [1.0, 2.0]]}', 400, None),
    ('{"instances": ["a"]}', 400, "Failed to process element: 0 of 'instances' list. Error: "
     'INVALID_ARGUMENT: JSON Value: "a" Type: String is not of expected type: float'),
    ('{"instances": [1.0], "signature_name": "foo"}', 400,
     'Serving signature name: "foo" not found in signature def'),
])
def test_predict_errors(tf1, body, code, msg):
    status, headers, raw = post(tf1, "/v1/models/default:predict", body)
    assert status == code and headers["Content-Type"] == "application/json"
    e = err_of(raw)
    if msg:
        assert e == msg
    # Still serving.
    status, _, _ = post(tf1, "/v1/models/default:predict", '{"instances": [[1.0]]}')
    assert status == 200


def test_bad_json_reports_rapidjson_offset(tf1):
    status, _, raw = post(tf1, "/v1/models/default:predict", '{"instances": [1.0,]}')
    assert status == 400
    assert err_of(raw).startswith("JSON Parse error: ") and "at offset: " in err_of(raw)


# --- number formatting ---------------------------------------------------------------

def test_number_formatting(serve):
    s = serve("m", TF2)
    # y = 0.5 x + 2: 3 -> "3.0"; 9e+06 stays; 2.000005 needs 9 digits; NaN/Infinity in and
    # out. (An integer literal above 2^24 would be refused for a float input as lossy.)
    status, _, raw = post(s, "/v1/models/m:predict",
                          '{"instances": [2, 1.7999996e7, 1e-5, NaN, Infinity, -Infinity]}')
    assert status == 200, raw
    assert raw == (b'{\n    "predictions": [3.0, 9e+06, 2.00000501, NaN, Infinity, -Infinity\n'
                   b'    ]\n}')


# --- routing and methods ----------------------------------------------------------------

@pytest.mark.parametrize("method,path", [
    ("PUT", "/v1/models/default:predict"),
    ("DELETE", "/v1/models/default"),
    ("PATCH", "/v1/models/default"),
    ("POST", "/v1/models/default/metadata"),
    ("GET", "/v1/models/default:predict"),
    ("POST", "/v1/models/default:PREDICT"),
    ("POST", "/v1/models/default/versions/50/labels/x:regress"),
    ("GET", "/v1/foo"),
    ("OPTIONS", "/v1/models/default"),  # no CORS flag: not a preflight
])
def test_malformed_requests(tf1, method, path):
    status, headers, raw = tf1.request(method, path, "{}" if method != "GET" else None)
    assert status == 400 and headers["Content-Type"] == "application/json"
    assert err_of(raw) == f"Malformed request: {method} {path}"


def test_version_overflow_and_labels(tf1):
    status, _, raw = post(tf1, "/v1/models/default/versions/99999999999999999999:predict", "{}")
    assert status == 400
    assert err_of(raw) == "Failed to convert version: 99999999999999999999 to numeric."
    status, _, raw = post(tf1, "/v1/models/default/labels/stable:predict", '{"instances": [1.0]}')
    assert status == 400 and err_of(raw) == "Unrecognized servable version label: stable"


def test_outside_v1_is_plain_404(tf1):
    for path in ("/", "/v3/models/default", "/healthz/x", "/monitoring/prometheus/metrics"):
        status, headers, _ = tf1.request("GET", path)
        assert status == 404 and headers["Content-Type"] == "text/html"


# --- tensord's own: list, health, ready ---------------------------------------------------

def test_list_models(tf1):
    status, headers, raw = tf1.request("GET", "/v1/models")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(raw) == {"models": [{"name": "default", "model_version_status": [
        {"version": "123", "state": "AVAILABLE",
         "status": {"error_code": "OK", "error_message": ""}}]}]}


def test_health_and_ready(tf1):
    status, _, raw = tf1.request("GET", "/healthz")
    assert status == 200 and json.loads(raw) == {"status": "alive"}
    status, _, raw = tf1.request("GET", "/readyz")
    assert status == 200 and json.loads(raw) == {"ready": True, "models_not_ready": []}
    status, _, raw = tf1.request("HEAD", "/healthz")
    assert status == 200 and raw == b""


def test_not_ready_when_a_model_failed(serve, model_copy):
    base, vdir = model_copy(os.path.join(TF1, "00000123"), "1")
    os.remove(os.path.join(vdir, "saved_model.pb"))
    s = serve("broken", base, "--max_num_load_retries=0")
    status, _, raw = s.request("GET", "/readyz")
    assert status == 503 and json.loads(raw) == {"ready": False, "models_not_ready": ["broken"]}
    status, _, raw = s.request("GET", "/healthz")
    assert status == 200
    status, out = s.json("GET", "/v1/models")
    (m,) = out["models"]
    assert m["name"] == "broken" and m["model_version_status"][0]["state"] != "AVAILABLE"


# --- limits --------------------------------------------------------------------------

def test_declared_oversize_body_is_413_unread(serve):
    s = serve("m", TF2, "--tensord_rest_max_body_bytes=1000")
    conn = http.client.HTTPConnection("127.0.0.1", s.rest_port, timeout=10)
    conn.putrequest("POST", "/v1/models/m:predict")
    conn.putheader("Content-Length", "1001")
    conn.endheaders()  # no body follows: the answer must come anyway
    r = conn.getresponse()
    assert r.status == 413
    assert "1000 bytes" in err_of(r.read())
    conn.close()


def test_streamed_oversize_body_is_413(serve):
    s = serve("m", TF2, "--tensord_rest_max_body_bytes=1000")
    conn = http.client.HTTPConnection("127.0.0.1", s.rest_port, timeout=10)
    conn.putrequest("POST", "/v1/models/m:predict")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    # No length up front: the limit is found midway; the rest is discarded
    # (not buffered) and the answer comes once the body ends.
    chunk = b'{"instances": [' + b"1.0, " * 300
    conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk))
    conn.send(b"%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk))
    r = conn.getresponse()
    assert r.status == 413
    conn.close()
    # A body at the limit is fine.
    body = '{"instances": [%s]}' % ", ".join(["1.0"] * 150)
    assert len(body) <= 1000
    status, _, _ = post(s, "/v1/models/m:predict", body)
    assert status == 200


def test_gzip_bodies(serve):
    s = serve("m", TF2, "--tensord_rest_max_body_bytes=5000")
    body = gzip.compress(b'{"instances": [2.0, 3.0]}')
    status, _, raw = post(s, "/v1/models/m:predict", body, {"Content-Encoding": "gzip"})
    assert status == 200 and json.loads(raw) == {"predictions": [3.0, 3.5]}
    # Corrupt or truncated data is a clean 400.
    status, _, raw = post(s, "/v1/models/m:predict", body[:-12], {"Content-Encoding": "gzip"})
    assert status == 400 and "gzip" in err_of(raw)
    status, _, raw = post(s, "/v1/models/m:predict", b"not gzip", {"Content-Encoding": "gzip"})
    assert status == 400 and "gzip" in err_of(raw)
    # The limit applies to the inflated size: a small bomb is refused.
    bomb = gzip.compress(b'{"instances": [' + b"1.0, " * 5000 + b"1.0]}")
    assert len(bomb) < 5000
    status, _, raw = post(s, "/v1/models/m:predict", bomb, {"Content-Encoding": "gzip"})
    assert status == 413


# --- CORS ------------------------------------------------------------------------------

def test_cors(serve):
    s = serve("m", TF2, "--rest_api_enable_cors_support")
    status, headers, _ = post(s, "/v1/models/m:predict", '{"instances": [1.0]}')
    assert status == 200
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert headers["Access-Control-Allow-Methods"] == "POST, GET"
    assert headers["Access-Control-Allow-Headers"] == "Content-Type"
    status, headers, raw = s.request("GET", "/v1/models/nope")  # errors too
    assert status == 404 and headers["Access-Control-Allow-Origin"] == "*"
    status, headers, raw = s.request("OPTIONS", "/v1/models/m:predict",
                                     headers={"Origin": "https://example.com"})
    assert status == 200 and raw == b"" and headers["Access-Control-Allow-Origin"] == "*"
    assert "Content-Type" not in headers
    status, _, raw = s.request("OPTIONS", "/v1/models/m:predict", headers={"Origin": "file://x"})
    assert status == 400 and err_of(raw) == "Origin header is missing in CORS preflight"
    status, _, raw = s.request("OPTIONS", "/v1/models/m:predict")
    assert status == 400


def test_no_cors_headers_by_default(tf1):
    _, headers, _ = tf1.request("GET", "/v1/models/default")
    assert "Access-Control-Allow-Origin" not in headers


# --- timeouts and threads ------------------------------------------------------------------

def test_deadline_answers_504_and_the_late_result_is_dropped(serve):
    # 1 ms cannot hold a 784-512-512-10 MLP over 1024 rows; the run finishes in
    # the background and its result is discarded; the server keeps serving
    # and shuts down cleanly (the serve fixture checks the exit status).
    s = serve("mlp", MLP, "--rest_api_timeout_in_ms=1", "--rest_api_num_threads=2")
    body = json.dumps({"instances": [[0.25] * 784] * 1024})
    for _ in range(3):
        status, _, raw = post(s, "/v1/models/mlp:predict", body)
        assert status == 504
        assert err_of(raw) == "Timed out waiting for notification"
    status, out = s.json("GET", "/v1/models/mlp")
    assert status == 200


def test_flags_validate():
    import subprocess
    from conftest import BINARY
    for bad in ("--rest_api_num_threads=-1", "--tensord_rest_max_body_bytes=0",
                "--rest_api_timeout_in_ms=x"):
        r = subprocess.run([BINARY, "--model_base_path=/tmp", bad], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2 and "usage:" in r.stderr, bad


def test_many_connections_one_thread(serve):
    s = serve("m", TF2, "--rest_api_num_threads=1")
    socks = [socket.create_connection(("127.0.0.1", s.rest_port)) for _ in range(50)]
    req = (b"POST /v1/models/m:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n"
           b'{"instances": [2.0]}')
    for k in socks:
        k.sendall(req)
    for k in socks:
        data = b""
        while b"]" not in data:
            data += k.recv(4096)
        assert b"200 OK" in data and b"3.0" in data
        k.close()
