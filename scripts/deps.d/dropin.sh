#!/usr/bin/env bash
# Test-time dependency of tests/e2e/test_metrics.py: Debian's prometheus
# package (promtool checks the metrics page; a Prometheus server scrapes the
# daemon and answers PromQL). Quick when already installed.
set -euo pipefail
if command -v prometheus >/dev/null && command -v promtool >/dev/null; then
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
$SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends prometheus
