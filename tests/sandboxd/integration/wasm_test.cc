// The wasm tier (--isolation=wasm, docs/wasm-tier.md) with a real daemon and no container
// engine: what GetInfo and GetSession say of it, hostile code meeting its layers, and the
// start-up refusals (a tampered snapshot, a demanded layer this machine lacks). The rest of
// the integration suite runs on it too (tests/CMakeLists.txt: the wasm.* copies).
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

namespace fs = std::filesystem;

// A daemon whose only isolation is wasm, with podman out of reach: the tier needs no engine.
std::vector<std::string> WasmOnly(const std::string& wasm_dir = "") {
  return {"--isolation=wasm", "--podman=/nonexistent/podman",
          "--wasm_dir=" + (wasm_dir.empty() ? absl::StrCat("/tmp/sandboxd-test-wasm-", geteuid()) : wasm_dir)};
}

// A TCP listener on 127.0.0.1 that counts who reaches it.
class Listener {
 public:
  Listener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd_, 8);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
  }
  ~Listener() { close(fd_); }
  int port() const { return port_; }
  bool Reached() const {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, 0) > 0;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
};

sandbox::v1::Session CreateIn(sandbox::v1::SandboxService::Stub& stub, const std::string& runtime) {
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime(runtime);
  return CreateSession(stub, req);
}

TEST(WasmTest, RunsWithoutAContainerEngineAndSaysWhichLayersHold) {
  SandboxdProcess d(WasmOnly());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Info info = GetInfo(*stub);
  EXPECT_EQ(info.default_isolation(), sandbox::v1::ISOLATION_WASM);
  ASSERT_EQ(info.isolations_size(), 3) << info.DebugString();
  EXPECT_FALSE(info.isolations(0).available()) << "podman is not in use";
  const sandbox::v1::IsolationInfo& wasm = info.isolations(2);
  EXPECT_EQ(wasm.isolation(), sandbox::v1::ISOLATION_WASM);
  EXPECT_TRUE(wasm.available()) << wasm.DebugString();
  EXPECT_NE(wasm.detail().find("pyodide"), std::string::npos) << wasm.detail();
  std::map<std::string, bool> held;
  for (const sandbox::v1::Layer& l : wasm.layers()) held[l.name()] = l.in_force();
  for (const char* required : {"node", "seccomp", "landlock"}) {
    EXPECT_TRUE(held[required]) << required << " must hold: " << wasm.DebugString();
  }
  sandbox::v1::Session s = CreateIn(*stub, "python");
  EXPECT_EQ(s.isolation(), sandbox::v1::ISOLATION_WASM);
  EXPECT_EQ(s.layers_size(), wasm.layers_size()) << s.DebugString();
  EXPECT_EQ(RunCode(*stub, s.id(), "import sys\nx = 40\nsys.platform").result_repr(), "'emscripten'");
  EXPECT_EQ(RunCode(*stub, s.id(), "x + 2").result_repr(), "42");
  sandbox::v1::Session js = CreateIn(*stub, "javascript");
  sandbox::v1::Finished f = RunCode(*stub, js.id(), "const y = 6 * 7; y");
  EXPECT_EQ(f.result_repr(), "42") << f.DebugString();
  EXPECT_TRUE(GetInfo(*stub).serving());
  EXPECT_EQ(info.images_size(), 0) << "a wasm-only daemon runs no images: " << info.DebugString();
  // main.cc's check and the factory's both ask; the snapshot's SHA-256 is a second's work.
  size_t probes = 0;
  for (size_t at = d.Log().find("wasm tier:"); at != std::string::npos; at = d.Log().find("wasm tier:", at + 1)) {
    ++probes;
  }
  EXPECT_EQ(probes, 1u) << "the wasm tier was probed " << probes << " times: " << d.Log();
}

