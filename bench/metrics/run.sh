#!/usr/bin/env bash
# What the Prometheus metrics cost on the request path (issue 14): the same
# half_plus_two requests against two tensord processes in the same run, one
# with metrics on (--monitoring_config_file with prometheus_config enabled)
# and one without, over REST (h2load --h1, POST :predict) and gRPC (h2load,
# unary Predict).
#
# Two measures:
#   1. throughput: req/s per second of server CPU time (user+system from
#      /proc), both servers pinned to the same CPU, runs interleaved
#      on/off for ROUNDS rounds, medians reported. Noisy on a shared box.
#   2. instructions: each server under callgrind with collection off, turned
#      on for exactly N_CG requests (callgrind_control -i), so the count is
#      the request path's instructions per request, independent of load.
#      (Skipped with CALLGRIND=0.)
# Ratio on/off >= 0.98 in throughput (<= 2% more instructions) is the target.
#
#   bench/metrics/run.sh             (after scripts/build.sh; needs nghttp2-client, valgrind)
#   N=20000 ROUNDS=5 N_CG=2000 bench/metrics/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
N=${N:-20000}
ROUNDS=${ROUNDS:-5}
N_CG=${N_CG:-2000}
CALLGRIND=${CALLGRIND:-1}
THROUGHPUT=${THROUGHPUT:-1}
TENSORD=$BUILD/tensord
for tool in h2load python3 taskset; do
  command -v $tool >/dev/null || { echo "needs $tool (apt-get install nghttp2-client)" >&2; exit 2; }
