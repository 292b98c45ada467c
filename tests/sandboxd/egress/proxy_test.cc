// The egress proxy's decisions on loopback, with real sockets (proxy_fixture.h).
#include <arpa/inet.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "egress/system_resolver.h"
#include "opt_out.h"
#include "proxy_fixture.h"

namespace sandboxd {
namespace egress {
namespace egress_test {
namespace {


class ProxyTest : public ProxyFixture {};

TEST_F(ProxyTest, AnAllowedTunnelRelaysBytesBothWays) {
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  Client client = Client::Tcp(last_port());
  ASSERT_THAT(Connect(client, Origin()), StartsWith("HTTP/1.1 200"));
  const std::string hello = ClientHelloFor("origin.test");
  ASSERT_GT(hello.size(), 100u);
  ASSERT_TRUE(client.Send(hello + "ping"));
  EXPECT_EQ(client.Read("ping"), hello + "ping") << "the echo comes back through the tunnel";
  EXPECT_EQ(origin_.received(), hello + "ping");
  client.Close();
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].allowed);
  EXPECT_EQ(d[0].session, "s1");
  EXPECT_EQ(d[0].owner, "alice");
  EXPECT_EQ(d[0].method, "CONNECT");
  EXPECT_EQ(d[0].host, "origin.test");
  EXPECT_EQ(d[0].address, "127.0.0.1");
  EXPECT_EQ(d[0].bytes_up, hello.size() + 4);
  EXPECT_EQ(d[0].bytes_down, hello.size() + 4);
}

// A TCP listener on 127.0.0.1 (any port), listening unless `listen_too` is false; its fd.
int LoopbackListener(const char* address = "127.0.0.1", bool listen_too = true) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, address, &a.sin_addr);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  if (listen_too) {
    EXPECT_EQ(listen(fd, 16), 0);
  }
  return fd;
}

uint16_t PortOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