// No set-user-ID (or set-group-ID) file in the workspace, a host directory where any local
// user could start it, by chmod or by creating one; ordinary modes still change (Python's
// shutil.copy chmods). And no worker from user code: one started with `execArgv: []` runs
// without Node's permission model.
void ExpectModesAndWorkersHeld(sandbox::v1::SandboxService::Stub& stub, const std::string& py,
                               const std::string& js) {
  struct Case {
    const std::string& session;
    std::string code, want;
  };
  const std::vector<Case> cases = {
      {py, "import os, shutil, stat\nopen('m.txt', 'w').write('x')\nshutil.copy('m.txt', 'c.txt')\n"
           "os.chmod('c.txt', 0o640)\noct(stat.S_IMODE(os.stat('c.txt').st_mode))",
       "'0o640'"},
      {py, "import os\ntry:\n  os.chmod('m.txt', 0o4755)\nexcept PermissionError:\n  r = 'refused'\n"
           "else:\n  r = oct(os.stat('m.txt').st_mode)\nr",
       "'refused'"},
      {js, "const fs = require('fs'); fs.writeFileSync('n.txt', 'x'); fs.chmodSync('n.txt', 0o600); "
           "(fs.statSync('n.txt').mode & 0o7777).toString(8)",
       "'600'"},
      {js, "const fs = require('fs'); let r; try { fs.chmodSync('n.txt', 0o4755); r = 'changed'; } "
           "catch (e) { r = e.code; } r",
       "'EPERM'"},
      {js, "const fs = require('fs'); let r; try { fs.closeSync(fs.openSync('s.bin', 'w', 0o6755)); "
           "r = (fs.statSync('s.bin').mode & 0o7777).toString(8); } catch (e) { r = e.code; } r",
       "'EPERM'"},
      {js, "let r; try { const { Worker } = require('worker_threads'); "
           "new Worker('1', { eval: true, execArgv: [] }); r = 'started'; } catch (e) { r = e.code; } r",
       "'ERR_ACCESS_DENIED'"},
  };
  for (const Case& c : cases) {
    sandbox::v1::Finished f = RunCode(stub, c.session, c.code, 10000);
    EXPECT_EQ(f.result_repr(), c.want) << c.code << "\n" << f.DebugString();
  }
}

// Each route out of the tier, from both languages, on a daemon started with `args`: none
// reaches the host, and sandboxd and both sessions serve on.
void ExpectHostileCodeHeld(const std::vector<std::string>& args) {
  SandboxdProcess d(args);
  ASSERT_TRUE(d.Start({"SANDBOXD_TEST_SECRET=TOPSECRET-in-the-daemons-environment"}));
  auto stub = d.Stub();
  Listener listener;
  const std::string secret = absl::StrCat("/tmp/wasm-secret-", getpid());
  std::ofstream(secret) << "TOPSECRET";
  sandbox::v1::Session py = CreateIn(*stub, "python");
  sandbox::v1::Session js = CreateIn(*stub, "javascript");
  const std::string port = std::to_string(listener.port());
  const std::string connect = "await new Promise((res, rej) => { const s = require('net').connect(" + port +
                              ", '127.0.0.1'); s.on('connect', () => res('connected')); s.on('error', rej); })";
  const std::vector<std::pair<std::string, std::string>> attempts = {
      {py.id(), "open('" + secret + "').read()"},
      {py.id(), "import os\nstr(sorted(os.environ.items()))"},
      // Emscripten's sockets pretend to connect: what counts is that nothing reaches the listener.
      {py.id(), "import socket\ns = socket.socket()\ns.connect(('127.0.0.1', " + port + "))\ns.sendall(b'x')\ns.recv(1)"},
      {py.id(), "import js\njs.process.mainModule.require('fs').readFileSync('" + secret + "', 'utf8')"},
      {py.id(), "import pyodide_js\npyodide_js.mountNodeFS('/host', '/tmp')\nopen('/host/" +
                    fs::path(secret).filename().string() + "').read()"},
      {py.id(), "from pyodide.code import run_js\nrun_js(\"require('fs').readFileSync('" + secret + "', 'utf8')\")"},
      {py.id(), "from pyodide.code import run_js\nawait run_js(\"(async () => { " + connect.substr(6) + " })()\")"},
      {js.id(), "require('fs').readFileSync('" + secret + "', 'utf8')"},
      {js.id(), "require('fs').realpathSync.native('/etc')"},
      {js.id(), "require('child_process').execSync('cat " + secret + "').toString()"},
      {js.id(), "JSON.stringify(process.env)"},
      {js.id(), "process.kill(" + std::to_string(d.pid()) + ", 'SIGTERM')"},
      {js.id(), connect},
      {js.id(), "await fetch('http://127.0.0.1:" + port + "/')"},
      {js.id(), "new Function('return process')().pid"},
  };
  for (const auto& [id, code] : attempts) {
    sandbox::v1::Finished f = RunCode(*stub, id, code, 10000);
    const std::string seen = f.result_repr() + f.stdout() + f.stderr() + f.error().message();
    EXPECT_EQ(seen.find("TOPSECRET"), std::string::npos) << code << "\n" << f.DebugString();
    EXPECT_EQ(seen.find("connected"), std::string::npos) << code << "\n" << f.DebugString();
  }
  EXPECT_FALSE(listener.Reached()) << "a connection from the sandbox reached the host";
  ExpectModesAndWorkersHeld(*stub, py.id(), js.id());
  EXPECT_EQ(RunCode(*stub, py.id(), "1 + 1").result_repr(), "2");
  EXPECT_EQ(RunCode(*stub, js.id(), "1 + 1").result_repr(), "2");
  fs::remove(secret);
}

