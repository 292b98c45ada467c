#!/usr/bin/env bash
# Installs sandboxd and mcp-gateway as systemd user services for the current (non-root)
# user: every runtime file the build lists in BUILD_DIR/user-service-files.txt
# (~/.local/bin/{sandboxd,sandboxd-wasm-jail,mcp-gateway},
# ~/.local/share/sandboxd/sandbox_runner.{pyz,js}),
# ~/.config/systemd/user/{sandboxd,mcp-gateway}.service, and the sandbox image (Python and
# JavaScript sessions both run it) in the user's rootless podman storage. Then:
#   systemctl --user enable --now sandboxd mcp-gateway
#
#   scripts/install-user-service.sh               everything above
#   scripts/install-user-service.sh --files-only  the files and units only (an update of
#                                                 the binaries; no image, no checks of
#                                                 subuids, no daemon-reload)
#
# Run scripts/setup.sh first (as root or with sudo) so packages and the build exist.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

files_only=0
case "${1:-}" in
  --files-only) files_only=1 ;;
  "") ;;
  *) echo "install-user-service: unknown argument $1 (usage: install-user-service.sh [--files-only])" >&2; exit 2 ;;
esac
if [[ $(id -u) -eq 0 ]]; then
  echo "install-user-service: run this as the user who will own the service, not root" >&2
  exit 1
fi
build_dir="${BUILD_DIR:-build}"
image="${SANDBOXD_IMAGE:-localhost/sandboxd-python:bookworm}"
manifest="$build_dir/user-service-files.txt"
[[ -f "$manifest" ]] || { echo "install-user-service: no $manifest: build first (scripts/setup.sh)" >&2; exit 1; }
while read -r mode source dest; do
  [[ -f "$build_dir/$source" ]] || {
    echo "install-user-service: $build_dir/$source is missing: build everything first (scripts/setup.sh)" >&2
    exit 1
  }
done <"$manifest"

if ! ((files_only)) && ! { grep -q "^$(id -un):" /etc/subuid && grep -q "^$(id -un):" /etc/subgid; }; then
  echo "install-user-service: $(id -un) has no /etc/subuid and /etc/subgid ranges;" >&2
  echo "  as root: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $(id -un)" >&2
  exit 1
fi

# Each replaced by a rename, so a running daemon keeps its open copy.
while read -r mode source dest; do
  install -Dm"$mode" "$build_dir/$source" "$HOME/$dest.new"
  mv -f "$HOME/$dest.new" "$HOME/$dest"
done <"$manifest"
# An older install's single-file runner: nothing reads it any more.
rm -f "$HOME/.local/share/sandboxd/sandbox_runner.py"
install -Dm644 deploy/systemd/sandboxd.service "$HOME/.config/systemd/user/sandboxd.service"
install -Dm644 deploy/systemd/mcp-gateway.service "$HOME/.config/systemd/user/mcp-gateway.service"
mkdir -p "$HOME/.config/mcp-gateway/servers.d"
if ((files_only)); then
  echo "installed the files; restart the services to use them: systemctl --user daemon-reload; systemctl --user restart sandboxd mcp-gateway" >&2
  exit 0
fi

# Rootless podman with no storage.conf anywhere (Debian's podman installs none without its
# Recommends) stores images with vfs: each container then copies its whole image (214 MB
# and seconds per sandbox). On a storage not yet made, choose overlay (rootless native
# overlay, Linux 5.13 and later), and keep vfs where it does not work. An existing storage
# keeps its driver (changing it needs `podman system reset`, which deletes its images).
storage_conf="${XDG_CONFIG_HOME:-$HOME/.config}/containers/storage.conf"
storage_dir="${XDG_DATA_HOME:-$HOME/.local/share}/containers/storage"
if [[ ! -e "$storage_conf" && ! -e "$storage_dir" && ! -e /etc/containers/storage.conf &&
      ! -e /usr/share/containers/storage.conf ]]; then
  mkdir -p "$(dirname "$storage_conf")"
  printf '# Written by install-user-service.sh: overlay, not vfs (which copies each image per container).\n[storage]\ndriver = "overlay"\n' >"$storage_conf"
  if [[ "$(podman info --format '{{.Store.GraphDriverName}}' 2>/dev/null)" != overlay ]]; then
    rm -f "$storage_conf"
    podman system reset -f >/dev/null 2>&1 || true
    echo "install-user-service: rootless overlay storage does not work here; podman keeps vfs (each container copies its image)" >&2
  fi
fi

if ! podman image exists "$image"; then
  if [[ -r /var/cache/sandboxd/rootfs.tar ]]; then
    podman import --change 'WORKDIR /workspace' --change 'USER 65534:65534' \
      /var/cache/sandboxd/rootfs.tar "$image" >/dev/null
  else
    echo "install-user-service: no $image in your podman storage and no /var/cache/sandboxd/rootfs.tar;" >&2
    echo "  run scripts/setup.sh as root first, or: podman build -t $image deploy/image" >&2
    exit 1
  fi
fi

if systemctl --user daemon-reload 2>/dev/null; then
  echo "installed; start them with: systemctl --user enable --now sandboxd mcp-gateway" >&2
  echo "upstream MCP servers go in ~/.config/mcp-gateway/mcp.json (mcpServers format)" >&2
else
  echo "installed; no systemd user instance here: run ~/.local/bin/sandboxd directly" >&2
fi
