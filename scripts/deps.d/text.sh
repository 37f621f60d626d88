#!/usr/bin/env bash
# The regex ops (StaticRegexReplace, RegexFullMatch, ...) use RE2, the regex
# library TensorFlow's kernels use: Debian's libre2-dev (C++, compiled in
# through engine/kernels/eng_regex.cc when found). Without it tensord still
# builds, and models with regex ops fail their load naming the op.
# Idempotent: nothing to do when the package is installed.
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if ! dpkg-query -W -f='${Status}' libre2-dev 2>/dev/null | grep -q "install ok installed"; then
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=600 libre2-dev
fi
