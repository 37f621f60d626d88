#!/usr/bin/env bash
# Sanitizer stage: the tree built with clang 14 (warnings as errors: this is
# also the clang build) under ASan + UBSan (UB aborts, LeakSanitizer on),
# with the libFuzzer targets; every Check suite, then a sample of the
# black-box tests against that build's daemon, where any leak at the
# daemon's exit (after start, traffic, swaps, SIGTERM) fails the test
# through its exit status. The fuzz stage (61) reuses this build.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=build-asan
CC=clang-14 cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENSORD_WERROR=ON \
  -DTENSORD_SANITIZE=ON -DTENSORD_FUZZ=ON -DTENSORD_CUDA=OFF \
  -DCMAKE_C_FLAGS=-fno-sanitize-recover=undefined >/dev/null
cmake --build "$B" -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp:print_suppressions=0
ctest --test-dir "$B" --output-on-failure --timeout 600
# The sample: hostile inputs, the REST surface, lifecycle (swaps, reloads,
# SIGTERM) and gRPC through the stock client. Not the RSS-return check:
# ASan's quarantine keeps freed memory on purpose.
TENSORD_BIN=$PWD/$B/tensord python3 -m pytest -q -p no:cacheprovider \
  tests/e2e/test_hardening.py tests/e2e/test_rest.py tests/e2e/test_lifecycle.py \
  tests/e2e/test_grpc.py -k "not test_memory_returns_after_swaps"
