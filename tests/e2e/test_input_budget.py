"""--tensord_max_request_input_bytes beyond Predict: Classify / Regress /
MultiInference examples (REST and gRPC; a context is copied into every
example, so a small request can expand to n times its context) and the
KServe v2 infer bodies (REST JSON and binary extension, gRPC typed and raw
contents). Past the budget: 413 / RESOURCE_EXHAUSTED naming the sizes,
before the tensor is allocated (checked on peak RSS, VmHWM, which does not
depend on the machine's speed); within it the request serves."""
import json
import os
import struct

import grpc
import numpy as np
import pytest
from tensorflow_serving.apis import (classification_pb2, inference_pb2, prediction_service_pb2_grpc,
                                     regression_pb2)
from tritonclient.grpc import service_pb2, service_pb2_grpc

from conftest import EXAMPLES, MODELS

HPT = os.path.join(EXAMPLES, "half_plus_two")  # y = 0.5 x + 2, input "x" float
TF1 = os.path.join(MODELS, "half_plus_two_tf1")  # classify_x_to_y / regress_x_to_y
ENTRY = 16 + 1  # a string element's table entry and NUL (eng_tensor_strings_size)


def peak_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def example_bytes(x):
    from tensorflow.core.example import example_pb2, feature_pb2
    return example_pb2.Example(features=feature_pb2.Features(feature={
        "x": feature_pb2.Feature(float_list=feature_pb2.FloatList(value=[x]))}))


def context_with(pad):
    """A context Example with a bytes feature of `pad` bytes (ignored by
    the model, merged into every example)."""
    from tensorflow.core.example import example_pb2, feature_pb2
    return example_pb2.Example(features=feature_pb2.Features(feature={
        "pad": feature_pb2.Feature(bytes_list=feature_pb2.BytesList(value=[b"p" * pad]))}))


def rest_error(s, path, body):
    status, _, raw = s.request("POST", path, body.encode() if isinstance(body, str) else body)
    return status, json.loads(raw).get("error", raw)


# --- Classify / Regress -----------------------------------------------------------------

def test_rest_classify_context_is_counted_per_example(serve):
    s = serve("tf1", TF1, "--tensord_max_request_input_bytes=20000")
    body = {"signature_name": "classify_x_to_y", "context": {"pad": "p" * 1000},
            "examples": [{"x": 1.0}] * 30}
    status, err = rest_error(s, "/v1/models/tf1:classify", json.dumps(body))
    assert status == 413, err
    assert "input 'inputs'" in err and "20000" in err, err
    need = int(err.split("would take ")[1].split(" bytes")[0])
    assert need > 30 * 1000, err  # 30 copies of the context
    body["examples"] = [{"x": 1.0}] * 3
    status, out = s.json("POST", "/v1/models/tf1:classify", json.dumps(body))
    assert status == 200, out
    body["signature_name"] = "regress_x_to_y"
    body["examples"] = [{"x": 1.0}] * 30
    status, err = rest_error(s, "/v1/models/tf1:regress", json.dumps(body))
    assert status == 413 and "input 'inputs'" in err, err
    status, out = s.json("POST", "/v1/models/tf1:predict", json.dumps({"instances": [1.0]}))
    assert status == 200, out


def test_rest_classify_amplification_under_the_default_budget(serve):
    """A 1 MiB context and 5000 empty examples (about 1 MiB of JSON) would
    expand to 5 GiB: refused without allocating it."""
    s = serve("tf1", TF1)
    before = peak_rss_kb(s.proc.pid)
    body = json.dumps({"signature_name": "classify_x_to_y", "context": {"pad": "p" * (1 << 20)},
                       "examples": [{}] * 5000})
    status, err = rest_error(s, "/v1/models/tf1:classify", body)
    assert status == 413, err
    assert "input 'inputs'" in err and str(4 << 30) in err, err
    grown = peak_rss_kb(s.proc.pid) - before
    assert grown < 64 * 1024, f"peak RSS grew by {grown} KiB"