TEST(WasmTest, HostileCodeReachesNoHostFileNetworkProcessOrSignal) { ExpectHostileCodeHeld(WasmOnly()); }

TEST(WasmTest, ATamperedSnapshotStopsTheStartWithTheReason) {
  const std::string wasm_dir = absl::StrCat(::testing::TempDir(), "wasm-tamper-", getpid());
  {
    SandboxdProcess d(WasmOnly(wasm_dir));
    ASSERT_TRUE(d.Start());
  }
  std::string snapshot;
  for (const auto& e : fs::directory_iterator(wasm_dir + "/snapshots")) {
    if (e.path().extension() == ".snap") snapshot = e.path().string();
  }
  ASSERT_FALSE(snapshot.empty()) << "the first start made no snapshot in " << wasm_dir;
  {
    std::fstream f(snapshot, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1 << 20);
    f.put('\x5a');
  }
  SandboxdProcess again(WasmOnly(wasm_dir));
  EXPECT_EQ(again.StartExpectingExit(), 1) << again.Log();
  EXPECT_NE(again.Log().find("is refused: its SHA-256"), std::string::npos) << again.Log();
  fs::remove_all(wasm_dir);
}

// bwrap as it fails under Docker's default seccomp profile.
std::string FailingBwrap() {
  const std::string path = absl::StrCat(::testing::TempDir(), "bwrap-like-docker-", getpid());
  std::ofstream(path) << "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n";
  fs::permissions(path, fs::perms::owner_all);
  return path;
}

TEST(WasmTest, ADemandedLayerThisMachineLacksStopsTheStart) {
  std::vector<std::string> args = WasmOnly();
  args.push_back("--wasm_bwrap=" + FailingBwrap());
  args.push_back("--wasm_layers=node,seccomp,landlock,bwrap");
  SandboxdProcess d(args);
  EXPECT_EQ(d.StartExpectingExit(), 1) << d.Log();
  EXPECT_NE(d.Log().find("bwrap"), std::string::npos) << d.Log();
  EXPECT_NE(d.Log().find("No permissions to create new namespace"), std::string::npos) << d.Log();
}

