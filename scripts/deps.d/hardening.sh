#!/usr/bin/env bash
# What the hardening stages need (scripts/test.d/*-hardening-*.sh): Debian's
# clang 14 for the clang, sanitizer and libFuzzer builds, and its runtime
# libraries (libFuzzer, ASan, UBSan, TSan). Quick when already installed.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
for p in clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "${missing[@]}"
fi
