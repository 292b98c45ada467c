// Integration: sandboxd as an ordinary user with rootless Podman (the systemd user
// service case). The test creates the account with /etc/subuid and /etc/subgid ranges,
// gives it the sandbox image, and runs the daemon as that user. On this cgroup v1 host
// rootless Podman cannot enforce cgroup limits, so the daemon must fall back to rlimits
// and say so.
#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "opt_out.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;
using sandbox::v1::Finished;

constexpr char kUser[] = "sandboxd-rootless";
constexpr char kImage[] = "localhost/sandboxd-python:bookworm";
constexpr char kRootfsTar[] = "/var/cache/sandboxd/rootfs.tar";

std::string Must(const std::string& cmd) {
  int rc = -1;
  std::string out = Sh(cmd + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << cmd << "\n" << out;
  return out;
}

// Creates (once) an unprivileged account ready for rootless podman.
std::optional<RunAs> PrepareUser() {
  if (getpwnam(kUser) == nullptr) Must(std::string("useradd --create-home --shell /bin/sh ") + kUser);
  passwd* pw = getpwnam(kUser);
  if (pw == nullptr) return std::nullopt;
  RunAs r;
  r.user = kUser;
  r.uid = pw->pw_uid;
  r.gid = pw->pw_gid;
  r.home = pw->pw_dir;
  for (const char* file : {"/etc/subuid", "/etc/subgid"}) {
    if (Sh(std::string("grep -c '^") + kUser + ":' " + file).rfind("0", 0) == 0) {
      Must(std::string("usermod ") + (std::string(file) == "/etc/subuid" ? "--add-subuids" : "--add-subgids") +
           " 400000-465535 " + kUser);
    }
  }
  r.runtime_dir = "/run/user/" + std::to_string(r.uid);
  fs::create_directories(r.runtime_dir);
  chown(r.runtime_dir.c_str(), r.uid, r.gid);
  chmod(r.runtime_dir.c_str(), 0700);
  // No systemd user session here: cgroupfs and file events, as on a headless server.
  std::string conf_dir = r.home + "/.config/containers";
  fs::create_directories(conf_dir);
  std::ofstream(conf_dir + "/containers.conf")
      << "[engine]\ncgroup_manager = \"cgroupfs\"\nevents_logger = \"file\"\n";
  Must("chown -R " + std::to_string(r.uid) + ":" + std::to_string(r.gid) + " " + r.home + "/.config");
  // A copy of the daemon and its runner that the user can execute and read, wherever
  // the checkout lives.
  std::string bin_dir = "/tmp/sandboxd-rootless-bin";
  fs::create_directories(bin_dir);
  fs::copy_file(SandboxdBinary(), bin_dir + "/sandboxd", fs::copy_options::overwrite_existing);
  fs::copy_file(fs::path(SandboxdBinary()).parent_path() / "sandbox_runner.pyz",
                bin_dir + "/sandbox_runner.pyz", fs::copy_options::overwrite_existing);
  Must("chmod -R a+rX " + bin_dir);
  r.binary = bin_dir + "/sandboxd";
  return r;
}

class RootlessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (OptedOut()) return;
    ASSERT_EQ(geteuid(), 0u) << "the rootless test creates a user account and must start as root";
    // ctest runs each test in a process of its own, two at a time: the account, its copy of
    // the binaries and its image are shared, so one rootless test at a time.
    lock_fd_ = open("/tmp/sandboxd-rootless-test.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    ASSERT_GE(lock_fd_, 0);
    ASSERT_EQ(flock(lock_fd_, LOCK_EX), 0);
    std::optional<RunAs> r = PrepareUser();
    ASSERT_TRUE(r.has_value());
    run_as_ = new RunAs(*r);
    SandboxdProcess probe({}, "", *run_as_);
    std::string podman = probe.PodmanCommand();
    // The account belongs to this suite: whatever an earlier run left behind (containers,
    // or their processes killed under a pause process podman still expects) is reset first.
    Must(podman + " system migrate");
    Must(podman + " rm --all --force --time 0");
    int rc = -1;
    Sh(podman + " image exists " + kImage, &rc);
    if (rc != 0) {
      ASSERT_TRUE(fs::exists(kRootfsTar))
          << kRootfsTar << " is missing: scripts/setup.sh keeps the image's root filesystem there";
      Must(podman + " import --change 'WORKDIR /workspace' --change 'USER 65534:65534' " + kRootfsTar +
           " " + kImage);
    }
  }
  static void TearDownTestSuite() {
    delete run_as_;
    if (lock_fd_ >= 0) close(lock_fd_);  // releases the lock
  }
  // Creates a user account and needs root: a machine that cannot may opt out, loudly.
  static constexpr char kOptOut[] = "SANDBOXD_TEST_SKIP_ROOTLESS";
  static bool OptedOut() {
    const char* v = std::getenv(kOptOut);
    return v && std::string(v) == "1";
  }
  void SetUp() override { SKIP_IF_OPTED_OUT(kOptOut); }
  static RunAs* run_as_;
  static int lock_fd_;
};
RunAs* RootlessTest::run_as_ = nullptr;
int RootlessTest::lock_fd_ = -1;

