"""Hostile inputs against the real binary: files and requests built byte by
byte (the encoders below write protobuf wire format directly, so the tests
can say things no well-behaved client library would). Each case must be
answered with an error while the server keeps serving, and must not make
the daemon allocate what the request did not carry (checked on the
process's peak RSS, VmHWM, which does not depend on the machine's speed)."""
import json
import os
import shutil
import socket
import struct
import time

import grpc
import pytest

from conftest import EXAMPLES

HPT = os.path.join(EXAMPLES, "half_plus_two", "00000123")  # y = 0.5 x + 2, input "x" float


# --- protobuf wire format ------------------------------------------------------------

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def ld(field, payload):
    """A length-delimited field."""
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def vi(field, v):
    return varint(field << 3) + varint(v)


def tensor_proto(dtype, dims, content=None, floats=None, strings=None, halfs=None):
    shape = b"".join(ld(2, vi(1, d)) for d in dims)
    t = vi(1, dtype) + ld(2, shape)
    if content is not None:
        t += ld(4, content)
    if floats:
        t += ld(5, b"".join(struct.pack("<f", f) for f in floats))
    if halfs:
        t += ld(13, b"".join(varint(h) for h in halfs))
    for s in strings or ():
        t += ld(8, s)
    return t


def predict_request(model, inputs, version=None):
    spec = ld(1, model.encode())
    if version is not None:
        spec += ld(2, vi(1, version & (2**64 - 1)))
    req = ld(1, spec)
    for k, t in inputs.items():
        req += ld(2, ld(1, k.encode()) + ld(2, t))
    return req


def nested_attr(turns):
    """An AttrValue nested `turns` times through func -> attr -> value:
    three message levels per turn."""
    v = vi(3, 1)
    for _ in range(turns):
        v = ld(10, ld(2, ld(1, b"k") + ld(2, v)))
    return v


def deep_meta_graph(turns):
    node = ld(1, b"n") + ld(2, b"Const") + ld(5, ld(1, b"k") + ld(2, nested_attr(turns)))
    return ld(2, ld(2, ld(1, node)))  # SavedModel.meta_graphs.graph_def.node


# --- helpers ----------------------------------------------------------------------------

def peak_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def raw_predict(port):
    ch = grpc.insecure_channel(f"127.0.0.1:{port}")
    call = ch.unary_unary("/tensorflow.serving.PredictionService/Predict",
                          request_serializer=None, response_deserializer=None)
    return ch, call


def rest_predict(s, x=1.0):
    return s.json("POST", "/v1/models/hpt:predict", json.dumps({"instances": [x]}))


@pytest.fixture
def hpt(serve, tmp_path):
    base = tmp_path / "hpt"
    shutil.copytree(HPT, base / "1")
    s = serve("hpt", str(base), "--file_system_poll_wait_seconds=0.2")
    assert rest_predict(s) == (200, {"predictions": [2.5]})
    return s, base


# --- 1: nesting depth --------------------------------------------------------------------

def test_nested_attr_version_fails_while_the_old_one_serves(serve, tmp_path):
    base = tmp_path / "hpt"
    shutil.copytree(HPT, base / "1")
    s = serve("hpt", str(base), "--file_system_poll_wait_seconds=0.2", "--max_num_load_retries=0")
    bad = base / "2"
    tmp = base / ".incoming"
    shutil.copytree(HPT, tmp)
    with open(tmp / "saved_model.pb", "ab") as f:
        f.write(deep_meta_graph(3000))  # a second MetaGraphDef, ~50 KB
    os.rename(tmp, bad)
    deadline = time.time() + 60
    status = None
    while time.time() < deadline:
        code, body = s.json("GET", "/v1/models/hpt")
        status = {v["version"]: v for v in body.get("model_version_status", [])}
        if "2" in status and status["2"]["state"] == "END":
            break
        time.sleep(0.1)
    assert s.proc.poll() is None, s.output()
    assert "2" in status, status
    assert status["2"]["state"] == "END", status
    assert status["2"]["status"]["error_code"] == "RESOURCE_EXHAUSTED", status
    assert "nested deeper than 100 levels" in status["2"]["status"]["error_message"]
    assert status["1"]["state"] == "AVAILABLE"
    assert rest_predict(s) == (200, {"predictions": [2.5]})


# --- 2: amplification ----------------------------------------------------------------------