// A runner's listener, handed over: its connections are the proxy's, checked as its own.
TEST_F(ProxyTest, AnAdoptedListenerIsServedWithThePolicy) {
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  const int fd = LoopbackListener();
  const uint16_t port = PortOf(fd);
  ASSERT_TRUE(proxy->Adopt(codemode::UniqueFd(fd)).ok());
  Client allowed = Client::Tcp(port);
  ASSERT_THAT(Connect(allowed, Origin()), StartsWith("HTTP/1.1 200"));
  const std::string hello = ClientHelloFor("origin.test");
  ASSERT_TRUE(allowed.Send(hello + "ping"));
  EXPECT_EQ(allowed.Read("ping"), hello + "ping");
  Client refused = Client::Tcp(port);
  EXPECT_THAT(Connect(refused, "other.test:443"), StartsWith("HTTP/1.1 403"));
  proxy->Stop();
  EXPECT_TRUE(allowed.ClosedWithin(std::chrono::seconds(5)));
  bool closed = false;  // Stop closes the adopted listener: connections are refused
  for (int i = 0; i < 500 && !closed; ++i) {
    closed = !Client::Tcp(port).connected();
    if (!closed) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(closed) << "port " << port << " still accepts after Stop";
}

// Only a listening TCP socket bound to loopback is adopted; anything else is refused,
// saying what it is (and closed).
TEST_F(ProxyTest, OnlyALoopbackTcpListenerIsAdopted) {
  auto proxy = Make("origin.test:$PORT");
  auto refusal = [&](int fd) {
    absl::Status s = proxy->Adopt(codemode::UniqueFd(fd));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  EXPECT_THAT(refusal(LoopbackListener("127.0.0.1", false)), HasSubstr("not listening"));
  EXPECT_THAT(refusal(LoopbackListener("0.0.0.0")), HasSubstr("not on loopback"));
  EXPECT_THAT(refusal(socket(AF_UNIX, SOCK_STREAM, 0)), HasSubstr("not a TCP socket"));
  EXPECT_THAT(refusal(socket(AF_INET, SOCK_DGRAM, 0)), HasSubstr("not a TCP socket"));
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  close(pipe_fds[1]);
  EXPECT_THAT(refusal(pipe_fds[0]), HasSubstr("not a TCP socket"));
  EXPECT_THAT(refusal(-1), HasSubstr("not a TCP socket"));
}

// CPU time this process has used, user and system, in seconds.
double ProcessCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

// With no descriptor left, a waiting connection cannot be accepted: the proxy tries again
// after a pause instead of at once (a spinning accept held the io thread every session's
// egress shares), and takes the connection once descriptors are back. The bound is on CPU
// time spent, a resource: a spinning loop uses the whole second.
TEST_F(ProxyTest, AnAcceptWithoutDescriptorsWaitsBeforeTryingAgain) {
  // The sanitizers' runtimes need descriptors of their own (a symbolizer's pipes), which
  // this process runs out of here: scripts/sanitize.sh opts out; every other run runs it.
  SKIP_IF_OPTED_OUT("SANDBOXD_TEST_SKIP_NO_DESCRIPTORS");
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
  const int lowest_free = dup(0);  // the number the client's socket gets
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  rlimit tight = saved;
  tight.rlim_cur = lowest_free + 1;  // the client's socket, and nothing for the proxy's accept
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  Client client = Client::Tcp(last_port());
  const double cpu_before = ProcessCpuSeconds();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double spent = ProcessCpuSeconds() - cpu_before;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);
  ASSERT_TRUE(client.connected());
  EXPECT_LT(spent, 0.25) << "CPU seconds spent while the accept could not get a descriptor";
  EXPECT_THAT(Connect(client, Origin()), StartsWith("HTTP/1.1 200"));
}

// A bulk transfer both ways at once, through buffers that grow while it runs: every byte
// arrives, once and in order.
TEST_F(ProxyTest, ABulkTransferArrivesWholeAndInOrder) {
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  Client client = Client::Tcp(last_port());
  ASSERT_THAT(Connect(client, Origin()), StartsWith("HTTP/1.1 200"));
  std::string bulk = ClientHelloFor("origin.test");
  for (uint32_t i = 0; bulk.size() < (3u << 20); ++i) absl::StrAppend(&bulk, i, ",");
  bulk += "end";
  std::thread sender([&] { EXPECT_TRUE(client.Send(bulk)); });
  const std::string echoed = client.Read("end", std::chrono::seconds(30));
  sender.join();
  EXPECT_EQ(echoed.size(), bulk.size());
  EXPECT_TRUE(echoed == bulk) << "the echo differs from what was sent";
  EXPECT_TRUE(origin_.received() == bulk) << "the origin got other bytes than were sent";
}

TEST_F(ProxyTest, BytesSentWithTheConnectAreCheckedAndRelayed) {
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  const std::string hello = ClientHelloFor("origin.test");
  Client client = Client::Tcp(last_port());
  ASSERT_TRUE(client.Send(absl::StrCat("CONNECT ", Origin(), " HTTP/1.1\r\n\r\n", hello, "ping")));
  const std::string answer = client.Read("ping");
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(answer, ::testing::EndsWith(hello + "ping"));
  Client evil = Client::Tcp(last_port());
  ASSERT_TRUE(evil.Send(absl::StrCat("CONNECT ", Origin(), " HTTP/1.1\r\n\r\n",
                                     ClientHelloFor("evil.test"), "ping")));
  EXPECT_TRUE(evil.ClosedWithin(std::chrono::seconds(3)));
  EXPECT_EQ(origin_.received(), hello + "ping");
}

TEST(SystemResolverTest, LocalhostResolvesToLoopback) {
  IoThreads io;
  SystemResolver resolver(io.io());
  std::promise<absl::StatusOr<std::vector<IpAddress>>> answer;
  resolver.Resolve("localhost", [&](absl::StatusOr<std::vector<IpAddress>> r) { answer.set_value(r); });
  absl::StatusOr<std::vector<IpAddress>> r = answer.get_future().get();
  ASSERT_TRUE(r.ok()) << r.status();
  bool loopback = false;
  for (const IpAddress& a : *r) loopback = loopback || Classify(a) == IpClass::kLoopback;
  EXPECT_TRUE(loopback);
  std::promise<absl::StatusOr<std::vector<IpAddress>>> none;
  resolver.Resolve("no-such-name.invalid", [&](absl::StatusOr<std::vector<IpAddress>> r) { none.set_value(r); });
  EXPECT_FALSE(none.get_future().get().ok());
}

TEST_F(ProxyTest, AHostOutsideThePolicyGets403AndNothingReachesTheServer) {
  resolver_.Set("other.test", {{*IpAddress::Parse("127.0.0.1")}});
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  Client client = Client::Tcp(last_port());
  const std::string answer = Connect(client, absl::StrCat("other.test:", origin_.port())) + client.Read();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(answer, HasSubstr("is not in the session's egress policy"));
  EXPECT_EQ(resolver_.calls("other.test"), 0) << "a refused name is not even resolved";
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].allowed);
  EXPECT_EQ(d[0].status, 403);
  EXPECT_EQ(origin_.accepted(), 0);
}

