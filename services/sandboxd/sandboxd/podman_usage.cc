// PodmanRuntime::Usage: what a container uses, for GetSessionStats (resource_usage.h reads
// the files). The rest of PodmanRuntime is in podman_runtime.cc.
#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "sandboxd/podman_runtime.h"

namespace sandboxd {
namespace {

constexpr char kProc[] = "/proc";
constexpr char kCgroupRoot[] = "/sys/fs/cgroup";
// Containers whose init pid is remembered, at most; past it the memo starts again (a
// container removed other than by Remove, by hand, leaves an entry behind).
constexpr size_t kMaxRemembered = 4096;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

absl::StatusOr<PodmanRuntime::InitProcess> PodmanRuntime::InitProcessOf(const std::string& name) {
  {
    codemode::MutexLock lock(&init_mu_);
    auto it = init_processes_.find(name);
    if (it != init_processes_.end()) {
      absl::StatusOr<uint64_t> start = ProcessStartTime(kProc, it->second.pid);
      if (start.ok() && *start == it->second.starttime) return it->second;
      init_processes_.erase(it);  // gone, or its pid is another process's now
    }
  }
  // Once per container: its pid does not change while it runs.
  absl::StatusOr<std::string> out =
      Podman(SandboxdMetrics::ContainerOp::kInspect,
             {"container", "inspect", "--format", "{{.State.Pid}}", name});
  if (!out.ok()) return out.status();
  InitProcess p;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*out), &p.pid) || p.pid <= 0) {
    return absl::UnavailableError(absl::StrCat("container ", name, " is not running"));
  }
  absl::StatusOr<uint64_t> start = ProcessStartTime(kProc, p.pid);
  if (!start.ok()) return absl::UnavailableError(absl::StrCat("container ", name, " is not running"));
  p.starttime = *start;
  codemode::MutexLock lock(&init_mu_);
  if (init_processes_.size() >= kMaxRemembered) init_processes_.clear();
  init_processes_[name] = p;
  return p;
}

void PodmanRuntime::ForgetInitProcesses(const std::vector<std::string>& names) {
  codemode::MutexLock lock(&init_mu_);
  for (const std::string& n : names) init_processes_.erase(n);
}

absl::StatusOr<ResourceUsage> PodmanRuntime::Usage(const std::string& name, Isolation isolation) {
  bool cgroup_limits;
  {
    codemode::MutexLock lock(&mu_);
    if (!probed_) return absl::UnavailableError("the container runtime has not been probed yet");
    cgroup_limits = info_.cgroup_limits;
  }
  absl::StatusOr<InitProcess> init = InitProcessOf(name);
  if (!init.ok()) return init.status();
  const std::string pid_dir = absl::StrCat(kProc, "/", init->pid);
  // With cgroup limits the container has cgroups of its own (under gVisor: the runsc
  // sandbox's, holding the Sentry and gofer too). Without (rootless on cgroup v1) it
  // shares the user's cgroup with everything else of theirs: only its process tree is its.
  absl::StatusOr<ResourceUsage> usage =
      cgroup_limits ? ReadCgroupUsage(kCgroupRoot, ReadText(pid_dir + "/cgroup"))
                    : ReadProcTreeUsage(kProc, init->pid);
  if (!usage.ok()) return usage.status();
  if (isolation == Isolation::kGvisor) {
    usage->source = "gvisor";  // its /workspace tmpfs is inside the Sentry: not visible here
  } else {
    ReadWorkspaceUsage(pid_dir + "/root/workspace", &*usage);
  }
  // What the session costs the host: its processes' PSS and conmon's, which serves this
  // container alone from outside its cgroup.
  std::vector<pid_t> outside;
  if (std::optional<pid_t> conmon = ParentNamed(kProc, init->pid, "conmon")) {
    outside.push_back(*conmon);
  }
  AddProcessPss(kProc, outside, &*usage);
  if (isolation == Isolation::kGvisor) {
    // The Sentry keeps the sandbox's memory in a memory file that its processes map only in
    // part (a 100 MiB bytearray showed as 55 MiB of Pss): the cgroup's pages stand in.
    const uint64_t pages =
        usage->memory_bytes - std::min(usage->memory_bytes, usage->kernel_memory_bytes);
    usage->pss_bytes = pages + SumProportionalResident(kProc, outside).value_or(0);
  }
  // The pid may have become another process's while we read: then what we read is not
  // this container's.
  absl::StatusOr<uint64_t> start = ProcessStartTime(kProc, init->pid);
  if (!start.ok() || *start != init->starttime) {
    ForgetInitProcesses({name});
    return absl::UnavailableError(absl::StrCat("container ", name, " stopped while it was read"));
  }
  return usage;
}

}  // namespace sandboxd
