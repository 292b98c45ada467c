// The fixture of the egress integration tests (egress_test.cc, wasm_egress_test.cc): the
// origin is an HTTP and HTTPS server on the host's loopback (egress_origin.py, its
// certificate from a test CA for origin.test) that --egress_hosts names; its log says what
// reached it.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {

class EgressOriginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/egress-origin-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    int rc = 0;
    Sh(absl::StrCat(PROJECT_SOURCE_DIR, "/tests/common/make_test_certs.sh ", dir_,
                    " origin.test other.test"), &rc);
    ASSERT_EQ(rc, 0) << "make_test_certs.sh failed";
    origin_ = fork();
    ASSERT_GE(origin_, 0);
    if (origin_ == 0) {
      const std::string script = absl::StrCat(PROJECT_SOURCE_DIR, "/tests/sandboxd/integration/egress_origin.py");
      const std::string cert = dir_ + "/server.pem", key = dir_ + "/server-key.pem";
      execlp("python3", "python3", script.c_str(), dir_.c_str(), cert.c_str(), key.c_str(), nullptr);
      _exit(127);
    }
    ASSERT_TRUE(WaitFor([&] { return access((dir_ + "/ports").c_str(), R_OK) == 0; }, 10000))
        << "egress_origin.py did not start";
    std::ifstream(dir_ + "/ports") >> http_ >> https_;
    std::ifstream ca(dir_ + "/ca.pem");
    std::stringstream pem;
    pem << ca.rdbuf();
    ca_pem_ = pem.str();
    allowed_ = absl::StrCat("origin.test:", http_, ", origin.test:", https_, ", 127.0.0.0/8:", http_,
                            ", 127.0.0.0/8:", https_);
  }
  void TearDown() override {
    if (origin_ > 0) {
      kill(origin_, SIGKILL);
      waitpid(origin_, nullptr, 0);
    }
    Sh("rm -rf " + dir_);
  }

  // The daemon's flags: origin.test and other.test both lead to the origin; the maximum
  // allows origin.test and what `extra` adds.
  std::vector<std::string> Flags(const std::string& extra = "") {
    return {"--egress_hosts=origin.test=127.0.0.1,other.test=127.0.0.1,meta.test=169.254.169.254",
            absl::StrCat("--egress_max=", allowed_, ", meta.test:80", extra),
            "--egress_idle_timeout=2s"};
  }
  sandbox::v1::Session CreateWith(sandbox::v1::SandboxService::Stub& stub, const std::string& policy,
                                  const std::string& runtime = "python") {
    sandbox::v1::CreateSessionRequest r;
    r.set_owner("alice");
    r.set_egress_policy(policy);
    r.set_runtime(runtime);
    return CreateSession(stub, r);
  }
  std::string Log() {
    std::ifstream in(dir_ + "/requests.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Python that sends `request` to the relay raw and prints the proxy's status line; with
  // `sni`, answers a 200 with a TLS handshake naming `sni` and prints how it ended.
  std::string RawProxy(const std::string& request, const std::string& sni = "") {
    return absl::StrCat(
        "import os, socket, ssl, urllib.parse\n"
        "u = urllib.parse.urlparse(os.environ['HTTPS_PROXY'])\n"
        "s = socket.create_connection((u.hostname, u.port), timeout=10)\n"
        "s.sendall(b'", request, "')\n"
        "line = s.recv(4096).split(b'\\r\\n')[0].decode()\n"
        "print(line)\n"
        "if ", sni.empty() ? "False" : "True", " and ' 200 ' in line:\n"
        "    ctx = ssl.create_default_context(cadata='''", ca_pem_, "''')\n"
        "    try:\n"
        "        t = ctx.wrap_socket(s, server_hostname='", sni, "')\n"
        "        print('handshake done')\n"
        "    except (ssl.SSLError, OSError) as e:\n"
        "        print('handshake cut', type(e).__name__)\n");
  }

  // A Python session with the allowed policy fetches from the origin with urllib over https
  // (trusting the test CA) and http, is refused other.test both ways, and opens no socket
  // past the relay.
  void ExpectPythonFetchesThroughTheProxy(sandbox::v1::SandboxService::Stub& stub) {
    sandbox::v1::Session py = CreateWith(stub, allowed_);
    ASSERT_FALSE(py.id().empty());
    EXPECT_EQ(py.egress_policy(), allowed_);
    sandbox::v1::Finished f = RunCode(stub, py.id(), absl::StrCat(
        "import ssl, urllib.request, urllib.error\n"
        "ctx = ssl.create_default_context(cadata='''", ca_pem_, "''')\n"
        "print(urllib.request.urlopen('https://origin.test:", https_, "/page', context=ctx, timeout=10).read().decode())\n"
        "print(urllib.request.urlopen('http://origin.test:", http_, "/page', timeout=10).read().decode())\n"
        "for url in ('http://other.test:", http_, "/page', 'https://other.test:", https_, "/page'):\n"
        "    try:\n"
        "        urllib.request.urlopen(url, context=ctx, timeout=10)\n"
        "    except urllib.error.HTTPError as e:\n"
        "        print('refused', e.code, e.read().decode())\n"
        "    except urllib.error.URLError as e:\n"
        "        print('refused', e.reason)\n"
        "import socket\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', ", http_, "), timeout=3)\n"
        "    print('direct connect worked')\n"
        "except OSError as e:\n"
        "    print('direct connect failed')\n"));
    ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.error().message() << f.stderr();
    EXPECT_THAT(f.stdout(), ::testing::HasSubstr("hello from origin\nhello from origin\n"));
    EXPECT_THAT(f.stdout(), ::testing::HasSubstr("refused 403 egress refused: other.test:"));
    EXPECT_THAT(f.stdout(), ::testing::HasSubstr("refused Tunnel connection failed: 403"));
    EXPECT_THAT(f.stdout(), ::testing::HasSubstr("direct connect failed"));
    const std::string log = Log();
    EXPECT_THAT(log, ::testing::HasSubstr("tls sni=origin.test"));
    EXPECT_THAT(log, ::testing::HasSubstr("GET /page HTTP/1.1"));
    EXPECT_THAT(log, ::testing::Not(::testing::HasSubstr("other.test")));
  }

  // requests, as the sandbox images ship it (and the wasm tier's Python packages), fetches
  // from the origin over https with the test CA and is refused other.test, through the
  // proxy variables alone.
  void ExpectRequestsFetchesThroughTheProxy(sandbox::v1::SandboxService::Stub& stub) {
    sandbox::v1::Session py = CreateWith(stub, allowed_);
    ASSERT_FALSE(py.id().empty());
    sandbox::v1::Finished f = RunCode(stub, py.id(), absl::StrCat(
        "import requests\n"
        "open('/tmp/ca.pem', 'w').write('''", ca_pem_, "''')\n"
        "print('requests:', requests.get('https://origin.test:", https_, "/page', verify='/tmp/ca.pem', timeout=10).text)\n"
        "try:\n"
        "    requests.get('https://other.test:", https_, "/page', verify='/tmp/ca.pem', timeout=10)\n"
        "except requests.exceptions.ProxyError as e:\n"
        "    print('requests refused:', 'Tunnel connection failed: 403' in str(e))\n"));
    ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.error().message() << f.stderr();
    EXPECT_THAT(f.stdout(), ::testing::HasSubstr("requests: hello from origin\n"));
    EXPECT_THAT(f.stdout(), ::testing::HasSubstr("requests refused: True\n"));
    EXPECT_THAT(Log(), ::testing::Not(::testing::HasSubstr("other.test")));
  }

  void ExpectNoProxyVariablesWithoutAPolicy(sandbox::v1::SandboxService::Stub& stub) {
    sandbox::v1::Session none = CreateWith(stub, "");
    EXPECT_EQ(none.egress_policy(), "");
    sandbox::v1::Finished f = RunCode(stub, none.id(), "import os\nprint(sorted(k for k in os.environ if 'proxy' in k.lower()))");
    EXPECT_EQ(f.stdout(), "[]\n");
  }

  // Requests the proxy refuses, from raw sockets to the relay (RawProxy), never reach the
  // origin: IP literals and a name that leads to the metadata address, a TLS name other than
  // the CONNECT's; an allowed tunnel is cut once idle.
  void ExpectHostileRequestsCut(SandboxdProcess& d) {
    auto stub = d.Stub();
    sandbox::v1::Session s = CreateWith(*stub, absl::StrCat(allowed_, ", meta.test:80"));
    ASSERT_FALSE(s.id().empty());
    auto run = [&](const std::string& code) {
      sandbox::v1::Finished f = RunCode(*stub, s.id(), code);
      EXPECT_EQ(f.status(), sandbox::v1::Finished::OK) << f.error().message() << f.stderr();
      return f.stdout();
    };
    // IP literals no range entry covers (private, public); a name allowed as a name that
    // leads to the metadata address, which only a range naming it could open.
    EXPECT_THAT(run(RawProxy("CONNECT 192.168.1.1:443 HTTP/1.1\\r\\n\\r\\n")), ::testing::HasSubstr(" 403 "));
    EXPECT_THAT(run(RawProxy("CONNECT 8.8.8.8:443 HTTP/1.1\\r\\n\\r\\n")), ::testing::HasSubstr(" 403 "));
    EXPECT_THAT(run(RawProxy("GET http://meta.test/latest HTTP/1.1\\r\\nHost: meta.test\\r\\n\\r\\n")),
                ::testing::HasSubstr(" 403 "));
    // An allowed name whose TLS names another host is cut before a byte reaches the origin.
    const std::string other_sni = run(RawProxy(
        absl::StrCat("CONNECT origin.test:", https_, " HTTP/1.1\\r\\n\\r\\n"), "other.test"));
    EXPECT_THAT(other_sni, ::testing::HasSubstr("200"));
    EXPECT_THAT(other_sni, ::testing::HasSubstr("handshake cut"));
    // The same with the right name works, then the idle tunnel is cut (--egress_idle_timeout).
    const std::string idle = run(absl::StrCat(
        RawProxy(absl::StrCat("CONNECT origin.test:", https_, " HTTP/1.1\\r\\n\\r\\n"), "origin.test"),
        "import time\ntime.sleep(4)\n"
        "try:\n    print('after idle', t.recv(10))\n"
        "except (ssl.SSLError, OSError) as e:\n    print('after idle', type(e).__name__)\n"));
    EXPECT_THAT(idle, ::testing::HasSubstr("handshake done"));
    EXPECT_THAT(idle, ::testing::HasSubstr("after idle"));
    EXPECT_TRUE(WaitFor([&] { return absl::StrContains(d.Log(), "why='idle_timeout'"); }, 5000));
    const std::string log = Log();
    EXPECT_THAT(log, ::testing::Not(::testing::HasSubstr("sni=other.test")));
    EXPECT_THAT(log, ::testing::Not(::testing::HasSubstr("/latest")));
    EXPECT_THAT(d.Log(), ::testing::HasSubstr("egress refused session=" + s.id()));
  }

  // A JavaScript session with the allowed policy fetches from the origin over http and
  // https (refused until it trusts the test CA) and is refused other.test.
  void ExpectJavaScriptFetchesThroughTheProxy(sandbox::v1::SandboxService::Stub& stub) {
    sandbox::v1::Session js = CreateWith(stub, allowed_, "javascript");
    ASSERT_FALSE(js.id().empty());
    sandbox::v1::Finished f = RunCode(stub, js.id(), absl::StrCat(
        "const r = await fetch('http://origin.test:", http_, "/page');\n"
        "console.log(r.status, await r.text());\n"
        "const no = await fetch('http://other.test:", http_, "/page');\n"
        "console.log('refused', no.status);\n"
        "try { await fetch('https://origin.test:", https_, "/page'); console.log('tls trusted?'); }\n"
        "catch (e) { console.log('tls', String(e.cause && e.cause.code || e)); }\n"
        "require('fs').writeFileSync('ca.pem', `", ca_pem_, "`);\n"
        "process.env.NODE_EXTRA_CA_CERTS = require('path').resolve('ca.pem');\n"
        "const tls = await fetch('https://origin.test:", https_, "/page');\n"
        "console.log('tls', tls.status, await tls.text());\n"
        "try { await fetch('https://other.test:", https_, "/page'); }\n"
        "catch (e) { console.log('tunnel', String(e.cause && e.cause.message || e)); }\n"));
    ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.error().message() << f.stderr();
    EXPECT_NE(f.stdout().find("200 hello from origin"), std::string::npos) << f.stdout();
    EXPECT_NE(f.stdout().find("refused 403"), std::string::npos) << f.stdout();
    // The tunnel reached the origin: its certificate (of the test CA) is what Node refused,
    // until the code trusts the CA.
    EXPECT_NE(f.stdout().find("tls UNABLE_TO_VERIFY_LEAF_SIGNATURE"), std::string::npos) << f.stdout();
    EXPECT_NE(f.stdout().find("tls 200 hello from origin"), std::string::npos) << f.stdout();
    EXPECT_NE(f.stdout().find("tunnel the egress proxy answered 403 Forbidden to CONNECT other.test:"),
              std::string::npos) << f.stdout();
    const std::string log = Log();
    EXPECT_NE(log.find("tls sni=origin.test"), std::string::npos) << log;
    EXPECT_EQ(log.find("other.test"), std::string::npos) << log;
  }

  // Session `id` (alice's, with the allowed policy) is narrowed to http only: not by another
  // owner, nor wider; then the daemon restarts and the session keeps the narrowed policy.
  // Returns the stub of the restarted daemon (null after a failure).
  std::unique_ptr<sandbox::v1::SandboxService::Stub> NarrowThenRestart(SandboxdProcess& d,
                                                                        const std::string& id) {
    auto stub = d.Stub();
    auto set = [&](const std::string& policy, const std::string& owner, sandbox::v1::Session* out) {
      grpc::ClientContext ctx;
      sandbox::v1::SetEgressPolicyRequest req;
      req.set_session_id(id);
      req.set_egress_policy(policy);
      req.set_owner(owner);
      return stub->SetEgressPolicy(&ctx, req, out);
    };
    sandbox::v1::Session out;
    EXPECT_EQ(set("", "mallory", &out).error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_EQ(set("origin.test:*", "alice", &out).error_code(), grpc::StatusCode::PERMISSION_DENIED);
    const std::string narrowed = absl::StrCat("origin.test:", http_, ", 127.0.0.0/8:", http_);
    if (!set(narrowed, "alice", &out).ok()) return nullptr;
    EXPECT_EQ(out.egress_policy(), narrowed);
    if (d.Stop() != 0 || !d.Start()) return nullptr;
    stub = d.Stub();
    sandbox::v1::Session kept;
    if (!GetSession(*stub, id, &kept).ok()) return nullptr;
    EXPECT_EQ(kept.egress_policy(), narrowed);
    return stub;
  }

  std::string dir_, ca_pem_, allowed_;
  int http_ = 0, https_ = 0;
  pid_t origin_ = -1;
};

}  // namespace sandboxd::testing
