// codemode::Notification: absl::Notification's interface on codemode::Mutex.
//
// Why not absl::Notification: Debian's Abseil times its waits on CLOCK_REALTIME, so a step
// of the wall clock (NTP, a VM resumed) ends a timed wait early or stretches it by the
// step; codemode::Mutex waits on the monotonic clock (base/mutex.h). TSan sees it too.
//
//   codemode::Notification done;
//   worker.Post([&] { ...; done.Notify(); });
//   if (!done.WaitForNotificationWithTimeout(absl::Seconds(5))) { ... }
#pragma once

#include <atomic>

#include "absl/time/time.h"
#include "base/mutex.h"

namespace codemode {

class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

  // Wakes every waiter, now and later. A second call changes nothing.
  void Notify() {
    MutexLock lock(&mu_);
    notified_.store(true, std::memory_order_release);
  }
  bool HasBeenNotified() const { return notified_.load(std::memory_order_acquire); }
  void WaitForNotification() const {
    MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &Notification::HasBeenNotified));
  }
  // Whether it was notified within `timeout` (on the monotonic clock).
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(this, &Notification::HasBeenNotified), timeout);
  }

 private:
  mutable Mutex mu_;
  std::atomic<bool> notified_{false};
};

}  // namespace codemode
