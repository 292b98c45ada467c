// Integration: hostile and bad input against real Podman (issue section 5). After each
// case the daemon still serves a healthy "witness" session, and when the suite ends no
// container of this daemon is left.
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace sandboxd::testing {
namespace {

using sandbox::v1::Finished;
namespace fs = std::filesystem;

class HostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    // 64 processes fit in 256 MiB under Linux; gVisor copies forked memory in larger
    // units (~4.5 MiB more per forked Python; docs/security.md, "Isolation modes"), so the fork bomb's
    // session needs more there to survive its own bomb.
    const std::string memory = TestIsolation() == "gvisor" ? "--memory_mb=768" : "--memory_mb=256";
    daemon_ = new SandboxdProcess({"--kill_grace=1s", memory, "--pids=64",
                                   "--max_output_bytes=65536", "--max_code_bytes=100000",
                                   "--pass_env=SANDBOXD_TEST_ALLOWED", "--env=FROM_FLAG=1"});
    // Proxy variables carry passwords: podman copies them into containers by default.
    ASSERT_TRUE(daemon_->Start({"SANDBOXD_TEST_SECRET=hunter2", "SANDBOXD_TEST_ALLOWED=visible",
                                "http_proxy=http://user:proxypass1@proxy.invalid:3128",
                                "HTTPS_PROXY=http://user:proxypass2@proxy.invalid:3128",
                                "no_proxy=internal.invalid", "FTP_PROXY=ftp://proxypass3@x"}));
    auto stub = daemon_->Stub();
    witness_ = new std::string(CreateSession(*stub).id());
    RunCode(*stub, *witness_, "witness_value = 7");
  }
  static void TearDownTestSuite() {
    auto stub = daemon_->Stub();
    grpc::ClientContext ctx;
    sandbox::v1::ListSessionsResponse list;
    ASSERT_TRUE(stub->ListSessions(&ctx, {}, &list).ok());
    for (const auto& s : list.sessions()) {
      grpc::ClientContext c;
      sandbox::v1::DeleteSessionRequest d;
      d.set_session_id(s.id());
      sandbox::v1::DeleteSessionResponse r;
      EXPECT_TRUE(stub->DeleteSession(&c, d, &r).ok());
    }
    // Deletion removes containers in the background.
    for (int i = 0; i < 100 && daemon_->LiveContainers() > 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_EQ(daemon_->LiveContainers(), 0) << "leaked containers";
    EXPECT_EQ(daemon_->Stop(), 0);
    delete daemon_;
    delete witness_;
  }
  void SetUp() override { stub_ = daemon_->Stub(); }
  // The daemon still serves another session, whose state is intact.
  void TearDown() override {
    Finished f = RunCode(*stub_, *witness_, "witness_value");
    EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
    EXPECT_EQ(f.result_repr(), "7");
  }

  static SandboxdProcess* daemon_;
  static std::string* witness_;
  std::unique_ptr<sandbox::v1::SandboxService::Stub> stub_;
};
SandboxdProcess* HostileTest::daemon_ = nullptr;
std::string* HostileTest::witness_ = nullptr;

TEST_F(HostileTest, NoNetwork) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), R"(
import errno, socket
names = sorted(n for _, n in socket.if_nameindex())
errors = []
try:
    socket.getaddrinfo("deb.debian.org", 80)
except OSError as e:
    errors.append("dns")
# 192.0.2.1 is TEST-NET-1 (documentation only); with no route nothing leaves the namespace.
s = socket.socket()
s.settimeout(2)
try:
    s.connect(("192.0.2.1", 80))
except OSError as e:
    # Linux says ENETUNREACH, gVisor's network stack EHOSTUNREACH: no route either way.
    unreachable = e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH)
    errors.append("connect:unreachable" if unreachable else "connect:" + str(e.errno))
(names, errors)
)");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "(['lo'], ['dns', 'connect:unreachable'])");
}

TEST_F(HostileTest, FilesystemIsReadOnlyOutsideWorkspaceAndTmp) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), R"(
import os
results = {}
for path in ["/etc/evil", "/usr/evil", "/var/tmp/evil", "/opt/sandboxd/sandbox_runner.pyz", "/root/evil", "/evil"]:
    try:
        with open(path, "w") as fh:
            fh.write("x")
        results[path] = "written"
    except OSError as e:
        results[path] = "denied"
