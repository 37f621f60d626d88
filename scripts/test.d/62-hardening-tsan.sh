#!/usr/bin/env bash
# ThreadSanitizer stage: the batching suites (queue, batcher, run costs) and
# the lifecycle suites (manager, registry, watcher-driven scans) and the
# engine's thread pool and the kernels split over it (Winograd's blocks
# among them), built with
# clang 14 and -fsanitize=thread; any report fails the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=build-tsan
mkdir -p "$B"
# C11 mutexes made visible to TSan (see the file's comment).
clang-14 -O1 -fsanitize=thread -c tests/support/td_tsan_c11.c -o "$B/td_tsan_c11.o"
CC=clang-14 cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSORD_WERROR=ON -DTENSORD_CUDA=OFF \
  -DCMAKE_C_FLAGS="-fsanitize=thread -fno-omit-frame-pointer" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread $PWD/$B/td_tsan_c11.o" >/dev/null
suites=(test_bat_queue test_bat_batcher test_bat_runcost test_ldr_manager test_ldr_registry test_eng_pool
  test_eng_threads test_eng_model test_eng_wino)
cmake --build "$B" -j"$(nproc)" --target "${suites[@]}"
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
# Check forks a child per test; CK_FORK=no keeps each suite in one process
# so that TSan sees every thread the suite starts.
for t in "${suites[@]}"; do
  echo "== $t (TSan)"
  CK_FORK=no CK_DEFAULT_TIMEOUT=600 "$B/tests/$t"
done
