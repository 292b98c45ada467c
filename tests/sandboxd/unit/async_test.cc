// WorkerPool: Stop() runs what was queued before it returns, and a task posted after it
// is dropped (never run on a joined pool, never left to touch an owner that has gone).
// TimerQueue: timers run in deadline order, cancelled ones never; an earlier timer wakes
// the waiting thread, a later one or a cancel does not.
// StartWait: a wait ends with the work, at the shared deadline or at a stop request; one
// that begins after the deadline still gives its work a moment.
#include "sandboxd/async.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/mutex.h"

namespace sandboxd {
namespace {

TEST(WorkerPoolTest, StopRunsWhatWasQueuedThenDropsLaterTasks) {
  WorkerPool pool(2);
  std::atomic<int> ran{0};
  for (int i = 0; i < 8; ++i) {
    pool.Post([&ran] {
      absl::SleepFor(absl::Milliseconds(20));
      ++ran;
    });
  }
  pool.Stop();
  EXPECT_EQ(ran.load(), 8);
  pool.Post([&ran] { ++ran; });
  pool.Stop();  // idempotent
  EXPECT_EQ(ran.load(), 8);
}

// A task may post another as the pool stops (a cleanup that removes a directory after a
// record); the pool runs it before Stop() returns.
TEST(WorkerPoolTest, ATaskPostedByATaskDuringStopStillRuns) {
  WorkerPool pool(1);
  std::atomic<int> ran{0};
  pool.Post([&] {
    absl::SleepFor(absl::Milliseconds(50));
    pool.Post([&ran] { ++ran; });
  });
  pool.Stop();
  EXPECT_EQ(ran.load(), 1);
}

TEST(TimerQueueTest, TimersRunInDeadlineOrderAndCancelledOnesNever) {
  TimerQueue timers;
  codemode::Mutex mu;
  std::vector<int> ran;
  absl::Notification last;
  auto mark = [&](int n) {
    codemode::MutexLock lock(&mu);
    ran.push_back(n);
  };
  timers.Schedule(absl::Milliseconds(60), [&] {
    mark(3);
    last.Notify();
  });
  timers.Schedule(absl::Milliseconds(20), [&] { mark(1); });
  const TimerQueue::Id cancelled = timers.Schedule(absl::Milliseconds(30), [&] { mark(2); });
  EXPECT_TRUE(timers.Cancel(cancelled));
  ASSERT_TRUE(last.WaitForNotificationWithTimeout(absl::Seconds(5)));
  codemode::MutexLock lock(&mu);
  EXPECT_EQ(ran, (std::vector<int>{1, 3}));
  EXPECT_FALSE(timers.Cancel(cancelled));
}

TEST(TimerQueueTest, AnEarlierTimerWakesTheThreadALaterOneOrACancelDoesNot) {
  TimerQueue timers;
  timers.Schedule(absl::Hours(1), [] {});
  // The thread waits for the hour once it has looked: no wake-up in 100 ms.
  uint64_t asleep = timers.wakeups();
  for (int i = 0; i < 50; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    const uint64_t now = timers.wakeups();
    if (now == asleep) break;
    asleep = now;
  }
  for (int i = 0; i < 3; ++i) {
    const TimerQueue::Id id = timers.Schedule(absl::Hours(2), [] {});
    absl::SleepFor(absl::Milliseconds(20));  // time for a woken thread to look
    timers.Cancel(id);
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(timers.wakeups(), asleep) << "a later timer or a cancel woke the thread";
  absl::Notification soon;
  timers.Schedule(absl::Milliseconds(10), [&soon] { soon.Notify(); });
  EXPECT_TRUE(soon.WaitForNotificationWithTimeout(absl::Seconds(5))) << "an earlier timer waited for the hour";
  EXPECT_GT(timers.wakeups(), asleep);
}

TEST(StartWaitTest, EndsWithTheWork) {
  absl::Notification done;
  std::thread worker([&done] {
    absl::SleepFor(absl::Milliseconds(250));
    done.Notify();
  });
  const StartWait wait(absl::Hours(1));
  EXPECT_TRUE(wait.For([&done](absl::Duration d) { return done.WaitForNotificationWithTimeout(d); }));
  worker.join();
}

TEST(StartWaitTest, GivesUpAtTheDeadlineOrAtAStopRequest) {
  const absl::Notification never;
  auto waiting = [&never](absl::Duration d) { return never.WaitForNotificationWithTimeout(d); };
  EXPECT_FALSE(StartWait(absl::Milliseconds(200)).For(waiting));
  EXPECT_FALSE(StartWait(absl::Hours(1)).Within(absl::Milliseconds(200), waiting));
  std::atomic<int> asked{0};
  const StartWait stopping(absl::Hours(1), [&asked] { return ++asked >= 3; });
  EXPECT_FALSE(stopping.For(waiting));
  EXPECT_TRUE(stopping.stop_requested());
  EXPECT_FALSE(StartWait(absl::Hours(1)).stop_requested());
}

// Each wait shares the deadline, but one after it still gives its work StartWait::kLeast:
// a check that hung until the deadline does not make the next one count as unanswered.
TEST(StartWaitTest, AWaitPastTheDeadlineStillGivesItsWorkAMoment) {
  const StartWait wait(-absl::Seconds(5));
  const absl::Time began = absl::Now();
  EXPECT_TRUE(wait.For([began](absl::Duration d) {
    absl::SleepFor(d);
    return absl::Now() - began >= StartWait::kLeast / 2;
  }));
}

}  // namespace
}  // namespace sandboxd
