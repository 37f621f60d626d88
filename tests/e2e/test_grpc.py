"""gRPC API tests with the stock TF Serving client (tensorflow-serving-api's
PredictionServiceStub / ModelServiceStub, unchanged) against the real
tensord binary: every RPC, TCP, UNIX socket and TLS, the error cases with
TF Serving's codes and messages, deadlines, and TensorFlow's numbers
(tests/fixtures/reference.json) -- the same numbers REST gives."""
import concurrent.futures
import json
import os
import struct
import subprocess
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2,
                                     model_management_pb2, model_service_pb2_grpc,
                                     predict_pb2, prediction_service_pb2_grpc)

from conftest import (BINARY, EXAMPLES, MODELS, ROOT, metric_sum, prometheus_flag, queue_depth,
                      wait_for)

HPT = os.path.join(EXAMPLES, "half_plus_two")  # version 123, y = 0.5x + 2
TRANSFORMER = os.path.join(MODELS, "zoo", "transformer")
BIG = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def channel(target, creds=None, options=()):
    if creds is not None:
        return grpc.secure_channel(target, creds, options=list(options))
    return grpc.insecure_channel(target, options=list(options))


class Client:
    """The stock stubs on one channel."""

    def __init__(self, target, creds=None, options=()):
        self.ch = channel(target, creds, options)
        self.predict_stub = prediction_service_pb2_grpc.PredictionServiceStub(self.ch)
        self.model_stub = model_service_pb2_grpc.ModelServiceStub(self.ch)

    def predict(self, req, timeout=10):
        return self.predict_stub.Predict(req, timeout=timeout)

    def close(self):
        self.ch.close()


@pytest.fixture
def grpc_serve(serve):
    """grpc_serve(model_name, base_path, *flags) -> (server, Client on TCP)."""
    clients = []

    def start(name, base, *flags):
        s = serve(name, base, *flags)
        c = Client(f"127.0.0.1:{s.grpc_port}")
        clients.append(c)
        return s, c

    yield start
    for c in clients:
        c.close()


def predict_request(name="half_plus_two", x=(1.0, 2.0, 5.0), signature=None, version=None,
                    label=None, output_filter=()):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = name
    if signature is not None:
        req.model_spec.signature_name = signature
    if version is not None:
        req.model_spec.version.value = version
    if label is not None:
        req.model_spec.version_label = label
    if x is not None:
        req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array(x, dtype=np.float32)))
    req.output_filter.extend(output_filter)
    return req


def rpc_error(fn, *args, **kw):
    with pytest.raises(grpc.RpcError) as e:
        fn(*args, **kw)
    return e.value.code(), e.value.details()


# --- Predict ---------------------------------------------------------------------

def test_predict_typed_fields_and_model_spec(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT)
    resp = c.predict(predict_request())
    assert list(resp.outputs) == ["y"]
    y = resp.outputs["y"]
    assert y.dtype == types_pb2.DT_FLOAT
    assert [d.size for d in y.tensor_shape.dim] == [3]
    assert list(y.float_val) == [2.5, 3.0, 4.5]  # typed field by default
    assert y.tensor_content == b""
    # TF Serving's MakeModelSpec: name, the signature used, the version served.
    assert resp.model_spec.name == "half_plus_two"
    assert resp.model_spec.signature_name == "serving_default"
    assert resp.model_spec.version.value == 123


def test_concurrent_small_and_large_predicts_all_answer(grpc_serve):
    # Small calls run inline on the polling thread once measured short;
    # larger ones than any seen go to the one engine worker. Mixed and
    # concurrent, each call gets its own right answer.
    _, c = grpc_serve("half_plus_two", HPT, "--tensord_num_workers=1", "--grpc_max_threads=1")

    def one(i):
        n = 3 if i % 3 else 512 + i
        xs = np.arange(n, dtype=np.float32) + i
        y = c.predict(predict_request(x=xs)).outputs["y"]
        assert list(y.float_val) == list(0.5 * xs + 2)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(200)))


def test_predict_by_version_label_signature_and_filter(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT)
    for req in (predict_request(version=123), predict_request(signature="serving_default"),
                predict_request(output_filter=["y"])):
        resp = c.predict(req)
        assert list(resp.outputs["y"].float_val) == [2.5, 3.0, 4.5]
        assert resp.model_spec.version.value == 123
        assert resp.model_spec.signature_name == "serving_default"


def test_predict_tensor_content_flag(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT, "--enable_serialization_as_tensor_content")
    y = c.predict(predict_request()).outputs["y"]
    assert len(y.float_val) == 0
    assert len(y.tensor_content) == 12
    assert tf.make_ndarray(y).tolist() == [2.5, 3.0, 4.5]


def raw_predict(c, body, timeout=10):
    """Sends hand-encoded PredictRequest bytes through the stock channel."""
    call = c.ch.unary_unary("/tensorflow.serving.PredictionService/Predict",
                            request_serializer=None,
                            response_deserializer=predict_pb2.PredictResponse.FromString)
    return call(body, timeout=timeout)


