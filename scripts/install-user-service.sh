#!/usr/bin/env bash
# Installs sandboxd and mcp-gateway as systemd user services for the current (non-root)
# user: ~/.local/bin/{sandboxd,mcp-gateway}, ~/.local/share/sandboxd/sandbox_runner.pyz,
# ~/.config/systemd/user/{sandboxd,mcp-gateway}.service, and the sandbox image in the
# user's rootless podman storage. Then: systemctl --user enable --now sandboxd mcp-gateway
#
# Run scripts/setup.sh first (as root or with sudo) so packages and the build exist.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [[ $(id -u) -eq 0 ]]; then
  echo "install-user-service: run this as the user who will own the service, not root" >&2
  exit 1
fi
build_dir="${BUILD_DIR:-build}"
image="${SANDBOXD_IMAGE:-localhost/sandboxd-python:bookworm}"
[[ -x "$build_dir/services/sandboxd/sandboxd" && -f "$build_dir/services/sandboxd/sandbox_runner.pyz" ]] ||
  { echo "build first: scripts/setup.sh" >&2; exit 1; }

grep -q "^$(id -un):" /etc/subuid && grep -q "^$(id -un):" /etc/subgid || {
  echo "install-user-service: $(id -un) has no /etc/subuid and /etc/subgid ranges;" >&2
  echo "  as root: usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $(id -un)" >&2
  exit 1
}

install -Dm755 "$build_dir/services/sandboxd/sandboxd" "$HOME/.local/bin/sandboxd"
# The runner zipapp the build made next to the binary (services/sandboxd/runner/build_pyz.py).
install -Dm644 "$build_dir/services/sandboxd/sandbox_runner.pyz" "$HOME/.local/share/sandboxd/sandbox_runner.pyz"
# An older install's single-file runner: nothing reads it any more.
rm -f "$HOME/.local/share/sandboxd/sandbox_runner.py"
install -Dm644 deploy/systemd/sandboxd.service "$HOME/.config/systemd/user/sandboxd.service"
install -Dm755 "$build_dir/services/mcp-gateway/mcp-gateway" "$HOME/.local/bin/mcp-gateway"
install -Dm644 deploy/systemd/mcp-gateway.service "$HOME/.config/systemd/user/mcp-gateway.service"
mkdir -p "$HOME/.config/mcp-gateway/servers.d"

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