TEST(WasmTest, WithoutBwrapLayersOneToThreeHoldAndSaySo) {
  std::vector<std::string> args = WasmOnly();
  args.push_back("--wasm_bwrap=" + FailingBwrap());
  SandboxdProcess d(args);
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Info info = GetInfo(*stub);
  bool bwrap_said = false;
  for (const sandbox::v1::Layer& l : info.isolations(2).layers()) {
    if (l.name() == "bwrap") {
      bwrap_said = true;
      EXPECT_FALSE(l.in_force());
      EXPECT_NE(l.detail().find("No permissions"), std::string::npos) << l.detail();
    } else {
      EXPECT_TRUE(l.in_force()) << l.name() << ": " << l.detail();
    }
  }
  EXPECT_TRUE(bwrap_said) << info.DebugString();
  d.Stop();
  ExpectHostileCodeHeld(args);
}

// A session with a workspace of 16 MiB.
sandbox::v1::Session SmallWorkspace(sandbox::v1::SandboxService::Stub& stub, const std::string& runtime) {
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime(runtime);
  req.mutable_limits()->set_workspace_bytes(16u << 20);
  return CreateSession(stub, req);
}

// Whether GetInfo says the bwrap layer is in force.
bool BwrapInForce(sandbox::v1::SandboxService::Stub& stub) {
  const sandbox::v1::Info info = GetInfo(stub);
  for (const sandbox::v1::Layer& l : info.isolations(2).layers()) {
    if (l.name() == "bwrap") return l.in_force();
  }
  return false;
}

// Writes 1 MiB files (up to 64) until one fails; says how many MiB went in and how it failed.
constexpr char kFillWorkspace[] = R"(
import errno, time
written, failed = 0, 'no error'
try:
    for i in range(64):
        with open(f'/workspace/f{i}', 'wb') as f:
            f.write(b'x' * (1 << 20))
        written += 1
        time.sleep(0.01)
except OSError as e:
    failed = 'ENOSPC' if e.errno == errno.ENOSPC else repr(e)
f'{failed} after {written} MiB')";

// Empty files until the session ends: they take no blocks, only inodes.
constexpr char kManyEmptyFiles[] = R"(
import os
os.mkdir('/workspace/d')
for i in range(200000):
    open(f'/workspace/d/{i}', 'w').close()
'all made')";

// The session ends with its reason, and sandboxd serves on: a new session runs code.
void ExpectEndedOverBudget(sandbox::v1::SandboxService::Stub& stub, const sandbox::v1::Finished& f,
                           const std::string& what) {
  EXPECT_EQ(f.status(), sandbox::v1::Finished::SESSION_LOST) << f.DebugString();
  EXPECT_NE(f.error().message().find("sandboxd ended the session: the workspace holds"), std::string::npos)
      << f.DebugString();
  EXPECT_NE(f.error().message().find(what), std::string::npos) << f.DebugString();
  EXPECT_EQ(RunCode(stub, CreateIn(stub, "python").id(), "1 + 1").result_repr(), "2");
  EXPECT_TRUE(GetInfo(stub).serving());  // (a restarted daemon serves once a start worked)
}

