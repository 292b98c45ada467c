#include "base/thread_pool.h"

#include <cstdlib>
#include <exception>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/thread.h"
#include "spdlog/spdlog.h"

namespace codemode {

bool ParkedThreads::TryPark() {
  size_t n = parked_.load(std::memory_order_relaxed);
  while (n < max_) {
    if (parked_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed)) return true;
  }
  return false;
}

void ParkedThreads::Unpark() { parked_.fetch_sub(1, std::memory_order_relaxed); }

ThreadPool::ThreadPool(ThreadPoolOptions options) : options_(std::move(options)) {}

absl::Status ThreadPool::Schedule(std::function<void()> fn) {
  JoinEnded();
  MutexLock lock(&mu_);
  if (stopping_) {
    // Only a worker still in its loop can run it; it takes the queue before it leaves.
    if (workers_.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(options_.name, ": stopped"));
    }
    tasks_.push_back(std::move(fn));
    return absl::OkStatus();
  }
  tasks_.push_back(std::move(fn));
  if (tasks_.size() <= idle_) return absl::OkStatus();  // a parked worker takes it
  if (workers_.size() >= options_.max_threads) {
    if (options_.queue_when_full) return absl::OkStatus();
    tasks_.pop_back();
    return absl::ResourceExhaustedError(absl::StrCat(
        options_.name, ": all ", options_.max_threads, " threads are busy"));
  }
  try {
    // Started under mu_, which the worker takes first: it is in workers_ before it can
    // look itself up there, and cannot take the task before this returns.
    std::thread worker = StartThread(options_.name, [this] { Work(); });
    const std::thread::id id = worker.get_id();
    workers_.emplace(id, std::move(worker));
  } catch (const std::system_error& e) {
    tasks_.pop_back();
    return absl::ResourceExhaustedError(absl::StrCat(options_.name, ": cannot start a thread: ", e.what()));
  }
  return absl::OkStatus();
}

size_t ThreadPool::RunAlongside(size_t helpers, const std::function<void()>& fn) {
  Mutex mu;
  size_t running = 0;
  // Counted down however the copy ends (an exception ends its task only, RunContained).
  struct Ended {
    Mutex* mu;
    size_t* running;
    ~Ended() {
      MutexLock lock(mu);
      --*running;
    }
  };
  size_t started = 0;
  for (; started < helpers; ++started) {
    {
      MutexLock lock(&mu);
      ++running;
    }
    absl::Status s = Schedule([&] {
      Ended ended{&mu, &running};
      fn();
    });
    if (!s.ok()) {  // the task never runs
      spdlog::debug("{}: {} of {} helpers: {}", options_.name, started, helpers, std::string(s.message()));
      MutexLock lock(&mu);
      --running;
      break;
    }
  }
  std::exception_ptr thrown;  // the helpers use this frame: they end before it is left
  try {
    fn();
  } catch (...) {
    thrown = std::current_exception();
  }
  {
    MutexLock lock(&mu);
    mu.Await(absl::Condition(+[](size_t* n) { return *n == 0; }, &running));
  }
  if (thrown) std::rethrow_exception(thrown);
  return started;
}

void ThreadPool::Work() {
  if (options_.nice != 0) LowerThreadPriority(options_.nice);
  mu_.Lock();
  while (true) {
    if (tasks_.empty()) {
      if (stopping_ || idle_ >= options_.max_idle) break;
      if (options_.parked && !options_.parked->TryPark()) break;
      ++idle_;
      const bool woke = mu_.AwaitWithTimeout(absl::Condition(this, &ThreadPool::HasTaskOrStopping),
                                             options_.idle_timeout);
      --idle_;
      if (options_.parked) options_.parked->Unpark();
      if (!woke) break;
      continue;
    }
    std::function<void()> task = std::move(tasks_.front());
    tasks_.pop_front();
    mu_.Unlock();
    RunContained(options_.name.c_str(), task);
    task = nullptr;  // what the task held goes before the worker parks
    mu_.Lock();
  }
  auto self = workers_.find(std::this_thread::get_id());
  ended_.push_back(std::move(self->second));
  workers_.erase(self);
  mu_.Unlock();
}

void ThreadPool::JoinEnded() {
  std::vector<std::thread> ended;
  {
    MutexLock lock(&mu_);
    ended.swap(ended_);
  }
  for (std::thread& t : ended) t.join();
}

void ThreadPool::Stop() {
  {
    MutexLock lock(&mu_);
    if (workers_.count(std::this_thread::get_id()) > 0) {
      spdlog::critical("{}: a task of the pool stops it, which would join its own thread", options_.name);
      std::abort();
    }
    stopping_ = true;
    auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return workers_.empty(); };
    mu_.Await(absl::Condition(&none));
  }
  JoinEnded();
}

size_t ThreadPool::threads() const {
  MutexLock lock(&mu_);
  return workers_.size();
}

size_t ThreadPool::idle() const {
  MutexLock lock(&mu_);
  return idle_;
}

}  // namespace codemode