def ld(field, payload):
    """A length-delimited field (wire type 2); field < 16, payload < 128 bytes."""
    assert field < 16 and len(payload) < 128
    return bytes([field << 3 | 2, len(payload)]) + payload


def test_predict_every_input_encoding(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT)
    want = [2.5, 3.0, 4.5]
    # tensor_content
    tp = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT,
                                tensor_content=np.array([1, 2, 5], np.float32).tobytes())
    tp.tensor_shape.dim.add().size = 3
    req = predict_request(x=None)
    req.inputs["x"].CopyFrom(tp)
    assert list(c.predict(req).outputs["y"].float_val) == want
    # packed float_val (what Python writes)
    req.inputs["x"].ClearField("tensor_content")
    req.inputs["x"].float_val.extend([1, 2, 5])
    assert list(c.predict(req).outputs["y"].float_val) == want
    # unpacked float_val: one fixed32 tag per value, hand-encoded
    shape = ld(2, ld(2, b"\x08\x03"))  # tensor_shape { dim { size: 3 } }
    vals = b"".join(b"\x2d" + struct.pack("<f", v) for v in (1, 2, 5))
    tensor = b"\x08\x01" + shape + vals  # dtype: DT_FLOAT
    body = ld(1, ld(1, b"half_plus_two")) + ld(2, ld(1, b"x") + ld(2, tensor))
    assert list(raw_predict(c, body).outputs["y"].float_val) == want
    # one value fills the shape; no values means zeros
    tp = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT, float_val=[7.0])
    tp.tensor_shape.dim.add().size = 4
    req.inputs["x"].CopyFrom(tp)
    assert list(c.predict(req).outputs["y"].float_val) == [5.5] * 4
    del req.inputs["x"].float_val[:]
    assert list(c.predict(req).outputs["y"].float_val) == [2.0] * 4


def test_predict_large_message(grpc_serve):
    # Beyond gRPC's 4 MiB default in both directions: the server allows INT32_MAX.
    s, _ = grpc_serve("half_plus_two", HPT)
    c = Client(f"127.0.0.1:{s.grpc_port}", options=BIG)
    x = np.arange(2_000_000, dtype=np.float32)
    resp = c.predict(predict_request(x=x), timeout=60)
    assert np.array_equal(tf.make_ndarray(resp.outputs["y"]), x * np.float32(0.5) + 2)
    c.close()


# --- errors: the same codes and messages as TF Serving ----------------------------

def test_predict_errors(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT)
    IA, NF, FP = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                  grpc.StatusCode.FAILED_PRECONDITION)
    cases = [
        (predict_request(name="nope"), NF, "Servable not found for request: Latest(nope)"),
        (predict_request(version=7), NF,
         "Servable not found for request: Specific(half_plus_two, 7)"),
        (predict_request(name=""), IA, "ModelSpec has no name specified."),
        (predict_request(signature="nope"), FP, 'Serving signature key "nope" not found.'),
        (predict_request(output_filter=["z"]), IA,
         "output tensor alias not found in signature: z Outputs expected to be in the set {y}."),
        (predict_request(output_filter=["y", "y"]), IA, "duplicate output tensor alias: y"),
    ]
    req = predict_request()
    req.ClearField("model_spec")
    cases.append((req, IA, "Missing ModelSpec"))
    req = predict_request(x=None)
    cases.append((req, IA, "input size does not match signature: 0!=1 len({}) != len({x}). "
                           "Sent extra: {}. Missing but required: {x}."))
    req = predict_request()
    req.inputs["b"].CopyFrom(req.inputs["x"])
    req.inputs["a"].CopyFrom(req.inputs["x"])
    cases.append((req, IA, "input size does not match signature: 3!=1 len({a,b,x}) != len({x}). "
                           "Sent extra: {a,b}. Missing but required: {}."))
    req = predict_request()
    req.inputs["w"].CopyFrom(req.inputs.pop("x"))
    cases.append((req, IA, "input tensor alias not found in signature: w. "
                           "Inputs expected to be in the set {x}."))
    req = predict_request()
    req.inputs["x"].tensor_content = b"\0" * 5  # 3 floats need 12 bytes
    cases.append((req, IA, "tensor parsing error: x"))
    req = predict_request()
    req.inputs["x"].dtype = types_pb2.DT_INVALID
    cases.append((req, IA, "tensor parsing error: x"))
    req = predict_request(x=None)
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([1.0], np.float64)))
    cases.append((req, IA, "Expects arg[0] to be float but double is provided"))
    for req, code, msg in cases:
        got = rpc_error(c.predict, req)
        assert got == (code, msg), req


