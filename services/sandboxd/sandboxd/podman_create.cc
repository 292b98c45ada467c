// A container-isolation sandbox started through podman's REST service (PodmanApi): the
// libpod SpecGenerator that says what BuildRunArgv's `podman run` flags say, and the
// create and start requests. docs/burst.md has the measurements; the integration test
// PodmanApiTest compares the OCI configuration podman generates from both.
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "sandboxd/podman_runtime.h"
#include "spdlog/spdlog.h"

namespace sandboxd {
namespace {

using nlohmann::json;
using Op = SandboxdMetrics::ContainerOp;

// The API's major version: Debian 12's podman (4.3) and every later 4.x and 5.x answer it.
constexpr char kApi[] = "/v4.0.0/libpod";

json Rlimit(const char* type, uint64_t value) {
  return {{"type", type}, {"soft", value}, {"hard", value}};
}

json Tmpfs(const std::string& destination, uint64_t size) {
  return {{"destination", destination}, {"type", "tmpfs"}, {"source", "tmpfs"},
          {"options", {"rw", "nosuid", "nodev", "mode=1777", absl::StrCat("size=", size)}}};
}

// podman's message in an error answer ({"cause", "message", "response"}), else the body.
std::string ErrorText(const PodmanApi::Response& r) {
  json j = json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) {
    return j["message"].get<std::string>();
  }
  return r.body.substr(0, 600);
}

}  // namespace

std::string BuildCreateSpec(const PodmanOptions& options, const RuntimeInfo& info,
                            const ContainerSpec& spec) {
  const ResolvedLimits& l = spec.limits;
  json env = json::object();
  env["HOME"] = "/workspace";
  for (const std::string& kv : spec.env) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  json s = {
      {"name", spec.name},
      {"image", spec.image},
      {"labels", spec.labels},
      {"command", RunnerCommand(spec)},
      {"env", env},
      {"netns", {{"nsmode", "none"}}},
      {"read_only_filesystem", true},
      {"read_write_tmpfs", false},
      {"cap_drop", {"ALL"}},
      {"no_new_privileges", true},
      {"user", absl::StrCat(spec.uid, ":65534")},
      {"init", true},
      {"log_configuration", {{"driver", "none"}}},
      {"hostname", "sandbox"},
      {"http_proxy", false},  // podman would copy its own proxy variables in
      {"ipcns", {{"nsmode", "private"}}},
      {"work_dir", "/workspace"},
      {"r_limits", {Rlimit("nofile", l.nofile), Rlimit("core", 0),
                    Rlimit("nproc", NprocCeiling(info, l))}},
      {"mounts",
       {Tmpfs("/tmp", l.tmp_bytes), Tmpfs("/workspace", l.workspace_bytes),
        {{"destination", RunnerMountPath(spec.language)}, {"type", "bind"},
         {"source", spec.runner_path}, {"options", {"ro"}}},
        // Writable only until the runner listens (SealSocketDir), as in BuildRunArgv.
        {{"destination", kSocketMountDir}, {"type", "bind"}, {"source", spec.socket_dir},
         {"options", {"nosuid", "nodev", "noexec"}}}}},
      {"resource_limits",
       {{"memory", {{"limit", l.memory_bytes}, {"swap", l.memory_bytes}}},
        {"pids", {{"limit", l.pids}}},
        // --cpus N is a quota of N periods of 100 ms.
        {"cpu", {{"quota", uint64_t{l.cpu_millis} * 100}, {"period", 100000}}}}},
  };
  if (!options.seccomp_profile.empty()) {
    s["seccomp_profile_path"] = options.seccomp_profile;
    // What `podman inspect` reads back as SecurityOpt (the CLI records it so too).
    s["annotations"] = {{"io.podman.annotations.seccomp", options.seccomp_profile}};
  }
  if (!info.oci_runtime.empty()) s["oci_runtime"] = info.oci_runtime;
  return s.dump();
}

absl::StatusOr<std::string> PodmanRuntime::StartThroughApi(PodmanApi& api,
                                                           const RuntimeInfo& info,
                                                           const ContainerSpec& spec,
                                                           bool* fell_back) {
  const absl::Time began = absl::Now();
  // Whatever goes wrong here, the CLI tries next: it starts the same container, and says
  // in its own words why not if it cannot either. Once a request has gone out the
  // container may exist, whatever became of the answer.
  auto fall_back = [&](const std::string& why, bool sent) -> absl::StatusOr<std::string> {
    spdlog::warn("podman API: {}; the podman CLI starts {} instead", why, spec.name);
    if (metrics_) metrics_->ContainerOpDone(Op::kRun, false, absl::Now() - began);
    if (sent) (void)Remove({spec.name});
    *fell_back = true;
    return absl::UnavailableError(why);
  };
  auto failed = [&](const absl::Status& s) {
    return fall_back(std::string(s.message()), s.code() != absl::StatusCode::kUnavailable);
  };
  absl::StatusOr<PodmanApi::Response> created =
      api.Post(absl::StrCat(kApi, "/containers/create"), BuildCreateSpec(options_, info, spec));
  if (!created.ok()) return failed(created.status());
  json body = json::parse(created->body, nullptr, false);
  if (created->status != 201 || !body.is_object() || !body.contains("Id") || !body["Id"].is_string()) {
    return fall_back(absl::StrCat("create answered HTTP ", created->status, ": ", ErrorText(*created)),
                     true);
  }
  absl::StatusOr<PodmanApi::Response> started =
      api.Post(absl::StrCat(kApi, "/containers/", spec.name, "/start"), "");
  if (!started.ok()) return failed(started.status());
  if (started->status != 204 && started->status != 304) {
    return fall_back(absl::StrCat("start answered HTTP ", started->status, ": ", ErrorText(*started)),
                     true);
  }
  if (metrics_) metrics_->ContainerOpDone(Op::kRun, true, absl::Now() - began);
  return body["Id"].get<std::string>();
}

}  // namespace sandboxd
