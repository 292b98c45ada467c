// The start's gVisor check (PodmanRuntime::CheckGvisor), when gVisor is allowed: it runs on
// a thread of its own, and the start waits for its verdict until the start's deadline or a
// stop. A failure in time ends the start; a verdict that comes after the start stopped
// waiting ("deferred") is logged, at error level when it is a failure (the daemon serves,
// and gVisor sessions cannot start).
//
//   GvisorStartCheck check(options, *podman);  // destroyed before the runtime
//   if (absl::Status s = check.Await(start_wait); !s.ok()) return Fail(s);
#pragma once

#include <future>
#include <memory>

#include "absl/status/status.h"
#include "sandboxd/async.h"
#include "sandboxd/podman_runtime.h"
#include "sandboxd/session_manager.h"

class GvisorStartCheck {
 public:
  // Starts the check when `options` allow gVisor; `runtime` must outlive this object.
  GvisorStartCheck(const sandboxd::ManagerOptions& options, sandboxd::PodmanRuntime& runtime);
  // Waits for the check's thread: the stop's cutoff ends the podman commands it waits on
  // (its container's within kRunscCutGrace, podman_runtime.h).
  ~GvisorStartCheck() = default;

  // The verdict: OK when gVisor works, is not allowed, or the check was deferred (said in
  // the log); the check's error when gVisor is allowed and does not work here.
  absl::Status Await(const sandboxd::StartWait& wait);

 private:
  struct Shared;
  const sandboxd::ManagerOptions& options_;
  std::shared_ptr<Shared> shared_;
  std::future<absl::Status> check_;
};
