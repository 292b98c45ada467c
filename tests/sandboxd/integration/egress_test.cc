// Integration: egress by policy through real containers (docs/egress.md). The container keeps
// --network none; sandboxd's proxy dials in to the runner's relay over the socket directory.
// The origin and the daemon's flags are egress_fixture.h's.
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "egress_fixture.h"
#include "egress_relays.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "harness.h"

namespace sandboxd::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class EgressTest : public EgressOriginTest {};

TEST_F(EgressTest, PythonAndNodeReachAnAllowedHostAndNothingElse) {
  SandboxdProcess d(Flags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  ExpectPythonFetchesThroughTheProxy(*stub);
  ExpectRequestsFetchesThroughTheProxy(*stub);
  ExpectJavaScriptFetchesThroughTheProxy(*stub);
  ExpectNoProxyVariablesWithoutAPolicy(*stub);
}

TEST_F(EgressTest, HostileRequestsAreCutBeforeTheyReachTheOrigin) {
  SandboxdProcess d(Flags());
  ASSERT_TRUE(d.Start());
  ExpectHostileRequestsCut(d);
}

TEST_F(EgressTest, OneSessionsFloodDoesNotStarveAnother) {
  SandboxdProcess d(Flags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session flood = CreateWith(*stub, allowed_);
  sandbox::v1::Session calm = CreateWith(*stub, allowed_);
  ASSERT_FALSE(flood.id().empty());
  ASSERT_FALSE(calm.id().empty());
  // 300 connections to the relay, each a request head cut short: held open by the flood.
  sandbox::v1::StartExecution start = Start(flood.id(), absl::StrCat(
      "import os, socket, time, urllib.parse\n"
      "u = urllib.parse.urlparse(os.environ['HTTP_PROXY'])\n"
      "held = []\n"
      "for i in range(300):\n"
      "    try:\n"
      "        s = socket.create_connection((u.hostname, u.port), timeout=5)\n"
      "        s.sendall(b'GET http://origin.test:", http_, "/page HTTP/1.1\\r\\n')\n"
      "        held.append(s)\n"
      "    except OSError:\n"
      "        pass\n"
      "print('holding', len(held), flush=True)\n"
      "time.sleep(8)\n"), 30000);
  std::thread flooding([&] { Execute(*stub, start); });
  std::this_thread::sleep_for(std::chrono::seconds(2));
  sandbox::v1::Finished f = RunCode(*stub, calm.id(), absl::StrCat(
      "import urllib.request\n"
      "print(urllib.request.urlopen('http://origin.test:", http_, "/page', timeout=10).read().decode())\n"));
  EXPECT_EQ(f.stdout(), "hello from origin\n") << f.stderr();
  flooding.join();
}

TEST_F(EgressTest, APolicyIsAdmittedNarrowedOwnedAndKeptAcrossARestart) {
  SandboxdProcess d(Flags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  EXPECT_THAT(GetInfo(*stub).egress_max(), HasSubstr("origin.test:"));
  sandbox::v1::CreateSessionRequest wide;
  wide.set_egress_policy("origin.test:*");
  grpc::Status refused = TryCreate(*stub, wide);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_THAT(refused.error_message(), HasSubstr("entry 1 (\"origin.test:*\") is wider"));
  sandbox::v1::Session s = CreateWith(*stub, allowed_);
  ASSERT_FALSE(s.id().empty());
  // A new container's runner hands its listener to the proxy; gVisor's relays. After the
  // restart both relay: the listener went with the old daemon.
  EXPECT_EQ(RunCode(*stub, s.id(), kCountRelaysCode).stdout(),
            TestIsolation() == "gvisor" ? "1\n" : "0\n");

  stub = NarrowThenRestart(d, s.id());
  ASSERT_NE(stub, nullptr) << "narrowing or the restart failed";
  EXPECT_EQ(RunCode(*stub, s.id(), kCountRelaysCode).stdout(), "1\n");
  sandbox::v1::Finished f = RunCode(*stub, s.id(), absl::StrCat(
      "import urllib.request, urllib.error\n"
      "print(urllib.request.urlopen('http://origin.test:", http_, "/page', timeout=10).read().decode())\n"
      "try:\n"
      "    urllib.request.urlopen('https://origin.test:", https_, "/page', timeout=10)\n"
      "except urllib.error.URLError as e:\n"
      "    print('refused', e.reason)\n"));
  EXPECT_THAT(f.stdout(), HasSubstr("hello from origin\nrefused Tunnel connection failed: 403"))
      << f.stderr();
}

// Python that fetches the origin's page up to `tries` times, one after another, and prints
// how many answered before the first that did not (a spent quota's 429, or a cut).
std::string FetchesThatSucceed(int http_port, int tries) {
  return absl::StrCat(
      "import urllib.request\n"
      "done = 0\n"
      "for i in range(", tries, "):\n"
      "    try:\n"
      "        urllib.request.urlopen('http://origin.test:", http_port, "/page', timeout=10).read()\n"
      "    except Exception:\n"
      "        break\n"
      "    done += 1\n"
      "print(done)\n");
}

// What a session's byte quota counted before a restart still counts after it: its fetches
// before and after add up to those of a session that never went through one.
TEST_F(EgressTest, AByteQuotaKeepsItsCountAcrossARestart) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--egress_max_bytes_per_session=1500");  // a few fetches of the page
  SandboxdProcess d(flags);
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateWith(*stub, allowed_);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(RunCode(*stub, s.id(), FetchesThatSucceed(http_, 2)).stdout(), "2\n");
  ASSERT_EQ(d.Stop(), 0);
  ASSERT_TRUE(d.Start());
  stub = d.Stub();
  sandbox::v1::Finished after = RunCode(*stub, s.id(), FetchesThatSucceed(http_, 20));
  sandbox::v1::Session fresh = CreateWith(*stub, allowed_);
  ASSERT_FALSE(fresh.id().empty());
  sandbox::v1::Finished whole = RunCode(*stub, fresh.id(), FetchesThatSucceed(http_, 20));
  int after_n = -1, whole_n = -1;
  ASSERT_TRUE(absl::SimpleAtoi(after.stdout(), &after_n)) << after.stdout() << after.stderr();
  ASSERT_TRUE(absl::SimpleAtoi(whole.stdout(), &whole_n)) << whole.stdout() << whole.stderr();
  EXPECT_GT(whole_n, 2);
  EXPECT_LT(whole_n, 20);
  EXPECT_EQ(2 + after_n, whole_n) << "fetches after the restart: " << after_n;
}

// pip, as the image ships it, downloads a wheel from an index the policy allows, over
// HTTPS with the session's CA, through the proxy variables alone; from an index it does not
// allow it gets nothing, and the origin never hears of it.
TEST_F(EgressTest, PipDownloadsFromAnAllowedIndexOnly) {
  SandboxdProcess d(Flags());
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateWith(*stub, allowed_);
  ASSERT_FALSE(s.id().empty());
  sandbox::v1::Finished f = RunCode(*stub, s.id(), absl::StrCat(
      "import os, subprocess, sys\n"
      "open('/tmp/ca.pem', 'w').write('''", ca_pem_, "''')\n"
      "def pip(host):\n"
      "    r = subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-index',\n"
      "        '--no-cache-dir', '--disable-pip-version-check', '--cert', '/tmp/ca.pem',\n"
      "        '--find-links', f'https://{host}:", https_, "/wheels/', '--dest', 'dl-' + host,\n"
      "        'egress-probe'], capture_output=True, text=True, timeout=120)\n"
      "    print(host, 'exit', r.returncode)\n"
      "    print(r.stdout, r.stderr)\n"
      "pip('origin.test')\n"
      "pip('other.test')\n"
      "print('saved', os.listdir('dl-origin.test'), os.path.exists('dl-other.test/egress_probe-1.0-py3-none-any.whl'))\n"),
      180000);
  ASSERT_EQ(f.status(), sandbox::v1::Finished::OK) << f.error().message() << f.stderr();
  EXPECT_THAT(f.stdout(), HasSubstr("origin.test exit 0\n")) << f.stdout();
  EXPECT_THAT(f.stdout(), HasSubstr("Successfully downloaded egress-probe"));
  EXPECT_THAT(f.stdout(), HasSubstr("other.test exit 1\n")) << f.stdout();
  EXPECT_THAT(f.stdout(), HasSubstr("Tunnel connection failed: 403"));
  EXPECT_THAT(f.stdout(), HasSubstr("saved ['egress_probe-1.0-py3-none-any.whl'] False"));
  const std::string log = Log();
  EXPECT_THAT(log, HasSubstr("GET /wheels/egress_probe-1.0-py3-none-any.whl HTTP/1.1 host=origin.test:"));
  EXPECT_THAT(log, Not(HasSubstr("other.test")));
}

}  // namespace
}  // namespace sandboxd::testing
