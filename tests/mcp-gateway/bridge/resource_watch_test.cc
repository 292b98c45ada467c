// ResourceWatch: its destructor joins the threads its looks ran on, so nothing of a look
// (its thread-local destructors included) runs after the watch is gone.
#include "bridge/resource_watch.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "thread_end.h"

namespace gateway {
namespace {

TEST(ResourceWatchTest, TheDestructorJoinsTheThreadsOfItsLooks) {
  codemode::testing::ThreadsEnded() = 0;
  {
    ResourceWatch watch(
        [](const std::string&, const std::shared_ptr<codemode::CancelToken>&) -> std::optional<size_t> {
          codemode::testing::MarkThreadEnd();
          return 1;
        },
        absl::ZeroDuration(), absl::Seconds(5));
    absl::Notification ready;
    std::shared_ptr<void> subscription = watch.Subscribe("alice", [&ready] { ready.Notify(); }, nullptr);
    ASSERT_TRUE(ready.WaitForNotificationWithTimeout(absl::Seconds(5))) << "the first look never came";
    subscription.reset();
  }
  EXPECT_EQ(codemode::testing::ThreadsEnded().load(), 1) << "a look's thread was still ending after the watch went";
}

}  // namespace
}  // namespace gateway
