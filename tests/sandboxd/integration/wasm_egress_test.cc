// Integration: egress by policy on the wasm tier (docs/egress.md, docs/wasm-tier.md). The
// jailed process opens no socket; sandboxd passes it egress.sock listening (fd 6), its proxy
// dials in there, and the runner hands each connection of the worker's fetch() (JavaScript's,
// Pyodide's pyfetch) and of Python's own sockets one of the parked connections over a
// MessagePort. Same origin and flags
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

// Python's own sockets reach the relay (and only it) through the worker's egress port, and
// Pyodide's ssl does TLS with node:tls checking certificates as CPython would: the same
// urllib code and the same raw requests as in a container (egress_fixture.h).
TEST_F(WasmEgressTest, PythonUrllibReachesAnAllowedHostAndNothingElse) {
  SandboxdProcess d(WasmFlags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ExpectPythonFetchesThroughTheProxy(*stub);
  ExpectNoProxyVariablesWithoutAPolicy(*stub);
  ExpectHostileRequestsCut(d);
}

// requests and pip come from the wasm tier's Python packages (deploy/wasm/python-packages,
// read-only): requests as in a container, with Node's roots as its default bundle, which
// does not hold the test CA; pip runs in the cell (Pyodide starts no process) and downloads
// a wheel from the index the policy allows, and nothing from one it leaves out.
TEST_F(WasmEgressTest, RequestsAndPipFromThePythonPackages) {
  SandboxdProcess d(WasmFlags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ExpectRequestsFetchesThroughTheProxy(*stub);
  sandbox::v1::Session s = CreateWith(*stub, allowed_);
  ASSERT_FALSE(s.id().empty());
  sandbox::v1::Finished f = RunCode(*stub, s.id(), absl::StrCat(
      "import os, requests\n"
      "try:\n"
      "    requests.get('https://origin.test:", https_, "/default-bundle', timeout=10)\n"
      "except requests.exceptions.SSLError as e:\n"
      "    print('default bundle:', 'CERTIFICATE_VERIFY_FAILED' in str(e))\n"
      "try:\n"
      "    open(os.path.join(os.path.dirname(requests.__file__), 'planted.py'), 'w')\n"
      "    print('planted')\n"
      "except OSError as e:\n"
      "    print('read-only:', type(e).__name__)\n"
      "open('/tmp/ca.pem', 'w').write('''", ca_pem_, "''')\n"
      "from pip._internal.cli.main import main as pip\n"
      "for host in ('origin.test', 'other.test'):\n"
      "    code = pip(['download', '--no-index', '--no-cache-dir', '--disable-pip-version-check',\n"
      "        '--progress-bar', 'off', '--retries', '1', '--cert', '/tmp/ca.pem', '--find-links',\n"
      "        f'https://{host}:", https_, "/wheels/', '--dest', 'dl-' + host, 'egress-probe'])\n"
      "    print(host, 'exit', code)\n"
      "print('saved', os.listdir('dl-origin.test'), os.path.exists('dl-other.test/egress_probe-1.0-py3-none-any.whl'))\n"),
      180000);
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.error().message() << f.stderr();
  EXPECT_THAT(f.stdout(), HasSubstr("default bundle: True\n")) << f.stdout();
  EXPECT_THAT(f.stdout(), HasSubstr("read-only: PermissionError\n")) << f.stdout();
  EXPECT_THAT(f.stdout(), HasSubstr("origin.test exit 0\n")) << f.stdout() << f.stderr();
  EXPECT_THAT(f.stdout(), HasSubstr("Successfully downloaded egress-probe"));
  EXPECT_THAT(f.stdout(), HasSubstr("other.test exit 1\n")) << f.stdout();
  EXPECT_THAT(f.stdout() + f.stderr(), HasSubstr("Tunnel connection failed: 403"));
  EXPECT_THAT(f.stdout(), HasSubstr("saved ['egress_probe-1.0-py3-none-any.whl'] False"));
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("GET /wheels/egress_probe-1.0-py3-none-any.whl HTTP/1.1 host=origin.test:"));
  EXPECT_THAT(log, Not(HasSubstr("/default-bundle")));
  EXPECT_THAT(log, Not(HasSubstr("other.test")));
}

TEST_F(WasmEgressTest, PythonTlsChecksCertificatesAndPyfetchStillWorks) {
  SandboxdProcess d(WasmFlags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session py = CreateWith(*stub, allowed_);
  ASSERT_FALSE(py.id().empty());
  const std::string page = absl::StrCat("'https://origin.test:", https_, "/page'");
  sandbox::v1::Finished f = RunCode(*stub, py.id(), absl::StrCat(
      "import os, ssl, urllib.request\n"
      "try:\n"
      "    urllib.request.urlopen(", page, ", timeout=10)\n"
      "except urllib.error.URLError as e:\n"
      "    print('untrusted', type(e.reason).__name__, e.reason.verify_message)\n"
      "open('ca.pem', 'w').write('''", ca_pem_, "''')\n"
      "os.environ['SSL_CERT_FILE'] = os.path.abspath('ca.pem')\n"
      "print('trusted', urllib.request.urlopen(", page, ", timeout=10).read().decode())\n"
      "ctx = ssl.create_default_context(cafile='ca.pem')\n"
      "ctx.check_hostname = False\n"
      "import socket\n"
      "s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
      "s.sendall(b'CONNECT origin.test:", https_, " HTTP/1.1\\r\\n\\r\\n')\n"
      "print(s.recv(4096).split(b'\\r\\n')[0].decode())\n"
      "t = ctx.wrap_socket(s, server_hostname='origin.test')\n"
      "cert = t.getpeercert()\n"
      "print(t.version(), cert['subjectAltName'], len(t.getpeercert(True)) > 0)\n"
      "t.close()\n"
      "from pyodide.http import pyfetch\n"
      "r = await pyfetch('http://origin.test:", http_, "/page')\n"
      "print('pyfetch', r.status, await r.string())\n"), 30000);
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.error().message() << f.stderr();
  EXPECT_THAT(f.stdout(), HasSubstr("untrusted SSLCertVerificationError unable to verify the first certificate\n"));
  EXPECT_THAT(f.stdout(), HasSubstr("trusted hello from origin"));
  EXPECT_THAT(f.stdout(), HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(f.stdout(), HasSubstr("('DNS', 'origin.test')"));
  EXPECT_THAT(f.stdout(), HasSubstr("pyfetch 200 hello from origin"));
}

// A cell blocked reading from a tunnel the origin never answers is interrupted at its
// timeout, and the namespace is kept (a worker that ignored the interrupt would be ended,
// and `x` with it).
TEST_F(WasmEgressTest, PythonBlockedOnTheNetworkIsInterrupted) {
  SandboxdProcess d(WasmFlags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session py = CreateWith(*stub, allowed_);
  ASSERT_FALSE(py.id().empty());
  EXPECT_EQ(RunCode(*stub, py.id(), "x = 41").status(), sandbox::v1::Finished::OK);
  sandbox::v1::Finished f = RunCode(*stub, py.id(), absl::StrCat(
      "import socket\n"
      "s = socket.create_connection(('127.0.0.1', 3128))\n"
      "s.sendall(b'CONNECT origin.test:", http_, " HTTP/1.1\\r\\n\\r\\n')\n"
      "print(s.recv(4096).split(b'\\r\\n')[0].decode())\n"
      "s.recv(1)\n"), 3000);
  EXPECT_EQ(f.status(), sandbox::v1::Finished::TIMEOUT) << f.DebugString();
  EXPECT_THAT(f.stdout(), HasSubstr("HTTP/1.1 200"));
  EXPECT_EQ(RunCode(*stub, py.id(), "x + 1").result_repr(), "42");
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
  // Python code that swaps the relay-only connect function for Pyodide's own (node:net) is
  // stopped by the jail all the same.
  sandbox::v1::Session py = CreateWith(*stub, allowed_);
  ASSERT_FALSE(py.id().empty());
  f = RunCode(*stub, py.id(), absl::StrCat(
      "import socket\n"
      "try:\n"
      "    import pyodide_js\n"
      "    from pyodide.ffi import run_sync\n"
      "    run_sync(pyodide_js.useNodeSockFS())\n"
      "except Exception as e:\n"
      "    print('no swap', type(e).__name__)\n"
      "try:\n"
      "    socket.create_connection(('127.0.0.1', ", http_, "), timeout=5)\n"
      "    print('connected')\n"
      "except OSError as e:\n"
      "    print('refused', type(e).__name__)\n"), 30000);
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.DebugString();
  EXPECT_THAT(f.stdout(), HasSubstr("refused "));
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
