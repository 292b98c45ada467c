#!/usr/bin/env bash
# Builds the images of the two daemons for deploy/kubernetes offline, the way
# deploy/image/build-image.sh builds the sandbox image: debootstrap a minimal Debian
# bookworm from the configured mirror, add the Debian packages the built binaries link
# (found with ldd and dpkg -S), copy the binaries in, and `podman import`. No registry.
#
#   scripts/build-daemon-images.sh [--with-data-image] [--tag TAG]
#
#   localhost/sandboxd:TAG      sandboxd, sandboxd-wasm-jail, the runners, the wasm tier's
#                               runtime (deploy/wasm), podman, runc, catatonit, runsc and
#                               bubblewrap, and the sandbox image(s) as archives that its
#                               sandboxd-load-images loads into a node's Podman storage
#                               (the base image; --with-data-image adds the data one)
#   localhost/mcp-gateway:TAG   mcp-gateway; runs as uid 64500
# TAG defaults to latest. Run scripts/setup.sh first: it builds the binaries (BUILD_DIR,
# default build), installs deploy/wasm and builds the sandbox images. Safe to re-run: an
# image whose inputs (this script, the binaries, the runtime, the sandbox images) have not
# changed is kept (label io.codemode.inputs). To use them in a cluster, push them to the
# registry the nodes pull from, or `podman save` them and load them on every node, and
# set deploy/kubernetes/base/kustomization.yaml's `images:` accordingly.
#
# Environment: SANDBOXD_DEBIAN_MIRROR (as build-image.sh), BUILD_DIR,
#              SANDBOXD_IMAGE, SANDBOXD_DATA_IMAGE (the sandbox images to bake in).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

