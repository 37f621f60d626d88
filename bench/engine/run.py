#!/usr/bin/env python3
"""Engine benchmark: tensord's engine vs onnxruntime, OpenVINO and TensorFlow,
in process, same thread count, on every model of the zoo (tests/fixtures/zoo.json)
or of a --models-file (scripts/make_fixtures.py --large DIR writes real-size
models and DIR/large.json).

    python3 bench/engine/run.py [--threads N] [--build build] [--models mlp,cnn]
        [--models-file F] [--peers ort,ov,tf] [--iters 1:N,32:M] [--rounds R] [--plot F.png]
        [--td-threads 1,2] [--base-build DIR] [--warmup W] [--isa avx512|avx2|generic]
        [--td-isas avx512]

Needs the built build/bench/eng_bench, and a Python with the pins of
bench/engine/requirements.txt over the test install of tensorflow-cpu 2.19.1
(bench/engine/venv.sh VENV makes one). Each engine runs in its
own process, so peak RSS is per engine. Models are converted to ONNX with
tf2onnx (opset 17) into bench/engine/.onnx/ on first use; OpenVINO reads the
SavedModel itself (openvino.convert_model). The engine's ISA (chosen by CPUID
at run time) is printed with the table.

--isa avx2 (or generic, or avx512) caps the instruction set: tensord through
TENSORD_ENGINE_ISA (and OpenBLAS, which a few of its ops call, through
OPENBLAS_CORETYPE: Haswell, Prescott or SkylakeX); OpenVINO and TensorFlow
through oneDNN's ONEDNN_MAX_CPU_ISA (AVX2, SSE41), which OpenVINO's
convolutions honour but not its own JIT kernels nor the MLAS products of its
FullyConnected layers: the table's "OpenVINO kernels" column counts its
compute nodes by the kernel family its execution graph reports.
onnxruntime's MLAS has no cap and runs the CPU's best (said in the table).
Without --isa nothing is capped. --td-isas avx512 (a list) also runs tensord
with its kernels capped at each of those, interleaved in the same rounds, and
prints a table of each one's figures over the main run's: how the AVX2
kernels compare with their AVX-512 selves on one machine.

With --rounds R each (model, batch) is measured R times per engine, the
engines interleaved, and each engine's median round (by p50) is reported.
Reported per model: batch-1 latency p50/p99 (µs), batch-32 throughput
(inferences/s, batch / median batch latency: the median rather than the mean
keeps a busy shared machine's stalls out of it, for every engine alike),
peak RSS and RSS held after the runs (MiB), load time, and the ratios against the best peer; then the MLP at batch 64
in GFLOP/s (median) against OpenBLAS's 2048^3 sgemm (best of 5). Prints a
Markdown table (docs/benchmarks.md's) and the raw JSON lines; --plot FILE.png
also draws latency and throughput per model and engine.

--td-threads 1,2 also runs tensord at each of those intra-op thread counts,
interleaved in the same rounds as everything else, and prints a second
table: per model, batch-1 p50 and batch-32 throughput at each count, the
speed-up of the largest count over the smallest, and the CPU time over wall
time of each run (how much of its threads' cores the run actually got).
With --base-build DIR it also runs DIR's eng_bench (a build of another
commit) at each of those counts in the same rounds, and prints both, so
that a change is measured against its base in one interleaved run."""
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
for _kv in filter(None, os.environ.get("TD_BENCH_ITERS", "").split(",")):
    ITERS[int(_kv.split(":")[0])] = int(_kv.split(":")[1])
PEERS = {"ort": "onnxruntime", "ov": "OpenVINO", "tf": "TensorFlow"}
# --isa: the caps each engine is given (see the module docstring).
OPENBLAS_CORE = {"avx512": "SkylakeX", "avx2": "Haswell", "generic": "Prescott"}
ONEDNN_ISA = {"avx2": "AVX2", "generic": "SSE41"}
MLP_FLOP = 2 * (784 * 512 + 512 * 512 + 512 * 10)  # per inference


def zoo():
    with open(os.environ.get("TD_BENCH_MODELS", ZOO_JSON)) as f:
        return json.load(f)["models"]


