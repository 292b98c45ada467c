#include "sandboxd/uid_pool.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

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

// A /proc of processes given as {pid: {tid: status text}} in a temporary directory; each
// process's own status file is its first thread's, as the kernel shows a thread group
// leader's.
class FakeProc {
 public:
  explicit FakeProc(const std::map<int, std::map<int, std::string>>& processes)
      : root_(std::filesystem::temp_directory_path() / absl::StrCat("uid-pool-proc-", getpid())) {
    std::filesystem::remove_all(root_);
    for (const auto& [pid, threads] : processes) {
      const std::filesystem::path dir = root_ / std::to_string(pid);
      for (const auto& [tid, status] : threads) {
        std::filesystem::create_directories(dir / "task" / std::to_string(tid));
        std::ofstream(dir / "task" / std::to_string(tid) / "status") << status;
        if (tid == pid) std::ofstream(dir / "status") << status;
      }
    }
    std::filesystem::create_directories(root_ / "sys");  // not a process
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }
  std::string path() const { return root_.string(); }

 private:
  const std::filesystem::path root_;
};

std::string Status(const std::string& uids, const std::string& gids, const std::string& groups = "") {
  return absl::StrCat("Name:\tx\nUid:\t", uids, "\nGid:\t", gids, "\nGroups:\t", groups, "\n");
}

// A uid only a non-leader thread has (setresuid on one thread, as Samba's async-IO threads
// do) counts: the kernel checks access to a session against that thread's credentials.
TEST(UidPoolTest, AUidOnlyAThreadRunsAsIsInUse) {
  FakeProc proc({{300, {{300, Status("0\t0\t0\t0", "0\t0\t0\t0")},
                        {301, Status("105\t105\t105\t105", "0\t0\t0\t0")}}},
                 {400, {{400, Status("0\t0\t0\t103", "0\t0\t0\t0")}}}});
  EXPECT_EQ(UidsWithProcesses(100, 10, proc.path()), (std::set<uint32_t>{103, 105}));
}

// A wasm session runs as gid U too: a thread with U as any gid or supplementary group
// makes U in use.
TEST(UidPoolTest, AGidOrGroupInUseMakesTheIdInUse) {
  FakeProc proc({{500, {{500, Status("0\t0\t0\t0", "0\t107\t0\t0", "0 108 5000")},
                        {502, Status("0\t0\t0\t0", "0\t0\t0\t109")}}}});
  EXPECT_EQ(UidsWithProcesses(100, 10, proc.path()), (std::set<uint32_t>{107, 108, 109}));
}

// A uid a host account or group has is passed over even with no process of it running,
// and NSS is asked about a named id once per refresh, not on every lease.
TEST(UidPoolTest, AnIdAnAccountOrGroupHasIsNotGiven) {
  std::map<uint32_t, int> asked;
  NamedIds named([&](uint32_t id) { ++asked[id]; return id == 100 || id == 102; }, absl::Hours(1));
  auto by_name = [&](uint32_t id) { return named.Named(id); };
  auto pool = UidPool::Create(100, 4);
  auto a = pool->Acquire({}, by_name);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->uid(), 101u);
  auto b = pool->Acquire({}, by_name);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->uid(), 103u);
  EXPECT_EQ(pool->Acquire({}, by_name), nullptr) << "every id left has an account";
  EXPECT_EQ(asked, (std::map<uint32_t, int>{{100, 1}, {101, 1}, {102, 1}, {103, 1}}));
  NamedIds fresh([&](uint32_t id) { ++asked[id]; return false; }, absl::ZeroDuration());
  fresh.Named(100);
  fresh.Named(100);
  EXPECT_EQ(asked[100], 3) << "an answer outlived its refresh";
}

// An account created after its id was looked up (and found free) is seen by the next
// lease: "no account" is not remembered, so the id a lease settles on is asked afresh.
TEST(UidPoolTest, AnAccountCreatedAfterALookupIsSeen) {
  std::set<uint32_t> accounts;
  std::map<uint32_t, int> asked;
  NamedIds named([&](uint32_t id) { ++asked[id]; return accounts.count(id) > 0; }, absl::Hours(1));
  auto by_name = [&](uint32_t id) { return named.Named(id); };
  auto pool = UidPool::Create(100, 4);
  auto a = pool->Acquire({}, by_name);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->uid(), 100u);
  a.reset();
  accounts.insert(100);  // useradd -u 100 between two session starts
  auto b = pool->Acquire({}, by_name);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->uid(), 101u) << "the account's uid went to a session";
  EXPECT_EQ(asked, (std::map<uint32_t, int>{{100, 2}, {101, 1}}));
  b.reset();
  auto c = pool->Acquire({}, by_name);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->uid(), 101u);
  EXPECT_EQ(asked, (std::map<uint32_t, int>{{100, 2}, {101, 2}})) << "a yes is kept for its refresh";
}

// The real lookup: root has an account and a group, an id nothing has has neither.
TEST(UidPoolTest, HostNamesIdAsksTheAccountsAndGroups) {
  EXPECT_TRUE(HostNamesId(0));
  EXPECT_FALSE(HostNamesId(4000000000u));
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
