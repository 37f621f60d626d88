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
          libuv1-dev libopenblas-dev libsnappy-dev check curl)

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
