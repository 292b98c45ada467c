// PodmanRuntime's start-up check of gVisor (CheckGvisor) and the warning on the host's pids
// it may take. The rest of PodmanRuntime is in podman_runtime.cc.
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "sandboxd/podman_runtime.h"
#include "sandboxd/subprocess.h"
#include "spdlog/spdlog.h"

namespace sandboxd {
namespace {
using Op = SandboxdMetrics::ContainerOp;
}  // namespace

absl::StatusOr<std::string> PodmanRuntime::GvisorVersion() {
  if (absl::Status programs = CheckPrograms(); !programs.ok()) return programs;
  SubprocessOptions opts;
  opts.env = env_;
  opts.cutoff = &cutoff_;
  absl::StatusOr<SubprocessResult> r = RunSubprocess({options_.runsc, "--version"}, opts);
  std::string why;
  if (!r.ok()) {
    why = std::string(r.status().message());
  } else if (r->timed_out || r->exit_code != 0) {
    why = absl::StrCat("exit ", r->exit_code, ": ", PodmanErrorSummary(r->stderr_text));
  } else {
    return std::string(absl::StripAsciiWhitespace(r->stdout_text.substr(0, r->stdout_text.find('\n'))));
  }
  return absl::UnavailableError(absl::StrCat(
      "gVisor: cannot run ", options_.runsc, " (", why,
      "); install it (scripts/setup.sh installs Debian's runsc) or name it with --runsc"));
}

absl::Status PodmanRuntime::TryPythonContainer(const RuntimeInfo& info, Isolation isolation) {
  std::vector<std::string> args = RuntimeArgs(options_, info, isolation);
  // runc refuses podman's default rlimits (the host's) without CAP_SYS_RESOURCE.
  args.insert(args.end(), {"run", "--rm", "--network", "none", "--pull", "never",
                           "--log-driver", "none", "--user", "65534:65534",
                           "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
                           "--label", "io.sandboxd.role=check"});
  if (!options_.check_name.empty()) args.insert(args.end(), {"--name", options_.check_name, "--replace"});
  args.insert(args.end(), {options_.image, "python3", "-c", "pass"});
  // A podman run under runsc, cut by a stop, gets the grace to remove its sandbox.
  absl::StatusOr<SubprocessResult> r = RunPodman(
      Op::kRun, Argv(args), isolation == Isolation::kGvisor ? kRunscCutGrace : absl::ZeroDuration());
  if (!r.ok()) return r.status();
  if (r->timed_out || r->exit_code != 0) {
    return absl::UnavailableError(absl::StrCat("exit ", r->exit_code, ": ", PodmanErrorSummary(r->stderr_text)));
  }
  return absl::OkStatus();
}

std::string GvisorPidBudgetWarning(uint32_t pids, uint32_t max_sessions, uint64_t pid_max) {
  if (pid_max == 0) {
    std::ifstream in("/proc/sys/kernel/pid_max");
    if (!(in >> pid_max)) return "";
  }
  const uint64_t budget = GvisorHostTasks(pids) * max_sessions;
  if (budget <= pid_max) return "";
  return absl::StrCat(
      "gVisor: ", max_sessions, " sessions of ", pids, " processes may use up to ", budget,
      " host tasks between them (", GvisorHostTasks(pids), " each: the Sentry and its ptrace "
      "stubs), more than kernel.pid_max ", pid_max, "; fork bombs in many sessions at once "
      "could exhaust the host's pids. Lower --max_sessions or --pids, or raise kernel.pid_max");
}

absl::Status PodmanRuntime::CheckGvisor() {
  std::string deferred;
  absl::Status verdict = GvisorVerdict(&deferred);
  // Commands cut by a stop say nothing of gVisor.
  if (cutoff_.cut()) return absl::CancelledError("gVisor check: sandboxd is stopping");
  if (!deferred.empty()) spdlog::warn("gVisor check deferred: {}", deferred);
  return verdict;
}

absl::Status PodmanRuntime::GvisorVerdict(std::string* deferred) {
  absl::StatusOr<std::string> version = GvisorVersion();
  if (!version.ok()) return version.status();
  absl::StatusOr<RuntimeInfo> info = Probe();
  if (!info.ok()) {
    // podman or the image is missing: not gVisor's doing. The daemon starts NOT_SERVING
    // and says why (GetInfo, health), as in container mode.
    *deferred = std::string(info.status().message());
    return absl::OkStatus();
  }
  if (!info->cgroup_limits) {
    // runsc itself runs rootless here with ignore-cgroups (checked by hand), but then
    // nothing bounds a session's memory: the rlimit fallback's RLIMIT_DATA is applied
    // inside gVisor's kernel, which does not enforce it on mmap.
    return absl::FailedPreconditionError(
        "gVisor needs cgroup limits, and this podman cannot set them (rootless on cgroup "
        "v1): gVisor's kernel does not enforce the RLIMIT_DATA fallback, so nothing would "
        "bound a session's memory. Run sandboxd as root, or rootless on cgroup v2 with "
        "delegated controllers, or use --isolation=container");
  }
  absl::Status gvisor = TryPythonContainer(*info, Isolation::kGvisor);
  if (gvisor.ok() || cutoff_.cut()) return gvisor;
  // When no container starts at all, the fault is not gVisor's either.
  if (!TryPythonContainer(*info, Isolation::kContainer).ok()) {
    *deferred = absl::StrCat("no container starts here (", gvisor.message(), ")");
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat(
      "gVisor: a container starts under ", info->oci_runtime.empty() ? "podman's runtime" : info->oci_runtime,
      " but not under ", options_.runsc, " (platform ", options_.gvisor_platform, ") here: ",
      gvisor.message()));
}

}  // namespace sandboxd
