// The readers behind GetSessionStats (resource_usage.h), on fixture text and fixture
// cgroup trees: what a kernel writes, and what a hostile or broken one could.
#include "sandboxd/resource_usage.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;

TEST(ParseCgroupValueTest, NumbersMaxAndGarbage) {
  EXPECT_EQ(*ParseCgroupValue("123\n"), 123u);
  EXPECT_EQ(*ParseCgroupValue("0"), 0u);
  EXPECT_EQ(*ParseCgroupValue("max\n"), std::nullopt);
  for (const char* bad : {"", "\n", "-5", "+5", "12abc", "max2", "1 2", "18446744073709551616"}) {
    EXPECT_FALSE(ParseCgroupValue(bad).ok()) << bad;
  }
}

TEST(ParseCgroupValueTest, V1UnlimitedIsNoLimit) {
  EXPECT_EQ(V1LimitOrZero(9223372036854771712ull), 0u);  // PAGE_COUNTER_MAX on 4 KiB pages
  EXPECT_EQ(V1LimitOrZero(268435456), 268435456u);
}

TEST(ParseCpuStatTest, UsageUsec) {
  EXPECT_EQ(*ParseCpuStatUsageUsec("usage_usec 2500\nuser_usec 2000\nsystem_usec 500\n"), 2500u);
  EXPECT_EQ(*ParseCpuStatUsageUsec("nr_periods 0\nusage_usec 7"), 7u);
  EXPECT_FALSE(ParseCpuStatUsageUsec("user_usec 2000\n").ok());
  EXPECT_FALSE(ParseCpuStatUsageUsec("usage_usec lots\n").ok());
  EXPECT_FALSE(ParseCpuStatUsageUsec("usage_usec -1\n").ok());
  EXPECT_FALSE(ParseCpuStatUsageUsec("").ok());
}

TEST(ParseProcCgroupTest, V1ControllersV2PathAndJunk) {
  auto m = ParseProcCgroup(
      "12:pids:/libpod_parent/libpod-abc\n"
      "4:memory:/libpod_parent/libpod-abc\n"
      "2:cpu,cpuacct:/libpod_parent/libpod-abc\n"
      "junk line\n"
      "3:cpuset:\n"
      "0::/user.slice/a:b\n");
  EXPECT_EQ(m["pids"], "/libpod_parent/libpod-abc");
  EXPECT_EQ(m["memory"], "/libpod_parent/libpod-abc");
  EXPECT_EQ(m["cpu"], "/libpod_parent/libpod-abc");
  EXPECT_EQ(m["cpuacct"], "/libpod_parent/libpod-abc");
  EXPECT_EQ(m[""], "/user.slice/a:b");  // a ':' in the path is the path's
  EXPECT_EQ(m.count("cpuset"), 0u);
}

// A stat line; `comm` is whatever the process named itself.
std::string StatLine(int pid, const std::string& comm, int ppid, int utime, int stime,
                     int cutime, int cstime, int threads, int start, int rss) {
  return absl::StrCat(pid, " (", comm, ") S ", ppid, " 1 1 0 -1 4194560 100 0 0 0 ", utime, " ",
                      stime, " ", cutime, " ", cstime, " 20 0 ", threads, " 0 ", start,
                      " 10000000 ", rss, " 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0\n");
}

TEST(ParseProcStatTest, FieldsEvenWithAHostileComm) {
  absl::StatusOr<ProcStat> s = ParseProcStat(StatLine(42, ") S 1 2 (x", 7, 11, 12, 13, 14, 3, 999, 256));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pid, 42);
  EXPECT_EQ(s->ppid, 7);
  EXPECT_EQ(s->utime, 11u);
  EXPECT_EQ(s->stime, 12u);
  EXPECT_EQ(s->cutime, 13u);
  EXPECT_EQ(s->cstime, 14u);
  EXPECT_EQ(s->num_threads, 3u);
  EXPECT_EQ(s->starttime, 999u);
  EXPECT_EQ(s->rss_pages, 256u);
}

