"""Dynamic batching through the real server: concurrent clients with distinct
inputs each get exactly their own answer; a full batch queue answers 429 at
once; bad batching files are refused at start-up."""
import json
import os
import subprocess
import threading

import pytest

from conftest import BINARY, EXAMPLES, prometheus_flag, queue_depth, wait_for

HALF_PLUS_TWO = os.path.join(EXAMPLES, "half_plus_two")


def write(tmp_path, text):
    p = tmp_path / "batching.config"
    p.write_text(text)
    return str(p)


def test_concurrent_clients_get_their_own_answers(serve, tmp_path):
    cfg = write(tmp_path, "max_batch_size { value: 16 }\n"
                          "batch_timeout_micros { value: 2000 }\n"
                          "max_enqueued_batches { value: 1000 }\n"
                          "num_batch_threads { value: 2 }\n"
                          "allowed_batch_sizes: [4, 8, 16]\n")
    s = serve("half_plus_two", HALF_PLUS_TWO, "--enable_batching",
              f"--batching_parameters_file={cfg}")
    failures = []

    def client(cid):
        for k in range(40):
            xs = [cid * 100.0 + k + j * 0.25 for j in range(1 + (cid + k) % 3)]
            status, out = s.json("POST", "/v1/models/half_plus_two:predict",
                                 json.dumps({"instances": xs}))
            want = [0.5 * x + 2.0 for x in xs]
            if status != 200 or out != {"predictions": want}:
                failures.append((cid, k, status, out, want))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]


def test_full_batch_queue_is_429_at_once(serve, tmp_path):
    # One batch may wait (for up to 2 s); a request that needs a second
    # batch (another non-batch shape) finds the queue full.
    # The second request is sent once the first is seen queued; the long
    # batch timeout keeps the first waiting however slow the box is.
    cfg = write(tmp_path, "max_batch_size { value: 100 }\n"
                          "batch_timeout_micros { value: 5000000 }\n"
                          "max_enqueued_batches { value: 1 }\n"
                          "num_batch_threads { value: 1 }\n")
    s = serve("half_plus_two", HALF_PLUS_TWO, "--enable_batching",
              f"--batching_parameters_file={cfg}", prometheus_flag(tmp_path))
    first = {}

    def waiting():
        first["r"] = s.json("POST", "/v1/models/half_plus_two:predict",
                            '{"instances": [1.0]}')

    t = threading.Thread(target=waiting)
    t.start()
    wait_for(lambda: queue_depth(s, "half_plus_two") == 1, "the first request to be queued")
    status, out = s.json("POST", "/v1/models/half_plus_two:predict",
                         '{"instances": [[1.0, 2.0]]}')
    assert status == 429
    assert out == {"error": "The batch scheduling queue to which this task was submitted is full"}
    t.join()
    assert first["r"] == (200, {"predictions": [2.5]})


def test_too_large_request_is_rejected_with_tf_message(serve, tmp_path):
    cfg = write(tmp_path, "max_batch_size { value: 4 }\n")
    s = serve("half_plus_two", HALF_PLUS_TWO, "--enable_batching",
              f"--batching_parameters_file={cfg}")
    status, out = s.json("POST", "/v1/models/half_plus_two:predict",
                         '{"instances": [1, 2, 3, 4, 5]}')
    assert status == 400
    assert out == {"error": "Task size 5 is larger than maximum input batch size 4"}


