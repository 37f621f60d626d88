"""The REST request head limit (SRV_REST_MAX_HEAD_BYTES, 32 KiB for the
request line and headers together): past it a long request line answers
414 and long headers 431, both JSON naming the sizes, whatever the route;
heads beyond what libmicrohttpd keeps per connection (128 KiB) still get
its own HTML answer. The server keeps serving after each."""
import json
import os
import socket

import pytest

from conftest import EXAMPLES

HPT = os.path.join(EXAMPLES, "half_plus_two")
LIMIT = 32 * 1024


@pytest.fixture(scope="module")
def hpt():
    from conftest import Server
    s = Server("hpt", HPT, ())
    yield s
    s.stop()
    assert s.proc.returncode == 0, s.output()


def exchange(port, raw):
    """Sends raw bytes, reads one response (until Content-Length or close)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as c:
        c.sendall(raw)
        out = b""
        while True:
            try:
                d = c.recv(65536)
            except ConnectionResetError:
                break
            if not d:
                break
            out += d
            head, sep, body = out.partition(b"\r\n\r\n")
            if sep:
                lens = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                if lens and len(body) >= int(lens[0].split(b":")[1]):
                    break
    head, _, body = out.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    ctype = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-type:")]
    return status, (ctype[0].split(b":", 1)[1].strip().decode() if ctype else ""), body


def get(path, headers=b""):
    return b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n"


def still_serves(s):
    status, out = s.json("POST", "/v1/models/hpt:predict", json.dumps({"instances": [1.0]}))
    assert (status, out) == (200, {"predictions": [2.5]})


def test_heads_within_the_limit_serve(hpt):
    status, _, body = exchange(hpt.rest_port, get(b"/v1/models/hpt?" + b"a" * (LIMIT - 200)))
    assert status == 200, body
    status, _, body = exchange(hpt.rest_port,
                               get(b"/v1/models/hpt", b"X-Pad: " + b"a" * (LIMIT - 200) + b"\r\n"))
    assert status == 200, body


@pytest.mark.parametrize("path", [b"/v1/models/hpt", b"/v2/models/hpt", b"/elsewhere"])
def test_long_request_line_is_json_414(hpt, path):
    status, ctype, body = exchange(hpt.rest_port, get(path + b"?" + b"a" * (LIMIT + 10)))
    assert status == 414, body
    assert ctype == "application/json"
    err = json.loads(body)["error"]
    assert "request line of" in err and str(LIMIT) in err, err
    still_serves(hpt)


def test_long_headers_are_json_431(hpt):
    raw = get(b"/v1/models/hpt", b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 1000) for i in range(40)))
    status, ctype, body = exchange(hpt.rest_port, raw)
    assert status == 431, body
    assert ctype == "application/json"
    err = json.loads(body)["error"]
    assert "request line and headers of" in err and str(LIMIT) in err, err
    still_serves(hpt)


def test_post_with_long_headers_gets_its_answer(hpt):
    """The body is read and dropped, so the client receives the 431."""
    body = json.dumps({"instances": [1.0] * 1000}).encode()
    raw = (b"POST /v1/models/hpt:predict HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"X-Pad: " + b"c" * (LIMIT + 1) + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    status, ctype, out = exchange(hpt.rest_port, raw)
    assert status == 431 and ctype == "application/json", out
    still_serves(hpt)


def test_heads_past_the_connection_memory_are_still_refused(hpt):
    """libmicrohttpd answers these itself (HTML); the status is right."""
    status, _, _ = exchange(hpt.rest_port, get(b"/v1/models/hpt?" + b"a" * (200 * 1024)))
    assert status == 414
    status, _, _ = exchange(hpt.rest_port,
                            get(b"/v1/models/hpt", b"X-Pad: " + b"a" * (200 * 1024) + b"\r\n"))
    assert status == 431
    still_serves(hpt)
