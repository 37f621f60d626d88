#!/usr/bin/env python3
"""v2 protocol benchmark: the zoo MLP (784 floats in, 10 out) on one tensord,
v2 against TF Serving's API on the same server in the same run.

    python3 bench/v2/run.py [--seconds S] [--rounds R] [--concurrency C]

Pairs, each at batch 1 and 32:
  REST  v2 binary tensors (POST /v2/models/mlp/infer, JSON header + raw
        floats)  vs  TF Serving's JSON REST (POST /v1/models/mlp:predict,
        {"instances": [[784 floats] x batch]}).
  gRPC  v2 ModelInfer (raw_input_contents)  vs  TF Serving's Predict.
The load generator is Triton's perf_analyzer for every case it can drive:
v2 REST, v2 gRPC and TF Serving gRPC (--service-kind=tfserving). It has no
client for TF Serving's REST API, so the REST pair is also measured with wrk
(a Lua script POSTing a fixed body) on both sides: the REST ratio is
wrk-vs-wrk, and the perf_analyzer v2 REST figure is shown beside it.

tensord is pinned to CPU 0 and the load generators to CPU 1; every case runs
R rounds, the cases interleaved within each round, and the median round is
reported. Requests/s = inferences/s / batch. Needs build/tensord, wrk
(Debian) and perf_analyzer (scripts/deps.d/v2.sh). Prints a Markdown table
and the raw per-round figures."""
import argparse
import csv
import json
import os
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MLP = os.path.join(ROOT, "tests", "fixtures", "models", "zoo", "mlp")
PA = os.environ.get("TENSORD_PERF_ANALYZER", "/opt/tensord-perf/perf_analyzer")
BIN = os.environ.get("TENSORD_BIN", os.path.join(ROOT, "build", "tensord"))
NCPU = os.cpu_count() or 1
SRV_CPU, CLI_CPU = "0", ("1" if NCPU > 1 else "0")


def start_server(grpc_port, rest_port):
    p = subprocess.Popen(["taskset", "-c", SRV_CPU, BIN, f"--port={grpc_port}",
                          f"--rest_api_port={rest_port}", "--model_name=mlp",
                          f"--model_base_path={MLP}"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{rest_port}/v2/models/mlp/ready", timeout=1)
            return p
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.05)
    p.kill()
    sys.exit("tensord did not become ready")


def perf_analyzer(args, batch, seconds, conc):
    with tempfile.NamedTemporaryFile(suffix=".csv") as f:
        cmd = ["taskset", "-c", CLI_CPU, PA, "-m", "mlp", "-b", str(batch),
               "--concurrency-range", str(conc), "--measurement-interval",
               str(int(seconds * 1000)), "-s", "1000", "-f", f.name, *args]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            sys.exit(f"perf_analyzer failed: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
        row = next(csv.DictReader(open(f.name)))
        return float(row["Inferences/Second"]) / batch


def wrk(url, body_file, headers, seconds, conc):
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        lua.write('wrk.method = "POST"\n')
        lua.write(f'local f = io.open("{body_file}", "rb")\nwrk.body = f:read("*a")\nf:close()\n')
        for k, v in headers.items():
            lua.write(f'wrk.headers["{k}"] = "{v}"\n')
    try:
        out = subprocess.run(["taskset", "-c", CLI_CPU, "wrk", "-t1", f"-c{conc}",
                              f"-d{max(1, int(seconds))}s", "-s", lua.name, url],
                             capture_output=True, text=True, check=True).stdout
    finally:
        os.unlink(lua.name)
    if "Non-2xx" in out:
        sys.exit(f"wrk saw errors:\n{out}")
    return float(next(l.split()[1] for l in out.splitlines() if l.startswith("Requests/sec")))


def bodies(tmp, batch):
    rnd = random.Random(batch)
    rows = [[round(rnd.uniform(-1, 1), 6) for _ in range(784)] for _ in range(batch)]
    tf_json = os.path.join(tmp, f"tf{batch}.json")
    with open(tf_json, "w") as f:
        json.dump({"instances": rows}, f)
    header = json.dumps({"inputs": [{"name": "x", "shape": [batch, 784], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 4 * 784 * batch}}],
                         "outputs": [{"name": "output_0", "parameters": {"binary_data": True}}]})
    v2_bin = os.path.join(tmp, f"v2_{batch}.bin")
    with open(v2_bin, "wb") as f:
        f.write(header.encode())
        f.write(struct.pack(f"<{784 * batch}f", *[v for r in rows for v in r]))
    return tf_json, v2_bin, len(header)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=2)
    a = ap.parse_args()
    grpc_port, rest_port = 18711, 18712
    srv = start_server(grpc_port, rest_port)
    tmp = tempfile.mkdtemp()
    g, r = f"127.0.0.1:{grpc_port}", f"127.0.0.1:{rest_port}"
    cases = {}
    for b in (1, 32):
        tf_json, v2_bin, hlen = bodies(tmp, b)
        s, c = a.seconds, a.concurrency
        cases[("rest_v2_binary_wrk", b)] = lambda b=b, v=v2_bin, h=hlen: wrk(
            f"http://{r}/v2/models/mlp/infer", v,
            {"Inference-Header-Content-Length": str(h),
             "Content-Type": "application/octet-stream"}, s, c)
        cases[("rest_tf_json_wrk", b)] = lambda b=b, t=tf_json: wrk(
            f"http://{r}/v1/models/mlp:predict", t, {"Content-Type": "application/json"}, s, c)
        cases[("rest_v2_binary_pa", b)] = lambda b=b: perf_analyzer(
            ["-i", "http", "-u", r], b, s, c)
        cases[("grpc_v2_pa", b)] = lambda b=b: perf_analyzer(["-i", "grpc", "-u", g], b, s, c)
        cases[("grpc_tf_pa", b)] = lambda b=b: perf_analyzer(
            ["--service-kind=tfserving", "-i", "grpc", "-u", g], b, s, c)
    results = {k: [] for k in cases}
    try:
        for rnd in range(a.rounds):
            for k, fn in cases.items():
                results[k].append(fn())
                print(json.dumps({"round": rnd, "case": k[0], "batch": k[1],
                                  "requests_per_s": round(results[k][-1], 1)}), flush=True)
    finally:
        srv.terminate()
        srv.wait()
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"\nMLP, tensord on CPU {SRV_CPU}, load generator on CPU {CLI_CPU} ({NCPU} CPUs), "
          f"concurrency {a.concurrency}, {a.seconds:g} s per case, median of {a.rounds} "
          "interleaved rounds (requests/s)\n")
    print("| API | batch | v2 req/s | TF Serving API req/s | v2 / TF |")
    print("|---|---|---|---|---|")
    for b in (1, 32):
        for name, v2k, tfk in (("REST: v2 binary vs TF JSON (wrk)", "rest_v2_binary_wrk",
                                "rest_tf_json_wrk"),
                               ("gRPC: v2 ModelInfer vs TF Predict (perf_analyzer)",
                                "grpc_v2_pa", "grpc_tf_pa")):
            v, t = med[(v2k, b)], med[(tfk, b)]
            print(f"| {name} | {b} | {v:,.0f} | {t:,.0f} | {v / t:.2f}x |")
        print(f"| REST: v2 binary (perf_analyzer) | {b} | {med[('rest_v2_binary_pa', b)]:,.0f}"
              " | (no TF REST client) | |")


if __name__ == "__main__":
    main()