TEST_F(RootlessTest, RunsSessionsAsAnOrdinaryUserWithRlimitFallback) {
  SandboxdProcess d({"--pool_size=1", "--memory_mb=200"}, "", *run_as_);
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  grpc::ClientContext ctx;
  sandbox::v1::Info info;
  ASSERT_TRUE(stub->GetInfo(&ctx, {}, &info).ok());
  EXPECT_TRUE(info.rootless());
  EXPECT_EQ(info.memory_enforcement(), "rlimit");
  EXPECT_EQ(info.pids_enforcement(), "rlimit");
  EXPECT_FALSE(info.cpu_enforced());
  bool noted = false;
  for (const auto& n : info.notes()) noted |= n.find("RLIMIT") != std::string::npos;
  EXPECT_TRUE(noted) << info.DebugString();
  EXPECT_NE(d.Log().find("rlimit"), std::string::npos) << "the fallback must be logged at start-up";

  sandbox::v1::Session s = CreateSession(*stub);
  // The process rlimit counts per user id, so each container runs as one of its own.
  Finished f = RunCode(*stub, s.id(), "import os\nx = 41\n(os.getuid() >= 10000, os.getcwd())");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "(True, '/workspace')");
  EXPECT_EQ(RunCode(*stub, s.id(), "x + 1").result_repr(), "42");
  // The data rlimit stands in for the memory cgroup: a large allocation fails in Python
  // and the session survives.
  f = RunCode(*stub, s.id(), "try:\n    b = bytearray(400 * 1024 * 1024)\nexcept MemoryError:\n    r = 'MemoryError'\nr");
  EXPECT_EQ(f.result_repr(), "'MemoryError'") << f.DebugString();
  EXPECT_EQ(RunCode(*stub, s.id(), "x").result_repr(), "41");
  // Without a cgroup of its own the session's use is summed over its processes in /proc,
  // and the limits in force are the session's (as rlimits).
  ASSERT_EQ(RunCode(*stub, s.id(), "y = bytearray(50 << 20)\nsum(range(10**6))").status(), Finished::OK);
  grpc::ClientContext stats_ctx;
  sandbox::v1::GetSessionStatsRequest stats_req;
  stats_req.set_session_id(s.id());
  sandbox::v1::SessionStats stats;
  grpc::Status st = stub->GetSessionStats(&stats_ctx, stats_req, &stats);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(stats.source(), "procfs") << stats.DebugString();
  EXPECT_GE(stats.memory_bytes(), 50u << 20) << stats.DebugString();
  EXPECT_GT(stats.cpu_time_ms(), 0u) << stats.DebugString();
  EXPECT_GE(stats.processes(), 1u) << stats.DebugString();
  EXPECT_EQ(stats.memory_limit_bytes(), 200u << 20) << stats.DebugString();
  EXPECT_EQ(stats.pids_limit(), s.limits().pids()) << stats.DebugString();
  std::printf("rootless stats: %s\n", stats.ShortDebugString().c_str());

  // Restart as the same user: the session is re-attached with its variables.
  ASSERT_EQ(d.Stop(), 0);
  ASSERT_TRUE(d.Start());
  stub = d.Stub();
  EXPECT_EQ(RunCode(*stub, s.id(), "x").result_repr(), "41");
  grpc::ClientContext del_ctx;
  sandbox::v1::DeleteSessionRequest del;
  del.set_session_id(s.id());
  sandbox::v1::DeleteSessionResponse del_resp;
  EXPECT_TRUE(stub->DeleteSession(&del_ctx, del, &del_resp).ok());
  EXPECT_EQ(d.Stop(), 0);
  EXPECT_EQ(d.LiveContainers(), 0) << "leaked containers";
}

// RLIMIT_NPROC is the only process limit here, and it counts per user id: with every
// container running as uid 65534, threads of one session left the others unable to start
// one. Each session has its own uid (and so its own limit) now.
TEST_F(RootlessTest, OneSessionAtItsProcessLimitDoesNotStarveAnother) {
  SandboxdProcess d({"--pool_size=0", "--pids=40"}, "", *run_as_);
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session greedy = CreateSession(*stub);
  sandbox::v1::Session other = CreateSession(*stub);
  // constexpr: absl::StrFormat checks its format at compile time (clang rejects a runtime one).
  static constexpr char kStartThreads[] = R"(
import threading, time
started = 0
for _ in range(%d):
    try:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        started += 1
    except RuntimeError:
        break
started)";
  Finished f = RunCode(*stub, greedy.id(), absl::StrFormat(kStartThreads, 200));
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_LT(std::stoi(f.result_repr()), 40) << "the limit did not hold";
  f = RunCode(*stub, other.id(), absl::StrFormat(kStartThreads, 20));
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "20") << "the greedy session used up the other's process limit";
  for (const auto& s : {greedy, other}) {
    grpc::ClientContext ctx;
    sandbox::v1::DeleteSessionRequest del;
    del.set_session_id(s.id());
    sandbox::v1::DeleteSessionResponse resp;
    EXPECT_TRUE(stub->DeleteSession(&ctx, del, &resp).ok());
  }
  EXPECT_EQ(d.Stop(), 0);
  EXPECT_EQ(d.LiveContainers(), 0) << "leaked containers";
}

// gVisor's runsc would start here (with its ignore-cgroups flag), but nothing would bound
// a session's memory: the daemon refuses to start and says why.
TEST_F(RootlessTest, GvisorIsRefusedWhereNothingWouldBoundMemory) {
  SandboxdProcess probe({}, "", *run_as_);
  const std::string command = probe.PodmanCommand();  // podman as the user
  const std::string as_user = command.substr(0, command.find(" sh -c "));
  int rc = -1;
  std::string out = Sh(as_user + " sh -c 'cd ~ && exec /tmp/sandboxd-rootless-bin/sandboxd "
                       "--isolation=gvisor --pool_size=0' 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("gVisor needs cgroup limits"), std::string::npos) << out;
  EXPECT_NE(out.find("--isolation=container"), std::string::npos) << out;
}

}  // namespace
}  // namespace sandboxd::testing
