#!/usr/bin/env python3
"""Lifecycle benchmark (issue 6): cold start, p99 during version swaps, and
memory after swaps, against the real binary.

  python3 bench/lifecycle/run.py [--bin build/tensord] [--model DIR] [--swaps 20]

1. Cold start: exec -> GET /v1/models/m answers AVAILABLE (the ports open
   only once the first version is loaded), 10 runs, median.
2. One run under open-loop load at 50% of the measured maximum rate
   (bench/lifecycle/loadgen.c, latency from the scheduled send time): steady
   state first, then a new version is dropped in every 0.5 s (built aside and
   renamed in), SWAPS times. p99 of the requests sent while swaps were in
   progress / p99 of those sent in steady state, same run; and the same
   interleaved: p99 of the 250 ms after each drop-in / p99 of the 250 ms
   before it, which the machine's own hiccups (a shared VM's) bias less;
   and, as a control, that interleaved ratio over the steady state with
   make-believe drop-ins at the same cadence (no swap): the noise floor.
   The steady state lasts as long as the swap phase.
   One thread polls the version states through the whole run, steady state
   included. --where also prints when the slow requests were sent.
3. RSS after the first load and the steady state under load vs after the
   last swap, same process (and vs right after the first load, before the
   steady load: the request path's own warm-up grows RSS a few percent
   without any swap).
The model defaults to the zoo MLP (784 -> 10) when present, else the
half_plus_two example.
"""
import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
POLL = 0.1


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status(port, model="m"):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models/{model}", timeout=2) as r:
            return {int(v["version"]): v["state"] for v in json.loads(r.read())["model_version_status"]}
    except Exception:
        return {}


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])


