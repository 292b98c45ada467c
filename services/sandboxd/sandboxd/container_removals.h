// ContainerRemovals: the containers of ended sessions, removed in the background.
//
// One removal runs at a time (on a worker) and takes every container queued while the one
// before ran, up to kMaxBatch: a burst of deletions costs a few `podman rm` starts, not one
// each. What the runtime says it could not remove (only those: not what was named beside
// them) waits FactoryOptions::removal_retry, then twice as long each time up to a minute,
// and goes back in the queue when RetryDue finds its time has come. A container's socket
// directory, when it has one, is removed after its first attempt. Until its removal
// succeeds a container may still run: awaiting() counts them, failing() those whose
// removal failed.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "sandboxd/async.h"
#include "sandboxd/container_runtime.h"

namespace sandboxd {

class ContainerRemovals : public std::enable_shared_from_this<ContainerRemovals> {
 public:
  // The queue's task holds it (shared), not its owner, which may go before `workers` do;
  // `runtime` must outlive `workers`.
  static std::shared_ptr<ContainerRemovals> Create(ContainerRuntime* runtime, WorkerPool* workers,
                                                   absl::Duration first_retry);

  // Queues `name`, and its socket directory to remove after it (empty: none). A name
  // already given and not removed yet is not queued again unless it brings a socket
  // directory (a session killed twice: its kill timer, then the end of its connection).
  void Add(const std::string& name, std::string socket_dir);
  // Queues again the failed removals whose wait is over.
  void RetryDue();
  size_t failing();
  size_t awaiting();

  static constexpr size_t kMaxBatch = 64;  // containers one `podman rm` takes

 private:
  struct Removal {
    std::string name;
    std::string socket_dir;  // removed after the container's first attempt; empty: none
    int failures = 0;        // removals of it that failed so far
    absl::Time retry_at;     // when it goes back in the queue, after a failure
  };
  ContainerRemovals(ContainerRuntime* runtime, WorkerPool* workers, absl::Duration first_retry)
      : runtime_(runtime), workers_(workers), first_retry_(first_retry) {}
  // True when no RemoveQueued is posted or runs: the caller posts one (Post), once it
  // holds no lock.
  bool StartRemovingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Post();
  void RemoveQueued();
  // Logs that `r`'s removal failed for `why`, and sets its next wait.
  void NoteFailure(Removal& r, const absl::Status& why);

  ContainerRuntime* const runtime_;
  WorkerPool* const workers_;
  const absl::Duration first_retry_;
  codemode::Mutex mu_;
  std::vector<Removal> queued_ ABSL_GUARDED_BY(mu_);
  std::vector<Removal> failed_ ABSL_GUARDED_BY(mu_);  // until their retry_at
  std::set<std::string> pending_ ABSL_GUARDED_BY(mu_);  // every name given, not removed yet
  bool removing_ ABSL_GUARDED_BY(mu_) = false;       // a RemoveQueued is posted or runs
};

}  // namespace sandboxd
