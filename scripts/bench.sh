#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh: packages, sandbox image, build), builds the
# benchmark and runs it against a private sandboxd it starts itself. The report goes to
# stdout and to docs/benchmarks/sandboxd.md (text below its "end of generated report"
# marker is kept). Takes about two minutes after waiting (up to five) for other work on the
# machine to calm down; --quick is a smoke run of a few seconds that does not wait.
#
#   scripts/bench.sh                 full benchmark
#   scripts/bench.sh --quick         extra arguments go to sandboxd_bench
#
# Environment: BUILD_DIR (default build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
build_dir="${BUILD_DIR:-build}"
cmake --build "$build_dir" -j2 --target sandboxd_bench
mkdir -p docs/benchmarks
exec "$build_dir/bench/sandboxd_bench" --out docs/benchmarks/sandboxd.md "$@"