def model_dir(entry):
    return entry["dir"] if os.path.isabs(entry["dir"]) else os.path.join(ROOT, entry["dir"])


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
            "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "rss_kb": rss_kb()}


def rss_kb():
    """Resident set now (after the runs): what holding the model costs."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def time_calls(fn, batch):
    iters = ITERS.get(batch, 100)
    warm = int(os.environ.get("TD_BENCH_WARMUP", "0")) or max(5, iters // 10)
    for _ in range(warm):
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
    fn = tf.saved_model.load(model_dir(entry)).signatures["serving_default"]
    feeds = {a: tf.constant(zoo_input(s, batch)) for a, s in entry["inputs"].items()}
    return summarize(time_calls(lambda: fn(**feeds), batch), batch, "tensorflow", model, threads)


def onnx_path(model):
    path = os.path.join(ONNX_DIR, model + ".onnx")
    if not os.path.exists(path):
        os.makedirs(ONNX_DIR, exist_ok=True)
        subprocess.run([sys.executable, "-m", "tf2onnx.convert", "--saved-model",
                        model_dir(zoo()[model]), "--output", path,
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


def peer_ov(model, batch, threads):
    """OpenVINO reading the SavedModel itself (openvino.convert_model), f32,
    the same thread count, the latency hint, reshaped to the static batch
    (its strongest setting for a fixed-size run)."""
    import openvino as ov
    entry = zoo()[model]
    m = ov.convert_model(model_dir(entry))
    alias_of = {}
    for inp in m.inputs:
        names = inp.get_names()
        alias = next(a for a in entry["inputs"] if a in names or a + ":0" in names)
        alias_of[inp.get_any_name()] = alias
    m.reshape({n: [batch] + entry["inputs"][a]["shape"] for n, a in alias_of.items()})
    compiled = ov.Core().compile_model(m, "CPU", {"INFERENCE_NUM_THREADS": threads,
                                                   "PERFORMANCE_HINT": "LATENCY",
                                                   "INFERENCE_PRECISION_HINT": "f32"})
    req = compiled.create_infer_request()
    feeds = {n: zoo_input(entry["inputs"][a], batch) for n, a in alias_of.items()}
    r = summarize(time_calls(lambda: req.infer(feeds), batch), batch, "openvino", model, threads)
    r["isa"] = ov_kernels(compiled)
    return r


def ov_kernels(compiled):
    """OpenVINO's compute nodes counted by kernel family, from the
    primitive type its execution graph reports for each (e.g.
    brgconv_avx2_1x1_f32, jit_avx512_f32, gemm_mlas_f32); nodes without one
    (constants, reshapes, inputs) are left out."""
    import collections
    count = collections.Counter()
    for op in compiled.get_runtime_model().get_ordered_ops():
        rt = op.get_rt_info()
        kind = rt["primitiveType"].astype(str) if "primitiveType" in rt else "unknown"
        if kind.startswith("unknown"):
            continue
        fam = next((f for f in ("avx512", "avx2", "mlas", "sse41", "ref") if f in kind), "other")
        count[fam] += 1
    return " ".join("%s×%d" % kv for kv in count.most_common())


def capped_env(isa, **extra):
    """The environment of a child run under --isa (None: uncapped)."""
    env = dict(os.environ, **extra)
    if isa:
        env["TENSORD_ENGINE_ISA"] = isa
        env["OPENBLAS_CORETYPE"] = OPENBLAS_CORE[isa]
        if isa in ONEDNN_ISA:
            env["ONEDNN_MAX_CPU_ISA"] = ONEDNN_ISA[isa]
    return env


def run_child(args, env=None):
    out = subprocess.run(args, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def tensord(build, model, batch, threads, isa=None):
    # OpenBLAS starts its worker threads when the library loads, before
    # eng_bench can lower the count, and each spins for a while before it
    # sleeps; in a server that has run for a second they sleep, in a run this
    # short they would spin through it, competing with the other engines'
    # runs for this box's cores. The engine keeps OpenBLAS at one thread
    # (its own pool splits the work, eng_pool.h); the env says so before
    # they start.
    env = capped_env(isa, OPENBLAS_NUM_THREADS="1")
    return run_child([os.path.join(ROOT, build, "bench", "eng_bench"),
                      os.environ.get("TD_BENCH_MODELS", ZOO_JSON), model,
                      str(batch), str(ITERS.get(batch, 100)), str(threads)], env)


def run_td_at(a, model, batch, threads, same):
    """tensord at `threads`, or the round's main tensord run when that is
    the count it ran at."""
    return same if threads == a.threads else tensord(a.build, model, batch, threads, a.isa)


def peer(kind, model, batch, threads, isa=None):
    return run_child([sys.executable, os.path.abspath(__file__), "--child", kind, model,
                      str(batch), str(threads)], capped_env(isa))


CHILD = {"tf": peer_tf, "ort": peer_ort, "ov": peer_ov}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--build", default="build")
    ap.add_argument("--models-file", help="models in zoo.json's layout (default: the zoo); "
                    "scripts/make_fixtures.py --large DIR writes DIR/large.json")
    ap.add_argument("--models", help="comma-separated subset (default: every model of the file)")
    ap.add_argument("--peers", default="ort,ov,tf",
                    help="peers to run besides tensord: ort (onnxruntime), ov (OpenVINO), tf")
    ap.add_argument("--iters", default="",
                    help="timed runs per batch size, e.g. 1:50,32:10 (default 1:400,32:40)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="measure each engine this many times, interleaved; report the median")
    ap.add_argument("--plot", help="also write the figures as a PNG plot to this path")
    ap.add_argument("--warmup", type=int, default=0,
                    help="untimed runs before the timed ones (default max(5, iters/10))")
    ap.add_argument("--td-threads", default="",
                    help="also run tensord at these intra-op thread counts (e.g. 1,2) and print "
                    "their speed-ups")
    ap.add_argument("--isa", choices=sorted(OPENBLAS_CORE),
                    help="cap the instruction set of tensord and, where they allow it, the peers")
    ap.add_argument("--td-isas", default="",
                    help="also run tensord capped at these instruction sets (e.g. avx512) and "
                    "print their figures beside the main run's")
    ap.add_argument("--base-build", help="with --td-threads: also run the eng_bench of this "
                    "build (e.g. main's) at each count, in the same rounds, and print it beside "
                    "--build's")
    ap.add_argument("--child", nargs=4)
    a = ap.parse_args()
    if a.models_file:
        os.environ["TD_BENCH_MODELS"] = os.path.abspath(a.models_file)
    for kv in filter(None, a.iters.split(",")):
        b, n = kv.split(":")
        ITERS[int(b)] = int(n)
    os.environ["TD_BENCH_ITERS"] = ",".join(f"{b}:{n}" for b, n in ITERS.items())
    if a.warmup > 0:
        os.environ["TD_BENCH_WARMUP"] = str(a.warmup)
    if a.child:
        kind, model, batch, threads = a.child
        print(json.dumps(CHILD[kind](model, int(batch), int(threads))))
        return
    peers = [k for k in a.peers.split(",") if k]
    td_counts = sorted({int(t) for t in a.td_threads.split(",") if t})
    td_isas = [i for i in a.td_isas.split(",") if i]
    for i in td_isas:
        if i not in OPENBLAS_CORE:
            ap.error("--td-isas: %s is not one of %s" % (i, ", ".join(sorted(OPENBLAS_CORE))))
    models = a.models.split(",") if a.models else sorted(zoo())
    rows, raw, isa = [], [], "?"
    for m in models:
        r = {}
        for b in (1, 32):
            # Rounds interleave the engines, so that a busy spell on a shared
            # machine lands on all of them; each engine's figures come from
            # its median round (by p50), p99 and RSS from that same run.
            base = ["base@%d" % t for t in td_counts] if a.base_build else []
            runs = {k: [] for k in ["td"] + peers + ["td@%d" % t for t in td_counts] + base
                    + ["td:" + i for i in td_isas]}
            for _ in range(a.rounds):
                runs["td"].append(tensord(a.build, m, b, a.threads, a.isa))
                for k in peers:
                    runs[k].append(peer(k, m, b, a.threads, a.isa))
                for t in td_counts:
                    runs["td@%d" % t].append(run_td_at(a, m, b, t, runs["td"][-1]))
                    if base:
                        runs["base@%d" % t].append(tensord(a.base_build, m, b, t, a.isa))
                for i in td_isas:
                    runs["td:" + i].append(tensord(a.build, m, b, a.threads, i))
            for k, v in runs.items():
                raw += v
                r[k, b] = sorted(v, key=lambda x: x["p50_us"])[len(v) // 2]
        isa = r["td", 1].get("isa", isa)
        rows.append((m, r))
        print("measured", m, file=sys.stderr)
    mib = lambda x: x["peak_rss_kb"] / 1024  # noqa: E731
    held = lambda x: x.get("rss_kb", 0) / 1024  # noqa: E731
    tp = lambda x: x["batch"] * 1e6 / x["p50_us"]  # noqa: E731
    print("threads: %d (intra-op, all engines); engine ISA: %s; latency in µs, throughput in "
          "inferences/s" % (a.threads, isa))
    print("ISA cap (--isa): %s; tensord ran %s%s%s%s\n" % (
        a.isa or "none", isa,
        "; onnxruntime: MLAS, no cap (the CPU's best)" if "ort" in peers else "",
        "; OpenVINO: %s, kernels per model below" % (
            "ONEDNN_MAX_CPU_ISA=" + ONEDNN_ISA[a.isa] if a.isa in ONEDNN_ISA else "no cap")
        if "ov" in peers else "",
        "; TensorFlow: %s" % ("oneDNN capped, Eigen not" if a.isa in ONEDNN_ISA else "no cap")
        if "tf" in peers else ""))
    names = ["tensord"] + [PEERS[k] for k in peers]
    print("| model | b1 p50 / p99: " + " | ".join(names) + " | b1 vs best peer | b32 inf/s: "
          + " | ".join(names) + " | b32 vs best peer | peak RSS MiB: " + " / ".join(names)
          + " | RSS held MiB: " + " / ".join(names) + " | load ms |"
          + (" OpenVINO kernels |" if "ov" in peers else ""))
    print("|---|" + "---|" * (2 * len(names) + 5 + ("ov" in peers)))
    for m, r in rows:
        keys = ["td"] + peers
        b1 = " | ".join("%.0f / %.0f" % (r[k, 1]["p50_us"], r[k, 1]["p99_us"]) for k in keys)
        b32 = " | ".join("%.0f" % tp(r[k, 32]) for k in keys)
        best1 = min(r[k, 1]["p50_us"] for k in peers) if peers else float("nan")
        best32 = max(tp(r[k, 32]) for k in peers) if peers else float("nan")
        rss = " / ".join("%.0f" % max(mib(r[k, 1]), mib(r[k, 32])) for k in keys)
        kept = " / ".join("%.0f" % held(r[k, 1]) for k in keys)
        vs1 = "%.2f×" % (r["td", 1]["p50_us"] / best1) if peers else "—"
        vs32 = "%.2f×" % (tp(r["td", 32]) / best32) if peers else "—"
        print("| %s | %s | %s | %s | %s | %s | %s | %.0f |%s" % (
            m, b1, vs1, b32, vs32, rss, kept,
            r["td", 1].get("load_ms", float("nan")),
            " %s |" % r["ov", 1].get("isa", "?") if "ov" in peers else ""))
    if len(td_counts) > 1:
        lo, hi = td_counts[0], td_counts[-1]
        print("\ntensord at %s threads (same rounds); speed-up = %d threads ÷ %d thread(s); "
              "CPU/wall = process CPU time over wall time in the timed runs\n"
              % (", ".join(map(str, td_counts)), hi, lo))
        cols = " | ".join("%dt" % t for t in td_counts)
        print("| model | b1 p50 µs: %s | b1 speed-up | b32 inf/s: %s | b32 speed-up | "
              "CPU/wall b1: %s | CPU/wall b32: %s |" % (cols, cols, cols, cols))
        print("|---|" + "---|" * (4 * len(td_counts) + 2))
        for m, r in rows:
            k = ["td@%d" % t for t in td_counts]
            print("| %s | %s | %.2f× | %s | %.2f× | %s | %s |" % (
                m, " | ".join("%.0f" % r[x, 1]["p50_us"] for x in k),
                r[k[0], 1]["p50_us"] / r[k[-1], 1]["p50_us"],
                " | ".join("%.1f" % tp(r[x, 32]) for x in k), tp(r[k[-1], 32]) / tp(r[k[0], 32]),
                " | ".join("%.2f" % r[x, 1].get("cpu_per_wall", 0) for x in k),
                " | ".join("%.2f" % r[x, 32].get("cpu_per_wall", 0) for x in k)))
    if td_isas:
        print("\ntensord capped at %s beside the main run (%s; same rounds); ratio = main run's "
              "time ÷ the capped run's (above 1: the main run is slower)\n"
              % (", ".join(td_isas), isa))
        print("| model | b1 p50 µs: %s | %s | b1 ratio | b32 inf/s: %s | %s | b32 ratio |"
              % (isa, " | ".join(td_isas), isa, " | ".join(td_isas)))
        print("|---|" + "---|" * (2 * len(td_isas) + 2 + 2 * len(td_isas)))
        for m, r in rows:
            k = ["td:" + i for i in td_isas]
            print("| %s | %.0f | %s | %s | %.1f | %s | %s |" % (
                m, r["td", 1]["p50_us"], " | ".join("%.0f" % r[x, 1]["p50_us"] for x in k),
                " | ".join("%.2f×" % (r["td", 1]["p50_us"] / r[x, 1]["p50_us"]) for x in k),
                tp(r["td", 32]), " | ".join("%.1f" % tp(r[x, 32]) for x in k),
                " | ".join("%.2f×" % (tp(r[x, 32]) / tp(r["td", 32])) for x in k)))
    if a.base_build and td_counts:
        lo, hi = td_counts[0], td_counts[-1]
        print("\n%s (before) and %s (after), same rounds: b1 p50 µs and b32 inf/s at %s threads; "
              "speed-up = %d threads ÷ %d thread(s)\n" % (a.base_build, a.build,
                                                          ", ".join(map(str, td_counts)), hi, lo))
        cols = " | ".join("%dt" % t for t in td_counts)
        print("| model | build | b1 p50 µs: %s | b1 speed-up | b32 inf/s: %s | b32 speed-up | "
              "CPU/wall b32: %s |" % (cols, cols, cols))
        print("|---|---|" + "---|" * (3 * len(td_counts) + 2))
        for m, r in rows:
            for label, pre in (("before", "base@"), ("after", "td@")):
                k = [pre + str(t) for t in td_counts]
                print("| %s | %s | %s | %.2f× | %s | %.2f× | %s |" % (
                    m, label, " | ".join("%.0f" % r[x, 1]["p50_us"] for x in k),
                    r[k[0], 1]["p50_us"] / r[k[-1], 1]["p50_us"],
                    " | ".join("%.1f" % tp(r[x, 32]) for x in k),
                    tp(r[k[-1], 32]) / tp(r[k[0], 32]),
                    " | ".join("%.2f" % r[x, 32].get("cpu_per_wall", 0) for x in k)))
    if "mlp" in models and not a.models_file:
        mlp64 = tensord(a.build, "mlp", 64, a.threads, a.isa)
        gemm = run_child([os.path.join(ROOT, a.build, "bench", "eng_bench"), ZOO_JSON, "mlp",
                          "1", "1", str(a.threads), "sgemm"], capped_env(a.isa))
        raw += [mlp64, gemm]
        gf = MLP_FLOP * 64 / mlp64["p50_us"] / 1e3
        print("\nMLP batch 64: %.1f GFLOP/s (%.0f µs); OpenBLAS sgemm 2048^3: %.1f GFLOP/s; "
              "ratio %.2f" % (gf, mlp64["p50_us"], gemm["gflops"], gf / gemm["gflops"]))
    if a.plot:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        import plot
        plot.engine(rows, a.threads, a.plot, ["td"] + peers)
    print("\nraw:")
    for x in raw:
        print(json.dumps(x))


if __name__ == "__main__":
    main()
