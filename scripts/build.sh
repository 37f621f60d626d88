#!/usr/bin/env bash
# Configures and builds tensord into build/ (the daemon lands at build/tensord).
# Extra arguments go to the cmake configure step, e.g. -DTENSORD_WERROR=ON.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@"
cmake --build build -j"$(nproc)"