def test_long_messages_truncated_as_tf_serving(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT)
    req = predict_request()
    alias = "a" * 1500
    req.inputs[alias].CopyFrom(req.inputs.pop("x"))
    code, msg = rpc_error(c.predict, req)
    full = (f"input tensor alias not found in signature: {alias}. "
            "Inputs expected to be in the set {x}.")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert msg == full[:1024] + "...TRUNCATED"


def test_unavailable_when_no_version_loaded(grpc_serve, model_copy):
    # A version whose checkpoint lacks a variable fails to load: the model
    # is configured but has nothing to serve.
    s, c = grpc_serve("m", os.path.join(MODELS, "missing_var"), "--max_num_load_retries=0")
    code, msg = rpc_error(c.predict, predict_request(name="m"))
    assert code == grpc.StatusCode.UNAVAILABLE
    assert msg == "Servable not found for request: Latest(m)"
    st = c.model_stub.GetModelStatus(status_request("m"), timeout=10)
    assert len(st.model_version_status) == 1
    v = st.model_version_status[0]
    assert v.state == get_model_status_pb2.ModelVersionStatus.END
    assert v.status.error_code != 0 and v.status.error_message


def test_unknown_method_and_bad_bytes(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT)
    call = c.ch.unary_unary("/tensorflow.serving.PredictionService/Nope",
                            request_serializer=None, response_deserializer=None)
    code, msg = rpc_error(call, b"", timeout=10)
    assert code == grpc.StatusCode.UNIMPLEMENTED and "Nope" in msg
    code, _ = rpc_error(raw_predict, c, b"\x0a\xff\xff")  # truncated field
    assert code == grpc.StatusCode.INTERNAL
    # The server is unharmed.
    assert list(c.predict(predict_request()).outputs["y"].float_val) == [2.5, 3.0, 4.5]


# --- GetModelMetadata -------------------------------------------------------------

def metadata_request(name="half_plus_two", fields=("signature_def",), version=None):
    req = get_model_metadata_pb2.GetModelMetadataRequest()
    req.model_spec.name = name
    if version is not None:
        req.model_spec.version.value = version
    req.metadata_field.extend(fields)
    return req


def saved_signature_defs(version_dir):
    sm = saved_model_pb2.SavedModel()
    with open(os.path.join(version_dir, "saved_model.pb"), "rb") as f:
        sm.ParseFromString(f.read())
    (mg,) = [m for m in sm.meta_graphs if list(m.meta_info_def.tags) == ["serve"]]
    return mg.signature_def


@pytest.mark.parametrize("base,version", [
    (HPT, 123),
    (os.path.join(MODELS, "half_plus_two_tf1"), 123),
    (os.path.join(MODELS, "half_plus_three_tf2"), 2),
] + [(os.path.join(MODELS, "zoo", m), 1) for m in ("cnn", "mlp", "transformer", "two_io")])
def test_metadata_is_the_saved_models_signature_defs(grpc_serve, base, version):
    _, c = grpc_serve("m", base)
    resp = c.predict_stub.GetModelMetadata(metadata_request("m"), timeout=10)
    assert resp.model_spec.name == "m"
    assert resp.model_spec.version.value == version
    assert resp.model_spec.signature_name == ""
    assert list(resp.metadata) == ["signature_def"]
    any_msg = resp.metadata["signature_def"]
    assert any_msg.type_url == "type.googleapis.com/tensorflow.serving.SignatureDefMap"
    got = get_model_metadata_pb2.SignatureDefMap()
    assert any_msg.Unpack(got)
    vdir = os.path.join(base, f"{version:08d}")
    want = saved_signature_defs(vdir if os.path.isdir(vdir) else os.path.join(base, str(version)))
    assert dict(got.signature_def) == dict(want)


def test_metadata_errors(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT)
    md = c.predict_stub.GetModelMetadata
    IA = grpc.StatusCode.INVALID_ARGUMENT
    assert rpc_error(md, metadata_request(fields=()), timeout=10) == (
        IA, "GetModelMetadataRequest must specify at least one metadata_field")
    assert rpc_error(md, metadata_request(fields=("foo",)), timeout=10) == (
        IA, "Metadata field foo is not supported")
    req = metadata_request()
    req.ClearField("model_spec")
    assert rpc_error(md, req, timeout=10) == (IA, "Missing ModelSpec")
    assert rpc_error(md, metadata_request(name="nope"), timeout=10) == (
        grpc.StatusCode.NOT_FOUND, "Servable not found for request: Latest(nope)")
    assert rpc_error(md, metadata_request(version=9), timeout=10) == (
        grpc.StatusCode.NOT_FOUND, "Servable not found for request: Specific(half_plus_two, 9)")


# --- ModelService -----------------------------------------------------------------

def status_request(name="half_plus_two", version=None):
    req = get_model_status_pb2.GetModelStatusRequest()
    req.model_spec.name = name
    if version is not None:
        req.model_spec.version.value = version
    return req


