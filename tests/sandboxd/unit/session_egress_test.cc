// Egress by policy end to end without podman (docs/egress.md): the real runner as a host
// process (its relay, its proxy variables), the daemon's EgressHub, and an origin HTTP
// server on loopback that --egress_hosts names "origin.test". The same through real
// containers is tests/sandboxd/integration/egress_test.cc.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "egress_relays.h"
#include "sandboxd/egress_hub.h"
#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

// Answers every connection with one HTTP response and records the request lines it got.
class OriginServer {
 public:
  OriginServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd_, 64) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "origin server: " << strerror(errno);
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~OriginServer() {
    shutdown(fd_, SHUT_RDWR);
    thread_.join();
    close(fd_);
  }
  uint16_t port() const { return port_; }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

 private:
  void Serve() {
    for (;;) {
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) return;
      std::string head;
      char buf[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        head.append(buf, static_cast<size_t>(n));
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        requests_.push_back(head.substr(0, head.find("\r\n")));
      }
      const std::string body = "hello from origin";
      const std::string response = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Length: ", body.size(),
                                                "\r\nConnection: close\r\n\r\n", body);
      (void)!send(c, response.data(), response.size(), MSG_NOSIGNAL);
      close(c);
    }
  }
  int fd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

class SessionEgressTest : public SessionManagerTest {
 protected:
  void SetUp() override {
    SessionManagerTest::SetUp();
    origin_ = std::make_unique<OriginServer>();
    port_ = std::to_string(origin_->port());
    // origin.test resolves to loopback: the range entry is what lets a name reach it.
    allowed_ = absl::StrCat("origin.test:", port_, ", 127.0.0.0/8:", port_);
    absl::StatusOr<std::unique_ptr<EgressHub>> hub = EgressHub::Create(HubOptions());
    ASSERT_TRUE(hub.ok()) << hub.status();
    hub_ = *std::move(hub);
  }
  EgressHubOptions HubOptions() const {
    EgressHubOptions o;
    o.max_policy = absl::StrCat(allowed_, ", *.example.com");
    o.hosts = {{"origin.test", *egress::IpAddress::Parse("127.0.0.1")}};
    return o;
  }
  void TearDown() override {
    SessionManagerTest::TearDown();  // the sessions' proxies go before the hub
    hub_.reset();
    origin_.reset();
  }
  ManagerOptions EgressOptions() {
    ManagerOptions o = Options();
    o.egress = hub_.get();
    return o;
  }
  sandbox::v1::Session CreateWith(SessionManager* m, const std::string& policy,
                                  const std::string& owner = "alice") {
    sandbox::v1::CreateSessionRequest r;
    r.set_owner(owner);
    r.set_egress_policy(policy);
    return Create(m, r);
  }
  // What the session's code prints fetching http://origin.test:<port><path>.
  std::string Fetch(SessionManager* m, const std::string& id, const std::string& path = "/x") {
    std::optional<Finished> f = Run(m, id, absl::StrCat(
        "import urllib.request, urllib.error\n"
        "try:\n"
        "    print(urllib.request.urlopen('http://origin.test:", port_, path, "', timeout=10)"
        ".read().decode())\n"
        "except urllib.error.HTTPError as e:\n"
        "    print('refused', e.code, e.read().decode())\n"));
    if (!f) return "";
    EXPECT_EQ(f->status(), Finished::OK) << f->error().message();
    return f->stdout();
  }

