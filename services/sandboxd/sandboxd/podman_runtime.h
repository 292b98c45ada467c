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

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "base/thread_pool.h"
#include "sandboxd/container_runtime.h"
#include "sandboxd/metrics.h"
#include "sandboxd/podman_api.h"
#include "sandboxd/subprocess.h"

namespace sandboxd {

// The OCI runtime program podman runs every container with: `flag` as a path, a name
// looked up in PATH, or "auto": runc on a cgroup v1 or hybrid host (crun 1.8 fails there),
// else crun when PATH has it, else runc. Checked as ResolveOthersCannotChange checks (its
// error otherwise). sandboxd gives podman this path on every call (`--runtime <path>`), so
// podman's configuration (containers.conf, CONTAINERS_CONF) chooses no program to run.
absl::StatusOr<std::string> ResolveOciRuntime(const std::string& flag);

struct PodmanOptions {
  std::string podman = "podman";
  // The OCI runtime, as ResolveOciRuntime takes it ("auto", a name in PATH, a path): its
  // checked program is given as `--runtime <path>` to every podman call.
  std::string oci_runtime = "auto";
  // Image the runner starts in; Probe() checks that it exists.
  std::string image;
  // Extra global podman flags (for example --root/--runroot for an isolated store).
  std::vector<std::string> global_args;
  // gVisor (Isolation::kGvisor): whether any session may use it (Probe() then checks
  // runsc), the runsc binary, and the platform that intercepts system calls ("ptrace"
  // works everywhere, "kvm" needs /dev/kvm).
  bool gvisor = false;
  std::string runsc = "/usr/bin/runsc";
  std::string gvisor_platform = "ptrace";
  // The seccomp profile every container runs under (seccomp_profile.h); empty: podman's
  // default, which lets the code create user namespaces.
  std::string seccomp_profile;
  // Where sandboxd keeps podman's REST service (`podman system service`, PodmanApi) and
  // starts container-isolation sandboxes through it (~40 ms less per start than `podman
  // run`); empty: the podman CLI for everything. Other commands use the CLI either way.
  std::string api_socket_dir;
  // How long a request to that service may go without a whole answer (PodmanApiOptions).
  absl::Duration api_request_timeout = absl::Seconds(20);
  // How long a podman CLI command may run before it is killed (--podman_timeout).
  absl::Duration command_timeout = absl::Seconds(60);
  // The gVisor check's container name, one per daemon (per state directory): the check
  // replaces one an earlier start left (a daemon killed, or a podman that hung past
  // kRunscCutGrace at a stop). Empty: podman names it.
  std::string check_name;
};

// The runsc flags a gVisor session runs with (podman passes each as --runtime-flag):
// no network stack of gVisor's own (the container has no network anyway, and runsc
// refuses to start in the host's network namespace without it), unix sockets created
// inside the sandbox reachable from the host (the runner's socket; the sandbox still
// cannot connect to host sockets), and the platform.
std::vector<std::string> GvisorRuntimeFlags(const PodmanOptions& options);

// A gVisor session's cgroups hold its user-space kernel too (see LimitArgs). Memory gets
// kGvisorMemoryBaseBytes on top of the session's limit for the Sentry and gofer (an idle
// sandbox uses ~15 MiB). The host pids cgroup gets GvisorHostTasks(pids): the Sentry's
// threads and, on the ptrace platform, a stub process per sandboxed process with a stub
// thread for every Sentry thread that ran it. Measured on 2 cores: ~40 host tasks idle,
// ~8 per sandboxed process of sleeping children, a peak of 950-980 for the hostile
// suite's fork bomb at pids 64 (~15 per process). Where the ceiling is reached the
// Sentry cannot start a stub and panics ("error initializing first thread"): the
// session is lost, so the ceiling keeps a margin over that peak.
// How long past a stop's cut a `podman run` under runsc may still take to end by itself
// (the start's check takes about 0.6 s, a session's start about as long): one killed while
// runsc creates its sandbox leaves that sandbox, its gofer and conmon running, unknown to
// podman, whose `rm` then does not reach them.
inline constexpr absl::Duration kRunscCutGrace = absl::Seconds(5);

inline constexpr uint64_t kGvisorMemoryBaseBytes = 32ull << 20;
inline constexpr uint64_t kGvisorHostTasksBase = 64;
inline constexpr uint64_t kGvisorHostTasksPerProcess = 24;
inline uint64_t GvisorHostTasks(uint32_t pids) {
  return kGvisorHostTasksBase + kGvisorHostTasksPerProcess * uint64_t{pids};
}

// Empty, or a warning that `max_sessions` gVisor sessions of `pids` processes could use
// more host tasks between them than the kernel has pids (`pid_max`, read from
// /proc/sys/kernel/pid_max when 0), so a few fork bombs at once could starve the host.
std::string GvisorPidBudgetWarning(uint32_t pids, uint32_t max_sessions, uint64_t pid_max = 0);

// Where the runner lives inside every container.
inline constexpr char kRunnerMountPath[] = "/opt/sandboxd/sandbox_runner.pyz";
inline constexpr char kJsRunnerMountPath[] = "/opt/sandboxd/sandbox_runner.js";
inline const char* RunnerMountPath(Language language) {
  return language == Language::kJavaScript ? kJsRunnerMountPath : kRunnerMountPath;
}
inline constexpr char kSocketMountDir[] = "/run/sandboxd";

// The environment podman runs with: only what podman itself needs (PATH, HOME, the user's
// XDG directories, DBUS_SESSION_BUS_ADDRESS for the systemd cgroup manager, CONTAINERS_*
// configuration, locale), taken from `environ` (KEY=VALUE entries). Everything else of
// the daemon's environment (credentials, proxy URLs, tokens) stays out of podman and so
// out of every container. Pure; unit-tested.
std::vector<std::string> PodmanEnvironment(const std::vector<std::string>& environ);
// `env` with its PATH holding only directories that only root or we could change, reached
// without a symbolic link (CheckParentsOthersCannotSwap): podman looks up helpers there
// (dpkg, slirp4netns, ...) and runs them as its user. What is dropped is logged.
std::vector<std::string> WithPathOthersCannotSwap(std::vector<std::string> env);

// podman's global flags that choose the OCI runtime of a new container (podman records
// it with the container: later commands on it need no flag).
std::vector<std::string> RuntimeArgs(const PodmanOptions& options, const RuntimeInfo& info,
                                     Isolation isolation);

// podman's stderr for an error message a client reads (a proto3 string: valid UTF-8):
// control characters and bytes that are not UTF-8 escaped, at most about 600 bytes.
std::string PodmanErrorSummary(const std::string& err);

// The argv of `podman run` for `spec` (pure; unit-tested). `info` decides cgroup vs
// rlimit enforcement and the OCI runtime.
std::vector<std::string> BuildRunArgv(const PodmanOptions& options, const RuntimeInfo& info,
                                      const ContainerSpec& spec);

// The same container as BuildRunArgv's, as the JSON body of libpod's
// `POST /libpod/containers/create` (a SpecGenerator); for Isolation::kContainer with
// cgroup limits, the only case PodmanRuntime starts through the API. Pure; unit-tested,
// and the OCI configuration podman makes from each is compared by an integration test.
std::string BuildCreateSpec(const PodmanOptions& options, const RuntimeInfo& info,
                            const ContainerSpec& spec);

// What the container runs: the runner of spec.language with its socket (argv after the image).
std::vector<std::string> RunnerCommand(const ContainerSpec& spec);

// The RLIMIT_NPROC of a cgroup-limited container: a ceiling no set of sessions reaches.
uint64_t NprocCeiling(const RuntimeInfo& info, const ResolvedLimits& l);

class PodmanRuntime : public ContainerRuntime {
 public:
  // Each podman command is counted and timed in `metrics` (by subcommand and exit status)
  // when given; it must outlive the runtime.
  explicit PodmanRuntime(PodmanOptions options, SandboxdMetrics* metrics = nullptr);