// Under bwrap the workspace is a tmpfs of the session's size: writing past it fails inside
// the code (ENOSPC) and the session goes on. Inodes have no such wall (bwrap cannot bound a
// tmpfs's): sandboxd counts them and ends the session past one per 4 KiB.
TEST(WasmTest, AWorkspaceHoldsItsBudgetWithBwrap) {
  SandboxdProcess d(WasmOnly());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ASSERT_TRUE(BwrapInForce(*stub)) << "this test needs bwrap's namespaces: " << GetInfo(*stub).DebugString();
  sandbox::v1::Session py = SmallWorkspace(*stub, "python");
  sandbox::v1::Finished f = RunCode(*stub, py.id(), kFillWorkspace, 30000);
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr().rfind("'ENOSPC after ", 0), 0u) << f.result_repr();
  int mib = 99;
  sscanf(f.result_repr().c_str(), "'ENOSPC after %d", &mib);
  EXPECT_LE(mib, 16) << f.result_repr();
  sandbox::v1::SessionStats stats;
  ASSERT_TRUE(GetSessionStats(*stub, py.id(), &stats).ok());
  EXPECT_TRUE(stats.workspace_known()) << stats.DebugString();
  EXPECT_LE(stats.workspace_bytes(), 16u << 20) << stats.DebugString();
  EXPECT_GE(stats.workspace_bytes(), 15u << 20) << stats.DebugString();
  EXPECT_EQ(stats.workspace_limit_bytes(), 16u << 20) << stats.DebugString();
  EXPECT_EQ(RunCode(*stub, py.id(), "import os\nos.remove('/workspace/f0')\n'freed'").result_repr(), "'freed'");
  sandbox::v1::Session js = SmallWorkspace(*stub, "javascript");
  f = RunCode(*stub, js.id(), "const fs = require('fs'); let n = 0, r = 'no error'; try { for (; n < 64; n++) "
              "fs.writeFileSync(`f${n}`, Buffer.alloc(1 << 20)); } catch (e) { r = `${e.code} after ${n}` } r",
              30000);
  EXPECT_EQ(f.result_repr().rfind("'ENOSPC after 1", 0), 0u) << f.DebugString();
  ExpectEndedOverBudget(*stub, RunCode(*stub, py.id(), kManyEmptyFiles, 60000), "over its budget of 4096");
  EXPECT_EQ(RunCode(*stub, js.id(), "1 + 1").result_repr(), "2") << "another session ended too";
}

// Without bwrap the workspace is a host directory, which nothing bounds but RLIMIT_FSIZE
// (one file): sandboxd measures it every 200 ms and ends a session over its budget, gives
// the disk back at once, and says why; a restarted sandboxd too.
TEST(WasmTest, WithoutBwrapAWorkspaceOverItsBudgetEndsTheSession) {
  // A wasm directory of its own, whose workspaces are this daemon's only.
  const std::string wasm_dir = absl::StrCat(::testing::TempDir(), "wasm-budget-", getpid());
  std::vector<std::string> args = WasmOnly(wasm_dir);
  args.push_back("--wasm_bwrap=" + FailingBwrap());
  SandboxdProcess d(args);
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ASSERT_FALSE(BwrapInForce(*stub));
  sandbox::v1::Session py = SmallWorkspace(*stub, "python");
  sandbox::v1::Finished f = RunCode(*stub, py.id(), "open('/workspace/within', 'wb').write(b'x' * (8 << 20))");
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.DebugString();
  sandbox::v1::SessionStats stats;  // the budget thread's last walk: within 200 ms
  EXPECT_TRUE(WaitFor([&] { return GetSessionStats(*stub, py.id(), &stats).ok() &&
                                   stats.workspace_bytes() >= (8u << 20); }, 2000)) << stats.DebugString();
  EXPECT_TRUE(stats.workspace_known()) << stats.DebugString();
  EXPECT_EQ(stats.workspace_limit_bytes(), 16u << 20) << stats.DebugString();
  // The budget holds across a restart: the next sandboxd has it from the session's record.
  d.Kill();
  ASSERT_TRUE(d.Start());
  stub = d.Stub();
  EXPECT_EQ(RunCode(*stub, py.id(), "1 + 1").result_repr(), "2") << "8 MiB of 16 ended the session";
  ExpectEndedOverBudget(*stub, RunCode(*stub, py.id(), kFillWorkspace, 30000), "over its budget of 16 MiB");
  const std::string kib = Sh(absl::StrCat("du -sk ", wasm_dir, "/w | cut -f1"));
  EXPECT_LT(std::stoi(kib), 4096) << "the disk was not given back: " << kib << " KiB";
  sandbox::v1::Session js = SmallWorkspace(*stub, "javascript");
  ExpectEndedOverBudget(*stub, RunCode(*stub, js.id(), "const fs = require('fs'); fs.mkdirSync('d'); "
                                       "for (let i = 0; i < 200000; i++) fs.writeFileSync(`d/${i}`, ''); 'all made'", 60000),
                        "over its budget of 4096");
  // How far past its budget each session got before it ended.
  for (absl::string_view line : absl::StrSplit(d.Log(), '\n')) {
    if (absl::StrContains(line, "sandboxd ended the session")) std::printf("%s\n", std::string(line).c_str());
  }
  d.Stop();
  fs::remove_all(wasm_dir);
}