def grpc_stub(s):
    ch = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")
    return ch, prediction_service_pb2_grpc.PredictionServiceStub(ch)


def with_context(req, n, pad):
    ctx = req.input.example_list_with_context
    ctx.context.CopyFrom(context_with(pad))
    for i in range(n):
        ctx.examples.add().CopyFrom(example_bytes(float(i)))


def test_grpc_classify_regress_multiinference_budget(serve):
    s = serve("tf1", TF1, "--tensord_max_request_input_bytes=20000")
    ch, stub = grpc_stub(s)
    try:
        req = classification_pb2.ClassificationRequest()
        req.model_spec.name = "tf1"
        req.model_spec.signature_name = "classify_x_to_y"
        with_context(req, 30, 1000)
        with pytest.raises(grpc.RpcError) as e:
            stub.Classify(req, timeout=60)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
        assert "input 'inputs'" in e.value.details() and "20000" in e.value.details()

        rreq = regression_pb2.RegressionRequest()
        rreq.model_spec.name = "tf1"
        rreq.model_spec.signature_name = "regress_x_to_y"
        with_context(rreq, 30, 1000)
        with pytest.raises(grpc.RpcError) as e:
            stub.Regress(rreq, timeout=60)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()

        # Within the budget each serves.
        small = classification_pb2.ClassificationRequest()
        small.CopyFrom(req)
        del small.input.example_list_with_context.examples[3:]
        out = stub.Classify(small, timeout=60)
        assert len(out.result.classifications) == 3

        # MultiInference: every task holds its own copy of the examples, so
        # two tasks of ~12 KB each are past a 20000-byte budget together.
        m = inference_pb2.MultiInferenceRequest()
        for sig in ("classify_x_to_y", "regress_x_to_y"):
            t = m.tasks.add()
            t.model_spec.name = "tf1"
            t.model_spec.signature_name = sig
            t.method_name = ("tensorflow/serving/classify" if sig.startswith("classify")
                             else "tensorflow/serving/regress")
        with_context(m, 12, 1000)
        with pytest.raises(grpc.RpcError) as e:
            stub.MultiInference(m, timeout=60)
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
        del m.input.example_list_with_context.examples[3:]
        out = stub.MultiInference(m, timeout=60)
        assert len(out.results) == 2
    finally:
        ch.close()


# --- KServe v2 ----------------------------------------------------------------------------

def test_v2_rest_json_and_binary_budget(serve):
    s = serve("hpt", HPT, "--tensord_max_request_input_bytes=1000")
    body = {"inputs": [{"name": "x", "shape": [300], "datatype": "FP32", "data": [1.0] * 300}]}
    status, err = rest_error(s, "/v2/models/hpt/infer", json.dumps(body))
    assert status == 413, err
    assert "input 'x'" in err and "1200 bytes" in err and "1000" in err, err
    # The binary extension: the same 1200 bytes.
    header = json.dumps({"inputs": [{"name": "x", "shape": [300], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 1200}}]}).encode()
    status, _, raw = s.request("POST", "/v2/models/hpt/infer", header + b"\0" * 1200,
                               {"Inference-Header-Content-Length": str(len(header))})
    assert status == 413, raw
    assert "1200 bytes" in json.loads(raw)["error"]
    # Within it, it serves.
    body["inputs"][0].update(shape=[2], data=[1.0, 3.0])
    status, out = s.json("POST", "/v2/models/hpt/infer", json.dumps(body))
    assert status == 200 and out["outputs"][0]["data"] == [2.5, 3.5], out


