// The egress proxy's caps on loopback: slow and endless requests, bytes, idle time, total
// time, connections per session and per owner, and narrowing a running session's policy.
#include <gtest/gtest.h>

#include <limits>

#include "proxy_fixture.h"

namespace sandboxd {
namespace egress {
namespace egress_test {
namespace {

using std::chrono::milliseconds;

class ProxyCapsTest : public ProxyFixture {
 protected:
  static ProxyLimits Short() {
    ProxyLimits limits;
    limits.header_timeout = milliseconds(300);
    limits.idle_timeout = milliseconds(300);
    limits.max_connection_time = milliseconds(1500);
    return limits;
  }

  // What a client sends after its request's body is read and dropped, and the session's byte
  // quota counts it all the same: dropping is no way around the quota. A POST of "hi" and
  // `extra` bytes more, against a session quota of `quota`: the connection is cut, and the
  // next one is refused.
  void ExpectDroppedBytesToSpendTheQuota(uint64_t quota, size_t extra) {
    ProxyLimits limits;
    limits.max_bytes_per_session = quota;
    auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits);
    Client client = Client::Tcp(last_port());
    ASSERT_TRUE(client.Send(absl::StrCat("POST http://", Origin(), "/a HTTP/1.1\r\nHost: ",
                                         Origin(), "\r\nContent-Length: 2\r\n\r\nhi",
                                         std::string(extra, 'x'))));
    EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
    Client next = Client::Tcp(last_port());
    EXPECT_THAT(next.Read(), ::testing::AllOf(StartsWith("HTTP/1.1 429"), HasSubstr("max_bytes_per_session")));
  }

  // A tunnel to the origin, past its ClientHello.
  Client OpenTunnel() {
    Client client = Client::Tcp(last_port());
    EXPECT_THAT(Connect(client, Origin()), StartsWith("HTTP/1.1 200"));
    const std::string hello = ClientHelloFor("origin.test");
    client.Send(hello);
    EXPECT_EQ(client.Read(hello), hello) << "the echo of the ClientHello";
    return client;
  }
};

TEST_F(ProxyCapsTest, ASlowRequestHeadIsCutAtTheHeaderTimeout) {
  auto proxy = Make("origin.test:$PORT", Short());
  Client client = Client::Tcp(last_port());
  client.Send("CONNECT origin.te");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].reason, "header_timeout");
}

TEST_F(ProxyCapsTest, AnEndlessHeadIsRefusedAtItsSizeCap) {
  ProxyLimits limits = Short();
  limits.max_header_bytes = 1024;
  auto proxy = Make("origin.test:$PORT", limits);
  Client client = Client::Tcp(last_port());
  client.Send("CONNECT origin.test:1 HTTP/1.1\r\nX: " + std::string(4096, 'a'));
  EXPECT_THAT(client.Read(), StartsWith("HTTP/1.1 431"));
}

TEST_F(ProxyCapsTest, AnIdleTunnelIsCut) {
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", Short());
  Client client = OpenTunnel();
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_TRUE(d[0].allowed);
  EXPECT_EQ(d[0].reason, "idle_timeout");
}

TEST_F(ProxyCapsTest, AnEndlessTrickleIsCutAtTheTotalTime) {
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", Short());
  Client client = OpenTunnel();
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() - start < std::chrono::seconds(4)) {
    client.Send("x");  // well within the idle timeout each time
    closed = client.ClosedWithin(milliseconds(100));
  }
  EXPECT_TRUE(closed);
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].reason, "max_connection_time");
}

TEST_F(ProxyCapsTest, BytesPastTheCapAreNotRelayed) {
  ProxyLimits limits = Short();
  limits.idle_timeout = milliseconds(5000);
  limits.max_bytes_per_connection = 4000;
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits);
  {
    // In the first bytes of the tunnel, with the ClientHello.
    Client client = Client::Tcp(last_port());
    ASSERT_THAT(Connect(client, Origin()), StartsWith("HTTP/1.1 200"));
    client.Send(ClientHelloFor("origin.test") + std::string(10000, 'z'));
    EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
  }
  EXPECT_EQ(origin_.received(), "");
  // Once relaying.
  Client client = OpenTunnel();
  client.Send(std::string(10000, 'z'));
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
  EXPECT_LE(origin_.received().size(), 4000u);
  std::vector<Decision> d = sink_.WaitFor(2);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].reason, "max_bytes_per_connection");
  EXPECT_EQ(d[1].reason, "max_bytes_per_connection");
  EXPECT_LE(d[1].bytes_up + d[1].bytes_down, 4000u);
  EXPECT_GT(d[1].bytes_up, 0u);
}

