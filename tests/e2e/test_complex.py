"""Complex tensors at the edge, black-box: the spectral_ops model
(scripts/make_fixtures.py --coverage-ops) has signatures that take and
return complex64. Over gRPC they travel as TensorProtos (tensor_content or
scomplex_val pairs) and match what TensorFlow computes for the same
SavedModel; over REST, as in TF Serving, complex values are refused with a
clear error and the model keeps serving."""
import json
import os

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from conftest import FIXTURES, ROOT

with open(os.path.join(FIXTURES, "coverage_ops.json")) as f:
    ENTRY = json.load(f)["models"]["spectral_ops"]
BASE = os.path.dirname(os.path.join(ROOT, ENTRY["dir"]))
Z = (np.linspace(-1.5, 2.0, 18) + 1j * np.cos(np.arange(18))).astype(np.complex64).reshape(3, 6)
WAVE = np.sin(np.arange(16, dtype=np.float32) * 0.7).reshape(2, 8)


@pytest.fixture(scope="module")
def tf_model():
    return tf.saved_model.load(os.path.join(ROOT, ENTRY["dir"]))


def predict(s, signature, inputs):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "m"
    req.model_spec.signature_name = signature
    for k, v in inputs.items():
        req.inputs[k].CopyFrom(v)
    with grpc.insecure_channel(f"127.0.0.1:{s.grpc_port}") as ch:
        return prediction_service_pb2_grpc.PredictionServiceStub(ch).Predict(req, timeout=30)


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype)
    err = np.abs(got - want) / np.maximum(np.abs(want), 1e-2)
    assert err.max() <= 1e-4, err.max()


def scomplex_proto(z):
    """The typed form: (real, imaginary) pairs in scomplex_val."""
    t = tensor_pb2.TensorProto(dtype=types_pb2.DT_COMPLEX64)
    t.tensor_shape.CopyFrom(tensor_shape_pb2.TensorShapeProto(
        dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=d) for d in z.shape]))
    t.scomplex_val.extend(np.stack([z.real, z.imag], axis=-1).reshape(-1).tolist())
    return t


@pytest.mark.parametrize("form", ["tensor_content", "scomplex_val"])
def test_grpc_complex_in_and_out_match_tensorflow(serve, tf_model, form):
    s = serve("m", BASE)
    z = tf.make_tensor_proto(Z) if form == "tensor_content" else scomplex_proto(Z)
    resp = predict(s, "spectrum", {"z": z})
    want = tf_model.signatures["spectrum"](z=tf.constant(Z))
    assert resp.outputs["spectrum"].dtype == types_pb2.DT_COMPLEX64
    close(tf.make_ndarray(resp.outputs["spectrum"]), want["spectrum"].numpy())
    close(tf.make_ndarray(resp.outputs["power"]), want["power"].numpy())


def test_grpc_real_input_complex_output(serve, tf_model):
    s = serve("m", BASE)
    resp = predict(s, "rfft", {"wave": tf.make_tensor_proto(WAVE)})
    want = tf_model.signatures["rfft"](wave=tf.constant(WAVE))["spectrum"].numpy()
    out = tf.make_ndarray(resp.outputs["spectrum"])
    assert out.shape == (2, 5)
    close(out, want)


def test_grpc_odd_scomplex_count_is_invalid_argument(serve):
    s = serve("m", BASE)
    bad = scomplex_proto(Z[:1])
    bad.scomplex_val.append(1.0)  # 13 parts: not whole (real, imaginary) pairs
    with pytest.raises(grpc.RpcError) as e:
        predict(s, "spectrum", {"z": bad})
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tensor parsing error: z" in e.value.details(), e.value.details()


def test_rest_refuses_complex_values_and_keeps_serving(serve):
    s = serve("m", BASE)
    # A complex output: TF Serving's JSON writer has no form for it.
    status, out = s.json("POST", "/v1/models/m:predict", json.dumps(
        {"signature_name": "rfft", "inputs": {"wave": WAVE.tolist()}}))
    assert status == 400, out
    assert out["error"] == "Failed to write JSON value for tensor type: complex64", out
    # A complex input: nor has its JSON reader.
    status, out = s.json("POST", "/v1/models/m:predict", json.dumps(
        {"signature_name": "spectrum", "inputs": {"z": [[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]]}}))
    assert status == 501, out
    assert "to type: complex64" in out["error"], out
    # The real-valued signature still answers, and gRPC still carries complex.
    status, out = s.json("POST", "/v1/models/m:predict", json.dumps(
        {"inputs": {"x": np.zeros((1, 3, 5)).tolist(), "wave": np.ones((1, 8)).tolist()}}))
    assert status == 200, out
    assert sorted(out["outputs"]) == sorted(ENTRY["outputs"])
    resp = predict(s, "rfft", {"wave": tf.make_tensor_proto(np.ones((1, 8), np.float32))})
    spec = tf.make_ndarray(resp.outputs["spectrum"])
    assert spec[0, 0] == 8 and np.abs(spec[0, 1:]).max() < 1e-6, spec


def test_complex_reduction_fails_its_load_and_the_old_version_keeps_serving(serve, tmp_path):
    # reduce_sum over complex64 runs in TensorFlow, not in tensord's Sum
    # kernel: the load-time check refuses version 2 naming the node and the
    # dtype, rather than a version that loads and fails every request.
    import shutil
    from test_lifecycle import stage, status, wait_for
    base = tmp_path / "m"
    base.mkdir()
    shutil.copytree(os.path.join(ROOT, ENTRY["dir"]), base / "1")
    s = serve("m", str(base), "--file_system_poll_wait_seconds=0.2", "--max_num_load_retries=0")
    resp = predict(s, "rfft", {"wave": tf.make_tensor_proto(WAVE)})
    assert resp.outputs["spectrum"].dtype == types_pb2.DT_COMPLEX64
    stage(base, 2, os.path.join(FIXTURES, "models", "refused", "complex_sum", "1"))
    v = wait_for(lambda: (lambda x: x if x and x["state"] == "END" else None)(status(s).get(2)), 60)
    assert v, status(s)
    msg = v["status"]["error_message"]
    assert "(Sum)" in msg and "T complex64 is not supported" in msg, msg
    resp = predict(s, "rfft", {"wave": tf.make_tensor_proto(WAVE)})
    assert tf.make_ndarray(resp.outputs["spectrum"]).shape == (2, 5)
