#!/usr/bin/env bash
# The keras.applications zoo: makes one member of every family with the
# TensorFlow install-deps.sh installed (scripts/make_fixtures.py
# --applications, one Python process), then serves them all from one
# build/tensord and checks REST and gRPC Predict against TensorFlow's outputs
# and `tensord inspect` (tests/applications). The models are large (random
# weights, stock widths) and never committed: they are cached under
# $TENSORD_APPLICATIONS_CACHE keyed by the generator and the TF and Keras
# versions, so a rerun on the same machine skips generation. A failed
# generation fails the stage.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache=${TENSORD_APPLICATIONS_CACHE:-/var/cache/tensord-applications}
versions=$(python3 -c 'import importlib.metadata as m
print(*(m.version(p) for p in ("tensorflow-cpu", "keras")))' 2>/dev/null ||
  python3 -c 'import tensorflow as tf, keras; print(tf.__version__, keras.__version__)')
key=$( (cat scripts/fixtures_applications.py; echo "$versions") | sha256sum | cut -c1-16)
dir=$cache/$key
mkdir -p "$cache"
# One stage at a time per cache (other checkouts on the machine share it):
# a second run waits here instead of deleting a set being made or read.
exec 9>"$cache/.lock"
flock 9
start=$(date +%s)
if [ ! -e "$dir/complete" ]; then
  # Older keys are stale: each set is some 400 MB.
  find "$cache" -mindepth 1 -maxdepth 1 ! -name "$key" ! -name .lock -exec rm -rf {} +
  rm -rf "$dir"
  python3 scripts/make_fixtures.py --applications "$dir"
  touch "$dir/complete"
  echo "applications generated in $(($(date +%s) - start)) s (TF, Keras: $versions)"
else
  echo "applications: cached in $dir (TF, Keras: $versions)"
fi
start=$(date +%s)
rm -f "$dir/errors.json"
rc=0
TENSORD_APPLICATIONS_DIR=$dir python3 -m pytest -q -p no:cacheprovider tests/applications || rc=$?
echo "applications served and checked in $(($(date +%s) - start)) s"
[ -e "$dir/errors.json" ] || exit $((rc ? rc : 1))
# Each model's worst error over REST and gRPC (docs/models.md quotes these).
python3 - "$dir/errors.json" <<'EOF'
import json, sys
errors = json.load(open(sys.argv[1]))
print("%-22s %10s %10s %10s %10s" % ("model", "max abs", "max rel", "of bound", "|out| max"))
for name, apis in sorted(errors.items()):
    worst = max(apis.values(), key=lambda e: e["max_over_bound"])
    print("%-22s %10.2g %10.2g %10.2f %10.3g" % (
        name, max(e["max_abs"] for e in apis.values()), max(e["max_rel"] for e in apis.values()),
        worst["max_over_bound"], worst["max_abs_output"]))
EOF
exit $rc
