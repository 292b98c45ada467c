// codemode::Mutex: the services' mutex. absl::Mutex's interface and Clang thread-safety
// annotations, built on std::mutex.
//
// Why not absl::Mutex itself: Debian builds Abseil without ThreadSanitizer hooks, so TSan
// cannot see absl::Mutex lock and unlock (they are atomics inside an uninstrumented
// library) and reports every access it guards as a race. std::mutex is pthreads, which
// TSan intercepts. The annotations are absl's (header-only), so `clang -Wthread-safety`
// checks every ABSL_GUARDED_BY exactly as it would with absl::Mutex (docs/testing.md).
//
//   codemode::Mutex mu_;
//   int n_ ABSL_GUARDED_BY(mu_);
//   { codemode::MutexLock lock(&mu_); ++n_; }
//   mu_.Await(absl::Condition(+[](int* n) { return *n > 0; }, &n_));   // with mu_ held
//
// As with absl::Mutex, a condition is evaluated by whichever thread releases the mutex,
// with the mutex held: it must only read state that changes under the mutex.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"  // absl::Condition only
#include "absl/time/time.h"
#include "base/deadline.h"

namespace codemode {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    WakeReadyWaiters();
    mu_.unlock();
  }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // For the analysis only (std::mutex cannot tell who holds it).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // Blocks until `cond` holds; the mutex is held on entry and on return.
  void Await(const absl::Condition& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    AwaitUntil(cond, std::nullopt);
  }
  // As Await, giving up at `deadline` (SteadyTime::max(): never); returns whether `cond`
  // holds. A deadline is on the monotonic clock: an absl::Time from absl::Now() would move
  // with every step of the wall clock.
  bool AwaitWithDeadline(const absl::Condition& cond, SteadyTime deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    if (deadline == SteadyTime::max()) return AwaitUntil(cond, std::nullopt);
    return AwaitUntil(cond, deadline);
  }
  // Timeouts run on the monotonic clock: a wall-clock step neither cuts nor stretches them.
  bool AwaitWithTimeout(const absl::Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitUntil(cond, SteadyDeadline(timeout));
  }

 private:
  // A thread in Await. Lives on that thread's stack; touched only under mu_.
  struct Waiter {
    explicit Waiter(const absl::Condition* c) : cond(c) {}
    const absl::Condition* const cond;
    std::condition_variable cv;
    bool ready = false;
  };

  // As absl::Mutex does: whoever releases the mutex (Unlock, or a thread starting to
  // wait) evaluates the waiters' conditions and wakes only those that now hold, so a
  // thread parked on a condition costs others nothing while it stays false.
  void WakeReadyWaiters() {
    for (Waiter* w : waiters_) {
      if (!w->ready && w->cond->Eval()) {
        w->ready = true;
        w->cv.notify_one();  // under mu_: the waiter cannot leave and free `w` first
      }
    }
  }

  bool AwaitUntil(const absl::Condition& cond,
                  std::optional<std::chrono::steady_clock::time_point> deadline) {
    if (cond.Eval()) return true;
    WakeReadyWaiters();  // this thread may have changed what others await
    Waiter self(&cond);
    waiters_.push_back(&self);
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    bool held;
    while (!(held = cond.Eval())) {  // woken or not, return only once it holds
      self.ready = false;
      if (!deadline) {
        self.cv.wait(lock);
      } else if (self.cv.wait_until(lock, *deadline) == std::cv_status::timeout) {
        held = cond.Eval();
        break;
      }
    }
    waiters_.erase(std::find(waiters_.begin(), waiters_.end(), &self));
    lock.release();
    return held;
  }

  std::mutex mu_;
  std::vector<Waiter*> waiters_;  // guarded by mu_
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace codemode
