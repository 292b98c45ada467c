// ContainerRemovals: background removal of ended sessions' containers. See the header.
#include "sandboxd/container_removals.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "base/log_text.h"
#include "sandboxd/log.h"

namespace sandboxd {

std::shared_ptr<ContainerRemovals> ContainerRemovals::Create(ContainerRuntime* runtime,
                                                             WorkerPool* workers,
                                                             absl::Duration first_retry) {
  return std::shared_ptr<ContainerRemovals>(new ContainerRemovals(runtime, workers, first_retry));
}

void ContainerRemovals::Add(const std::string& name, std::string socket_dir) {
  {
    codemode::MutexLock lock(&mu_);
    if (!pending_.insert(name).second && socket_dir.empty()) return;
    queued_.push_back({name, std::move(socket_dir), 0, absl::InfinitePast()});
    if (!StartRemovingLocked()) return;
  }
  Post();
}

void ContainerRemovals::RetryDue() {
  {
    codemode::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    auto due = std::stable_partition(failed_.begin(), failed_.end(),
                                     [now](const Removal& r) { return r.retry_at > now; });
    if (due == failed_.end()) return;
    queued_.insert(queued_.end(), std::make_move_iterator(due),
                   std::make_move_iterator(failed_.end()));
    failed_.erase(due, failed_.end());
    if (!StartRemovingLocked()) return;
  }
  Post();
}

size_t ContainerRemovals::failing() {
  codemode::MutexLock lock(&mu_);
  return failed_.size();
}

size_t ContainerRemovals::awaiting() {
  codemode::MutexLock lock(&mu_);
  return pending_.size();
}

bool ContainerRemovals::StartRemovingLocked() {
  if (removing_) return false;
  removing_ = true;
  return true;
}

void ContainerRemovals::Post() {
  workers_->Post([self = shared_from_this()] { self->RemoveQueued(); });
}

void ContainerRemovals::RemoveQueued() {
  for (;;) {
    std::vector<Removal> batch;
    {
      codemode::MutexLock lock(&mu_);
      if (queued_.empty()) {
        removing_ = false;
        return;
      }
      // At most kMaxBatch at once: a `podman rm` of them ends well within its timeout.
      const size_t n = std::min(queued_.size(), kMaxBatch);
      batch.assign(std::make_move_iterator(queued_.begin()),
                   std::make_move_iterator(queued_.begin() + n));
      queued_.erase(queued_.begin(), queued_.begin() + n);
    }
    std::vector<std::string> names;
    for (const auto& r : batch) names.push_back(r.name);
    const RemovalFailures failures = runtime_->Remove(names);
    std::vector<Removal> failed;
    for (Removal& r : batch) {
      if (auto it = failures.find(r.name); it != failures.end()) {
        NoteFailure(r, it->second);
        failed.push_back(r);
      } else if (r.failures > 0) {  // its failure was logged as an error: say how it ended
        spdlog::info("container {} removed at attempt {}", r.name, r.failures + 1);
      }
    }
    for (auto& r : batch) {
      std::error_code ec;
      if (!r.socket_dir.empty()) std::filesystem::remove_all(r.socket_dir, ec);
    }
    codemode::MutexLock lock(&mu_);
    for (const Removal& r : batch) pending_.erase(r.name);
    for (Removal& r : failed) {
      pending_.insert(r.name);
      r.socket_dir.clear();  // removed above
      failed_.push_back(std::move(r));
    }
  }
}

void ContainerRemovals::NoteFailure(Removal& r, const absl::Status& s) {
  // 1, 2, 4 ... times the first wait, up to a minute; said once, then at debug level.
  const absl::Duration wait =
      std::min(first_retry_ * (int64_t{1} << std::min(r.failures, 16)), absl::Minutes(1));
  ++r.failures;
  r.retry_at = absl::Now() + wait;
  spdlog::log(r.failures == 1 ? spdlog::level::err : spdlog::level::debug,
              "cannot remove container {} (attempt {}): {}; trying again in {}", r.name,
              r.failures, codemode::LogLongText(s.message()), absl::FormatDuration(wait));
}

}  // namespace sandboxd
