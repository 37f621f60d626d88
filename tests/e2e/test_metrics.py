"""Prometheus metrics: the page on the REST port under TF Serving's names,
checked by Debian's promtool, scraped by a real Prometheus server, and the
counts of a PromQL query matching the requests sent over REST and gRPC."""
import json
import os
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import grpc
from tensorflow.core.framework import tensor_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from conftest import MODELS, free_port

HALF = os.path.join(MODELS, "half_plus_two_tf1")
# Installed by scripts/deps.d/dropin.sh (Debian's prometheus package).
PROMTOOL = shutil.which("promtool") or "promtool"
PROMETHEUS = shutil.which("prometheus") or "prometheus"

# promtool's lint findings that TF Serving's own names cause (a ':' in the
# name, counters without _total, request_count read as a _count series):
# kept, because dashboards query those names.
TF_NAME_LINTS = ("metric names should not contain ':'",
                 'counter metrics should have "_total" suffix',
                 'non-histogram and non-summary metrics should not have "_count" suffix')


def monitoring(tmp_path, path=None):
    f = tmp_path / "monitoring.txt"
    extra = f' path: "{path}"' if path else ""
    f.write_text("prometheus_config { enable: true%s }\n" % extra)
    return f"--monitoring_config_file={f}"


def scrape(s, path="/monitoring/prometheus/metrics"):
    status, headers, raw = s.request("GET", path)
    assert status == 200, raw
    assert headers["Content-Type"].startswith("text/plain")
    return raw.decode()


def sample(text, name, **labels):
    """The value of the one series of `name` with these labels (None: none)."""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^([^{ ]+)(\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(4))
    return None


def grpc_predict(port, name, values):
    with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(ch)
        req = predict_pb2.PredictRequest()
        req.model_spec.name = name
        t = tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT)
        t.tensor_shape.dim.add().size = len(values)
        t.float_val.extend(values)
        req.inputs["x"].CopyFrom(t)
        try:
            return stub.Predict(req, timeout=10), None
        except grpc.RpcError as e:
            return None, e.code()


def promtool_check(text):
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=60)
    # 0: clean; 3: lint findings only; anything else: the text did not parse.
    assert r.returncode in (0, 3), r.stdout + r.stderr
    findings = [l for l in (r.stdout + r.stderr).splitlines() if l.strip()]
    for f in findings:
        name = f.split(" ", 1)[0]
        assert name.startswith(":tensorflow:") and f.split(" ", 1)[1] in TF_NAME_LINTS, f
    return findings


def test_default_path_names_and_counts(serve, tmp_path):
    s = serve("half", HALF, monitoring(tmp_path))
    for _ in range(3):
        status, out = s.json("POST", "/v1/models/half:predict", '{"instances": [1.0, 2.0]}')
        assert status == 200, out
    assert s.json("POST", "/v1/models/half:predict", '{"instances": [1.0')[0] == 400
    assert s.json("POST", "/v1/models/nope:predict", '{"instances": [1.0]}')[0] == 404
    resp, code = grpc_predict(s.grpc_port, "half", [1.0, 2.0, 3.0])
    assert code is None and list(resp.outputs["y"].float_val) == [2.5, 3.0, 3.5]
    assert grpc_predict(s.grpc_port, "nope", [1.0])[1] == grpc.StatusCode.NOT_FOUND

    text = scrape(s)
    rc = ":tensorflow:serving:request_count"
    assert sample(text, rc, model_name="half", status="OK") == 4  # 3 REST + 1 gRPC
    assert sample(text, rc, model_name="half", status="INVALID_ARGUMENT") == 1
    assert sample(text, rc, model_name="nope", status="NOT_FOUND") == 2
    lat = ":tensorflow:serving:request_latency"
    assert sample(text, lat + "_count", model_name="half", API="Predict", entrypoint="REST") == 3
    assert sample(text, lat + "_count", model_name="half", API="Predict", entrypoint="GRPC") == 1
    assert sample(text, lat + "_bucket", model_name="half", API="Predict", entrypoint="REST",
                  le="+Inf") == 3
    assert sample(text, lat + "_sum", model_name="half", API="Predict", entrypoint="REST") > 0
    run = ":tensorflow:serving:runtime_latency_count"
    assert sample(text, run, model_name="half", API="Predict", runtime="TF1") == 4
    assert "# TYPE :tensorflow:serving:request_latency histogram" in text
    # tensord's extras.
    assert sample(text, "tensord_queue_depth", model_name="half") == 0
    assert sample(text, "tensord_inflight_runs", model_name="half") == 0
    runs = sum(sample(text, "tensord_runs_total", model_name="half", mode=m) or 0
               for m in ("inline", "queued"))
    assert runs == 4
    assert sample(text, "tensord_model_version_state", model_name="half", version="123",
                  state="AVAILABLE") == 1
    assert sample(text, "tensord_model_version_state", model_name="half", version="123",
                  state="LOADING") == 0
    assert sample(text, "tensord_process_resident_memory_bytes") > 1 << 20
    # half_plus_two's checkpoint holds a, b and c, three float32 scalars.
    assert sample(text, "tensord_model_variable_bytes", model_name="half", version="123") == 12
    # Loads, as TF core names them.
    assert sample(text, ":tensorflow:cc:saved_model:load_attempt_count", status="success") == 1
    # Other paths are not the metrics page.
    assert s.request("GET", "/metrics")[0] == 404
    assert s.request("POST", "/monitoring/prometheus/metrics", "x")[0] == 400


