// The wasm tier's limits that have no cgroup behind them (docs/wasm-tier.md, "CPU", "Disk",
// "stderr", "uids"): each measured from the host, on a real daemon.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> WasmDaemon(std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--isolation=wasm", "--podman=/nonexistent/podman",
                                   absl::StrCat("--wasm_dir=/tmp/sandboxd-test-wasm-", geteuid())};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

pid_t PidOf(const sandbox::v1::Session& s) {
  return std::stoi(s.container_id().substr(s.container_id().find('-') + 1));
}

// `root` and every process under it.
std::vector<pid_t> Tree(pid_t root) {
  std::vector<pid_t> tree = {root};
  for (size_t i = 0; i < tree.size(); ++i) {
    std::ifstream in(absl::StrCat("/proc/", tree[i], "/task/", tree[i], "/children"));
    for (pid_t child; in >> child;) tree.push_back(child);
  }
  return tree;
}

// The fields after "(comm) " of /proc/<pid>/stat of every process of the tree under `root`.
std::vector<std::string> TreeStats(pid_t root) {
  std::vector<std::string> stats;
  for (pid_t pid : Tree(root)) {
    std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text.rfind(')') != std::string::npos) stats.push_back(text.substr(text.rfind(')') + 2));
  }
  return stats;
}

// utime + stime of the process tree under `root` (every thread), in seconds.
double TreeCpuSeconds(pid_t root) {
  double ticks = 0;
  for (const std::string& stat : TreeStats(root)) {
    std::istringstream fields(stat);
    std::string f;
    // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    for (int i = 0; i < 11; ++i) fields >> f;
    double utime = 0, stime = 0;
    fields >> utime >> stime;
    ticks += utime + stime;
  }
  return ticks / sysconf(_SC_CLK_TCK);
}

// Whether a process of the tree under `root` is stopped (state T).
bool TreeStopped(pid_t root) {
  for (const std::string& stat : TreeStats(root)) {
    if (!stat.empty() && stat[0] == 'T') return true;
  }
  return false;
}

sandbox::v1::Session PythonWithCpu(sandbox::v1::SandboxService::Stub& stub, uint32_t cpu_millis) {
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("python");
  req.mutable_limits()->set_cpu_millis(cpu_millis);
  return CreateSession(stub, req);
}