// The wasm records live in sandboxd's memory; the files are for the next start. A session
// whose record file went away still answers its stats and is still ended by its delete.
TEST(WasmTest, ASessionsRecordIsKeptInMemory) {
  SandboxdProcess d(WasmOnly());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session js = CreateIn(*stub, "javascript");
  const pid_t pid = std::stoi(js.container_id().substr(js.container_id().find('-') + 1));
  ASSERT_EQ(kill(pid, 0), 0) << js.DebugString();
  Sh(absl::StrCat("rm -f '", d.state_dir(), "'/wasm-records/*.json"));
  sandbox::v1::SessionStats stats;
  grpc::Status st = GetSessionStats(*stub, js.id(), &stats);
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_GT(stats.memory_bytes(), 0u) << stats.DebugString();
  grpc::ClientContext ctx;
  sandbox::v1::DeleteSessionRequest del;
  del.set_session_id(js.id());
  sandbox::v1::DeleteSessionResponse deleted;
  ASSERT_TRUE(stub->DeleteSession(&ctx, del, &deleted).ok());
  EXPECT_TRUE(WaitFor([&] { return kill(pid, 0) != 0; }, 5000)) << "the deleted session's process lives on";
}

// As root, every session runs as a uid of its own: not root, and not 65534, which other
// services of the host share and which could then read the session's memory in /proc.
// The sums over process `root` and its descendants of the "Pss:" and "Pss_Anon:" lines of
// their smaps_rollup, in bytes.
std::pair<uint64_t, uint64_t> TreePss(pid_t root) {
  std::map<pid_t, pid_t> parent;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t close = text.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(text.substr(close + 2), ' ');
    if (f.size() > 1) parent[std::atoi(name.c_str())] = std::atoi(f[1].c_str());
  }
  uint64_t pss = 0, anon = 0;
  for (const auto& [pid, ppid] : parent) {
    pid_t p = pid;
    while (p > 1 && p != root) p = parent.count(p) ? parent[p] : 0;
    if (p != root) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/smaps_rollup"));
    for (std::string line; std::getline(in, line);) {
      const uint64_t kb = std::strtoull(line.c_str() + line.find(':') + 1, nullptr, 10);
      if (absl::StartsWith(line, "Pss:")) pss += kb << 10;
      if (absl::StartsWith(line, "Pss_Anon:")) anon += kb << 10;
    }
  }
  return {pss, anon};
}

// An idle Python session's memory as GetSessionStats gives it: the proportional set size
// of its process tree, in which Node's code counts in full for a session alone and in part
// when sessions share it. Its anonymous part is the session's own whatever the sharing:
// ~96 MiB with Node's fixed malloc mmap threshold and the start's bytes freed, ~150 MiB
// without the threshold (then freed memory stays with malloc), so 110 MiB fails without it.
TEST(WasmTest, AnIdlePythonSessionHoldsUnder110MiBOfItsOwn) {
  SandboxdProcess d(WasmOnly());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session py = CreateIn(*stub, "python");
  sandbox::v1::Finished f = RunCode(*stub, py.id(), "x = 1");
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.DebugString();
  std::this_thread::sleep_for(std::chrono::seconds(2));  // the cell's garbage settles
  // Read before and after the stats: a Node process that another test starts or ends
  // meanwhile changes how the shared code divides, so the stats match one of the two.
  const int pid = std::stoi(py.container_id().substr(5));
  const uint64_t pss_before = TreePss(pid).first;
  sandbox::v1::SessionStats stats;
  grpc::Status st = GetSessionStats(*stub, py.id(), &stats);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const auto [pss, anon] = TreePss(pid);
  auto near = [&](uint64_t reading) {
    const double d = static_cast<double>(stats.memory_bytes()) - static_cast<double>(reading);
    return std::abs(d) <= reading * 0.05;
  };
  EXPECT_TRUE(near(pss_before) || near(pss))
      << "the tree's PSS read before and after: " << pss_before << ", " << pss << "\n" << stats.DebugString();
  EXPECT_LT(stats.memory_bytes(), stats.memory_peak_bytes()) << "the peak sums resident sets";
  EXPECT_GT(anon, uint64_t{40} << 20);
  EXPECT_LE(anon, uint64_t{110} << 20) << "anonymous PSS of the tree: " << (anon >> 20) << " MiB";
}

