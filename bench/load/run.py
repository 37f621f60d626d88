#!/usr/bin/env python3
"""Load-time and memory benchmark: starts the real daemon on each model,
waits until the version is AVAILABLE (REST status poll), and reads what the
load cost and what the loaded version holds.

    python3 bench/load/run.py --models-file DIR/large.json [--binary build/tensord]
        [--vs OTHER_TENSORD] [--rounds 5] [--models resnet50_224,...]

Per model and binary, the medians over the rounds of:
  load ms    wall time from "Loading servable" to "Successfully loaded" in the
             server log (it stretches with whatever else the machine runs);
  CPU ms     CPU time the daemon used from its start to AVAILABLE (utime +
             stime of /proc/PID/stat: start-up included, other load not), and
             the loading thread's own CPU time when the daemon logs it
             ("loaded in ... ms of CPU");
  RSS MiB    VmRSS once AVAILABLE, and VmHWM (the peak during the load);
  idle MiB   VmRSS of the same daemon on a model of a few bytes, so RSS - idle
             is what the version costs.
With --vs the two binaries run in turn, model by model and round by round, so
that both see the same machine; the ratios are taken on the medians. Weight
bytes (the distinct variables the version serves) come from the daemon's own
"weights ... held as ..." log line when it prints one, else from --weights.
The page cache is warm after the first round (an unmeasured warm-up round
runs first). Prints a Markdown table and the raw JSON lines."""
import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = os.path.join(ROOT, "tests", "fixtures", "models", "half_plus_two_tf1")
TS = re.compile(r"^\S+ (\d+):(\d+):([\d.]+) tensord\] (.*)$")
HELD = re.compile(r"weights ([\d.]+) MB, held as ([\d.]+) MB")
LOADED = re.compile(r"loaded in \d+ ms, (\d+) ms of CPU")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_status(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out


def proc_cpu_ms(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) * 1000.0 / tick


def one_load(binary, base_path, timeout=300):
    """Starts binary serving base_path; returns the figures once AVAILABLE."""
    port = free_port()
    with tempfile.TemporaryFile(mode="w+") as log:
        p = subprocess.Popen([binary, "--model_base_path=" + base_path, "--model_name=m",
                              "--port=0", "--rest_api_port=%d" % port,
                              "--file_system_poll_wait_seconds=0",
                              # The page cache stays warm between rounds (the default, as
                              # TF Serving's, drops a loaded version's files from it).
                              "--flush_filesystem_caches=false"],
                             stdout=log, stderr=log)
        try:
            deadline = time.monotonic() + timeout
            while True:
                if p.poll() is not None:
                    raise RuntimeError("%s exited with %d" % (binary, p.returncode))
                try:
                    with urllib.request.urlopen("http://127.0.0.1:%d/v1/models/m" % port,
                                                timeout=5) as r:
                        if b"AVAILABLE" in r.read():
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("%s: not AVAILABLE after %d s" % (base_path, timeout))
                time.sleep(0.02)
            st = proc_status(p.pid)
            cpu = proc_cpu_ms(p.pid)
        finally:
            p.terminate()
            p.wait()
        log.seek(0)
        t = {}
        held = None
        load_cpu = None
        for line in log:
            m = TS.match(line.strip())
            if not m:
                continue
            sec = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
            msg = m.group(4)
            if msg.startswith("Loading servable"):
                t["start"] = sec
            elif msg.startswith("Successfully loaded"):
                t["end"] = sec
            lc = LOADED.search(msg)
            if lc:
                load_cpu = float(lc.group(1))
            h = HELD.search(msg)
            if h:
                held = (float(h.group(1)), float(h.group(2)))
    if "start" not in t or "end" not in t:
        raise RuntimeError("%s: no load lines in the log" % base_path)
    return {"load_ms": (t["end"] - t["start"]) * 1000, "cpu_ms": cpu,
            "rss_kb": st["VmRSS"], "hwm_kb": st["VmHWM"], "weights_held_mb": held,
            "load_cpu_ms": load_cpu}


def base_path_of(entry):
    """The model's base path: the parent of its version directory."""
    return os.path.dirname(entry["dir"].rstrip("/"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models-file", required=True)
    ap.add_argument("--models", default="")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "tensord"))
    ap.add_argument("--vs", default="")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--weights", default="", help="name=bytes,... for binaries that do not log them")
    a = ap.parse_args()
    with open(a.models_file) as f:
        models = json.load(f)["models"]
    names = [n for n in (a.models.split(",") if a.models else sorted(models)) if n]
    bins = [a.binary] + ([a.vs] if a.vs else [])
    given = dict((kv.split("=")[0], float(kv.split("=")[1]) / 1e6)
                 for kv in a.weights.split(",") if kv)
    idle = {b: statistics.median(one_load(b, TINY)["rss_kb"]
                                 for _ in range(3)) / 1024 for b in bins}
    res = {}
    for n in names:
        bp = base_path_of(models[n])
        for b in bins:
            one_load(b, bp)  # warm-up: page cache, first-touch of the binary
        for _ in range(a.rounds):
            for b in bins:
                res.setdefault((n, b), []).append(one_load(b, bp))
    print("| model | binary | weights MB | load ms (wall) | CPU ms to AVAILABLE | load CPU ms | RSS MiB "
          "| RSS - idle MiB | ÷ weights | ≤ 1.3 × weights + 20 MB | peak (HWM) MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in names:
        weights = None
        for b in bins:
            for r in res[n, b]:
                if r["weights_held_mb"]:
                    weights = r["weights_held_mb"][0]
        weights = weights or given.get(n)
        for b in bins:
            rs = res[n, b]
            med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
            rss = med("rss_kb") / 1024
            cost = rss - idle[b]
            mb = cost * 1.048576
            ratio = "%.2f" % (mb / weights) if weights else "-"
            ok = ("yes" if mb <= 1.3 * weights + 20 else "no") if weights else "-"
            lc = [r["load_cpu_ms"] for r in rs if r["load_cpu_ms"] is not None]
            print("| %s | %s | %s | %.0f | %.0f | %s | %.1f | %.1f | %s | %s | %.1f |" % (
                n, os.path.relpath(b), "%.1f" % weights if weights else "-", med("load_ms"),
                med("cpu_ms"), "%.0f" % statistics.median(lc) if lc else "-", rss, cost, ratio, ok,
                med("hwm_kb") / 1024))
    print("\nidle RSS MiB: " + ", ".join("%s %.1f" % (os.path.relpath(b), idle[b]) for b in bins))
    for (n, b), rs in sorted(res.items()):
        for r in rs:
            print(json.dumps(dict(r, model=n, binary=b)))


if __name__ == "__main__":
    main()