def test_v2_rest_declared_shape_is_charged_before_allocating(serve):
    """A few bytes declaring 2^40 floats (4 TiB) are refused by the default
    budget, not allocated; BYTES are charged once their lengths are known."""
    s = serve("tf1", TF1)
    before = peak_rss_kb(s.proc.pid)
    body = {"inputs": [{"name": "x", "shape": [1 << 40], "datatype": "FP32", "data": [1.0]}]}
    status, err = rest_error(s, "/v2/models/tf1/infer", json.dumps(body))
    assert status == 413, err
    assert f"{4 << 40} bytes" in err and str(4 << 30) in err, err
    # BYTES: a shape of 2^30 elements needs a table entry each (17 GiB).
    body = {"inputs": [{"name": "inputs", "shape": [1 << 30], "datatype": "BYTES",
                        "data": ["a"]}], "parameters": {"signature_name": "classify_x_to_y"}}
    status, err = rest_error(s, "/v2/models/tf1/infer", json.dumps(body))
    assert status == 413 and "input 'inputs'" in err, err
    assert peak_rss_kb(s.proc.pid) - before < 64 * 1024


def test_v2_rest_bytes_lengths_are_charged(serve):
    s = serve("tf1", TF1, "--tensord_max_request_input_bytes=5000")
    strings = [b"s" * 100] * 60  # 6000 bytes of strings, a shape that alone fits
    raw = b"".join(struct.pack("<I", len(x)) + x for x in strings)
    header = json.dumps({"inputs": [{"name": "inputs", "shape": [60], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": len(raw)}}],
                         "parameters": {"signature_name": "classify_x_to_y"}}).encode()
    status, _, out = s.request("POST", "/v2/models/tf1/infer", header + raw,
                               {"Inference-Header-Content-Length": str(len(header))})
    assert status == 413, out
    err = json.loads(out)["error"]
    assert f"{6000 + 60 * ENTRY} bytes" in err and "5000" in err, err


def test_v2_grpc_budget(serve):
    s = serve("tf1", TF1, "--tensord_max_request_input_bytes=1000")
    ch = grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}")
    stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
    try:
        def infer(fill, shape=(300,), name="x", datatype="FP32", sig=None):
            req = service_pb2.ModelInferRequest(model_name="tf1")
            if sig:
                req.parameters["signature_name"].string_param = sig
            t = req.inputs.add(name=name, datatype=datatype, shape=list(shape))
            fill(req, t)
            return stub.ModelInfer(req, timeout=60)

        cases = [
            lambda r, t: t.contents.fp32_contents.extend([1.0] * 300),
            lambda r, t: r.raw_input_contents.append(b"\0" * 1200),
        ]
        for fill in cases:
            with pytest.raises(grpc.RpcError) as e:
                infer(fill)
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
            assert "input 'x'" in e.value.details() and "1200 bytes" in e.value.details()
        # BYTES, typed and raw: 20 strings of 100 bytes (a shape that alone fits).
        strings = [b"s" * 100] * 20
        raw = b"".join(struct.pack("<I", len(x)) + x for x in strings)
        for fill in (lambda r, t: t.contents.bytes_contents.extend(strings),
                     lambda r, t: r.raw_input_contents.append(raw)):
            with pytest.raises(grpc.RpcError) as e:
                infer(fill, shape=(20,), name="inputs", datatype="BYTES", sig="classify_x_to_y")
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e.value.details()
            assert f"{2000 + 20 * ENTRY} bytes" in e.value.details()
        # A raw BYTES input cannot hold more elements than its prefixes: a
        # shape of 2^30 with 8 bytes is refused before anything is sized.
        with pytest.raises(grpc.RpcError) as e:
            infer(lambda r, t: r.raw_input_contents.append(b"\1\0\0\0a\0\0\0"), shape=(1 << 30,),
                  name="inputs", datatype="BYTES", sig="classify_x_to_y")
        assert e.value.code() in (grpc.StatusCode.INVALID_ARGUMENT,
                                  grpc.StatusCode.RESOURCE_EXHAUSTED), e.value.details()
        # Within the budget it serves.
        out = infer(lambda r, t: t.contents.fp32_contents.extend([1.0, 3.0]), shape=(2,))
        assert np.frombuffer(out.raw_output_contents[0], np.float32).tolist() == [2.5, 3.5]
    finally:
        ch.close()
