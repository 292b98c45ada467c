// ContainerRuntime: the seam between session policy and the thing that runs containers.
// PodmanRuntime (podman_runtime.h) is the production implementation; tests use
// ProcessRuntime (runs the runner as a plain host process, no isolation) and fakes. A
// Kubernetes-pod backend would implement the same interface.
//
// A container started from a ContainerSpec runs the runner, which listens on
// `<spec.socket_dir>/runner.sock`; the caller connects there.
//
// Implementations are safe for concurrent use.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "sandboxd/isolation.h"
#include "sandboxd/language.h"
#include "sandboxd/limits.h"
#include "sandboxd/resource_usage.h"

namespace sandboxd {

struct ContainerSpec {
  std::string name;         // unique; also the key of the socket directory
  std::string image;
  ResolvedLimits limits;
  std::string socket_dir;   // host directory the runner creates runner.sock in
  // What the container runs: the runner of `language`, from `runner_path` on the host
  // (sandbox_runner.pyz or sandbox_runner.js).
  Language language = Language::kPython;
  std::string runner_path;
  std::map<std::string, std::string> labels;
  std::vector<std::string> env;  // KEY=VALUE, the container's whole environment
  uint32_t uid = 65534;          // the user the runner runs as (group 65534)
  Isolation isolation = Isolation::kContainer;
};

struct ContainerStatus {
  bool exists = false;
  bool running = false;
  bool oom_killed = false;
  int exit_code = 0;
  std::string state;  // backend's word for it ("running", "exited", ...)
  // What the process last wrote to stderr before it ended, where the backend keeps it
  // (the wasm tier: a fatal V8 or Node error); empty otherwise.
  std::string last_words;
};

struct ContainerSummary {
  std::string id;
  std::string name;
  bool running = false;
  std::map<std::string, std::string> labels;
};

// One layer between sandboxed code and the host (sandbox.v1.Layer).
struct IsolationLayer {
  std::string name;
  bool in_force = false;
  std::string detail;
};

// What the backend can enforce on this machine.
struct RuntimeInfo {
  std::string version;      // e.g. "podman 4.3.1"
  // podman: the path of the program every container runs under (podman's --runtime),
  // checked as podman's own (ResolveOthersCannotChange); else the backend's name.
  std::string oci_runtime;  // e.g. "/usr/bin/runc"
  bool rootless = false;
  std::string cgroup_version;  // "v1", "v2" or "" when not applicable
  // True when memory/pids/cpu limits go through cgroups; false means rlimit fallback
  // (RLIMIT_DATA for memory, RLIMIT_NPROC for processes, no CPU quota).
  bool cgroup_limits = true;
  // RLIMIT_NPROC counts every process of a host uid, across all containers that share it.
  // In cgroup mode each container's pids cgroup is the per-session limit, and nproc is set
  // to this ceiling (the kernel's pid_max, or our own hard limit if lower) so that no
  // session can exhaust it for the others. 0: unknown.
  uint64_t nproc_ceiling = 0;
  // When gVisor is in use: `runsc --version`'s first line and the platform it runs on.
  std::string gvisor_version;
  std::string gvisor_platform;
  // When the wasm tier is in use: "node v26.10.0, pyodide 314.0.7", and its layers.
  std::string wasm_version;
  std::vector<IsolationLayer> wasm_layers;
  std::vector<std::string> notes;
};

// The containers a ContainerRuntime::Remove could not remove, each with why.
using RemovalFailures = std::map<std::string, absl::Status>;

class ContainerRuntime {
 public:
  ContainerRuntime() = default;
  ContainerRuntime(const ContainerRuntime&) = delete;
  ContainerRuntime& operator=(const ContainerRuntime&) = delete;
  virtual ~ContainerRuntime() = default;

  // Checks that containers can be started (binary present, image present). UNAVAILABLE
  // with the reason otherwise. Cheap enough to call again after a failure.
  virtual absl::StatusOr<RuntimeInfo> Probe() = 0;

  // Starts a detached container; returns its id.
  virtual absl::StatusOr<std::string> Start(const ContainerSpec& spec) = 0;

  // Force-removes containers by name (one that does not exist is removed already) and
  // says which it could not remove, each with why: empty when all are gone. A failure is
  // one container's own, so that a caller tries again only those.
  virtual RemovalFailures Remove(const std::vector<std::string>& names) = 0;

  virtual absl::StatusOr<ContainerStatus> Inspect(const std::string& name) = 0;

  // What an image offers (its io.sandboxd.offers label, split; empty when unlabelled).
  // NOT_FOUND when the image is not present.
  virtual absl::StatusOr<std::vector<std::string>> ImageOffers(const std::string& reference) = 0;

  // All containers (running or not) carrying label key=value.
  virtual absl::StatusOr<std::vector<ContainerSummary>> List(const std::string& label_key,
                                                             const std::string& label_value) = 0;

  // Containers carrying label key=value that the backend's records lost while what lies
  // under it still holds them (processes, mounts), removed there: how many. Called once
  // after the start's sweep, while the daemon may be making containers: one the backend is
  // making or removing must not be taken for lost. 0 where nothing lies under the backend.
  virtual int RemoveStrays(const std::string& label_key, const std::string& label_value) {
    (void)label_key;
    (void)label_value;
    return 0;
  }

  // The token the runner of `name` must show in its `ready` frame; empty when the runtime
  // gives none (a container's runner is the only thing that can answer on its socket).
  virtual std::string RunnerToken(const std::string& name) {
    (void)name;
    return "";
  }

  // What container `name` (started with `isolation`) uses now, for GetSessionStats. It is
  // asked while the session's code runs, so it must not wait on the container, and it is
  // asked often, so it should not start a process each time. UNIMPLEMENTED where the
  // backend cannot tell; UNAVAILABLE when the container is not running.
  virtual absl::StatusOr<ResourceUsage> Usage(const std::string& name, Isolation isolation) {
    (void)name;
    (void)isolation;
    return absl::UnimplementedError("this container runtime does not report resource usage");
  }

  // The daemon is stopping: a call still waiting on the backend (a hung podman) at `at`
  // ends then with UNAVAILABLE, and calls made later (the stop's own clean-up) end a few
  // seconds after it.
  // What such a call leaves behind is swept by the next start.
  virtual void CutOffCalls(absl::Time at) { (void)at; }
  // The daemon stops before it served, with nothing of its own to clean up: a call still
  // waiting on the backend ends now, and a later one is not made (UNAVAILABLE at once).
  virtual void EndCalls() { CutOffCalls(absl::Now()); }
  // Whether CutOffCalls or EndCalls was called: a failure after it may be the stop's own
  // doing, and says nothing of the backend.
  virtual bool calls_cut() { return false; }
};

}  // namespace sandboxd
