// WorkerPool: Stop() runs what was queued before it returns, and a task posted after it
// is dropped (never run on a joined pool, never left to touch an owner that has gone).
#include "sandboxd/async.h"

#include <atomic>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "absl/time/time.h"

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

}  // namespace
}  // namespace sandboxd
