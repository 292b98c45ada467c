// ProcessRuntime: a ContainerRuntime for unit tests that runs the sandbox runner as a
// plain host subprocess (no isolation, no podman):
//
//   python3 -I -u <spec.runner_path> --socket <spec.socket_dir>/runner.sock
//   node --disable-proto=delete <spec.runner_path> --socket ... --workspace <socket_dir>
//                                                       (spec.language kJavaScript)
//
// Processes are tracked by container name and outlive any SessionManager that started
// them (share one ProcessRuntime between managers to test re-attachment); the
// destructor kills whatever is still running.
//
// The container id reported by Start() and List() is the container name.
//
// Fault injection: SetProbeFailure / SetStartFailure / SetRemoveFailure / SetListFailure make
// Probe / Start / Remove / List return UNAVAILABLE with the given message until cleared
// (std::nullopt).
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "sandboxd/container_runtime.h"

namespace sandboxd::testing {

class ProcessRuntime : public ContainerRuntime {
 public:
  // `python` is looked up in PATH.
  explicit ProcessRuntime(std::string python = "python3");
  ~ProcessRuntime() override;
  ProcessRuntime(const ProcessRuntime&) = delete;
  ProcessRuntime& operator=(const ProcessRuntime&) = delete;

  // ContainerRuntime. Probe reports cgroup_limits=true (unless overridden) and
  // oci_runtime "process".
  absl::StatusOr<RuntimeInfo> Probe() override;
  absl::StatusOr<std::string> Start(const ContainerSpec& spec) override;
  // SIGKILLs the process group and reaps the process; unknown names are fine.
  RemovalFailures Remove(const std::vector<std::string>& names) override;
  // A process killed by signal N reports exit code 128+N (SIGKILL: 137).
  absl::StatusOr<ContainerStatus> Inspect(const std::string& name) override;
  // Every image offers what SetImageOffers said ({"python3"}) unless SetImageAbsent named it.
  absl::StatusOr<std::vector<std::string>> ImageOffers(const std::string& reference) override;
  absl::StatusOr<std::vector<ContainerSummary>> List(const std::string& label_key,
                                                     const std::string& label_value) override;
  // The real procfs reading (ReadProcTreeUsage) over the runner process's tree, so unit
  // tests see what rlimit mode reports; no workspace (there is no tmpfs). UNAVAILABLE for
  // an unknown or exited process.
  absl::StatusOr<ResourceUsage> Usage(const std::string& name, Isolation isolation) override;

  // ---- fault injection and test helpers ----
  void SetProbeFailure(std::optional<std::string> message);
  void SetStartFailure(std::optional<std::string> message);
  // While set, Remove removes nothing and fails each with the message (a podman rm that
  // times out).
  void SetRemoveFailure(std::optional<std::string> message);
  void SetListFailure(std::optional<std::string> message);
  void SetImageAbsent(const std::string& reference);
  // Every image inspection fails with this (podman timed out, say); nullopt: they work.
  void SetImageInspectFailure(std::optional<std::string> why);
  void SetImageOffers(std::vector<std::string> offers);
  // While set, ImageOffers waits until it is cleared (an inspect that takes its time).
  void SetImageInspectHeld(bool held);
  int image_inspections();  // ImageOffers calls answered so far
  int inspections_held();   // ImageOffers calls waiting on SetImageInspectHeld now
  // While set, Start waits until it is cleared (a podman run that takes its time).
  void SetStartHeld(bool held);
  int starts_held();  // Start calls waiting on SetStartHeld now
  // Lets `n` Start calls through while starts are held (one waiting now goes first).
  void LetHeldStartsThrough(int n);
  // While set, List waits until it is cleared (a podman ps that takes its time).
  void SetListHeld(bool held);
  int lists_held();  // List calls waiting on SetListHeld now
  // The image of every Start() so far, in order.
  std::vector<std::string> started_images();
  // What Probe() reports for cgroup_limits (default true).
  void SetCgroupLimits(bool cgroup_limits);

  // Sends `sig` to the process (not its group) without forgetting it, so Inspect() later
  // reports the death (exists, not running, exit code 128+sig).
  absl::Status Kill(const std::string& name, int sig);

  // Pid of a tracked process; nullopt for unknown names.
  std::optional<pid_t> Pid(const std::string& name);
  // Names of the tracked processes (running or exited, not removed).
  std::vector<std::string> Names();
  int start_calls();
  int probe_calls();
  // Forgets the calls so far (for tests that count calls after the manager's start-up probe).
  void ResetCounters();

 private:
  struct Proc {
    pid_t pid = -1;
    bool exited = false;
    int exit_code = 0;
    std::map<std::string, std::string> labels;
  };
  // The runner's command line and environment for `spec` (Python or Node.js).
  absl::Status Command(const ContainerSpec& spec, std::vector<std::string>* args,
                       std::vector<std::string>* env);
  // Reaps `p` when it has exited (non-blocking).
  static void Refresh(Proc& p);

  const std::string python_;
  codemode::Mutex mu_;
  std::map<std::string, Proc> procs_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> probe_failure_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> start_failure_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> remove_failure_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> list_failure_ ABSL_GUARDED_BY(mu_);
  bool cgroup_limits_ ABSL_GUARDED_BY(mu_) = true;
  int start_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int probe_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::set<std::string> absent_images_ ABSL_GUARDED_BY(mu_);
  std::optional<std::string> inspect_failure_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> offers_ ABSL_GUARDED_BY(mu_) = {"python3"};
  bool inspect_held_ ABSL_GUARDED_BY(mu_) = false;
  int inspections_held_ ABSL_GUARDED_BY(mu_) = 0;
  bool start_held_ ABSL_GUARDED_BY(mu_) = false;
  int starts_held_ ABSL_GUARDED_BY(mu_) = 0;
  bool list_held_ ABSL_GUARDED_BY(mu_) = false;
  int lists_held_ ABSL_GUARDED_BY(mu_) = 0;
  int let_through_ ABSL_GUARDED_BY(mu_) = 0;
  int image_inspections_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> started_images_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandboxd::testing
