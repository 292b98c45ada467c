// WasmRuntime: the ContainerRuntime of --isolation=wasm (docs/wasm-tier.md). A "container"
// is one jailed Node process: its main thread is the runner (sandbox_runner.js), user
// code runs in a worker (Pyodide for Python). No container engine is involved.
//
//   WasmRuntime wasm(options);            // options.layers: "auto" or a list
//   absl::StatusOr<RuntimeInfo> info = wasm.Probe();   // layers, versions, the snapshot
//   absl::StatusOr<std::string> id = wasm.Start(spec); // "wasm-<pid>"
//
// Start binds `<spec.socket_dir>/runner.sock` itself and hands it to the process as fd 3,
// listening, and `egress.sock` as fd 6 (where the egress proxy dials in to the runner's
// relay): the jailed process never creates a socket (its seccomp filter refuses that).
// The process runs detached (its own session, no parent-death signal), so it outlives a
// sandboxd restart like a container; its record (`<records_dir>/<name>.json`: pids, their
// start times, labels) lets the next sandboxd find, inspect and end it. When sandboxd runs
// as root the process runs as spec.uid, a uid of the session's own (SandboxFactory), with
// the group of the same number; never as root, never as 65534.
//
// Files: the session's workspace is `<work_dir>/w/<name>` (the only writable directory,
// owned by the session's uid); under bwrap a tmpfs of spec.limits.workspace_bytes mounted
// there inside the sandbox. A thread of this runtime measures every workspace a few times
// a second and ends a session over its budget (wasm_workspace.h), saying why in Inspect's
// last_words. Another thread holds each session to its limits.cpu_millis (wasm_cpu.h). Python starts from a Pyodide memory snapshot that Probe
// makes once per (Node, Pyodide, runner) in `<work_dir>/snapshots/` and checks by its
// SHA-256 before any session uses it. work_dir must be traversable by spec.uid.
//
// Thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "sandboxd/container_runtime.h"
#include "sandboxd/wasm_cpu.h"
#include "sandboxd/wasm_layers.h"
#include "sandboxd/wasm_snapshot.h"
#include "sandboxd/wasm_workspace.h"

namespace sandboxd {

struct WasmRuntimeOptions : WasmFiles {
  WasmJailFiles jail;
  std::string layers = "auto";  // --wasm_layers
  // --wasm_python_packages: dist-packages/ and certs/, which Python sessions see read-only
  // (scripts/wasm-python-packages.sh builds them).
  std::string python_packages;
  // --wasm_malloc_mmap_threshold: Node's environment is one entry, malloc's tunables with
  // this fixed mmap threshold. glibc's own threshold moves up to the largest block it has
  // freed (the runner frees the snapshot's 30 MiB), after which V8's compile-time blocks
  // (TurboFan's zone segments of 32 KiB) come from malloc's heaps and stay resident when
  // freed; at 32 KiB they are mapped and returned. Node's 64 KiB read and TLS slabs are then
  // mapped and unmapped each time too, which costs egress throughput: 73728 keeps them in
  // the heaps (docs/wasm-tier.md, "Memory").
  uint64_t malloc_mmap_threshold = 32768;
  std::string records_dir;      // sandboxd's own (0700): one JSON record per process
  std::string work_dir;         // workspaces and snapshots (see above)
};

// What the jailed process of one session runs: [bwrap ... --] wasm-jail ... -- node ...
// Exposed for tests and for the snapshot build.
std::vector<std::string> WasmNodeArgv(const WasmRuntimeOptions& options, Language language,
                                      const std::string& workspace, uint64_t heap_mb,
                                      const std::string& snapshot);

class WasmRuntime : public ContainerRuntime {
 public:
  explicit WasmRuntime(WasmRuntimeOptions options);
  ~WasmRuntime() override;

