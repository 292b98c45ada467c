#!/usr/bin/env bash
# Builds the sandbox image offline: debootstrap a minimal Debian bookworm with python3
# from the configured Debian mirror, then `podman import` it. No registry needed.
#
#   deploy/image/build-image.sh [IMAGE]        (default localhost/sandboxd-python:bookworm)
#
# Environment:
#   SANDBOXD_DEBIAN_MIRROR   mirror URL (default: the first deb.debian.org-style URI in
#                            /etc/apt, else http://deb.debian.org/debian)
#   SANDBOXD_ROOTFS_TAR      also keep the root filesystem tarball here (rootless users
#                            import it into their own storage without re-running debootstrap)
set -euo pipefail

image="${1:-localhost/sandboxd-python:bookworm}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
recipe="$(sha256sum "$here/build-image.sh" | cut -c1-16)"

mirror="${SANDBOXD_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  mirror="$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
            | grep -oE 'https?://[^ ]+' | head -n1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

work="$(mktemp -d /var/tmp/sandboxd-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
echo "build-image: debootstrap bookworm from $mirror (about 30 s)" >&2
debootstrap --variant=minbase --include=python3 bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  echo "build-image: debootstrap failed" >&2
  exit 1
}
# Trim what a Python sandbox never needs.
rm -rf "$work/rootfs/var/cache/apt/"* "$work/rootfs/var/lib/apt/lists/"* \
       "$work/rootfs/usr/share/doc" "$work/rootfs/usr/share/man" "$work/rootfs/usr/share/locale"
mkdir -p "$work/rootfs/workspace" "$work/rootfs/opt/sandboxd" "$work/rootfs/run/sandboxd"
chmod 1777 "$work/rootfs/workspace"

tar -C "$work/rootfs" -cf "$work/rootfs.tar" .
podman import \
  --change "LABEL io.sandboxd.recipe=$recipe" \
  --change "WORKDIR /workspace" \
  --change "USER 65534:65534" \
  --change 'CMD ["python3"]' \
  "$work/rootfs.tar" "$image" >/dev/null
if [[ -n "${SANDBOXD_ROOTFS_TAR:-}" ]]; then
  mkdir -p "$(dirname "$SANDBOXD_ROOTFS_TAR")"
  mv "$work/rootfs.tar" "$SANDBOXD_ROOTFS_TAR"
  chmod 0644 "$SANDBOXD_ROOTFS_TAR"
fi
echo "build-image: $image ready (recipe $recipe)" >&2
