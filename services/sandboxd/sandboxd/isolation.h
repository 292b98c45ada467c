// Isolation: what stands between the sandboxed code and the host kernel (sandbox.v1.Isolation
// and docs/security.md, "Isolation modes").
//
//   kContainer  a hardened podman container on runc/crun: the code's system calls reach
//               the host kernel, filtered by seccomp.
//   kGvisor     the same container under gVisor's runsc: a user-space kernel (the Sentry)
//               answers them, and only it talks to the host kernel.
//   kWasm       no container: one jailed Node process per session (WasmRuntime), Python
//               in Pyodide; the boundary is the process's layers (wasm_layers.h).
//
// The daemon has a default isolation (--isolation) and a set clients may ask for per
// session (--allowed_isolations); IsolationPolicy::Resolve applies both to a request.
//
//   IsolationPolicy policy{Isolation::kContainer, {Isolation::kContainer, Isolation::kGvisor}};
//   absl::StatusOr<Isolation> i = policy.Resolve(request.isolation());
//   if (!i.ok()) return i.status();
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "sandbox/v1/sandbox.pb.h"

namespace sandboxd {

enum class Isolation { kContainer, kGvisor, kWasm };

// "container", "gvisor" or "wasm": the names of the flags, logs and labels.
std::string_view IsolationName(Isolation isolation);
// The inverse of IsolationName; INVALID_ARGUMENT naming the choices otherwise.
absl::StatusOr<Isolation> ParseIsolation(std::string_view name);

sandbox::v1::Isolation ToProto(Isolation isolation);
// ISOLATION_UNSPECIFIED (and unknown values) give `fallback`.
Isolation FromProto(sandbox::v1::Isolation isolation, Isolation fallback);

struct IsolationPolicy {
  Isolation default_isolation = Isolation::kContainer;
  // What clients may ask for; the default is always allowed, whether listed or not.
  std::vector<Isolation> allowed;

  bool Allows(Isolation isolation) const;
  // The isolation a CreateSession request gets: the default for UNSPECIFIED, the requested
  // one when allowed; PERMISSION_DENIED naming the allowed ones otherwise, INVALID_ARGUMENT
  // for a value this daemon does not know.
  absl::StatusOr<Isolation> Resolve(sandbox::v1::Isolation requested) const;
  // The default first, then the other allowed ones, without repeats.
  std::vector<Isolation> AllowedList() const;
};

}  // namespace sandboxd
