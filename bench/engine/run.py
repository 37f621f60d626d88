#!/usr/bin/env python3
"""Engine benchmark: tensord's engine vs onnxruntime vs TensorFlow, in process,
same thread count, on every model of the zoo (tests/fixtures/zoo.json).

    python3 bench/engine/run.py [--threads N] [--build build] [--models mlp,cnn] [--rounds R]

Needs the built build/bench/eng_bench, and a Python with tensorflow-cpu 2.19.1,
onnxruntime and tf2onnx (pip install onnxruntime tf2onnx; a virtualenv with
--system-site-packages over the TF install is enough). Each engine runs in its
own process, so peak RSS is per engine. Models are converted to ONNX with
tf2onnx (opset 17) into bench/engine/.onnx/ on first use.

With --rounds R each (model, batch) is measured R times per engine, the
engines interleaved, and each engine's median round (by p50) is reported.
Reported per model: batch-1 latency p50/p99 (µs), batch-32 throughput
(inferences/s, batch / median batch latency: the median rather than the mean
keeps a busy shared machine's stalls out of it, for every engine alike),
peak RSS (MiB), and the ratios against each peer; then the MLP at batch 64
in GFLOP/s (median) against OpenBLAS's 2048^3 sgemm (best of 5). Prints a
Markdown table (docs/benchmarks.md's) and the raw JSON lines; --plot FILE.png
also draws latency and throughput per model and engine."""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO_JSON = os.path.join(ROOT, "tests", "fixtures", "zoo.json")
ONNX_DIR = os.path.join(ROOT, "bench", "engine", ".onnx")
ITERS = {1: 400, 32: 40, 64: 100}
MLP_FLOP = 2 * (784 * 512 + 512 * 512 + 512 * 10)  # per inference


def zoo():
    with open(ZOO_JSON) as f:
        return json.load(f)["models"]


def zoo_input(spec, batch):
    import numpy as np
    shape = [batch] + spec["shape"]
    i = np.arange(int(np.prod(shape)), dtype=np.int64)
    if spec["gen"] == "float":
        k = (i * 7919 + spec["seed"]) % 2001
        return (k.astype(np.float32) / np.float32(1000.0) - np.float32(1.0)).reshape(shape)
    if spec["gen"] == "int":
        return ((i * 31 + spec["seed"]) % spec["mod"]).astype(spec["dtype"]).reshape(shape)
    t, b = i % shape[-1], i // shape[-1]
    return (t < shape[-1] - 3 * (b % 4)).astype(spec["dtype"]).reshape(shape)