AMPLIFY = [
    # [2^28] floats declared, 4 bytes of tensor_content
    ("content", tensor_proto(1, [2**28], content=b"\0\0\0\0"), grpc.StatusCode.INVALID_ARGUMENT),
    # [2^28] floats from two float_val values
    ("floats", tensor_proto(1, [2**28], floats=[1.0, 2.0]), grpc.StatusCode.RESOURCE_EXHAUSTED),
    # [2^28] zeros (no values at all)
    ("zeros", tensor_proto(1, [2**28]), grpc.StatusCode.RESOURCE_EXHAUSTED),
    # 10^8 strings from one; halves and int16 from one value (not float: refused first)
    ("strings", tensor_proto(7, [10**8], strings=[b"abc"]), grpc.StatusCode.INVALID_ARGUMENT),
    ("halfs", tensor_proto(19, [10**8], halfs=[1]), grpc.StatusCode.INVALID_ARGUMENT),
    ("int16", tensor_proto(5, [10**8]), grpc.StatusCode.INVALID_ARGUMENT),
    # more values than elements
    ("overfull", tensor_proto(1, [1], floats=[1.0, 2.0]), grpc.StatusCode.INVALID_ARGUMENT),
    # a shape the signature (rank 1) cannot take, and 1 GiB of zeros
    ("rank", tensor_proto(1, [2**14, 2**14]), grpc.StatusCode.RESOURCE_EXHAUSTED),
    # the product of the dims overflows int64
    ("overflow", tensor_proto(1, [2**62, 2**62]), grpc.StatusCode.INVALID_ARGUMENT),
]


@pytest.mark.parametrize("name,tensor,code", AMPLIFY, ids=[a[0] for a in AMPLIFY])
def test_amplification_is_refused_before_allocating(hpt, name, tensor, code):
    s, _ = hpt
    ch, call = raw_predict(s.grpc_port)
    try:
        before = peak_rss_kb(s.proc.pid)
        req = predict_request("hpt", {"x": tensor})
        assert len(req) < 200
        with pytest.raises(grpc.RpcError) as e:
            call(req, timeout=30)
        assert e.value.code() == code, e.value.details()
        grown = peak_rss_kb(s.proc.pid) - before
        assert grown < 64 * 1024, f"peak RSS grew by {grown} KiB answering {name}"
    finally:
        ch.close()
    assert rest_predict(s) == (200, {"predictions": [2.5]})


def test_request_input_budget(serve, tmp_path):
    """--tensord_max_request_input_bytes: a request whose inputs would
    decode past it is refused, naming the sizes."""
    base = tmp_path / "hpt"
    shutil.copytree(HPT, base / "1")
    s = serve("hpt", str(base), "--tensord_max_request_input_bytes=1000")
    ch, call = raw_predict(s.grpc_port)
    try:
        with pytest.raises(grpc.RpcError) as e:
            call(predict_request("hpt", {"x": tensor_proto(1, [300], floats=[1.0] * 300)}))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "1200 bytes" in e.value.details() and "1000" in e.value.details()
        # Within the budget it serves.
        from_bytes = call(predict_request("hpt", {"x": tensor_proto(1, [2], floats=[1.0, 3.0])}))
        assert struct.pack("<f", 2.5) in from_bytes and struct.pack("<f", 3.5) in from_bytes
    finally:
        ch.close()


def test_rest_input_budget(serve, tmp_path):
    """The same budget on REST predict: a body (plain or gzip) whose inputs
    would decode past it is 413 naming the sizes; within it, it serves."""
    import gzip
    base = tmp_path / "hpt"
    shutil.copytree(HPT, base / "1")
    s = serve("hpt", str(base), "--tensord_max_request_input_bytes=1000")
    body = json.dumps({"instances": [1.0] * 300})  # 300 floats: 1200 bytes
    for payload, headers in ((body.encode(), {}),
                             (gzip.compress(body.encode()), {"Content-Encoding": "gzip"})):
        status, _, raw = s.request("POST", "/v1/models/hpt:predict", payload, headers)
        assert status == 413, raw
        err = json.loads(raw)["error"]
        assert "input 'x'" in err and "1200 bytes" in err and "1000" in err, err
    status, out = s.json("POST", "/v1/models/hpt:predict", json.dumps({"inputs": [1.0, 3.0]}))
    assert (status, out) == (200, {"outputs": [2.5, 3.5]})


# --- 6: divergences from TF Serving ----------------------------------------------------------

@pytest.mark.parametrize("dtype,want", [(101, "tensor parsing error: x"),
                                        (19, "Expects arg[0] to be float but half is provided")])
def test_ref_and_half_are_not_float(hpt, dtype, want):
    s, _ = hpt
    ch, call = raw_predict(s.grpc_port)
    try:
        t = tensor_proto(dtype, [1], content=b"\0\0\0\0" if dtype == 101 else b"\0\0")
        with pytest.raises(grpc.RpcError) as e:
            call(predict_request("hpt", {"x": t}))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert e.value.details() == want
    finally:
        ch.close()


