#!/usr/bin/env python3
"""Dynamic batching benchmark: one instance per request, many concurrent
clients, over REST (wrk) and gRPC (h2load), batching off and on, same run.

For each zoo model (MLP and CNN by default) it measures:
  * the engine's own batching gain: items/s at batch 32 / items/s at batch 1,
    from bench/eng_bench (p50 latencies, same thread count);
  * the server's requests/s and p50/p99 latency without batching and with
    --enable_batching at several batch_timeout_micros, for 1, 8, 32 and 128
    concurrent clients;
  * the batching gain (rps with / rps without) at 32 clients, as a ratio of
    the engine's gain (target >= 0.8), and p99 with / p99 without (<= 2);
  * the mean size of the batches the batcher formed in each batching cell
    (the daemon's processed_batch_size histogram, read from its metrics);
  * the CPU each request costs (server from /proc, load generator from
    rusage; they share the cores) without and with batching, next to what
    the engine saves per request in a batch of 32.
With --rounds N every cell is run N times back to back and the median run
(by requests/s) is kept.

  python3 bench/batching/run.py [--bin build/tensord] [--duration 4]
      [--models-file DIR/large.json --models wide_mlp] [--engine-iters 2000,200]
Needs wrk and h2load (Debian: wrk, nghttp2-client). Client and server share
the machine's cores, as every loopback benchmark here does.
"""
import argparse
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def instance(spec):
    """A deterministic single instance for an input spec of tests/fixtures/zoo.json."""
    n = 1
    for d in spec["shape"]:
        n *= d
    vals = [((i * 7919) % 1000) / 1000.0 - 0.5 for i in range(n)]

    def nest(flat, shape):
        if len(shape) == 1:
            return flat
        step = len(flat) // shape[0]
        return [nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]

    return vals, nest(vals, spec["shape"])


# --- gRPC request framing (hand-written wire encoding; no protobuf needed) ---

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def predict_frame(model, alias, spec, flat):
    dims = b"".join(ld(2, b"\x08" + varint(d)) for d in [1] + spec["shape"])
    tensor = b"\x08\x01" + ld(2, dims) + ld(4, struct.pack(f"<{len(flat)}f", *flat))
    msg = ld(1, ld(1, model.encode())) + ld(2, ld(1, alias.encode()) + ld(2, tensor))
    return b"\x00" + struct.pack(">I", len(msg)) + msg


# --- load generators ---------------------------------------------------------

def parse_ms(tok):
    m = re.match(r"([\d.]+)(us|ms|s)", tok)
    v = float(m.group(1))
    return v / 1000 if m.group(2) == "us" else v * 1000 if m.group(2) == "s" else v


def run_wrk(port, model, body, clients, duration, work):
    lua = os.path.join(work, "post.lua")
    with open(lua, "w") as f:
        f.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n')
        f.write("wrk.body = [==[" + body + "]==]\n")  # JSON may contain "]]"
    out = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{duration}s", "--latency", "-s", lua,
                          f"http://127.0.0.1:{port}/v1/models/{model}:predict"],
                         capture_output=True, text=True, timeout=duration + 60).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    lat = dict(re.findall(r"^\s+(50|99)%\s+(\S+)", out, re.M))
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {"rps": rps, "p50_ms": parse_ms(lat["50"]), "p99_ms": parse_ms(lat["99"]),
            "errors": int(errors.group(1)) if errors else 0}


