#!/usr/bin/env bash
# Runs a test command whose runner can report skips, and fails when any test was skipped:
# a test here can only pass or fail (see tests/common/opt_out.h for the gtest side).
#
#   run_without_skips.sh node FILE.test.mjs       "${NODE:-node}" --test, spec output
#   run_without_skips.sh python DIR               "${PYTHON:-python3}" -m unittest discover -s DIR -v
set -uo pipefail
kind=$1; shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT
case $kind in
  node)
    "${NODE:-node}" --test --test-reporter=spec --test-reporter-destination=stdout \
      --test-reporter=tap --test-reporter-destination="$log" "$@"
    rc=$?
    skipped=$(awk '/^# (skipped|todo) /{n += $3} END {print n + 0}' "$log")
    ;;
  python)
    "${PYTHON:-python3}" -m unittest discover -s "$1" -v 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    skipped=$(grep -oE 'skipped=[0-9]+' "$log" | tail -1 | cut -d= -f2)
    ;;
  *) echo "run_without_skips: unknown kind '$kind'" >&2; exit 2 ;;
esac
if (( rc == 0 && ${skipped:-0} > 0 )); then
  echo "FAILED: ${skipped} test(s) were skipped; a test here can only pass or fail" >&2
  exit 1
fi
exit "$rc"
