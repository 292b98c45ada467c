#!/usr/bin/env bash
# Checks deploy/systemd/mcp-gateway.service with systemd-analyze verify, pointing its
# ExecStart at the built binary (verify insists the command exists).
set -euo pipefail
unit="$1"; binary="$2"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
sed "s|%h/.local/bin/mcp-gateway|$binary|" "$unit" > "$dir/mcp-gateway.service"
# The unit wants sandboxd.service; give verify one to resolve.
sed "s|%h/.local/bin/sandboxd|$binary|" "$(dirname "$unit")/sandboxd.service" > "$dir/sandboxd.service"
out="$(cd "$dir" && systemd-analyze verify "$dir/mcp-gateway.service" 2>&1)"
if [[ -n "$out" ]]; then echo "$out"; exit 1; fi
echo "mcp-gateway.service verifies"