tag=latest
with_data=0
while (($#)); do
  case "$1" in
    --tag) [[ $# -ge 2 ]] || { echo "build-daemon-images: --tag needs a value" >&2; exit 2; }
           tag="$2"; shift 2 ;;
    --with-data-image) with_data=1; shift ;;
    *) echo "build-daemon-images: unknown argument $1 (usage: build-daemon-images.sh [--with-data-image] [--tag TAG])" >&2
       exit 2 ;;
  esac
done
log() { echo "build-daemon-images: $*" >&2; }
build_dir="${BUILD_DIR:-build}"
sandbox_images=("${SANDBOXD_IMAGE:-localhost/sandboxd-python:bookworm}")
((with_data)) && sandbox_images+=("${SANDBOXD_DATA_IMAGE:-localhost/sandboxd-python-data:bookworm}")
sandboxd_files=("$build_dir/services/sandboxd/sandboxd" "$build_dir/services/sandboxd/sandboxd-wasm-jail"
                "$build_dir/services/sandboxd/sandbox_runner.pyz" "$build_dir/services/sandboxd/sandbox_runner.js")
gateway_files=("$build_dir/services/mcp-gateway/mcp-gateway")
wasm_runtime=deploy/wasm/node_modules
python_packages=deploy/wasm/python-packages
for f in "${sandboxd_files[@]}" "${gateway_files[@]}"; do
  [[ -f "$f" ]] || { log "$f is missing: build first (scripts/setup.sh)"; exit 1; }
done
for d in node pyodide acorn; do
  [[ -d "$wasm_runtime/$d" ]] || { log "$wasm_runtime/$d is missing: run scripts/setup.sh"; exit 1; }
done
[[ -f "$python_packages/.recipe" ]] || { log "$python_packages is missing: run scripts/setup.sh"; exit 1; }
for image in "${sandbox_images[@]}"; do
  podman image exists "$image" || { log "sandbox image $image is missing: run scripts/setup.sh"; exit 1; }
done

# What an image is made of, hashed: an image labelled with the same hash is current.
inputs_of() {
  { sha256sum "$0" "$@"; } | sha256sum | cut -c1-16
}
wasm_hash="$(cat deploy/wasm/package-lock.json "$python_packages/.recipe" | sha256sum | cut -c1-16)"
image_ids="$(for i in "${sandbox_images[@]}"; do podman image inspect --format '{{.Id}}' "$i"; done | tr '\n' ' ')"
sandboxd_inputs="$(inputs_of "${sandboxd_files[@]}" <(echo "$wasm_hash $image_ids"))"
gateway_inputs="$(inputs_of "${gateway_files[@]}")"
current() {
  [[ "$(podman image inspect --format '{{index .Labels "io.codemode.inputs"}}' "$1" 2>/dev/null || true)" == "$2" ]]
}
want_sandboxd=1; want_gateway=1
current "localhost/sandboxd:$tag" "$sandboxd_inputs" && { want_sandboxd=0; log "localhost/sandboxd:$tag is current"; }
current "localhost/mcp-gateway:$tag" "$gateway_inputs" && { want_gateway=0; log "localhost/mcp-gateway:$tag is current"; }
((want_sandboxd || want_gateway)) || exit 0

# The Debian packages holding the shared libraries `binary` links (libc6 and the like are
# in every root already; apt leaves them).
packages_of() {
  ldd "$1" | awk '$3 ~ /^\// {print $3}' | xargs -r realpath | sort -u | while read -r lib; do
    dpkg -S "$lib" 2>/dev/null || dpkg -S "${lib#/usr}"
  done | cut -d: -f1 | sort -u
}

# The Debian mirror apt uses here (its first .../debian/ repository), unless given.
mirror="${SANDBOXD_DEBIAN_MIRROR:-$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep -m1 -E '/debian/$' || true)}"
mirror="${mirror:-http://deb.debian.org/debian/}"
work="$(mktemp -d /var/tmp/daemon-images.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# Runs a step, its output to $work/LOG; on failure, the log's end and the step's name.
step() {
  local name="$1" log="$work/$2"; shift 2
  "$@" >"$log" 2>&1 && return 0
  tail -n 30 "$log" >&2
  log "$name failed"
  exit 1
}
log "debootstrap bookworm from $mirror (about 30 s)"
step debootstrap debootstrap.log debootstrap --variant=minbase bookworm "$work/base" "$mirror"

# A copy of the base root with `packages` installed, as $work/NAME.
root_with() {
  local name="$1"; shift
  cp -a "$work/base" "$work/$name"
  log "$name: apt-get install $*"
  step "$name: apt-get install" "$name-apt.log" chroot "$work/$name" \
    env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends -o Dpkg::Use-Pty=0 "$@"
  rm -rf "$work/$name/var/cache/apt/"* "$work/$name/var/lib/apt/lists/"* \
         "$work/$name/usr/share/doc" "$work/$name/usr/share/man" "$work/$name/usr/share/locale"
}
import_root() {
  local name="$1" image="$2"; shift 2
  local previous
  previous="$(podman image inspect --format '{{.Id}}' "$image" 2>/dev/null || true)"
  tar -C "$work/$name" -cf "$work/$name.tar" .
  podman import "$@" "$work/$name.tar" "$image" >/dev/null
  # The image this one replaces, now untagged (kept while a container uses it).
  [[ -z "$previous" ]] || podman rmi "$previous" >/dev/null 2>&1 || true
  rm -rf "${work:?}/$name" "$work/$name.tar"
  log "$image ready: $(podman image inspect --format '{{.Size}}' "$image" | numfmt --to=iec) ($name)"
}

if ((want_sandboxd)); then
  # podman with runc and catatonit (the --init binary) for the container tier, runsc for
  # gVisor, bubblewrap for the wasm tier's bwrap layer where the pod allows it.
  # The libraries of sandboxd, the jail and the wasm tier's Node (libatomic1).
  mapfile -t libs < <({ packages_of "${sandboxd_files[0]}"; packages_of "${sandboxd_files[1]}"
                        packages_of "$wasm_runtime/node/bin/node"; } | sort -u)
  root_with sandboxd "${libs[@]}" podman runc catatonit runsc bubblewrap
  r="$work/sandboxd"
  install -m 0755 "${sandboxd_files[0]}" "${sandboxd_files[1]}" "$r/usr/local/bin/"
  strip --strip-debug "$r/usr/local/bin/sandboxd"  # RelWithDebInfo: 90 MB with its debug info
  install -d "$r/usr/local/share/sandboxd/wasm" "$r/usr/local/share/sandboxd/images"
  install -m 0644 "${sandboxd_files[2]}" "${sandboxd_files[3]}" "$r/usr/local/share/sandboxd/"
  # sandboxd finds the runners and the wasm runtime in ../share/sandboxd/ beside itself.
  cp -rL "$wasm_runtime/node" "$wasm_runtime/pyodide" "$wasm_runtime/acorn" "$r/usr/local/share/sandboxd/wasm/"
  cp -a "$python_packages" "$r/usr/local/share/sandboxd/wasm-python-packages"
  for i in "${!sandbox_images[@]}"; do
    image="${sandbox_images[$i]}"
    log "sandboxd: saving sandbox image $image"
    podman save --format docker-archive -o "$r/usr/local/share/sandboxd/images/$i.tar" "$image" 2>/dev/null
    echo "$image" >"$r/usr/local/share/sandboxd/images/$i.name"
    podman image inspect --format '{{index .Labels "io.sandboxd.recipe"}}' "$image" \
      >"$r/usr/local/share/sandboxd/images/$i.recipe"
  done
  cat >"$r/usr/local/bin/sandboxd-load-images" <<'EOF'
#!/bin/sh
# Loads the sandbox images kept in /usr/local/share/sandboxd/images into this node's Podman
# storage, each when missing or of another recipe (deploy/kubernetes: an init container).
set -eu
for tar in /usr/local/share/sandboxd/images/*.tar; do
  name="$(cat "${tar%.tar}.name")"
  recipe="$(cat "${tar%.tar}.recipe")"
  have="$(podman image inspect --format '{{index .Labels "io.sandboxd.recipe"}}' "$name" 2>/dev/null || true)"
  if [ "$have" = "$recipe" ]; then
    echo "sandboxd-load-images: $name is current" >&2
  else
    echo "sandboxd-load-images: loading $name" >&2
    podman load -q -i "$tar" >/dev/null
  fi
done
EOF
  chmod 0755 "$r/usr/local/bin/sandboxd-load-images"
  import_root sandboxd "localhost/sandboxd:$tag" \
    --change "LABEL io.codemode.inputs=$sandboxd_inputs" \
    --change 'ENTRYPOINT ["/usr/local/bin/sandboxd"]'
fi

if ((want_gateway)); then
  mapfile -t libs < <(packages_of "${gateway_files[0]}")
  root_with mcp-gateway "${libs[@]}"
  install -m 0755 "${gateway_files[0]}" "$work/mcp-gateway/usr/local/bin/"
  strip --strip-debug "$work/mcp-gateway/usr/local/bin/mcp-gateway"
  import_root mcp-gateway "localhost/mcp-gateway:$tag" \
    --change "LABEL io.codemode.inputs=$gateway_inputs" \
    --change "USER 64500:64500" \
    --change 'ENTRYPOINT ["/usr/local/bin/mcp-gateway"]'
fi