def test_explicit_version_minus_one_is_not_found(hpt):
    s, _ = hpt
    ch, call = raw_predict(s.grpc_port)
    try:
        with pytest.raises(grpc.RpcError) as e:
            call(predict_request("hpt", {"x": tensor_proto(1, [1], floats=[1.0])}, version=-1))
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        assert e.value.details() == "Servable not found for request: Specific(hpt, -1)"
    finally:
        ch.close()


# --- 6: REST answers stay JSON ---------------------------------------------------------------

def raw_http(port, data, timeout=10):
    """Sends raw bytes, returns (status, body bytes) of the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as c:
        try:
            c.sendall(data)
            c.shutdown(socket.SHUT_WR)
        except OSError:
            # The server answered and closed before taking all of it (a
            # request line or headers past its buffer): the answer is
            # still there to read.
            pass
        reply = b""
        while True:
            try:
                chunk = c.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1."), reply[:200]
    return int(head.split(b" ")[1]), head, body


def dechunk(head, body):
    if b"chunked" not in head.lower():
        return body
    out = b""
    while body:
        size, _, rest = body.partition(b"\r\n")
        n = int(size, 16)
        if not n:
            break
        out += rest[:n]
        body = rest[n + 2:]
    return out


def test_invalid_utf8_model_name_keeps_the_body_json(hpt):
    s, _ = hpt
    status, head, body = raw_http(s.rest_port, b"GET /v1/models/ab\xff\xfecd HTTP/1.1\r\n"
                                               b"Host: x\r\nConnection: close\r\n\r\n")
    assert status == 404
    err = json.loads(dechunk(head, body).decode("utf-8"))["error"]
    assert "ab\ufffd\ufffdcd" in err


def test_chunked_body_past_the_limit_gets_its_413(serve, tmp_path):
    base = tmp_path / "hpt"
    shutil.copytree(HPT, base / "1")
    s = serve("hpt", str(base), "--tensord_rest_max_body_bytes=1000")
    # 8 MiB past the limit, in 64 KiB chunks.
    chunk = b" " * 65536
    body = b"%x\r\n%s\r\n" % (len(chunk), chunk) * 128 + b"0\r\n\r\n"
    status, head, reply = raw_http(s.rest_port,
                                   b"POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\n"
                                   b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n" + body)
    assert status == 413
    assert "1000 bytes" in json.loads(dechunk(head, reply))["error"]
    assert rest_predict(s) == (200, {"predictions": [2.5]})


HTTP_LAYER_ERRORS = [
    ("uri too long", b"GET /v1/models/hpt" + b"a" * 70000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
    ("headers too large",
     b"GET /v1/models/hpt HTTP/1.1\r\nHost: x\r\nX-A: " + b"b" * 40000 + b"\r\n\r\n", 431),
    ("http version", b"GET /v1/models/hpt HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    ("chunk size", b"POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\n"
     b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400),
    ("content length", b"POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\n"
     b"Content-Length: abc\r\n\r\n{}", 400),
]


@pytest.mark.parametrize("what,data,want", HTTP_LAYER_ERRORS,
                         ids=[c[0] for c in HTTP_LAYER_ERRORS])
def test_http_layer_errors_answer_and_keep_serving(hpt, what, data, want):
    # The long URI and headers reach tensord's handler, which answers them
    # in JSON (test_http_limits.py); libmicrohttpd answers the others
    # itself, before any callback of ours runs, with its built-in (HTML)
    # bodies: the status is what can be checked here.
    s, _ = hpt
    status, _, _ = raw_http(s.rest_port, data)
    assert status == want, what
    assert rest_predict(s) == (200, {"predictions": [2.5]})


def test_skipped_version_names_are_logged_once(hpt):
    s, base = hpt
    os.symlink("7", base / "7")  # a link to itself
    shutil.copytree(HPT, base / "12345678901234567890123")  # past int64
    # Version 2 arriving and serving shows that scans ran after the names
    # appeared; by then each must have been logged, and only once.
    tmp = base / ".incoming"
    shutil.copytree(HPT, tmp)
    os.rename(tmp, base / "2")
    deadline = time.time() + 60
    while time.time() < deadline:
        code, body = s.json("GET", "/v1/models/hpt/versions/2")
        if code == 200 and body["model_version_status"][0]["state"] == "AVAILABLE":
            break
        time.sleep(0.1)
    time.sleep(0.5)  # a few more polls at 0.2 s: more chances to log twice
    out = s.output()
    loop = [l for l in out.splitlines() if "Ignoring version directory" in l and "/7:" in l]
    big = [l for l in out.splitlines()
           if "Ignoring version directory" in l and "12345678901234567890123" in l]
    assert len(loop) == 1 and "symbolic links" in loop[0], out
    assert len(big) == 1 and "64 bits" in big[0], out
