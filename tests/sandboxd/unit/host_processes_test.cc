// NestedNamespaceInit (host_processes.h) on fixture /proc trees: a container's chain up
// to its init, and the chains it must not follow out of the namespace or up to the host's
// init.
#include "sandboxd/host_processes.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;

class NestedNamespaceInitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbxproc-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  // A process `pid` with parent `ppid`, NSpid `ns_pids` and start time `start`.
  void Process(pid_t pid, pid_t ppid, const std::string& ns_pids, uint64_t start = 100) {
    fs::create_directories(fs::path(root_) / std::to_string(pid));
    std::ofstream(absl::StrCat(root_, "/", pid, "/status"))
        << "Name:\tx\nPid:\t" << pid << "\nPPid:\t" << ppid << "\nNSpid:\t" << ns_pids << "\n";
    std::ofstream(absl::StrCat(root_, "/", pid, "/stat"))
        << pid << " (x) S " << ppid << " 1 1 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 " << start
        << " 0 10\n";
  }
  std::string root_;
};

// runner -> catatonit (pid 1 inside) -> conmon (the host's namespace) -> host init.
TEST_F(NestedNamespaceInitTest, ARunnersChainEndsAtItsNamespacesInit) {
  Process(1, 0, "1");
  Process(201, 1, "201");
  Process(202, 201, "202\t1", 777);
  Process(203, 202, "203\t2");
  std::optional<ProcessRef> init = NestedNamespaceInit(root_, 203);
  ASSERT_TRUE(init.has_value());
  EXPECT_EQ(init->pid, 202);
  EXPECT_EQ(init->start_time, 777u);
  // A process that is its namespace's init (gVisor's gofer) is its own.
  init = NestedNamespaceInit(root_, 202);
  ASSERT_TRUE(init.has_value());
  EXPECT_EQ(init->pid, 202);
}

TEST_F(NestedNamespaceInitTest, NothingForAProcessOfTheHostsOwnNamespace) {
  Process(1, 0, "1");
  Process(50, 1, "50");
  EXPECT_EQ(NestedNamespaceInit(root_, 50), std::nullopt) << "never the host's init";
  EXPECT_EQ(NestedNamespaceInit(root_, 1), std::nullopt);
  EXPECT_EQ(NestedNamespaceInit("/proc", getpid()), std::nullopt) << "this test, on the host";
}

TEST_F(NestedNamespaceInitTest, NothingWhenTheChainLeavesTheNamespaceOrCannotBeRead) {
  Process(1, 0, "1");
  // The parent is in the host's namespace before any pid 1 inside was met.
  Process(301, 1, "301");
  Process(303, 301, "303\t5");
  EXPECT_EQ(NestedNamespaceInit(root_, 303), std::nullopt);
  // A parent that is gone.
  Process(403, 402, "403\t2");
  EXPECT_EQ(NestedNamespaceInit(root_, 403), std::nullopt);
  // Parents at the same depth that never reach a pid 1: a loop.
  Process(501, 502, "501\t3");
  Process(502, 501, "502\t4");
  EXPECT_EQ(NestedNamespaceInit(root_, 501), std::nullopt);
  // Garbage where NSpid's numbers belong, and a status naming another pid.
  Process(601, 1, "601\tx");
  EXPECT_EQ(NestedNamespaceInit(root_, 601), std::nullopt);
  Process(701, 1, "9\t1");
  EXPECT_EQ(NestedNamespaceInit(root_, 701), std::nullopt);
  EXPECT_EQ(NestedNamespaceInit(root_, 999), std::nullopt) << "no such process";
}

}  // namespace
}  // namespace sandboxd