  // How many of up to `tries` fetches, one after another, got their answer before the
  // first that did not (a spent quota's 429, or a connection it cut).
  int FetchesThatSucceed(SessionManager* m, const std::string& id, int tries) {
    std::optional<Finished> f = Run(m, id, absl::StrCat(
        "import urllib.request\n"
        "done = 0\n"
        "for i in range(", tries, "):\n"
        "    try:\n"
        "        urllib.request.urlopen('http://origin.test:", port_, "/x', timeout=10).read()\n"
        "    except Exception:\n"
        "        break\n"
        "    done += 1\n"
        "print(done)\n"));
    if (!f) return -1;
    EXPECT_EQ(f->status(), Finished::OK) << f->error().message() << f->stderr();
    int done = -1;
    EXPECT_TRUE(absl::SimpleAtoi(f->stdout(), &done)) << f->stdout();
    return done;
  }
  // The egress count in session `id`'s record (-1 when it cannot be read).
  int64_t RecordedEgressBytes(const std::string& id) {
    std::ifstream in(SessionRecordPath(id));
    std::stringstream buf;
    buf << in.rdbuf();
    absl::StatusOr<SessionRecord> r = DecodeSessionRecord(buf.str());
    return r.ok() ? static_cast<int64_t>(r->egress_bytes_used) : -1;
  }

  // A session with the allowed policy in `isolation`, from a manager (*m) that allows only it.
  absl::StatusOr<sandbox::v1::Session> CreateIn(Isolation isolation, SessionManager** m) {
    ManagerOptions o = EgressOptions();
    o.isolation.allowed = {isolation};
    *m = StartManager(o);
    sandbox::v1::CreateSessionRequest r;
    r.set_isolation(isolation == Isolation::kWasm ? sandbox::v1::ISOLATION_WASM
                                                  : sandbox::v1::ISOLATION_GVISOR);
    r.set_egress_policy(allowed_);
    return (*m)->CreateSession(r);
  }
  // A session with the allowed policy on a new manager (*m, *s), and what `code` did there.
  std::optional<Finished> RunInNewSession(SessionManager** m, sandbox::v1::Session* s,
                                          const std::string& code) {
    *m = StartManager(EgressOptions());
    *s = CreateWith(*m, allowed_);
    if (s->id().empty()) return std::nullopt;
    return Run(*m, s->id(), code);
  }
  // How many relay processes the session's runner has (egress_relays.h).
  std::string Relays(SessionManager* m, const std::string& id) {
    std::optional<Finished> f = Run(m, id, kCountRelaysCode);
    return f ? f->stdout() : "";
  }

  std::unique_ptr<OriginServer> origin_;
  std::string port_, allowed_;
  std::unique_ptr<EgressHub> hub_;
};

TEST_F(SessionEgressTest, AnAllowedHostIsReachedThroughTheRelay) {
  SessionManager* m = StartManager(EgressOptions());
  sandbox::v1::Session s = CreateWith(m, allowed_);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(s.egress_policy(), allowed_);
  EXPECT_EQ(Fetch(m, s.id(), "/data?q=1"), "hello from origin\n");
  EXPECT_THAT(origin_->requests(), ::testing::ElementsAre("GET /data?q=1 HTTP/1.1"));
  absl::StatusOr<sandbox::v1::Session> got = m->GetSession(s.id());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->egress_policy(), allowed_);
}

TEST_F(SessionEgressTest, ANameLeadingToLoopbackIsRefusedWithoutARange) {
  SessionManager* m = StartManager(EgressOptions());
  sandbox::v1::Session s = CreateWith(m, absl::StrCat("origin.test:", port_));
  ASSERT_FALSE(s.id().empty());
  const std::string out = Fetch(m, s.id());
  EXPECT_THAT(out, HasSubstr("refused 403"));
  EXPECT_THAT(out, HasSubstr("loopback"));
  EXPECT_TRUE(origin_->requests().empty());
}

TEST_F(SessionEgressTest, APolicyWiderThanTheMaximumIsRefusedNamingTheEntry) {
  SessionManager* m = StartManager(EgressOptions());
  sandbox::v1::CreateSessionRequest r;
  r.set_egress_policy(absl::StrCat(allowed_, ", pypi.org"));
  absl::StatusOr<sandbox::v1::Session> s = m->CreateSession(r);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kPermissionDenied) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("entry 3 (\"pypi.org\")"));
  r.set_egress_policy("a..b");
  EXPECT_EQ(m->CreateSession(r).status().code(), absl::StatusCode::kInvalidArgument);
  // Refused before a sandbox is taken or started.
  EXPECT_TRUE(runtime_->Names().empty());
}