@pytest.mark.parametrize("text,needle", [
    ("max_batch_size { value: 8 }\nallowed_batch_sizes: [2, 4]\n",
     "Last entry in allowed_batch_sizes must match max_batch_size"),
    ("max_batch_size { valu: 8 }\n", "line 1 column 18"),
])
def test_bad_batching_file_refuses_to_start(tmp_path, text, needle):
    cfg = write(tmp_path, text)
    r = subprocess.run([BINARY, "--port=0", "--rest_api_port=0", "--model_name=m",
                        f"--model_base_path={HALF_PLUS_TWO}", "--enable_batching",
                        f"--batching_parameters_file={cfg}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert needle in r.stderr


def test_batching_file_needs_enable_batching(tmp_path):
    cfg = write(tmp_path, "max_batch_size { value: 8 }\n")
    r = subprocess.run([BINARY, "--model_name=m", f"--model_base_path={HALF_PLUS_TWO}",
                        f"--batching_parameters_file={cfg}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "batching_parameters_file is set without setting" in r.stderr


def test_sigterm_closes_ports_and_finishes_requests_in_flight(tmp_path):
    """A request held in a batch (2 s timeout) is in flight when SIGTERM
    arrives: the ports stop accepting at once, the request still gets its
    answer, and the process exits 0."""
    import signal
    import socket
    import time
    from conftest import Server
    cfg = write(tmp_path, "max_batch_size { value: 8 }\n"
                          "batch_timeout_micros { value: 5000000 }\n")
    s = Server("half_plus_two", HALF_PLUS_TWO, ("--enable_batching",
                                                f"--batching_parameters_file={cfg}",
                                                prometheus_flag(tmp_path)))
    try:
        got = {}
        t = threading.Thread(target=lambda: got.setdefault(
            "r", s.json("POST", "/v1/models/half_plus_two:predict", '{"instances": [4.0]}')))
        t.start()
        wait_for(lambda: queue_depth(s, "half_plus_two") == 1, "the request to be queued")
        s.proc.send_signal(signal.SIGTERM)

        def refused(port):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                return False
            except ConnectionRefusedError:
                return True

        for port in (s.rest_port, s.grpc_port):
            wait_for(lambda: refused(port), f"port {port} to refuse connections")
        t.join(timeout=30)
        assert got["r"] == (200, {"predictions": [4.0]})
        assert s.proc.wait(timeout=30) == 0
    finally:
        s.stop()


def test_per_model_batching_parameters_from_the_model_config(serve, tmp_path):
    """tensord's ModelConfig extension: a model's own batching_parameters
    replace the global ones for it; other models keep the global ones."""
    cfg = tmp_path / "models.config"
    three = os.path.join(os.path.dirname(EXAMPLES), "tests", "fixtures", "models",
                         "half_plus_three_tf2")
    cfg.write_text(
        "model_config_list {\n"
        f"  config {{ name: 'small' base_path: '{HALF_PLUS_TWO}' model_platform: 'tensorflow'\n"
        "           batching_parameters { max_batch_size { value: 2 } }\n"
        "           batch_queue_timeout_micros: 1000000 }\n"
        f"  config {{ name: 'big' base_path: '{three}' model_platform: 'tensorflow' }}\n"
        "}\n")
    s = serve("unused", HALF_PLUS_TWO, f"--model_config_file={cfg}", "--enable_batching")
    status, out = s.json("POST", "/v1/models/small:predict", '{"instances": [1, 2, 3]}')
    assert status == 400
    assert out == {"error": "Task size 3 is larger than maximum input batch size 2"}
    status, out = s.json("POST", "/v1/models/small:predict", '{"instances": [1, 2]}')
    assert (status, out) == (200, {"predictions": [2.5, 3.0]})
    status, out = s.json("POST", "/v1/models/big:predict", '{"instances": [1, 2, 3]}')
    assert (status, out) == (200, {"predictions": [4.5, 5.0, 5.5]})


def test_bad_per_model_batching_parameters_refuse_start(tmp_path):
    cfg = tmp_path / "models.config"
    cfg.write_text(
        "model_config_list { config { name: 'm' base_path: '" + HALF_PLUS_TWO + "'\n"
        "  model_platform: 'tensorflow'\n"
        "  batching_parameters { max_batch_size { value: 8 } allowed_batch_sizes: [4] } } }\n")
    r = subprocess.run([BINARY, "--port=0", "--rest_api_port=0", f"--model_config_file={cfg}",
                        "--enable_batching"], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert "Model m: batching_parameters" in r.stderr
    assert "Last entry in allowed_batch_sizes must match max_batch_size" in r.stderr


def test_classify_and_regress_examples_are_batched_too(serve, tmp_path):
    """String inputs (serialized tf.Examples) merge like numbers: concurrent
    classify and regress calls, each with its own examples, each get exactly
    their own answers (the TF1 half_plus_two model: y = 0.5 x + 2)."""
    tf1 = os.path.join(os.path.dirname(EXAMPLES), "tests", "fixtures", "models", "half_plus_two_tf1")
    cfg = write(tmp_path, "max_batch_size { value: 16 }\n"
                          "batch_timeout_micros { value: 2000 }\n"
                          "max_enqueued_batches { value: 1000 }\n"
                          "num_batch_threads { value: 2 }\n"
                          "allowed_batch_sizes: [4, 8, 16]\n")
    s = serve("default", tf1, "--enable_batching", f"--batching_parameters_file={cfg}")
    failures = []

    def client(cid):
        for k in range(20):
            xs = [cid * 100.0 + k + j * 0.25 for j in range(1 + (cid + k) % 3)]
            verb = "classify" if (cid + k) % 2 else "regress"
            body = {"signature_name": f"{verb}_x_to_y", "examples": [{"x": x} for x in xs]}
            status, out = s.json("POST", f"/v1/models/default:{verb}", json.dumps(body))
            ys = [0.5 * x + 2.0 for x in xs]
            want = {"results": [[["", y]] for y in ys] if verb == "classify" else ys}
            if status != 200 or out != want:
                failures.append((cid, k, verb, status, out, want))

    threads = [threading.Thread(target=client, args=(c,)) for c in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[:3]


def test_inline_runs_can_be_turned_off(serve):
    """--tensord_inline_run_max_micros=0: every run goes to the engine
    workers; answers are the same. A negative value refuses to start."""
    s = serve("half_plus_two", HALF_PLUS_TWO, "--tensord_inline_run_max_micros=0")
    for k in range(20):
        status, out = s.json("POST", "/v1/models/half_plus_two:predict",
                             json.dumps({"instances": [float(k)]}))
        assert status == 200 and out == {"predictions": [0.5 * k + 2.0]}
    r = subprocess.run([BINARY, "--model_name=m", f"--model_base_path={HALF_PLUS_TWO}",
                        "--tensord_inline_run_max_micros=-1"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "tensord_inline_run_max_micros" in r.stderr
