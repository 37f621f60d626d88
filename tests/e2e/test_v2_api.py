"""The v2 protocol's endpoints with the stock Triton clients (tritonclient
http and grpc, unchanged), plus raw HTTP where the wire itself is the point:
health, metadata, config, JSON and binary tensors, typed gRPC contents,
strings (serialized tf.Example into a classify signature picked by the
signature_name parameter), statistics, and the error cases with their HTTP
statuses and gRPC codes from the one status table."""
import json
import os
import struct

import grpc
import numpy as np
import pytest
import tritonclient.grpc as tgrpc
import tritonclient.http as thttp
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from conftest import EXAMPLES, MODELS

HPT = os.path.join(EXAMPLES, "half_plus_two")
TF1 = os.path.join(MODELS, "half_plus_two_tf1")


@pytest.fixture
def hpt(serve):
    s = serve("hpt", HPT)
    return (s, thttp.InferenceServerClient(f"127.0.0.1:{s.rest_port}"),
            tgrpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}"))


def test_health_and_server_metadata(hpt):
    s, h, g = hpt
    assert h.is_server_live() and h.is_server_ready()
    assert g.is_server_live() and g.is_server_ready()
    assert h.is_model_ready("hpt") and g.is_model_ready("hpt")
    assert h.is_model_ready("hpt", "123") and g.is_model_ready("hpt", "123")
    assert not h.is_model_ready("hpt", "7") and not g.is_model_ready("hpt", "7")
    assert not h.is_model_ready("nope") and not g.is_model_ready("nope")
    md = h.get_server_metadata()
    assert md["name"] == "tensord"
    assert {"binary_tensor_data", "model_repository", "statistics"} <= set(md["extensions"])
    gm = g.get_server_metadata()
    assert gm.name == "tensord" and "model_repository" in gm.extensions
    status, _, body = s.request("GET", "/v2/health/live")
    assert status == 200


def test_model_metadata_and_config(hpt):
    s, h, g = hpt
    md = h.get_model_metadata("hpt")
    assert md == {"name": "hpt", "versions": ["123"], "platform": "tensorflow_savedmodel",
                  "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1]}],
                  "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1]}]}
    gm = g.get_model_metadata("hpt", "123")
    assert gm.versions == ["123"] and gm.inputs[0].name == "x" and list(gm.inputs[0].shape) == [-1]
    cfg = h.get_model_config("hpt")
    assert cfg["max_batch_size"] > 0 and cfg["input"][0]["data_type"] == "TYPE_FP32"
    assert cfg["input"][0]["dims"] == []
    gc = g.get_model_config("hpt").config
    assert gc.max_batch_size == cfg["max_batch_size"] and gc.input[0].name == "x"


def test_infer_json_binary_and_grpc(hpt, reference):
    s, h, g = hpt
    ref = reference["models"]["examples/half_plus_two/00000123"]["cases"]
    for case in ref:
        x = np.array(case["x"], np.float32)
        for binary_in in (False, True):
            for binary_out in (False, True):
                i = thttp.InferInput("x", [len(x)], "FP32")
                i.set_data_from_numpy(x, binary_data=binary_in)
                o = thttp.InferRequestedOutput("y", binary_data=binary_out)
                r = h.infer("hpt", [i], outputs=[o], request_id="r1")
                assert r.as_numpy("y").tolist() == pytest.approx(case["y"], rel=1e-6)
                assert r.get_response()["id"] == "r1"
                assert r.get_response()["model_version"] == "123"
        i = tgrpc.InferInput("x", [len(x)], "FP32")
        i.set_data_from_numpy(x)
        r = g.infer("hpt", [i], model_version="123")
        assert r.as_numpy("y").tolist() == pytest.approx(case["y"], rel=1e-6)


def test_raw_json_body_nested_data(hpt):
    s, h, g = hpt
    body = {"inputs": [{"name": "x", "shape": [3], "datatype": "FP32", "data": [[1.0, 2], [5]]}]}
    status, out = s.json("POST", "/v2/models/hpt/infer", json.dumps(body))
    assert status == 200, out
    assert out["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [3],
                               "data": [2.5, 3.0, 4.5]}]