// A session of cpu_millis=250 that loops uses about a quarter of a core, measured from
// /proc over two seconds of its loop, and GetSession says the limit is in force.
TEST(WasmTest, ACpuLoopIsHeldToTheSessionsCpuMillis) {
  SandboxdProcess d(WasmDaemon());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session s = PythonWithCpu(*stub, 250);
  sandbox::v1::Session got;
  ASSERT_TRUE(GetSession(*stub, s.id(), &got).ok());
  EXPECT_EQ(got.limits().cpu_millis(), 250u) << got.DebugString();
  std::map<std::string, bool> layers;
  for (const sandbox::v1::Layer& l : got.layers()) layers[l.name()] = l.in_force();
  EXPECT_TRUE(layers["cpu"]) << "GetSession does not say the CPU limit holds: " << got.DebugString();
  sandbox::v1::Finished loop;
  std::thread runner([&] {
    loop = RunCode(*stub, s.id(), "import time\nt = time.time()\nwhile time.time() - t < 4: pass\n'looped'", 30000);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // past the burst
  const pid_t pid = PidOf(s);
  const double before = TreeCpuSeconds(pid);
  const auto start = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  const double used = TreeCpuSeconds(pid) - before;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  runner.join();
  EXPECT_EQ(loop.result_repr(), "'looped'") << loop.DebugString();
  const double share = used / wall;
  std::printf("cpu_millis=250: the loop used %.0f%% of a core over %.2f s\n", share * 100, wall);
  EXPECT_LT(share, 0.6) << "the loop was not held to a quarter of a core";
  EXPECT_GT(share, 0.1) << "the loop hardly ran";
  EXPECT_EQ(RunCode(*stub, s.id(), "1 + 1").result_repr(), "2") << "the session was left stopped";
  // A sandboxd that dies while the session is stopped: the next one continues it. The loop
  // lasts long enough to go over its share even when other tests leave it little of a core.
  grpc::Status cut;  // by the daemon's death
  std::thread again([&] {
    RunCode(*stub, s.id(), "import time\nt = time.time()\nwhile time.time() - t < 6: pass", 0, &cut);
  });
  ASSERT_TRUE(WaitFor([&] { return TreeStopped(pid); }, 6000)) << "the loop was never stopped";
  d.Kill();
  again.join();
  ASSERT_TRUE(d.Start());
  stub = d.Stub();
  sandbox::v1::Finished after = RunCode(*stub, s.id(), "1 + 1", 30000);
  EXPECT_EQ(after.result_repr(), "2") << "the session stayed stopped: " << after.DebugString();
}

// Code in a session that got past Node (RunnerKeepingDescriptorsFlag) can listen on the
// runner's socket (fd 3) and hold what it accepts, so a restarted sandboxd's connection gets
// no `ready`. The runners are asked all at once, each
// within 5 s: four such sessions cost the restart those 5 s once (one after another they
// cost 20 s before anybody was served), and a session left alone is re-attached.
TEST(WasmTest, SessionsHoldingTheirRunnersSocketDelayARestartOnce) {
  SandboxdProcess d(WasmDaemon({"--pool_size=0", "--js_pool_size=0", RunnerKeepingDescriptorsFlag()}));
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::CreateSessionRequest js;
  js.set_runtime("javascript");
  for (int i = 0; i < 4; ++i) {
    sandbox::v1::Session s = CreateSession(*stub, js);
    ASSERT_FALSE(s.id().empty());
    sandbox::v1::Finished f = RunCode(*stub, s.id(),
        "const net = require('net'); globalThis.held = [];\n"
        "net.createServer({ pauseOnConnect: true }, (c) => globalThis.held.push(c)).listen({ fd: 3 });\n"
        "'holding'");
    ASSERT_EQ(f.result_repr(), "'holding'") << f.DebugString();
  }
  sandbox::v1::Session quiet = CreateSession(*stub, js);
  ASSERT_EQ(RunCode(*stub, quiet.id(), "globalThis.kept = 42").result_repr(), "42");
  ASSERT_EQ(d.Stop(), 0);
  const auto began = std::chrono::steady_clock::now();
  ASSERT_TRUE(d.Start());
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::printf("restart with four sessions holding their runner's socket: serving after %.1f s\n", waited);
  EXPECT_LT(waited, 12.0) << "the runners were asked one after another:\n" << d.Log();
  stub = d.Stub();
  EXPECT_EQ(RunCode(*stub, quiet.id(), "kept", 30000).result_repr(), "42") << "the quiet session was not re-attached";
}

// The bytes of the largest stderr file (a runner's log) in the daemon's wasm records, and
// its text. Another session's file (the readiness probe's) may go while this reads.
uintmax_t StderrFileBytes(const SandboxdProcess& d, std::string* text = nullptr) {
  uintmax_t bytes = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(d.state_dir() + "/wasm-records", ec)) {
    if (e.path().extension() != ".log") continue;
    const uintmax_t size = fs::file_size(e.path(), ec);
    if (ec || size < bytes) continue;
    bytes = size;
    if (text) *text = Sh("cat '" + e.path().string() + "'");
  }
  return bytes;
}

// Code writing to fd 2 directly (past Node: RunnerKeepingDescriptorsFlag), past the output
// caps, fills no disk: the file behind it stays within 64 KiB and ends with what was
// written last.
TEST(WasmTest, CodeWritingToStderrFillsNoDisk) {
  SandboxdProcess d(WasmDaemon({RunnerKeepingDescriptorsFlag()}));
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("javascript");
  sandbox::v1::Session js = CreateSession(*stub, req);
  // Node makes its stderr pipe non-blocking: a full pipe answers EAGAIN, and the loop retries.
  sandbox::v1::Finished f = RunCode(*stub, js.id(), R"(
const fs = require('fs'), mib = Buffer.alloc(1 << 20, 120);
let left = 64 << 20;
while (left > 0) {
  try { left -= fs.writeSync(2, mib, 0, Math.min(left, mib.length)); } catch (e) { if (e.code !== 'EAGAIN') throw e; }
}
for (;;) { try { fs.writeSync(2, '\nEND-OF-FLOOD\n'); break; } catch (e) { if (e.code !== 'EAGAIN') throw e; } }
'flooded')", 60000);
  ASSERT_EQ(f.result_repr(), "'flooded'") << f.DebugString();
  std::string text;
  EXPECT_TRUE(WaitFor([&] { return StderrFileBytes(d, &text) > 0 && text.find("END-OF-FLOOD") != std::string::npos; },
                      5000)) << "the last line is not in the file";
  EXPECT_LE(StderrFileBytes(d), 64u << 10) << "64 MiB written to fd 2 are on disk";
  EXPECT_NE(text.find("earlier bytes dropped"), std::string::npos) << text.substr(0, 200);
  EXPECT_EQ(RunCode(*stub, js.id(), "1 + 1").result_repr(), "2");
  // What a process says as it dies reaches the file before the session is found lost.
  js = CreateSession(*stub, req);
  f = RunCode(*stub, js.id(), "require('fs').writeSync(2, 'LAST-WORDS\\n'); process.kill(process.pid, 'SIGKILL');",
              30000);
  EXPECT_EQ(f.status(), sandbox::v1::Finished::SESSION_LOST) << f.DebugString();
  EXPECT_NE(f.error().message().find("LAST-WORDS"), std::string::npos) << f.DebugString();
}

// As root, each session has a uid of its own, and a uid goes back to the pool when its
// session ends. A process still running as that uid (what outlived an earlier session) is
// killed before the uid is given to the next session, which would otherwise share it.
// A uid some process still runs as (a leftover of an earlier session, a host account, a
// session of another sandboxd on the host) is never given to a new session, and that
// process is left alone: it is not ours to kill.
TEST(WasmTest, AUidAProcessStillRunsAsIsNotGivenAgain) {
  if (geteuid() != 0) GTEST_FAIL() << "this test checks what a root sandboxd does: run it as root";
  SandboxdProcess d(WasmDaemon());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("javascript");
  const char* kUid = "process.getuid()";
  sandbox::v1::Session first = CreateSession(*stub, req);
  const std::string uid = RunCode(*stub, first.id(), kUid).result_repr();
  ASSERT_FALSE(uid.empty());
  grpc::ClientContext ctx;
  sandbox::v1::DeleteSessionRequest del;
  del.set_session_id(first.id());
  sandbox::v1::DeleteSessionResponse deleted;
  ASSERT_TRUE(stub->DeleteSession(&ctx, del, &deleted).ok());
  const pid_t leftover = fork();
  if (leftover == 0) {
    const uid_t id = static_cast<uid_t>(std::stoul(uid));
    if (setgid(id) == 0 && setuid(id) == 0) execl("/bin/sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  ASSERT_GT(leftover, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int status = 0;
  ASSERT_EQ(waitpid(leftover, &status, WNOHANG), 0) << "the leftover did not start";
  sandbox::v1::Session second = CreateSession(*stub, req);
  const std::string second_uid = RunCode(*stub, second.id(), kUid).result_repr();
  EXPECT_FALSE(second_uid.empty());
  EXPECT_NE(second_uid, uid) << "a uid a process still runs as was given to a new session";
  EXPECT_EQ(waitpid(leftover, &status, WNOHANG), 0) << "sandboxd killed a process that is not its own";
  kill(leftover, SIGKILL);
  waitpid(leftover, &status, 0);
}

// Whether a process (its leader thread) runs as a uid in [first, first + count).
bool AProcessRunsAsOneOf(uint32_t first, uint32_t count) {
  for (const fs::directory_entry& e : fs::directory_iterator("/proc")) {
    std::ifstream in(e.path() / "status");
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Uid:", 0) != 0) continue;
      const uint64_t uid = std::strtoull(line.c_str() + 4, nullptr, 10);
      if (uid >= first && uid < uint64_t{first} + count) return true;
    }
  }
  return false;
}

// Credentials are per thread: a root process whose one thread runs as uid U (raw
// setresuid, as Samba's async-IO threads do), or has gid U, can reach a session running as
// U, so U is not given while such a thread runs. The range is --session_uid_range's; no
// pool, so the session's uid is leased after the threads took theirs.
TEST(WasmTest, AnIdOnlyAThreadHasIsNotGiven) {
  if (geteuid() != 0) GTEST_FAIL() << "this test checks what a root sandboxd does: run it as root";
  SandboxdProcess d(WasmDaemon({"--session_uid_range=47000-47003", "--pool_size=0", "--js_pool_size=0"}));
  ASSERT_TRUE(d.Start());
  std::atomic<int> changed{0};
  std::atomic<bool> done{false};
  auto hold = [&](long call, unsigned id) {
    return std::thread([&, call, id] {
      if (syscall(call, id, id, id) == 0) ++changed;  // this thread only: no glibc broadcast
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    });
  };
  std::thread as_uid = hold(SYS_setresuid, 47000);
  std::thread as_gid = hold(SYS_setresgid, 47001);
  const bool took = WaitFor([&] { return changed == 2; }, 2000);
  // The readiness probe's session takes an id of the range too: the session below is
  // leased once it is gone, so the lowest id the threads leave free is the one expected.
  EXPECT_TRUE(WaitFor([&] { return d.Log().find("health SERVING") != std::string::npos; }, 20000));
  EXPECT_TRUE(WaitFor([] { return !AProcessRunsAsOneOf(47000, 4); }, 20000)) << "the probe stays";
  auto stub = d.Stub();
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("javascript");
  std::string uid;
  if (took) uid = RunCode(*stub, CreateSession(*stub, req).id(), "process.getuid()").result_repr();
  done = true;
  as_uid.join();
  as_gid.join();
  ASSERT_TRUE(took) << "the threads could not take their ids";
  EXPECT_NE(uid, "47000") << "a uid a thread runs as was given to a session";
  EXPECT_NE(uid, "47001") << "a gid a thread has was given to a session as its uid and gid";
  EXPECT_EQ(uid, "47002") << "not the lowest free id of --session_uid_range";
}

// Node's environment is one entry, malloc's tunables, with the threshold
// --wasm_malloc_mmap_threshold sets: the environment entries of the session's Node.
TEST(WasmTest, NodeGetsTheMallocThresholdOfTheFlag) {
  SandboxdProcess d(WasmDaemon({"--wasm_malloc_mmap_threshold=73728", "--pool_size=0", "--js_pool_size=0"}));
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("javascript");
  const sandbox::v1::Session s = CreateSession(*stub, req);
  std::vector<std::string> node_env;
  for (pid_t pid : Tree(PidOf(s))) {
    std::error_code ec;
    if (fs::read_symlink(absl::StrCat("/proc/", pid, "/exe"), ec).filename() != "node") continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/environ"));
    for (std::string entry; std::getline(in, entry, '\0');) node_env.push_back(entry);
  }
  EXPECT_EQ(node_env, std::vector<std::string>{"GLIBC_TUNABLES=glibc.malloc.mmap_threshold=73728"});
  EXPECT_EQ(RunCode(*stub, s.id(), "1 + 1").result_repr(), "2");
}

sandbox::v1::Session JsWithWorkspace(sandbox::v1::SandboxService::Stub& stub, uint64_t bytes) {
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("javascript");
  req.mutable_limits()->set_workspace_bytes(bytes);
  return CreateSession(stub, req);
}

// Code that runs `seconds` more after `code`, for the budget thread to end it meanwhile.
std::string ThenWait(const std::string& code, int seconds) {
  return absl::StrCat(code, "; const t = Date.now(); while (Date.now() - t < ", seconds * 1000, ") {} 'lived on'");
}

void ExpectEnded(const sandbox::v1::Finished& f, const std::string& why) {
  EXPECT_EQ(f.status(), sandbox::v1::Finished::SESSION_LOST) << f.DebugString();
  EXPECT_NE(f.error().message().find("sandboxd ended the session: " + why), std::string::npos)
      << f.DebugString();
}

// Ended by sandboxd over its 16 MiB workspace budget, or as one it could not measure.
void ExpectEndedOverBudgetOrUnmeasured(const sandbox::v1::Finished& f) {
  ASSERT_EQ(f.status(), sandbox::v1::Finished::SESSION_LOST) << f.DebugString();
  EXPECT_NE(f.error().message().find("sandboxd ended the session: "), std::string::npos) << f.DebugString();
  EXPECT_TRUE(absl::StrContains(f.error().message(), "over its budget of 16 MiB") ||
              absl::StrContains(f.error().message(), "its workspace cannot be measured"))
      << f.DebugString();
}

// Without bwrap a walk sees names only: a file the code removed but keeps open holds its
// blocks all the same, and counts (3 x 12 MiB of 16 MiB here).
TEST(WasmTest, WithoutBwrapAWorkspaceCountsTheFilesItHoldsOpenUnlinked) {
  SandboxdProcess d(WasmDaemon({"--wasm_layers=node,seccomp,landlock"}));
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session js = JsWithWorkspace(*stub, 16 << 20);
  const std::string hide = "const fs = require('fs'); globalThis.held = []; for (let i = 0; i < 3; i++) { "
      "const fd = fs.openSync(`u${i}`, 'w'); fs.unlinkSync(`u${i}`); for (let j = 0; j < 12; j++) "
      "fs.writeSync(fd, Buffer.alloc(1 << 20, 1)); held.push(fd); }";
  // A walk may come while the files are written: past 16 MiB, not necessarily all 36.
  sandbox::v1::Finished f = RunCode(*stub, js.id(), ThenWait(hide, 10), 30000);
  ExpectEnded(f, "the workspace holds ");
  EXPECT_NE(f.error().message().find(" MiB, over its budget of 16 MiB"), std::string::npos) << f.DebugString();
}

// W6-1's ring: a directory holding 4 x 15 MiB renamed non-stop round names that readdir
// gives after 3,600 filler directories, so that the walk lists its name, walks the fillers
// and finds the name gone. Each walk counts it or sees it move: ended within seconds, over
// its budget or unmeasured (6-8 s on an idle machine, more under load), not after the 20 s
// of renaming.
constexpr char kRing[] = R"js(const fs = require('fs');
fs.mkdirSync('scratch');
for (let i = 0; i < 400; i++) fs.writeFileSync(`scratch/c${i}`, '');
const d = fs.opendirSync('scratch'), order = []; let e; while ((e = d.readSync()) !== null) order.push(e.name); d.closeSync();
const fillers = order.slice(0, 100), ring = order.slice(-32);
fs.rmSync('scratch', { recursive: true });
fs.mkdirSync('p');
for (const n of fillers) { fs.mkdirSync(`p/${n}`); for (let j = 0; j < 35; j++) fs.mkdirSync(`p/${n}/d${j}`); }
let cur = 0; fs.mkdirSync(`p/${ring[0]}`);
const fds = []; for (let k = 0; k < 4; k++) fds.push(fs.openSync(`p/${ring[0]}/f${k}`, 'w'));
const chunk = Buffer.alloc(256 << 10, 7), want = 4 * (15 << 20), end = Date.now() + 20000;
let written = 0, inflight = 0, renames = 0;
await new Promise((done) => {
  const step = () => {
    while (inflight < 2 && written < want) {
      inflight++; fs.write(fds[Math.floor(written / (15 << 20))], chunk, () => { inflight--; }); written += chunk.length;
    }
    for (const until = Date.now() + 5; Date.now() < until; renames++) {
      const next = (cur + 1) % ring.length; fs.renameSync(`p/${ring[cur]}`, `p/${ring[next]}`); cur = next;
    }
    if (Date.now() < end) setImmediate(step); else done();
  };
  step();
});
`${ring.length} names, ${renames} renames, ${written >> 20} MiB unseen`)js";

TEST(WasmTest, WithoutBwrapADirectoryRenamedRoundARingEndsTheSession) {
  SandboxdProcess d(WasmDaemon({"--wasm_layers=node,seccomp,landlock"}));
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session js = JsWithWorkspace(*stub, 16 << 20);
  const auto start = std::chrono::steady_clock::now();
  sandbox::v1::Finished f = RunCode(*stub, js.id(), kRing, 60000);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("the ring's run ended after %.1f s: %s\n", took, f.error().message().c_str());
  ExpectEndedOverBudgetOrUnmeasured(f);
}

// W7-1: a session watching the access times of two directories (a/, b/) to learn when the
// walk has read each, moving 14 files from the one read next into the one just read and back,
// growing them to 200 MiB a slice after each pass (and every second if it sees no read). The
// walk's reads do not show (O_NOATIME) and its re-checks list again what moved behind it:
// ended over its budget (or unmeasured), in 2-9 s, not after its 20 s of moving.
constexpr char kBehindTheWalk[] = R"js(const fs = require('fs');
fs.mkdirSync('a'); fs.mkdirSync('b');
const d = fs.opendirSync('.'), order = []; let e; while ((e = d.readSync()) !== null) order.push(e.name); d.closeSync();
const [X, Y] = order.filter((n) => n === 'a' || n === 'b');
for (let i = 0; i < 3000; i++) fs.mkdirSync(`${X}/d${i}`);
const WANT = 200 << 20, PER = 15 << 20, K = Math.ceil(WANT / PER);
const fds = []; for (let k = 0; k < K; k++) fds.push(fs.openSync(`${Y}/f${k}`, 'w'));
const move = (from, to) => { for (let k = 0; k < K; k++) fs.renameSync(`${from}/f${k}`, `${to}/f${k}`); };
const at = (p) => fs.statSync(p, { bigint: true }).atimeNs;
let ax = at(X), ay = at(Y), inX = false, written = 0, walks = 0, grown = Date.now();
const buf = Buffer.alloc(1 << 20, 7);
const grow = () => {
  for (let until = Date.now() + 40, n = 0; Date.now() < until && written < WANT && n < 6; n++) {
    fs.writeSync(fds[Math.floor(written / PER)], buf); written += buf.length;
  }
  grown = Date.now();
};
for (const end = Date.now() + 20000; Date.now() < end;) {
  const nx = at(X);
  if (nx !== ax) { ax = nx; if (!inX) { move(Y, X); inX = true; walks++; } }
  const ny = at(Y);
  if (ny !== ay) { ay = ny; if (inX) { move(X, Y); inX = false; } grow(); }
  else if (!inX && Date.now() - grown > 1000) grow();
}
`${walks} walks dodged, ${written >> 20} MiB written`)js";

