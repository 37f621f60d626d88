#!/usr/bin/env bash
# Makes the Debian 12 base image the Dockerfiles start from (`debian:12`)
# when no image registry is reachable: `debootstrap --variant=minbase
# bookworm` from Debian's package mirror, then `docker import`. The root
# file system is kept as a tarball (TENSORD_IMAGE_CACHE) so later runs only
# import it. Does nothing when the daemon already has the image.
# Needs DOCKER_HOST set (scripts/image/dockerd.sh prints it) and root.
set -euo pipefail
docker_cli=/usr/bin/docker
name=${TENSORD_BASE_IMAGE:-debian:12}
cache=${TENSORD_IMAGE_CACHE:-/var/cache/tensord-image}
mirror=${TENSORD_DEBIAN_MIRROR:-http://deb.debian.org/debian}
tarball="$cache/bookworm-minbase.tar"

if "$docker_cli" image inspect "$name" >/dev/null 2>&1; then exit 0; fi
mkdir -p "$cache"
if [ ! -s "$tarball" ]; then
  dir=$(mktemp -d /var/tmp/tensord-bookworm.XXXXXX)
  trap 'rm -rf "$dir"' EXIT
  echo "debootstrap: bookworm minbase from $mirror"
  debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
    tail -30 "$cache/debootstrap.log" >&2
    exit 1
  }
  # What a container base needs no copy of: package lists and caches.
  rm -rf "$dir"/var/lib/apt/lists/* "$dir"/var/cache/apt/*.bin "$dir"/var/cache/apt/archives/*.deb
  tar -C "$dir" --numeric-owner -cf "$tarball.tmp" .
  mv "$tarball.tmp" "$tarball"
fi
"$docker_cli" import --change 'CMD ["/bin/bash"]' "$tarball" "$name" >/dev/null
echo "imported $name from $tarball"