for path in ["/workspace/ok.txt", "/tmp/ok.txt"]:
    with open(path, "w") as fh:
        fh.write("fine")
    results[path] = open(path).read()
results["cwd"] = os.getcwd()
results["uid"] = os.getuid()
results
)");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  auto r = f.result_repr();
  EXPECT_EQ(r.find("written"), std::string::npos) << r;
  EXPECT_NE(r.find("'/workspace/ok.txt': 'fine'"), std::string::npos) << r;
  EXPECT_NE(r.find("'/tmp/ok.txt': 'fine'"), std::string::npos) << r;
  EXPECT_NE(r.find("'cwd': '/workspace'"), std::string::npos) << r;
  EXPECT_NE(r.find("'uid': 65534"), std::string::npos) << r;
}

// Podman's default seccomp profile lets any process clone or unshare with CLONE_NEWUSER and
// become root with every capability in a namespace of its own (here the runner's threads
// make unshare(CLONE_NEWUSER) fail with EINVAL anyway, but a single-threaded child or a raw
// clone does it). sandboxd's profile (seccomp_profile.h) denies every namespace flag in
// unshare and clone, and clone3 says ENOSYS. Threads and child processes, which clone
// without those flags, still work. Container mode only: gVisor's own kernel answers these
// calls.
TEST_F(HostileTest, CodeCannotCreateNamespaces) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), R"(
import ctypes, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
results = {}
for name, flags in [("user", 0x10000000), ("user+mount+net", 0x10000000 | 0x20000 | 0x40000000),
                    ("net", 0x40000000), ("mount", 0x20000)]:
    rc = libc.unshare(flags)
    results[name] = (rc, ctypes.get_errno())
# clone(2) with CLONE_NEWUSER (and SIGCHLD): a raw syscall, no C library fallback.
rc = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)
results["clone"] = (rc, ctypes.get_errno())
if rc == 0:
    libc._exit(0)
t = threading.Thread(target=lambda: None); t.start(); t.join()
results["thread"] = "ran"
results["child"] = subprocess.run(["true"]).returncode
sorted(results.items())
)");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(),
            "[('child', 0), ('clone', (-1, 38)), ('mount', (-1, 38)), ('net', (-1, 38)), "
            "('thread', 'ran'), ('user', (-1, 38)), ('user+mount+net', (-1, 38))]");
}

TEST_F(HostileTest, HostEnvironmentDoesNotLeak) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), "import os\nsorted(os.environ.items())");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  const std::string& r = f.result_repr();
  EXPECT_EQ(r.find("hunter2"), std::string::npos) << r;
  EXPECT_EQ(r.find("SANDBOXD_TEST_SECRET"), std::string::npos) << r;
  EXPECT_EQ(r.find("proxypass"), std::string::npos) << r;
  EXPECT_EQ(r.find("internal.invalid"), std::string::npos) << r;
  EXPECT_NE(r.find("('SANDBOXD_TEST_ALLOWED', 'visible')"), std::string::npos) << r;
  EXPECT_NE(r.find("('FROM_FLAG', '1')"), std::string::npos) << r;
  // Nothing of the daemon's own environment either.
  EXPECT_EQ(r.find("XDG_RUNTIME_DIR"), std::string::npos) << r;
}

TEST_F(HostileTest, SocketDirectoryIsNeitherStorageNorASymlinkTrap) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), R"(
import os
def attempt(fn):
    try:
        fn()
        return 'done'
    except OSError as e:
        return type(e).__name__
