// Integration: the daemon against a podman CLI that fails (a wrapper around the real one):
// containers that cannot start (health, recovery by itself, the self-check's reason) and
// containers that cannot be removed (a deleted session's code stops all the same). These
// daemons start containers with the CLI (--podman_api=false); podman_api_test.cc has the
// API service's faults.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;

// A podman whose `run` fails the way a missing init binary makes it fail while `broken`
// exists, whose `rm` fails while `rm_broken` exists, whose subcommands hang as told, and is
// the real podman otherwise.
class BreakablePodman {
 public:
  BreakablePodman() {
    dir_ = "/tmp/sbx-breakable-" + std::to_string(getpid());
    fs::create_directories(dir_);
    std::string real = Sh("command -v podman");
    real.pop_back();
    std::ofstream(path()) << "#!/bin/sh\n"
                          << "echo \"$*\" >> " << dir_ << "/calls\n"
                          << "for a in \"$@\"; do\n"
                          << "  if [ \"$a\" = run ] && [ -e " << dir_ << "/broken ]; then\n"
                          << "    echo 'Error: container-init binary not found on the host (test)' >&2\n"
                          << "    exit 125\n"
                          << "  fi\n"
                          << "  if [ \"$a\" = rm ] && rm " << dir_ << "/rm_fails_once 2>/dev/null; then\n"
                          << "    echo 'Error: container state improper: stopped (test)' >&2\n"
                          << "    exit 2\n"
                          << "  fi\n"
                          << "  if [ \"$a\" = rm ] && [ -e " << dir_ << "/rm_broken ]; then\n"
                          << "    echo 'Error: cannot remove: storage is locked (test)' >&2\n"
                          << "    exit 125\n"
                          << "  fi\n"
                          << "  if [ -e \"" << dir_ << "/hang_$a\" ]; then\n"
                          << "    : > \"" << dir_ << "/hung_$a\"\n"
                          << "    exec sleep 600\n"
                          << "  fi\n"
                          << "done\n"
                          << "exec " << real << " \"$@\"\n";
    fs::permissions(path(), fs::perms::owner_all);
  }
  ~BreakablePodman() { fs::remove_all(dir_); }
  std::string path() const { return dir_ + "/podman"; }
  void Break() { std::ofstream(dir_ + "/broken") << "1"; }
  void Repair() { fs::remove(dir_ + "/broken"); }
  // `podman rm` fails (as when podman waits on a lock and times out) until RepairRemoval.
  void BreakRemoval() { std::ofstream(dir_ + "/rm_broken") << "1"; }
  void RepairRemoval() { fs::remove(dir_ + "/rm_broken"); }
  // The next `podman rm` fails (as for a container between running and stopped), later
  // ones work.
  void FailRemovalOnce() { std::ofstream(dir_ + "/rm_fails_once") << "1"; }
  // `podman` with this argument (a subcommand, or a label such as the gVisor check's) hangs
  // (as podman waiting on a lock another process keeps) until it is killed; Hung says
  // whether one has started hanging.
  void Hang(const std::string& argument) { std::ofstream(dir_ + "/hang_" + argument) << "1"; }
  bool Hung(const std::string& argument) const { return fs::exists(dir_ + "/hung_" + argument); }
  // Every command podman was asked to run so far, one per line.
  std::string Calls() const { return Sh("cat " + dir_ + "/calls 2>/dev/null"); }

 private:
  std::string dir_;
};

