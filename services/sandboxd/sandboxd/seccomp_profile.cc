#include "sandboxd/seccomp_profile.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace sandboxd {
namespace {

using nlohmann::json;

// The calls whose every allow rule is replaced.
constexpr const char* kReplaced[] = {"clone", "clone3", "unshare", "setns"};

bool IsReplaced(const json& name) {
  return name.is_string() && std::find(std::begin(kReplaced), std::end(kReplaced),
                                       name.get<std::string>()) != std::end(kReplaced);
}

// Allowed when (arg `index` & kCloneNamespaceFlags) == 0.
json AllowWithoutNamespaces(const char* name, int index) {
  return {{"names", {name}},
          {"action", "SCMP_ACT_ALLOW"},
          {"args", {{{"index", index}, {"value", kCloneNamespaceFlags}, {"valueTwo", 0},
                     {"op", "SCMP_CMP_MASKED_EQ"}}}},
          {"comment", "sandboxd: no new namespaces"}};
}

}  // namespace

absl::StatusOr<json> DeriveSeccompProfile(const json& base) {
  if (!base.is_object() || !base.contains("syscalls") || !base["syscalls"].is_array()) {
    return absl::InvalidArgumentError("not a seccomp profile: no \"syscalls\" list");
  }
  const json action = base.value("defaultAction", json());
  if (!action.is_string() || action.get<std::string>().rfind("SCMP_ACT_ALLOW", 0) == 0 ||
      action.get<std::string>() == "SCMP_ACT_LOG") {
    return absl::InvalidArgumentError(absl::StrCat(
        "its defaultAction (", action.dump(), ") lets unlisted calls through, so leaving "
        "namespace calls out of its allow lists would not deny them"));
  }
  json out = base;
  json syscalls = json::array();
  for (json rule : base["syscalls"]) {
    if (rule.is_object() && rule.value("action", "") == "SCMP_ACT_ALLOW" &&
        rule.contains("names") && rule["names"].is_array()) {
      json& names = rule["names"];
      names.erase(std::remove_if(names.begin(), names.end(), IsReplaced), names.end());
      if (names.empty()) continue;
    }
    syscalls.push_back(std::move(rule));
  }
  // x86_64 and arm64 pass clone's flags first (s390x, which passes them second, is not
  // a platform sandboxd supports).
  syscalls.push_back(AllowWithoutNamespaces("clone", 0));
  syscalls.push_back(AllowWithoutNamespaces("unshare", 0));
  syscalls.push_back({{"names", {"clone3"}},
                      {"action", "SCMP_ACT_ERRNO"},
                      {"errnoRet", 38},  // ENOSYS: the C library falls back to clone
                      {"comment", "sandboxd: flags seccomp cannot read"}});
  out["syscalls"] = std::move(syscalls);
  return out;
}

absl::Status WriteSeccompProfile(const std::string& base_path, const std::string& out_path) {
  std::ifstream in(base_path);
  if (!in) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot read the seccomp profile ", base_path,
        " (--seccomp_base: podman's default profile, from the golang-github-containers-common "
        "package)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  json base = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (base.is_discarded()) {
    return absl::FailedPreconditionError(absl::StrCat(base_path, " is not JSON"));
  }
  absl::StatusOr<json> derived = DeriveSeccompProfile(base);
  if (!derived.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(base_path, ": ", derived.status().message()));
  }
  const std::string tmp = out_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << derived->dump(1) << "\n";
    if (!out.flush()) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  chmod(tmp.c_str(), 0644);
  if (std::rename(tmp.c_str(), out_path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", out_path));
  }
  return absl::OkStatus();
}

}  // namespace sandboxd