  absl::StatusOr<RuntimeInfo> Probe() override;
  absl::StatusOr<std::string> Start(const ContainerSpec& spec) override;
  RemovalFailures Remove(const std::vector<std::string>& names) override;
  absl::StatusOr<ContainerStatus> Inspect(const std::string& name) override;
  absl::StatusOr<std::vector<std::string>> ImageOffers(const std::string& reference) override;
  // OK when `reference` is in podman's store, NOT_FOUND when podman says it is not, else
  // podman's error.
  absl::Status ImageExists(const std::string& reference);
  absl::StatusOr<std::vector<ContainerSummary>> List(const std::string& label_key,
                                                     const std::string& label_value) override;
  // podman_strays.cc: containers podman no longer lists that its OCI runtime (and runsc,
  // with gVisor in use) still holds, annotated key=value (every label is an annotation
  // too), deleted there: a container whose creation a crash cut short can be running in
  // the runtime (its conmon and `runc init` alive) while podman, going by the state it
  // recorded, removed it without asking the runtime.
  int RemoveStrays(const std::string& label_key, const std::string& label_value) override;
  // podman_usage.cc: from the host cgroup of the container's init process (cgroup mode,
  // and gVisor: the runsc sandbox's cgroup), or /proc over its process tree (rlimit mode);
  // /workspace by statvfs through /proc/<pid>/root (not under gVisor, whose tmpfs lives in
  // the Sentry). One `podman inspect` per container for its init pid, then files only.
  absl::StatusOr<ResourceUsage> Usage(const std::string& name, Isolation isolation) override;
  // Kills the podman commands still running at `at` (and any started after, 5 s after it).
  void CutOffCalls(absl::Time at) override { cutoff_.Cut(at); }
  void EndCalls() override { cutoff_.Close(absl::Now()); }
  bool calls_cut() override { return cutoff_.cut(); }

