#!/usr/bin/env bash
# REST benchmark (issue 4), one run, side by side on this machine:
#   tensord  half_plus_two :predict  {"instances": [1.0, 2.0, 5.0]}
#   nginx    a `return 200` location with a body of the same size
# each measured with wrk (POST through a Lua script) at 64 connections and
# at 1 connection. The server is pinned to CPU 0 and wrk to CPU 1; the
# server's CPU time comes from /proc/PID/stat, so "req/s per server core"
# = requests / server CPU seconds. Then json_bench: the 32 x 784 float
# batch through srv_json (decode and encode MB/s).
#
# Each pair is measured REPS times (default 3), interleaved, and the
# medians are reported, so a noisy neighbour on a shared box moves them less.
#
# usage: bench/rest/run.sh [seconds per run, default 8] [reps, default 3]
# needs: wrk and nginx (Debian packages; apt-get install wrk nginx-light),
#        build/tensord and build/bench/json_bench (cmake --build build).
set -euo pipefail
cd "$(dirname "$0")/../.."
DUR=${1:-8}
REPS=${2:-3}
BIN=${TENSORD_BIN:-build/tensord}
JSONB=${JSON_BENCH:-build/bench/json_bench}
PORT_T=${PORT_T:-18601}
PORT_N=${PORT_N:-18602}
NCPU=$(nproc)
SRV_CPU=0
CLI_CPU=$(( NCPU > 1 ? 1 : 0 ))
TMP=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$TMP"; }
trap cleanup EXIT

for tool in wrk nginx taskset; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool is missing (apt-get install wrk nginx-light)"; exit 1; }
done

BODY='{"instances": [1.0, 2.0, 5.0]}'
REPLY=$'{\n    "predictions": [2.5, 3.0, 4.5\n    ]\n}'
cat > "$TMP/post.lua" <<EOF
wrk.method = "POST"
wrk.body = '$BODY'
wrk.headers["Content-Type"] = "application/json"
EOF

# --- nginx: private config, one worker, no logs -------------------------------
mkdir -p "$TMP/nginx"
cat > "$TMP/nginx/nginx.conf" <<EOF
worker_processes 1;
daemon off;
error_log $TMP/nginx/error.log warn;
pid $TMP/nginx/nginx.pid;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $TMP/nginx/body;
  proxy_temp_path $TMP/nginx/proxy;
  fastcgi_temp_path $TMP/nginx/fastcgi;
  uwsgi_temp_path $TMP/nginx/uwsgi;
  scgi_temp_path $TMP/nginx/scgi;
  keepalive_requests 100000000;
  server {
    listen 127.0.0.1:$PORT_N;
    location / {
      default_type application/json;
      return 200 '$REPLY';
    }
  }
}
EOF

cpu_ticks() {  # utime + stime of a process and its threads, in clock ticks
  awk '{print $14 + $15}' "/proc/$1/stat"
}

# run NAME PID URL CONNS -> prints one result line
run() {
  local name=$1 pid=$2 url=$3 conns=$4
  wrk -t1 -c"$conns" -d2s -s "$TMP/post.lua" "$url" >/dev/null 2>&1  # warm-up
  local t0 c0 t1 c1 out
  t0=$(date +%s.%N); c0=$(cpu_ticks "$pid")
  out=$(taskset -c "$CLI_CPU" wrk -t1 -c"$conns" -d"${DUR}s" --latency -s "$TMP/post.lua" "$url")
  t1=$(date +%s.%N); c1=$(cpu_ticks "$pid")
  local rps p50 hz
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
  hz=$(getconf CLK_TCK)
  awk -v n="$name" -v c="$conns" -v r="$rps" -v p="$p50" -v ct="$((c1 - c0))" -v hz="$hz" \
      -v w="$(echo "$t1 - $t0" | bc)" 'BEGIN {
        cores = ct / hz / w; if (cores <= 0) cores = 1e-9
        printf "%-8s c=%-3d %10.0f req/s  server %.2f cores  %10.0f req/s/core  p50 %s\n",
               n, c, r, cores, r / cores, p
      }'
}

taskset -c "$SRV_CPU" nginx -c "$TMP/nginx/nginx.conf" -p "$TMP/nginx" &
PIDS+=($!)
taskset -c "$SRV_CPU" "$BIN" --port=0 --rest_api_port="$PORT_T" --model_name=half_plus_two \
  --model_base_path="$PWD/examples/half_plus_two" --tensord_num_workers=1 \
  --rest_api_num_threads=1 >"$TMP/tensord.log" 2>&1 &
PIDS+=($!)
TPID=$!
for _ in $(seq 100); do
  curl -s -o /dev/null "http://127.0.0.1:$PORT_T/v1/models/half_plus_two" && \
  curl -s -o /dev/null "http://127.0.0.1:$PORT_N/" && break
  sleep 0.1
done
NPID=$(cat "$TMP/nginx/nginx.pid")
NWORKER=$(pgrep -P "$NPID" | head -1)
echo "== check"
curl -s -d "$BODY" "http://127.0.0.1:$PORT_T/v1/models/half_plus_two:predict"; echo
curl -s -d "$BODY" "http://127.0.0.1:$PORT_N/"; echo
echo "== wrk, ${DUR}s per run; server on CPU $SRV_CPU, wrk on CPU $CLI_CPU ($(nproc) CPUs)"
RES=$(
  for _ in $(seq "$REPS"); do
    for c in 64 1; do
      run tensord "$TPID" "http://127.0.0.1:$PORT_T/v1/models/half_plus_two:predict" "$c"
      run nginx "$NWORKER" "http://127.0.0.1:$PORT_N/" "$c"
    done
  done
)
echo "$RES"
awk '
  function us(s) { if (s ~ /us$/) return s + 0; if (s ~ /ms$/) return s * 1000; return s * 1e6 }
  function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  $1 == "tensord" && $2 == "c=64" { t64[++nt64] = $8 }
  $1 == "nginx"   && $2 == "c=64" { n64[++nn64] = $8 }
  $1 == "tensord" && $2 == "c=1"  { t1[++nt1] = us($11) }
  $1 == "nginx"   && $2 == "c=1"  { n1[++nn1] = us($11) }
  END {
    T64 = median(t64, nt64); N64 = median(n64, nn64); T1 = median(t1, nt1); N1 = median(n1, nn1)
    printf "medians: c=64 req/s/core tensord %.0f nginx %.0f; c=1 p50 tensord %.0f us nginx %.0f us\n", T64, N64, T1, N1
    printf "ratio req/s per core at c=64: %.2f (target >= 0.60)\n", T64 / N64
    printf "p50 at c=1: tensord - nginx = %+.0f us (target <= +30 us)\n", T1 - N1
  }' <<<"$RES"

echo "== json_bench (32 x 784 floats through srv_json)"
if [ -x "$JSONB" ]; then taskset -c "$SRV_CPU" "$JSONB" 200; else echo "($JSONB not built)"; fi
