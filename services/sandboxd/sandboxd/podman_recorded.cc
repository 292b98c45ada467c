// PodmanRuntime::RecordedRuntimesRefused: containers of an earlier run are removed with the
// OCI runtime podman recorded for them, not the one this run checked.
//
// podman kills and removes a container with the runtime it was made with (`--runtime`, a
// path here), whatever the call that removes it names. A container this run started has
// the runtime CheckPrograms checks before every call; one of an earlier run (re-attached,
// or left over) may have another (an earlier --oci_runtime, or runsc with gVisor no longer
// allowed), whose directory may since have been opened to others. Each is checked as the
// current one is before podman is asked to remove it.
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "sandboxd/podman_runtime.h"
#include "sandboxd/trusted_files.h"

namespace sandboxd {

RemovalFailures PodmanRuntime::RecordedRuntimesRefused(const std::vector<std::string>& names) {
  std::vector<std::string> earlier;
  {
    codemode::MutexLock lock(&started_mu_);
    for (const std::string& name : names) {
      if (earlier_.count(name)) earlier.push_back(name);
    }
  }
  if (earlier.empty()) return {};
  std::vector<std::string> args = {"container", "inspect", "--format", "{{.Name}}\t{{.OCIRuntime}}"};
  args.insert(args.end(), earlier.begin(), earlier.end());
  absl::StatusOr<SubprocessResult> r = RunPodman(SandboxdMetrics::ContainerOp::kInspect, Argv(args));
  std::map<std::string, std::string> recorded;  // name -> runtime
  if (r.ok() && !r->timed_out && !r->truncated) {
    for (absl::string_view line : absl::StrSplit(r->stdout_text, '\n', absl::SkipEmpty())) {
      std::vector<std::string> fields = absl::StrSplit(line, absl::MaxSplits('\t', 1));
      if (fields.size() == 2) recorded[fields[0]] = fields[1];
    }
  }
  // podman inspects what exists and fails naming each that does not, a line each ("no such
  // container <name>"): those are gone (the removal ignores them). Nothing is known of any
  // other name it printed no line for.
  const std::string said = r.ok() && !r->timed_out && !r->truncated && r->exit_code != 0
                               ? r->stderr_text + "\n"
                               : std::string();
  const auto gone = [&said](const std::string& name) {
    return absl::StrContains(said, absl::StrCat("no such container ", name, "\n"));
  };
  const std::string why = !r.ok()          ? std::string(r.status().message())
                          : r->timed_out    ? std::string("podman container inspect timed out")
                          : r->truncated    ? std::string("podman container inspect printed too much")
                                            : PodmanErrorSummary(r->stderr_text);
  const absl::Status unknown =
      absl::UnavailableError(absl::StrCat("cannot tell the OCI runtime podman recorded for it: ", why));
  RemovalFailures refused;
  for (const std::string& name : earlier) {
    auto it = recorded.find(name);
    if (it == recorded.end()) {
      if (!gone(name)) refused.emplace(name, unknown);
      continue;
    }
    absl::StatusOr<std::string> checked = ResolveOthersCannotChange(it->second, "the OCI runtime podman recorded");
    if (!checked.ok()) refused.emplace(name, absl::FailedPreconditionError(checked.status().message()));
  }
  return refused;
}

}  // namespace sandboxd