TEST(LifecycleTest, NotServingWhileContainersCannotStartAndRecoversByItself) {
  using grpc::health::v1::HealthCheckResponse;
  BreakablePodman podman;
  podman.Break();
  SandboxdProcess d({"--podman=" + podman.path(), "--podman_api=false", "--pool_size=1"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  // The pool's first start fails.
  ASSERT_TRUE(WaitFor([&] { return d.Log().find("cannot start containers") != std::string::npos; }))
      << d.Log();
  for (const char* service : {"", "sandbox.v1.SandboxService"}) {
    EXPECT_EQ(Health(d, service), HealthCheckResponse::NOT_SERVING) << service;
  }
  sandbox::v1::Info info = GetInfo(*stub);
  EXPECT_FALSE(info.serving());
  ASSERT_GT(info.notes_size(), 0);
  EXPECT_NE(info.notes(0).find("container-init binary not found"), std::string::npos) << info.notes(0);
  grpc::Status st = TryCreate(*stub);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_NE(st.error_message().find("container-init binary not found"), std::string::npos)
      << st.error_message();
  EXPECT_NE(d.Log().find("cannot start containers"), std::string::npos) << d.Log();

  podman.Repair();  // nobody calls: the daemon finds out by itself
  EXPECT_TRUE(WaitFor([&] { return Health(d, "sandbox.v1.SandboxService") == HealthCheckResponse::SERVING; },
                      40000))
      << d.Log();
  EXPECT_EQ(Health(d, ""), HealthCheckResponse::SERVING);
  EXPECT_TRUE(GetInfo(*stub).serving());
  EXPECT_TRUE(TryCreate(*stub).ok());
}

// Code that keeps a core busy after its run returns.
constexpr char kSpin[] =
    "import threading\n"
    "def spin():\n"
    "    while True:\n"
    "        pass\n"
    "threading.Thread(target=spin, daemon=True).start()\n"
    "print('spinning')";

// Code that calls listen() on the runner's socket from a child process, which then exits.
constexpr char kListenOnTheRunnersSocket[] =
    "import os, socket\n"
    "fds = []\n"
    "for f in os.listdir('/proc/self/fd'):\n"
    "    try:\n"
    "        s = socket.socket(fileno=os.dup(int(f)))\n"
    "    except OSError:\n"
    "        continue\n"
    "    try:\n"
    "        if (s.family == socket.AF_UNIX and\n"
    "                s.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) and\n"
    "                str(s.getsockname()).endswith('runner.sock')):\n"
    "            fds.append(int(f))\n"
    "    except OSError:\n"
    "        pass\n"
    "    s.close()\n"
    "if fds:\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        socket.socket(fileno=os.dup(fds[0])).listen(4)\n"
    "        os._exit(0)\n"
    "    os.waitpid(pid, 0)\n"
    "print('listened' if fds else 'no listener')\n";

// A `podman rm` that fails once (under gVisor, a container whose init sandboxd has just
// killed can be "not running" yet not stopped for podman) is tried again: a clean stop
// leaves no pool container behind.
TEST(LifecycleTest, ARemovalThatFailsOnceAtStopIsTriedAgain) {
  BreakablePodman podman;
  SandboxdProcess d({"--podman=" + podman.path(), "--podman_api=false", "--pool_size=1"});
  ASSERT_TRUE(d.Start());
  ASSERT_TRUE(WaitFor([&] { return GetInfo(*d.Stub()).pool_ready() == 1 && d.LiveContainers() == 1; }))
      << d.Log();
  podman.FailRemovalOnce();
  EXPECT_EQ(d.Stop(), 0);
  EXPECT_EQ(d.LiveContainers(), 0) << "the pool's container stayed after a failed podman rm\n" << d.Log();
}

// A stop is not held by a podman that hangs: the commands still running at
// --shutdown_grace are killed, so the daemon exits within systemd's TimeoutStopSec=30 (the
// harness's Stop kills it after 30 s and fails the test), however long --podman_timeout is.
// Here the previous run's listing, which the pool's thread waits on.
TEST(LifecycleTest, AStopIsNotHeldByARecoveryWhosePodmanHangs) {
  BreakablePodman podman;
  podman.Hang("ps");
  SandboxdProcess d({"--podman=" + podman.path(), "--podman_api=false", "--pool_size=1",
                     "--podman_timeout=10m", "--shutdown_grace=2s", "--start_runtime_wait=2s"});
  ASSERT_TRUE(d.Start());
  ASSERT_TRUE(WaitFor([&] { return podman.Hung("ps"); })) << d.Log();
  EXPECT_EQ(d.Stop(), 0) << d.Log();
}

// A SIGTERM while the start waits for podman ends the wait, however long
// --start_runtime_wait is, and the start with it: the daemon stops without serving, and
// asks podman nothing more. Whatever the start waited on: the previous run's listing (no
// images' inspection, no pool then), the gVisor check's container (no check under runc
// after it), the images' inspection (not the next image).
TEST(LifecycleTest, ASigtermDuringTheStartIsNotHeldByAPodmanThatHangs) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"ps", {}}, {"run", {"--allowed_isolations=gvisor"}}, {"inspect", {"--start_images_wait=10m"}}};
  for (const auto& [hung, more] : cases) {
    SCOPED_TRACE(hung);
    BreakablePodman podman;
    podman.Hang(hung);
    std::vector<std::string> flags = {"--podman=" + podman.path(), "--podman_api=false", "--pool_size=1",
                                      "--podman_timeout=10m", "--shutdown_grace=2s", "--start_runtime_wait=10m"};
    flags.insert(flags.end(), more.begin(), more.end());
    SandboxdProcess d(flags);
    d.Launch();
    ASSERT_TRUE(WaitFor([&] { return podman.Hung(hung); })) << d.Log();
    const std::string calls = podman.Calls();
    EXPECT_EQ(d.Stop(), 0) << d.Log();
    EXPECT_EQ(podman.Calls(), calls) << "podman was asked more after the SIGTERM\n" << d.Log();
    const std::string log = d.Log();
    EXPECT_NE(log.find("before serving: stopping"), std::string::npos) << log;
    for (const char* wrong : {"serving on", "has not answered", "deferred", "cannot start containers"}) {
      EXPECT_EQ(log.find(wrong), std::string::npos) << wrong << "\n" << log;
    }
    EXPECT_EQ(log.substr(log.rfind("stopped")), "stopped\n") << "logged after \"stopped\"\n" << log;
  }
}

