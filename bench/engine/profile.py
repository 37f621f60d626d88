#!/usr/bin/env python3
"""Per-layer profiles of one model: tensord's engine beside onnxruntime and
OpenVINO, the same inputs, batch and thread count, each engine in its own
process (as run.py runs them).

    python3 bench/engine/profile.py MODEL [--batch 1] [--iters 10] [--threads 1]
        [--models-file F] [--peers ort,ov] [--build build] [--top 12] [--json OUT]

tensord: eng_bench's profile mode (eng_profile.h: wall time per graph node,
kernel and fused epilogue). onnxruntime: its session profiler (per node
kernel time). OpenVINO: its per-node performance counters
(ov.properties.enable_profiling) with each node's shapes from its execution
graph. Every engine fuses differently (a batch-norm, bias and activation
into the convolution, a residual add into it or not), so nodes are compared
in classes whose work all three do: 1x1 convolutions, larger convolutions,
depthwise convolutions, matrix products, and everything else. Convolutions
are also grouped by shape (kernel, channels in and out, output size,
stride), and for each shape the table gives every engine's time and
GFLOP/s: where the engine falls behind, layer by layer.

Prints two Markdown tables (classes; the --top conv shapes by tensord's
time) and, with --json, writes every engine's nodes and totals. Timing
noise on a shared machine applies to each engine alike; run it more than
once before reading a small difference."""
import argparse
import collections
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as bench  # noqa: E402  (zoo, inputs, ONNX conversion, ISA caps)

CLASSES = ["conv 1x1", "conv kxk", "depthwise", "matmul", "other"]


def conv_sig(kh, kw, ci, co, oh, ow, stride):
    return {"sig": "%dx%d %d->%d @%dx%d s%d" % (kh, kw, ci, co, oh, ow, stride),
            "flop": 2 * oh * ow * co * kh * kw * ci}