TEST(WasmTest, WithoutBwrapFilesMovedBehindTheWalkEndTheSession) {
  SandboxdProcess d(WasmDaemon({"--wasm_layers=node,seccomp,landlock"}));
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session js = JsWithWorkspace(*stub, 16 << 20);
  sandbox::v1::Finished f = RunCode(*stub, js.id(), kBehindTheWalk, 60000);
  std::printf("the run behind the walk: %s%s\n", f.result_repr().c_str(), f.error().message().c_str());
  ExpectEndedOverBudgetOrUnmeasured(f);
}

// Code writing a temporary file and renaming it over its target non-stop for 8 s (past the
// 5 s a workspace may go unmeasured), within its budget: the session is not ended.
TEST(WasmTest, WithoutBwrapABusyWorkspaceWithinItsBudgetIsNotEnded) {
  SandboxdProcess d(WasmDaemon({"--wasm_layers=node,seccomp,landlock"}));
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session js = JsWithWorkspace(*stub, 16 << 20);
  sandbox::v1::Finished f = RunCode(*stub, js.id(), "const fs = require('fs'); fs.mkdirSync('out'); "
      "for (let i = 0; i < 50; i++) fs.mkdirSync(`src${i}`); const data = Buffer.alloc(1 << 20, 1); let n = 0; "
      "for (const end = Date.now() + 8000; Date.now() < end; n++) { fs.writeFileSync(`out/tmp${n % 4}`, data); "
      "fs.renameSync(`out/tmp${n % 4}`, 'out/target'); } `${n > 100}`", 60000);
  EXPECT_EQ(f.status(), sandbox::v1::Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "'true'") << f.DebugString();
}

