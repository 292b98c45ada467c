#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs the whole test suite: unit tests (no
# Podman), integration tests (the real daemon against real Podman, rootful and rootless),
# then the unit tests under ASan+UBSan and TSan and each fuzz target for a bounded time
# (scripts/sanitize.sh). Safe to re-run. CI runs exactly this (.ci/run).
#
#   scripts/test.sh              everything
#   scripts/test.sh -L unit      extra arguments go to ctest; the sanitizer and fuzz
#                                stage then does not run (run scripts/sanitize.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/setup.sh
echo "test: set-up took $((SECONDS / 60))m$((SECONDS % 60))s" >&2  # CI has 90 minutes in all
build_dir="${BUILD_DIR:-build}"
# Integration tests start their own daemons with private state directories and sockets,
# so two can run at once on this 2-core machine.
junit="$(pwd)/$build_dir/ctest-junit.xml"
ctest --test-dir "$build_dir" --output-on-failure --timeout 900 -j2 --output-junit "$junit" "$@"
echo "test: set-up and the suite took $((SECONDS / 60))m$((SECONDS % 60))s" >&2
python3 tests/check_skips.py "$junit"  # ctest passes skips; only opt-outs may skip
if (($# == 0)); then
  bash scripts/sanitize.sh
fi
