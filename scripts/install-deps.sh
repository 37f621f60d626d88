#!/usr/bin/env bash
# Installs what tensord needs from Debian 12's packages: the build tools and
# libraries (always), and the test tools with --test (pytest for the
# black-box tests). Safe to run again; uses sudo when not root.
set -euo pipefail

want_tests=0
[ "${1:-}" = "--test" ] && want_tests=1

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

packages=(build-essential cmake pkg-config libmicrohttpd-dev libgrpc-dev
          protobuf-c-compiler libprotobuf-c-dev libprotobuf-dev libcjson-dev
          libuv1-dev libopenblas-dev libsnappy-dev zlib1g-dev check curl
          libcurl4-openssl-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "${missing[@]}"
fi

if [ "$want_tests" = 1 ] && ! python3 -c 'import pytest' 2>/dev/null; then
  if python3 -m pip --version >/dev/null 2>&1; then
    python3 -m pip install -q 'pytest==8.3.4'
  else
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-pytest
  fi
fi

# tests/e2e/test_grpc.py: the stock TF Serving client, and openssl for its
# throwaway TLS certificates. tensorflow-serving-api declares a dependency on
# the `tensorflow` package, but the CPU-only wheel provides the same module:
# install that, then the client without its dependency list, so pip does not
# pull a second (newer) TensorFlow over it.
if [ "$want_tests" = 1 ]; then
  command -v openssl >/dev/null || DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q \
    --no-install-recommends -o DPkg::Lock::Timeout=300 openssl
  if ! python3 -c 'import tensorflow_serving.apis.prediction_service_pb2_grpc' 2>/dev/null; then
    python3 -c 'import tensorflow' 2>/dev/null || python3 -m pip install -q 'tensorflow-cpu==2.19.1'
    python3 -m pip install -q --no-deps 'tensorflow-serving-api==2.19.1'
  fi
fi

# What a further test stage needs (a Prometheus, dockerd, an S3 emulator, ...)
# is installed by its own script in scripts/deps.d/, so each stays beside the
# stage that uses it.
if [ "$want_tests" = 1 ]; then
  for f in "$(dirname "$0")"/deps.d/*.sh; do
    [ -e "$f" ] || continue
    bash "$f"
  done
fi
