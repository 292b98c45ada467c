#include "upstream/stalled_event_watchdog.h"

#include <utility>

#include "base/thread.h"

namespace gateway {

StalledEventWatchdog::StalledEventWatchdog(absl::Duration timeout,
                                           std::function<void()> on_stalled)
    : timeout_(timeout), on_stalled_(std::move(on_stalled)) {}

StalledEventWatchdog::~StalledEventWatchdog() {
  {
    codemode::MutexLock lock(&mu_);
    stopping_ = true;  // the unlock wakes Run()
  }
  if (thread_.joinable()) thread_.join();
}

void StalledEventWatchdog::Received(bool partial) {
  {
    codemode::MutexLock lock(&mu_);
    partial_ = partial;
    ++chunks_;
    last_ = std::chrono::steady_clock::now();
  }
  // Most streams never hold a partial event for long; those that never do cost no thread.
  if (partial && timeout_ > absl::ZeroDuration() && !thread_.joinable()) {
    thread_ = codemode::StartThread("upstream stall watch", [this] { Run(); });
  }
}

bool StalledEventWatchdog::fired() const {
  codemode::MutexLock lock(&mu_);
  return fired_;
}

void StalledEventWatchdog::Run() {
  {
    codemode::MutexLock lock(&mu_);
    while (true) {
      const uint64_t seen = chunks_;
      auto changed = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || chunks_ != seen;
      };
      if (stopping_) return;
      if (!partial_) {  // between events: wait for the next chunk, however long
        mu_.Await(absl::Condition(&changed));
        continue;
      }
      const auto idle = std::chrono::steady_clock::now() - last_;
      if (mu_.AwaitWithTimeout(absl::Condition(&changed),
                               timeout_ - absl::FromChrono(idle))) {
        continue;
      }
      fired_ = true;  // partial, and no byte for timeout_
      break;
    }
  }
  on_stalled_();
}

}  // namespace gateway
