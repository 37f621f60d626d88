"""Black-box harness: starts the real build/tensord on free ports and talks
HTTP to it with the standard library only (no TensorFlow needed)."""
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.environ.get("TENSORD_BIN", os.path.join(ROOT, "build", "tensord"))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
MODELS = os.path.join(FIXTURES, "models")
EXAMPLES = os.path.join(ROOT, "examples")


_HANDED_OUT = set()


def free_port():
    """A port nothing listens on now and that this process has not handed
    out before: the kernel can give the same port to two binds in a row
    (the first socket is closed by then), and a server asked to use one
    port for gRPC and REST refuses to start."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


class Server:
    def __init__(self, model_name, base_path, extra_args=()):
        # A port found free can be taken by another process before tensord
        # binds it (other test runs share the machine): then tensord exits
        # naming the address in use, and it is started again on new ports.
        for attempt in range(5):
            self.grpc_port = free_port()
            self.rest_port = free_port()
            self.args = [
                BINARY,
                f"--port={self.grpc_port}",
                f"--rest_api_port={self.rest_port}",
                f"--model_name={model_name}",
                f"--model_base_path={base_path}",
                *extra_args,
            ]
            self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                         f"tensord-{self.rest_port}.log"), "w+")
            self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
            try:
                self._wait_ready()
                return
            except RuntimeError:
                if attempt == 4 or "address in use" not in self.output():
                    raise
                self.log.close()

    def _wait_ready(self, timeout=120):
        """Ready once tensord says its REST port is open (it opens gRPC
        first) and is still running: a bare connect could reach another
        process that holds the port."""
        ready = f"Exporting HTTP/REST API at:localhost:{self.rest_port} "
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tensord exited with {self.proc.returncode}:\n{self.output()}")
            if ready in self.output():
                try:
                    with socket.create_connection(("127.0.0.1", self.rest_port), timeout=5):
                        pass
                except OSError:
                    pass
                else:
                    if self.proc.poll() is None:
                        return
            time.sleep(0.05)
        raise RuntimeError(f"tensord did not open its REST port:\n{self.output()}")

    def output(self):
        # Read through a file of its own: seeking self.log would move the
        # offset tensord writes at (the two share it) and garble the log.
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def request(self, method, path, body=None, headers=None):
        """Returns (status, headers, raw body bytes)."""
        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request(f"http://127.0.0.1:{self.rest_port}{path}", data=data,
                                     method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, method, path, body=None):
        status, headers, raw = self.request(method, path, body)
        return status, json.loads(raw)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)  # sanitizer builds check for leaks at exit
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@pytest.fixture
def serve():
    """serve(model_name, base_path, *flags) -> a running Server; stopped after the test."""
    started = []

    def start(model_name, base_path, *extra):
        s = Server(model_name, base_path, extra)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
        assert s.proc.returncode == 0, f"tensord did not exit cleanly:\n{s.output()}"


@pytest.fixture
def model_copy(tmp_path):
    """model_copy(src_version_dir, version) copies a fixture version into a
    fresh base path and returns (base_path, version_dir)."""

    def copy(src, version="1"):
        base = tmp_path / "model"
        dst = base / version
        shutil.copytree(src, dst)
        return str(base), str(dst)

    return copy


@pytest.fixture(scope="session")
def reference():
    with open(os.path.join(FIXTURES, "reference.json")) as f:
        return json.load(f)


def wait_for(cond, what, timeout=60):
    """Polls cond() until it is true; fails naming `what` after `timeout` s.
    Tests wait on a state, never on a sleep: a loaded box is slow."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def metric_sum(s, name, **labels):
    """The sum of the series of metric `name` whose labels include these
    (needs --monitoring_config_file with prometheus enabled; 0: none)."""
    status, _, raw = s.request("GET", "/monitoring/prometheus/metrics")
    assert status == 200, raw
    total = 0.0
    for line in raw.decode().splitlines():
        m = re.match(r"^([^{ #]+)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(4))
    return total


def queue_depth(s, model):
    """Requests of `model` submitted and not yet started, batching queues
    included."""
    return metric_sum(s, "tensord_queue_depth", model_name=model)


def prometheus_flag(tmp_path):
    """The flag that turns on /monitoring/prometheus/metrics."""
    f = tmp_path / "prometheus-monitoring.txt"
    f.write_text("prometheus_config { enable: true }\n")
    return f"--monitoring_config_file={f}"
