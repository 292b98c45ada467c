// PodmanRuntime::RemoveStrays: containers of this daemon that podman lost while its OCI
// runtime still holds them.
//
// podman removes a container by the state it recorded. A container whose creation was cut
// short (sandboxd, or podman's service with it, killed between the runtime's `create` and
// podman recording it) is gone from podman's records and from `podman ps --all`, while the
// runtime still holds it: its conmon and `runc init` stay, for good. Every container
// carries its labels as annotations too (BuildRunArgv, the API's create), which the
// runtimes show in `list --format=json` (runc, crun and runsc alike).
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"
#include "base/log_text.h"
#include "nlohmann/json.hpp"
#include "sandboxd/log.h"
#include "sandboxd/podman_runtime.h"

namespace sandboxd {
namespace {

using json = nlohmann::json;
using Op = SandboxdMetrics::ContainerOp;

// A container id as podman makes them: 64 lower-case hex digits.
bool IsContainerId(const std::string& id) {
  return id.size() == 64 && std::all_of(id.begin(), id.end(), [](char c) {
           return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

// The ids in an OCI runtime's `list --format=json` whose annotation key is value.
std::vector<std::string> Annotated(const std::string& listed, const std::string& key, const std::string& value) {
  std::vector<std::string> ids;
  const json j = json::parse(listed, nullptr, false);
  if (!j.is_array()) return ids;  // runc prints `null` when it holds none
  for (const json& c : j) {
    const json* id = c.is_object() && c.contains("id") ? &c["id"] : nullptr;
    const json* annotations = c.is_object() && c.contains("annotations") ? &c["annotations"] : nullptr;
    if (!id || !id->is_string() || !annotations || !annotations->is_object()) continue;
    auto it = annotations->find(key);
    if (it != annotations->end() && it->is_string() && *it == value && IsContainerId(*id)) {
      ids.push_back(id->get<std::string>());
    }
  }
  return ids;
}

// How often a runtime's list is tried before this sweep gives up on that runtime.
constexpr int kListAttempts = 3;

}  // namespace

int PodmanRuntime::RemoveStrays(const std::string& label_key, const std::string& label_value) {
  RuntimeInfo info;
  {
    codemode::MutexLock lock(&mu_);
    if (!probed_) return 0;
    info = info_;
  }
  // The runtimes podman starts this daemon's containers with, checked at the probe.
  std::set<std::string> runtimes;
  if (!info.oci_runtime.empty()) runtimes.insert(info.oci_runtime);
  if (options_.gvisor) runtimes.insert(options_.runsc);
  SubprocessOptions opts;
  opts.env = env_;
  opts.timeout = options_.command_timeout;
  opts.cutoff = &cutoff_;
  // Run as podman runs them: a rootless podman's runtimes keep their state in its user
  // namespace.
  const auto runtime_argv = [&](const std::string& runtime, std::vector<std::string> args) {
    args.insert(args.begin(), runtime);
    if (!info.rootless) return args;
    args.insert(args.begin(), "unshare");
    return Argv(args);
  };
  if (!CheckPrograms().ok()) return 0;  // logged; the next sweep looks again
  int removed = 0;
  for (const std::string& runtime : runtimes) {
    // Listed before podman's own list: a container podman makes meanwhile is in both.
    // runc 1.1 fails a list when a container it walks past is removed meanwhile (another
    // daemon's session ending): that race clears on a second look.
    absl::StatusOr<SubprocessResult> listed;
    for (int attempt = 0; attempt < kListAttempts; ++attempt) {
      listed = RunSubprocess(runtime_argv(runtime, {"list", "--format=json"}), opts);
      if (!listed.ok() || listed->exit_code == 0 || listed->timed_out) break;  // the race fails fast
    }
    if (!listed.ok() || listed->exit_code != 0) {
      spdlog::warn("cannot list the containers {} holds: {}", codemode::LogText(runtime),
                   codemode::LogLongText(listed.ok() ? listed->stderr_text : listed.status().message()));
      continue;
    }
    const std::vector<std::string> ours = Annotated(listed->stdout_text, label_key, label_value);
    if (ours.empty()) continue;
    absl::StatusOr<std::string> known = Podman(Op::kPs, {"ps", "--all", "--no-trunc", "--quiet"});
    if (!known.ok()) {
      spdlog::warn("cannot tell the containers podman lost: {}", codemode::LogLongText(known.status().message()));
      return removed;
    }
    const std::set<std::string> podmans = absl::StrSplit(*known, '\n', absl::SkipWhitespace());
    for (const std::string& id : ours) {
      if (podmans.count(id)) continue;
      absl::StatusOr<SubprocessResult> deleted = RunSubprocess(runtime_argv(runtime, {"delete", "--force", id}), opts);
      if (deleted.ok() && deleted->exit_code == 0) {
        spdlog::info("removed container {}, which podman had lost and {} still held", id,
                     codemode::LogText(runtime));
        ++removed;
      } else {
        spdlog::warn("cannot remove container {}, which podman lost, from {}: {}", id, codemode::LogText(runtime),
                     codemode::LogLongText(deleted.ok() ? deleted->stderr_text : deleted.status().message()));
      }
    }
  }
  return removed;
}

}  // namespace sandboxd
