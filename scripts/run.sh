#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs sandboxd in the foreground with its
# default configuration: unix socket under $XDG_RUNTIME_DIR (or /run/sandboxd as root),
# a warm pool of 2 containers. Ctrl-C stops it; sessions survive for the next start.
#
#   scripts/run.sh                    extra arguments go to sandboxd (see --help)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
build_dir="${BUILD_DIR:-build}"
bin="$build_dir/services/sandboxd/sandboxd"

if [[ -n "${XDG_RUNTIME_DIR:-}" ]]; then
  sock="$XDG_RUNTIME_DIR/sandboxd/sandboxd.sock"
elif [[ $(id -u) -eq 0 ]]; then
  sock=/run/sandboxd/sandboxd.sock
else
  sock="/tmp/sandboxd-$(id -u)/sandboxd.sock"
fi

cat >&2 <<MSG

sandboxd is starting on unix:$sock
  grpcurl -plaintext -unix $sock list
  grpcurl -plaintext -unix $sock sandbox.v1.SandboxService/GetInfo
  grpcurl -plaintext -unix $sock grpc.health.v1.Health/Check
(see README.md for CreateSession, Run and Execute examples)

MSG
exec "$bin" --socket="$sock" "$@"
