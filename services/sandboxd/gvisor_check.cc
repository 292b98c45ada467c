#include "gvisor_check.h"

#include <string>

#include "base/mutex.h"
#include "spdlog/spdlog.h"

// Whether the start still waits for the verdict; guarded so that a verdict and the end of
// the wait that cross are told apart.
struct GvisorStartCheck::Shared {
  codemode::Mutex mu;
  bool deferred ABSL_GUARDED_BY(mu) = false;
  bool decided ABSL_GUARDED_BY(mu) = false;
};

GvisorStartCheck::GvisorStartCheck(const sandboxd::ManagerOptions& options,
                                   sandboxd::PodmanRuntime& runtime)
    : options_(options), shared_(std::make_shared<Shared>()) {
  if (!options.isolation.Allows(sandboxd::Isolation::kGvisor)) return;
  check_ = std::async(std::launch::async, [&runtime, shared = shared_] {
    absl::Status verdict = runtime.CheckGvisor();
    codemode::MutexLock lock(&shared->mu);
    shared->decided = true;
    // CANCELLED: the daemon is stopping, which says nothing of gVisor.
    if (shared->deferred && !verdict.ok() && !absl::IsCancelled(verdict)) {
      spdlog::error("gVisor check, deferred at the start, failed: {}; gVisor sessions cannot start",
                    std::string(verdict.message()));
    }
    return verdict;
  });
}

absl::Status GvisorStartCheck::Await(const sandboxd::StartWait& wait) {
  if (!check_.valid()) return absl::OkStatus();
  const bool answered = wait.For([this](absl::Duration d) {
    return check_.wait_for(absl::ToChronoMilliseconds(d)) == std::future_status::ready;
  });
  if (!answered) {
    codemode::MutexLock lock(&shared_->mu);
    if (!shared_->decided) {
      shared_->deferred = true;
      if (!wait.stop_requested()) {
        spdlog::warn("gVisor check deferred: podman has not answered in {}",
                     absl::FormatDuration(wait.Waited()));
      }
      return absl::OkStatus();
    }
  }
  absl::Status verdict = check_.get();
  if (absl::IsCancelled(verdict)) return absl::OkStatus();  // a stop: the caller sees it
  if (!verdict.ok()) return verdict;
  std::string warning =
      sandboxd::GvisorPidBudgetWarning(options_.default_limits.pids, options_.max_sessions);
  if (!warning.empty()) spdlog::warn("{}", warning);
  return absl::OkStatus();
}