// A session whose tmpfs is taken away (unmounted in its namespace, by root): the workspace
// is no longer what sandboxd measures, and a few seconds later the session is ended.
TEST(WasmTest, AWorkspaceThatCannotBeMeasuredEndsTheSession) {
  ASSERT_EQ(geteuid(), 0u) << "the test unmounts a sandbox's tmpfs: run it as root (CI does)";
  SandboxdProcess d(WasmDaemon({"--wasm_layers=node,seccomp,landlock,bwrap"}));
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session js = JsWithWorkspace(*stub, 16 << 20);
  sandbox::v1::Finished f = RunCode(*stub, js.id(), "process.cwd()");
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.DebugString();
  const std::string workspace = f.result_repr().substr(1, f.result_repr().size() - 2);
  std::ifstream children(absl::StrCat("/proc/", PidOf(js), "/task/", PidOf(js), "/children"));
  pid_t init = 0;
  ASSERT_TRUE(children >> init) << "bwrap has no child: is bwrap in force?";
  const pid_t child = fork();
  if (child == 0) {
    const int ns = open(absl::StrCat("/proc/", init, "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC);
    _exit(ns >= 0 && setns(ns, CLONE_NEWNS) == 0 && umount2(workspace.c_str(), MNT_DETACH) == 0 ? 0 : 1);
  }
  int status = -1;
  waitpid(child, &status, 0);
  ASSERT_EQ(status, 0) << "cannot unmount " << workspace << " in the sandbox of " << init;
  const auto start = std::chrono::steady_clock::now();
  ExpectEnded(RunCode(*stub, js.id(), ThenWait("1", 20), 30000), "its workspace cannot be measured (for 5");
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 10) << "ended late";
}

// Without bwrap GetSessionStats answers the budget thread's last walk, so that no client
// makes sandboxd walk a workspace at will (a walk of 30,000 files costs ~40 ms). A file
// written just before the call is not in its answer yet, and is in a later one once the
// budget thread has walked again. A walk per call would count it every time; the budget
// thread walks every 200 ms, so a trial whose call happens to follow such a walk is
// tried again, and one of ten shows the answer as of the last walk.
TEST(WasmTest, AWorkspacesStatsMakeSandboxdWalkNoMore) {
  SandboxdProcess d(WasmDaemon({"--wasm_layers=node,seccomp,landlock"}));
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session js = JsWithWorkspace(*stub, 64 << 20);
  sandbox::v1::SessionStats stats;
  ASSERT_TRUE(WaitFor([&] { return GetSessionStats(*stub, js.id(), &stats).ok() && stats.workspace_known(); }, 2000))
      << stats.DebugString();
  bool answered_the_last_walk = false;
  for (int trial = 0; trial < 10 && !answered_the_last_walk; ++trial) {
    const uint64_t before = stats.workspace_bytes();
    sandbox::v1::Finished f = RunCode(*stub, js.id(), absl::StrCat("require('fs').writeFileSync('f", trial,
                                                                   "', Buffer.alloc(1 << 20, 1)); 'written'"));
    ASSERT_EQ(f.result_repr(), "'written'") << f.DebugString();
    ASSERT_TRUE(GetSessionStats(*stub, js.id(), &stats).ok());
    ASSERT_TRUE(stats.workspace_known()) << stats.DebugString();
    answered_the_last_walk = stats.workspace_bytes() < before + (1 << 20);
    EXPECT_TRUE(WaitFor([&] { return GetSessionStats(*stub, js.id(), &stats).ok() &&
                                     stats.workspace_bytes() >= before + (1 << 20); }, 5000))
        << "the budget thread's walks do not see the file: " << stats.DebugString();
  }
  EXPECT_TRUE(answered_the_last_walk) << "each GetSessionStats walked the workspace";
}

}  // namespace
}  // namespace sandboxd::testing