def test_get_model_status(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT)
    for req in (status_request(), status_request(version=123)):
        resp = c.model_stub.GetModelStatus(req, timeout=10)
        assert len(resp.model_version_status) == 1
        v = resp.model_version_status[0]
        assert v.version == 123
        assert v.state == get_model_status_pb2.ModelVersionStatus.AVAILABLE
        assert v.status.error_code == 0 and v.status.error_message == ""
    code, msg = rpc_error(c.model_stub.GetModelStatus, status_request(version=7), timeout=10)
    assert code == grpc.StatusCode.NOT_FOUND
    code, msg = rpc_error(c.model_stub.GetModelStatus, status_request(name="nope"), timeout=10)
    assert code == grpc.StatusCode.NOT_FOUND
    req = status_request()
    req.ClearField("model_spec")
    assert rpc_error(c.model_stub.GetModelStatus, req, timeout=10) == (
        grpc.StatusCode.INVALID_ARGUMENT, "Missing ModelSpec")


def test_status_matches_rest(grpc_serve):
    s, c = grpc_serve("half_plus_two", HPT)
    status, rest = s.json("GET", "/v1/models/half_plus_two")
    assert status == 200
    resp = c.model_stub.GetModelStatus(status_request(), timeout=10)
    assert [str(v.version) for v in resp.model_version_status] == [
        v["version"] for v in rest["model_version_status"]]


def reload_request(*models):
    req = model_management_pb2.ReloadConfigRequest()
    for name, base in models:
        cfg = req.config.model_config_list.config.add()
        cfg.name = name
        cfg.base_path = base
        cfg.model_platform = "tensorflow"
    return req


def test_reload_config(grpc_serve):
    s, c = grpc_serve("half_plus_two", HPT)
    resp = c.model_stub.HandleReloadConfigRequest(
        reload_request(("half_plus_two", HPT), ("three", os.path.join(MODELS, "half_plus_three_tf2"))),
        timeout=60)
    assert resp.status.error_code == 0, resp.status.error_message
    # Blocks until loaded: the new model answers at once (its latest
    # version, 2: y = 0.5 x + 4).
    y = c.predict(predict_request(name="three", x=[2.0])).outputs["y"]
    assert list(y.float_val) == [5.0]
    # A config that is not a model_config_list is refused inside the response.
    req = model_management_pb2.ReloadConfigRequest()
    req.config.custom_model_config.type_url = "x"
    resp = c.model_stub.HandleReloadConfigRequest(req, timeout=60)
    assert resp.status.error_code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert resp.status.error_message == (
        "ServerModelConfig type not supported by HandleReloadConfigRequest. "
        "Only ModelConfigList is currently supported")


# --- health -------------------------------------------------------------------------

def health_check(c, service, timeout=10):
    # grpc.health.v1 HealthCheckRequest { string service = 1; }, encoded by hand
    # so the test needs no extra package; the response's field 1 is the status.
    call = c.ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=None,
                            response_deserializer=None)
    body = service.encode()
    resp = call((b"\x0a" + bytes([len(body)]) + body) if body else b"", timeout=timeout)
    return resp[1] if resp else 0


def test_health_service(grpc_serve):
    _, c = grpc_serve("half_plus_two", HPT)
    SERVING = 1
    for name in ("", "tensorflow.serving.PredictionService", "tensorflow.serving.ModelService",
                 "PredictionService", "ModelService"):
        assert health_check(c, name) == SERVING, name
    code, msg = rpc_error(health_check, c, "nope")
    assert code == grpc.StatusCode.NOT_FOUND
    watch = c.ch.unary_stream("/grpc.health.v1.Health/Watch", request_serializer=None,
                              response_deserializer=None)
    code, msg = rpc_error(lambda: list(watch(b"", timeout=10)))
    assert code == grpc.StatusCode.UNIMPLEMENTED and "Check" in msg


# --- transports ---------------------------------------------------------------------

def test_unix_socket(serve, tmp_path):
    path = str(tmp_path / "grpc.sock")
    s = serve("half_plus_two", HPT, f"--grpc_socket_path={path}")
    c = Client(f"unix:{path}")
    resp = c.predict(predict_request())
    assert list(resp.outputs["y"].float_val) == [2.5, 3.0, 4.5]
    c.close()
    # TCP keeps working alongside.
    c = Client(f"127.0.0.1:{s.grpc_port}")
    assert list(c.predict(predict_request()).outputs["y"].float_val) == [2.5, 3.0, 4.5]
    c.close()


def test_channel_arguments(serve):
    # TF Serving's own test passes these; an unknown string-valued key is fine.
    s = serve("half_plus_two", HPT, "--grpc_channel_arguments="
              "grpc.max_connection_age_ms=2000,grpc.lb_policy_name=grpclb,grpc.so_reuseaddr=1")
    c = Client(f"127.0.0.1:{s.grpc_port}")
    assert list(c.predict(predict_request()).outputs["y"].float_val) == [2.5, 3.0, 4.5]
    c.close()


