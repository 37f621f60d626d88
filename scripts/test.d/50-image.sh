#!/usr/bin/env bash
# The image and the deployment files: starts a private Docker daemon, makes
# the debian:12 base with debootstrap when the daemon lacks it (no registry
# is reachable from CI), builds docker/Dockerfile, runs tests/image against
# the image, checks that docker/Dockerfile.cuda builds where its base can
# be had, and validates deploy/ (tests/deploy). The build's layers and the
# base's tarball stay cached between runs (/var/lib/tensord-docker,
# /var/cache/tensord-image), so a rerun rebuilds only from `COPY . .` on.
set -euo pipefail
cd "$(dirname "$0")/../.."
export DOCKER=/usr/bin/docker
DOCKER_HOST=$(bash scripts/image/dockerd.sh)
export DOCKER_HOST
bash scripts/image/base.sh

export TENSORD_IMAGE=tensord:test
start=$(date +%s)
# The build stage gets a tag of its own, so pruning keeps its layers (the
# package layer above all) as the next run's cache.
"$DOCKER" build -q --network=host -f docker/Dockerfile --target build -t tensord:build-cache . \
  >/dev/null
"$DOCKER" build -q --network=host -f docker/Dockerfile -t "$TENSORD_IMAGE" . >/dev/null
echo "image built in $(($(date +%s) - start)) s"
python3 -m pytest -q -p no:cacheprovider tests/image tests/deploy

# The GPU image's base comes from NVIDIA's registry, which CI cannot reach.
cuda_base=$(sed -n 's/^ARG CUDA_RUNTIME_BASE=//p' docker/Dockerfile.cuda)
if "$DOCKER" image inspect "$cuda_base" >/dev/null 2>&1; then
  "$DOCKER" build -q --network=host -f docker/Dockerfile.cuda -t tensord:test-cuda . >/dev/null
  echo "docker/Dockerfile.cuda built on $cuda_base"
else
  echo "docker/Dockerfile.cuda NOT built: its base $cuda_base cannot be had here (no registry)"
fi
# Dangling layers of earlier builds would fill the disk (vfs keeps full copies).
"$DOCKER" image prune -f >/dev/null
