#!/usr/bin/env python3
"""Soak test: the real daemon under mixed REST + gRPC load for a fixed time
while its model directory and config change under it.

  python3 bench/soak/soak.py [--minutes 10] [--clients 4] [--bin build/tensord]
                             [--plot FILE.png]

What happens, on a schedule measured from the start:
  * REST :predict and gRPC Predict clients, half each, in closed loops;
  * every 10 s a new version of model "m" (half_plus_three: y = 0.5x + 3 or
    0.5x + 4, alternating) is renamed into its base path, and the oldest
    one beyond two is removed, so traffic moves to it (a swap);
  * every 30 s the config file is rewritten (a second model appears or
    goes, labels change) and picked up by the config poll;
  * every 20 s a broken version is dropped into model "m"'s base path (a
    saved_model.pb with an attribute nested 3000 deep, or a version whose
    checkpoint lacks a variable) above the good ones, then removed.
A request fails when it errors or answers a value no served version gives.
Every second the daemon's RSS, open fds and threads are sampled.

Report (stdout, JSON): requests, failed, RSS at the end of warm-up and at
the end (drift %), fds and threads min/max after warm-up, p50/p99 latency
of requests that started within 1 s after a swap against all others. Uses
only the standard library and grpcio (installed for the e2e tests). The
machine's load shows in the latencies: compare swap and steady p99 of the
same run, not across runs."""
import argparse
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import grpc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.path.join(ROOT, "tests", "fixtures", "models")
HP3 = [os.path.join(MODELS, "half_plus_three_tf2", v) for v in ("00000001", "00000002")]
BROKEN_VAR = os.path.join(MODELS, "missing_var", "00000001")
OFFSETS = (3.0, 4.0)  # y = 0.5 x + offset, per fixture version
X = 2.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def varint(v):
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def predict_bytes(model):
    t = varint(1 << 3) + varint(1) + ld(2, ld(2, varint(1 << 3) + varint(1)))
    t += ld(5, struct.pack("<f", X))
    return ld(1, ld(1, model.encode())) + ld(2, ld(1, b"x") + ld(2, t))


def nested_attr_pb(turns=3000):
    v = varint(3 << 3) + varint(1)
    for _ in range(turns):
        v = ld(10, ld(2, ld(1, b"k") + ld(2, v)))
    node = ld(1, b"n") + ld(2, b"Const") + ld(5, ld(1, b"k") + ld(2, v))
    return ld(2, ld(2, ld(1, node)))


