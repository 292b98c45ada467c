// Integration: egress by policy on the wasm tier (docs/egress.md, docs/wasm-tier.md). The
// jailed process opens no socket; sandboxd passes it egress.sock listening (fd 6), its proxy
// dials in there, and the runner hands each connection of the worker's fetch() (JavaScript's,
// Pyodide's pyfetch) one of the parked connections over a MessagePort. Same origin and flags
// as egress_test.cc (egress_fixture.h), every daemon with --isolation=wasm.
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "egress_fixture.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class WasmEgressTest : public EgressOriginTest {
 protected:
  std::vector<std::string> WasmFlags() {
    std::vector<std::string> flags = Flags();
    flags.insert(flags.end(), {"--isolation=wasm", "--podman=/nonexistent/podman",
                               "--wasm_dir=" + TestWasmDir()});
    return flags;
  }
};

TEST_F(WasmEgressTest, JavaScriptReachesAnAllowedHostAndNothingElse) {
  SandboxdProcess d(WasmFlags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ExpectJavaScriptFetchesThroughTheProxy(*stub);
  // No loopback relay, so no proxy variables, with a policy or without.
  sandbox::v1::Session js = CreateWith(*stub, allowed_, "javascript");
  EXPECT_EQ(js.egress_policy(), allowed_);
  const std::string vars = "Object.keys(process.env).filter((k) => /proxy/i.test(k)).length";
  EXPECT_EQ(RunCode(*stub, js.id(), vars).result_repr(), "0");
  // Without a policy nothing dials in: fetch() has no way out.
  sandbox::v1::Session none = CreateWith(*stub, "", "javascript");
  EXPECT_EQ(none.egress_policy(), "");
  sandbox::v1::Finished f = RunCode(*stub, none.id(), absl::StrCat(
      "let out; try { await fetch('http://origin.test:", http_, "/none'); out = 'fetched' }\n"
      "catch (e) { out = 'failed' } out"), 30000);
  EXPECT_EQ(f.result_repr(), "'failed'") << f.DebugString();
  EXPECT_THAT(Log(), Not(HasSubstr("/none")));
}

TEST_F(WasmEgressTest, PythonFetchesWithPyfetchAndUrllibSaysItCannot) {
  SandboxdProcess d(WasmFlags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session py = CreateWith(*stub, allowed_);
  ASSERT_FALSE(py.id().empty());
  sandbox::v1::Finished f = RunCode(*stub, py.id(), absl::StrCat(
      "from pyodide.http import pyfetch\n"
      "r = await pyfetch('http://origin.test:", http_, "/page')\n"
      "print(r.status, await r.string())\n"
      "r = await pyfetch('http://other.test:", http_, "/page')\n"
      "print('refused', r.status, await r.string())\n"
      "try:\n"
      "    await pyfetch('https://origin.test:", https_, "/page')\n"
      "except Exception as e:\n"
      "    print('tls refused')\n"
      "import js\n"
      "r = await js.fetch('http://origin.test:", http_, "/page')\n"
      "print('js', r.status)\n"
      "import urllib.request\n"
      "try:\n"
      "    urllib.request.urlopen('http://origin.test:", http_, "/page', timeout=5)\n"
      "except OSError as e:\n"
      "    print('urllib', e)\n"), 30000);
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.error().message() << f.stderr();
  EXPECT_THAT(f.stdout(), HasSubstr("200 hello from origin\n"));
  EXPECT_THAT(f.stdout(), HasSubstr("refused 403 egress refused: other.test:"));
  EXPECT_THAT(f.stdout(), HasSubstr("tls refused"));
  EXPECT_THAT(f.stdout(), HasSubstr("js 200"));
  EXPECT_THAT(f.stdout(), HasSubstr("urllib <urlopen error [Errno 63] Operation not permitted>"));
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("tls sni=origin.test"));  // the tunnel reached the origin
  EXPECT_THAT(log, Not(HasSubstr("other.test")));
}

// Code opens no socket of its own (seccomp), neither to the origin nor to egress.sock: what
// reaches the proxy comes through the relay's descriptor, and the proxy checks every request
// (JavaScriptReachesAnAllowedHostAndNothingElse).
TEST_F(WasmEgressTest, HostileCodeOpensNoSocketAndTheProxyStillDecides) {
  SandboxdProcess d(WasmFlags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session js = CreateWith(*stub, allowed_, "javascript");
  ASSERT_FALSE(js.id().empty());
  std::string egress_sock;
  for (const auto& dir : std::filesystem::directory_iterator(d.state_dir() + "/c")) {
    if (std::filesystem::exists(dir.path() / "egress.sock")) egress_sock = (dir.path() / "egress.sock").string();
  }
  ASSERT_FALSE(egress_sock.empty()) << "sandboxd bound no egress.sock for the session";
  sandbox::v1::Finished f = RunCode(*stub, js.id(), absl::StrCat(
      "const net = require('net'); const out = [];\n"
      "for (const to of [{ port: ", http_, ", host: '127.0.0.1' }, { path: '", egress_sock, "' }]) {\n"
      "  out.push(await new Promise((res) => { const s = net.connect(to, () => res('connected'));\n"
      "    s.on('error', (e) => res(e.code || e.message)) }));\n"
      "}\n"
      "out.join(' ')"), 30000);
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "'EPERM EPERM'");
  EXPECT_EQ(Log(), "") << "a connection from the sandbox reached the origin";
}

TEST_F(WasmEgressTest, APolicyIsNarrowedOwnedAndKeptAcrossARestart) {
  SandboxdProcess d(WasmFlags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateWith(*stub, allowed_, "javascript");
  ASSERT_FALSE(s.id().empty());
  stub = NarrowThenRestart(d, s.id());
  ASSERT_NE(stub, nullptr) << "narrowing or the restart failed";
  sandbox::v1::Finished f = RunCode(*stub, s.id(), absl::StrCat(
      "const r = await fetch('http://origin.test:", http_, "/page');\n"
      "console.log(r.status, await r.text());\n"
      "try { await fetch('https://origin.test:", https_, "/page') }\n"
      "catch (e) { console.log('refused', String(e.cause && e.cause.message || e)) }\n"), 30000);
  EXPECT_THAT(f.stdout(), HasSubstr("200 hello from origin\nrefused the egress proxy answered 403"))
      << f.DebugString();
}

}  // namespace
}  // namespace sandboxd::testing
