"""Triton's perf_analyzer, a third party's load generator, drives tensord
unchanged: over the v2 gRPC and REST protocols and over TF Serving's gRPC
API (--service-kind=tfserving). scripts/deps.d/v2.sh installs it. Only that
it runs and every request succeeds is checked, never a speed."""
import csv
import os
import subprocess

import pytest
import tritonclient.http as thttp

from conftest import ROOT

PA = os.environ.get("TENSORD_PERF_ANALYZER", "/opt/tensord-perf/perf_analyzer")
MLP = os.path.join(ROOT, "tests", "fixtures", "models", "zoo", "mlp")


def perf(tmp_path, *args):
    assert os.access(PA, os.X_OK), f"{PA} missing: run scripts/deps.d/v2.sh"
    out = tmp_path / "pa.csv"
    cmd = [PA, "-m", "mlp", "--concurrency-range", "2", "--measurement-mode", "count_windows",
           "--measurement-request-count", "40", "-s", "1000", "-f", str(out), *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(out) as f:
        rows = list(csv.DictReader(f))
    assert rows and float(rows[0]["Inferences/Second"]) > 0, rows
    return r.stdout


@pytest.mark.parametrize("kind,proto,port,batch", [
    ("triton", "grpc", "grpc", 1), ("triton", "grpc", "grpc", 32),
    ("triton", "http", "rest", 32), ("tfserving", "grpc", "grpc", 8)])
def test_perf_analyzer_runs_against_tensord(serve, tmp_path, kind, proto, port, batch):
    s = serve("mlp", MLP)
    p = s.grpc_port if port == "grpc" else s.rest_port
    perf(tmp_path, f"--service-kind={kind}", "-i", proto, "-u", f"127.0.0.1:{p}", "-b", str(batch))
    # the requests really reached the model, batch rows each
    st = thttp.InferenceServerClient(f"127.0.0.1:{s.rest_port}").get_inference_statistics("mlp")
    st = st["model_stats"][0]
    assert st["execution_count"] >= 40
    assert st["inference_count"] == st["execution_count"] * batch
    assert st["inference_stats"]["fail"]["count"] == 0