// The start's waits for podman share one deadline: with gVisor allowed, its check and the
// runtime's probe each wait for a `podman info` that hangs, and the daemon answers
// (NOT_SERVING) after --start_runtime_wait in all, not after one such wait per check. The
// check's container (`podman run` under runsc) hanging holds the start no longer either.
TEST(LifecycleTest, TheStartWaitsForAHungPodmanOnceNotOncePerCheck) {
  for (const char* hung : {"info", "run"}) {
    SCOPED_TRACE(hung);
    BreakablePodman podman;
    podman.Hang(hung);
    SandboxdProcess d({"--podman=" + podman.path(), "--podman_api=false", "--pool_size=1",
                       "--allowed_isolations=gvisor", "--podman_timeout=10m", "--shutdown_grace=2s",
                       "--start_runtime_wait=6s"});
    const auto launched = std::chrono::steady_clock::now();
    ASSERT_TRUE(d.Start());
    const auto answered = std::chrono::steady_clock::now() - launched;
    EXPECT_LT(answered, std::chrono::seconds(10))
        << "answered after " << std::chrono::duration_cast<std::chrono::milliseconds>(answered).count()
        << " ms\n" << d.Log();
    EXPECT_TRUE(podman.Hung(hung)) << d.Log();
    EXPECT_NE(d.Log().find("gVisor check deferred"), std::string::npos) << d.Log();
    EXPECT_EQ(d.Stop(), 0) << d.Log();
  }
}

// A gVisor check deferred by the start's deadline still gives its verdict when it comes:
// here runsc answers `--version` slowly, then fails every container that runc starts, and
// the daemon, serving by then, says at error level that gVisor sessions cannot start. The
// deferral names the time really waited: the least wait, not --start_runtime_wait's 0s.
TEST(LifecycleTest, ADeferredGvisorCheckThatFailsSaysSo) {
  const std::string runsc = "/tmp/sbx-slow-runsc-" + std::to_string(getpid());
  std::ofstream(runsc) << "#!/bin/sh\n"
                       << "case \"$*\" in *--version*) sleep 2; echo 'runsc version test'; exit 0;; esac\n"
                       << "echo 'runsc: this platform cannot run here (test)' >&2\n"
                       << "exit 1\n";
  fs::permissions(runsc, fs::perms::owner_all);
  SandboxdProcess d({"--runsc=" + runsc, "--allowed_isolations=gvisor", "--pool_size=0",
                     "--js_pool_size=0", "--start_runtime_wait=0s"});
  ASSERT_TRUE(d.Start()) << d.Log();
  EXPECT_TRUE(WaitFor([&] { return d.Log().find("deferred at the start, failed") != std::string::npos; }))
      << d.Log();
  const std::string log = d.Log();
  EXPECT_NE(log.find("gVisor sessions cannot start"), std::string::npos) << log;
  EXPECT_NE(log.find("this platform cannot run here (test)"), std::string::npos) << log;
  EXPECT_NE(log.find("podman has not answered in "), std::string::npos) << log;
  EXPECT_EQ(log.find("podman has not answered in 0"), std::string::npos) << log;
  EXPECT_EQ(d.Stop(), 0) << d.Log();
  fs::remove(runsc);
}

