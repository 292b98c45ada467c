// SandboxFactory: the one owner of a container's whole life. It starts sandboxes (a
// container whose runner is listening and connected), kills and discards them, and sweeps
// what a previous daemon left; nothing else removes a container or its socket directory.
// It also knows whether containers can start here at all: the runtime probe and the
// daemon's readiness (what health reports) follow from what it sees.
//
//   SandboxFactory factory(options, &runtime, &workers, hooks);
//   absl::StatusOr<Sandbox> sb = factory.Start({limits, isolation}, "session");  // probes first
//   if (!sb.ok()) return sb.status();
//   factory.Kill(sb->name);              // stuck or lost: its processes end, the container goes
//   factory.RemoveSocketDir(sb->name);   // once its session let go of the connection
//   factory.Discard(sb->name);           // both, in the background (a sandbox never handed out)
//
// Every start and probe updates readiness: SERVING after a success, NOT_SERVING with the
// reason after a failure, until a start succeeds again. Hooks are called without the
// factory's lock held. Safe for concurrent use.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "sandboxd/async.h"
#include "sandboxd/container_removals.h"
#include "sandboxd/container_runtime.h"
#include "sandboxd/host_processes.h"
#include "sandboxd/instance_id.h"
#include "sandboxd/limits.h"
#include "sandboxd/runner_connection.h"
#include "sandboxd/uid_pool.h"

namespace sandboxd {

// Labels on every container, so a restarted daemon finds its own (and only its own).
inline constexpr char kInstanceLabel[] = "io.sandboxd.instance";
inline constexpr char kStateDirLabel[] = "io.sandboxd.state-dir";
inline constexpr char kRoleLabel[] = "io.sandboxd.role";
inline constexpr char kUidLabel[] = "io.sandboxd.uid";
inline constexpr char kIsolationLabel[] = "io.sandboxd.isolation";
inline constexpr char kLanguageLabel[] = "io.sandboxd.runtime";

// What a sandbox is started with. Sandboxes with equal configs are interchangeable (the
// warm pool holds those of the default config).
struct SandboxConfig {
  ResolvedLimits limits;
  Isolation isolation = Isolation::kContainer;
  std::string image;  // an image reference; empty: FactoryOptions::image (the default)
  Language language = Language::kPython;

  bool operator==(const SandboxConfig& o) const {
    return limits == o.limits && isolation == o.isolation && image == o.image &&
           language == o.language;
  }
  bool operator!=(const SandboxConfig& o) const { return !(*this == o); }
};

// A started container with its runner connected. `uid` holds the container's user id
// while the sandbox lives (rlimit mode only).
struct Sandbox {
  std::string name;
  std::string id;
  std::unique_ptr<RunnerConnection> conn;
  std::shared_ptr<UidPool::Lease> uid;
};

// Whether sandboxd can start containers right now. It is the health status of
// sandbox.v1.SandboxService: SERVING once a container has started and until a start (or
// the runtime probe) fails; NOT_SERVING with the reason until a start succeeds again.
struct Readiness {
  bool serving = false;
  std::string reason;    // why not serving; empty when serving
  bool checked = false;  // a start (or probe) has been tried since the daemon started
};

struct FactoryOptions {
  std::string state_dir;    // socket directories go under <state_dir>/c
  std::string instance;     // labels and names every container of this daemon
  std::string image;
  std::string runner_path;     // host path of sandbox_runner.pyz
  std::string js_runner_path;  // host path of sandbox_runner.js (empty: no JavaScript)
  std::vector<std::string> container_env;  // KEY=VALUE passed into every container
  absl::Duration runner_start_timeout = absl::Seconds(20);
  // Per-session user ids (uid_pool.h): the rlimit mode's containers' (10000 up, within the
  // 65536 ids of a rootless user's default subordinate range) and a root sandboxd's wasm
  // sessions' (host uids and gids: no host account or group may have one).
  uint32_t session_uid_first = 10000;
  uint32_t session_uid_count = 8192;
  // A container whose removal failed (podman timed out or refused) is removed again after
  // this, then after twice as long each time, up to a minute (RetryRemovals).
  absl::Duration removal_retry = absl::Seconds(1);
};

struct FactoryHooks {
  // After a successful runtime probe (it decides re-attachment), before any container
  // starts, until it returns OK: an error counts as the probe's failure, and the next
  // probe runs it again.
  std::function<absl::Status(const RuntimeInfo&)> on_probed;
  // When readiness changed between serving and not serving.
  std::function<void()> on_readiness_changed;
};

class SandboxFactory {
 public:
  SandboxFactory(FactoryOptions options, ContainerRuntime* runtime, WorkerPool* workers,
                 FactoryHooks hooks);
  SandboxFactory(const SandboxFactory&) = delete;
  SandboxFactory& operator=(const SandboxFactory&) = delete;

