#!/usr/bin/env bash
# Starts a private Docker daemon for the image tests, unless it already runs.
# It has its own socket, data root and exec root, so it neither needs nor
# disturbs a system dockerd. Flags for machines without a bridge or
# iptables: vfs storage (no overlay mounts), no bridge network (containers
# use --network=host). Prints the DOCKER_HOST value to use.
set -euo pipefail
root=${TENSORD_DOCKER_ROOT:-/var/lib/tensord-docker}
run=${TENSORD_DOCKER_RUN:-/run/tensord-docker}
sock="unix://$run/docker.sock"
docker_cli=/usr/bin/docker
mkdir -p "$root" "$run"
if ! DOCKER_HOST=$sock "$docker_cli" version >/dev/null 2>&1; then
  nohup /usr/sbin/dockerd --host "$sock" --data-root "$root" --exec-root "$run/exec" \
    --pidfile "$run/dockerd.pid" --storage-driver=vfs --iptables=false --ip-masq=false \
    --bridge=none >"$run/dockerd.log" 2>&1 &
  for _ in $(seq 1 120); do
    DOCKER_HOST=$sock "$docker_cli" version >/dev/null 2>&1 && break
    sleep 0.5
  done
  DOCKER_HOST=$sock "$docker_cli" version >/dev/null 2>&1 || {
    echo "dockerd did not start; its log:" >&2
    tail -50 "$run/dockerd.log" >&2
    exit 1
  }
fi
echo "$sock"