TEST_F(SessionEgressTest, TheWasmTierIsAdmittedAndOpenedAsTheOthersAre) {
  SessionManager* m = nullptr;
  absl::StatusOr<sandbox::v1::Session> s = CreateIn(Isolation::kWasm, &m);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->egress_policy(), allowed_);
  EXPECT_THAT(Fetch(m, s->id()), HasSubstr("hello from origin"));
}

// A new container's runner hands its loopback listener to the proxy: no relay copies the
// code's connections. After a restart the listener is gone with the old daemon, and the
// runner relays on the same port.
TEST_F(SessionEgressTest, AContainerRunnerHandsItsListenerOverAndRelaysAfterARestart) {
  SessionManager* m1 = StartManager(EgressOptions());
  sandbox::v1::Session s = CreateWith(m1, allowed_);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(Fetch(m1, s.id()), "hello from origin\n");
  EXPECT_EQ(Relays(m1, s.id()), "0\n");
  StopManager(m1);
  SessionManager* m2 = StartManager(EgressOptions());
  EXPECT_EQ(Fetch(m2, s.id()), "hello from origin\n");
  EXPECT_EQ(Relays(m2, s.id()), "1\n");
  StopManager(m2);
}

// gVisor's sockets are not the host's: its runner relays from the start.
TEST_F(SessionEgressTest, AGvisorRunnerRelays) {
  SessionManager* m = nullptr;
  absl::StatusOr<sandbox::v1::Session> s = CreateIn(Isolation::kGvisor, &m);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(Fetch(m, s->id()), "hello from origin\n");
  EXPECT_EQ(Relays(m, s->id()), "1\n");
}

TEST_F(SessionEgressTest, ASessionWithoutEgressHasNoProxyVariablesAndNoListener) {
  SessionManager* m = StartManager(EgressOptions());
  sandbox::v1::Session s = Create(m);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(s.egress_policy(), "");
  EXPECT_EQ(Eval(m, s.id(), "import os; sorted(k for k in os.environ if 'proxy' in k.lower())"),
            "[]");
  // The relay's socket exists (made before the directory is sealed) but nothing listens.
  const std::string sock = absl::StrCat(state_dir_, "/c/", runtime_->Names().front(), "/egress.sock");
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  snprintf(a.sun_path, sizeof a.sun_path, "%s", sock.c_str());
  EXPECT_NE(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0) << sock;
  EXPECT_EQ(errno, ECONNREFUSED) << sock << ": " << strerror(errno);
  close(fd);
}