  // Start-up check of gVisor: runsc runs, and a container of the image that starts
  // under the container runtime also starts under runsc. UNAVAILABLE with the reason
  // (runsc missing, the platform not usable here, ...). When podman, the image or every
  // container start fails, that is not gVisor's fault: OK, and the daemon reports it the
  // way it always does. About a second; call once, before serving. CANCELLED when the
  // daemon's stop cut its commands (CutOffCalls, EndCalls).
  absl::Status CheckGvisor();

  // Whether container-isolation starts go through podman's API service now.
  bool ServesThroughApi() {
    codemode::MutexLock lock(&mu_);
    return api_ && api_->Ready();
  }

 private:
  // CheckGvisor's verdict; a check that says nothing of gVisor sets `*deferred` to why.
  absl::Status GvisorVerdict(std::string* deferred);
  // `runsc --version`'s first line; UNAVAILABLE when runsc cannot be run.
  absl::StatusOr<std::string> GvisorVersion();
  // Every program a podman call may run as this daemon's user, checked before each call
  // (ResolveOthersCannotChange), since a directory on a path may be opened to others while
  // the daemon serves: podman, the OCI runtime and, with gVisor allowed, runsc (podman
  // kills and removes a container with the runtime it was made with). FAILED_PRECONDITION,
  // logged, when another user could change one.
  absl::Status CheckPrograms() const;
  // `podman run --rm <image> python3 -c pass` under `isolation`; UNAVAILABLE with why.
  absl::Status TryPythonContainer(const RuntimeInfo& info, Isolation isolation);

