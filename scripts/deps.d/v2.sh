#!/usr/bin/env bash
# What the v2-protocol tests (tests/e2e/test_v2_*.py) and bench/v2 need:
#  - the stock Triton clients, tritonclient[http,grpc] (pinned);
#  - Triton's perf_analyzer load generator. The `perf-analyzer` package on
#    PyPI is a placeholder without the program, so the binary comes from the
#    last tritonclient wheel that shipped it (2.40.0, data/bin/perf_analyzer),
#    unpacked into $PA_DIR with a wrapper that finds its shared libraries:
#    libb64 (Debian) and the CUDA runtime it links against (PyPI's
#    nvidia-cuda-runtime-cu12; no GPU is needed or used).
# Idempotent: each step is skipped when its result is already there.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
PA_DIR=${TENSORD_PERF_ANALYZER_DIR:-/opt/tensord-perf}

if ! python3 -c 'import tritonclient.http, tritonclient.grpc, importlib.metadata as m;
assert m.version("tritonclient") == "2.61.0"' 2>/dev/null; then
  python3 -m pip install -q 'tritonclient[http,grpc]==2.61.0'
fi

if ! dpkg-query -W -f='${Status}' libb64-0d 2>/dev/null | grep -q "install ok installed"; then
  $SUDO apt-get update -q -o DPkg::Lock::Timeout=600 || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=600 libb64-0d
fi

if ! python3 -c 'import nvidia.cuda_runtime' 2>/dev/null; then
  python3 -m pip install -q 'nvidia-cuda-runtime-cu12==12.9.79'
fi

if [ ! -x "$PA_DIR/perf_analyzer" ]; then
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps -d "$tmp" 'tritonclient==2.40.0'
  $SUDO mkdir -p "$PA_DIR"
  python3 - "$tmp"/tritonclient-2.40.0-*.whl "$PA_DIR" <<'PY'
import sys, zipfile, os
whl, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    data = z.read("tritonclient-2.40.0.data/data/bin/perf_analyzer")
with open(os.path.join(dst, "perf_analyzer.bin"), "wb") as f:
    f.write(data)
os.chmod(os.path.join(dst, "perf_analyzer.bin"), 0o755)
PY
  cudart=$(python3 -c 'import nvidia.cuda_runtime as m, os; print(os.path.join(list(m.__path__)[0], "lib"))')
  cat > "$PA_DIR/perf_analyzer" <<SH
#!/bin/sh
LD_LIBRARY_PATH="$cudart\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$PA_DIR/perf_analyzer.bin" "\$@"
SH
  chmod 755 "$PA_DIR/perf_analyzer"
  rm -rf "$tmp"
fi
# --help prints the usage and exits 99; a missing library fails before that.
usage=$("$PA_DIR/perf_analyzer" --help 2>&1 || true)
case "$usage" in
  *--service-kind*) ;;
  *) echo "perf_analyzer does not run: $usage" | head -5 >&2; exit 1 ;;
esac