  // Probes the runtime unless an earlier probe succeeded; UNAVAILABLE with the reason.
  // A probe succeeds once the runtime answered and the on_probed hook returned OK.
  absl::Status EnsureProbed();
  // Probes if needed, starts a container of `config` labelled with `role`, waits for its
  // runner and connects. Records the outcome in readiness.
  absl::StatusOr<Sandbox> Start(const SandboxConfig& config, const std::string& role);
  // Ends the sandbox's processes now (NoteProcesses) and removes the container and its
  // socket directory on a worker thread (with the others queued meanwhile: one removal at a
  // time, of all of them).
  void Discard(const std::string& name);
  // Ends the sandbox's processes now and removes the container on a worker thread, as
  // Discard does, and leaves its socket directory, which the session's runner connection
  // still names (RemoveSocketDir once the session is gone).
  void Kill(const std::string& name);
  // Notes which host process holds the sandbox's processes together: the init of its
  // runner's pid namespace. Kill, Discard and RemoveNow SIGKILL it before the removal, so
  // the kernel ends all of the sandbox's processes at once and a deleted session's code
  // stops even while its removal waits (podman on a lock, a removal that failed). Start
  // notes its own sandboxes, found from the runner's end of the socket before any code
  // ran (a container's catatonit, a bwrap sandbox's init, under gVisor the gofer, which
  // made the socket on the host); a re-attached one is noted here from its session's
  // record (NotedProcesses, stored). Nothing (nullopt) for a runner in sandboxd's own pid
  // namespace (a plain host process): the removal alone ends it.
  void NoteProcesses(const std::string& name, std::optional<ProcessRef> init);
  std::optional<ProcessRef> NotedProcesses(const std::string& name);
  // Removes the socket directory of a container, on this thread.
  void RemoveSocketDir(const std::string& name);
  // Removes containers and their socket directories now, on this thread.
  void RemoveNow(const std::vector<std::string>& names);
  // The daemon stops: the runtime's calls still under way at `at` end then
  // (ContainerRuntime::CutOffCalls).
  void CutOffRuntimeCalls(absl::Time at) { runtime_->CutOffCalls(at); }
  // Queues again, for the next removal, the containers whose removal failed and whose wait
  // (FactoryOptions::removal_retry) is over. Called now and then (the daemon's reaper, every
  // second); containers still failing when the daemon ends are swept by the next start.
  // The first call after the start's removals were tried removes the strays (Sweep).
  void RetryRemovals();
  // Containers whose last removal failed, waiting to be removed again.
  size_t removals_failing();
  // Containers given to Kill or Discard and not removed yet (queued, under way, failing).
  size_t removals_awaiting();
  // OK when `ready` carries the token the runtime gave `name`'s runner (or none is given);
  // UNAVAILABLE otherwise: something else answered on the runner's socket.
  absl::Status CheckRunnerToken(const std::string& name, const ReadyMessage& ready);
  // What the runtime knows of a container (why it died).
  absl::StatusOr<ContainerStatus> Inspect(const std::string& name) {
    return runtime_->Inspect(name);
  }
  // The containers a previous run of this daemon left (labelled with its instance).
  absl::StatusOr<std::vector<ContainerSummary>> ListLeftOver();
  // At start, after re-attaching: removes every container of `left_over` and every socket
  // directory whose name is not in `kept` (the containers in the background, as Discard),
  // and, once those removals have been tried (RetryRemovals), the containers of this
  // daemon the runtime lost track of (RemoveStrays).
  void Sweep(const std::vector<ContainerSummary>& left_over, const std::set<std::string>& kept);