TEST(WasmTest, EachSessionRunsAsAUidOfItsOwn) {
  if (geteuid() != 0) GTEST_FAIL() << "this test checks what a root sandboxd does: run it as root";
  SandboxdProcess d(WasmOnly());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  std::set<std::string> uids;
  for (int i = 0; i < 2; ++i) {
    sandbox::v1::Session js = CreateIn(*stub, "javascript");
    sandbox::v1::Finished f = RunCode(*stub, js.id(), "`${process.getuid()}:${process.getgid()}`");
    ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.DebugString();
    const std::string ids = f.result_repr();
    EXPECT_EQ(ids.find("'0:"), std::string::npos) << ids;
    EXPECT_EQ(ids.find("65534"), std::string::npos) << ids;
    uids.insert(ids);
  }
  EXPECT_EQ(uids.size(), 2u) << "two sessions, two uids";
}

// Code of a session that got past Node can listen on the runner's inherited socket too (it
// is the process's fd 3) and answer sandboxd's reconnection after a restart with a forged `ready`. The
// runner's token, which only the runner holds, tells them apart: the forger never gets a
// frame, and what it claims (4242 executions) is never believed. Whether sandboxd's
// connection lands on the forger or on the runner is the kernel's choice, so the restart
// is done three times.
TEST(WasmTest, CodeAnsweringOnTheRunnersSocketIsNotTakenForTheRunner) {
  std::vector<std::string> args = WasmOnly();
  args.push_back(RunnerKeepingDescriptorsFlag());  // code that got past Node
  SandboxdProcess d(args);
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session js = CreateIn(*stub, "javascript");
  sandbox::v1::Finished f = RunCode(*stub, js.id(), R"(
const net = require('net'), fs = require('fs');
const frame = (o) => { const b = Buffer.from(JSON.stringify(o)); const h = Buffer.alloc(4); h.writeUInt32BE(b.length); return Buffer.concat([h, b]); };
globalThis.forger = net.createServer(c => {
  fs.appendFileSync('stolen.txt', 'CONN\n');
  c.write(frame({ type: 'ready', runner_version: 2, runtime: 'javascript', pid: 2, execs: 4242 }));
  c.on('data', d => fs.appendFileSync('stolen.txt', 'FRAME ' + d.slice(4).toString().slice(0, 200) + '\n'));
});
await new Promise((res, rej) => { forger.on('error', rej); forger.listen({ fd: 3 }, res); });
'listening')");
  ASSERT_EQ(f.result_repr(), "'listening'") << f.DebugString();
  for (int restart = 0; restart < 3; ++restart) {
    d.Kill();
    ASSERT_TRUE(d.Start());
    stub = d.Stub();
    sandbox::v1::Session after;
    if (!GetSession(*stub, js.id(), &after).ok()) break;  // the forger won the connection: dropped
    EXPECT_NE(after.executions(), 4242u) << "a forged ready was believed: " << after.DebugString();
    sandbox::v1::Finished later = RunCode(*stub, js.id(), "require('fs').existsSync('stolen.txt') ? "
                                                          "require('fs').readFileSync('stolen.txt', 'utf8') : ''", 5000);
    EXPECT_EQ(later.status(), sandbox::v1::Finished::OK)
        << "the session was re-attached to something that does not run code: " << later.DebugString();
    EXPECT_EQ(later.result_repr().find("FRAME"), std::string::npos)
        << "sandboxd sent frames to the forger: " << later.DebugString();
  }
}

