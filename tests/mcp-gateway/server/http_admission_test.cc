// ConnectionAdmission: the pre-auth cap with eviction of the oldest, the per-credential cap,
// and the total.
#include "server/http_admission.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "server/http_peer.h"

namespace gateway {
namespace http {
namespace {

// Distinct addresses to stand for connections.
const void* Conn(int i) {
  static char slots[64];
  return &slots[i];
}

TEST(ConnectionAdmissionTest, ANewConnectionPastThePreAuthCapClosesTheOldestPreAuthOne) {
  ConnectionAdmission admission({10, 3, 10});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(admission.Add(Conn(i), "uid 1").admitted);
  auto a = admission.Add(Conn(3), "uid 1");
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.evict, Conn(0));
  EXPECT_EQ(admission.unauthenticated(), 3u);
  // Authenticated connections are never evicted; the oldest pre-auth one goes.
  EXPECT_TRUE(admission.Authenticate(Conn(1), "token 0"));
  EXPECT_EQ(admission.Add(Conn(4), "uid 1").evict, nullptr);  // 3 pre-auth again: 2, 3, 4
  EXPECT_EQ(admission.Add(Conn(5), "uid 1").evict, Conn(2));
  admission.Remove(Conn(0));  // an evicted one closing: ignored
  EXPECT_EQ(admission.size(), 4u);
}

// A connection whose request waits unread is about to be checked: one that waits on its
// client goes first.
TEST(ConnectionAdmissionTest, EvictionSparesConnectionsWithUnreadInput) {
  ConnectionAdmission admission({10, 3, 10});
  for (int i = 0; i < 3; ++i) admission.Add(Conn(i), "uid 1");
  auto busy = [](const void* conn) { return conn == Conn(0) || conn == Conn(1); };
  EXPECT_EQ(admission.Add(Conn(3), "uid 1", busy).evict, Conn(2));
  // All busy: the oldest goes.
  EXPECT_EQ(admission.Add(Conn(4), "uid 1", [](const void*) { return true; }).evict, Conn(0));
}

// A flood from one peer pushes out its own connections, never another peer's.
TEST(ConnectionAdmissionTest, EvictionTakesFromThePeerHoldingTheMost) {
  ConnectionAdmission admission({10, 4, 10});
  EXPECT_TRUE(admission.Add(Conn(0), "uid 1000").admitted);
  for (int i = 1; i < 4; ++i) admission.Add(Conn(i), "uid 65534");
  for (int i = 4; i < 40; ++i) {
    auto a = admission.Add(Conn(i), "uid 65534");
    EXPECT_TRUE(a.admitted);
    EXPECT_EQ(a.evict, Conn(i - 3)) << i;  // its own oldest
  }
  // The other user's new connection makes room from the flood, too.
  EXPECT_EQ(admission.Add(Conn(40), "uid 1000").evict, Conn(37));
  EXPECT_TRUE(admission.Authenticate(Conn(0), "token 0"));
  EXPECT_TRUE(admission.Authenticate(Conn(40), "token 0"));
}

// A loopback peer's user costs a sock_diag query: it is asked only when an eviction must
// choose, once per connection, and the choice is the one known peers would give.
TEST(ConnectionAdmissionTest, PeersAreResolvedOnlyWhenAnEvictionMustChoose) {
  ConnectionAdmission admission({10, 4, 10});
  std::map<const void*, int> asked;
  auto lazy = [&](int i, const std::string& peer) {
    return admission.AddUnresolved(Conn(i), [&asked, i, peer] {
      ++asked[Conn(i)];
      return peer;
    });
  };
  EXPECT_TRUE(lazy(0, "uid 1000").admitted);
  for (int i = 1; i < 3; ++i) EXPECT_TRUE(lazy(i, "uid 65534").admitted);
  EXPECT_TRUE(admission.Authenticate(Conn(2), "token 0"));  // never needs its peer now
  EXPECT_TRUE(lazy(3, "uid 65534").admitted);
  EXPECT_TRUE(admission.Add(Conn(4), "addr 10.0.0.1").admitted);  // 4 pre-auth: at the cap
  EXPECT_TRUE(asked.empty()) << "below the caps nobody is asked";
  // At the cap: every pre-auth peer is told, the new one's too; the flood loses its oldest.
  auto a = lazy(5, "uid 65534");
  EXPECT_EQ(a.evict, Conn(1));
  EXPECT_EQ(asked, (std::map<const void*, int>{{Conn(0), 1}, {Conn(1), 1}, {Conn(3), 1}, {Conn(5), 1}}));
  // The next eviction asks only the new connection.
  EXPECT_EQ(lazy(6, "uid 65534").evict, Conn(3));
  EXPECT_EQ(asked.size(), 5u);
  for (const auto& [conn, n] : asked) EXPECT_EQ(n, 1);
  EXPECT_EQ(lazy(7, "addr 10.0.0.1").evict, Conn(5)) << "the flood still holds the most";
  EXPECT_EQ(asked.size(), 6u);
  EXPECT_TRUE(admission.Authenticate(Conn(0), "token 1")) << "the other user's one survived";
}

TEST(ConnectionAdmissionTest, AtTheTotalOnlyPreAuthConnectionsMakeRoom) {
  ConnectionAdmission admission({3, 3, 3});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(admission.Add(Conn(i), "uid 1").admitted);
  EXPECT_TRUE(admission.Authenticate(Conn(0), "token 0"));
  EXPECT_TRUE(admission.Authenticate(Conn(1), "token 1"));
  auto a = admission.Add(Conn(3), "uid 1");
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.evict, Conn(2));
  EXPECT_TRUE(admission.Authenticate(Conn(3), "token 1"));
  // All three belong to credentials: a fourth is refused and nothing is closed.
  auto refused = admission.Add(Conn(4), "uid 1");
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.evict, nullptr);
  admission.Remove(Conn(0));
  EXPECT_TRUE(admission.Add(Conn(4), "uid 1").admitted);
}

