#!/usr/bin/env bash
# Runs every test: installs what the tests need, builds with warnings as
# errors, runs the Check unit tests through ctest, then the black-box pytest
# suite against the real build/tensord. CI (.ci/run) runs exactly this.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
bash scripts/build.sh -DTENSORD_WERROR=ON
ctest --test-dir build --output-on-failure --timeout 300
python3 -m pytest -q tests/e2e
# Further stages (the image, sanitizer builds, ...), each a script of its own
# in scripts/test.d/, run in name order; any failure fails the run.
for f in scripts/test.d/*.sh; do
  [ -e "$f" ] || continue
  echo "== $f"
  bash "$f"
done