def test_bad_grpc_flags_fail_cleanly(tmp_path):
    for flag, words in (("--grpc_channel_arguments=novalue", "key=value"),
                        ("--ssl_config_file=" + str(tmp_path / "missing.txt"), "ssl_config_file"),
                        ("--grpc_max_threads=-1", "grpc_max_threads")):
        p = subprocess.run([BINARY, "--port=0", "--rest_api_port=0", "--model_name=m",
                            f"--model_base_path={HPT}", "--grpc_socket_path=" +
                            str(tmp_path / "s.sock"), flag],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode != 0, flag
        assert words in p.stdout + p.stderr, (flag, p.stdout + p.stderr)


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A throwaway CA, a server certificate for localhost/127.0.0.1 and a
    client certificate, made with the openssl command-line tool."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=test-ca",
            "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for who in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={who}", "-keyout",
                f"{who}.key", "-out", f"{who}.csr", cwd=d)
        openssl("x509", "-req", "-in", f"{who}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", "ext.cnf", "-out", f"{who}.pem",
                cwd=d)
    return {p.stem + p.suffix: p.read_bytes() for p in d.iterdir()}


def ssl_config(tmp_path, pki, client_verify):
    def q(b):
        return json.dumps(b.decode())  # a double-quoted string with \n escapes
    text = (f"server_key: {q(pki['server.key'])}\nserver_cert: {q(pki['server.pem'])}\n"
            f"custom_ca: {q(pki['ca.pem'])}\nclient_verify: {str(client_verify).lower()}\n")
    path = tmp_path / f"ssl-{client_verify}.txt"
    path.write_text(text)
    return str(path)


def test_tls(serve, tmp_path, pki):
    s = serve("half_plus_two", HPT, f"--ssl_config_file={ssl_config(tmp_path, pki, False)}")
    target = f"localhost:{s.grpc_port}"
    c = Client(target, grpc.ssl_channel_credentials(root_certificates=pki["ca.pem"]))
    assert list(c.predict(predict_request()).outputs["y"].float_val) == [2.5, 3.0, 4.5]
    c.close()
    # Plaintext is refused on a TLS port.
    c = Client(target)
    code, _ = rpc_error(c.predict, predict_request(), timeout=5)
    assert code == grpc.StatusCode.UNAVAILABLE
    c.close()


def test_tls_client_verification(serve, tmp_path, pki):
    s = serve("half_plus_two", HPT, f"--ssl_config_file={ssl_config(tmp_path, pki, True)}")
    target = f"localhost:{s.grpc_port}"
    c = Client(target, grpc.ssl_channel_credentials(
        root_certificates=pki["ca.pem"], private_key=pki["client.key"],
        certificate_chain=pki["client.pem"]))
    assert list(c.predict(predict_request()).outputs["y"].float_val) == [2.5, 3.0, 4.5]
    c.close()
    c = Client(target, grpc.ssl_channel_credentials(root_certificates=pki["ca.pem"]))
    code, _ = rpc_error(c.predict, predict_request(), timeout=5)
    assert code == grpc.StatusCode.UNAVAILABLE  # no client certificate: handshake refused
    c.close()


# --- deadlines ------------------------------------------------------------------------

def test_deadline_abandons_queued_work(serve, tmp_path):
    # One engine worker and calls that are small to send but slow to run
    # (the zoo transformer on 8192 sequences: 1 MB in, a few hundred ms of
    # engine time). Calls queued behind the slow ones with a deadline far
    # shorter than one run answer DEADLINE_EXCEEDED, and their runs are
    # dropped: the engine's run count (tensord_runs_total, counted when a run
    # starts) holds only the calls that were answered. Every step waits on the
    # server's own counts, not on the machine's speed.
    s = serve("tr", TRANSFORMER, "--tensord_num_workers=1", prometheus_flag(tmp_path))
    c = Client(f"127.0.0.1:{s.grpc_port}", options=BIG)
    batch = predict_pb2.PredictRequest()
    batch.model_spec.name = "tr"
    for alias in ("token_ids", "attention_mask"):
        batch.inputs[alias].CopyFrom(tf.make_tensor_proto(np.ones((8192, 16), np.int32)))
    body = batch.SerializeToString()  # serialized once: the client stays fast

    def runs():
        return metric_sum(s, "tensord_runs_total", model_name="tr")

    raw_predict(c, body, timeout=120)  # warm
    n_slow, n_hurried = 4, 8
    with concurrent.futures.ThreadPoolExecutor(n_slow + n_hurried) as pool:
        slow = [pool.submit(raw_predict, c, body, 300) for _ in range(n_slow)]
        # One slow call runs and the others wait: the hurried ones queue
        # behind at least one whole run.
        wait_for(lambda: queue_depth(s, "tr") >= n_slow - 1, "the slow calls to be queued")
        hurried = [pool.submit(raw_predict, c, body, 0.05) for _ in range(n_hurried)]
        codes = []
        for f in hurried:
            with pytest.raises(grpc.RpcError) as e:
                f.result()
            codes.append(e.value.code())
        for f in slow:
            assert f.result().outputs["output_0"].tensor_shape.dim[0].size == 8192
    assert codes == [grpc.StatusCode.DEADLINE_EXCEEDED] * n_hurried
    # Had the abandoned runs gone ahead, this call would queue behind them
    # and they would be counted before it answers.
    raw_predict(c, body, timeout=300)
    assert runs() == 1 + n_slow + 1
    c.close()