TEST_F(ProxyCapsTest, ASpentSessionQuotaCutsAndRefuses) {
  ProxyLimits limits;
  limits.max_bytes_per_session = 4000;
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits);
  Client client = OpenTunnel();
  client.Send(std::string(500, 'a'));
  EXPECT_EQ(client.Read(std::string(500, 'a')).size(), 500u);
  client.Send(std::string(3000, 'b'));
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
  Client next = Client::Tcp(last_port());
  EXPECT_THAT(next.Read(), ::testing::AllOf(StartsWith("HTTP/1.1 429"), HasSubstr("max_bytes_per_session")));
  std::vector<Decision> d = sink_.WaitFor(2);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].reason, "max_bytes_per_session");
}

// Read by the relay after it started.
TEST_F(ProxyCapsTest, BytesDroppedAfterARequestsBodyAreChargedToTheQuota) {
  ExpectDroppedBytesToSpendTheQuota(10000, 12000);
}

// In the same read as the request's head (the head parser's buffer holds up to
// max_header_bytes), before the relay started. Head, body and echo are a few hundred bytes.
TEST_F(ProxyCapsTest, BytesDroppedWithARequestsHeadAreChargedToTheQuota) {
  ExpectDroppedBytesToSpendTheQuota(1000, 900);
}

// The destination's close ends a forwarded request's connection while the client keeps
// its own open (a keep-alive pool): the session's connection slot is free for the next
// one, and what the client sent past the body is reported as dropped.
TEST_F(ProxyCapsTest, TheDestinationsCloseEndsAForwardedRequestsConnection) {
  ProxyLimits limits;
  limits.max_connections = 1;
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits);
  Client client = Client::Tcp(last_port());
  ASSERT_TRUE(client.Send(absl::StrCat("POST http://", Origin(), "/a HTTP/1.1\r\nHost: ", Origin(),
                                       "\r\nContent-Length: 2\r\n\r\nhi", std::string(40, 'x'))));
  EXPECT_THAT(client.Read(), ::testing::EndsWith("hi"));  // the echo, then the destination's close
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u) << "the connection did not end with the destination's";
  EXPECT_EQ(d[0].reason, "closed");
  EXPECT_EQ(d[0].bytes_dropped, 40u);
  EXPECT_EQ(proxy->bytes_used(), d[0].bytes_up + d[0].bytes_down + 40);
  Client next = Client::Tcp(last_port());
  EXPECT_THAT(Connect(next, Origin()), StartsWith("HTTP/1.1 200"));
  EXPECT_TRUE(client.connected());
}

// After a restart the session's quota starts from its recorded count: what is left of it,
// not the whole quota, is what the session may still relay.
TEST_F(ProxyCapsTest, ARestoredCountLeavesOnlyTheRestOfTheQuota) {
  ProxyLimits limits;
  limits.max_bytes_per_session = 4000;
  bytes_used_ = 2000;
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits);
  EXPECT_EQ(proxy->bytes_used(), 2000u);
  Client client = OpenTunnel();  // its ClientHello, charged both ways, fits
  client.Send(std::string(2000, 'a'));  // its echo would not
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(3)));
  Client next = Client::Tcp(last_port());
  EXPECT_THAT(next.Read(), ::testing::AllOf(StartsWith("HTTP/1.1 429"), HasSubstr("max_bytes_per_session")));
  EXPECT_LE(proxy->bytes_used(), 4000u);
}

// A count past the limit (a damaged record's) is the limit: the quota is spent, and the
// first connection is refused before anything is relayed.
TEST_F(ProxyCapsTest, ARestoredCountPastTheLimitSpendsTheQuota) {
  ProxyLimits limits;
  limits.max_bytes_per_session = 4000;
  bytes_used_ = std::numeric_limits<uint64_t>::max();
  auto proxy = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits);
  EXPECT_EQ(proxy->bytes_used(), 4000u);
  Client client = Client::Tcp(last_port());
  EXPECT_THAT(client.Read(), ::testing::AllOf(StartsWith("HTTP/1.1 429"), HasSubstr("max_bytes_per_session")));
}

