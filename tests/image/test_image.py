"""The image built from docker/Dockerfile, run as the README says, with the
stock clients. Run by scripts/test.d/50-image.sh, which starts the Docker
daemon (DOCKER_HOST) and builds the image (TENSORD_IMAGE). The daemon runs
without a bridge network, so containers use --network=host: published ports
(-p) are then moot and the container's ports are the host's."""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
import tensorflow as tf
import yaml
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "e2e"))
from conftest import free_port  # noqa: E402  (the e2e harness's: never one port twice)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HPT = os.path.join(ROOT, "examples", "half_plus_two")  # version 00000123, y = 0.5x + 2
IMAGE = os.environ.get("TENSORD_IMAGE", "tensord")
DOCKER = os.environ.get("DOCKER", "/usr/bin/docker")

if not os.environ.get("DOCKER_HOST"):
    raise RuntimeError("run through scripts/test.d/50-image.sh (DOCKER_HOST is not set)")


def docker(*args, check=True, timeout=120):
    p = subprocess.run([DOCKER, *args], capture_output=True, text=True, timeout=timeout)
    if check and p.returncode:
        raise AssertionError(f"docker {' '.join(args)}: {p.returncode}\n{p.stdout}{p.stderr}")
    return p


def port_free(port):
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False


def world_readable_dir():
    """A temporary directory the container's user (uid 1000) can read."""
    d = tempfile.mkdtemp(prefix="tensord-image-")
    os.chmod(d, 0o755)
    return d


def http(port, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=body.encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def predict_request(x=(1.0, 2.0, 5.0), version=None):
    req = predict_pb2.PredictRequest()
    req.model_spec.name = "half_plus_two"
    if version is not None:
        req.model_spec.version.value = version
    req.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array(x, dtype=np.float32)))
    return req


class Container:
    def __init__(self, *run_args, rest_port=8501, grpc_port=8500):
        self.rest_port, self.grpc_port = rest_port, grpc_port
        self.id = docker("run", "-d", "--network=host", *run_args).stdout.strip()

    def logs(self):
        p = docker("logs", self.id, check=False)
        return p.stdout + p.stderr

    def wait_model(self, path="/v1/models/half_plus_two", timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = docker("inspect", "-f", "{{.State.Running}}", self.id).stdout.strip()
            if state != "true":
                raise AssertionError(f"container exited:\n{self.logs()}")
            try:
                if http(self.rest_port, "GET", path)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"model not available in {timeout} s:\n{self.logs()}")

    def stop(self, timeout=30):
        """docker stop; returns the exit code (137 would mean SIGKILL)."""
        docker("stop", "-t", str(timeout), self.id, timeout=timeout + 60)
        return int(docker("inspect", "-f", "{{.State.ExitCode}}", self.id).stdout.strip())

    def remove(self):
        docker("rm", "-f", self.id, check=False)


@pytest.fixture
def containers():
    started = []

    def run(*args, **kw):
        c = Container(*args, **kw)
        started.append(c)
        return c

    yield run
    for c in started:
        c.remove()


def test_image_contract():
    cfg = json.loads(docker("image", "inspect", IMAGE).stdout)[0]["Config"]
    assert cfg["User"] not in ("", "0", "root", "0:0")
    assert set(cfg["ExposedPorts"]) == {"8500/tcp", "8501/tcp"}
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert env["MODEL_BASE_PATH"] == "/models" and env["MODEL_NAME"] == "model"
    assert cfg["Entrypoint"] == ["/usr/bin/tini", "--", "/usr/bin/tf_serving_entrypoint.sh"]
    size = json.loads(docker("image", "inspect", IMAGE).stdout)[0]["Size"]
    print(f"image size: {size / 1e6:.1f} MB")
    assert size < 80e6, size
    # TF Serving's names for the server, which orchestration files call.
    out = docker("run", "--rm", "--network=host", "--entrypoint",
                 "/usr/bin/tensorflow_model_server", IMAGE, "--version").stdout
    assert out.startswith("tensord ")