def td_nodes(a):
    """tensord's nodes: (class, conv signature or None, microseconds, op)."""
    out = subprocess.run([os.path.join(bench.ROOT, a.build, "bench", "eng_bench"),
                          os.environ.get("TD_BENCH_MODELS", bench.ZOO_JSON), a.model,
                          str(a.batch), str(a.iters), str(a.threads), "profile"],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, OPENBLAS_NUM_THREADS="1")).stdout
    lines = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    summary, rows = lines[0], []
    for n in lines[1:]:
        op, sig = n["op"], None
        if op == "Conv2D" and n["in1"] and n["out"] and n["in0"]:
            kh, kw, ci, co = n["in1"]
            b, oh, ow, _ = n["out"]
            sig = conv_sig(kh, kw, ci, co, oh, ow, n["in0"][1] // oh)
            sig["flop"] *= b * n["calls"]  # batch slices: one call per slice
            cls = "conv 1x1" if kh == kw == 1 else "conv kxk"
        elif op.startswith("DepthwiseConv2dNative") or op == "_DepthwiseConv2dNativePadded":
            cls = "depthwise"
        elif op in ("MatMul", "BatchMatMulV2", "BatchMatMul", "Einsum"):
            cls = "matmul"
        else:
            cls = "other"
        rows.append({"cls": cls, "sig": sig, "us": n["us"], "op": op, "name": n["profile"]})
    return summary, rows


def child_ort(a):
    import onnxruntime as ort
    entry = bench.zoo()[a.model]
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.enable_profiling = True
    tmp = tempfile.mkdtemp()
    so.profile_file_prefix = os.path.join(tmp, "ort")
    sess = ort.InferenceSession(bench.onnx_path(a.model), so, providers=["CPUExecutionProvider"])
    names = {i.name.split(":")[0]: i.name for i in sess.get_inputs()}
    feeds = {names[k]: bench.zoo_input(s, a.batch) for k, s in entry["inputs"].items()}
    # The profiler runs from the session's start: three warm-up runs, then
    # only the last a.iters runs are counted.
    for _ in range(3 + a.iters):
        sess.run(None, feeds)
    path = sess.end_profiling()
    events = json.load(open(path))
    runs = [e for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    first = runs[-a.iters]["ts"] if len(runs) >= a.iters else 0
    rows = collections.OrderedDict()
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time") or e["ts"] < first:
            continue
        args = e.get("args", {})
        r = rows.setdefault(e["name"], {"us": 0.0, "args": args})
        r["us"] += e["dur"] / a.iters
    for f in glob.glob(os.path.join(tmp, "*")):
        os.remove(f)
    out = []
    for name, r in rows.items():
        args, op = r["args"], r["args"].get("op_name", "")
        shapes = [list(x.values())[0] for x in args.get("input_type_shape", [])]
        oshape = [list(x.values())[0] for x in args.get("output_type_shape", [])]
        cls, sig = "other", None
        if op in ("Conv", "FusedConv") and len(shapes) > 1 and oshape:
            n_, c, h, _ = shapes[0]
            co, cig, kh, kw = shapes[1]
            _, _, oh, ow = oshape[0]
            if cig == 1 and c > 1 and co == c:
                cls = "depthwise"
            else:
                cls = "conv 1x1" if kh == kw == 1 else "conv kxk"
                sig = conv_sig(kh, kw, c, co, oh, ow, h // oh)
                sig["flop"] *= n_
        elif op in ("MatMul", "FusedMatMul", "Gemm", "MatMulNBits", "Einsum"):
            cls = "matmul"
        out.append({"cls": cls, "sig": sig, "us": r["us"], "op": op,
                    "name": name[:-len("_kernel_time")]})
    return out


def child_ov(a):
    import openvino as ov
    entry = bench.zoo()[a.model]
    m = ov.convert_model(bench.model_dir(entry))
    alias_of = {}
    for inp in m.inputs:
        names = inp.get_names()
        alias_of[inp.get_any_name()] = next(k for k in entry["inputs"]
                                            if k in names or k + ":0" in names)
    m.reshape({n: [a.batch] + entry["inputs"][k]["shape"] for n, k in alias_of.items()})
    compiled = ov.Core().compile_model(m, "CPU", {"INFERENCE_NUM_THREADS": a.threads,
                                                   "PERFORMANCE_HINT": "LATENCY",
                                                   "INFERENCE_PRECISION_HINT": "f32",
                                                   "PERF_COUNT": True})
    req = compiled.create_infer_request()
    feeds = {n: bench.zoo_input(entry["inputs"][k], a.batch) for n, k in alias_of.items()}
    for _ in range(3):
        req.infer(feeds)
    tot = collections.defaultdict(float)
    kinds = {}
    for _ in range(a.iters):
        req.infer(feeds)
        for p in req.profiling_info:
            tot[p.node_name] += p.real_time.total_seconds() * 1e6 / a.iters
            kinds[p.node_name] = (p.node_type, p.exec_type)
    shapes = {}
    for op in compiled.get_runtime_model().get_ordered_ops():
        ins = [list(op.input(i).get_partial_shape().to_shape()) if
               op.input(i).get_partial_shape().is_static else None for i in range(op.get_input_size())]
        outs = [list(op.output(i).get_partial_shape().to_shape()) if
                op.output(i).get_partial_shape().is_static else None
                for i in range(op.get_output_size())]
        shapes[op.get_friendly_name()] = (ins, outs)
    out = []
    for name, us in tot.items():
        ntype, etype = kinds[name]
        ins, outs = shapes.get(name, ([], []))
        cls, sig = "other", None
        if ntype in ("Convolution", "GroupConvolution") and ins and ins[0] and outs and outs[0]:
            n_, c, h, _ = ins[0]
            _, co, oh, ow = outs[0]
            w = ins[1] if len(ins) > 1 else None
            if ntype == "GroupConvolution" or "dw" in etype:
                cls = "depthwise" if (w is None or len(w) == 5 and w[0] == c) else "other"
            elif w and len(w) == 4:
                kh, kw = w[2], w[3]
                cls = "conv 1x1" if kh == kw == 1 else "conv kxk"
                sig = conv_sig(kh, kw, c, co, oh, ow, h // oh)
                sig["flop"] *= n_
            else:
                cls = "conv 1x1" if "1x1" in etype else "conv kxk"
        elif ntype in ("FullyConnected", "MatMul", "Gemm"):
            cls = "matmul"
        out.append({"cls": cls, "sig": sig, "us": us, "op": "%s/%s" % (ntype, etype), "name": name})
    return out


def peer_rows(kind, a):
    args = [sys.executable, os.path.abspath(__file__), a.model, "--child", kind,
            "--batch", str(a.batch), "--iters", str(a.iters), "--threads", str(a.threads)]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models-file", help="a models JSON (e.g. make_fixtures.py --large's)")
    ap.add_argument("--peers", default="ort,ov")
    ap.add_argument("--build", default="build")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--json", help="write every engine's nodes here")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.models_file:
        os.environ["TD_BENCH_MODELS"] = os.path.abspath(a.models_file)
    if a.child:
        print(json.dumps({"ort": child_ort, "ov": child_ov}[a.child](a)))
        return
    summary, td = td_nodes(a)
    engines = {"tensord": td}
    names = {"tensord": "tensord", "ort": "onnxruntime", "ov": "OpenVINO"}
    for k in filter(None, a.peers.split(",")):
        engines[names[k]] = peer_rows(k, a)
    cols = list(engines)
    print("%s, batch %d, %d thread(s), %d runs; tensord on %s, its p50 %.1f µs\n" % (
        a.model, a.batch, a.threads, a.iters, summary["isa"], summary["p50_us"]))
    print("| class | " + " | ".join("%s µs" % c for c in cols) +
          " | " + " | ".join("%s ÷ %s" % ("tensord", c) for c in cols[1:]) + " |")
    print("|---" * (1 + 2 * len(cols) - 1) + "|")
    by_cls = {c: collections.defaultdict(float) for c in cols}
    for c in cols:
        for r in engines[c]:
            by_cls[c][r["cls"]] += r["us"]
    for cl in CLASSES + ["total"]:
        v = {c: sum(by_cls[c].values()) if cl == "total" else by_cls[c][cl] for c in cols}
        ratios = ["%.2f×" % (v["tensord"] / v[c]) if v[c] > 0 else "—" for c in cols[1:]]
        print("| %s | %s | %s |" % (cl, " | ".join("%.0f" % v[c] for c in cols), " | ".join(ratios)))
    sigs = {c: collections.defaultdict(lambda: [0.0, 0, 0]) for c in cols}
    for c in cols:
        for r in engines[c]:
            if r["sig"]:
                s = sigs[c][r["sig"]["sig"]]
                s[0] += r["us"]
                s[1] += r["sig"]["flop"]
                s[2] += 1
    print("\n| conv shape (k, in->out @ output, stride) | layers | " +
          " | ".join("%s µs (GFLOP/s)" % c for c in cols) + " |")
    print("|---" * (2 + len(cols)) + "|")
    top = sorted(sigs["tensord"].items(), key=lambda kv: -kv[1][0])[:a.top]
    for sig, (us, flop, n) in top:
        cells = []
        for c in cols:
            s = sigs[c].get(sig)
            cells.append("%.0f (%.0f)" % (s[0], s[1] / s[0] / 1e3) if s and s[0] > 0 else "—")
        print("| %s | %d | %s |" % (sig, n, " | ".join(cells)))
    other = collections.Counter()
    for r in td:
        if r["cls"] == "other":
            other[r["op"]] += r["us"]
    print("\ntensord's other ops (µs): " + ", ".join("%s %.0f" % kv for kv in other.most_common(8)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary, "engines": engines}, f)


if __name__ == "__main__":
    main()
