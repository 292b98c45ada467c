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

  // A thread's status changes (the thread's directory stays).
  void Write(int pid, int tid, const std::string& status) {
    std::ofstream(Task(pid, tid) / "status") << status;
    if (tid == pid) std::ofstream(root_ / std::to_string(pid) / "status") << status;
  }
  // Another thread takes the tid: a new directory (made before the old one goes, so
  // another inode).
  void Replace(int pid, int tid, const std::string& status) {
    const std::filesystem::path fresh = Task(pid, tid).string() + ".new";
    std::filesystem::create_directories(fresh);
    std::ofstream(fresh / "status") << status;
    std::filesystem::remove_all(Task(pid, tid));
    std::filesystem::rename(fresh, Task(pid, tid));
  }

 private:
  std::filesystem::path Task(int pid, int tid) const {
    return root_ / std::to_string(pid) / "task" / std::to_string(tid);
  }
  const std::filesystem::path root_;
};

std::string Status(const std::string& uids, const std::string& gids, const std::string& groups = "") {
  return absl::StrCat("Name:\tx\nUid:\t", uids, "\nGid:\t", gids, "\nGroups:\t", groups, "\n");
}

// The status of a thread of a process of `threads` threads, with the permitted capabilities
// `caps` (CapPrm:, hex).
std::string Status(const std::string& uids, int threads, const std::string& caps) {
  return absl::StrCat(Status(uids, "0\t0\t0\t0"), "Threads:\t", threads, "\nCapPrm:\t", caps, "\n");
}

// A uid only a non-leader thread has (setresuid on one thread, as Samba's async-IO threads
// do) counts: the kernel checks access to a session against that thread's credentials.
TEST(UidPoolTest, AUidOnlyAThreadRunsAsIsInUse) {
  FakeProc proc({{300, {{300, Status("0\t0\t0\t0", "0\t0\t0\t0")},
                        {301, Status("105\t105\t105\t105", "0\t0\t0\t0")}}},
                 {400, {{400, Status("0\t0\t0\t103", "0\t0\t0\t0")}}}});
  EXPECT_EQ(UidsWithProcesses(100, 10, proc.path()), (std::set<uint32_t>{103, 105}));
}

// A scan reads again only what can have changed since the last: every process's status, a
// thread whose CapPrm has CAP_SETUID or CAP_SETGID, and a new thread (another directory).
// A thread without them is not read again: the kernel lets it take no id it had not (here
// its status changes anyway, which a scan that reads it would see). A process of one
// thread is its status.
TEST(UidPoolTest, ThreadsThatCannotTakeIdsAreReadOnce) {
  const std::string none = "0000000000000000";
  const std::string setuid = "0000000000000080";
  const std::string setgid = "0000000000000040";
  const std::string zeros = "0\t0\t0\t0";
  FakeProc proc({{600, {{600, Status(zeros, 4, none)}, {601, Status(zeros, 4, none)},
                        {602, Status(zeros, 4, setuid)}, {603, Status(zeros, 4, setgid)}}},
                 {700, {{700, Status(zeros, 1, none)}, {701, Status("104\t104\t104\t104", 1, none)}}}});
  ThreadIds ids(100, 10, proc.path());
  EXPECT_TRUE(ids.InUse().empty());
  proc.Write(600, 600, Status("100\t100\t100\t100", 4, none));
  proc.Write(600, 601, Status("101\t101\t101\t101", 4, none));
  proc.Write(600, 602, Status("0\t102\t0\t0", 4, none));
  proc.Write(600, 603, Status("0\t0\t0\t103", 4, setgid));
  EXPECT_EQ(ids.InUse(), (std::set<uint32_t>{100, 102, 103})) << "thread 601 was read again";
  EXPECT_EQ(ids.InUse(), (std::set<uint32_t>{100, 102, 103}));
  proc.Replace(600, 601, Status("105\t105\t105\t105", 4, none));
  EXPECT_EQ(ids.InUse(), (std::set<uint32_t>{100, 102, 103, 105})) << "a new thread 601 was not read";
  EXPECT_EQ(UidsWithProcesses(100, 10, proc.path()), (std::set<uint32_t>{100, 102, 103, 105}));
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
