// ThreadPool: its destructor joins every thread (thread-local destructors included), an
// exception ends its task only, the thread bound refuses or queues, idle workers park and
// are reused, then leave, and a task of the pool never joins its own thread. Threads kept
// until main() ends (KeepUntilExit): joined once their function returned, and a process
// whose kept thread still runs ends at once with its exit code instead of tearing itself
// down under the thread. A write to a closed pipe under NoSigpipeHere is an error, not the
// end of the process.
#include "base/thread_pool.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <limits>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/thread.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"
#include "thread_end.h"

namespace codemode {
namespace {

ThreadPoolOptions Options(std::string name, size_t max_threads = std::numeric_limits<size_t>::max(),
                          size_t max_idle = 0, absl::Duration idle_timeout = absl::InfiniteDuration(),
                          bool queue_when_full = true) {
  ThreadPoolOptions o;
  o.name = std::move(name);
  o.max_threads = max_threads;
  o.max_idle = max_idle;
  o.idle_timeout = idle_timeout;
  o.queue_when_full = queue_when_full;
  return o;
}

// Waits up to 5 s for `done`.
template <typename F>
bool Eventually(F done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

using testing::MarkThreadEnd;
using testing::ThreadsEnded;

TEST(ThreadPoolTest, DestructionJoinsEveryThreadThreadLocalsIncluded) {
  ThreadsEnded() = 0;
  std::atomic<int> ran{0};
  {
    ThreadPool pool(Options("test join", 4));
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(pool.Schedule([&ran] {
        MarkThreadEnd();
        absl::SleepFor(absl::Milliseconds(20));
        ++ran;
      }).ok());
    }
  }
  EXPECT_EQ(ran.load(), 4) << "the destructor returned before the tasks";
  EXPECT_EQ(ThreadsEnded().load(), 4) << "a thread was still ending after the destructor returned";
}

TEST(ThreadPoolTest, AnExceptionEndsItsTaskOnly) {
  // Leaked when the check fails: a worker killed by the exception never leaves its slot,
  // and Stop() would wait for it for ever.
  auto* pool = new ThreadPool(Options("test throw", 1, 1));
  ASSERT_TRUE(pool->Schedule([] { throw std::runtime_error("thrown by a task"); }).ok());
  std::atomic<bool> ran{false};
  ASSERT_TRUE(pool->Schedule([&ran] { ran = true; }).ok());
  if (!Eventually([&] { return ran.load(); })) {
    ADD_FAILURE() << "the task after the one that threw never ran";
    return;
  }
  EXPECT_EQ(pool->threads(), 1u);
  delete pool;
}

TEST(ThreadPoolTest, AFullPoolRefusesWhenItDoesNotQueue) {
  absl::Notification release;
  ThreadPool pool(Options("test refuse", 2, 0, absl::InfiniteDuration(), false));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(pool.Schedule([&] { release.WaitForNotification(); }).ok());
  const absl::Status third = pool.Schedule([] {});
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted) << third;
  EXPECT_EQ(pool.threads(), 2u);
  release.Notify();
}

TEST(ThreadPoolTest, AFullPoolQueuesWithinItsBound) {
  absl::Notification release;
  std::atomic<int> running{0}, peak{0}, ran{0};
  ThreadPool pool(Options("test queue", 2));
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(pool.Schedule([&] {
      const int now = ++running;
      for (int p = peak.load(); now > p && !peak.compare_exchange_weak(p, now);) {
      }
      release.WaitForNotification();
      --running;
      ++ran;
    }).ok());
  }
  EXPECT_TRUE(Eventually([&] { return running.load() == 2; }));
  absl::SleepFor(absl::Milliseconds(50));  // a third thread would have started by now
  EXPECT_EQ(pool.threads(), 2u);
  release.Notify();
  EXPECT_TRUE(Eventually([&] { return ran.load() == 6; }));
  EXPECT_EQ(peak.load(), 2);
}

// The caller's copy and the helpers' run at once (none passes the barrier until all four
// are in), and every copy has ended when it returns, throwing ones included: the helpers'
// exceptions end their tasks only, the caller's comes out after the helpers have ended.
TEST(ThreadPoolTest, RunAlongsideRunsCopiesAtOnceAndWaitsForThemAll) {
  ThreadPool pool(Options("test along", 3));
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> arrived{0}, ended{0};
  const size_t helpers = pool.RunAlongside(3, [&] {
    ++arrived;
    while (arrived.load() < 4) std::this_thread::yield();
    absl::SleepFor(absl::Milliseconds(20));  // a copy still running would be missed below
    ++ended;
    if (std::this_thread::get_id() != caller) throw std::runtime_error("a helper's copy fails");
  });
  EXPECT_EQ(helpers, 3u);
  EXPECT_EQ(ended.load(), 4);
  ended = 0;
  EXPECT_THROW(pool.RunAlongside(1, [&] {
    if (std::this_thread::get_id() == caller) throw std::runtime_error("the caller's copy fails");
    absl::SleepFor(absl::Milliseconds(20));
    ++ended;
  }), std::runtime_error);
  EXPECT_EQ(ended.load(), 1);
}