def test_binary_wire_layout(hpt):
    """The binary extension byte for byte: JSON header, then raw tensors."""
    s, h, g = hpt
    header = json.dumps({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 8}}],
                         "parameters": {"binary_data_output": True}}).encode()
    status, headers, raw = s.request(
        "POST", "/v2/models/hpt/infer", header + struct.pack("<2f", 1.0, 3.0),
        {"Inference-Header-Content-Length": str(len(header)),
         "Content-Type": "application/octet-stream"})
    assert status == 200, raw
    n = int(headers["Inference-Header-Content-Length"])
    meta = json.loads(raw[:n])
    assert meta["outputs"][0]["parameters"] == {"binary_data_size": 8}
    assert struct.unpack("<2f", raw[n:]) == (2.5, 3.5)


def test_grpc_typed_contents(hpt):
    s, h, g = hpt
    stub = service_pb2_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}"))
    req = service_pb2.ModelInferRequest(model_name="hpt")
    t = req.inputs.add(name="x", datatype="FP32", shape=[3])
    t.contents.fp32_contents.extend([1.0, 2.0, 5.0])
    resp = stub.ModelInfer(req)
    assert np.frombuffer(resp.raw_output_contents[0], np.float32).tolist() == [2.5, 3.0, 4.5]
    req.inputs[0].contents.fp32_contents.append(7.0)  # 4 values for shape [3]
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "4 values in fp32_contents" in e.value.details()


def example(x):
    import tensorflow as tf
    return tf.train.Example(features=tf.train.Features(
        feature={"x": tf.train.Feature(float_list=tf.train.FloatList(value=[x]))})).SerializeToString()


def test_strings_and_signature_parameter(serve):
    """BYTES inputs (serialized tf.Example) into a non-default signature."""
    s = serve("tf1", TF1)
    h = thttp.InferenceServerClient(f"127.0.0.1:{s.rest_port}")
    g = tgrpc.InferenceServerClient(f"127.0.0.1:{s.grpc_port}")
    ex = np.array([example(1.0), example(4.0)], dtype=np.object_)
    # Serialized protos are not UTF-8, so the client sends them binary.
    i = thttp.InferInput("inputs", [2], "BYTES")
    i.set_data_from_numpy(ex, binary_data=True)
    r = h.infer("tf1", [i], parameters={"signature_name": "classify_x_to_y"})
    assert r.as_numpy("scores").flatten().tolist() == [2.5, 4.0]
    # A JSON string reaches the model as its bytes (here not an Example).
    body = {"inputs": [{"name": "inputs", "shape": [1], "datatype": "BYTES",
                        "data": ["garbage"]}],
            "parameters": {"signature_name": "classify_x_to_y"}}
    status, out = s.json("POST", "/v2/models/tf1/infer", json.dumps(body))
    assert status == 400 and "Could not parse example input, value: 'garbage'" in out["error"]
    body["inputs"][0]["data"] = [1]
    status, out = s.json("POST", "/v2/models/tf1/infer", json.dumps(body))
    assert status == 400 and "is not a string" in out["error"]
    i = tgrpc.InferInput("inputs", [2], "BYTES")
    i.set_data_from_numpy(ex)
    r = g.infer("tf1", [i], parameters={"signature_name": "regress_x_to_y"})
    assert r.as_numpy("outputs").flatten().tolist() == [2.5, 4.0]
    # serving_default is the default; its input is 'x', not 'inputs'
    with pytest.raises(InferenceServerException) as e:
        h.infer("tf1", [i_http(ex)])
    assert e.value.status() == "400" and "unexpected inference input 'inputs'" in e.value.message()
    with pytest.raises(InferenceServerException) as e:
        h.infer("tf1", [i_http(ex)], parameters={"signature_name": "nope"})
    assert "No signature was found with the name: nope" in e.value.message()


def i_http(ex):
    i = thttp.InferInput("inputs", [2], "BYTES")
    i.set_data_from_numpy(ex, binary_data=True)
    return i


def test_statistics_count_runs(hpt):
    s, h, g = hpt
    before = h.get_inference_statistics("hpt")["model_stats"]
    assert before[0]["version"] == "123" and before[0]["inference_count"] == 0
    x = np.array([1.0, 2.0, 3.0], np.float32)
    i = thttp.InferInput("x", [3], "FP32")
    i.set_data_from_numpy(x)
    h.infer("hpt", [i])
    gi = tgrpc.InferInput("x", [3], "FP32")
    gi.set_data_from_numpy(x)
    g.infer("hpt", [gi])
    s.json("POST", "/v1/models/hpt:predict", json.dumps({"instances": [1.0]}))
    st = h.get_inference_statistics("hpt")["model_stats"][0]
    assert st["inference_count"] == 7 and st["execution_count"] == 3
    assert st["inference_stats"]["success"]["count"] == 3
    assert st["inference_stats"]["success"]["ns"] > 0
    assert st["last_inference"] > 0
    gs = g.get_inference_statistics("hpt").model_stats[0]
    assert gs.inference_count == 7 and gs.inference_stats.success.count == 3
    assert [m["name"] for m in h.get_inference_statistics()["model_stats"]] == ["hpt"]
    with pytest.raises(InferenceServerException) as e:
        h.get_inference_statistics("nope")
    assert e.value.status() == "404"


