#!/usr/bin/env bash
# The GPU device check, run ON the GPU machine (device tool) after
# scripts/gpu-pack.sh here, carrying .gpu:
#   1. the backend-consistency test (every lowered op, TensorFlow's cases
#      and random odd shapes, CPU vs CUDA), required to find the GPU;
#   2. the zoo served by the daemon on the GPU, checked against
#      TensorFlow's outputs (tests/e2e: test_device.py with
#      TENSORD_E2E_DEVICE=gpu, and test_zoo.py with the default --device=auto);
#   3. the GPU benchmark (bench/gpu/run.sh).
# Everything is logged to $OUT/gpu-check.log ($OUT is the device tool's
# output folder; /tmp/gpu-check elsewhere).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
exec > >(tee "$OUT/gpu-check.log") 2>&1
[ -f .gpu/pack.tar.xz ] || { echo "no .gpu/pack.tar.xz: run scripts/gpu-pack.sh and carry .gpu"; exit 2; }
G=/tmp/tensord-gpu
rm -rf "$G" && mkdir -p "$G" && tar -C "$G" -xJf .gpu/pack.tar.xz || exit 2
# cuBLAS from the machine: the toolkit's, or the nvidia-cublas wheel's.
libs=$G/lib
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib \
  $(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null); do
  [ -d "$d" ] && libs=$libs:$d
done
export LD_LIBRARY_PATH=$libs:${LD_LIBRARY_PATH:-}
export TENSORD_CUDA_PLUGIN=$G/bin/libtensord_cuda.so
nvidia-smi -L || true
echo "== 1. backend consistency (CPU vs CUDA)"
TENSORD_REQUIRE_GPU=1 "$G/bin/test_eng_device"
rc1=$?
echo "== 2. the zoo on the GPU against TensorFlow"
TENSORD_BIN=$G/bin/tensord TENSORD_E2E_DEVICE=gpu PYTHONUNBUFFERED=1 \
  python3 -m pytest -q -p no:cacheprovider tests/e2e/test_device.py tests/e2e/test_zoo.py
rc2=$?
echo "== 3. benchmark"
bench/gpu/run.sh "$G/bin" 2
rc3=$?
echo "gpu-check: consistency rc=$rc1, zoo rc=$rc2, benchmark rc=$rc3"
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && [ $rc3 -eq 0 ]