// Helpers the pool cannot start are not waited for: fewer copies run.
TEST(ThreadPoolTest, RunAlongsideRunsFewerCopiesWhenThePoolRefuses) {
  absl::Notification release;
  ThreadPool pool(Options("test along full", 1, 0, absl::InfiniteDuration(), false));
  ASSERT_TRUE(pool.Schedule([&] { release.WaitForNotification(); }).ok());
  std::atomic<int> ran{0};
  EXPECT_EQ(pool.RunAlongside(2, [&] { ++ran; }), 0u);
  EXPECT_EQ(ran.load(), 1);
  release.Notify();
}

TEST(ThreadPoolTest, AParkedWorkerIsReusedThenLeavesAfterItsIdleTime) {
  ThreadPool pool(Options("test park", 4, 1, absl::Milliseconds(300)));
  std::set<std::thread::id> ids;
  for (int i = 0; i < 3; ++i) {
    absl::Notification done;
    std::thread::id id;
    ASSERT_TRUE(pool.Schedule([&] {
      id = std::this_thread::get_id();
      done.Notify();
    }).ok());
    done.WaitForNotification();
    ASSERT_TRUE(Eventually([&] { return pool.idle() == 1; }));
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1u) << "each task started a thread of its own";
  EXPECT_EQ(pool.threads(), 1u);
  EXPECT_TRUE(Eventually([&] { return pool.threads() == 0; })) << "the parked worker never left";
}

// Pools that share a bound on parked workers keep no more parked than it, together: the
// pool that finds it full ends its worker, and finds room again once the other's is gone.
TEST(ThreadPoolTest, PoolsSharingAParkingBoundParkNoMoreThanItAllows) {
  auto parked = std::make_shared<ParkedThreads>(1);
  ThreadPoolOptions a_options = Options("test park a", 4, 1);
  a_options.parked = parked;
  ThreadPoolOptions b_options = Options("test park b", 4, 1);
  b_options.parked = parked;
  auto a = std::make_unique<ThreadPool>(a_options);
  ThreadPool b(b_options);
  auto run = [](ThreadPool& pool) {
    absl::Notification done;
    ASSERT_TRUE(pool.Schedule([&done] { done.Notify(); }).ok());
    done.WaitForNotification();
  };
  run(*a);
  ASSERT_TRUE(Eventually([&] { return a->idle() == 1; }));
  EXPECT_EQ(parked->parked(), 1u);
  run(b);
  EXPECT_TRUE(Eventually([&] { return b.threads() == 0; })) << "a worker parked past the shared bound";
  EXPECT_EQ(parked->parked(), 1u);
  a.reset();  // its parked worker ends and gives its room back
  EXPECT_EQ(parked->parked(), 0u);
  run(b);
  EXPECT_TRUE(Eventually([&] { return b.idle() == 1; }));
  EXPECT_EQ(parked->parked(), 1u);
}

TEST(ThreadPoolTest, WithoutIdleWorkersEachThreadEndsWithItsTask) {
  ThreadPool pool(Options("test no idle"));
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(pool.Schedule([&ran] { ++ran; }).ok());
  EXPECT_TRUE(Eventually([&] { return ran.load() == 3 && pool.threads() == 0; }));
  EXPECT_EQ(pool.idle(), 0u);
}

// A pool for bulk work lowers its workers' priority, and theirs alone.
TEST(ThreadPoolTest, WorkersTakeTheNiceValueOfTheirPool) {
  auto nice_now = [] { return getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))); };
  const int base = nice_now();
  ThreadPoolOptions o = Options("test nice");
  o.nice = 3;
  ThreadPool pool(o);
  std::atomic<int> seen{-100};
  ASSERT_TRUE(pool.Schedule([&] { seen = nice_now(); }).ok());
  pool.Stop();
  EXPECT_EQ(seen.load(), std::min(base + 3, 19));
  EXPECT_EQ(nice_now(), base) << "the scheduling thread's own";
}