TEST(ParseProcStatTest, GarbageIsAnError) {
  EXPECT_FALSE(ParseProcStat("").ok());
  EXPECT_FALSE(ParseProcStat("42 (python3 S 1 2 3").ok());  // no ')'
  EXPECT_FALSE(ParseProcStat("42 (python3) S 1 2 3\n").ok());  // too short
  EXPECT_FALSE(ParseProcStat("x (python3)" + StatLine(1, "a", 0, 0, 0, 0, 0, 1, 1, 1).substr(7)).ok());
  std::string bad_utime = StatLine(42, "p", 1, 5, 6, 0, 0, 1, 1, 1);
  bad_utime.replace(bad_utime.find(" 5 6 "), 5, " x 6 ");
  EXPECT_FALSE(ParseProcStat(bad_utime).ok());
}

TEST(SumProcessTreeTest, OnlyTheTreeUnderTheRootCounts) {
  std::vector<ProcStat> stats;
  auto add = [&](pid_t pid, pid_t ppid, uint64_t ticks, uint64_t threads, uint64_t rss) {
    ProcStat s;
    s.pid = pid;
    s.ppid = ppid;
    s.utime = ticks;
    s.cstime = 1;
    s.num_threads = threads;
    s.rss_pages = rss;
    stats.push_back(s);
  };
  add(10, 1, 100, 1, 10);   // the container's init
  add(11, 10, 50, 4, 100);  // the runner
  add(12, 11, 25, 1, 20);   // a subprocess of the code
  add(20, 1, 1000, 9, 999);  // someone else's
  absl::StatusOr<ResourceUsage> u = SumProcessTree(stats, 10, 100, 4096);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->source, "procfs");
  EXPECT_EQ(u->cpu_time_ns, (175u + 3u) * 10000000u);  // ticks of 10 ms
  EXPECT_EQ(u->processes, 6u);
  EXPECT_EQ(u->memory_bytes, 130u * 4096u);
  EXPECT_EQ(SumProcessTree(stats, 99, 100, 4096).status().code(), absl::StatusCode::kNotFound);
  // A cycle (only fixture text can say that) ends instead of looping.
  stats[0].ppid = 12;
  EXPECT_TRUE(SumProcessTree(stats, 10, 100, 4096).ok());
}

class CgroupTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sbxcg-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }
  void Write(const std::string& rel, const std::string& text) {
    fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string root_;
};

constexpr char kV1Cgroup[] =
    "8:pids:/libpod_parent/libpod-c\n4:memory:/libpod_parent/libpod-c\n"
    "2:cpuacct:/libpod_parent/libpod-c\n";

TEST_F(CgroupTreeTest, V1) {
  const std::string c = "libpod_parent/libpod-c/";
  Write("memory/" + c + "memory.usage_in_bytes", "110100480\n");
  Write("memory/" + c + "memory.max_usage_in_bytes", "120000000\n");
  Write("memory/" + c + "memory.limit_in_bytes", "268435456\n");
  Write("cpuacct/" + c + "cpuacct.usage", "1500000000\n");
  Write("pids/" + c + "pids.current", "5\n");
  Write("pids/" + c + "pids.max", "128\n");
  Write("memory/" + c + "memory.kmem.usage_in_bytes", "786432\n");
  Write("memory/" + c + "cgroup.procs", "20\n21\n");
  absl::StatusOr<ResourceUsage> u = ReadCgroupUsage(root_, kV1Cgroup);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->source, "cgroup_v1");
  EXPECT_EQ(u->kernel_memory_bytes, 786432u);
  EXPECT_EQ(u->pids, (std::vector<pid_t>{20, 21}));
  EXPECT_EQ(u->memory_bytes, 110100480u);
  EXPECT_EQ(u->memory_peak_bytes, 120000000u);
  EXPECT_EQ(u->memory_limit_bytes, 268435456u);
  EXPECT_EQ(u->cpu_time_ns, 1500000000u);
  EXPECT_EQ(u->processes, 5u);
  EXPECT_EQ(u->pids_limit, 128u);
  EXPECT_FALSE(u->workspace_known);
}

TEST_F(CgroupTreeTest, V1NoLimitsGarbageAndMissingFilesAreZero) {
  const std::string c = "libpod_parent/libpod-c/";
  Write("memory/" + c + "memory.usage_in_bytes", "4096\n");
  Write("memory/" + c + "memory.max_usage_in_bytes", "lots\n");
  Write("memory/" + c + "memory.limit_in_bytes", "9223372036854771712\n");
  Write("pids/" + c + "pids.max", "max\n");
  absl::StatusOr<ResourceUsage> u = ReadCgroupUsage(root_, kV1Cgroup);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->memory_bytes, 4096u);
  EXPECT_EQ(u->memory_peak_bytes, 0u);
  EXPECT_EQ(u->memory_limit_bytes, 0u);
  EXPECT_EQ(u->cpu_time_ns, 0u);
  EXPECT_EQ(u->processes, 0u);
  EXPECT_EQ(u->pids_limit, 0u);
}