def test_readme_run_rest_grpc_stop(containers):
    # The README's command line. With the default ports taken on a shared
    # machine, the ports move through extra arguments instead.
    extra, rest, grpc_port = [], 8501, 8500
    if not (port_free(8500) and port_free(8501)):
        rest, grpc_port = free_port(), free_port()
        extra = [f"--port={grpc_port}", f"--rest_api_port={rest}"]
        print("8500/8501 are in use here: moved to", grpc_port, rest)
    c = containers("-p", "8501:8501", "-v", f"{HPT}:/models/half_plus_two", "-e",
                   "MODEL_NAME=half_plus_two", IMAGE, *extra, rest_port=rest, grpc_port=grpc_port)
    c.wait_model()
    assert http(rest, "POST", "/v1/models/half_plus_two:predict",
                '{"instances": [1.0, 2.0, 5.0]}') == (200, {"predictions": [2.5, 3.0, 4.5]})
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        y = stub.Predict(predict_request(), timeout=30).outputs["y"]
        assert list(y.float_val) == [2.5, 3.0, 4.5]
    # Not root inside: PID 1 is tini, tensord its child; both as uid 1000.
    status = docker("exec", c.id, "cat", "/proc/1/status").stdout
    assert "\nUid:\t1000\t" in status
    assert c.stop() == 0, c.logs()
    assert "tensord stopped" in c.logs()


