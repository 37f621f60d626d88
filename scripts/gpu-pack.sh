#!/usr/bin/env bash
# Prepares the GPU device check (scripts/gpu-check.sh): builds with CUDA into
# build-gpu/ (Hopper, sm_90) and gathers what the GPU machine lacks into
# .gpu/ (git-ignored): the daemon, the plug-in, the consistency test and the
# benchmarks in .gpu/bin, and the Debian shared libraries they load
# (libmicrohttpd, gRPC, protobuf-c, cJSON, libuv, OpenBLAS, Check, ...) in
# .gpu/lib. glibc, the C++ runtime and CUDA's own libraries are the GPU
# machine's. Then, with the device tool: run `bash scripts/gpu-check.sh`,
# carrying .gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSORD_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DTENSORD_WERROR=ON >/dev/null
cmake --build build-gpu -j"$(nproc)" --target tensord tensord_cuda test_eng_device gpu_bench \
  cu_gemm_bench
stage=build-gpu/pack
rm -rf "$stage" .gpu
mkdir -p "$stage/bin" "$stage/lib" .gpu
cp build-gpu/tensord build-gpu/libtensord_cuda.so build-gpu/tests/test_eng_device \
  build-gpu/bench/gpu_bench build-gpu/bench/cu_gemm_bench "$stage/bin/"
for b in "$stage"/bin/*; do ldd "$b"; done | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libgcc_s.so* | \
      libstdc++.so* | libcuda.so* | libcublas* | libcudart*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
tar -C "$stage" -cJf .gpu/pack.tar.xz bin lib
grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
ls -l .gpu/pack.tar.xz
