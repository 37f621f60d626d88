#!/usr/bin/env bash
# tensord's gRPC benchmark: unary Predict on half_plus_two (one float in,
# one out) against tensord, and the same pre-framed bytes against grpc_echo
# (bench/grpc/echo_server.c, a minimal service on the same gRPC core
# library), in the same run, with h2load over loopback.
#
#   bench/grpc/run.sh            (after scripts/build.sh; needs nghttp2-client)
#   N=100000 ROUNDS=5 BUILD=build bench/grpc/run.sh
#
# For each server and for 1 stream (-c1 -m1) and 64 streams (-c4 -m16) it
# measures requests per second, requests per second of server CPU time (the
# server's user+system time from /proc, so the client's share of the cores
# does not count), and p50/p99 latency from h2load's per-request log; the
# servers alternate for ROUNDS rounds and the table shows medians. h2load
# checks only the HTTP status, so one call is first made with nghttp and its
# grpc-status checked.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
N=${N:-50000}
ROUNDS=${ROUNDS:-3}
TENSORD=$BUILD/tensord
ECHO=$BUILD/bench/grpc_echo
for tool in h2load nghttp python3 taskset; do
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

# The servers run on SERVER_CPUS (default: the last core) with one polling
# thread (and for tensord one engine worker) per CPU there; h2load runs on
# CLIENT_CPUS (default: the other cores). "Per server core" is then the
# throughput of the server's own cores, whatever the client costs.
last=$(($(nproc) - 1))
SERVER_CPUS=${SERVER_CPUS:-$last}
CLIENT_CPUS=${CLIENT_CPUS:-$([ "$last" -gt 0 ] && echo "0-$((last - 1))" || echo 0)}
cores=$(taskset -c "$SERVER_CPUS" nproc)
tport=$(free_port)
eport=$(free_port)
taskset -c "$SERVER_CPUS" "$TENSORD" --port="$tport" --model_name=half_plus_two \
  --model_base_path="$PWD/examples/half_plus_two" --grpc_max_threads="$cores" \
  --tensord_num_workers="$cores" >"$work/tensord.log" 2>&1 &
tpid=$!
pids+=("$tpid")
taskset -c "$SERVER_CPUS" "$ECHO" "$eport" "$cores" >"$work/echo.log" 2>&1 &
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

# run NAME PID URL_PATH PORT CONNS STREAMS_PER_CONN: one measured h2load run,
# appended to results.jsonl.
run() {
  local name=$1 pid=$2 path=$3 port=$4 c=$5 m=$6
  local url="http://127.0.0.1:$port$path"
  taskset -c "$CLIENT_CPUS" h2load -n 2000 -c "$c" -m "$m" -t 1 "${headers[@]}" \
    -d "$work/req.bin" "$url" >/dev/null
  local t0 c0 t1 c1
  rm -f "$work/lat.tsv"
  c0=$(cpu_ticks "$pid")
  t0=$(date +%s.%N)
  taskset -c "$CLIENT_CPUS" h2load -n "$N" -c "$c" -m "$m" -t 1 "${headers[@]}" \
    -d "$work/req.bin" --log-file="$work/lat.tsv" "$url" >"$work/h2load.out"
  t1=$(date +%s.%N)
  c1=$(cpu_ticks "$pid")
  python3 - "$name" "$((c * m))" "$work/lat.tsv" "$t0" "$t1" "$((c1 - c0))" "$tck" \
    >>"$work/results.jsonl" <<'PY'
import json, sys
name, streams, lat, t0, t1, ticks, tck = sys.argv[1:]
rows = [l.split("\t") for l in open(lat) if l.strip()]
ok = sorted(int(r[2]) for r in rows if r[1] == "200")
assert len(ok) == len(rows), f"{len(rows) - len(ok)} requests did not get HTTP 200"
wall = float(t1) - float(t0)
cpu = max(int(ticks), 1) / int(tck)
pct = lambda q: ok[min(len(ok) - 1, int(q * len(ok)))] / 1000.0
print(json.dumps({"server": name, "streams": int(streams), "n": len(ok), "rps": len(ok) / wall,
                  "per_core": len(ok) / cpu, "busy": cpu / wall, "p50": pct(0.5),
                  "p99": pct(0.99)}))
PY
}

echo "server CPUs: $SERVER_CPUS ($cores); client CPUs: $CLIENT_CPUS; requests per run: $N;" \
  "rounds: $ROUNDS (medians below)"
PREDICT=/tensorflow.serving.PredictionService/Predict
for round in $(seq "$ROUNDS"); do
  for cm in "1 1" "4 16"; do
    set -- $cm
    run tensord "$tpid" "$PREDICT" "$tport" "$1" "$2"
    run grpc_echo "$epid" /bench.Echo/Echo "$eport" "$1" "$2"
  done
done
python3 - "$work/results.jsonl" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
med = {}
for key in sorted({(r["streams"], r["server"]) for r in runs}, key=lambda k: (k[0], k[1] != "tensord")):
    rs = [r for r in runs if (r["streams"], r["server"]) == key]
    med[key] = {f: statistics.median(r[f] for r in rs) for f in ("rps", "per_core", "busy", "p50", "p99")}
print()
print("| server | streams | req/s | req/s per server core | server cores busy | p50 ms | p99 ms |")
print("|---|---|---|---|---|---|---|")
for (streams, server), m in med.items():
    print(f"| {server} | {streams} | {m['rps']:,.0f} | {m['per_core']:,.0f} | {m['busy']:.2f} |"
          f" {m['p50']:.3f} | {m['p99']:.3f} |")
print()
for streams in sorted({k[0] for k in med}):
    t, e = med[(streams, "tensord")], med[(streams, "grpc_echo")]
    print(f"{streams} stream(s): tensord/echo req/s per server core = {t['per_core'] / e['per_core']:.2f}")
PY
