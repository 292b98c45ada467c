// ThreadPool: the one owner of the services' short-lived threads (LevelDB's
// Env::Schedule seam). Schedule(fn) runs `fn` on a parked worker when one waits, else on a
// new thread, up to `max_threads`; past that the task waits in the queue or is refused,
// as the owner needs. A worker with nothing to do parks while fewer than `max_idle` are
// parked (and while a bound shared with other pools has room), for at most
// `idle_timeout`, then ends; ended threads are joined by the next
// Schedule and by Stop(). Stop() (and the destructor) runs what is queued, then joins
// every thread: nothing of a task, its thread-local destructors included (OpenSSL's),
// runs after it returns, so a pool declared after the members its tasks use is joined
// before they go. A thread is never detached, and never joins itself: Stop() from one of
// the pool's own tasks is a bug and aborts.
//
// Each task runs contained (RunContained: an exception is logged with the pool's name and
// ends that task only), on a thread named after the pool (StartThread).
//
//   codemode::ThreadPoolOptions options;
//   options.name = "tool call";
//   options.max_idle = 1;
//   codemode::ThreadPool pool(options);
//   absl::Status s = pool.Schedule([this, call] { Answer(call); });   // refused: s says why
//   pool.Stop();   // the owner's destructor, before the members the tasks use
#pragma once

#include <atomic>
#include <cstddef>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace codemode {

// A bound on the workers parked in several pools together (ThreadPoolOptions::parked):
// pools that each may keep a worker for their next task, but not all at once (a server's
// sessions, say). Thread-safe.
class ParkedThreads {
 public:
  explicit ParkedThreads(size_t max) : max_(max) {}
  // Room for one more parked worker (then taken), or none.
  bool TryPark();
  void Unpark();
  size_t parked() const { return parked_.load(std::memory_order_relaxed); }

 private:
  const size_t max_;
  std::atomic<size_t> parked_{0};
};

struct ThreadPoolOptions {
  std::string name;  // the threads' name (its first 15 bytes) and the logs'
  // Threads alive at once (running a task or parked).
  size_t max_threads = std::numeric_limits<size_t>::max();
  // Workers kept parked for the next task; 0: each thread ends with its task.
  size_t max_idle = 0;
  // A parked worker ends after this long without a task.
  absl::Duration idle_timeout = absl::InfiniteDuration();
  // When set, a worker parks only while this has room too (and gives it back when it
  // takes a task or ends).
  std::shared_ptr<ParkedThreads> parked;
  // At max_threads, with none parked: the task waits for a worker (true) or Schedule
  // returns RESOURCE_EXHAUSTED (false).
  bool queue_when_full = true;
  // Added to each worker's nice value as it starts (LowerThreadPriority): bulk work that
  // must give way to requests when the CPU is short. 0 leaves it.
  int nice = 0;
};

class ThreadPool {
 public:
  explicit ThreadPool(ThreadPoolOptions options);
  ~ThreadPool() { Stop(); }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Runs `fn` on a worker. RESOURCE_EXHAUSTED when the pool is full and does not queue, or
  // no thread can be started (the task then never runs); FAILED_PRECONDITION once Stop()
  // has begun and no worker is left to run it (a task scheduled by a task still runs).
  absl::Status Schedule(std::function<void()> fn) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs `fn` on this thread and at once on up to `helpers` of the pool's workers (each copy
  // takes its share of a common queue, say), and returns when every copy has ended: `fn`
  // may use the caller's frame. A copy the pool refuses (no thread to be had) is not run,
  // so fewer run at once. Returns how many ran beside this thread's. Not from one of the
  // pool's own tasks: a queued copy could wait for the thread that waits for it.
  size_t RunAlongside(size_t helpers, const std::function<void()>& fn) ABSL_LOCKS_EXCLUDED(mu_);

  // Runs what is queued, then joins every thread; later tasks are refused. Idempotent.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

  // Threads alive (running a task or parked), and those parked.
  size_t threads() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t idle() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Work() ABSL_LOCKS_EXCLUDED(mu_);
  // Joins the threads of the workers that left their loop.
  void JoinEnded() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasTaskOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !tasks_.empty() || stopping_;
  }

  const ThreadPoolOptions options_;
  mutable Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
  // Workers in their loop, by id (a worker moves its own thread to ended_ as it leaves),
  // and those that left it, not yet joined.
  std::map<std::thread::id, std::thread> workers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> ended_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace codemode
