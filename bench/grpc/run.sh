#!/usr/bin/env bash
# tensord's gRPC benchmark: unary Predict on half_plus_two (one float in,
# one out) against tensord, and the same pre-framed bytes against grpc_echo
# (bench/grpc/echo_server.c, a minimal service on the same gRPC core
# library), in the same run, with h2load over loopback.
#
#   bench/grpc/run.sh            (after scripts/build.sh; needs nghttp2-client)
#   N=100000 BUILD=build bench/grpc/run.sh
#
# For each server and for 1 stream (-c1 -m1) and 64 streams (-c4 -m16) it
# prints requests per second, requests per second of server CPU time (the
# server's user+system time from /proc, so the client's share of the cores
# does not count), and p50/p99 latency from h2load's per-request log. h2load
# checks only the HTTP status, so one call is first made with nghttp and its
# grpc-status checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
N=${N:-50000}
TENSORD=$BUILD/tensord
ECHO=$BUILD/bench/grpc_echo
for tool in h2load nghttp python3; do
  command -v $tool >/dev/null || { echo "needs $tool (apt-get install nghttp2-client)" >&2; exit 2; }
done
[ -x "$TENSORD" ] && [ -x "$ECHO" ] || { echo "build first: scripts/build.sh" >&2; exit 2; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# PredictRequest { model_spec { name: "half_plus_two" }
#   inputs { key: "x" value { dtype: DT_FLOAT tensor_shape { dim { size: 1 } } float_val: 1.0 } } }
# behind the 5-byte gRPC frame header (not compressed, 4-byte big-endian length).
python3 - "$work/req.bin" <<'PY'
import struct, sys
def ld(field, payload):
    return bytes([field << 3 | 2, len(payload)]) + payload
tensor = b"\x08\x01" + ld(2, ld(2, b"\x08\x01")) + ld(5, struct.pack("<f", 1.0))
msg = ld(1, ld(1, b"half_plus_two")) + ld(2, ld(1, b"x") + ld(2, tensor))
open(sys.argv[1], "wb").write(b"\x00" + struct.pack(">I", len(msg)) + msg)
PY

cores=$(nproc)
tport=$(free_port)
eport=$(free_port)
"$TENSORD" --port="$tport" --model_name=half_plus_two \
  --model_base_path="$PWD/examples/half_plus_two" >"$work/tensord.log" 2>&1 &
tpid=$!
pids+=("$tpid")
"$ECHO" "$eport" "$cores" >"$work/echo.log" 2>&1 &
epid=$!
pids+=("$epid")
for port in "$tport" "$eport"; do
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/127.0.0.1/"$port") 2>/dev/null && break
    sleep 0.1
  done
done

headers=(-H 'content-type: application/grpc' -H 'te: trailers')
out=$(nghttp -v "${headers[@]}" -d "$work/req.bin" \
  "http://127.0.0.1:$tport/tensorflow.serving.PredictionService/Predict" 2>&1 | tr -d '\000')
if ! grep -q 'grpc-status: 0' <<<"$out"; then
  echo "tensord did not answer the request with grpc-status 0:" >&2
  echo "$out" | grep -E 'grpc-(status|message)' >&2
  exit 1
fi

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
tck=$(getconf CLK_TCK)

# run NAME PID URL_PATH PORT CONNS STREAMS_PER_CONN
run() {
  local name=$1 pid=$2 path=$3 port=$4 c=$5 m=$6
  local url="http://127.0.0.1:$port$path"
  h2load -n 2000 -c "$c" -m "$m" -t 1 "${headers[@]}" -d "$work/req.bin" "$url" >/dev/null
  local t0 c0 t1 c1
  rm -f "$work/lat.tsv"
  c0=$(cpu_ticks "$pid")
  t0=$(date +%s.%N)
  h2load -n "$N" -c "$c" -m "$m" -t 1 "${headers[@]}" -d "$work/req.bin" \
    --log-file="$work/lat.tsv" "$url" >"$work/h2load.out"
  t1=$(date +%s.%N)
  c1=$(cpu_ticks "$pid")
  python3 - "$name" "$((c * m))" "$work/lat.tsv" "$work/h2load.out" "$t0" "$t1" \
    "$(( (c1 - c0) ))" "$tck" <<'PY'
import sys
name, streams, lat, h2out, t0, t1, ticks, tck = sys.argv[1:]
rows = [l.split("\t") for l in open(lat) if l.strip()]
ok = [int(r[2]) for r in rows if r[1] == "200"]
assert len(ok) == len(rows), f"{len(rows) - len(ok)} requests did not get HTTP 200"
ok.sort()
wall = float(t1) - float(t0)
cpu = int(ticks) / int(tck)
p = lambda q: ok[min(len(ok) - 1, int(q * len(ok)))] / 1000.0
print(f"| {name} | {streams} | {len(ok)} | {len(ok) / wall:,.0f} | {len(ok) / cpu:,.0f} |"
      f" {cpu / wall:.2f} | {p(0.50):.3f} | {p(0.99):.3f} |")
PY
}

echo "cores: $cores; requests per run: $N"
echo
echo "| server | streams | requests | req/s | req/s per server core | server cores busy | p50 ms | p99 ms |"
echo "|---|---|---|---|---|---|---|---|"
PREDICT=/tensorflow.serving.PredictionService/Predict
for cm in "1 1" "4 16"; do
  set -- $cm
  run tensord "$tpid" "$PREDICT" "$tport" "$1" "$2"
  run grpc_echo "$epid" /bench.Echo/Echo "$eport" "$1" "$2"
done