d = '/run/sandboxd'
fill = attempt(lambda: open(d + '/fill', 'wb').write(b'x' * 4096))
link = attempt(lambda: os.symlink('/etc/passwd', d + '/evil'))
swap = attempt(lambda: os.rename(d + '/runner.sock', d + '/moved'))
opts = [l.split()[3] for l in open('/proc/mounts') if l.split()[1] == d][0].split(',')
(fill, link, swap, ','.join(o for o in ('nosuid', 'nodev', 'noexec') if o in opts)))");
  ASSERT_EQ(f.status(), Finished::OK) << f.DebugString();
  // gVisor's kernel keeps noexec of the bind mount and does not list nosuid and nodev
  // (it opens no host device files); the directory is not writable from inside either way.
  const std::string flags = TestIsolation() == "gvisor" ? "noexec" : "nosuid,nodev,noexec";
  EXPECT_EQ(f.result_repr(),
            absl::StrCat("('PermissionError', 'PermissionError', 'PermissionError', '", flags, "')"));
  // On the host, every session's socket directory holds the runner's sockets (runner.sock,
  // and egress.sock, its egress relay's) and nothing else.
  for (const auto& dir : fs::directory_iterator(daemon_->state_dir() + "/c")) {
    for (const auto& entry : fs::directory_iterator(dir.path())) {
      const std::string name = entry.path().filename().string();
      EXPECT_TRUE(name == "runner.sock" || name == "egress.sock") << entry.path();
      EXPECT_TRUE(entry.is_socket() && !entry.is_symlink()) << entry.path();
    }
  }
}

TEST_F(HostileTest, ForkBombIsContained) {
  auto s = CreateSession(*stub_);
  // A real bomb: parent and children alike go on forking. Only the runner's own process
  // may return (with whether the pids limit stopped its loop); a child that hits the
  // limit sleeps in its slot instead of exiting. Bomb processes that exit and fork anew
  // churn memory: gVisor (ptrace) copies a forked Python in large units and gives freed
  // memory back lazily, and a churning bomb once took its session past 768 MiB (SIGKILL)
  // before the limit stopped the loop. Without churn, memory is bounded by the pids limit
  // times one forked Python, which is what the suite's --memory_mb is sized for.
  Finished f = RunCode(*stub_, s.id(), R"(
import os, time
root = os.getpid()
n = 0
stopped = False
for i in range(100000):
    try:
        os.fork()
    except OSError:
        stopped = True
        break
    if os.getpid() == root:
        n += 1
if os.getpid() != root:
    while True:
        time.sleep(3600)
"stopped by the limit" if stopped else "not stopped"
)", 60000);
  // The pids limit stops the runner's own loop, and the session carries on. Under gVisor
  // (ptrace: every fork is a host stub process) the loop takes ~10 s on an idle 2-core
  // machine and went past 20 s once under the suite's parallel load: hence 60.
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "'stopped by the limit'");
  f = RunCode(*stub_, s.id(), "n + 0");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  // A reset ends whatever user code left running: only init and the runner remain.
  grpc::ClientContext ctx;
  sandbox::v1::ResetSessionRequest reset;
  reset.set_session_id(s.id());
  sandbox::v1::Session after;
  grpc::Status reset_status = stub_->ResetSession(&ctx, reset, &after);
  ASSERT_TRUE(reset_status.ok()) << reset_status.error_code() << ": " << reset_status.error_message();
  f = RunCode(*stub_, s.id(), R"py(
import os, time
def procs():
    return [p for p in os.listdir('/proc') if p.isdigit()]
for _ in range(50):   # init may still be reaping the last orphans
    if len(procs()) <= 2:
        break
    time.sleep(0.1)
len(procs())
)py");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "2") << "stray processes survived the reset (init and the runner stay)";
}

TEST_F(HostileTest, ThreadsOfSomeSessionsNeverStarveAnother) {
  // Every container runs as the same uid, and RLIMIT_NPROC counts per uid: with a limit
  // of 4x pids (the old setting) five sessions of 55 threads each left the last ones
  // unable to start a thread. Each session's limit is its own pids cgroup now.
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(CreateSession(*stub_).id());
  for (const auto& id : ids) {
    Finished f = RunCode(*stub_, id, R"(
import threading, time
started = 0
for _ in range(55):
    try:
        threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        started += 1
    except RuntimeError:
        break
started)");
    EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
    EXPECT_EQ(f.result_repr(), "55") << "session " << id;
  }
  for (const auto& id : ids) {
    grpc::ClientContext ctx;
    sandbox::v1::DeleteSessionRequest d;
    d.set_session_id(id);
    sandbox::v1::DeleteSessionResponse r;
    EXPECT_TRUE(stub_->DeleteSession(&ctx, d, &r).ok());
  }
}