// Node's permission model alone does not hold (it must allow the network to serve the
// inherited socket, and user code may reach native code): layers 1-3 are always demanded,
// and a list that leaves out seccomp or Landlock stops the start as any bad flag does
// (exit 2, before anything is made), saying so.
TEST(WasmTest, ALayerListWithoutSeccompOrLandlockStopsTheStart) {
  for (const char* layers : {"node", "node,seccomp", "landlock,bwrap"}) {
    std::vector<std::string> args = WasmOnly();
    args.push_back(absl::StrCat("--wasm_layers=", layers));
    SandboxdProcess d(args);
    EXPECT_EQ(d.StartExpectingExit(), 2) << layers << "\n" << d.Log();
    EXPECT_NE(d.Log().find("always in force"), std::string::npos) << layers << "\n" << d.Log();
  }
}

// A --wasm_dir whose parent another user may write (or owns) could be swapped by that user
// after the start: sandboxd refuses to start, naming the parent. A sticky parent (/tmp) is
// fine when the directory in it is ours.
TEST(WasmTest, AWasmDirUnderADirectoryOthersMayWriteStopsTheStart) {
  if (geteuid() != 0) GTEST_FAIL() << "the test chowns a directory to another uid: run it as root";
  const std::string parent = absl::StrCat(::testing::TempDir(), "wasm-parent-", getpid());
  fs::create_directories(parent);
  struct Case {
    fs::perms mode;
    uid_t owner;
    std::string why;  // "": it starts
  };
  const std::vector<Case> cases = {
      {fs::perms::all, 0, absl::StrCat(parent, ", a parent of --wasm_dir ", parent, "/wasm, is writable")},
      {fs::perms::owner_all, 4242, absl::StrCat(parent, " in it belongs to uid 4242")},
      {fs::perms::all | fs::perms::sticky_bit, 0, ""}};
  for (const Case& c : cases) {
    fs::permissions(parent, c.mode);
    ASSERT_EQ(chown(parent.c_str(), c.owner, 0), 0);
    SandboxdProcess d(WasmOnly(parent + "/wasm"));
    if (c.why.empty()) {
      EXPECT_TRUE(d.Start()) << d.Log();
      continue;
    }
    EXPECT_EQ(d.StartExpectingExit(), 1) << d.Log();
    EXPECT_NE(d.Log().find(c.why), std::string::npos) << c.why << "\n" << d.Log();
  }
  // A symbolic link on the way, root's and in a sticky directory like /tmp: the checks would
  // see its target while sessions follow whatever it points to later.
  fs::permissions(parent, fs::perms::owner_all);
  ASSERT_EQ(chown(parent.c_str(), 0, 0), 0);
  const std::string link = parent + "-link";
  fs::remove(link);
  fs::create_directory_symlink(parent, link);
  SandboxdProcess d(WasmOnly(link + "/wasm"));
  EXPECT_EQ(d.StartExpectingExit(), 1) << d.Log();
  EXPECT_NE(d.Log().find("without a symbolic link on the way"), std::string::npos) << d.Log();
  fs::remove(link);
  fs::remove_all(parent);
}

// A '..' after a symbolic link leads to the link target's parent, which the link's owner
// may change after the start, while the path's text drops the two: refused.
TEST(WasmTest, AWasmDirWithADotDotStopsTheStart) {
  const std::string base = absl::StrCat(::testing::TempDir(), "wasm-dotdot-", getpid());
  fs::create_directories(base + "/other");
  fs::create_directory_symlink(base + "/other", base + "/link");
  SandboxdProcess d(WasmOnly(base + "/link/../real"));
  EXPECT_EQ(d.StartExpectingExit(), 1) << d.Log();
  EXPECT_NE(d.Log().find("has a '..' component"), std::string::npos) << d.Log();
  fs::remove_all(base);
}

}  // namespace
}  // namespace sandboxd::testing