# --- TensorFlow's numbers, the same as REST ---------------------------------------

MODEL_DIRS = {
    "examples/half_plus_two/00000123": HPT,
    "tests/fixtures/models/half_plus_two_tf1/00000123": os.path.join(MODELS, "half_plus_two_tf1"),
    "tests/fixtures/models/half_plus_three_tf2/00000002": os.path.join(MODELS,
                                                                       "half_plus_three_tf2"),
}


@pytest.mark.parametrize("key", sorted(MODEL_DIRS))
def test_predictions_equal_tensorflow_and_rest(grpc_serve, reference, key):
    ref = reference["models"][key]
    s, c = grpc_serve("m", MODEL_DIRS[key])
    column = ref.get("tf_feed_shape") == [-1, 1]
    for case in ref["cases"]:
        x = np.array(case["x"], np.float32).reshape((-1, 1) if column else (-1,))
        resp = c.predict(predict_request(name="m", x=x))
        got = tf.make_ndarray(resp.outputs["y"]).reshape(-1).tolist()
        want = [f32(v) for v in case["y"]]
        assert got == want, case["x"]  # bit-identical float32
        status, out = s.json("POST", "/v1/models/m:predict",
                             json.dumps({"inputs": x.tolist()}))
        assert status == 200
        rest = np.array(out["outputs"], np.float32).reshape(-1).tolist()
        assert rest == got


# The model zoo (Keras / TF2 models, int32 and float inputs, two outputs):
# gRPC gives TensorFlow's numbers (zoo.json) and exactly what REST gives.
from test_zoo import CASES as ZOO_CASES, ZOO, check as zoo_check, zoo_input  # noqa: E402


@pytest.mark.parametrize("model,batch", ZOO_CASES)
def test_zoo_over_grpc_matches_tensorflow_and_rest(grpc_serve, model, batch):
    entry = ZOO[model]
    s, c = grpc_serve(model, os.path.dirname(os.path.join(ROOT, entry["dir"])))
    req = predict_pb2.PredictRequest()
    req.model_spec.name = model
    inputs = {}
    for alias, spec in entry["inputs"].items():
        inputs[alias] = zoo_input(spec, batch)
        req.inputs[alias].CopyFrom(tf.make_tensor_proto(
            np.array(inputs[alias], dtype=np.dtype(spec["dtype"]))))
    resp = c.predict(req, timeout=60)
    assert sorted(resp.outputs) == sorted(entry["outputs"])
    status, rest = s.json("POST", f"/v1/models/{model}:predict", json.dumps({"inputs": inputs}))
    assert status == 200, rest
    rest = rest["outputs"]
    for alias, ref in entry["outputs"].items():
        got = tf.make_ndarray(resp.outputs[alias])
        zoo_check(alias, got.tolist(), ref["batch%d" % batch])
        want_rest = rest if len(entry["outputs"]) == 1 else rest[alias]
        assert np.array_equal(got, np.array(want_rest, dtype=got.dtype)), alias


# --- Classify, Regress, MultiInference (TF1 model with classify/regress signatures) ---

from tensorflow_serving.apis import classification_pb2, inference_pb2, regression_pb2  # noqa: E402

TF1 = os.path.join(MODELS, "half_plus_two_tf1")
TF1_KEY = "tests/fixtures/models/half_plus_two_tf1/00000123"


def example(features):
    ex = tf.train.Example()
    for k, v in features.items():
        vals = v if isinstance(v, list) else [v]
        ex.features.feature[k].float_list.value.extend(vals)
    return ex


def fill_input(inp, body):
    if "context" in body:
        inp.example_list_with_context.context.CopyFrom(example(body["context"]))
        inp.example_list_with_context.examples.extend(example(e) for e in body["examples"])
    else:
        inp.example_list.examples.extend(example(e) for e in body["examples"])


def infer_request(cls, signature, body, name="default"):
    req = cls()
    req.model_spec.name = name
    req.model_spec.signature_name = signature
    fill_input(req.input, body)
    return req