def test_version_dropped_into_mounted_volume(containers):
    base = world_readable_dir()
    try:
        shutil.copytree(os.path.join(HPT, "00000123"), os.path.join(base, "123"))
        rest, grpc_port = free_port(), free_port()
        c = containers("-v", f"{base}:/models/half_plus_two", "-e", "MODEL_NAME=half_plus_two",
                       IMAGE, f"--port={grpc_port}", f"--rest_api_port={rest}",
                       "--file_system_poll_wait_seconds=0.2", rest_port=rest, grpc_port=grpc_port)
        c.wait_model()
        # Staged under a name that is not a version, then renamed in whole.
        shutil.copytree(os.path.join(HPT, "00000123"), os.path.join(base, ".staging"))
        os.rename(os.path.join(base, ".staging"), os.path.join(base, "124"))
        c.wait_model("/v1/models/half_plus_two/versions/124")
        with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
            stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
            resp = stub.Predict(predict_request(version=124), timeout=30)
            assert resp.model_spec.version.value == 124
            assert list(resp.outputs["y"].float_val) == [2.5, 3.0, 4.5]
        assert c.stop() == 0, c.logs()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_docker_stop_drains_without_failing_a_request(containers):
    # Clients keep sending while a load balancer (a thread polling /readyz)
    # says the container is ready; once it sees 503 it sends no new
    # requests. docker stop (SIGTERM to tini, forwarded to tensord) must then
    # fail no request, and the container must exit 0 before docker's SIGKILL.
    rest, grpc_port = free_port(), free_port()
    c = containers("-v", f"{HPT}:/models/half_plus_two", "-e", "MODEL_NAME=half_plus_two", IMAGE,
                   f"--port={grpc_port}", f"--rest_api_port={rest}",
                   "--tensord_drain_seconds=5", "--tensord_shutdown_grace_seconds=10",
                   rest_port=rest, grpc_port=grpc_port)
    c.wait_model()
    routing = threading.Event()
    routing.set()
    done = threading.Event()
    counts = {"ok": 0, "failed": []}
    lock = threading.Lock()

    def balancer():
        while not done.is_set():
            try:
                if http(rest, "GET", "/readyz")[0] != 200:
                    routing.clear()
                    return
            except OSError:
                routing.clear()
                return
            time.sleep(0.05)

    def client(use_grpc):
        ch = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        while routing.is_set():
            try:
                if use_grpc:
                    ok = list(stub.Predict(predict_request(), timeout=30)
                              .outputs["y"].float_val) == [2.5, 3.0, 4.5]
                else:
                    ok = http(rest, "POST", "/v1/models/half_plus_two:predict",
                              '{"instances": [1.0]}') == (200, {"predictions": [2.5]})
                with lock:
                    if ok:
                        counts["ok"] += 1
                    else:
                        counts["failed"].append("wrong answer")
            except Exception as e:  # noqa: BLE001 - every failure counts
                with lock:
                    counts["failed"].append(repr(e))
        ch.close()

    threads = [threading.Thread(target=balancer)]
    threads += [threading.Thread(target=client, args=(i % 2 == 0,)) for i in range(6)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while counts["ok"] < 50 and not counts["failed"] and time.monotonic() < deadline:
        time.sleep(0.05)
    code = c.stop(timeout=30)
    done.set()
    for t in threads:
        t.join()
    assert code == 0, c.logs()
    assert not counts["failed"], counts["failed"][:5]
    assert counts["ok"] >= 50
    logs = c.logs()
    assert "draining" in logs and "tensord stopped" in logs


def test_extra_arguments_reach_the_flags():
    # A bad value is refused by tensord itself: the argument got through.
    p = docker("run", "--rm", "--network=host", IMAGE, "--tensord_drain_seconds=-1",
               check=False)
    assert p.returncode == 2 and "--tensord_drain_seconds must be in [0, 3600]" in p.stderr
    p = docker("run", "--rm", "--network=host", IMAGE, "--help", check=False)
    assert p.returncode == 0 and "--tensord_drain_seconds" in p.stdout


def test_kserve_runtime_arguments_serve(containers):
    # The ClusterServingRuntime's own command line (deploy/kserve), with
    # KServe's model directory /mnt/models; only the ports move here, since
    # the host network is shared.
    with open(os.path.join(ROOT, "deploy", "kserve", "cluster-serving-runtime.yaml")) as f:
        rt = yaml.safe_load(f)
    ctr = rt["spec"]["containers"][0]
    rest, grpc_port = free_port(), free_port()
    args = []
    for a in ctr["args"]:
        a = a.replace("{{.Name}}", "half_plus_two")
        if a.startswith("--port="):
            a = f"--port={grpc_port}"
        elif a.startswith("--rest_api_port="):
            a = f"--rest_api_port={rest}"
        args.append(a)
    c = containers("-v", f"{HPT}:/mnt/models", "--entrypoint", ctr["command"][0], IMAGE,
                   *ctr["command"][1:], *args, rest_port=rest, grpc_port=grpc_port)
    c.wait_model()
    assert http(rest, "POST", "/v1/models/half_plus_two:predict",
                '{"instances": [2.0]}') == (200, {"predictions": [3.0]})
    assert c.stop() == 0, c.logs()


def test_kubernetes_deployment_container_runs(containers):
    # The base Deployment's container as the kubelet would run it: its args
    # and env, the ConfigMap's models.config at /etc/tensord, the model
    # volume read-only at /models, a read-only root file system with an
    # emptyDir on /tmp, its user; then its preStop command and SIGTERM.
    with open(os.path.join(ROOT, "deploy", "base", "deployment.yaml")) as f:
        dep = yaml.safe_load(f)
    with open(os.path.join(ROOT, "deploy", "base", "configmap.yaml")) as f:
        cm = yaml.safe_load(f)
    pod = dep["spec"]["template"]["spec"]
    (ctr,) = pod["containers"]
    cfg_dir = world_readable_dir()
    try:
        for key, text in cm["data"].items():
            with open(os.path.join(cfg_dir, key), "w") as f:
                f.write(text)
            os.chmod(os.path.join(cfg_dir, key), 0o644)
        rest, grpc_port = free_port(), free_port()
        env = [a for e in ctr["env"] for a in ("-e", f"{e['name']}={e['value']}")]
        sc = pod["securityContext"]
        c = containers("--read-only", "--tmpfs", "/tmp", "--user",
                       f"{sc['runAsUser']}:{sc['runAsGroup']}", "--cap-drop", "ALL",
                       "-v", f"{cfg_dir}:/etc/tensord:ro", "-v", f"{HPT}:/models/half_plus_two:ro",
                       *env, IMAGE, *ctr["args"], f"--port={grpc_port}", f"--rest_api_port={rest}",
                       rest_port=rest, grpc_port=grpc_port)
        c.wait_model()
        assert http(rest, "GET", ctr["readinessProbe"]["httpGet"]["path"])[0] == 200
        assert http(rest, "GET", ctr["livenessProbe"]["httpGet"]["path"])[0] == 200
        assert http(rest, "POST", "/v1/models/half_plus_two:predict",
                    '{"instances": [4.0]}') == (200, {"predictions": [4.0]})
        pre = ctr["lifecycle"]["preStop"]["exec"]["command"]
        assert docker("exec", c.id, *pre).returncode == 0
        # SIGTERM as the kubelet sends it: not ready at once, still serving.
        docker("kill", "-s", "TERM", c.id)
        deadline = time.monotonic() + 30
        while http(rest, "GET", "/readyz")[0] != 503:
            assert time.monotonic() < deadline, c.logs()
            time.sleep(0.05)
        assert http(rest, "POST", "/v1/models/half_plus_two:predict",
                    '{"instances": [4.0]}') == (200, {"predictions": [4.0]})
        grace = pod["terminationGracePeriodSeconds"]
        docker("wait", c.id, timeout=grace)
        code = int(docker("inspect", "-f", "{{.State.ExitCode}}", c.id).stdout.strip())
        assert code == 0, c.logs()
    finally:
        shutil.rmtree(cfg_dir, ignore_errors=True)