TEST(ConnectionAdmissionTest, ACredentialHoldsAtMostItsCap) {
  ConnectionAdmission admission({10, 10, 2});
  for (int i = 0; i < 4; ++i) admission.Add(Conn(i), "uid 1");
  EXPECT_TRUE(admission.Authenticate(Conn(0), "a"));
  EXPECT_TRUE(admission.Authenticate(Conn(0), "a"));  // again: still one
  EXPECT_TRUE(admission.Authenticate(Conn(1), "a"));
  EXPECT_FALSE(admission.Authenticate(Conn(2), "a"));
  EXPECT_EQ(admission.held_by("a"), 2u);
  EXPECT_EQ(admission.unauthenticated(), 2u);  // the refused one stays pre-auth
  EXPECT_TRUE(admission.Authenticate(Conn(2), "b"));
  // A kept-alive connection that switches credentials moves.
  EXPECT_TRUE(admission.Authenticate(Conn(1), "b"));
  EXPECT_EQ(admission.held_by("a"), 1u);
  EXPECT_EQ(admission.held_by("b"), 2u);
  admission.Remove(Conn(1));
  admission.Remove(Conn(2));
  EXPECT_EQ(admission.held_by("b"), 0u);
  EXPECT_TRUE(admission.Authenticate(Conn(3), "a"));
  EXPECT_FALSE(admission.Authenticate(Conn(9), "a"));  // unknown (evicted): refused
}

// On loopback the peer is the user owning the client's socket (here: ourselves).
TEST(PeerOfTest, ALoopbackClientIsItsUser) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const int accepted = accept(listener, nullptr, nullptr);
  ASSERT_GE(accepted, 0);
  EXPECT_EQ(PeerOf(accepted), absl::StrCat("uid ", getuid()));
  EXPECT_EQ(PeerOf(listener), "unknown");  // no peer
  close(accepted);
  close(client);
  close(listener);
}

}  // namespace
}  // namespace http
}  // namespace gateway