def test_promtool_accepts_the_page(serve, tmp_path):
    s = serve("half", HALF, monitoring(tmp_path, "/metrics"))
    s.json("POST", "/v1/models/half:predict", '{"instances": [1.0]}')
    s.json("POST", "/v1/models/half:predict", '{"instances": "bad"}')
    promtool_check(scrape(s, "/metrics"))


def test_metrics_off_without_config(serve):
    s = serve("half", HALF)
    assert s.request("GET", "/monitoring/prometheus/metrics")[0] == 404


def test_bad_monitoring_config_fails(tmp_path):
    from conftest import BINARY
    f = tmp_path / "m.txt"
    f.write_text("prometheus_config { enable: true pth: \"/x\" }\n")
    r = subprocess.run([BINARY, f"--model_base_path={HALF}", f"--monitoring_config_file={f}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "MonitoringConfig" in r.stderr and "line 1 column" in r.stderr, r.stderr


def prom_query(port, q):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": q})
    with urllib.request.urlopen(url, timeout=10) as r:
        out = json.load(r)
    assert out["status"] == "success", out
    return out["data"]["result"]


def test_real_prometheus_scrapes_and_counts(serve, tmp_path):
    s = serve("half", HALF, monitoring(tmp_path, "/metrics"))
    n_rest, n_grpc = 7, 5
    for i in range(n_rest):
        assert s.json("POST", "/v1/models/half:predict", '{"instances": [%d.0]}' % i)[0] == 200
    for i in range(n_grpc):
        assert grpc_predict(s.grpc_port, "half", [float(i)])[1] is None
    assert s.json("POST", "/v1/models/half:predict", '{"instances": "x"}')[0] == 400

    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: tensord\n    metrics_path: /metrics\n"
        f"    static_configs:\n      - targets: ['127.0.0.1:{s.rest_port}']\n")
    log = open(tmp_path / "prometheus.log", "w+")
    prom = subprocess.Popen([PROMETHEUS, f"--config.file={cfg}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        q_ok = ('sum({__name__=":tensorflow:serving:request_count",'
                'job="tensord",model_name="half",status="OK"})')
        q_bad = ('{__name__=":tensorflow:serving:request_count",'
                 'model_name="half",status="INVALID_ARGUMENT"}')
        q_ep = ('sum by (entrypoint) ({__name__='
                '":tensorflow:serving:request_latency_count",model_name="half"})')
        got = None
        deadline = time.time() + 120
        while time.time() < deadline:
            assert prom.poll() is None, "prometheus exited"
            try:
                res = prom_query(port, q_ok)
                up = prom_query(port, 'up{job="tensord"}')
            except OSError:
                res, up = [], []
            if res and up and up[0]["value"][1] == "1":
                got = float(res[0]["value"][1])
                break
            time.sleep(0.5)
        assert got == n_rest + n_grpc, (got, open(tmp_path / "prometheus.log").read()[-3000:])
        assert float(prom_query(port, q_bad)[0]["value"][1]) == 1
        by_ep = {r["metric"]["entrypoint"]: float(r["value"][1]) for r in prom_query(port, q_ep)}
        assert by_ep == {"REST": n_rest, "GRPC": n_grpc}
    finally:
        prom.terminate()
        try:
            prom.wait(timeout=30)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
        log.close()


def test_gpu_memory_gauges(serve, tmp_path):
    # The reference device runs the GPU code path in host memory.
    s = serve("half", HALF, monitoring(tmp_path), "--device=reference")
    assert s.json("POST", "/v1/models/half:predict", '{"instances": [1.0]}')[0] == 200
    text = scrape(s)
    dev = "reference device (host memory)"
    assert sample(text, "tensord_gpu_memory_used_bytes", device=dev) > 0
    assert sample(text, "tensord_gpu_memory_limit_bytes", device=dev) >= \
        sample(text, "tensord_gpu_memory_used_bytes", device=dev)
    # On the CPU the family is absent.
    s2 = serve("half", HALF, monitoring(tmp_path), "--device=cpu")
    assert "tensord_gpu_memory" not in scrape(s2)