  std::string SocketDir(const std::string& container_name) const;
  // Makes the socket directory read-only for its sandbox (see the .cc for why).
  void SealSocketDir(const std::string& container_name) const;
  // Claims the uid that a re-attached container was started with.
  std::shared_ptr<UidPool::Lease> ClaimUid(uint32_t uid) { return uids_->Claim(uid); }

  // The daemon's start waited `waited` for EnsureProbed, which is still under way: until it
  // answers, the runtime counts as failing (readiness NOT_SERVING; EnsureProbed's other
  // callers answer at once).
  void NoteProbeOverdue(absl::Duration waited);

  Readiness readiness();
  // A probe succeeded and its on_probed hook (the previous run re-attached) returned OK.
  bool probed() {
    codemode::MutexLock lock(&mu_);
    return probed_;
  }
  std::optional<RuntimeInfo> runtime_info();
  std::string runtime_error();  // why the last probe failed; empty after a success
  const FactoryOptions& options() const { return options_; }

 private:
  void NoteStartResult(const absl::Status& status);
  // EnsureProbed's probe and hook, unless another caller's succeeded or failed since
  // `failures_seen`.
  absl::Status ProbeLocked(uint64_t failures_seen) ABSL_EXCLUSIVE_LOCKS_REQUIRED(probe_mu_);
  // Records a failed probe (the runtime's answer, or the on_probed hook's): UNAVAILABLE.
  absl::Status ProbeFailed(absl::string_view why);
  absl::StatusOr<Sandbox> StartContainer(const SandboxConfig& config, const std::string& role);
  // The uid lease of a new sandbox of `isolation`; null when it runs as the image's user.
  absl::StatusOr<std::shared_ptr<UidPool::Lease>> LeaseUid(Isolation isolation);

  const FactoryOptions options_;
  ContainerRuntime* const runtime_;
  WorkerPool* const workers_;
  const FactoryHooks hooks_;
  const std::shared_ptr<UidPool> uids_ =
      UidPool::Create(options_.session_uid_first, options_.session_uid_count);
  // Which of them a thread on the host has, or a host account or group (a wasm session's
  // uid is a host uid).
  ThreadIds thread_ids_{options_.session_uid_first, options_.session_uid_count};
  NamedIds named_ids_{HostNamesId, absl::Minutes(5)};

  codemode::Mutex probe_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // held through a probe and its hook
  std::string described_runtime_ ABSL_GUARDED_BY(probe_mu_);  // the runtime's line logged last
  codemode::Mutex mu_;
  std::optional<RuntimeInfo> runtime_info_ ABSL_GUARDED_BY(mu_);
  bool probed_ ABSL_GUARDED_BY(mu_) = false;  // a probe succeeded and its hook returned
  uint64_t probe_failures_ ABSL_GUARDED_BY(mu_) = 0;  // a count, not a time: clocks step
  std::string runtime_error_ ABSL_GUARDED_BY(mu_);
  Readiness readiness_ ABSL_GUARDED_BY(mu_) = {false, "no container has been started yet", false};
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);  // container names

  // SIGKILLs the noted init of each of `names` and forgets it.
  void EndProcesses(const std::vector<std::string>& names);
  // The init process of each sandbox started or re-attached and not yet given up.
  std::map<std::string, ProcessRef> inits_ ABSL_GUARDED_BY(mu_);
  // Containers that Kill and Discard gave up, removed in the background.
  std::atomic<bool> strays_due_{false};  // set by Sweep, cleared by RetryRemovals
  const std::shared_ptr<ContainerRemovals> removals_ =
      ContainerRemovals::Create(runtime_, workers_, options_.removal_retry);
};

}  // namespace sandboxd