def test_tf_serving_own_classify_regress_multi_inference(grpc_serve):
    # tensorflow_model_server_test.py testClassify / testRegress / testMultiInference
    _, c = grpc_serve("default", TF1)
    body = {"examples": [{"x": 2.0}]}
    resp = c.predict_stub.Classify(
        infer_request(classification_pb2.ClassificationRequest, "classify_x_to_y", body), timeout=10)
    assert len(resp.result.classifications) == 1
    (cls,) = resp.result.classifications[0].classes
    assert cls.score == 3.0 and cls.label == ""
    assert (resp.model_spec.name, resp.model_spec.signature_name,
            resp.model_spec.version.value) == ("default", "classify_x_to_y", 123)
    resp = c.predict_stub.Regress(
        infer_request(regression_pb2.RegressionRequest, "regress_x_to_y", body), timeout=10)
    assert [r.value for r in resp.result.regressions] == [3.0]
    assert resp.model_spec.signature_name == "regress_x_to_y"
    req = inference_pb2.MultiInferenceRequest()
    for sig, method in (("regress_x_to_y", "tensorflow/serving/regress"),
                        ("classify_x_to_y", "tensorflow/serving/classify")):
        t = req.tasks.add()
        t.model_spec.name = "default"
        t.model_spec.signature_name = sig
        t.method_name = method
    fill_input(req.input, body)
    resp = c.predict_stub.MultiInference(req, timeout=10)
    assert len(resp.results) == 2
    assert [r.value for r in resp.results[0].regression_result.regressions] == [3.0]
    assert resp.results[1].classification_result.classifications[0].classes[0].score == 3.0
    for r, sig in zip(resp.results, ("regress_x_to_y", "classify_x_to_y")):
        assert (r.model_spec.name, r.model_spec.signature_name, r.model_spec.version.value) == (
            "default", sig, 123)


def test_classify_regress_match_tensorflow_and_rest(grpc_serve, reference):
    s, c = grpc_serve("default", TF1)
    for case in reference["models"][TF1_KEY]["infer_cases"]:
        verb = "classify" if case["signature"].startswith("classify") else "regress"
        cls = (classification_pb2.ClassificationRequest if verb == "classify"
               else regression_pb2.RegressionRequest)
        req = infer_request(cls, case["signature"], case["body"])
        rpc = c.predict_stub.Classify if verb == "classify" else c.predict_stub.Regress
        status, out = s.json("POST", f"/v1/models/default:{verb}",
                             json.dumps(dict(case["body"], signature_name=case["signature"])))
        if "tf_error" in case:  # TensorFlow refused this input; so do both transports
            code, msg = rpc_error(rpc, req, timeout=10)
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert status == 400 and out["error"] == msg
            continue
        resp = rpc(req, timeout=10)
        if verb == "classify":
            got = [cl.classes[0].score for cl in resp.result.classifications]
            rest = [r[0][1] for r in out["results"]]
        else:
            got = [r.value for r in resp.result.regressions]
            rest = out["results"]
        assert got == pytest.approx(case["values"], rel=1e-6, abs=0), case
        assert got == [f32(v) for v in rest]


def test_infer_errors(grpc_serve):
    _, c = grpc_serve("default", TF1)
    IA = grpc.StatusCode.INVALID_ARGUMENT
    body = {"examples": [{"x": 2.0}]}
    cls = classification_pb2.ClassificationRequest
    assert rpc_error(c.predict_stub.Classify, infer_request(cls, "nope", body), timeout=10) == (
        IA, "No signature was found with the name: nope")
    assert rpc_error(c.predict_stub.Classify, infer_request(cls, "classify_x_to_y",
                                                            {"examples": []}), timeout=10) == (
        IA, "Input is empty.")
    req = infer_request(cls, "classify_x_to_y", body)
    req.ClearField("model_spec")
    assert rpc_error(c.predict_stub.Classify, req, timeout=10) == (IA, "Missing ModelSpec")
    assert rpc_error(c.predict_stub.Regress, infer_request(
        regression_pb2.RegressionRequest, "regress_x_to_y", body, name="nope"), timeout=10) == (
        grpc.StatusCode.NOT_FOUND, "Servable not found for request: Latest(nope)")
    # A predict signature is not a classification signature.
    code, msg = rpc_error(c.predict_stub.Classify, infer_request(cls, "serving_default", body),
                          timeout=10)
    assert code == IA and msg.startswith("No classification inputs found in SignatureDef")

    def multi(*tasks):
        req = inference_pb2.MultiInferenceRequest()
        for name, sig, method in tasks:
            t = req.tasks.add()
            t.model_spec.name = name
            t.model_spec.signature_name = sig
            t.method_name = method
        fill_input(req.input, body)
        return rpc_error(c.predict_stub.MultiInference, req, timeout=10)

    R, C = "tensorflow/serving/regress", "tensorflow/serving/classify"
    assert multi() == (IA, "Expected at least one task")
    assert multi(("default", "regress_x_to_y", R), ("other", "classify_x_to_y", C)) == (
        IA, "All ModelSpecs in a MultiInferenceRequest must access the same model name.")
    assert multi(("default", "regress_x_to_y", R), ("default", "regress_x_to_y", R)) == (
        IA, "Duplicate evaluation of signature: regress_x_to_y")
    assert multi(("default", "nope", R)) == (
        IA, "Requested signature not found in model graph: nope")
    assert multi(("default", "regress_x_to_y", "tensorflow/serving/predict")) == (
        grpc.StatusCode.UNIMPLEMENTED, "Unsupported signature method_name: tensorflow/serving/predict")
    assert multi(("default", "regress_x_to_y", R), ("default", "regress_x2_to_y3", R)) == (
        IA, "Input tensor must be the same for all Signatures.")


