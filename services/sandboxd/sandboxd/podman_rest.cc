// What PodmanRuntime does through podman's REST service (PodmanApi): a container-isolation
// sandbox's start (the libpod SpecGenerator that says what BuildRunArgv's `podman run`
// flags say, then create and start requests) and removals. docs/burst.md has the
// measurements; the integration test PodmanApiTest compares the OCI configuration podman
// generates from both ways of starting.
#include <algorithm>
#include <atomic>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "base/untrusted_json.h"
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
  absl::StatusOr<json> j = codemode::ParseUntrustedJson(r.body, "podman's answer");
  if (std::optional<std::string> message = j.ok() ? codemode::StringField(*j, "message") : std::nullopt) {
    return message->substr(0, 600);
  }
  return r.body.substr(0, 600);
}

// Whether `name` may stand in a request's path as it is: podman's own grammar for names
// ([a-zA-Z0-9][a-zA-Z0-9_.-]*), which ids also fit. Anything else (a '/', '?', a space or
// a line end would change the request) is left to the CLI, which passes it as one argument.
bool NameFitsPath(const std::string& name) {
  if (name.empty() || !absl::ascii_isalnum(name[0])) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
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
  // The labels again as annotations, which the OCI runtime shows (RemoveStrays), as in
  // BuildRunArgv.
  s["annotations"] = spec.labels;
  if (!options.seccomp_profile.empty()) {
    s["seccomp_profile_path"] = options.seccomp_profile;
    // What `podman inspect` reads back as SecurityOpt (the CLI records it so too).
    s["annotations"]["io.podman.annotations.seccomp"] = options.seccomp_profile;
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
  if (!NameFitsPath(spec.name)) return fall_back("a container name that is not podman's", false);
  absl::StatusOr<PodmanApi::Response> created =
      api.Post(absl::StrCat(kApi, "/containers/create"), BuildCreateSpec(options_, info, spec));
  if (!created.ok()) return failed(created.status());
  absl::StatusOr<json> body = codemode::ParseUntrustedJson(created->body, "podman's answer");
  const std::optional<std::string> id = body.ok() ? codemode::StringField(*body, "Id") : std::nullopt;
  if (created->status != 201 || !id.has_value()) {
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
  return *id;
}

namespace {

// Why podman's answer to removing `name` is not a success; empty when it is one: a report
// of `name` without an error, or none at all (with `ignore`, podman's answer when the
// container was gone already, as the CLI's --ignore).
std::string RemovalFailure(const PodmanApi::Response& r, const std::string& name) {
  if (r.status != 200) return absl::StrCat("HTTP ", r.status, ": ", ErrorText(r));
  absl::StatusOr<json> reports = codemode::ParseUntrustedJson(r.body, "podman's answer");
  if (!reports.ok() || !reports->is_array()) return "an answer that is no list of reports";
  if (reports->empty()) return "";
  for (const json& report : *reports) {
    if (codemode::StringField(report, "RawInput") != name) continue;
    // podman answers an error with HTTP 500 itself; a report with an Err is one too.
    if (report.contains("Err") && !report["Err"].is_null()) return "a report with an error";
    return "";
  }
  return "an answer that does not report it";
}

}  // namespace

std::vector<std::string> PodmanRuntime::RemoveThroughApi(PodmanApi& api,
                                                          const std::vector<std::string>& names) {
  std::vector<char> removed(names.size(), false);  // not vector<bool>: written by several threads
  std::atomic<size_t> next{0};
  // Set once a removal went unanswered: a service stuck on a lock still answers pings and
  // is kept, but the rest of the batch is the CLI's rather than a timeout each.
  std::atomic<bool> unanswered{false};
  auto remove_some = [&] {
    for (size_t i = next++; i < names.size(); i = next++) {
      if (!NameFitsPath(names[i]) || unanswered) continue;  // for the CLI
      // force: running or not; timeout=0: SIGKILL without waiting; ignore: one already
      // gone is no error.
      const std::string path =
          absl::StrCat(kApi, "/containers/", names[i], "?force=true&timeout=0&ignore=true");
      std::string why;
      const absl::Time began = absl::Now();
      // Twice, as the CLI path does: a container whose init was just killed can be between
      // running and stopped for podman ("container state improper"); a second look finds
      // it stopped. A service that did not answer is not asked again.
      for (int attempt = 0; attempt < 2; ++attempt) {
        if (attempt > 0) absl::SleepFor(absl::Milliseconds(100));
        absl::StatusOr<PodmanApi::Response> r = api.Delete(path);
        why = r.ok() ? RemovalFailure(*r, names[i]) : std::string(r.status().message());
        if (absl::IsAborted(r.status())) unanswered = true;
        if (why.empty() || !r.ok()) break;
        spdlog::debug("podman API: removing {} failed ({})", names[i], why);
      }
      if (metrics_) metrics_->ContainerOpDone(Op::kRm, why.empty(), absl::Now() - began);
      removed[i] = why.empty();
      // A service that is down was logged by its supervisor; one that failed is news.
      if (!removed[i]) {
        spdlog::log(api.Ready() ? spdlog::level::warn : spdlog::level::debug,
                    "podman API: removing {} failed ({}); the podman CLI removes it", names[i], why);
      }
    }
  };
  // This thread and up to three of the pool's, over one queue of names.
  removers_.RunAlongside(names.size() > 1 ? std::min(names.size(), kParallelRemovals) - 1 : 0, remove_some);
  std::vector<std::string> left;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!removed[i]) left.push_back(names[i]);
  }
  return left;
}

}  // namespace sandboxd
