#!/usr/bin/env bash
# The unit tests under sanitizers, and the fuzz targets for a bounded time. Called by
# scripts/test.sh after the regular suite (so CI and a newcomer run it too); runs on its
# own after scripts/setup.sh.
#
#   build-asan/  clang, AddressSanitizer + UndefinedBehaviorSanitizer (+ libFuzzer
#                coverage): every unit test, then each fuzz target over its seed corpus
#                and for FUZZ_SECONDS (default 20) of new inputs.
#   build-tsan/  clang, ThreadSanitizer: every unit test (and both daemons, compiled for
#                clang's lock annotations' check). Both services lock with
#                codemode::Mutex (std::mutex underneath, which TSan sees; Debian's
#                absl::Mutex is invisible to it) and tests/sanitizers/tsan.supp names only
#                frames of uninstrumented libraries (docs/testing.md).
#
#   scripts/sanitize.sh            both
#   FUZZ_SECONDS=300 scripts/sanitize.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root="$(pwd)"
# Paths in compile commands relative to the checkout, and not the build directory in the
# key (scripts/setup.sh says why): a fresh clone elsewhere still hits the cache.
export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
log() { echo "sanitize: [$((SECONDS / 60))m$((SECONDS % 60))s] $*" >&2; }  # time since the start: CI has 90 minutes
fuzz_seconds="${FUZZ_SECONDS:-20}"
cxx="$(command -v clang++-14 || true)"
[[ -n "$cxx" ]] || { log "clang++-14 is missing: run scripts/setup.sh"; exit 1; }

unit_targets=(base_unit_tests catalog_unit_tests sandboxd_runner_unit_tests sandboxd_unit_tests
              gateway_jsonrpc_unit_tests gateway_server_unit_tests gateway_upstream_unit_tests
              gateway_handles_unit_tests gateway_bridge_unit_tests telemetry_unit_tests
              gateway_audit_unit_tests gateway_approvals_unit_tests gateway_adapter_unit_tests
              sandboxd_egress_tests sandboxd_egress_proxy_tests)
# Unit tests that run gRPC's runtime in-process (SandboxClient: the tool-call admission it
# drives is tested in gateway_bridge_unit_tests; sandboxd's CallbackQueueKeeper): Debian's
# libgrpc is not built with TSan,
# which then reports gRPC's own hand-offs between its threads. ASan and UBSan only.
grpc_targets=(gateway_grpc_client_tests sandboxd_grpc_unit_tests)
fuzzers=(runner_frame mcp_message sse upstream_config catalog resource_uri out_listing http_request
         sandbox_handle approval_question egress_policy client_hello)

# -O1 and line tables only: what the sanitizers' own docs recommend for readable stacks,
# and it compiles the gRPC/protobuf-heavy tree about twice as fast as -O2 -g.
configure() {  # dir, sanitizers, fuzz
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
    -DCODEMODE_SANITIZE="$2" -DCODEMODE_FUZZ="$3" >/dev/null
}

# ctest runs only the suites built here (the rest of the tree is not built in these
# directories, so neither are the programs that command_line, systemd_install_files and
# kubernetes_layout run) and gives sanitized tests room. A test that takes every
# descriptor away opts out: the sanitizers' runtimes need some of their own.
run_units() {  # dir
  SANDBOXD_TEST_SKIP_NO_DESCRIPTORS=1 ctest --test-dir "$1" -L unit --output-on-failure --timeout 900 -j2 \
    -E "_NOT_BUILT|runner_unit_tests|runner_js_unit_tests|runner_wasm_unit_tests|gateway_systemd_unit_verifies|command_line|systemd_install_files|kubernetes_layout" \
    --output-junit "$root/$1/ctest-junit.xml"
  python3 tests/check_skips.py "$root/$1/ctest-junit.xml"
}

log "ASan + UBSan build"
configure build-asan "address;undefined" ON
fuzz_targets=("${fuzzers[@]/%/_fuzzer}")
cmake --build build-asan -j2 --target "${unit_targets[@]}" "${grpc_targets[@]}" "${fuzz_targets[@]}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
log "unit tests under ASan + UBSan"
run_units build-asan

for f in "${fuzzers[@]}"; do
  corpus="tests/fuzz/corpus/$f"
  scratch="$(mktemp -d)"
  log "fuzzing $f: the seed corpus, then ${fuzz_seconds}s of new inputs"
  "build-asan/tests/fuzz/${f}_fuzzer" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$scratch/" "$scratch" "$corpus" \
    2>"$scratch.log" || {
      tail -60 "$scratch.log" >&2
      log "FAILED: $f found a crash; the input is in $scratch (add it to $corpus and fix)"
      exit 1
    }
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$scratch.log" | tr '\n' ' ' >&2
  echo >&2
  rm -rf "$scratch" "$scratch.log"
done

log "TSan build"
configure build-tsan "thread" OFF
# The two daemons too, though no test runs them from here: clang's -Wthread-safety
# (an error in clang builds) then checks every target, both mains and sandboxd's gRPC
# layer included, not only what the unit tests link.
cmake --build build-tsan -j2 --target "${unit_targets[@]}" sandboxd mcp-gateway
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/sanitizers/tsan.supp"
log "unit tests under TSan"
run_units build-tsan
log "sanitizers and fuzzers: all clean"
