#include "sandboxd/uid_pool.h"

#include <unistd.h>

#include <gtest/gtest.h>

namespace sandboxd {
namespace {

// A uid some process runs as is passed over (UidsWithProcesses), and none is left when
// every free one is busy.
TEST(UidPoolTest, BusyUidsArePassedOver) {
  auto pool = UidPool::Create(100, 3);
  auto a = pool->Acquire({100, 101});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->uid(), 102u);
  EXPECT_EQ(pool->Acquire({100, 101}), nullptr);
}

TEST(UidPoolTest, UidsWithProcessesSeesThisProcessesOwnUid) {
  const uint32_t me = geteuid();
  EXPECT_EQ(UidsWithProcesses(me, 1), std::set<uint32_t>{me});
  EXPECT_TRUE(UidsWithProcesses(me + 1, 0).empty());
}

TEST(UidPoolTest, LeasesAreDistinctAndComeBackWhenDropped) {
  auto pool = UidPool::Create(100, 2);
  auto a = pool->Acquire();
  auto b = pool->Acquire();
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->uid(), 100u);
  EXPECT_EQ(b->uid(), 101u);
  EXPECT_EQ(pool->Acquire(), nullptr) << "a third container would share a uid";
  a.reset();
  auto c = pool->Acquire();
  ASSERT_TRUE(c);
  EXPECT_EQ(c->uid(), 100u);
}

TEST(UidPoolTest, ARecoveredContainerClaimsItsUid) {
  auto pool = UidPool::Create(100, 3);
  auto claimed = pool->Claim(100);
  EXPECT_EQ(pool->Claim(100), claimed);  // two records of one uid share the lease
  auto next = pool->Acquire();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->uid(), 101u);
  auto outside = pool->Claim(65534);  // an older container's shared uid reserves nothing
  EXPECT_EQ(outside->uid(), 65534u);
  EXPECT_EQ(pool->Acquire()->uid(), 102u);
}

TEST(UidPoolTest, LeasesOutliveThePoolHandle) {
  std::shared_ptr<UidPool::Lease> lease;
  {
    auto pool = UidPool::Create(7, 1);
    lease = pool->Acquire();
  }
  EXPECT_EQ(lease->uid(), 7u);  // the lease keeps the pool alive
}

}  // namespace
}  // namespace sandboxd