def error(s, path, body, headers=None):
    status, _, raw = s.request("POST", path, body, headers)
    return status, json.loads(raw)["error"]


BAD = [
    ({"inputs": [{"name": "z", "shape": [1], "datatype": "FP32", "data": [1]}]}, 400,
     "unexpected inference input 'z' for model 'hpt'"),
    ({"inputs": [{"name": "x", "shape": [1], "datatype": "INT32", "data": [1]}]}, 400,
     "input 'x': datatype INT32 does not match the model's FP32"),
    ({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32", "data": [1]}]}, 400,
     "input 'x': 1 data elements given, its shape holds 2"),
    ({"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1]}]}, 400,
     "input 'x': shape [1,1] does not match the model's [?]"),
    ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": ["a"]}]}, 400,
     "is not a number"),
    ({"inputs": []}, 400, "expected 1 inputs but got 0 inputs for model 'hpt'"),
    ({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}],
      "outputs": [{"name": "q"}]}, 400, "unexpected inference output 'q' for model 'hpt'"),
    ({"inputs": [{"name": "x", "shape": [-1], "datatype": "FP32", "data": []}]}, 400,
     "negative dimension"),
    ({"outputs": []}, 400, "the request has no 'inputs' list"),
]


@pytest.mark.parametrize("body,status,msg", BAD)
def test_rest_errors(hpt, body, status, msg):
    s, h, g = hpt
    got_status, got = error(s, "/v2/models/hpt/infer", json.dumps(body))
    assert got_status == status and msg in got, got


def test_rest_error_statuses(hpt):
    s, h, g = hpt
    assert error(s, "/v2/models/hpt/infer", "{")[0] == 400
    body = json.dumps({"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [1]}]})
    st, msg = error(s, "/v2/models/nope/infer", body)
    assert st == 404 and "nope" in msg
    st, msg = error(s, "/v2/models/hpt/versions/9/infer", body)
    assert st == 404
    st, msg = error(s, "/v2/models/hpt/versions/x/infer", body)
    assert st == 400 and "invalid model version 'x'" in msg
    header = json.dumps({"inputs": [{"name": "x", "shape": [2], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 8}}]}).encode()
    st, msg = error(s, "/v2/models/hpt/infer", header + b"\0" * 4,
                    {"Inference-Header-Content-Length": str(len(header))})
    assert st == 400 and "runs past the end of the body" in msg
    st, msg = error(s, "/v2/models/hpt/infer", header + b"\0" * 12,
                    {"Inference-Header-Content-Length": str(len(header))})
    assert st == 400 and "12 bytes of binary data follow the JSON, the inputs use 8" in msg
    status, _, raw = s.request("GET", "/v2/models/hpt/nothing")
    assert status == 404 and "error" in json.loads(raw)
    # the server still serves
    status, out = s.json("POST", "/v2/models/hpt/infer", body)
    assert status == 200 and out["outputs"][0]["data"] == [2.5]


def test_grpc_error_codes(hpt):
    s, h, g = hpt
    i = tgrpc.InferInput("x", [1], "FP32")
    i.set_data_from_numpy(np.array([1.0], np.float32))
    cases = [(lambda: g.infer("nope", [i]), "StatusCode.NOT_FOUND"),
             (lambda: g.infer("hpt", [i], model_version="x"), "StatusCode.INVALID_ARGUMENT"),
             (lambda: g.get_model_metadata("nope"), "StatusCode.NOT_FOUND")]
    bad = tgrpc.InferInput("x", [1], "FP64")
    bad.set_data_from_numpy(np.array([1.0], np.float64))
    cases.append((lambda: g.infer("hpt", [bad]), "StatusCode.INVALID_ARGUMENT"))
    short = tgrpc.InferInput("x", [2], "FP32")
    short._raw_content = b"\0" * 4
    cases.append((lambda: g.infer("hpt", [short]), "StatusCode.INVALID_ARGUMENT"))
    for call, code in cases:
        with pytest.raises(InferenceServerException) as e:
            call()
        assert e.value.status() == code, (code, e.value)