def proc_stats(pid):
    st = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "Threads"):
                st[k] = int(v.split()[0])
    st["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return st


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    return v[min(len(v) - 1, int(p / 100.0 * len(v)))]


class Soak:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="tensord-soak-")
        self.base = os.path.join(self.tmp, "m")
        self.base2 = os.path.join(self.tmp, "m2")
        os.makedirs(self.base)
        shutil.copytree(HP3[0], os.path.join(self.base, "1"))
        shutil.copytree(HP3[1], os.path.join(self.base2, "1"))
        self.next_version = 2
        self.config = os.path.join(self.tmp, "models.config")
        self.write_config(with_second=False)
        self.lock = threading.Lock()
        self.results = []  # (start, latency, ok)
        self.swaps = []
        self.failures = []
        self.stop = threading.Event()

    def write_config(self, with_second):
        cfg = 'model_config_list {\n  config { name: "m" base_path: "%s" model_platform: "tensorflow"\n' \
              '    model_version_policy { latest { num_versions: 2 } } }\n' % self.base
        if with_second:
            cfg += '  config { name: "m2" base_path: "%s" model_platform: "tensorflow" }\n' % self.base2
        cfg += "}\n"
        tmp = self.config + ".tmp"
        with open(tmp, "w") as f:
            f.write(cfg)
        os.rename(tmp, self.config)

    def start(self):
        self.rest, self.grpc_port = free_port(), free_port()
        self.log = open(os.path.join(self.tmp, "tensord.log"), "w")
        self.proc = subprocess.Popen(
            [self.args.bin, f"--port={self.grpc_port}", f"--rest_api_port={self.rest}",
             f"--model_config_file={self.config}", "--model_config_file_poll_wait_seconds=1",
             "--file_system_poll_wait_seconds=0.5"], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.rest), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("tensord did not start")

    def record(self, t0, ok, what):
        with self.lock:
            self.results.append((t0, time.monotonic() - t0, ok))
            if not ok and len(self.failures) < 20:
                self.failures.append(what)

    def rest_client(self):
        body = json.dumps({"instances": [X]}).encode()
        url = f"http://127.0.0.1:{self.rest}/v1/models/m:predict"
        valid = {0.5 * X + o for o in OFFSETS}
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(urllib.request.Request(url, data=body), timeout=30) as r:
                    y = json.loads(r.read())["predictions"][0]
                self.record(t0, y in valid, f"REST answered {y}")
            except Exception as e:  # noqa: BLE001 -- every failure counts
                self.record(t0, False, f"REST {e!r}")

    def grpc_client(self):
        ch = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        call = ch.unary_unary("/tensorflow.serving.PredictionService/Predict")
        req = predict_bytes("m")
        valid = [struct.pack("<f", 0.5 * X + o) for o in OFFSETS]
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                resp = call(req, timeout=30)
                self.record(t0, any(v in resp for v in valid), "gRPC answered another value")
            except grpc.RpcError as e:
                self.record(t0, False, f"gRPC {e.code()} {e.details()}")
        ch.close()

    def stage(self, src, version):
        tmp = os.path.join(self.base, f".incoming-{version}")
        shutil.copytree(src, tmp)
        return tmp

    def swap(self):
        v = self.next_version
        self.next_version += 1
        tmp = self.stage(HP3[v % 2], v)
        os.rename(tmp, os.path.join(self.base, str(v)))
        self.swaps.append(time.monotonic())
        for old in sorted(int(n) for n in os.listdir(self.base) if n.isdigit())[:-3]:
            shutil.rmtree(os.path.join(self.base, str(old)), ignore_errors=True)

    def drop_bad(self, n):
        v = 100000 + n
        path = os.path.join(self.base, str(v))
        if n % 2:
            tmp = self.stage(HP3[0], v)
            with open(os.path.join(tmp, "saved_model.pb"), "ab") as f:
                f.write(nested_attr_pb())
        else:
            tmp = self.stage(BROKEN_VAR, v)
        os.rename(tmp, path)
        return path

    def run(self):
        self.start()
        n = self.args.clients
        threads = [threading.Thread(target=self.rest_client if i % 2 == 0 else self.grpc_client)
                   for i in range(n)]
        for t in threads:
            t.start()
        t_start = time.monotonic()
        end = t_start + self.args.minutes * 60
        warm = t_start + min(30, self.args.minutes * 60 / 10)
        samples, warm_sample = [], None
        next_swap, next_cfg, next_bad = t_start + 10, t_start + 30, t_start + 20
        bad, bad_path, second, reloads = 0, None, False, 0
        while time.monotonic() < end and self.proc.poll() is None:
            now = time.monotonic()
            if now >= next_swap:
                self.swap()
                next_swap += 10
            if now >= next_cfg:
                second = not second
                self.write_config(second)
                reloads += 1
                next_cfg += 30
            if now >= next_bad:
                if bad_path:
                    shutil.rmtree(bad_path, ignore_errors=True)
                    bad_path = None
                else:
                    bad += 1
                    bad_path = self.drop_bad(bad)
                next_bad += 10
            s = proc_stats(self.proc.pid)
            s["t"] = now - t_start
            if now >= warm:
                samples.append(s)
                if warm_sample is None:
                    warm_sample = s
            time.sleep(1)
        self.stop.set()
        for t in threads:
            t.join()
        alive = self.proc.poll() is None
        self.proc.terminate()
        rc = self.proc.wait(timeout=60)
        steady, near = [], []
        for t0, lat, ok in self.results:
            (near if any(0 <= t0 - s < 1.0 for s in self.swaps) else steady).append(lat)
        failed = sum(1 for r in self.results if not r[2])
        rss0, rss1 = warm_sample["VmRSS"], samples[-1]["VmRSS"]
        report = {
            "minutes": self.args.minutes, "clients": n, "requests": len(self.results),
            "failed": failed, "first_failures": self.failures, "swaps": len(self.swaps),
            "config_reloads": reloads, "bad_versions": bad,
            "alive_until_end": alive, "exit_status": rc,
            "rss_kb_after_warmup": rss0, "rss_kb_end": rss1,
            "rss_drift_pct": round(100.0 * (rss1 - rss0) / rss0, 2),
            "fds_min_max": [min(s["fds"] for s in samples), max(s["fds"] for s in samples)],
            "threads_min_max": [min(s["Threads"] for s in samples),
                                max(s["Threads"] for s in samples)],
            "p50_ms_steady": round(1000 * pct(steady, 50), 3) if steady else None,
            "p99_ms_steady": round(1000 * pct(steady, 99), 3) if steady else None,
            "p50_ms_near_swaps": round(1000 * pct(near, 50), 3) if near else None,
            "p99_ms_near_swaps": round(1000 * pct(near, 99), 3) if near else None,
            "log": os.path.join(self.tmp, "tensord.log"),
        }
        print(json.dumps(report, indent=2))
        if self.args.plot:
            self.plot(samples, t_start)
        return 0 if failed == 0 and alive and rc == 0 else 1


    def plot(self, samples, t_start):
        """RSS, fds and threads over the run (after warm-up), swaps marked,
        with the requests answered per second below."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        t = [s["t"] for s in samples]
        fig, (ax, ax2, ax3) = plt.subplots(3, 1, figsize=(9, 7), sharex=True)
        rss = [s["VmRSS"] / 1024 for s in samples]
        ax.plot(t, rss, color="tab:blue")
        ax.set_ylabel("RSS (MiB)")
        ax.set_ylim(0, max(rss) * 1.2)
        fds, thr = [s["fds"] for s in samples], [s["Threads"] for s in samples]
        ax2.plot(t, fds, label="open fds", color="tab:green")
        ax2.plot(t, thr, label="threads", color="tab:orange")
        ax2.set_ylim(0, max(fds + thr) * 1.2)
        ax2.legend(loc="lower right")
        per_s = {}
        for t0, _, ok in self.results:
            if ok:
                k = int(t0 - t_start)
                per_s[k] = per_s.get(k, 0) + 1
        ks = sorted(k for k in per_s if k >= t[0])
        ax3.plot(ks, [per_s[k] for k in ks], color="tab:gray")
        ax3.set_ylabel("answers / s")
        ax3.set_xlabel("seconds since start")
        for a in (ax, ax2, ax3):
            for sw in self.swaps:
                a.axvline(sw - t_start, color="tab:red", alpha=0.15, linewidth=0.8)
        ax.set_title("Soak: %d requests, %d failed, %d swaps (red lines)"
                     % (len(self.results), sum(1 for r in self.results if not r[2]),
                        len(self.swaps)))
        fig.tight_layout()
        fig.savefig(self.args.plot, dpi=90)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "tensord"))
    ap.add_argument("--plot", help="draw RSS, fds, threads and throughput to this PNG")
    sys.exit(Soak(ap.parse_args()).run())


if __name__ == "__main__":
    main()
