#include "sandboxd/warm_pool.h"

#include <string>
#include <vector>

#include "base/thread.h"
#include "base/log_text.h"
#include "sandboxd/log.h"

namespace sandboxd {

WarmPool::WarmPool(SandboxFactory* factory, size_t target, SandboxConfig config)
    : factory_(factory), target_(target), config_(std::move(config)) {}

void WarmPool::Start() { thread_ = codemode::StartThread("warm pool", [this] { Loop(); }); }

void WarmPool::SetServing(bool serving) {
  codemode::MutexLock lock(&mu_);
  serving_ = serving;
}

size_t WarmPool::ready() {
  codemode::MutexLock lock(&mu_);
  return ready_.size();
}

std::optional<Sandbox> WarmPool::Take() {
  for (;;) {
    std::optional<Sandbox> sb;
    {
      codemode::MutexLock lock(&mu_);
      if (ready_.empty()) return std::nullopt;
      sb = std::move(ready_.front());
      ready_.pop_front();
    }
    if (sb->conn->PingSync(absl::Seconds(1)).ok()) return sb;
    spdlog::warn("pooled container {} is dead; discarding it", sb->name);
    factory_->Discard(sb->name);
  }
}

void WarmPool::Loop() {
  absl::Duration backoff = absl::Seconds(1);
  for (;;) {
    bool probe_only = false;
    {
      codemode::MutexLock lock(&mu_);
      // Also wakes when containers stop starting, to find out when they work again.
      auto work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || ready_.size() < target_ || !serving_;
      };
      mu_.Await(absl::Condition(&work));
      if (stopping_) return;
      probe_only = ready_.size() >= target_;
    }
    absl::StatusOr<Sandbox> sb = factory_->Start(config_, probe_only ? "probe" : "pool");
    codemode::MutexLock lock(&mu_);
    if (!sb.ok()) {
      spdlog::debug("warm pool: cannot start a container: {} (retrying in {})",
                    codemode::LogLongText(sb.status().message()), absl::FormatDuration(backoff));
      auto stop = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&stop), backoff);
      backoff = std::min(backoff * 2, absl::Seconds(15));
      continue;
    }
    backoff = absl::Seconds(1);
    if (stopping_ || probe_only) {
      factory_->Discard(sb->name);
      if (stopping_) return;
      continue;
    }
    ready_.push_back(std::move(*sb));
  }
}

void WarmPool::Stop() {
  std::deque<Sandbox> left;
  {
    codemode::MutexLock lock(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    left.swap(ready_);
  }
  if (thread_.joinable()) thread_.join();
  std::vector<std::string> names;
  for (auto& sb : left) {
    names.push_back(sb.name);
    sb.conn->Close();
  }
  // At once and in one podman call: the daemon is shutting down.
  factory_->RemoveNow(names);
}

}  // namespace sandboxd
