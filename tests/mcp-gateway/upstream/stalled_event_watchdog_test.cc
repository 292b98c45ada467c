// StalledEventWatchdog (upstream/stalled_event_watchdog.h): the watch that cuts an HTTP
// event stream whose partial event stopped growing.
#include "upstream/stalled_event_watchdog.h"

#include <atomic>
#include <future>

#include "gtest/gtest.h"

namespace gateway {
namespace {

TEST(StalledEventWatchdogTest, FiresOnceWhenAPartialEventStopsGrowing) {
  std::atomic<int> calls{0};
  std::promise<void> stalled;
  {
    StalledEventWatchdog watchdog(absl::Milliseconds(10), [&] {
      if (calls.fetch_add(1) == 0) stalled.set_value();
    });
    watchdog.Received(false);
    watchdog.Received(true);
    stalled.get_future().wait();  // bounded by the test's timeout
    EXPECT_TRUE(watchdog.fired());
  }
  EXPECT_EQ(calls.load(), 1);
}

// The stream's thread destroys the watchdog when the stream ends: that must not wait for
// the timeout, nor call on_stalled.
TEST(StalledEventWatchdogTest, DestroyedBeforeTheTimeoutDoesNotFire) {
  std::atomic<int> calls{0};
  {
    StalledEventWatchdog watchdog(absl::Hours(1), [&] { ++calls; });
    watchdog.Received(true);
    watchdog.Received(false);
    watchdog.Received(true);
    EXPECT_FALSE(watchdog.fired());
  }
  EXPECT_EQ(calls.load(), 0);
}

}  // namespace
}  // namespace gateway
