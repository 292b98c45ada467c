// The wasm tier's flags (wasm_*), read into WasmRuntimeOptions when the daemon uses the
// tier (--isolation=wasm or wasm in --allowed_isolations); docs/wasm-tier.md.
//
//   if (options.isolation.Allows(Isolation::kWasm)) {
//     absl::StatusOr<WasmRuntimeOptions> wasm = WasmFromFlags(options);
//   }
#pragma once

#include "absl/status/statusor.h"
#include "sandboxd/session_manager.h"
#include "sandboxd/wasm_runtime.h"

// Paths default to the pinned runtime scripts/setup.sh installs (deploy/wasm/node_modules),
// next to the binary's share directory or in the source tree, and the jail beside the
// binary. INVALID_ARGUMENT naming the flag for a bad --wasm_layers or --wasm_dir.
absl::StatusOr<sandboxd::WasmRuntimeOptions> WasmFromFlags(const sandboxd::ManagerOptions& options);

// --session_uid_range into options->session_uid_first/count; INVALID_ARGUMENT naming the
// flag unless it is FIRST-LAST with 0 < FIRST <= LAST < 4294967295.
absl::Status SessionUidsFromFlags(sandboxd::ManagerOptions* options);