// A gVisor check deferred at the start whose container hangs is no client's call: the stop
// ends it after the check's 5 s grace rather than at the end of --shutdown_grace (60 s here). Only the check's
// `run` hangs (it alone has this label): the pool's readiness probe, which starts a
// container even with a pool of 0, is a start under way that a stop lets finish within the
// grace, and a hung one would hold the stop for all of it.
TEST(LifecycleTest, AStopIsNotHeldByADeferredGvisorCheckThatHangs) {
  BreakablePodman podman;
  const std::string check = "io.sandboxd.role=check";
  podman.Hang(check);
  SandboxdProcess d({"--podman=" + podman.path(), "--podman_api=false", "--pool_size=0",
                     "--js_pool_size=0", "--allowed_isolations=gvisor", "--podman_timeout=10m",
                     "--start_runtime_wait=0s", "--shutdown_grace=60s"});
  ASSERT_TRUE(d.Start()) << d.Log();
  // The check may still be asking `runsc --version` or `podman info` when the start's wait
  // ends (a loaded machine): its `run` hangs a little later.
  ASSERT_TRUE(WaitFor([&] { return podman.Hung(check); })) << d.Log();
  EXPECT_EQ(d.Stop(), 0) << d.Log();
  const std::string log = d.Log();
  ASSERT_NE(log.rfind("stopped"), std::string::npos) << log;
  EXPECT_EQ(log.substr(log.rfind("stopped")), "stopped\n") << "logged after \"stopped\"\n" << log;
}

