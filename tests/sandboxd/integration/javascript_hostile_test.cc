// Integration: hostile JavaScript against real Podman, in both isolation modes (issue 26,
// "Hostile"). Node gives user code child_process, process.binding, net and fs: whatever it
// reaches with them stays inside the session's container and limits, prototype pollution
// stays inside its session, and a healthy witness session of another caller keeps its state.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace sandboxd::testing {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;
namespace fs = std::filesystem;

sandbox::v1::CreateSessionRequest JavaScript() {
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("javascript");
  return req;
}

class JavaScriptHostileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string memory = TestIsolation() == "gvisor" ? "--memory_mb=768" : "--memory_mb=256";
    daemon_ = new SandboxdProcess({"--pool_size=0", "--pids=64", memory});
    ASSERT_TRUE(daemon_->Start({"SANDBOXD_TEST_SECRET=hunter2",
                                "HTTPS_PROXY=http://user:proxypass2@proxy.invalid:3128"}));
    auto stub = daemon_->Stub();
    witness_ = new std::string(CreateSession(*stub, JavaScript()).id());
    RunCode(*stub, *witness_, "globalThis.witness = 7");
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Stop(), 0) << daemon_->Log();
    delete daemon_;
    delete witness_;
  }
  void SetUp() override { stub_ = daemon_->Stub(); }
  void TearDown() override {
    Finished f = RunCode(*stub_, *witness_, "witness + ({}).polluted");
    EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
    EXPECT_EQ(f.result_repr(), "NaN") << "the witness sees another session's pollution";
  }
  // Runs `code`, which prints one JSON document, and parses it.
  json RunJson(const std::string& sid, const std::string& code) {
    Finished f = RunCode(*stub_, sid, code, 30000);
    EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
    json j = json::parse(f.stdout(), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << f.stdout();
    return j;
  }

  static SandboxdProcess* daemon_;
  static std::string* witness_;
  std::unique_ptr<sandbox::v1::SandboxService::Stub> stub_;
};
SandboxdProcess* JavaScriptHostileTest::daemon_ = nullptr;
std::string* JavaScriptHostileTest::witness_ = nullptr;

