#!/usr/bin/env bash
# What scripts/test.d/50-image.sh needs: Debian's Docker engine (its daemon
# is started by scripts/image/dockerd.sh), debootstrap for the base image,
# and kubernetes-validate plus PyYAML for the deploy/ manifests. Quick when
# everything is there.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
for p in docker.io debootstrap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -q -o DPkg::Lock::Timeout=600
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends \
    -o DPkg::Lock::Timeout=600 "${missing[@]}"
fi
if ! python3 -c 'import kubernetes_validate, yaml' 2>/dev/null; then
  python3 -m pip install -q 'kubernetes-validate==1.31.0' 'PyYAML==6.0.3'
fi