def start(binary, base, port, *flags):
    return subprocess.Popen([binary, "--port=0", f"--rest_api_port={port}", "--model_name=m",
                             f"--model_base_path={base}", *flags],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def stop(p):
    p.terminate()
    p.wait(30)


def cold_start(binary, model_dir, runs=10):
    times = []
    for _ in range(runs):
        port = free_port()
        t0 = time.perf_counter()
        p = start(binary, model_dir, port, "--file_system_poll_wait_seconds=0")
        while True:
            if "AVAILABLE" in status(port).values():
                break
            if p.poll() is not None:
                sys.exit("tensord exited during the cold-start run")
            time.sleep(0.0005)
        times.append((time.perf_counter() - t0) * 1000)
        stop(p)
    return times


def loadgen(exe, port, body, rate, seconds, threads, out):
    return subprocess.Popen([exe, "127.0.0.1", str(port), "/v1/models/m:predict", body, str(rate),
                             str(seconds), str(threads), out])


def read_csv(path):
    rows = []
    with open(path) as f:
        for line in f:
            t, lat, st = line.split(",")
            rows.append((float(t), float(lat), int(st)))
    return rows


def p99(values):
    v = sorted(values)
    return v[min(len(v) - 1, int(0.99 * len(v)))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "tensord"))
    ap.add_argument("--model", default=None, help="a version directory")
    ap.add_argument("--swaps", type=int, default=20)
    ap.add_argument("--where", action="store_true",
                    help="also print when, after each drop-in, the slow requests were sent")
    ap.add_argument("--plot", help="also write request latency over time, swaps marked, as a PNG")
    args = ap.parse_args()
    mlp = os.path.join(ROOT, "tests", "fixtures", "models", "zoo", "mlp", "1")
    if args.model:
        version_dir, name = args.model, os.path.basename(os.path.dirname(args.model))
    elif os.path.isdir(mlp):
        version_dir, name = mlp, "zoo MLP"
    else:
        version_dir, name = os.path.join(ROOT, "examples", "half_plus_two", "00000123"), "half_plus_two"
    is_mlp = os.path.realpath(version_dir) == os.path.realpath(mlp)
    work = tempfile.mkdtemp(prefix="td_lifebench_")
    exe = os.path.join(work, "loadgen")
    subprocess.run(["cc", "-O2", "-pthread", "-D_GNU_SOURCE",
                    os.path.join(ROOT, "bench", "lifecycle", "loadgen.c"), "-o", exe], check=True)
    body = os.path.join(work, "body.json")
    with open(body, "w") as f:
        json.dump({"instances": [[0.5] * 784] if is_mlp else [1.0]}, f)
    base = os.path.join(work, "m")
    os.mkdir(base)
    shutil.copytree(version_dir, os.path.join(base, "1"))
    print(f"model: {name} ({version_dir}), {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f} before the run")

    ct = cold_start(args.bin, base)
    print(f"cold start exec -> AVAILABLE: median {statistics.median(ct):.1f} ms "
          f"(min {min(ct):.1f}, max {max(ct):.1f}, {len(ct)} runs)")

    port = free_port()
    p = start(args.bin, base, port, f"--file_system_poll_wait_seconds={POLL}")
    while status(port).get(1) != "AVAILABLE":
        time.sleep(0.01)
    # Maximum rate: far more than the server can take, 8 connections.
    out = os.path.join(work, "max.csv")
    loadgen(exe, port, body, 1e6, 3, 8, out).wait()
    rows = [r for r in read_csv(out) if r[2] == 200]
    max_rate = len(rows) / 3.0
    rate = max_rate / 2
    time.sleep(0.5)
    rss_first = rss_kb(p.pid)

    gap = 0.5
    steady_s = gap * args.swaps  # as long as the swap phase: same exposure to noise
    total = steady_s + args.swaps * gap + 2.0
    # Versions are built beforehand and only renamed in and out during the
    # run, so the script's own work (copies, deletes) does not compete with
    # the server for the CPU while swaps are measured.
    trash = os.path.join(work, "trash")
    os.mkdir(trash)
    for i in range(2, 2 + args.swaps):
        shutil.copytree(version_dir, os.path.join(work, f".v{i}"))
    out = os.path.join(work, "run.csv")
    # The version states are polled by one thread for the whole run, steady
    # state included, so the script's own requests and CPU are the same in
    # both halves of the comparison.
    seen, stop_poll = {}, threading.Event()

    def poller():
        while not stop_poll.is_set():
            seen.update(status(port))
            stop_poll.wait(0.01)

    g = loadgen(exe, port, body, rate, total, 4, out)
    th = threading.Thread(target=poller)
    th.start()
    time.sleep(0.1 + steady_s)
    # The baseline for memory is taken here, after the steady state under the
    # same load: RSS also grows without any swap while the request threads
    # warm up (their malloc arenas and buffer caches), which says nothing
    # about what swaps cost.
    rss_warm = rss_kb(p.pid)
    swap_t0 = time.time()
    swap_ms, events = [], []
    for i in range(2, 2 + args.swaps):
        t = time.time()
        os.rename(os.path.join(work, f".v{i}"), os.path.join(base, str(i)))
        while seen.get(i) != "AVAILABLE":
            time.sleep(0.002)
        swap_ms.append((time.time() - t) * 1000)
        events.append(t)
        while seen.get(i - 1) != "END":
            time.sleep(0.002)
        os.rename(os.path.join(base, str(i - 1)), os.path.join(trash, str(i - 1)))
        time.sleep(max(0.0, gap - (time.time() - t)))
    swap_t1 = time.time() + 0.2
    g.wait()
    stop_poll.set()
    th.join()
    time.sleep(0.5)
    rss_last = rss_kb(p.pid)
    stop(p)

    rows = read_csv(out)
    t_begin = rows and min(r[0] for r in rows)
    errors = sum(1 for r in rows if r[2] != 200)
    steady = [r[1] for r in rows if r[0] >= t_begin + 0.5 and r[0] < swap_t0]
    during = [r[1] for r in rows if swap_t0 <= r[0] <= swap_t1]
    print(f"max rate (8 connections, closed loop): {max_rate:.0f} req/s; load at 50%: {rate:.0f} req/s")
    print(f"swaps: {args.swaps}, drop-in -> AVAILABLE median {statistics.median(swap_ms):.1f} ms "
          f"(includes up to one {POLL} s poll: inotify usually cuts it)")
    print(f"p99 steady {p99(steady) / 1000:.3f} ms ({len(steady)} requests), during swaps "
          f"{p99(during) / 1000:.3f} ms ({len(during)} requests): ratio "
          f"{p99(during) / p99(steady):.2f} (target <= 1.2)")
    # The same comparison interleaved, so that the machine's own hiccups
    # weigh on both sides alike: requests sent in the WIN seconds after each
    # drop-in (the load, the switch and the old version's unload all fall
    # in it) against those sent in the WIN seconds before it.
    win = 0.25
    after = [r[1] for r in rows if any(e <= r[0] < e + win for e in events)]
    before = [r[1] for r in rows if any(e - win <= r[0] < e for e in events)]
    print(f"interleaved: p99 of the {win * 1000:.0f} ms after each drop-in {p99(after) / 1000:.3f} ms "
          f"({len(after)} requests) / p99 of the {win * 1000:.0f} ms before it "
          f"{p99(before) / 1000:.3f} ms ({len(before)} requests): ratio "
          f"{p99(after) / p99(before):.2f} (target <= 1.2)")
    # The same computation over the steady state, with make-believe drop-ins
    # at the same cadence and no swap: what this machine's noise alone gives.
    t_steady = t_begin + 0.5
    fake = [t_steady + win + k * gap for k in range(args.swaps) if t_steady + (k + 1) * gap < swap_t0]
    f_after = [r[1] for r in rows if any(e <= r[0] < e + win for e in fake)]
    f_before = [r[1] for r in rows if any(e - win <= r[0] < e for e in fake)]
    if f_after and f_before:
        print(f"control, same windows in the steady state without swaps: ratio "
              f"{p99(f_after) / p99(f_before):.2f} ({len(fake)} make-believe drop-ins)")
    print(f"failed requests: {errors} of {len(rows)}")
    if args.where:
        # Where the slow requests of the swap phase fall, relative to the
        # drop-in that precedes them (10 ms bins).
        limit = 2 * p99(steady)
        hist = {}
        for r in rows:
            if swap_t0 <= r[0] <= swap_t1 and r[1] > limit:
                off = min(r[0] - e for e in events if e <= r[0]) if any(e <= r[0] for e in events) else 0
                hist[int(off * 100)] = hist.get(int(off * 100), 0) + 1
        print("slow requests (> 2x steady p99) by ms after a drop-in: " +
              ", ".join(f"{k * 10}-{k * 10 + 10}: {v}" for k, v in sorted(hist.items())))
    print(f"RSS after the first load and {steady_s:.0f} s of steady load {rss_warm} kB, after "
          f"{args.swaps} swaps {rss_last} kB: {100.0 * (rss_last - rss_warm) / rss_warm:+.1f}% "
          f"(target within 5%); right after the first load (before the steady load) "
          f"{rss_first} kB: {100.0 * (rss_last - rss_first) / rss_first:+.1f}%")
    if args.plot:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import plot
        plot.lifecycle(rows, events, swap_t0, args.plot)
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
