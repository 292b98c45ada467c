// Small threading utilities owned by the daemon: a timer queue for timeouts and a worker
// pool for slow work (podman calls) that must never run on a gRPC or socket-reader thread.
//
//   TimerQueue timers;
//   TimerQueue::Id id = timers.Schedule(absl::Milliseconds(500), [] { ... });
//   timers.Cancel(id);
//
//   WorkerPool pool(2);
//   pool.Post([] { runtime->Remove({name}); });
//
//   StartWait wait(absl::Seconds(15), [&] { return shutdown.Pending(); });
//   bool done = wait.For([&](absl::Duration d) { return note.WaitForNotificationWithTimeout(d); });
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "base/deadline.h"
#include "base/mutex.h"
#include "base/thread_pool.h"
#include "absl/time/time.h"

namespace sandboxd {

// Runs callbacks at (or shortly after) their deadline on one internal thread. Callbacks
// must be quick; they may call Schedule/Cancel. Safe for concurrent use. Deadlines are on
// the monotonic clock: a step of the wall clock (NTP, a VM resumed) neither fires an
// execution's timeout early nor holds it back.
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
  std::multimap<std::chrono::steady_clock::time_point, std::pair<Id, std::function<void()>>> timers_
      ABSL_GUARDED_BY(mu_);
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

// How long the daemon's start waits for work that may hang (a podman that does not answer):
// until one deadline, which every wait of the start shares (--start_runtime_wait after the
// start began), or until a stop is requested, whichever comes first. A wait that begins
// after the deadline still gives its work kLeast, so that one hung check does not make the
// next one, which podman may answer at once, count as unanswered. The work itself goes on;
// what gives up is the wait. Measured on the monotonic clock, as TimerQueue's deadlines.
class StartWait {
 public:
  using Instant = std::chrono::steady_clock::time_point;
  static constexpr absl::Duration kLeast = absl::Seconds(1);

  // Every wait shares the deadline `budget` from now. `stop_requested` may be null: only
  // the deadline ends a wait.
  explicit StartWait(absl::Duration budget, std::function<bool()> stop_requested = nullptr)
      : began_(std::chrono::steady_clock::now()),
        until_(codemode::SteadyDeadline(budget)),
        stop_requested_(std::move(stop_requested)) {}

  // Calls `done` with the longest it may wait (100 ms at most) until it returns true (then
  // true), or until the deadline (or kLeast from now, if later) passes or a stop is
  // requested (then false).
  bool For(const std::function<bool(absl::Duration)>& done) const;
  // The same for a wait of its own: `limit` from now, not the shared deadline.
  bool Within(absl::Duration limit, const std::function<bool(absl::Duration)>& done) const;
  bool stop_requested() const { return stop_requested_ && stop_requested_(); }
  // How long since the start began waiting, in tenths of a second: what a log line says
  // was waited (each wait's kLeast included).
  absl::Duration Waited() const {
    return absl::Trunc(absl::FromChrono(std::chrono::steady_clock::now() - began_), absl::Milliseconds(100));
  }

 private:
  bool Until(Instant until, const std::function<bool(absl::Duration)>& done) const;

  const Instant began_;
  const Instant until_;
  const std::function<bool()> stop_requested_;
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
