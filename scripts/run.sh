#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the product: sandboxd and mcp-gateway
# (Streamable HTTP on http://127.0.0.1:8931/mcp) with a configuration that works out of
# the box: your ~/.config/mcp-gateway/mcp.json (or servers.d/*.json) when present, else
# the reference MCP servers installed by the set-up (everything, memory, and filesystem on
# a directory of its own). HTTP clients authenticate with the token in the file the gateway names.
# Ctrl-C stops both; sandbox sessions survive for the next start.
#
#   scripts/run.sh                      MCP_GATEWAY_PORT=9000 scripts/run.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"

SANDBOXD_SETUP_FOR=run bash scripts/setup.sh
build_dir="${BUILD_DIR:-build}"
port="${MCP_GATEWAY_PORT:-8931}"

if [[ -n "${XDG_RUNTIME_DIR:-}" ]]; then
  sock="$XDG_RUNTIME_DIR/sandboxd/sandboxd.sock"
elif [[ $(id -u) -eq 0 ]]; then
  sock=/run/sandboxd/sandboxd.sock
else
  sock="/tmp/sandboxd-$(id -u)/sandboxd.sock"
fi

# Where Podman cannot start a container (a container inside a container, a CI runner, no
# subordinate uids), sessions run on the wasm tier instead: said loudly, here and in the log.
isolation_args=()
if ! why="$("$build_dir/services/sandboxd/sandboxd" --self_check 2>&1)"; then
  cat >&2 <<MSG

  ************************************************************************************
  run: Podman cannot start a sandbox container on this machine:
$(printf '%s\n' "$why" | tail -n 3 | sed 's/^/       /')
  run: FALLING BACK TO --isolation=wasm: sessions run as jailed Node processes (Python in
       Pyodide, stdlib only; docs/wasm-tier.md), not in containers.
  ************************************************************************************

MSG
  isolation_args=(--isolation=wasm)
fi

"$build_dir/services/sandboxd/sandboxd" --socket="$sock" "${isolation_args[@]}" &
sandboxd_pid=$!
trap 'kill -TERM $sandboxd_pid 2>/dev/null; wait $sandboxd_pid 2>/dev/null' EXIT
for _ in $(seq 1 300); do [[ -S "$sock" ]] && break; sleep 0.1; done
[[ -S "$sock" ]] || { echo "run: sandboxd did not come up on $sock" >&2; exit 1; }

config_home="${XDG_CONFIG_HOME:-$HOME/.config}/mcp-gateway"
config_args=()
if [[ -f "$config_home/mcp.json" ]] || compgen -G "$config_home/servers.d/*.json" >/dev/null; then
  echo "run: using your upstream servers from $config_home" >&2
else
  export MCP_GATEWAY_NODE_PEERS="$root/deploy/node/node_modules"
  export MCP_GATEWAY_STATE="${XDG_STATE_HOME:-$HOME/.local/state}/mcp-gateway"
  # The filesystem server gets a directory of its own, never the whole home directory.
  export MCP_GATEWAY_FILES="${MCP_GATEWAY_FILES:-${XDG_DATA_HOME:-$HOME/.local/share}/mcp-gateway/files}"
  mkdir -p "$MCP_GATEWAY_STATE" "$MCP_GATEWAY_FILES"
  # The gateway keeps its token and audit log there and refuses a directory others can enter.
  chmod 700 "$MCP_GATEWAY_STATE"
  config_args=(--config="$root/deploy/mcp-gateway/default-servers.json")
  echo "run: no $config_home/mcp.json: using the reference servers (everything, memory, filesystem on $MCP_GATEWAY_FILES)" >&2
fi

cat >&2 <<MSG

  sandboxd     unix:$sock        (grpcurl -plaintext -unix $sock list)
  mcp-gateway  http://127.0.0.1:$port/mcp   (clients send the bearer token kept in ${XDG_STATE_HOME:-$HOME/.local/state}/mcp-gateway/token)

  Connect a client:
    claude mcp add --transport http codemode http://127.0.0.1:$port/mcp \\
      --header "Authorization: Bearer \$(cat ${XDG_STATE_HOME:-$HOME/.local/state}/mcp-gateway/token)"
    Cursor / Claude Desktop / the MCP Inspector: see deploy/clients/README.md

MSG
"$build_dir/services/mcp-gateway/mcp-gateway" --transport=http --listen="127.0.0.1:$port" \
  --sandboxd="unix:$sock" "${config_args[@]}" "$@"