TEST_F(HostileTest, MemoryBombIsContained) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), "x = b'x' * (2 * 1024**3)\nlen(x)", 30000);
  if (f.status() == Finished::SESSION_LOST) {
    EXPECT_NE(f.error().message().find("memory"), std::string::npos) << f.DebugString();
    grpc::Status st;
    RunCode(*stub_, s.id(), "1", 0, &st);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
    EXPECT_NE(st.error_message().find("memory"), std::string::npos) << st.error_message();
  } else {
    EXPECT_EQ(f.status(), Finished::ERROR) << f.DebugString();
    EXPECT_EQ(f.error().type(), "MemoryError");
  }
}

TEST_F(HostileTest, BusyLoopTimesOutAndKeepsTheNamespace) {
  auto s = CreateSession(*stub_);
  RunCode(*stub_, s.id(), "kept = 'yes'");
  Finished f = RunCode(*stub_, s.id(), "while True: pass", 1000);
  EXPECT_EQ(f.status(), Finished::TIMEOUT) << f.DebugString();
  f = RunCode(*stub_, s.id(), "kept");
  EXPECT_EQ(f.result_repr(), "'yes'");
}

TEST_F(HostileTest, UninterruptibleCCallGetsTheContainerKilled) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), "sum(range(10**13))", 1000);
  EXPECT_EQ(f.status(), Finished::SESSION_LOST) << f.DebugString();
  EXPECT_NE(f.error().message().find("timeout"), std::string::npos) << f.DebugString();
  grpc::Status st;
  RunCode(*stub_, s.id(), "1", 0, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("killed"), std::string::npos) << st.error_message();
  grpc::ClientContext ctx;
  sandbox::v1::GetSessionRequest g;
  g.set_session_id(s.id());
  sandbox::v1::Session got;
  ASSERT_TRUE(stub_->GetSession(&ctx, g, &got).ok());
  EXPECT_EQ(got.state(), sandbox::v1::Session::LOST);
}

TEST_F(HostileTest, SwallowedInterruptGetsTheContainerKilled) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), R"(
import signal, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True:
    try:
        time.sleep(0.05)
    except BaseException:
        pass
)", 1000);
  EXPECT_EQ(f.status(), Finished::SESSION_LOST) << f.DebugString();
}

TEST_F(HostileTest, HugeOutputIsCappedWithAMarker) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(),
                       "import sys\nfor i in range(100):\n    sys.stdout.write('x' * (1 << 20))\n'done'",
                       60000);
  ASSERT_EQ(f.status(), Finished::OK) << f.error().DebugString();
  EXPECT_TRUE(f.output_truncated());
  EXPECT_LT(f.stdout().size(), 65536u + 200);
  EXPECT_NE(f.stdout().find("[output truncated"), std::string::npos);
  EXPECT_EQ(f.output_bytes(), 100u << 20);
  EXPECT_EQ(f.result_repr(), "'done'");
}

TEST_F(HostileTest, OversizedAndEmptyCodeAreRejected) {
  auto s = CreateSession(*stub_);
  grpc::Status st;
  RunCode(*stub_, s.id(), std::string(200000, '#'), 0, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("limit"), std::string::npos) << st.error_message();
  RunCode(*stub_, s.id(), "", 0, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ExecuteOutcome out = Execute(*stub_, Start(s.id(), ""));
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// User code owns the runner's process, so it can write anything to the runner socket.
constexpr char kFindRunnerSocket[] = R"(
import gc, socket
socks = [o for o in gc.get_objects() if isinstance(o, socket.socket) and o.fileno() >= 0
         and o.family == socket.AF_UNIX]
)";

TEST_F(HostileTest, GarbageFramesLoseOnlyThatSession) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), std::string(kFindRunnerSocket) + R"(
for so in socks:
    try:
        so.sendall(b"\x00\x00\x00\x05junk!")
    except OSError:
        pass
import time
time.sleep(5)
)", 20000);
  EXPECT_EQ(f.status(), Finished::SESSION_LOST) << f.DebugString();
  EXPECT_NE(f.error().message().find("protocol violation"), std::string::npos) << f.DebugString();
}

