#!/usr/bin/env bash
# Fuzz stage: each libFuzzer target (built by stage 60 in build-asan) runs
# over its committed corpus (tests/fuzz/corpus/<name>/) for a fixed number
# of executions, seeded, so a run is the same on every machine. A crash,
# leak or UB report fails the stage; the long campaigns are a documented
# command (tests/fuzz/README.md), not CI.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=build-asan
RUNS=${TENSORD_FUZZ_RUNS:-10000}
export ASAN_OPTIONS=detect_leaks=1:halt_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in "$B"/fuzz/fuzz_*; do
  name=$(basename "$f")
  dict=()
  case "$name" in
    fuzz_json) dict=(-dict=tests/fuzz/json.dict) ;;
    fuzz_pbtxt) dict=(-dict=tests/fuzz/pbtxt.dict) ;;
  esac
  # New inputs go to a scratch folder, not the committed corpus.
  mkdir -p "$work/$name"
  echo "== $name: $RUNS runs"
  "$f" -runs="$RUNS" -seed=1 -max_len=200000 -rss_limit_mb=2048 -timeout=30 \
    -artifact_prefix="$work/$name-" "${dict[@]}" "$work/$name" "tests/fuzz/corpus/$name" \
    >"$work/$name.log" 2>&1 || { tail -50 "$work/$name.log"; exit 1; }
  grep -E "^(Done|#[0-9]+ *DONE)" "$work/$name.log" | tail -1 || true
done
