// PodmanRuntime: ContainerRuntime on the podman CLI (rootful or rootless).
//
// Every container gets the hardening of DESIGN.md: no network, read-only root, all
// capabilities dropped, no-new-privileges, user 65534, an init process, explicit
// ulimits (this machine cannot raise RLIMIT_NOFILE/NPROC to podman's defaults), size-capped
// tmpfs for /tmp and /workspace, and a clean environment. Where cgroups cannot be used
// (rootless podman on cgroup v1) memory and process limits fall back to rlimits.
//
//   PodmanRuntime rt({.oci_runtime = "auto", .image = "localhost/sandboxd-python:bookworm"});
//   absl::StatusOr<RuntimeInfo> info = rt.Probe();
//   absl::StatusOr<std::string> id = rt.Start(spec);
#pragma once

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "sandboxd/container_runtime.h"

namespace sandboxd {

struct PodmanOptions {
  std::string podman = "podman";
  // "auto" picks runc on cgroup v1 (crun fails there in hybrid mode), else podman's
  // default; any other value is passed as --runtime.
  std::string oci_runtime = "auto";
  // Image the runner starts in; Probe() checks that it exists.
  std::string image;
  // Extra global podman flags (for example --root/--runroot for an isolated store).
  std::vector<std::string> global_args;
};

// Where the runner lives inside every container.
inline constexpr char kRunnerMountPath[] = "/opt/sandboxd/sandbox_runner.pyz";
inline constexpr char kSocketMountDir[] = "/run/sandboxd";

// The environment podman runs with: only what podman itself needs (PATH, HOME, the user's
// XDG directories, DBUS_SESSION_BUS_ADDRESS for the systemd cgroup manager, CONTAINERS_*
// configuration, locale), taken from `environ` (KEY=VALUE entries). Everything else of
// the daemon's environment (credentials, proxy URLs, tokens) stays out of podman and so
// out of every container. Pure; unit-tested.
std::vector<std::string> PodmanEnvironment(const std::vector<std::string>& environ);

// The argv of `podman run` for `spec` (pure; unit-tested). `info` decides cgroup vs
// rlimit enforcement and the OCI runtime.
std::vector<std::string> BuildRunArgv(const PodmanOptions& options, const RuntimeInfo& info,
                                      const ContainerSpec& spec);

class PodmanRuntime : public ContainerRuntime {
 public:
  explicit PodmanRuntime(PodmanOptions options);

  absl::StatusOr<RuntimeInfo> Probe() override;
  absl::StatusOr<std::string> Start(const ContainerSpec& spec) override;
  absl::Status Remove(const std::vector<std::string>& names) override;
  absl::StatusOr<ContainerStatus> Inspect(const std::string& name) override;
  absl::StatusOr<std::vector<ContainerSummary>> List(const std::string& label_key,
                                                     const std::string& label_value) override;

 private:
  // Runs podman with global args + `args`; UNAVAILABLE when podman cannot be run or
  // exits non-zero (with its stderr).
  absl::StatusOr<std::string> Podman(std::vector<std::string> args, bool with_runtime = false);

  const PodmanOptions options_;
  const std::vector<std::string> env_;  // PodmanEnvironment() of ours, taken at construction
  codemode::Mutex mu_;
  RuntimeInfo info_ ABSL_GUARDED_BY(mu_);
  bool probed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace sandboxd