TEST_F(SessionEgressTest, NarrowingAppliesAtOnceAndWideningIsRefused) {
  SessionManager* m = StartManager(EgressOptions());
  sandbox::v1::Session s = CreateWith(m, allowed_);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(Fetch(m, s.id()), "hello from origin\n");
  // Another owner cannot tell the session exists, let alone change it.
  EXPECT_EQ(m->SetEgressPolicy(s.id(), "", "mallory").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<sandbox::v1::Session> wider = m->SetEgressPolicy(s.id(), "api.example.com", "alice");
  EXPECT_EQ(wider.status().code(), absl::StatusCode::kPermissionDenied) << wider.status();
  const std::string name_only = absl::StrCat("origin.test:", port_);
  absl::StatusOr<sandbox::v1::Session> narrowed = m->SetEgressPolicy(s.id(), name_only, "alice");
  ASSERT_TRUE(narrowed.ok()) << narrowed.status();
  EXPECT_EQ(narrowed->egress_policy(), name_only);
  EXPECT_THAT(Fetch(m, s.id()), HasSubstr("refused 403"));
  EXPECT_EQ(origin_->requests().size(), 1u);
  // A session without egress takes only a policy that allows nothing.
  sandbox::v1::Session none = Create(m);
  EXPECT_TRUE(m->SetEgressPolicy(none.id(), "", "").ok());
  EXPECT_EQ(m->SetEgressPolicy(none.id(), name_only, "").status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(SessionEgressTest, ARestartKeepsThePolicyOrSaysWhyNot) {
  SessionManager* m1 = StartManager(EgressOptions());
  sandbox::v1::Session s = CreateWith(m1, allowed_);
  ASSERT_FALSE(s.id().empty());
  ASSERT_TRUE(m1->SetEgressPolicy(s.id(), allowed_, "alice").ok());
  StopManager(m1);
  SessionManager* m2 = StartManager(EgressOptions());
  absl::StatusOr<sandbox::v1::Session> kept = m2->GetSession(s.id());
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->egress_policy(), allowed_);
  EXPECT_EQ(Fetch(m2, s.id()), "hello from origin\n");
  StopManager(m2);

  // The operator narrowed --egress_max meanwhile: the session keeps running without egress.
  EgressHubOptions narrow;
  narrow.max_policy = "*.example.com";
  std::unique_ptr<EgressHub> hub = *EgressHub::Create(narrow);
  ManagerOptions o = Options();
  o.egress = hub.get();
  SessionManager* m3 = StartManager(o);
  absl::StatusOr<sandbox::v1::Session> lost = m3->GetSession(s.id());
  ASSERT_TRUE(lost.ok()) << lost.status();
  EXPECT_EQ(lost->state(), sandbox::v1::Session::READY);
  EXPECT_EQ(lost->egress_policy(), "");
  EXPECT_THAT(lost->egress_lost_reason(), HasSubstr("wider than the operator allows"));
  StopManager(m3);
}

// What a session's byte quota counted before a restart still counts after it: a session
// does not get its quota back by waiting for one. A session that never went through a
// restart (another owner's, the owners' quotas being far away) shows how many fetches the
// quota holds.
TEST_F(SessionEgressTest, ARestartKeepsWhatTheByteQuotaCounted) {
  EgressHubOptions o = HubOptions();
  o.limits.max_bytes_per_session = 1500;  // a few fetches of a few hundred bytes each
  hub_ = *EgressHub::Create(o);           // outlives the managers, as the fixture's
  SessionManager* m1 = StartManager(EgressOptions());
  sandbox::v1::Session s = CreateWith(m1, allowed_);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(FetchesThatSucceed(m1, s.id(), 2), 2);
  StopManager(m1);
  EXPECT_GT(RecordedEgressBytes(s.id()), 0) << "the stop records the last count";
  SessionManager* m2 = StartManager(EgressOptions());
  const int after = FetchesThatSucceed(m2, s.id(), 20);
  sandbox::v1::Session fresh = CreateWith(m2, allowed_, "bob");
  ASSERT_FALSE(fresh.id().empty());
  const int whole = FetchesThatSucceed(m2, fresh.id(), 20);
  EXPECT_GT(whole, 2);
  EXPECT_LT(whole, 20);
  EXPECT_EQ(2 + after, whole) << "fetches after the restart: " << after;
  StopManager(m2);
}

// While the daemon runs, the count goes into the record once kEgressRecordInterval has
// passed (or kEgressRecordBytes more were relayed), so that a daemon that dies without
// stopping loses little of it.
TEST_F(SessionEgressTest, TheByteQuotasCountGoesIntoTheRecordNowAndThen) {
  SessionManager* m = StartManager(EgressOptions());
  sandbox::v1::Session s = CreateWith(m, allowed_);
  ASSERT_FALSE(s.id().empty());
  EXPECT_EQ(RecordedEgressBytes(s.id()), 0);
  EXPECT_EQ(Fetch(m, s.id()), "hello from origin\n");
  clock_.Advance(Session::kEgressRecordInterval);
  EXPECT_TRUE(WaitFor([&] { return RecordedEgressBytes(s.id()) > 0; }))
      << RecordedEgressBytes(s.id());
}

TEST_F(SessionEgressTest, AWasmSessionThatAsksForNoneGetsTheOperatorsDefault) {
  EgressHubOptions o;
  o.default_policy = allowed_;
  std::unique_ptr<EgressHub> hub = *EgressHub::Create(o);
  ManagerOptions mo = Options();
  mo.egress = hub.get();
  mo.isolation.allowed = {Isolation::kWasm};
  SessionManager* m = StartManager(mo);
  sandbox::v1::CreateSessionRequest r;
  r.set_isolation(sandbox::v1::ISOLATION_WASM);
  absl::StatusOr<sandbox::v1::Session> s = m->CreateSession(r);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->egress_policy(), allowed_);
  StopManager(m);
}

TEST_F(SessionEgressTest, AuditLinesAreBoundedAndTheirQuotesAreTheDaemons) {
  LogCapture log;
  SessionManager* m = StartManager(EgressOptions());
  sandbox::v1::Session s = CreateWith(m, allowed_, "bob' status=200 why='forged");
  ASSERT_FALSE(s.id().empty());
  std::optional<Finished> f = Run(m, s.id(), absl::StrCat(
      "import urllib.request\n"
      "for i in range(", EgressHub::kAuditBurstAllowed + 10, "):\n"
      "    urllib.request.urlopen('http://origin.test:", port_, "/x', timeout=10).read()\n"));
  ASSERT_TRUE(f);
  ASSERT_EQ(f->status(), Finished::OK) << f->error().message();
  ASSERT_TRUE(WaitFor([&] { return origin_->requests().size() == EgressHub::kAuditBurstAllowed + 10; }));
  // Each connection's line comes when it ends; the last ones may still be ending.
  EXPECT_TRUE(WaitFor([&] {
    return log.Count("egress allowed session=" + s.id()) == static_cast<int>(EgressHub::kAuditBurstAllowed);
  })) << log.Count("egress allowed session=" + s.id());
  EXPECT_EQ(log.Count("owner='bob\\' status=200 why=\\'forged'"), static_cast<int>(EgressHub::kAuditBurstAllowed));
  ASSERT_TRUE(m->DeleteSession(s.id()).ok());
  // The ten past the bound, those its end cut among them, are summed in one line at the end,
  // with their bytes and their destination.
  const std::string summary = absl::StrCat("egress session=", s.id(), " owner='bob\\' status=200 why=\\'forged': 10 allowed (up=");
  EXPECT_TRUE(WaitFor([&] { return log.Count(summary) == 1; })) << log.Count(summary);
  EXPECT_EQ(log.Count(absl::StrCat("; origin.test:", port_, ") connections not logged")), 1);
  EXPECT_EQ(log.Count("egress allowed session=" + s.id()), static_cast<int>(EgressHub::kAuditBurstAllowed));
}

// The session's code takes its proxy port while the daemon restarts: its runner cannot
// listen there again, and the new daemon, which does not wait for that answer, says so.
TEST_F(SessionEgressTest, ARunnerThatCannotRelayAfterARestartIsLogged) {
  LogCapture log;
  SessionManager* m1 = nullptr;
  sandbox::v1::Session s;
  std::optional<Finished> f = RunInNewSession(&m1, &s,
      "import os, socket, threading, time, urllib.parse\n"
      "port = urllib.parse.urlparse(os.environ['HTTP_PROXY']).port\n"
      "def squat():\n"
      "    global squatter\n"
      "    while True:\n"
      "        sock = socket.socket()\n"
      "        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
      "        try:\n"
      "            sock.bind(('127.0.0.1', port))\n"
      "            sock.listen(1)\n"
      "            squatter = sock\n"
      "            return\n"
      "        except OSError:\n"
      "            sock.close()\n"
      "            time.sleep(0.01)\n"
      "threading.Thread(target=squat, daemon=True).start()\n"
      "print(port)\n");
  ASSERT_TRUE(f);
  ASSERT_EQ(f->status(), Finished::OK) << f->error().message() << f->stderr();
  const int port = std::stoi(f->stdout());
  StopManager(m1);
  bool squatted = false;  // the old listener is gone and the code's holds the port
  for (int i = 0; i < 500 && !squatted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    squatted = i >= 20 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
  }
  ASSERT_TRUE(squatted) << "the session's code never took port " << port;
  SessionManager* m2 = StartManager(EgressOptions());
  const std::string line = "could not turn egress on again: cannot listen";
  for (int i = 0; i < 500 && log.Count(line) == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(log.Count(line), 1);
  StopManager(m2);
}

// A connection still open when its session ends (here a tunnel whose origin never answers)
// is cut by the end and logged with its bytes and why it ended.
TEST_F(SessionEgressTest, AConnectionOpenWhenItsSessionEndsIsLogged) {
  LogCapture log;
  SessionManager* m = StartManager(EgressOptions());
  sandbox::v1::Session s = CreateWith(m, allowed_);
  ASSERT_FALSE(s.id().empty());
  std::optional<Finished> f = Run(m, s.id(), absl::StrCat(
      "import os, socket, ssl, urllib.parse\n"
      "u = urllib.parse.urlparse(os.environ['HTTP_PROXY'])\n"
      "held = socket.create_connection((u.hostname, u.port), timeout=10)\n"
      "held.sendall(b'CONNECT origin.test:", port_, " HTTP/1.1\\r\\n\\r\\n')\n"
      "print(held.recv(4096).split(b'\\r\\n')[0].decode())\n"
      "incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()\n"
      "tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname='origin.test')\n"
      "try:\n"
      "    tls.do_handshake()\n"
      "except ssl.SSLWantReadError:\n"
      "    pass\n"
      "held.sendall(outgoing.read() + b'x' * 100000)\n"));
  ASSERT_TRUE(f);
  ASSERT_EQ(f->status(), Finished::OK) << f->error().message() << f->stderr();
  EXPECT_EQ(f->stdout(), "HTTP/1.1 200 Connection established\n");
  ASSERT_TRUE(m->DeleteSession(s.id()).ok());
  // Allowed once its ClientHello was checked; refused when the end came first (a loaded
  // machine): logged either way.
  const std::string line = absl::StrCat(" session=", s.id(), " owner='alice' CONNECT origin.test:", port_);
  EXPECT_TRUE(WaitFor([&] { return log.Count(line) == 1; })) << "no line for the connection its end cut";
  EXPECT_EQ(log.Count("why='the session\\'s egress stopped'"), 1);
}

TEST_F(SessionEgressTest, ARestartDoesNotWaitForARunnerThatHoldsBackItsAnswer) {
  SessionManager* m1 = nullptr;
  sandbox::v1::Session s;
  // The session's code makes its runner answer `egress` only after 8 s.
  std::optional<Finished> f = RunInNewSession(&m1, &s,
      "import gc, time\n"
      "from sandbox_runner.runner import Runner\n"
      "r = [o for o in gc.get_objects() if isinstance(o, Runner)][0]\n"
      "slow = r._egress_on\n"
      "r._egress_on = lambda *args: (time.sleep(8), slow(*args))[1]\n");
  ASSERT_TRUE(f);
  ASSERT_EQ(f->status(), Finished::OK) << f->error().message() << f->stderr();
  StopManager(m1);
  SessionManager* m2 = StartManager(EgressOptions());
  absl::StatusOr<sandbox::v1::Session> kept = m2->GetSession(s.id());
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->egress_policy(), allowed_);
  EXPECT_EQ(kept->egress_lost_reason(), "");
  StopManager(m2);
}

}  // namespace
}  // namespace sandboxd::testing
