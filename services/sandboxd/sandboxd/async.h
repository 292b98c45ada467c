// Small threading utilities owned by the daemon: a timer queue for timeouts and a worker
// pool for slow work (podman calls) that must never run on a gRPC or socket-reader thread.
//
//   TimerQueue timers;
//   TimerQueue::Id id = timers.Schedule(absl::Milliseconds(500), [] { ... });
//   timers.Cancel(id);
//
//   WorkerPool pool(2);
//   pool.Post([] { runtime->Remove({name}); });
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "base/mutex.h"
#include "base/thread_pool.h"
#include "absl/time/time.h"

namespace sandboxd {

// Runs callbacks at (or shortly after) their deadline on one internal thread. Callbacks
// must be quick; they may call Schedule/Cancel. Safe for concurrent use.
class TimerQueue {
 public:
  using Id = uint64_t;
  TimerQueue();
  ~TimerQueue();  // drops pending timers, joins the thread
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  Id Schedule(absl::Duration delay, std::function<void()> fn);
  // Returns false when the timer already ran (or is running) or never existed.
  bool Cancel(Id id);
  // How often the thread has woken from a wait (for tests).
  uint64_t wakeups() const;

 private:
  void Loop();

  mutable codemode::Mutex mu_;
  uint64_t wakeups_ ABSL_GUARDED_BY(mu_) = 0;
  std::multimap<absl::Time, std::pair<Id, std::function<void()>>> timers_ ABSL_GUARDED_BY(mu_);
  Id next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// At most `threads` workers (codemode::ThreadPool) running posted tasks in FIFO order.
// Stop() (and the destructor) runs what is already queued, then joins; an owner whose
// tasks use its other members calls Stop() before those members go. Safe for concurrent
// use.
class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // After Stop() a task is dropped with a warning: only a daemon that is ending posts
  // then, and what such a task would tidy (a record, a directory) is found by the next
  // start's recovery.
  void Post(std::function<void()> fn);
  void Stop() { pool_.Stop(); }

 private:
  codemode::ThreadPool pool_;
};

// Milliseconds since the Unix epoch; a seam so session expiry can be tested.
class Clock {
 public:
  Clock() = default;
  Clock(const Clock&) = delete;
  Clock& operator=(const Clock&) = delete;
  virtual ~Clock() = default;
  virtual int64_t NowMs() = 0;
};

class RealClock : public Clock {
 public:
  int64_t NowMs() override { return absl::ToUnixMillis(absl::Now()); }
};

}  // namespace sandboxd