TEST_F(ProxyTest, ANameResolvingToLoopbackIsRefusedUnlessARangeAllowsIt) {
  auto proxy = Make("origin.test:$PORT");
  Client client = Client::Tcp(last_port());
  const std::string answer = Connect(client, Origin()) + client.Read();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(answer, HasSubstr("origin.test resolves to 127.0.0.1 is loopback"));
  EXPECT_EQ(origin_.accepted(), 0);
  auto allowed = Make("origin.test:$PORT, 127.0.0.1:$PORT");
  Client again = Client::Tcp(last_port());
  EXPECT_THAT(Connect(again, Origin()), StartsWith("HTTP/1.1 200"));
}

TEST_F(ProxyTest, MetadataAndIpLiteralsAreRefused) {
  resolver_.Set("meta.test", {{*IpAddress::Parse("169.254.169.254")}});
  auto proxy = Make("origin.test:$PORT, meta.test:80, 0.0.0.0/0:*");
  Client client = Client::Tcp(last_port());
  const std::string answer = Connect(client, "meta.test:80") + client.Read();
  EXPECT_THAT(answer, StartsWith("HTTP/1.1 403"));
  EXPECT_THAT(answer, HasSubstr("cloud metadata"));
  Client literal = Client::Tcp(last_port());
  EXPECT_THAT(Connect(literal, absl::StrCat("127.0.0.1:", origin_.port())), StartsWith("HTTP/1.1 403"));
  Client mapped = Client::Tcp(last_port());
  EXPECT_THAT(Connect(mapped, absl::StrCat("[::ffff:127.0.0.1]:", origin_.port())),
              StartsWith("HTTP/1.1 403"));
  EXPECT_EQ(origin_.accepted(), 0);
}

TEST_F(ProxyTest, TheAddressCheckedIsTheAddressConnectedTo) {
  // A DNS answer that changes: the first holds a refused address and an allowed one, later
  // ones only the refused one. The proxy asks once and connects to the allowed address.
  resolver_.Set("origin.test", {{*IpAddress::Parse("169.254.169.254"), *IpAddress::Parse("127.0.0.1")},
                                {*IpAddress::Parse("169.254.169.254")}});
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  Client client = Client::Tcp(last_port());
  ASSERT_THAT(Connect(client, Origin()), StartsWith("HTTP/1.1 200"));
  const std::string hello = ClientHelloFor("origin.test");
  ASSERT_TRUE(client.Send(hello));
  EXPECT_EQ(client.Read(hello), hello);
  EXPECT_EQ(resolver_.calls("origin.test"), 1);
  client.Close();
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].address, "127.0.0.1");
}

TEST_F(ProxyTest, AClientHelloForAnotherNameIsCutBeforeAByteReachesTheServer) {
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  for (const std::string& first : {ClientHelloFor("evil.test"), ClientHelloFor(""),
                                   std::string("GET / HTTP/1.1\r\nHost: evil.test\r\n\r\n")}) {
    Client client = Client::Tcp(last_port());
    ASSERT_THAT(Connect(client, Origin()), StartsWith("HTTP/1.1 200"));
    ASSERT_TRUE(client.Send(first));
    EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
  }
  std::vector<Decision> d = sink_.WaitFor(3);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_THAT(d[0].reason, HasSubstr("(SNI) \"evil.test\" is not origin.test"));
  EXPECT_THAT(d[1].reason, HasSubstr("names no server"));
  EXPECT_THAT(d[2].reason, HasSubstr("TLS only"));
  for (const Decision& one : d) EXPECT_FALSE(one.allowed);
  EXPECT_EQ(origin_.received(), "");
}

