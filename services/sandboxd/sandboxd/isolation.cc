#include "sandboxd/isolation.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/log_text.h"

namespace sandboxd {

std::string_view IsolationName(Isolation isolation) {
  switch (isolation) {
    case Isolation::kGvisor: return "gvisor";
    case Isolation::kWasm: return "wasm";
    case Isolation::kContainer: break;
  }
  return "container";
}

absl::StatusOr<Isolation> ParseIsolation(std::string_view name) {
  if (name == "container") return Isolation::kContainer;
  if (name == "gvisor") return Isolation::kGvisor;
  if (name == "wasm") return Isolation::kWasm;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown isolation '", codemode::LogQuoted(absl::string_view(name.data(), name.size())), "': the choices are container, gvisor and wasm"));
}

sandbox::v1::Isolation ToProto(Isolation isolation) {
  switch (isolation) {
    case Isolation::kGvisor: return sandbox::v1::ISOLATION_GVISOR;
    case Isolation::kWasm: return sandbox::v1::ISOLATION_WASM;
    case Isolation::kContainer: break;
  }
  return sandbox::v1::ISOLATION_CONTAINER;
}

Isolation FromProto(sandbox::v1::Isolation isolation, Isolation fallback) {
  switch (isolation) {
    case sandbox::v1::ISOLATION_CONTAINER: return Isolation::kContainer;
    case sandbox::v1::ISOLATION_GVISOR: return Isolation::kGvisor;
    case sandbox::v1::ISOLATION_WASM: return Isolation::kWasm;
    default: return fallback;
  }
}

bool IsolationPolicy::Allows(Isolation isolation) const {
  return isolation == default_isolation ||
         std::find(allowed.begin(), allowed.end(), isolation) != allowed.end();
}

std::vector<Isolation> IsolationPolicy::AllowedList() const {
  std::vector<Isolation> out = {default_isolation};
  for (Isolation i : allowed) {
    if (std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  }
  return out;
}

absl::StatusOr<Isolation> IsolationPolicy::Resolve(sandbox::v1::Isolation requested) const {
  if (requested == sandbox::v1::ISOLATION_UNSPECIFIED) return default_isolation;
  if (requested != sandbox::v1::ISOLATION_CONTAINER && requested != sandbox::v1::ISOLATION_GVISOR &&
      requested != sandbox::v1::ISOLATION_WASM) {
    return absl::InvalidArgumentError(absl::StrCat("unknown isolation ", static_cast<int>(requested)));
  }
  Isolation isolation = FromProto(requested, default_isolation);
  if (Allows(isolation)) return isolation;
  std::vector<std::string> names;
  for (Isolation i : AllowedList()) names.emplace_back(IsolationName(i));
  return absl::PermissionDeniedError(absl::StrCat(
      "isolation ", std::string(IsolationName(isolation)), " is not allowed by this daemon (allowed: ",
      absl::StrJoin(names, ", "), "; see sandboxd --allowed_isolations)"));
}

}  // namespace sandboxd