done
[ -x "$TENSORD" ] || { echo "build first: scripts/build.sh" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

printf 'prometheus_config { enable: true path: "/metrics" }\n' >"$work/monitoring.txt"
printf '{"instances": [1.0, 2.0, 5.0]}' >"$work/rest.json"
python3 - "$work/grpc.bin" <<'PY'
import struct, sys
def ld(field, payload):
    return bytes([field << 3 | 2, len(payload)]) + payload
tensor = b"\x08\x01" + ld(2, ld(2, b"\x08\x01")) + ld(5, struct.pack("<f", 1.0))
msg = ld(1, ld(1, b"half_plus_two")) + ld(2, ld(1, b"x") + ld(2, tensor))
open(sys.argv[1], "wb").write(b"\x00" + struct.pack(">I", len(msg)) + msg)
PY
GH=(-H 'content-type: application/grpc' -H 'te: trailers')
last=$(($(nproc) - 1))
SERVER_CPUS=${SERVER_CPUS:-$last}
CLIENT_CPUS=${CLIENT_CPUS:-$([ "$last" -gt 0 ] && echo "0-$((last - 1))" || echo 0)}

# start NAME [wrapper...] -> sets PORT_G_<NAME>, PORT_R_<NAME>, PID_<NAME>
start() {
  local name=$1; shift
  local g r flags=()
  g=$(free_port); r=$(free_port)
  [ "${name%_*}" = on ] && flags=(--monitoring_config_file="$work/monitoring.txt")
  taskset -c "$SERVER_CPUS" "$@" "$TENSORD" --port="$g" --rest_api_port="$r" \
    --model_name=half_plus_two --model_base_path="$PWD/examples/half_plus_two" \
    --tensord_num_workers=1 --grpc_max_threads=1 --rest_api_num_threads=1 "${flags[@]}" \
    >"$work/$name.log" 2>&1 &
  local pid=$!
  pids+=("$pid")
  for _ in $(seq 600); do
    (exec 3<>/dev/tcp/127.0.0.1/"$r") 2>/dev/null && break
    sleep 0.1
  done
  printf -v "PORT_G_$name" %s "$g"
  printf -v "PORT_R_$name" %s "$r"
  printf -v "PID_$name" %s "$pid"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)

# h2load, 4 connections x 16 streams (REST: 64 HTTP/1.1 connections, one
# request each at a time).
# load API PORT COUNT [seq]: "seq" sends one request at a time on one
# connection (callgrind: the same path every time).
load() {
  local api=$1 port=$2 n=$3 rc=64 gc=4 gm=16
  [ "${4:-}" = seq ] && rc=1 gc=1 gm=1
  if [ "$api" = rest ]; then
    taskset -c "$CLIENT_CPUS" h2load --h1 -n "$n" -c "$rc" -t 1 -d "$work/rest.json" \
      "http://127.0.0.1:$port/v1/models/half_plus_two:predict"
  else
    taskset -c "$CLIENT_CPUS" h2load -n "$n" -c "$gc" -m "$gm" -t 1 "${GH[@]}" \
      -d "$work/grpc.bin" "http://127.0.0.1:$port/tensorflow.serving.PredictionService/Predict"
  fi
}

measure() {  # NAME API -> one JSON line
  local name=$1 api=$2 pidv="PID_$1" portv
  [ "$api" = rest ] && portv="PORT_R_$1" || portv="PORT_G_$1"
  load "$api" "${!portv}" 2000 >/dev/null
  local c0 t0 c1 t1 out
  c0=$(cpu_ticks "${!pidv}"); t0=$(date +%s.%N)
  out=$(load "$api" "${!portv}" "$N")
  t1=$(date +%s.%N); c1=$(cpu_ticks "${!pidv}")
  grep -qE "requests: .* 0 failed, 0 errored" <<<"$out" || { echo "$name $api: errors: $(grep requests: <<<"$out")" >&2; exit 1; }
  python3 -c "import json,sys; n,w,c,t=int(sys.argv[1]),float(sys.argv[3])-float(sys.argv[2]),int(sys.argv[4]),int(sys.argv[5]); \
print(json.dumps({'server': sys.argv[6], 'api': sys.argv[7], 'rps': n / w, 'per_core': n / max(c / t, 1e-9)}))" \
    "$N" "$t0" "$t1" "$((c1 - c0))" "$tck" "$name" "$api"
}

if [ "$THROUGHPUT" = 1 ]; then
start on
start off
echo "server CPUs: $SERVER_CPUS; client CPUs: $CLIENT_CPUS; $N requests per run; $ROUNDS rounds;" \
  "load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
  for api in rest grpc; do
    if [ $((r % 2)) = 1 ]; then order="on off"; else order="off on"; fi
    for s in $order; do measure "$s" "$api" >>"$work/tp.jsonl"; done
  done
done
curl -s "http://127.0.0.1:$PORT_R_on/metrics" | grep -E '^:tensorflow:serving:request_count' || true
python3 - "$work/tp.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print("\n| API | metrics | req/s (median) | req/s per server core (median) |")
print("|---|---|---|---|")
med = {}
for api in ("rest", "grpc"):
    for s in ("on", "off"):
        rs = [r for r in runs if r["api"] == api and r["server"] == s]
        med[api, s] = {k: statistics.median(r[k] for r in rs) for k in ("rps", "per_core")}
        print(f"| {api} | {s} | {med[api, s]['rps']:,.0f} | {med[api, s]['per_core']:,.0f} |")
for api in ("rest", "grpc"):
    pairs = [(a["per_core"], b["per_core"]) for a, b in zip(
        [r for r in runs if r["api"] == api and r["server"] == "on"],
        [r for r in runs if r["api"] == api and r["server"] == "off"])]
    ratios = sorted(a / b for a, b in pairs)
    print(f"{api}: on/off req/s per core, median of medians {med[api, 'on']['per_core'] / med[api, 'off']['per_core']:.3f};"
          f" per-round ratios {', '.join(f'{x:.3f}' for x in ratios)}")
PY
fi

if [ "$CALLGRIND" = 1 ] && command -v valgrind >/dev/null; then
  echo
  echo "== instructions per request (callgrind, $N_CG requests per count)"
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
  for s in on off; do
    start "cg_$s" valgrind --tool=callgrind --instr-atstart=no \
      --callgrind-out-file="$work/cg_$s.%p.out"
  done
  for api in rest grpc; do
    for s in on off; do
      pidv="PID_cg_$s"; [ "$api" = rest ] && portv="PORT_R_cg_$s" || portv="PORT_G_cg_$s"
      load "$api" "${!portv}" 200 seq >/dev/null   # warm
      callgrind_control -i on "${!pidv}" >/dev/null
      callgrind_control -z "${!pidv}" >/dev/null
      load "$api" "${!portv}" "$N_CG" seq >/dev/null
      # Per-thread totals, summed (read before instrumentation goes off).
      ir=$(callgrind_control -e Ir "${!pidv}" 2>/dev/null |
        awk '$1 == "Th" || $1 ~ /^Th[0-9]+$/ {gsub(",", "", $NF); s += $NF} END {print s + 0}')
      share=""
      if [ "$s" = on ]; then
        # The metrics functions' own share of the same requests (inclusive).
        rm -f "$work"/cg_on.*.out.*
        callgrind_control -d "${!pidv}" >/dev/null
        f=$(ls "$work"/cg_on.*.out.* 2>/dev/null | tail -1)
        share=$(callgrind_annotate --inclusive=yes --threshold=100 "$f" 2>/dev/null |
          awk '/srv_metrics_(model|request|examples|queue_add|inflight_add) / {gsub(",", "", $1); s += $1} END {print s + 0}')
      fi
      callgrind_control -i off "${!pidv}" >/dev/null
      echo "$api $s $ir $share" >>"$work/cg.txt"
    done
  done
  awk -v n="$N_CG" '{ir[$1" "$2] = $3; if ($2 == "on") m[$1] = $4} END {
    split("rest grpc", apis, " ")
    for (i = 1; i <= 2; i++) { api = apis[i]; on = ir[api" on"]; off = ir[api" off"]
      if (on > 0 && off > 0)
        printf "%s: %.0f instructions/request with metrics, %.0f without (%+.2f%%); the metrics functions: %.0f per request = %.2f%% of the request path\n",
               api, on / n, off / n, (on / off - 1) * 100, m[api] / n, m[api] / on * 100
      else printf "%s: callgrind gave no counts (on=%s off=%s)\n", api, on, off }
  }' "$work/cg.txt"
fi
