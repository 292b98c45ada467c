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
// Await* re-check their condition whenever the mutex is released by another thread, as
// absl::Mutex does; state a condition reads must only change under the mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"  // absl::Condition only
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace codemode {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    const bool wake = waiters_ > 0;
    mu_.unlock();
    if (wake) changed_.notify_all();
  }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  // For the analysis only (std::mutex cannot tell who holds it).
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  // Blocks until `cond` holds; the mutex is held on entry and on return.
  void Await(const absl::Condition& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    WakeOthers();
    ++waiters_;
    changed_.wait(lock, [&] { return cond.Eval(); });
    --waiters_;
    lock.release();
  }
  // As Await, giving up at `deadline`; returns whether `cond` holds.
  bool AwaitWithDeadline(const absl::Condition& cond, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    WakeOthers();
    ++waiters_;
    const bool held = changed_.wait_until(lock, absl::ToChronoTime(deadline),
                                          [&] { return cond.Eval(); });
    --waiters_;
    lock.release();
    return held;
  }
  bool AwaitWithTimeout(const absl::Condition& cond, absl::Duration timeout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    return AwaitWithDeadline(cond, absl::Now() + timeout);
  }

 private:
  // Waiting releases the mutex too: whatever this thread changed before it may be what
  // another waiter awaits.
  void WakeOthers() {
    if (waiters_ > 0) changed_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable changed_;  // signalled on Unlock while someone awaits
  int waiters_ = 0;                  // guarded by mu_
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
