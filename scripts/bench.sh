#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh: packages, sandbox image, build), then runs both
# benchmarks against private daemons they start themselves:
#   bench/sandboxd_bench.cc  -> docs/benchmarks/sandboxd.md (text below its "end of
#                               generated report" marker is kept)
#   bench/gateway_bench.mjs  -> docs/benchmarks/gateway.md
# The sandboxd part measures both isolation modes (container, gVisor) side by side, a daemon
# each: about two minutes per mode after waiting (up to five) for other work on the
# machine to calm down; --quick is a smoke run of about a minute that does not wait.
#
#   scripts/bench.sh                 full benchmark
#   scripts/bench.sh --quick         smoke run (--quick goes to both; other arguments to sandboxd_bench)
#
# Environment: BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
build_dir="${BUILD_DIR:-build}"
cmake --build "$build_dir" -j2 --target sandboxd_bench
mkdir -p docs/benchmarks
"$build_dir/bench/sandboxd_bench" --out docs/benchmarks/sandboxd.md "$@"

quick=()
for a in "$@"; do [[ "$a" == "--quick" ]] && quick=(--quick); done
SANDBOXD_BIN="$(pwd)/$build_dir/services/sandboxd/sandboxd" \
GATEWAY_BIN="$(pwd)/$build_dir/services/mcp-gateway/mcp-gateway" \
NODE_PEERS="$(pwd)/deploy/node/node_modules" \
  node bench/gateway_bench.mjs --out docs/benchmarks/gateway.md "${quick[@]}"