// The real runsc behind a script that notes each call (Created() says whether a `runsc
// create` began since the last Forget()), and what a test leaves running checked and
// cleared: a `podman run` killed while runsc creates its sandbox leaves that sandbox and
// its conmon running, unknown to podman; each conmon is known by its container's name.
class NotedRunsc {
 public:
  NotedRunsc() : dir_("/tmp/sbx-noted-runsc-" + std::to_string(getpid())) {
    fs::create_directories(dir_);
    std::ofstream(path()) << "#!/bin/sh\necho \"$*\" >> " << dir_ << "/calls\nexec /usr/bin/runsc \"$@\"\n";
    fs::permissions(path(), fs::perms::owner_all);
  }
  ~NotedRunsc() { fs::remove_all(dir_); }
  std::string path() const { return dir_ + "/runsc"; }
  void Forget() { fs::remove(dir_ + "/calls"); }
  bool Created() const { return Sh("cat " + dir_ + "/calls 2>/dev/null").find(" create ") != std::string::npos; }
  // Polls every 5 ms (runsc's `start` follows its `create` by about 200 ms).
  bool WaitCreated() const {
    for (int i = 0; i < 4000 && !Created(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return Created();
  }
  // The conmons of containers whose name starts with `prefix`, a line each ("": none), and
  // what they leave removed, so that a failure costs no later test.
  static std::string LeftRunning(const std::string& prefix) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // what is left has settled
    const std::string left = Sh("pgrep -a -f -- '[-]n " + prefix + "' || true");
    if (!left.empty()) {
      Sh("pkill -KILL -f -- '[-]n " + prefix + "' || true");
      Sh("for id in $(runsc --root=/var/run/runsc list -quiet); do podman ps -aq --no-trunc | grep -q $id || "
         "runsc --root=/var/run/runsc delete -force $id; done 2>/dev/null");
    }
    return left;
  }

 private:
  std::string dir_;
};

// A stop during the start's gVisor check leaves no sandbox. The daemon is stopped 0, 100
// and 200 ms after the check's `runsc create` began, each time a new one.
TEST(LifecycleTest, AStopDuringTheGvisorCheckLeavesNoSandbox) {
  NotedRunsc runsc;
  for (int offset_ms : {0, 100, 200}) {
    SCOPED_TRACE(offset_ms);
    runsc.Forget();
    SandboxdProcess d({"--runsc=" + runsc.path(), "--podman_api=false", "--pool_size=0", "--js_pool_size=0",
                       "--allowed_isolations=gvisor", "--start_runtime_wait=0s"});
    d.Launch();
    const std::string name = "sbx-" + d.instance() + "-check";
    ASSERT_TRUE(runsc.WaitCreated()) << d.Log();
    std::this_thread::sleep_for(std::chrono::milliseconds(offset_ms));
    EXPECT_EQ(d.Stop(), 0) << d.Log();
    const std::string left = NotedRunsc::LeftRunning(name + " ");
    EXPECT_EQ(left, "") << "left running after the stop:\n" << left << d.Log();
    EXPECT_EQ(Sh("podman ps -a --format '{{.Names}}' --filter name=^" + name + "$"), "") << d.Log();
  }
}

// The same for a gVisor session's start under way when the stop's grace (0 s here) ends.
TEST(LifecycleTest, AStopDuringAGvisorSessionStartLeavesNoSandbox) {
  NotedRunsc runsc;
  for (int offset_ms : {0, 100, 200}) {
    SCOPED_TRACE(offset_ms);
    SandboxdProcess d({"--runsc=" + runsc.path(), "--podman_api=false", "--pool_size=0", "--js_pool_size=0",
                       "--isolation=gvisor", "--shutdown_grace=0s"});
    ASSERT_TRUE(d.Start()) << d.Log();
    runsc.Forget();  // the start's check is over
    grpc::Status created;
    std::thread creator([&] { created = TryCreate(*d.Stub()); });
    ASSERT_TRUE(runsc.WaitCreated()) << d.Log();
    std::this_thread::sleep_for(std::chrono::milliseconds(offset_ms));
    EXPECT_EQ(d.Stop(), 0) << d.Log();
    creator.join();
    const std::string left = NotedRunsc::LeftRunning("sbx-" + d.instance() + "-");
    EXPECT_EQ(left, "") << "left running after the stop:\n" << left << d.Log();
  }
}

// A start that fails on a bad flag after podman was asked (the gVisor check's thread, the
// manager's first probe) exits at once, not when a hung podman command reaches
// --podman_timeout: what the start left running is cut.
TEST(LifecycleTest, AFailedStartIsNotHeldByAPodmanThatHangs) {
  const int busy = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(busy, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(busy, 1), 0);
  ASSERT_EQ(getsockname(busy, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string short_token = "/tmp/sbx-short-token-" + std::to_string(getpid());
  std::ofstream(short_token) << "short";
  fs::permissions(short_token, fs::perms::owner_read | fs::perms::owner_write);
  const std::vector<std::vector<std::string>> bad_flags = {
      {"--allowed_isolations=gvisor", "--listen_tcp=127.0.0.1:0", "--tcp_token_file=" + short_token},
      {"--metrics_listen=127.0.0.1:" + std::to_string(ntohs(addr.sin_port))}};
  for (const std::vector<std::string>& bad : bad_flags) {
    SCOPED_TRACE(bad.back());
    BreakablePodman podman;
    podman.Hang("info");
    std::vector<std::string> flags = {"--podman=" + podman.path(), "--podman_api=false",
                                      "--pool_size=1", "--podman_timeout=10m",
                                      "--start_runtime_wait=2s"};
    flags.insert(flags.end(), bad.begin(), bad.end());
    SandboxdProcess d(flags);
    EXPECT_EQ(d.StartExpectingExit(), 2) << d.Log();
    EXPECT_TRUE(podman.Hung("info")) << d.Log();
  }
  close(busy);
  fs::remove(short_token);
}

// A negative wait is a mistake in the flags, said at once, not a start that waits 1 s and
// logs "has not answered in -5s".
TEST(LifecycleTest, ANegativeStartWaitIsRefused) {
  for (const char* flag : {"--start_runtime_wait=-5s", "--start_images_wait=-1s"}) {
    SandboxdProcess d({flag});
    EXPECT_EQ(d.StartExpectingExit(), 2) << flag << "\n" << d.Log();
    EXPECT_NE(d.Log().find("must not be negative"), std::string::npos) << d.Log();
  }
}

// Commands that come one after another after the cut (the images' inspection, two
// commands per image) all end soon after it, not each 5 s after its own start.
TEST(LifecycleTest, AStopIsNotHeldByHungPodmanCommandsOneAfterAnother) {
  BreakablePodman podman;
  podman.Hang("image");
  std::string images = "--images=";
  for (const char* name : {"a", "b", "c", "d", "e"}) {
    images += std::string(name) + "=localhost/sandboxd-python:bookworm,";
  }
  images.pop_back();
  SandboxdProcess d({"--podman=" + podman.path(), "--podman_api=false", "--pool_size=1", images,
                     "--podman_timeout=10m", "--shutdown_grace=2s", "--start_runtime_wait=2s"});
  ASSERT_TRUE(d.Start());
  ASSERT_TRUE(WaitFor([&] { return podman.Hung("image"); })) << d.Log();
  EXPECT_EQ(d.Stop(), 0) << d.Log();
}

// The same for a CreateSession whose cold start hangs in `podman run`: gRPC's drain waits
// for the call, and the call for podman.
TEST(LifecycleTest, AStopIsNotHeldByACreationWhosePodmanHangs) {
  BreakablePodman podman;
  SandboxdProcess d({"--podman=" + podman.path(), "--podman_api=false", "--pool_size=0",
                     "--podman_timeout=10m", "--shutdown_grace=2s"});
  ASSERT_TRUE(d.Start());
  ASSERT_TRUE(WaitFor([&] { return GetInfo(*d.Stub()).serving(); })) << d.Log();
  podman.Hang("run");
  grpc::Status created;
  std::thread creator([&] { created = TryCreate(*d.Stub()); });
  ASSERT_TRUE(WaitFor([&] { return podman.Hung("run"); })) << d.Log();
  EXPECT_EQ(d.Stop(), 0) << d.Log();
  creator.join();
  EXPECT_FALSE(created.ok());
}

// A daemon on a podman whose `rm` can be made to fail, and a session of it.
class RemovalFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(d_.Start());
    session_ = CreateSession(*d_.Stub());
  }

  // Deletes the session, whose code runs on, while `podman rm` fails: its container stops
  // all the same and stays until podman can remove it, then goes.
  void DeleteWhileRemovalFails() {
    const std::string running = d_.PodmanCommand() + " inspect --format '{{.State.Running}}' " +
                                session_.container_id() + " 2>&1";
    ASSERT_EQ(Sh(running), "true\n");
    // The daemon's probe container is gone: made at each start (a restarted daemon's too,
    // perhaps after its sessions are re-attached), removed after it proved containers start.
    ASSERT_TRUE(WaitFor([&] { return GetInfo(*d_.Stub()).serving(); })) << d_.Log();
    ASSERT_TRUE(WaitFor([&] { return d_.LiveContainers() == 1; })) << d_.Log();

    podman_.BreakRemoval();
    grpc::ClientContext ctx;
    sandbox::v1::DeleteSessionRequest del;
    del.set_session_id(session_.id());
    sandbox::v1::DeleteSessionResponse deleted;
    ASSERT_TRUE(d_.Stub()->DeleteSession(&ctx, del, &deleted).ok());
    ASSERT_TRUE(WaitFor([&] { return d_.Log().find("cannot remove container") != std::string::npos; }))
        << d_.Log();
    EXPECT_TRUE(WaitFor([&] { return Sh(running) == "false\n"; })) << Sh(running) << d_.Log();
    EXPECT_EQ(d_.LiveContainers(), 1) << "the container stays until podman can remove it";

    podman_.RepairRemoval();
    EXPECT_TRUE(WaitFor([&] { return d_.LiveContainers() == 0; }, 40000)) << d_.Log();
  }

  BreakablePodman podman_;
  SandboxdProcess d_{{"--podman=" + podman_.path(), "--podman_api=false"}};
  sandbox::v1::Session session_;
};

// A deleted session's code stops at once, even while its container cannot be removed:
// sandboxd ends the sandbox's processes itself before it asks podman to remove it.
TEST_F(RemovalFailureTest, ADeletedSessionsCodeStopsAtOnce) {
  ASSERT_EQ(RunCode(*d_.Stub(), session_.id(), kSpin).stdout(), "spinning\n");
  DeleteWhileRemovalFails();
}

// After a restart too, and whatever the code did to the runner's socket: a process of the
// session that calls listen() on it and exits makes the socket's peer a pid that is gone
// (and may be reused), so a re-attached session is ended through what was noted when its
// container started, before any code ran (the session's record).
TEST_F(RemovalFailureTest, ARestartedDaemonStillStopsCodeThatListenedOnTheRunnersSocket) {
  sandbox::v1::Finished f = RunCode(*d_.Stub(), session_.id(), kListenOnTheRunnersSocket);
  // Under gVisor the socket on the host is the gofer's, out of the code's reach.
  if (TestIsolation() == "container") {
    EXPECT_EQ(f.stdout(), "listened\n") << f.ShortDebugString();
  }
  ASSERT_EQ(RunCode(*d_.Stub(), session_.id(), kSpin).stdout(), "spinning\n");
  ASSERT_EQ(d_.Stop(), 0);
  ASSERT_TRUE(d_.Start());
  EXPECT_EQ(RunCode(*d_.Stub(), session_.id(), "print('re-attached')").stdout(), "re-attached\n");
  DeleteWhileRemovalFails();
}

TEST(LifecycleTest, SelfCheckRunsPrintOneAndSaysWhyWhenItCannot) {
  const std::string dirs = "ls -d /tmp/sandboxd-self-check-* 2>/dev/null | wc -l";
  const std::string containers =
      "podman ps -a --format '{{index .Labels \"io.sandboxd.state-dir\"}}' | grep -c sandboxd-self-check-";
  // Another set-up may be checking right now: compare with what was there before.
  const std::string before = Sh(dirs), containers_before = Sh(containers);
  int rc = -1;
  // The configured state directory (a running daemon's, perhaps) is not touched: not even
  // its seccomp profile is written.
  const std::string configured = "/tmp/sbx-self-check-state-" + std::to_string(getpid());
  std::string out = Sh(SandboxdBinary() + " --self_check --state_dir=" + configured + " 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("self-check passed"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(configured)) << out;
  fs::remove_all(configured);
  // A root daemon's wasm directory sits beside its state directory: made inside the
  // check's own directory, and gone with it.
  out = Sh(SandboxdBinary() + " --self_check --isolation=wasm 2>&1", &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("self-check passed: a wasm sandbox"), std::string::npos) << out;
  EXPECT_EQ(Sh(dirs), before) << out;

  BreakablePodman podman;
  podman.Break();
  out = Sh(SandboxdBinary() + " --self_check --podman_api=false --podman=" + podman.path() + " 2>&1", &rc);
  EXPECT_EQ(rc, 1) << out;
  EXPECT_NE(out.find("container-init binary not found"), std::string::npos) << out;
  // Refused after its state directory is made: that goes too.
  out = Sh(SandboxdBinary() + " --self_check --podman=no-such-podman-here 2>&1", &rc);
  EXPECT_EQ(rc, 2) << out;
  EXPECT_NE(out.find("no no-such-podman-here (--podman) in PATH"), std::string::npos) << out;
  // Nothing is left behind either way.
  EXPECT_EQ(Sh(containers), containers_before);
  EXPECT_EQ(Sh(dirs), before);
}

}  // namespace
}  // namespace sandboxd::testing
