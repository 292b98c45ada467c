#include "base/mutex.h"

#include <atomic>
#include <thread>

#include "base/notification.h"
#include "gtest/gtest.h"

namespace codemode {
namespace {

struct Shared {
  Mutex mu;
  int value ABSL_GUARDED_BY(mu) = 0;
};

TEST(MutexTest, AwaitReturnsOnceAnotherThreadMakesTheConditionTrue) {
  Shared s;
  std::thread t([&] {
    for (int i = 0; i < 5; ++i) {
      MutexLock lock(&s.mu);
      ++s.value;
    }
  });
  {
    MutexLock lock(&s.mu);
    s.mu.Await(absl::Condition(+[](int* v) { return *v >= 5; }, &s.value));
    EXPECT_EQ(s.value, 5);
  }
  t.join();
}

TEST(MutexTest, AwaitWithTimeoutSaysWhetherTheConditionHolds) {
  Shared s;
  MutexLock lock(&s.mu);
  EXPECT_FALSE(s.mu.AwaitWithTimeout(absl::Condition(+[](int* v) { return *v > 0; }, &s.value),
                                     absl::Milliseconds(20)));
  s.value = 1;
  EXPECT_TRUE(s.mu.AwaitWithTimeout(absl::Condition(+[](int* v) { return *v > 0; }, &s.value),
                                    absl::Milliseconds(20)));
}

// A thread that changes the state and then waits itself must wake the others: releasing
// the mutex by waiting counts as an unlock.
TEST(MutexTest, WaitingWakesWaitersWhoseConditionTheWaiterMadeTrue) {
  Shared s;
  std::atomic<bool> first_waiting{false};
  std::thread first([&] {
    MutexLock lock(&s.mu);
    first_waiting = true;
    s.mu.Await(absl::Condition(+[](int* v) { return *v == 1 || *v == 3; }, &s.value));
    s.value = 2;  // released by Unlock at the end of the scope
  });
  while (!first_waiting) std::this_thread::yield();
  MutexLock lock(&s.mu);
  s.value = 1;
  // Without waking `first` here, both would wait forever.
  s.mu.Await(absl::Condition(+[](int* v) { return *v == 2; }, &s.value));
  EXPECT_EQ(s.value, 2);
  first.join();
}

// The condition holds on return even if it was true when the waiter was woken and false
// again by the time it got the mutex back.
TEST(MutexTest, AwaitReturnsOnlyWhileTheConditionHolds) {
  Shared s;
  std::atomic<bool> done{false};
  std::thread flipper([&] {
    for (int i = 0; i < 20000 && !done; ++i) {
      MutexLock lock(&s.mu);
      s.value = (s.value + 1) % 4;
    }
    MutexLock lock(&s.mu);
    s.value = 3;  // lets the waiter finish in any case
  });
  for (int i = 0; i < 200; ++i) {
    MutexLock lock(&s.mu);
    s.mu.Await(absl::Condition(+[](int* v) { return *v == 3; }, &s.value));
    ASSERT_EQ(s.value, 3);
  }
  done = true;
  flipper.join();
}

// A deadline of now + ToChrono(inf) must not wrap into the past: a wait a flag sets to
// "inf" (or to 3,000,000 h) never ends, rather than ending at once.
TEST(SteadyDeadlineTest, HugeAndInfiniteWaitsDoNotWrapIntoThePast) {
  const auto now = std::chrono::steady_clock::now();
  const auto in_300_days = now + std::chrono::hours(24 * 300);
  EXPECT_GT(SteadyDeadline(absl::InfiniteDuration()), in_300_days);
  EXPECT_GT(SteadyDeadline(absl::Hours(3000000)), in_300_days);
  EXPECT_GE(SteadyDeadline(absl::Seconds(5)), now + std::chrono::seconds(5));
  const auto past = SteadyDeadline(-absl::InfiniteDuration());
  EXPECT_LE(past, std::chrono::steady_clock::now());
}

// Deadlines are steady-clock points: max() is none, and a last time that never happened
// (min()) plus a gap is long past.
TEST(SteadyDeadlineTest, AwaitWithDeadlineTakesMaxAsNoneAndMinPlusAGapAsPast) {
  Shared s;
  std::thread t([&] {
    MutexLock lock(&s.mu);
    s.value = 1;
  });
  {
    MutexLock lock(&s.mu);
    EXPECT_TRUE(s.mu.AwaitWithDeadline(absl::Condition(+[](int* v) { return *v > 0; }, &s.value),
                                       SteadyTime::max()));
  }
  t.join();
  const SteadyTime never_plus_a_minute = SteadyAfter(SteadyTime::min(), absl::Minutes(1));
  EXPECT_LT(never_plus_a_minute, std::chrono::steady_clock::now());
  MutexLock lock(&s.mu);
  EXPECT_FALSE(s.mu.AwaitWithDeadline(absl::Condition(+[](int* v) { return *v > 1; }, &s.value),
                                      never_plus_a_minute));
}

TEST(NotificationTest, ATimedWaitEndsWithTheTimeoutUnlessNotified) {
  Notification n;
  EXPECT_FALSE(n.HasBeenNotified());
  EXPECT_FALSE(n.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  n.Notify();
  n.Notify();  // a second call changes nothing
  EXPECT_TRUE(n.HasBeenNotified());
  EXPECT_TRUE(n.WaitForNotificationWithTimeout(absl::ZeroDuration()));
  n.WaitForNotification();
}

TEST(NotificationTest, AWaiterWakesWhenAnotherThreadNotifies) {
  Notification go;
  Notification woke;
  std::thread waiter([&] {
    go.WaitForNotification();
    woke.Notify();
  });
  EXPECT_FALSE(woke.WaitForNotificationWithTimeout(absl::Milliseconds(20)));
  go.Notify();
  EXPECT_TRUE(woke.WaitForNotificationWithTimeout(absl::InfiniteDuration()));
  waiter.join();
}

}  // namespace
}  // namespace codemode