TEST(ByteQuotaTest, RestoreAddsUpToTheLimitAndSpendsItThere) {
  ByteQuota quota("q", 1000);
  quota.Restore(300);
  quota.Restore(200);
  EXPECT_EQ(quota.used(), 500u);
  EXPECT_FALSE(quota.spent());
  EXPECT_TRUE(quota.Charge(500));
  EXPECT_FALSE(quota.Charge(1));
  ByteQuota full("q", 1000);
  full.Restore(400);
  full.Restore(std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(full.used(), 1000u);
  EXPECT_TRUE(full.spent());
}

TEST_F(ProxyCapsTest, AnOwnersSessionsShareItsByteQuota) {
  owner_bytes_ = std::make_shared<ByteQuota>("max_egress_bytes_per_owner", 3000);
  auto a = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", {}, nullptr, "a");
  Client first = OpenTunnel();
  first.Send(std::string(3000, 'a'));
  EXPECT_TRUE(first.ClosedWithin(std::chrono::seconds(3)));
  auto b = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", {}, nullptr, "b");
  Client other = Client::Tcp(last_port());
  EXPECT_THAT(other.Read(), HasSubstr("max_egress_bytes_per_owner"));
}

TEST_F(ProxyCapsTest, OneSessionsFloodDoesNotStarveAnother) {
  ProxyLimits limits;
  limits.max_connections = 20;
  auto flooded = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits, nullptr, "flood");
  const uint16_t flooded_port = last_port();
  std::vector<Client> held;
  for (int i = 0; i < 20; ++i) held.push_back(Client::Tcp(flooded_port));
  int refused = 0;
  for (int i = 0; i < 200; ++i) {
    Client extra = Client::Tcp(flooded_port);
    refused += extra.Read("\r\n\r\n").rfind("HTTP/1.1 429", 0) == 0;
  }
  EXPECT_EQ(refused, 200);
  auto other = Make("origin.test:$PORT, 127.0.0.0/8:$PORT", limits, nullptr, "other");
  Client client = OpenTunnel();
  client.Send("still here");
  EXPECT_EQ(client.Read("still here"), "still here");
  EXPECT_EQ(flooded->open_connections(), 20u);
  held.clear();
  for (int i = 0; i < 100 && flooded->open_connections() > 0; ++i) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_EQ(flooded->open_connections(), 0u) << "closed connections give their slots back";
}

TEST_F(ProxyCapsTest, AnOwnersSessionsShareItsCap) {
  auto owner = std::make_shared<ConnectionSlots>("max_egress_connections_per_owner", 3);
  auto a = Make("origin.test:$PORT", {}, owner, "a");
  const uint16_t port_a = last_port();
  auto b = Make("origin.test:$PORT", {}, owner, "b");
  std::vector<Client> held;
  for (int i = 0; i < 2; ++i) held.push_back(Client::Tcp(port_a));
  held.push_back(Client::Tcp(last_port()));
  std::this_thread::sleep_for(milliseconds(100));
  Client extra = Client::Tcp(last_port());
  EXPECT_THAT(extra.Read(), ::testing::AllOf(StartsWith("HTTP/1.1 429"), HasSubstr("max_egress_connections_per_owner")));
}

TEST_F(ProxyCapsTest, NarrowingCutsWhatItNoLongerAllowsAndWideningIsRefused) {
  auto proxy = Make("origin.test:$PORT, *.example.com, 127.0.0.0/8:$PORT");
  Client client = OpenTunnel();
  absl::Status wider = proxy->Narrow(*Policy::Parse("origin.test:*"));
  EXPECT_EQ(wider.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(wider.message()), HasSubstr("(\"origin.test:*\") is wider than the session's policy"));
  client.Send("a");
  EXPECT_EQ(client.Read("a"), "a") << "a refused widening changes nothing";
  ASSERT_TRUE(proxy->Narrow(*Policy::Parse("*.example.com")).ok());
  EXPECT_EQ(proxy->policy().ToString(), "*.example.com");
  EXPECT_TRUE(client.ClosedWithin(std::chrono::seconds(2)));
  std::vector<Decision> d = sink_.WaitFor(1);
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].reason, "the session's egress policy no longer allows it");
  Client after = Client::Tcp(last_port());
  EXPECT_THAT(Connect(after, Origin()), StartsWith("HTTP/1.1 403"));
}

}  // namespace
}  // namespace egress_test
}  // namespace egress
}  // namespace sandboxd