def summarize(lat_us, batch, engine, model, threads):
    lat_us.sort()
    mean = sum(lat_us) / len(lat_us)
    return {"engine": engine, "model": model, "batch": batch, "threads": threads,
            "p50_us": lat_us[len(lat_us) // 2], "p99_us": lat_us[int(len(lat_us) * 0.99)],
            "mean_us": mean, "inf_per_s": batch * 1e6 / mean,
            "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}


def time_calls(fn, batch):
    iters = ITERS.get(batch, 100)
    for _ in range(max(5, iters // 10)):
        fn()
    lat = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        lat.append((time.perf_counter() - t) * 1e6)
    return lat


def peer_tf(model, batch, threads):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    entry = zoo()[model]
    fn = tf.saved_model.load(os.path.join(ROOT, entry["dir"])).signatures["serving_default"]
    feeds = {a: tf.constant(zoo_input(s, batch)) for a, s in entry["inputs"].items()}
    return summarize(time_calls(lambda: fn(**feeds), batch), batch, "tensorflow", model, threads)


def onnx_path(model):
    path = os.path.join(ONNX_DIR, model + ".onnx")
    if not os.path.exists(path):
        os.makedirs(ONNX_DIR, exist_ok=True)
        subprocess.run([sys.executable, "-m", "tf2onnx.convert", "--saved-model",
                        os.path.join(ROOT, zoo()[model]["dir"]), "--output", path,
                        "--opset", "17"], check=True, capture_output=True)
        fix_erfc(path)
    return path


def fix_erfc(path):
    """tf2onnx passes TF's Erfc (Keras GELU) through, but ONNX has no Erfc:
    rewrite each as 1 - Erf(x)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.load(path)
    nodes, changed = [], False
    for n in m.graph.node:
        if n.op_type != "Erfc":
            nodes.append(n)
            continue
        changed = True
        one, erf = n.name + "/one", n.name + "/erf"
        m.graph.initializer.append(numpy_helper.from_array(np.array(1, np.float32), one))
        nodes.append(helper.make_node("Erf", [n.input[0]], [erf], name=erf))
        nodes.append(helper.make_node("Sub", [one, erf], list(n.output), name=n.name))
    if changed:
        del m.graph.node[:]
        m.graph.node.extend(nodes)
        onnx.save(m, path)


def peer_ort(model, batch, threads):
    import onnxruntime as ort
    entry = zoo()[model]
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(onnx_path(model), so, providers=["CPUExecutionProvider"])
    names = {i.name.split(":")[0]: i.name for i in sess.get_inputs()}
    feeds = {names[a]: zoo_input(s, batch) for a, s in entry["inputs"].items()}
    return summarize(time_calls(lambda: sess.run(None, feeds), batch), batch, "onnxruntime",
                     model, threads)


def run_child(args, env=None):
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def tensord(build, model, batch, threads):
    # OpenBLAS starts its worker threads when the library loads, before
    # eng_bench can lower the count, and each spins for a while before it
    # sleeps; in a server that has run for a second they sleep, in a run this
    # short they would spin through it, competing with the other engines'
    # runs for this box's cores. The env sets the count before they start.
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads))
    return run_child([os.path.join(ROOT, build, "bench", "eng_bench"), ZOO_JSON, model,
                      str(batch), str(ITERS.get(batch, 100)), str(threads)], env)


def peer(kind, model, batch, threads):
    return run_child([sys.executable, os.path.abspath(__file__), "--child", kind, model,
                      str(batch), str(threads)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--build", default="build")
    ap.add_argument("--models", default=",".join(sorted(zoo())))
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure each engine this many times, interleaved; report the median")
    ap.add_argument("--plot", help="also write the figures as a PNG plot to this path")
    ap.add_argument("--child", nargs=4)
    a = ap.parse_args()
    if a.child:
        kind, model, batch, threads = a.child
        fn = peer_tf if kind == "tf" else peer_ort
        print(json.dumps(fn(model, int(batch), int(threads))))
        return
    rows, raw = [], []
    for m in a.models.split(","):
        r = {}
        for b in (1, 32):
            # Rounds interleave the three engines, so that a busy spell on a
            # shared machine lands on all of them; each engine's figures come
            # from its median round (by p50), p99 and RSS from that same run.
            runs = {"td": [], "ort": [], "tf": []}
            for _ in range(a.rounds):
                runs["td"].append(tensord(a.build, m, b, a.threads))
                runs["ort"].append(peer("ort", m, b, a.threads))
                runs["tf"].append(peer("tf", m, b, a.threads))
            for k, v in runs.items():
                raw += v
                r[k, b] = sorted(v, key=lambda x: x["p50_us"])[len(v) // 2]
        rows.append((m, r))
        print("measured", m, file=sys.stderr)
    mlp64 = tensord(a.build, "mlp", 64, a.threads)
    gemm = run_child([os.path.join(ROOT, a.build, "bench", "eng_bench"), ZOO_JSON, "mlp", "1",
                      "1", str(a.threads), "sgemm"])
    raw += [mlp64, gemm]
    mib = lambda x: x["peak_rss_kb"] / 1024
    tp = lambda x: x["batch"] * 1e6 / x["p50_us"]
    print("threads: %d (intra-op, all engines); latency in µs, throughput in inferences/s\n"
          % a.threads)
    print("| model | b1 p50 / p99: tensord | onnxruntime | TensorFlow | b1 p50 vs ORT / TF "
          "| b32 inf/s: tensord | ORT | TF | b32 vs ORT | peak RSS MiB: tensord / ORT / TF |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m, r in rows:
        t1, o1, f1 = r["td", 1], r["ort", 1], r["tf", 1]
        t32, o32, f32 = r["td", 32], r["ort", 32], r["tf", 32]
        print("| %s | %.0f / %.0f | %.0f / %.0f | %.0f / %.0f | %.2f× / %.2f× | %.0f | %.0f | %.0f "
              "| %.2f× | %.0f / %.0f / %.0f |" % (
                  m, t1["p50_us"], t1["p99_us"], o1["p50_us"], o1["p99_us"], f1["p50_us"],
                  f1["p99_us"], t1["p50_us"] / o1["p50_us"], t1["p50_us"] / f1["p50_us"],
                  tp(t32), tp(o32), tp(f32), tp(t32) / tp(o32),
                  max(mib(t1), mib(t32)), max(mib(o1), mib(o32)), max(mib(f1), mib(f32))))
    gf = MLP_FLOP * 64 / mlp64["p50_us"] / 1e3
    print("\nMLP batch 64: %.1f GFLOP/s (%.0f µs); OpenBLAS sgemm 2048^3: %.1f GFLOP/s; "
          "ratio %.2f" % (gf, mlp64["p50_us"], gemm["gflops"], gf / gemm["gflops"]))
    if a.plot:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import plot
        plot.engine(rows, a.threads, a.plot)
    print("\nraw:")
    for x in raw:
        print(json.dumps(x))


if __name__ == "__main__":
    main()