TEST_F(ProxyTest, AnAbsoluteUriRequestIsForwardedInOriginForm) {
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  Client client = Client::Tcp(last_port());
  ASSERT_TRUE(client.Send(absl::StrCat("GET http://", Origin(), "/simple/x?y=1#frag HTTP/1.1\r\n",
                                       "Host: ", Origin(), "\r\nProxy-Authorization: secret\r\n",
                                       "Proxy-Connection: keep-alive\r\n\r\n")));
  const std::string echoed = client.Read("\r\n\r\n");
  EXPECT_THAT(echoed, StartsWith("GET /simple/x?y=1 HTTP/1.1\r\n"));
  EXPECT_THAT(echoed, HasSubstr("Connection: close\r\n"));
  EXPECT_THAT(echoed, ::testing::Not(HasSubstr("secret")));
  Client lying = Client::Tcp(last_port());
  ASSERT_TRUE(lying.Send(absl::StrCat("GET http://", Origin(), "/ HTTP/1.1\r\nHost: evil.test\r\n\r\n")));
  EXPECT_THAT(lying.Read(), ::testing::AllOf(StartsWith("HTTP/1.1 403"), HasSubstr("Host header")));
  Client origin_form = Client::Tcp(last_port());
  ASSERT_TRUE(origin_form.Send("GET / HTTP/1.1\r\nHost: origin.test\r\n\r\n"));
  EXPECT_THAT(origin_form.Read(), StartsWith("HTTP/1.1 400"));
}

// A request body is relayed, not parsed: one over Beast's default limit (1 MiB) passes, one
// over the connection's byte cap is refused with 413 before anything reaches the origin.
TEST_F(ProxyTest, ARequestBodyIsBoundByTheByteCapOnly) {
  ProxyLimits limits;
  limits.max_bytes_per_connection = 8u << 20;  // both ways: the echo doubles the body
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits);
  const std::string body(2u << 20, 'b');
  Client client = Client::Tcp(last_port());
  std::thread sender([&] {
    EXPECT_TRUE(client.Send(absl::StrCat("POST http://", Origin(), "/a HTTP/1.1\r\nHost: ", Origin(),
                                         "\r\nContent-Length: ", body.size(), "\r\n\r\n", body)));
  });
  const std::string echoed = client.Read(body, std::chrono::seconds(20));
  sender.join();
  EXPECT_EQ(echoed.size(), echoed.find("\r\n\r\n") + 4 + body.size()) << "the whole body came back";
  Client big = Client::Tcp(last_port());
  ASSERT_TRUE(big.Send(absl::StrCat("POST http://", Origin(), "/b HTTP/1.1\r\nHost: ", Origin(),
                                    "\r\nContent-Length: ", 9u << 20, "\r\n\r\n")));
  EXPECT_THAT(big.Read(), ::testing::AllOf(StartsWith("HTTP/1.1 413"), HasSubstr("max_bytes_per_connection")));
  EXPECT_EQ(origin_.accepted(), 1);
}

TEST_F(ProxyTest, AnAbsoluteUriRequestCarriesOneRequestOnly) {
  // The echo origin ignores Connection: close: whatever the proxy sends it, it gets.
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  const std::string head = absl::StrCat("POST /a HTTP/1.1\r\nHost: ", Origin(),
                                        "\r\nContent-Length: 5\r\nConnection: close\r\n\r\n");
  Client client = Client::Tcp(last_port());
  ASSERT_TRUE(client.Send(absl::StrCat("POST http://", Origin(), "/a HTTP/1.1\r\nHost: ", Origin(),
                                       "\r\nContent-Length: 5\r\n\r\nhe")));
  EXPECT_EQ(client.Read("he"), head + "he");
  ASSERT_TRUE(client.Send("lloGET /x HTTP/1.1\r\nHost: evil.test\r\n\r\n"));
  EXPECT_EQ(client.Read(), "llo") << "the rest of the body, then the end of the answer";
  EXPECT_EQ(origin_.received(), head + "hello");

  Client raw = Client::Tcp(last_port());
  ASSERT_TRUE(raw.Send(absl::StrCat("GET http://", Origin(), "/b HTTP/1.1\r\n\r\n")));
  EXPECT_THAT(raw.Read("\r\n\r\n"), StartsWith("GET /b HTTP/1.1\r\n"));
  raw.Send("RAW BYTES\r\n\r\n");
  EXPECT_TRUE(raw.ClosedWithin(std::chrono::seconds(3))) << "the origin's end ends the request";
  EXPECT_THAT(origin_.received(), ::testing::Not(HasSubstr("RAW")));
  EXPECT_EQ(origin_.accepted(), 2);

  Client chunked = Client::Tcp(last_port());
  ASSERT_TRUE(chunked.Send(absl::StrCat("POST http://", Origin(), "/c HTTP/1.1\r\n",
                                        "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")));
  EXPECT_THAT(chunked.Read(), ::testing::AllOf(StartsWith("HTTP/1.1 411"),
                                               HasSubstr("framed by Content-Length only")));
  EXPECT_EQ(origin_.accepted(), 2) << "a Transfer-Encoding request does not reach the origin";
}

