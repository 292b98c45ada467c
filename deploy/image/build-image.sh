#!/usr/bin/env bash
# Builds a sandbox image offline: debootstrap a minimal Debian bookworm with python3
# from the configured Debian mirror, then `podman import` it. No registry needed.
#
#   deploy/image/build-image.sh [--variant base|data] [IMAGE]
#   deploy/image/build-image.sh [--variant base|data] --print-recipe
#
# Variants (default base):
#   base   python3, Debian's pip (for `pip download` from an index a session's egress policy
#          allows) and nodejs (18, with node-acorn, which the JavaScript runner uses)
#                                          IMAGE default localhost/sandboxd-python:bookworm
#   data   base plus Debian's numpy, pandas, matplotlib (headless, Agg) and Pillow
#                                          IMAGE default localhost/sandboxd-python-data:bookworm
# Labels: io.sandboxd.offers lists what the image offers (comma list: "python3", or
# "python3,numpy,pandas,matplotlib,pil"); io.sandboxd.recipe is a hash of this script and
# the variant, which scripts/setup.sh compares with --print-recipe to rebuild only when
# the recipe changed. Containerfile and Containerfile.data are the registry equivalents.
#
# Environment:
#   SANDBOXD_DEBIAN_MIRROR   mirror URL (default: the first deb.debian.org-style URI in
#                            /etc/apt, else http://deb.debian.org/debian)
#   SANDBOXD_ROOTFS_TAR      also keep the root filesystem tarball here (rootless users
#                            import it into their own storage without re-running debootstrap)
set -euo pipefail

variant=base
print_recipe=0
while (($#)); do
  case "$1" in
    --variant) [[ $# -ge 2 ]] || { echo "build-image: --variant needs base or data" >&2; exit 2; }
               variant="$2"; shift 2 ;;
    --variant=*) variant="${1#--variant=}"; shift ;;
    --print-recipe) print_recipe=1; shift ;;
    --) shift; break ;;
    -*) echo "build-image: unknown option $1 (usage: build-image.sh [--variant base|data] [IMAGE])" >&2
        exit 2 ;;
    *) break ;;
  esac
done
case "$variant" in
  base)
    default_image=localhost/sandboxd-python:bookworm
    offers=python3,nodejs,pip
    # Installed on top of debootstrap's minbase by apt. nodejs depends on node-acorn, the
    # parser the JavaScript runner's top-level-await transform uses. pip and requests only
    # reach a host through the session's egress relay (docs/egress.md); a session without
    # egress reaches none.
    packages=(nodejs python3-pip python3-requests) ;;
  data)
    default_image=localhost/sandboxd-python-data:bookworm
    offers=python3,nodejs,pip,numpy,pandas,matplotlib,pil
    # python3-munkres is not used by anything we offer: it satisfies python3-fonttools'
    # "python3-scipy | python3-munkres", whose first choice would pull in scipy, pythran,
    # g++ and Boost (over 1 GB).
    packages=(nodejs python3-pip python3-requests python3-numpy python3-pandas python3-matplotlib python3-pil python3-munkres) ;;
  *) echo "build-image: unknown variant '$variant' (base or data)" >&2; exit 2 ;;
esac
(($# <= 1)) || { echo "build-image: one IMAGE at most" >&2; exit 2; }
image="${1:-$default_image}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
recipe="$({ cat "$here/build-image.sh"; echo "variant=$variant"; } | sha256sum | cut -c1-16)"
if ((print_recipe)); then echo "$recipe"; exit 0; fi

mirror="${SANDBOXD_DEBIAN_MIRROR:-}"
if [[ -z "$mirror" ]]; then
  mirror="$(grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null \
            | grep -oE 'https?://[^ ]+' | head -n1 || true)"
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

work="$(mktemp -d /var/tmp/sandboxd-rootfs.XXXXXX)"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
echo "build-image: debootstrap bookworm from $mirror (about 30 s)" >&2
debootstrap --variant=minbase --include=python3 bookworm "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  echo "build-image: debootstrap failed" >&2
  exit 1
}
changes=()
if ((${#packages[@]})); then
  # apt in the new root, not debootstrap --include: debootstrap takes the first alternative
  # of every dependency and cannot be told otherwise. Same mirror (debootstrap wrote it to
  # the root's sources.list), same package lists.
  echo "build-image: apt-get install ${packages[*]} (a few minutes)" >&2
  chroot "$rootfs" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 "${packages[@]}" \
    >"$work/apt.log" 2>&1 || {
    tail -n 30 "$work/apt.log" >&2
    echo "build-image: apt-get install failed" >&2
    exit 1
  }
  # The libraries' own test suites (pandas alone ships 36 MB of them).
  find "$rootfs/usr/lib/python3/dist-packages" -depth -type d -name tests -exec rm -rf {} +
fi
# Trim what a Python sandbox never needs.
rm -rf "$rootfs/var/cache/apt/"* "$rootfs/var/lib/apt/lists/"* \
       "$rootfs/usr/share/doc" "$rootfs/usr/share/man" "$rootfs/usr/share/locale"
mkdir -p "$rootfs/workspace" "$rootfs/opt/sandboxd" "$rootfs/run/sandboxd"
chmod 1777 "$rootfs/workspace"
if [[ "$variant" == data ]]; then
  # Matplotlib insists on a writable config/cache directory (else it warns and makes a
  # temporary one at every import), and the sandbox's only writable places are its tmpfs
  # mounts /tmp and /workspace (the user's files, so not there). MPLCONFIGDIR=/tmp, whose
  # mount is mode 1777. The font cache is built here, into the image's /tmp, which podman
  # copies into the /tmp tmpfs when it mounts it (tmpcopyup, podman's default for --tmpfs;
  # runc does it), so no container rebuilds it. A subdirectory would not do: runc copies
  # directories with its umask (1777 becomes 1755), and sandboxes run under varying uids.
  # Where a runtime does not copy (gVisor), the first import in a container rebuilds it
  # (about 0.1 s CPU). The cache is writable by all: matplotlib rewrites it when fonts
  # change. MPLBACKEND=Agg: there is no display.
  chroot "$rootfs" env -i PATH=/usr/bin:/bin MPLCONFIGDIR=/tmp MPLBACKEND=Agg \
    python3 -c 'import matplotlib.font_manager' || {
    echo "build-image: building matplotlib's font cache failed" >&2
    exit 1
  }
  chmod 0666 "$rootfs"/tmp/fontlist-*.json
  changes+=(--change "ENV MPLCONFIGDIR=/tmp" --change "ENV MPLBACKEND=Agg")
fi

tar -C "$rootfs" -cf "$work/rootfs.tar" .
podman import \
  --change "LABEL io.sandboxd.recipe=$recipe" \
  --change "LABEL io.sandboxd.offers=$offers" \
  "${changes[@]}" \
  --change "WORKDIR /workspace" \
  --change "USER 65534:65534" \
  --change 'CMD ["python3"]' \
  "$work/rootfs.tar" "$image" >/dev/null
if [[ -n "${SANDBOXD_ROOTFS_TAR:-}" ]]; then
  mkdir -p "$(dirname "$SANDBOXD_ROOTFS_TAR")"
  mv "$work/rootfs.tar" "$SANDBOXD_ROOTFS_TAR"
  chmod 0644 "$SANDBOXD_ROOTFS_TAR"
fi
echo "build-image: $image ready (variant $variant, recipe $recipe)" >&2
