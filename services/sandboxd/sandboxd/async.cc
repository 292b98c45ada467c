#include "sandboxd/async.h"

#include <algorithm>

#include "base/deadline.h"
#include "base/thread.h"

#include <spdlog/spdlog.h>

namespace sandboxd {

namespace {
using Steady = std::chrono::steady_clock;
}  // namespace

TimerQueue::TimerQueue() : thread_(codemode::StartThread("timers", [this] { Loop(); })) {}

TimerQueue::~TimerQueue() {
  {
    codemode::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

TimerQueue::Id TimerQueue::Schedule(absl::Duration delay, std::function<void()> fn) {
  codemode::MutexLock lock(&mu_);
  Id id = next_id_++;
  timers_.emplace(codemode::SteadyDeadline(delay), std::make_pair(id, std::move(fn)));
  return id;
}

uint64_t TimerQueue::wakeups() const {
  codemode::MutexLock lock(&mu_);
  return wakeups_;
}

bool TimerQueue::Cancel(Id id) {
  codemode::MutexLock lock(&mu_);
  for (auto it = timers_.begin(); it != timers_.end(); ++it) {
    if (it->second.first == id) {
      timers_.erase(it);
      return true;
    }
  }
  return false;
}

void TimerQueue::Loop() {
  codemode::MutexLock lock(&mu_);
  while (!stop_) {
    if (timers_.empty()) {
      mu_.Await(absl::Condition(
          +[](TimerQueue* q) ABSL_EXCLUSIVE_LOCKS_REQUIRED(q->mu_) {
            return q->stop_ || !q->timers_.empty();
          },
          this));
      ++wakeups_;
      continue;
    }
    const Steady::time_point due = timers_.begin()->first;
    if (Steady::now() < due) {
      // Wakes early only for a timer due before `due`, or to stop. A later timer or a
      // cancel (every execution schedules its timeout and cancels it) leaves the thread
      // asleep: a cancelled first timer costs one look at `due`, not a wake-up each.
      struct Args {
        TimerQueue* q;
        Steady::time_point due;
      } args{this, due};
      mu_.AwaitWithTimeout(absl::Condition(
                               +[](Args* a) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                 return a->q->stop_ ||
                                        (!a->q->timers_.empty() && a->q->timers_.begin()->first < a->due);
                               },
                               &args),
                           absl::FromChrono(due - Steady::now()));
      ++wakeups_;
      continue;
    }
    std::function<void()> fn = std::move(timers_.begin()->second.second);
    timers_.erase(timers_.begin());
    mu_.Unlock();
    codemode::RunContained("timer", fn);
    mu_.Lock();
  }
}

namespace {

codemode::ThreadPoolOptions WorkerOptions(int threads) {
  codemode::ThreadPoolOptions o;
  o.name = "worker";
  o.max_threads = static_cast<size_t>(threads);
  o.max_idle = static_cast<size_t>(threads);  // a fixed set, started as tasks come
  return o;
}

}  // namespace

WorkerPool::WorkerPool(int threads) : pool_(WorkerOptions(threads)) {}

void WorkerPool::Post(std::function<void()> fn) {
  absl::Status scheduled = pool_.Schedule(std::move(fn));
  if (!scheduled.ok()) {
    spdlog::warn("a cleanup task came after the daemon stopped its workers; the next start recovers it ({})",
                 std::string(scheduled.message()));
  }
}

bool StartWait::For(const std::function<bool(absl::Duration)>& done) const {
  return Until(std::max(until_, codemode::SteadyDeadline(kLeast)), done);
}

bool StartWait::Within(absl::Duration limit, const std::function<bool(absl::Duration)>& done) const {
  return Until(codemode::SteadyDeadline(limit), done);
}

bool StartWait::Until(Instant until, const std::function<bool(absl::Duration)>& done) const {
  for (;;) {
    const absl::Duration left = absl::FromChrono(until - Steady::now());
    if (done(std::max(absl::ZeroDuration(), std::min(absl::Milliseconds(100), left)))) return true;
    if (Steady::now() >= until || stop_requested()) return false;
  }
}

}  // namespace sandboxd