TEST(ThreadPoolTest, StopRunsWhatIsQueuedAndWhatItsTasksScheduleThenRefuses) {
  ThreadPool pool(Options("test stop", 1));
  std::atomic<int> ran{0};
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(pool.Schedule([&] {
      absl::SleepFor(absl::Milliseconds(20));
      ++ran;
      // During Stop(): still run, by the worker that scheduled it.
      if (ran.load() == 3) {
        EXPECT_TRUE(pool.Schedule([&ran] { ++ran; }).ok());
      }
    }).ok());
  }
  pool.Stop();
  EXPECT_EQ(ran.load(), 4);
  EXPECT_EQ(pool.Schedule([&ran] { ++ran; }).code(), absl::StatusCode::kFailedPrecondition);
  pool.Stop();
  EXPECT_EQ(ran.load(), 4);
}

TEST(ThreadPoolDeathTest, ATaskThatStopsItsPoolAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        spdlog::set_default_logger(spdlog::stderr_color_st("stderr"));  // what the death test reads
        ThreadPool pool(Options("test self"));
        absl::Notification done;
        (void)pool.Schedule([&] {
          pool.Stop();
          done.Notify();
        });
        // Not dead within 5 s: deadlocked on its own thread; leave without the destructor.
        if (!done.WaitForNotificationWithTimeout(absl::Seconds(5))) std::_Exit(0);
      },
      "stops it, which would join its own thread");
}

// A thread that waits for `release`, then returns (notifying `ended`).
std::thread Waiting(const std::shared_ptr<Notification>& release,
                    const std::shared_ptr<Notification>& ended) {
  return StartThread("test kept", [release, ended] {
    MarkThreadEnd();
    release->WaitForNotification();
    ended->Notify();
  });
}

TEST(KeepUntilExitTest, AKeptThreadIsJoinedOnceItHasEnded) {
  ThreadsEnded() = 0;
  auto release = std::make_shared<Notification>();
  auto ended = std::make_shared<Notification>();
  KeepUntilExit(Waiting(release, ended), ended);
  EXPECT_FALSE(JoinKeptThreads(absl::Milliseconds(50))) << "a thread still running counted as joined";
  release->Notify();
  EXPECT_TRUE(JoinKeptThreads(absl::Seconds(5)));
  EXPECT_EQ(ThreadsEnded().load(), 1) << "joined before its thread-local destructors ran";
}

TEST(KeepUntilExitDeathTest, FinishThreadsEndsTheProcessUnderAThreadStillRunning) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        spdlog::set_default_logger(spdlog::stderr_color_st("stderr"));  // what the death test reads
        auto release = std::make_shared<Notification>();
        auto ended = std::make_shared<Notification>();
        KeepUntilExit(Waiting(release, ended), ended);
        const int code = FinishThreads(3, absl::Milliseconds(20));
        std::_Exit(code == 3 ? 0 : 1);  // returned: the thread would run under exit()
      },
      ::testing::ExitedWithCode(3), "has not ended");
}

}  // namespace
}  // namespace codemode

// A write to a pipe nobody reads: under NoSigpipeHere it is EPIPE and the test process
// (whose SIGPIPE still ends it) lives on; afterwards SIGPIPE is unblocked again and none is
// left pending to end the process later.
TEST(NoSigpipeHereTest, AWriteToAClosedPipeIsAnErrorAndTheMaskComesBack) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  {
    codemode::NoSigpipeHere no_sigpipe;
    errno = 0;
    EXPECT_EQ(write(fds[1], "x", 1), -1);
    EXPECT_EQ(errno, EPIPE);
  }
  close(fds[1]);
  sigset_t now, pending;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &now), 0);
  EXPECT_FALSE(sigismember(&now, SIGPIPE));
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE));
}

// Nested in code that already blocks SIGPIPE, it leaves the outer block and its pending
// signal to their owner.
TEST(NoSigpipeHereTest, AnOuterBlockKeepsItsMaskAndItsPendingSignal) {
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &pipe_set, &old), 0);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  {
    codemode::NoSigpipeHere no_sigpipe;
    EXPECT_EQ(write(fds[1], "x", 1), -1);
  }
  close(fds[1]);
  sigset_t now, pending;
  ASSERT_EQ(pthread_sigmask(SIG_SETMASK, nullptr, &now), 0);
  EXPECT_TRUE(sigismember(&now, SIGPIPE));
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_TRUE(sigismember(&pending, SIGPIPE));
  const struct timespec zero = {0, 0};
  EXPECT_EQ(sigtimedwait(&pipe_set, nullptr, &zero), SIGPIPE);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}