  // Checks the files, the layers this machine applies (UNAVAILABLE naming a demanded layer
  // it lacks) and the snapshot (made when missing; a snapshot whose bytes do not match its
  // SHA-256 is refused, naming the file to delete). RuntimeInfo.wasm_layers says what holds.
  // The first success loads the records of processes a previous sandboxd started and
  // starts the budget thread; later calls return its RuntimeInfo without probing again.
  absl::StatusOr<RuntimeInfo> Probe() override;
  absl::StatusOr<std::string> Start(const ContainerSpec& spec) override;
  // SIGKILL to the process (and, under bwrap, to its pid namespace's init), then the
  // record and the workspace go. Unknown names are fine.
  RemovalFailures Remove(const std::vector<std::string>& names) override;
  // From the record and /proc: running while the pid lives with the recorded start time.
  // An exit code is known only for a process this sandboxd started (-1 otherwise).
  absl::StatusOr<ContainerStatus> Inspect(const std::string& name) override;
  // {"python3", "nodejs"} for every reference: the tier has one runtime, not images.
  absl::StatusOr<std::vector<std::string>> ImageOffers(const std::string& reference) override;
  absl::StatusOr<std::vector<ContainerSummary>> List(const std::string& label_key,
                                                     const std::string& label_value) override;
  // /proc of the process tree (no cgroup; the peak is the sum of each process's peak
  // resident set) and the workspace measured as its budget is (wasm_workspace.h).
  absl::StatusOr<ResourceUsage> Usage(const std::string& name, Isolation isolation) override;
  // The random token this runtime gave the runner of `name` (its record keeps it): the
  // runner shows it in `ready`, which code of the session, able to listen on the runner's
  // inherited socket too, cannot.
  std::string RunnerToken(const std::string& name) override;

 private:
  struct Record {
    std::string name;
    pid_t pid = 0;             // the process sandboxd started (bwrap, or the jail/node)
    uint64_t start_time = 0;   // /proc/<pid>/stat's, against pid reuse
    pid_t init_pid = 0;        // under bwrap: the pid namespace's init (0 otherwise)
    uint64_t init_start_time = 0;
    std::map<std::string, std::string> labels;
    std::string token;
    WasmWorkspaceBudget budget;   // 0s: none (a record of an older sandboxd)
    bool workspace_tmpfs = false;  // the workspace is bwrap's tmpfs, seen in /proc/<init>/root
    uint32_t cpu_millis = 0;       // limits.cpu_millis (0: none, a record of an older sandboxd)
  };
  std::string RecordPath(const std::string& name) const;
  std::string WorkspacePath(const std::string& name) const;
  // Records live in records_; the file is for the next sandboxd.
  absl::Status WriteRecord(const Record& record);
  std::optional<Record> ReadRecordFile(const std::string& path);  // <records_dir>/<name>.json
  void LoadRecords();
  std::optional<Record> FindRecord(const std::string& name);
  bool Alive(pid_t pid, uint64_t start_time);
  // SIGKILL to the sandbox's init and the process (each only while it is the one recorded),
  // then waits for the process to go.
  void EndProcess(const Record& record);
  absl::StatusOr<WasmWorkspaceUse> MeasureWorkspace(const Record& record, uint64_t stop_after_inodes);
  void BudgetLoop();
  void CheckBudgets();
  // Collects the exit of a process this sandboxd started, if it has ended.
  void Reap(pid_t pid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<std::string> EnsureSnapshot(const std::string& node_version);
  // The session's empty workspace, spec.uid's when root (a uid no process runs as:
  // UidsWithProcesses).
  absl::StatusOr<std::string> PrepareWorkspace(const ContainerSpec& spec);
  // What the jail is told for the session of `spec`: the paths Node reads, its workspace,
  // fds, environment and rlimits (`bwrap`: the workspace is bwrap's tmpfs).
  WasmJailRequest JailRequest(const ContainerSpec& spec, const std::string& workspace,
                              const std::string& snapshot, bool bwrap) const;

  const WasmRuntimeOptions options_;
  codemode::Mutex mu_;
  std::optional<RuntimeInfo> probed_ ABSL_GUARDED_BY(mu_);
  std::vector<WasmLayerState> layers_ ABSL_GUARDED_BY(mu_);
  std::string snapshot_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Record> records_ ABSL_GUARDED_BY(mu_);
  // Why the budget thread ended a session, by name, until Remove.
  std::map<std::string, std::string> over_budget_ ABSL_GUARDED_BY(mu_);
  // The budget thread's last measure of each workspace, for Usage.
  std::map<std::string, WasmWorkspaceUse> measured_ ABSL_GUARDED_BY(mu_);
  // Exit statuses of children that ended (waitpid), by pid.
  std::map<pid_t, int> exits_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread budget_thread_;
  // Holds every session to its cpu_millis; made by the first successful Probe.
  std::unique_ptr<WasmCpuLimiter> cpu_ ABSL_GUARDED_BY(mu_);
  // When each workspace is measured next (CheckBudgets, on the budget thread only).
  std::map<std::string, absl::Time> next_walk_;
  // Since when each workspace whose last measures failed has gone unmeasured (budget thread).
  std::map<std::string, absl::Time> unmeasured_since_;
};

}  // namespace sandboxd