// child_process and process.binding run programs as the sandbox's user, in the container:
// no host environment, no host files, no network, a read-only root.
TEST_F(JavaScriptHostileTest, ChildProcessesAndBindingsStayInTheContainer) {
  const std::string host_file = absl::StrCat("/tmp/js-hostile-", getpid(), ".txt");
  std::ofstream(host_file) << "host";
  auto s = CreateSession(*stub_, JavaScript());
  json j = RunJson(s.id(), absl::StrCat(R"(
const cp = require('child_process'), fs = require('fs'), net = require('net');
const out = {};
out.uid = cp.execSync('id -u').toString().trim();
out.env = cp.execSync('env').toString() + JSON.stringify(process.env);
try {
  const r = process.binding('spawn_sync').spawn({ file: 'id', args: ['id', '-u'], stdio: [
    { type: 'pipe', readable: true }, { type: 'pipe', writable: true }, { type: 'pipe', writable: true }] });
  out.binding = r.output ? String(r.output[1]).trim() : 'error ' + r.error;
} catch (e) { out.binding = 'refused ' + e.code; }
out.host_file = fs.existsSync(')", host_file, R"(');
try { fs.writeFileSync('/etc/owned', 'x'); out.etc = 'written'; } catch (e) { out.etc = e.code; }
out.connect = await new Promise((resolve) => {
  const c = net.connect({ host: '192.0.2.1', port: 80, timeout: 3000 });
  c.on('connect', () => { c.destroy(); resolve('connected'); });
  c.on('timeout', () => { c.destroy(); resolve('timeout'); });
  c.on('error', (e) => resolve(e.code));
});
out.dns = await require('dns').promises.lookup('deb.debian.org').then(() => 'resolved', (e) => e.code);
console.log(JSON.stringify(out));
)"));
  fs::remove(host_file);
  EXPECT_EQ(j["uid"], "65534");
  const std::string env = j.value("env", "");
  EXPECT_EQ(env.find("hunter2"), std::string::npos) << env;
  EXPECT_EQ(env.find("proxypass"), std::string::npos) << env;
  EXPECT_EQ(env.find("XDG_RUNTIME_DIR"), std::string::npos) << env;
  // Either Node refuses the internal binding, or it runs a program as the same user.
  const std::string binding = j.value("binding", "");
  EXPECT_TRUE(binding == "65534" || binding.rfind("refused", 0) == 0) << binding;
  EXPECT_EQ(j["host_file"], false);
  // A read-only root (EROFS); gVisor checks the permission first (EACCES).
  EXPECT_TRUE(j["etc"] == "EROFS" || j["etc"] == "EACCES") << j["etc"];
  // Linux says ENETUNREACH, gVisor's network stack EHOSTUNREACH: no route either way.
  EXPECT_TRUE(j["connect"] == "ENETUNREACH" || j["connect"] == "EHOSTUNREACH") << j["connect"];
  EXPECT_NE(j["dns"], "resolved");
}

// Processes user code spawns count against the session's pids limit, and a reset ends them.
TEST_F(JavaScriptHostileTest, SpawnedProcessesAreBoundedByThePidsLimit) {
  auto s = CreateSession(*stub_, JavaScript());
  json j = RunJson(s.id(), R"(
const cp = require('child_process');
let started = 0, refused = '';
for (let i = 0; i < 200 && !refused; i++) {
  try {
    const c = cp.spawn('sleep', ['3600'], { detached: true, stdio: 'ignore' });
    await new Promise((resolve, reject) => { c.once('spawn', resolve); c.once('error', reject); });
    started++;
  } catch (e) { refused = e.code; }
}
console.log(JSON.stringify({ started, refused }));
)");
  EXPECT_LT(j.value("started", 1000), 64) << j.dump();
  EXPECT_EQ(j["refused"], "EAGAIN") << j.dump();
  grpc::ClientContext ctx;
  sandbox::v1::ResetSessionRequest reset;
  reset.set_session_id(s.id());
  sandbox::v1::Session after;
  grpc::Status reset_status = stub_->ResetSession(&ctx, reset, &after);
  ASSERT_TRUE(reset_status.ok()) << reset_status.error_code() << ": " << reset_status.error_message();
  // The reset killed them, and the old worker reaped its own children before it ended:
  // killed after it, they stayed zombies (Node has no waitpid(-1)) holding the pids limit,
  // and a session that had used it up could not start its new worker.
  j = RunJson(s.id(), R"(
const fs = require('fs');
let n = 0;
for (let i = 0; i < 50; i++) {  // init may still be reaping orphans of the children
  n = fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p)).length;
  if (n <= 2) break;
  await new Promise((r) => setTimeout(r, 100));
}
console.log(JSON.stringify({ n }));
)");
  EXPECT_EQ(j["n"], 2) << "processes survived the reset, or their zombies (init and the runner stay)";
  EXPECT_EQ(RunCode(*stub_, s.id(), "require('child_process').execSync('echo again').toString()").result_repr(),
            "'again\\n'") << "the session can still start processes";
}

// Polluting every prototype the runtime uses breaks neither this session's output and
// results nor anything of another session (the witness, checked after each test).
TEST_F(JavaScriptHostileTest, PrototypePollutionStaysInItsSession) {
  auto s = CreateSession(*stub_, JavaScript());
  Finished f = RunCode(*stub_, s.id(), R"(
Object.prototype.polluted = 1;
Object.prototype.then = function (r) { r('forged'); };
Object.prototype.toJSON = () => 'forged';
Array.prototype.push = () => 0;
Array.prototype[Symbol.iterator] = function* () { yield 'forged'; };
String.prototype.slice = () => 'forged';
JSON.stringify = () => 'forged';
Promise.prototype.then = function () { return this; };
Function.prototype.apply = () => 'forged';
console.log('still printing');
40 + 2
)");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.stdout(), "still printing\n");
  EXPECT_EQ(f.result_repr(), "42");
  f = RunCode(*stub_, s.id(), "console.log('next'); ({}).polluted");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.stdout(), "next\n");
  EXPECT_EQ(f.result_repr(), "1") << "the session keeps its own globals";
  auto other = CreateSession(*stub_, JavaScript());
  EXPECT_EQ(RunCode(*stub_, other.id(), "typeof ({}).polluted").result_repr(), "'undefined'");
}

}  // namespace
}  // namespace sandboxd::testing
