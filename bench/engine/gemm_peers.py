#!/usr/bin/env python3
"""The packed GEMM against onnxruntime's and OpenVINO's MatMul, same shapes,
same run, interleaved rounds, --threads threads each (default 1).

Each shape MxKxN becomes a one-node ONNX model, Y = X[M,K] @ W[K,N] with W a
constant initializer (as a model's weights are), run by onnxruntime and by
OpenVINO (CPU plugin, 1 inference thread, f32 precision hint). tensord's side
is build/bench/gemm_bench (eng_gemm_run; conv:MxSEGxLENxN shapes run
eng_gemm_run_rows, and the peers the plain MatMul of the same M, K, N).
Extra --td binaries (e.g. a build of another branch) run beside it.

usage: /work/venv-bench/bin/python bench/engine/gemm_peers.py [--rounds 3]
       [--secs 0.3] [--threads 1] [--td NAME=PATH ...] [--peers ort,ov] [SHAPE ...]
Prints one table row per shape: median GFLOP/s per engine over the rounds.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

DEFAULT = [
    "128x768x768", "128x768x3072", "128x3072x768",
    "4096x768x768", "4096x768x3072", "4096x3072x768",
    "3136x64x256", "784x512x128", "49x2048x512",
    "conv:784x3x384x128", "conv:49x3x1536x512",
    "1x2048x2048", "32x2048x2048",
]


def dims(shape):
    if shape.startswith("conv:"):
        m, seg, ln, n = (int(x) for x in shape[5:].split("x"))
        return m, seg * ln, n
    m, k, n = (int(x) for x in shape.split("x"))
    return m, k, n


def matmul_model(k, n):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = (np.arange(k * n, dtype=np.float32) % 7 * 0.01).reshape(k, n)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "mm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m", k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", n])],
        [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def time_call(fn, secs):
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    iters = max(1, int(secs / 5 / one))
    reps = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        reps.append((time.perf_counter() - t0) / iters)
    return statistics.median(reps)


def peer_runner(peer, m, k, n, threads):
    x = (np.arange(m * k, dtype=np.float32) % 13 * 0.01).reshape(m, k)
    blob = matmul_model(k, n)
    if peer == "ort":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        s = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
        return lambda: s.run(None, {"x": x})
    import openvino as ov
    core = ov.Core()
    model = core.read_model(blob, b"")
    cm = core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads, "INFERENCE_PRECISION_HINT": "f32",
                                           "NUM_STREAMS": 1})
    req = cm.create_infer_request()
    return lambda: req.infer({0: x})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=float, default=0.3)
    ap.add_argument("--td", action="append", default=[], help="NAME=PATH of another gemm_bench")
    ap.add_argument("--peers", default="ort,ov")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("shapes", nargs="*")
    a = ap.parse_args()
    shapes = a.shapes or DEFAULT
    here = os.path.dirname(os.path.abspath(__file__))
    tds = [("td", os.path.join(here, "..", "..", "build", "bench", "gemm_bench"))]
    tds += [tuple(t.split("=", 1)) for t in a.td]
    peers = [p for p in a.peers.split(",") if p]
    env = dict(os.environ, GEMM_BENCH_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    names = [t[0] for t in tds] + peers
    res = {s: {nm: [] for nm in names} for s in shapes}
    runners = {}
    for r in range(a.rounds):
        for s in shapes:
            m, k, n = dims(s)
            flops = 2.0 * m * k * n
            for nm, path in tds:
                out = subprocess.run([path, str(a.secs), s], env=env, check=True,
                                     capture_output=True, text=True).stdout
                res[s][nm].append(json.loads(out.splitlines()[-1])["gflops"])
            for p in peers:
                key = (p, m, k, n)
                if key not in runners:
                    runners[key] = peer_runner(p, m, k, n, a.threads)
                res[s][p].append(flops / time_call(runners[key], a.secs) * 1e-9)
        print(f"round {r + 1}/{a.rounds} done, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    print("| shape (m x k x n) | " + " | ".join(f"{nm} GFLOP/s" for nm in names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for s in shapes:
        print(f"| {s} | " + " | ".join(f"{statistics.median(res[s][nm]):.0f}" for nm in names) + " |")


if __name__ == "__main__":
    main()