TEST_F(CgroupTreeTest, NothingReadableIsUnavailable) {
  EXPECT_EQ(ReadCgroupUsage(root_, kV1Cgroup).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReadCgroupUsage(root_, "0::/gone\n").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(ReadCgroupUsage(root_, "").status().code(), absl::StatusCode::kUnavailable);
  // A path that climbs out of the hierarchy is not followed.
  Write("memory/memory.usage_in_bytes", "1\n");
  EXPECT_EQ(ReadCgroupUsage(root_ + "/memory/x", "4:memory:/../..\n").status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(CgroupTreeTest, V2) {
  Write("s/c/memory.current", "104857600\n");
  Write("s/c/memory.peak", "209715200\n");
  Write("s/c/memory.max", "max\n");
  Write("s/c/cpu.stat", "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n");
  Write("s/c/pids.current", "3\n");
  Write("s/c/pids.max", "64\n");
  absl::StatusOr<ResourceUsage> u = ReadCgroupUsage(root_, "0::/s/c\n");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->source, "cgroup_v2");
  EXPECT_EQ(u->memory_bytes, 104857600u);
  EXPECT_EQ(u->memory_peak_bytes, 209715200u);
  EXPECT_EQ(u->memory_limit_bytes, 0u);
  EXPECT_EQ(u->cpu_time_ns, 2500000000u);
  EXPECT_EQ(u->processes, 3u);
  EXPECT_EQ(u->pids_limit, 64u);
}

TEST(ProcTreeTest, ThisProcessIsReadFromProc) {
  absl::StatusOr<ResourceUsage> u = ReadProcTreeUsage("/proc", getpid());
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_GE(u->processes, 1u);
  EXPECT_GT(u->memory_bytes, 1u << 20);
  absl::StatusOr<uint64_t> start = ProcessStartTime("/proc", getpid());
  ASSERT_TRUE(start.ok());
  EXPECT_GT(*start, 0u);
  EXPECT_EQ(ProcessStartTime("/proc", 0x3ffffffe).status().code(), absl::StatusCode::kNotFound);
}

// Pss is summed, not Pss_Anon or SwapPss; gone or unreadable processes count 0, and none
// readable at all is nullopt (the caller keeps the resident sets then). The fixture is a
// proc root, as CgroupTreeTest's is a cgroup root.
TEST_F(CgroupTreeTest, ProportionalSetSizesAreSummed) {
  Write("10/smaps_rollup",
        "00400000-7ffc0 ---p 00000000 00:00 0 [rollup]\nRss: 200000 kB\nPss: 150000 kB\n"
        "Pss_Anon: 140000 kB\nSwapPss: 7 kB\n");
  Write("11/smaps_rollup", "Pss_Anon: 9 kB\nPss:  1024 kB\n");
  Write("12/smaps_rollup", "Pss: garbage\n");
  EXPECT_EQ(SumProportionalResident(root_, {10, 11, 12, 13}), uint64_t{151024} << 10);
  EXPECT_EQ(SumProportionalResident(root_, {12, 13}), std::nullopt);
  std::optional<uint64_t> self = SumProportionalResident("/proc", {getpid()});
  ASSERT_TRUE(self.has_value());
  EXPECT_GT(*self, 1u << 20);
}

TEST(ParseMemoryStatKernelTest, KernelLineElseItsParts) {
  EXPECT_EQ(ParseMemoryStatKernel("anon 4096\nkernel 73728\nkernel_stack 16384\nslab 9\n"),
            73728u);
  EXPECT_EQ(ParseMemoryStatKernel("anon 4096\nkernel_stack 16384\npagetables 8192\n"
                                  "percpu 100\nsock 0\nslab 1000\nsec_pagetables 4\nfile 7\n"),
            16384u + 8192u + 100u + 1000u + 4u);
  EXPECT_EQ(ParseMemoryStatKernel("anon 4096\nkernel -1\nslab x\n"), std::nullopt);
  EXPECT_EQ(ParseMemoryStatKernel(""), std::nullopt);
}

TEST(ParseCgroupProcsTest, PidsOneALine) {
  EXPECT_EQ(ParseCgroupProcs("12\n345\n\nx\n-3\n0\n7"), (std::vector<pid_t>{12, 345, 7}));
}

// The session's cost from a fixture proc root: the cgroup's processes and conmon (outside
// it) summed by Pss; the cgroup's kernel memory stays as it read it.
TEST_F(CgroupTreeTest, CgroupProcessesAndConmonSummedByPss) {
  ResourceUsage u;
  u.source = "cgroup_v1";
  u.pids = {20, 21};
  u.kernel_memory_bytes = 786432;
  Write("20/smaps_rollup", "Rss: 900 kB\nPss: 100 kB\n");
  Write("21/smaps_rollup", "Pss: 9000 kB\n");
  Write("21/status", "VmPTE: 64 kB\n");  // not read: the cgroup said it
  Write("30/smaps_rollup", "Pss: 400 kB\n");
  Write("31/smaps_rollup", "Pss: 50000 kB\n");  // not the session's
  AddProcessPss(root_, {30}, &u);
  EXPECT_EQ(u.pss_bytes, uint64_t{9500} << 10);
  EXPECT_EQ(u.kernel_memory_bytes, 786432u);
}

TEST_F(CgroupTreeTest, V2KernelMemoryAndProcesses) {
  Write("s/c/memory.current", "104857600\n");
  Write("s/c/memory.stat", "anon 1\nkernel 65536\n");
  Write("s/c/cgroup.procs", "5\n");
  absl::StatusOr<ResourceUsage> u = ReadCgroupUsage(root_, "0::/s/c\n");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->kernel_memory_bytes, 65536u);
  EXPECT_EQ(u->pids, (std::vector<pid_t>{5}));
}

// Without a cgroup (procfs), the kernel's share is the processes' page tables; nothing
// readable leaves both figures unknown (0).
TEST_F(CgroupTreeTest, ProcfsPssAndPageTables) {
  ResourceUsage u;
  u.source = "procfs";
  u.pids = {40, 41};
  Write("40/smaps_rollup", "Pss: 2048 kB\n");
  Write("40/status", "Name: x\nVmPTE:\t  80 kB\nThreads: 4\n");
  Write("41/smaps_rollup", "Pss: 1024 kB\n");
  Write("41/status", "VmPTE: 48 kB\n");
  AddProcessPss(root_, {}, &u);
  EXPECT_EQ(u.pss_bytes, uint64_t{3072} << 10);
  EXPECT_EQ(u.kernel_memory_bytes, uint64_t{128} << 10);
  ResourceUsage gone;
  gone.source = "procfs";
  gone.pids = {99};
  AddProcessPss(root_, {}, &gone);
  EXPECT_EQ(gone.pss_bytes, 0u);
  EXPECT_EQ(gone.kernel_memory_bytes, 0u);
}

// conmon is the parent of a container's init; any other parent is not counted.
TEST_F(CgroupTreeTest, ParentNamedConmon) {
  Write("50/stat", "50 (catatonit) S 49 50 50 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 100 0 10\n");
  Write("49/comm", "conmon\n");
  Write("60/stat", "60 (python3) S 59 60 60 0 -1 0 0 0 0 0 1 2 0 0 20 0 1 0 100 0 10\n");
  Write("59/comm", "bash\n");
  EXPECT_EQ(ParentNamed(root_, 50, "conmon"), std::optional<pid_t>(49));
  EXPECT_EQ(ParentNamed(root_, 60, "conmon"), std::nullopt);
  EXPECT_EQ(ParentNamed(root_, 70, "conmon"), std::nullopt);
}

TEST(WorkspaceUsageTest, StatvfsOfADirectoryAndNothingForAMissingOne) {
  ResourceUsage u;
  ReadWorkspaceUsage("/tmp", &u);
  EXPECT_TRUE(u.workspace_known);
  EXPECT_GT(u.workspace_limit_bytes, 0u);
  EXPECT_LE(u.workspace_bytes, u.workspace_limit_bytes);
  ResourceUsage none;
  ReadWorkspaceUsage("/nonexistent/workspace", &none);
  EXPECT_FALSE(none.workspace_known);
}

}  // namespace
}  // namespace sandboxd