def run_h2load(port, frame, clients, duration, work):
    req = os.path.join(work, "req.bin")
    with open(req, "wb") as f:
        f.write(frame)
    conns = min(clients, 32)
    streams = max(1, (clients + conns - 1) // conns)
    log = os.path.join(work, "lat.tsv")
    if os.path.exists(log):
        os.remove(log)  # h2load appends to an existing log file
    out = subprocess.run(["h2load", "-D", str(duration), "-c", str(conns), "-m", str(streams),
                          "-t", "1", "-H", "content-type: application/grpc", "-H", "te: trailers",
                          "-d", req, "--log-file", log,
                          f"http://127.0.0.1:{port}/tensorflow.serving.PredictionService/Predict"],
                         capture_output=True, text=True, timeout=duration + 60).stdout
    rows = [line.split("\t") for line in open(log) if line.strip()]
    ok = sorted(int(r[2]) for r in rows if r[1] == "200")
    rps = float(re.search(r"finished in [\d.]+\w+, ([\d.]+) req/s", out).group(1))
    pick = lambda q: ok[min(len(ok) - 1, int(q * len(ok)))] / 1000.0 if ok else float("nan")
    return {"rps": rps, "p50_ms": pick(0.5), "p99_ms": pick(0.99), "errors": len(rows) - len(ok)}


# --- CPU accounting ------------------------------------------------------------

def proc_cpu_s(pid):
    """User + system CPU seconds of a process so far, from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu_s():
    import resource
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


# --- servers -------------------------------------------------------------------

class Server:
    def __init__(self, binary, model, base, batching, work):
        self.rest, self.grpc = free_port(), free_port()
        args = [binary, f"--port={self.grpc}", f"--rest_api_port={self.rest}",
                f"--model_name={model}", f"--model_base_path={base}"]
        if batching is not None:
            cfg = os.path.join(work, "batching.config")
            with open(cfg, "w") as f:
                f.write(batching)
            args += ["--enable_batching", f"--batching_parameters_file={cfg}"]
            # Metrics on, to read the batch sizes the batcher formed.
            mon = os.path.join(work, "monitoring.config")
            with open(mon, "w") as f:
                f.write('prometheus_config { enable: true path: "/metrics" }\n')
            args += [f"--monitoring_config_file={mon}"]
        self.batching = batching is not None
        self.log = open(os.path.join(work, "tensord.log"), "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.rest}/v1/models/{model}", timeout=1)
                return
            except Exception:
                time.sleep(0.05)
        raise RuntimeError("tensord did not come up")

    def batches(self):
        """(batches run, rows in them) so far, from the processed_batch_size
        histogram's _count and _sum summed over its series; None when
        batching is off."""
        if not self.batching:
            return None
        text = urllib.request.urlopen(f"http://127.0.0.1:{self.rest}/metrics", timeout=5).read().decode()
        total = {"_count": 0.0, "_sum": 0.0}
        for line in text.splitlines():
            m = re.match(r":tensorflow:serving:batching_session:processed_batch_size(_count|_sum)(\{[^}]*\})? (\S+)", line)
            if m:
                total[m.group(1)] += float(m.group(3))
        return total["_count"], total["_sum"]

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        self.log.close()


def engine_gain(bench, model, threads, zoo, iters_b1=2000, iters_b32=200):
    res = {}
    for batch, iters in ((1, iters_b1), (32, iters_b32)):
        out = subprocess.run([bench, zoo, model, str(batch), str(iters), str(threads)],
                             capture_output=True, text=True, timeout=600, cwd=ROOT).stdout
        res[batch] = json.loads(out.strip().splitlines()[-1])
    items1 = 1e6 / res[1]["p50_us"]
    items32 = 32 * 1e6 / res[32]["p50_us"]
    return items32 / items1, res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "tensord"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "eng_bench"))
    ap.add_argument("--models", default="mlp,cnn")
    ap.add_argument("--clients", default="1,8,32,128")
    ap.add_argument("--timeouts", default="0,1000,5000")
    ap.add_argument("--transports", default="rest,grpc")
    ap.add_argument("--duration", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1,
                    help="runs per cell, back to back on the same server; the median (by req/s) is kept")
    ap.add_argument("--plot", help="also write requests/s and p99 across clients as a PNG plot")
    ap.add_argument("--models-file", default=os.path.join(ROOT, "tests", "fixtures", "zoo.json"),
                    help="models in zoo.json's layout, e.g. the real-size ones of "
                         "scripts/make_fixtures.py --large DIR (DIR/large.json)")
    ap.add_argument("--engine-iters", default="2000,200",
                    help="eng_bench iterations at batch 1 and 32, for the engine's own gain")
    ap.add_argument("--batch-threads", type=int, default=0,
                    help="num_batch_threads of the batching cells (default: the core count)")
    a = ap.parse_args()
    zoo_file = os.path.abspath(a.models_file)
    zoo = json.load(open(zoo_file))["models"]
    it1, it32 = (int(x) for x in a.engine_iters.split(","))
    cores = os.cpu_count()
    clients = [int(c) for c in a.clients.split(",")]
    timeouts = [int(t) for t in a.timeouts.split(",")]
    results = []
    with tempfile.TemporaryDirectory() as work:
        for model in a.models.split(","):
            spec_all = zoo[model]
            (alias, spec), = spec_all["inputs"].items()
            flat, nested = instance(spec)
            body = json.dumps({"instances": [nested]}, separators=(",", ":"))
            frame = predict_frame(model, alias, spec, flat)
            base = os.path.dirname(os.path.join(ROOT, spec_all["dir"]))
            gain, eng = engine_gain(a.bench, model, cores, zoo_file, it1, it32)
            configs = [("off", None)] + [
                (f"on, timeout {t} us",
                 f"max_batch_size {{ value: 32 }}\nbatch_timeout_micros {{ value: {t} }}\n"
                 f"max_enqueued_batches {{ value: 1000 }}\nnum_batch_threads {{ value: {a.batch_threads or cores} }}\n")
                for t in timeouts]
            for transport in a.transports.split(","):
                for name, batching in configs:
                    srv = Server(a.bin, model, base, batching, work)
                    try:
                        for c in clients:
                            runs = []
                            for _ in range(a.rounds):
                                s0, c0 = proc_cpu_s(srv.proc.pid), children_cpu_s()
                                b0 = srv.batches()
                                r = (run_wrk(srv.rest, model, body, c, a.duration, work)
                                     if transport == "rest"
                                     else run_h2load(srv.grpc, frame, c, a.duration, work))
                                n = max(1.0, r["rps"] * a.duration)
                                r.update(server_us=(proc_cpu_s(srv.proc.pid) - s0) / n * 1e6,
                                         client_us=(children_cpu_s() - c0) / n * 1e6)
                                b1 = srv.batches()
                                if b0 is not None and b1[0] > b0[0]:
                                    r.update(batches=b1[0] - b0[0],
                                             mean_batch=(b1[1] - b0[1]) / (b1[0] - b0[0]))
                                runs.append(r)
                            runs.sort(key=lambda x: x["rps"])
                            r = runs[len(runs) // 2]  # the median run by requests/s
                            r.update(model=model, transport=transport, batching=name, clients=c,
                                     engine_gain=gain, rounds=a.rounds,
                                     engine_b1_us=eng[1]["p50_us"],
                                     engine_b32_us=eng[32]["p50_us"] / 32)
                            results.append(r)
                            print(json.dumps(r), flush=True)
                    finally:
                        srv.stop()
    if a.plot:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import plot
        plot.batching(results, a.plot)
    print()
    print("| model | transport | batching | " + " | ".join(f"{c} clients: req/s, p99 ms" for c in clients) + " |")
    print("|---|---|---|" + "---|" * len(clients))
    keys = sorted({(r["model"], r["transport"], r["batching"]) for r in results},
                  key=lambda k: (k[0], k[1], k[2] != "off", k[2]))
    for k in keys:
        row = {r["clients"]: r for r in results if (r["model"], r["transport"], r["batching"]) == k}
        cells = [f"{row[c]['rps']:.0f}, {row[c]['p99_ms']:.2f}" + (f" ({row[c]['errors']} err)" if row[c]["errors"] else "")
                 for c in clients if c in row]
        print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
    print()
    # Where a request's CPU goes: the server's and the load generator's
    # (they share the cores) per request, without and with batching, and
    # what the engine itself saves per request in a batch of 32 (its batch-1
    # time less a 32nd of its batch-32 time). When the saving is small next
    # to the rest, no batcher can bring the gain near the engine's.
    print("| model | transport | engine gain (b32/b1 items/s) | best batching gain at 32 clients | ratio (target >= 0.8) | p99 on/off at 32 clients (target <= 2) | mean batch formed | CPU us/request, off -> on (server + load generator) | engine saving us/request |")
    print("|---|---|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        for transport in a.transports.split(","):
            at32 = [r for r in results if r["model"] == model and r["transport"] == transport and r["clients"] == 32]
            off = next((r for r in at32 if r["batching"] == "off"), None)
            on = [r for r in at32 if r["batching"] != "off"]
            if not off or not on:
                continue
            best = max(on, key=lambda r: r["rps"])
            g = best["rps"] / off["rps"]
            cost_off = off["server_us"] + off["client_us"]
            cost_on = best["server_us"] + best["client_us"]
            saved = off["engine_b1_us"] - off["engine_b32_us"]
            print(f"| {model} | {transport} | {best['engine_gain']:.2f} | {g:.2f} ({best['batching']}) | "
                  f"{g / best['engine_gain']:.2f} | {best['p99_ms'] / off['p99_ms']:.2f} | "
                  f"{best.get('mean_batch', float('nan')):.1f} | "
                  f"{off['server_us']:.0f} + {off['client_us']:.0f} = {cost_off:.0f} -> "
                  f"{best['server_us']:.0f} + {best['client_us']:.0f} = {cost_on:.0f} | {saved:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