  // Runs podman with global args + `args` (subcommand `op`); UNAVAILABLE when podman cannot
  // be run, exits non-zero (with its stderr; `*exit_code`, when given, is set) or runs past
  // command_timeout or the cutoff (then `*timed_out`, when given, is set).
  absl::StatusOr<std::string> Podman(SandboxdMetrics::ContainerOp op, std::vector<std::string> args,
                                     bool* timed_out = nullptr, int* exit_code = nullptr);
  // podman with the global args and `--runtime <checked OCI runtime>` (unless `args` begin
  // with a --runtime of their own), then `args`.
  std::vector<std::string> Argv(const std::vector<std::string>& args) const;
  // Runs a whole podman argv (`podman run`), counted as `op`; `cut_grace` as in
  // SubprocessOptions.
  absl::StatusOr<SubprocessResult> RunPodman(SandboxdMetrics::ContainerOp op,
                                             const std::vector<std::string>& argv,
                                             absl::Duration cut_grace = absl::ZeroDuration());
  // podman_rest.cc: create and start `spec` through the API service: the container's
  // id, or `fell_back` set when the service did not start it (not running, no whole
  // answer, an HTTP error), after removing what it may have made; the caller then runs
  // the CLI.
  absl::StatusOr<std::string> StartThroughApi(PodmanApi& api, const RuntimeInfo& info,
                                              const ContainerSpec& spec, bool* fell_back);
  // podman_rest.cc: removes `names` through the API service, a few at once; returns those
  // it did not remove (the service failed or did not answer, and once one went unanswered
  // the rest), for the CLI.
  std::vector<std::string> RemoveThroughApi(PodmanApi& api, const std::vector<std::string>& names);
  // Removes `names` with `podman rm`: all in one, once more after 100 ms if that fails,
  // then each on its own if that fails too, to tell which podman cannot remove.
  RemovalFailures RemoveByCli(const std::vector<std::string>& names);

  const PodmanOptions options_;
  SandboxdMetrics* const metrics_;  // may be null
  // ResolveOciRuntime(options_.oci_runtime), at construction: every call's --runtime.
  const absl::StatusOr<std::string> oci_runtime_;
  const std::vector<std::string> env_;  // PodmanEnvironment() of ours, taken at construction
  Cutoff cutoff_;                       // CutOffCalls
  // The init pid of a container (podman's State.Pid) and that process's start time, which
  // tells a reused pid from it. Forgotten by Remove, and whenever the start time differs.
  struct InitProcess {
    pid_t pid = 0;
    uint64_t starttime = 0;
  };
  absl::StatusOr<InitProcess> InitProcessOf(const std::string& name);
  void ForgetInitProcesses(const std::vector<std::string>& names);
  codemode::Mutex init_mu_;
  std::map<std::string, InitProcess> init_processes_ ABSL_GUARDED_BY(init_mu_);
  // podman_recorded.cc: of `names`, those of an earlier run (List() found them, no Start()
  // of this runtime made them: re-attached or left over) whose OCI runtime as podman
  // recorded it, the program podman kills and removes it with, another user could change
  // (ResolveOthersCannotChange), each with why; and those podman could not say, with its
  // error. One `podman container inspect` for them all; none when no name is an earlier
  // run's.
  RemovalFailures RecordedRuntimesRefused(const std::vector<std::string>& names);
  codemode::Mutex started_mu_;
  // Names Start() was asked for (their runtime is the one checked), until removed.
  std::set<std::string> started_ ABSL_GUARDED_BY(started_mu_);
  // Names List() found that Start() did not make, until removed.
  std::set<std::string> earlier_ ABSL_GUARDED_BY(started_mu_);
  codemode::Mutex mu_;
  RuntimeInfo info_ ABSL_GUARDED_BY(mu_);
  bool probed_ ABSL_GUARDED_BY(mu_) = false;
  // Made by the first Probe() that finds cgroup limits, when options_.api_socket_dir is set.
  std::shared_ptr<PodmanApi> api_ ABSL_GUARDED_BY(mu_);
  // Removals of one batch sent at once: podman removes containers in parallel, as the
  // CLI's `podman rm a b c` does, and each takes ~100 ms of wall but ~25 ms of CPU.
  static constexpr size_t kParallelRemovals = 4;
  // RemoveThroughApi's helpers beside its caller; each thread ends with its task.
  codemode::ThreadPool removers_;
};

}  // namespace sandboxd
