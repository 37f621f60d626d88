#!/usr/bin/env bash
# GPU benchmark (needs a GPU): zoo throughput on the GPU against the CPU
# engine on the same machine, at batch 1, 8, 64 and 256, then the engine's
# GEMM primitive against cuBLAS called directly.
#
#   bench/gpu/run.sh [BIN_DIR] [SECONDS]
#
# BIN_DIR holds gpu_bench, cu_gemm_bench and libtensord_cuda.so (default:
# build/bench with the plug-in in build/; scripts/gpu-pack.sh puts all three
# in .gpu/bin). Output: JSON lines, then a summary of the ratios the GPU
# issue asks for (CNN at batch 64 >= 20x the CPU engine; large GEMMs >= 0.7
# of cuBLAS).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-build/bench}
SECS=${2:-2}
PLUGIN=${TENSORD_CUDA_PLUGIN:-}
if [ -z "$PLUGIN" ]; then
  for p in "$BIN/libtensord_cuda.so" "$BIN/../libtensord_cuda.so"; do
    [ -f "$p" ] && PLUGIN=$(realpath "$p") && break
  done
fi
export TENSORD_CUDA_PLUGIN=$PLUGIN
out=$(mktemp)
"$BIN/gpu_bench" tests/fixtures/zoo.json gpu cnn,transformer,mlp,mobilenet_v2 1,8,64,256 "$SECS" | tee "$out"
"$BIN/cu_gemm_bench" 20 | tee -a "$out"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("\nsummary")
for r in rows:
    if "gpu_over_cpu" in r:
        print(f"  {r['model']:<13} GPU / CPU engine throughput by batch: " +
              ", ".join(f"b{b} {v:.1f}x" for b, v in r["gpu_over_cpu"].items()))
for r in rows:
    if r.get("batch") == 1 and r.get("device", "cpu") != "cpu":
        print(f"  {r['model']:<13} batch-1 GPU request (launches + copies + compute): "
              f"p50 {r['p50_us']:.0f} us, p99 {r['p99_us']:.0f} us")
for r in rows:
    if "shape" in r:
        print(f"  GEMM {r['shape']:<40} engine {r['engine_gflops']:.0f} GFLOP/s, "
              f"cuBLAS {r['cublas_gflops']:.0f} GFLOP/s, ratio {r['ratio']:.2f}")
PY
rm -f "$out"