// A listener on `ip`:`port` whose accept queue is full: a connect to it hangs in SYN_SENT
// (its SYNs are dropped) until Close, after which it is refused.
class FullListener {
 public:
  FullListener(const std::string& ip, uint16_t port) {
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_port = htons(port);
    inet_pton(AF_INET, ip.c_str(), &at.sin_addr);
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    const int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    ok_ = bind(fd_, reinterpret_cast<sockaddr*>(&at), sizeof(at)) == 0 && listen(fd_, 0) == 0;
    filler_ = socket(AF_INET, SOCK_STREAM, 0);  // takes the one place in the queue
    ok_ = ok_ && connect(filler_, reinterpret_cast<sockaddr*>(&at), sizeof(at)) == 0;
  }
  ~FullListener() { Close(); }
  bool ok() const { return ok_; }
  void Close() {
    if (fd_ >= 0) close(fd_);
    if (filler_ >= 0) close(filler_);
    fd_ = filler_ = -1;
  }

 private:
  int fd_ = -1;
  int filler_ = -1;
  bool ok_ = false;
};

// Whether a socket of this host is in SYN_SENT towards 127.0.0.2:`port` (/proc/net/tcp).
bool ConnectingTo127002(uint16_t port) {
  std::ifstream tcp("/proc/net/tcp");
  char remote[32];
  std::snprintf(remote, sizeof(remote), " 0200007F:%04X 02 ", port);
  for (std::string line; std::getline(tcp, line);) {
    if (line.find(remote) != std::string::npos) return true;
  }
  return false;
}

// origin.test answers 127.0.0.2 (hangs while its listener is full, then refuses) and
// 127.0.0.1 (the origin); Start leaves a request connecting to 127.0.0.2.
class ProxyNarrowTest : public ProxyFixture {
 protected:
  ProxyNarrowTest() : full_("127.0.0.2", origin_.port()) {
    resolver_.Set("origin.test", {{*IpAddress::Parse("127.0.0.2"), *IpAddress::Parse("127.0.0.1")}});
  }
  Client Start() {
    EXPECT_TRUE(full_.ok()) << "cannot listen on 127.0.0.2:" << origin_.port();
    proxy_ = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
    Client client = Client::Tcp(last_port());
    EXPECT_TRUE(client.Send(absl::StrCat("GET http://", Origin(), "/ HTTP/1.1\r\n\r\n")));
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!ConnectingTo127002(origin_.port()) && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(ConnectingTo127002(origin_.port())) << "the proxy never tried 127.0.0.2";
    return client;
  }
  bool NarrowTo(const std::string& range) {
    const std::string port = std::to_string(origin_.port());
    return proxy_->Narrow(*Policy::Parse(absl::StrCat("origin.test:", port, ", ", range, ":", port)))
        .ok();
  }

  FullListener full_;
  std::unique_ptr<SessionProxy> proxy_;
};

TEST_F(ProxyNarrowTest, NarrowingWhileConnectingSkipsTheAddressesItNoLongerAllows) {
  Client client = Start();
  ASSERT_TRUE(NarrowTo("127.0.0.2/32"));
  // Recheck runs on the connection's strand, before the refusal that Close brings.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  full_.Close();
  EXPECT_THAT(client.Read("", std::chrono::seconds(10)), StartsWith("HTTP/1.1 502"));
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_FALSE(d[0].allowed);
  EXPECT_EQ(origin_.accepted(), 0) << "127.0.0.1 was reached after the policy dropped it";
}

TEST_F(ProxyNarrowTest, NarrowingThatRefusesTheAddressBeingTriedCutsAtOnce) {
  Client client = Start();
  ASSERT_TRUE(NarrowTo("127.0.0.1/32"));
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u) << "the connection to 127.0.0.2 was not cut";
  EXPECT_FALSE(d[0].allowed);
  EXPECT_EQ(d[0].reason, "the session's egress policy no longer allows it");
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
  full_.Close();
  EXPECT_EQ(origin_.accepted(), 0);
}