TEST_F(HostileTest, ForgedToolCallOutsideTheCatalogNeverReachesTheClient) {
  auto s = CreateSession(*stub_);
  ExecuteOutcome out = Execute(
      *stub_, Start(s.id(), std::string(kFindRunnerSocket) + R"(
import json, struct, time
body = json.dumps({"type": "tool_call", "id": 1, "call_id": "forged", "server": "evil",
                   "tool": "steal", "arguments": {}}).encode()
for so in socks:
    try:
        so.sendall(struct.pack(">I", len(body)) + body)
    except OSError:
        pass
time.sleep(0.5)
"sent"
)"),
      [](const sandbox::v1::ToolCall& c) { return TextResult(c.call_id(), "should not happen"); });
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  for (const auto& m : out.messages) EXPECT_FALSE(m.has_tool_call()) << m.DebugString();
  EXPECT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
}

TEST_F(HostileTest, UnknownSessionIsNotFoundEverywhere) {
  grpc::Status st;
  RunCode(*stub_, "s-doesnotexist", "1", 0, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  ExecuteOutcome out = Execute(*stub_, Start("s-doesnotexist", "1"));
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::NOT_FOUND);
  {
    grpc::ClientContext ctx;
    sandbox::v1::GetSessionRequest r;
    r.set_session_id("s-doesnotexist");
    sandbox::v1::Session resp;
    EXPECT_EQ(stub_->GetSession(&ctx, r, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    sandbox::v1::DeleteSessionRequest r;
    r.set_session_id("s-doesnotexist");
    sandbox::v1::DeleteSessionResponse resp;
    EXPECT_EQ(stub_->DeleteSession(&ctx, r, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    sandbox::v1::ResetSessionRequest r;
    r.set_session_id("s-doesnotexist");
    sandbox::v1::Session resp;
    EXPECT_EQ(stub_->ResetSession(&ctx, r, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  {
    grpc::ClientContext ctx;
    sandbox::v1::GetSessionRequest r;  // empty id
    sandbox::v1::Session resp;
    EXPECT_EQ(stub_->GetSession(&ctx, r, &resp).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
}

TEST_F(HostileTest, FirstMessageMustBeStart) {
  grpc::ClientContext ctx;
  auto stream = stub_->Execute(&ctx);
  sandbox::v1::ExecuteRequest req;
  req.mutable_cancel();
  stream->Write(req);
  stream->WritesDone();
  sandbox::v1::ExecuteResponse resp;
  EXPECT_FALSE(stream->Read(&resp));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(HostileTest, RacingExecutesRunOneAtATimeInOrder) {
  auto s = CreateSession(*stub_);
  RunCode(*stub_, s.id(), "log = []");
  std::vector<std::thread> threads;
  std::vector<Finished> results(4);
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      auto stub = daemon_->Stub();
      std::this_thread::sleep_for(std::chrono::milliseconds(30 * i));  // arrival order
      results[i] = Execute(*stub, Start(s.id(), "import time\nlog.append('start " +
                                                    std::to_string(i) + "')\ntime.sleep(0.2)\n"
                                                    "log.append('end " + std::to_string(i) + "')"))
                       .finished;
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_EQ(r.status(), Finished::OK) << r.DebugString();
  // One at a time: every start is followed by its own end, never by another start.
  // (Arrival order between threads is up to the scheduler, so it is not asserted.)
  Finished f = RunCode(*stub_, s.id(), R"(
ok = len(log) == 8 and all(log[i].split()[0] == "start" and log[i + 1] == "end " + log[i].split()[1]
                           for i in range(0, 8, 2))
(ok, sorted(log))
)");
  EXPECT_EQ(f.result_repr(),
            "(True, ['end 0', 'end 1', 'end 2', 'end 3', 'start 0', 'start 1', 'start 2', 'start 3'])");
}

TEST_F(HostileTest, ClientDisconnectMidExecutionInterruptsAndKeepsTheSession) {
  auto s = CreateSession(*stub_);
  RunCode(*stub_, s.id(), "before = 1");
  {
    grpc::ClientContext ctx;
    auto stream = stub_->Execute(&ctx);
    sandbox::v1::ExecuteRequest req;
    *req.mutable_start() = Start(s.id(), "import time\ntime.sleep(60)\nafter = 1");
    stream->Write(req);
    sandbox::v1::ExecuteResponse resp;
    ASSERT_TRUE(stream->Read(&resp));  // started
    ctx.TryCancel();
  }
  Finished f = RunCode(*stub_, s.id(), "(before, 'after' in globals())", 10000);
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "(1, False)");
}

}  // namespace
}  // namespace sandboxd::testing