def test_garbage_and_mutated_requests_never_crash(grpc_serve):
    # Every method, fed random bytes and bit-flipped valid requests: each call
    # gets a status (any), and the server keeps answering correctly.
    import random
    s, c = grpc_serve("half_plus_two", HPT)
    rnd = random.Random(5)
    valid = predict_request().SerializeToString()
    huge = predict_request(x=None)
    huge.inputs["x"].dtype = types_pb2.DT_FLOAT
    for size in (1 << 40, 1 << 40):  # numel overflows int64 only if unchecked
        huge.inputs["x"].tensor_shape.dim.add().size = size
    bodies = [huge.SerializeToString(), b"", b"\x00", b"\xff" * 16]
    for _ in range(150):
        b = bytearray(valid)
        for _ in range(rnd.randint(1, 4)):
            b[rnd.randrange(len(b))] ^= 1 << rnd.randrange(8)
        bodies.append(bytes(b))
    bodies += [bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 64))) for _ in range(50)]
    methods = ["/tensorflow.serving.PredictionService/" + m for m in
               ("Predict", "GetModelMetadata", "Classify", "Regress", "MultiInference")]
    methods += ["/tensorflow.serving.ModelService/GetModelStatus", "/grpc.health.v1.Health/Check"]
    for m in methods:
        call = c.ch.unary_unary(m, request_serializer=None, response_deserializer=None)
        for body in bodies:
            try:
                call(body, timeout=10)
            except grpc.RpcError as e:
                assert e.code() != grpc.StatusCode.UNAVAILABLE, (m, body)
    assert list(c.predict(predict_request()).outputs["y"].float_val) == [2.5, 3.0, 4.5]


def test_batching_errors_same_as_rest(grpc_serve, tmp_path):
    # With --enable_batching: a full batch queue is RESOURCE_EXHAUSTED at once
    # and a request larger than the largest batch INVALID_ARGUMENT, with TF
    # Serving's messages (the REST side of this is tests/e2e/test_batching.py).
    cfg = tmp_path / "batching.txt"
    cfg.write_text("max_batch_size { value: 4 }\n"
                   "batch_timeout_micros { value: 5000000 }\n"
                   "max_enqueued_batches { value: 1 }\n"
                   "num_batch_threads { value: 1 }\n")
    s, c = grpc_serve("half_plus_two", HPT, "--enable_batching",
                      f"--batching_parameters_file={cfg}", prometheus_flag(tmp_path))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(c.predict, predict_request(x=[1.0]), 60)  # waits up to 5 s
        wait_for(lambda: queue_depth(s, "half_plus_two") == 1, "the first request to be queued")
        req = predict_request(x=None)  # another non-batch shape needs a second batch
        req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([[1.0, 2.0]], np.float32)))
        assert rpc_error(c.predict, req) == (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "The batch scheduling queue to which this task was submitted is full")
        status, out = s.json("POST", "/v1/models/half_plus_two:predict",
                             '{"instances": [[1.0, 2.0]]}')
        assert status == 429 and out["error"] == (
            "The batch scheduling queue to which this task was submitted is full")
        assert list(waiting.result().outputs["y"].float_val) == [2.5]
    assert rpc_error(c.predict, predict_request(x=[1, 2, 3, 4, 5])) == (
        grpc.StatusCode.INVALID_ARGUMENT, "Task size 5 is larger than maximum input batch size 4")


def test_sigterm_under_grpc_load_exits_cleanly(serve):
    # The shutdown order: stop accepting, cancel what
    # is in flight, close the queues only once no call is alive. Under load,
    # SIGTERM must end the process with status 0 (no abort, no hang).
    import threading
    s = serve("half_plus_two", HPT, "--tensord_shutdown_grace_seconds=1")
    stop = threading.Event()
    counts = {"ok": 0, "err": 0}

    def hammer():
        c = Client(f"127.0.0.1:{s.grpc_port}")
        while not stop.is_set():
            try:
                c.predict(predict_request(), timeout=5)
                counts["ok"] += 1
            except grpc.RpcError:
                counts["err"] += 1
        c.close()

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for t in threads:
        t.start()
    wait_for(lambda: counts["ok"] >= 8, "the load to be answered")
    s.proc.terminate()
    assert s.proc.wait(timeout=30) == 0, s.output()
    stop.set()
    for t in threads:
        t.join()
    assert counts["ok"] > 0
