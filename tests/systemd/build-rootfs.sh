#!/usr/bin/env bash
# Builds (once) the image tests/systemd/user_service_test.sh boots: Debian bookworm with
# systemd as PID 1, rootless podman and the runtime libraries of sandboxd and mcp-gateway,
# made offline like the sandbox image (debootstrap from the configured Debian mirror, then
# apt-get in the new root, then `podman import`). Takes a few minutes; the image is tagged
# with a hash of the package list below, so it is rebuilt only when that changes.
#
#   tests/systemd/build-rootfs.sh            build unless present; print the image name
#   tests/systemd/build-rootfs.sh --name     print the image name only
#
# Environment: SANDBOXD_DEBIAN_MIRROR (as deploy/image/build-image.sh).
set -euo pipefail

# What a user of scripts/install-user-service.sh has: systemd with a user manager
# (libpam-systemd, dbus-user-session), rootless podman and what scripts/setup.sh installs for
# it (runc, catatonit, uidmap, fuse-overlayfs, slirp4netns), and the shared libraries the two
# binaries link (the runtime halves of setup.sh's -dev packages; the test fails naming any
# library `ldd` cannot find here). python3 speaks HTTP to the gateway in the test.
packages=(
  systemd systemd-sysv dbus dbus-user-session libpam-systemd
  podman runc catatonit uidmap fuse-overlayfs slirp4netns
  python3 nodejs procps
  libgrpc++1.51 libprotobuf32 libabsl20220623 libspdlog1.10 libfmt9 libcpp-httplib0.11
  libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libssl3
)
repo=localhost/sandboxd-systemd-test
disabled=(getty@tty1.service serial-getty@.service systemd-networkd.service systemd-resolved.service
          systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer)
key="$(printf '%s\n' "${packages[@]}" -- "${disabled[@]}" | sha256sum | cut -c1-16)"
image="$repo:$key"
if [[ "${1:-}" == --name ]]; then echo "$image"; exit 0; fi
if podman image exists "$image"; then echo "$image"; exit 0; fi
[[ $(id -u) -eq 0 ]] || { echo "build-rootfs: run as root (debootstrap, chroot)" >&2; exit 1; }

# The mirror the sandbox image came from (deploy/image/build-image.sh chose it), else
# deb.debian.org.
mirror="${SANDBOXD_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" && -r /var/cache/sandboxd/rootfs.tar ]]; then
  mirror="$(tar -xOf /var/cache/sandboxd/rootfs.tar ./etc/apt/sources.list 2>/dev/null |
            grep -oE '^deb +https?://[^ ]+' | head -n1 | grep -oE 'https?://[^ ]+' || true)"
fi
mirror="${mirror:-http://deb.debian.org/debian}"
work="$(mktemp -d /var/tmp/sandboxd-systemd-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
echo "build-rootfs: debootstrap bookworm from $mirror, then apt-get install (a few minutes, once)" >&2
debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2; echo "build-rootfs: debootstrap failed" >&2; exit 1; }
chroot "$rootfs" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 "${packages[@]}" >"$work/apt.log" 2>&1 || {
  tail -n 30 "$work/apt.log" >&2; echo "build-rootfs: apt-get install failed" >&2; exit 1; }
rm -rf "$rootfs/var/cache/apt/"* "$rootfs/var/lib/apt/lists/"* "$rootfs/usr/share/doc" "$rootfs/usr/share/man"
# A container has no consoles to log in on, and the test needs no network configuration.
for unit in "${disabled[@]}"; do
  rm -f "$rootfs/etc/systemd/system/"*.wants/"$unit"
done
tar -C "$rootfs" -cf "$work/rootfs.tar" .
for old in $(podman images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$repo" 2>/dev/null); do
  podman rmi -f "$old" >/dev/null 2>&1 || true
done
podman import --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' "$work/rootfs.tar" "$image" >/dev/null
echo "build-rootfs: $image ready" >&2
echo "$image"