TEST_F(ProxyTest, TheUnixSocketServesAndGoesWithTheProxy) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/egress_proxy_test.", getpid(), ".sock");
  unlink(path.c_str());
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  ASSERT_TRUE(proxy->ListenUnix(path).ok());
  EXPECT_FALSE(Make("x.test")->ListenUnix(path).ok()) << "an existing socket is not replaced";
  Client client = Client::Unix(path);
  ASSERT_TRUE(client.connected());
  EXPECT_THAT(Connect(client, Origin()), StartsWith("HTTP/1.1 200"));
  proxy.reset();
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3))) << "stopping cuts open tunnels";
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "the socket file goes";
}

TEST_F(ProxyTest, WhenTheHostDialsInParkedConnectionsWaitAndAreReplaced) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/egress_relay_test.", getpid(), ".sock");
  UnixListener relay(path);
  ProxyLimits limits;
  limits.header_timeout = std::chrono::milliseconds(300);
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits);
  ASSERT_TRUE(proxy->DialUnix(path, 2).ok());
  Client first = relay.Accept(std::chrono::seconds(3));
  Client second = relay.Accept(std::chrono::seconds(3));
  ASSERT_TRUE(first.connected() && second.connected()) << "the host parks two connections";
  EXPECT_FALSE(relay.Accept(std::chrono::milliseconds(200)).connected()) << "and no more";
  EXPECT_FALSE(first.ClosedWithin(std::chrono::milliseconds(600)))
      << "a parked connection waits past the header timeout";
  ASSERT_THAT(Connect(first, Origin()), StartsWith("HTTP/1.1 200"));
  const std::string hello = ClientHelloFor("origin.test");
  ASSERT_TRUE(first.Send(hello + "ping"));
  EXPECT_EQ(first.Read("ping"), hello + "ping");
  EXPECT_TRUE(relay.Accept(std::chrono::seconds(3)).connected()) << "a woken one is replaced";
  proxy.reset();
  EXPECT_TRUE(second.ClosedWithin(std::chrono::seconds(3))) << "stopping closes parked ones";
  EXPECT_TRUE(first.ClosedWithin(std::chrono::seconds(3))) << "and cuts served ones";
}

// Code in the sandbox owns the relay's side. An out-of-band byte makes a parked connection
// readable with nothing in line to peek: the host hands it on as no request and dials its
// replacement, where waiting for a request on it again would wake it again at once, forever.
TEST_F(ProxyTest, AnOutOfBandByteOnAParkedConnectionIsHandedOnAndReplaced) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/egress_oob_test.", getpid(), ".sock");
  UnixListener relay(path);
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT");
  ASSERT_TRUE(proxy->DialUnix(path, 1).ok());
  Client parked = relay.Accept(std::chrono::seconds(3));
  ASSERT_TRUE(parked.connected());
  ASSERT_TRUE(parked.SendOutOfBand('x')) << "this kernel has no MSG_OOB on unix sockets";
  Client next = relay.Accept(std::chrono::seconds(3));
  ASSERT_TRUE(next.connected()) << "the connection with the out-of-band byte was not replaced";
  EXPECT_THAT(Connect(next, Origin()), StartsWith("HTTP/1.1 200")) << "and the host serves the next";
}

TEST_F(ProxyTest, ARequestPaysForItsReplacementAndAClosedParkedOneDoesNot) {
  const std::string path = absl::StrCat(::testing::TempDir(), "/egress_redial_test.", getpid(), ".sock");
  UnixListener relay(path);
  ProxyLimits limits;
  limits.redial_interval = std::chrono::hours(1);  // past the burst, no budget comes back
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits);
  ASSERT_TRUE(proxy->DialUnix(path, 1).ok());
  // Back-to-back requests: each woken connection is replaced at once.
  for (int i = 0; i < 3; ++i) {
    Client parked = relay.Accept(std::chrono::seconds(3));
    ASSERT_TRUE(parked.connected()) << "request " << i << " found no parked connection";
    ASSERT_THAT(Connect(parked, Origin()), StartsWith("HTTP/1.1 200"));
  }
  // A parked connection the relay closes spends the budget instead: no replacement now.
  Client closed = relay.Accept(std::chrono::seconds(3));
  ASSERT_TRUE(closed.connected());
  closed.Close();
  EXPECT_FALSE(relay.Accept(std::chrono::milliseconds(500)).connected());
}

}  // namespace
}  // namespace egress_test
}  // namespace egress
}  // namespace sandboxd
