// ConnectionAdmission: the pre-auth cap with eviction of the oldest, the per-credential cap,
// and the total.
#include "server/http_admission.h"

#include <gtest/gtest.h>

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
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(admission.Add(Conn(i)).admitted);
  auto a = admission.Add(Conn(3));
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.evict, Conn(0));
  EXPECT_EQ(admission.unauthenticated(), 3u);
  // Authenticated connections are never evicted; the oldest pre-auth one goes.
  EXPECT_TRUE(admission.Authenticate(Conn(1), "token 0"));
  EXPECT_EQ(admission.Add(Conn(4)).evict, nullptr);  // 3 pre-auth again: 2, 3, 4
  EXPECT_EQ(admission.Add(Conn(5)).evict, Conn(2));
  admission.Remove(Conn(0));  // an evicted one closing: ignored
  EXPECT_EQ(admission.size(), 4u);
}

TEST(ConnectionAdmissionTest, AtTheTotalOnlyPreAuthConnectionsMakeRoom) {
  ConnectionAdmission admission({3, 3, 3});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(admission.Add(Conn(i)).admitted);
  EXPECT_TRUE(admission.Authenticate(Conn(0), "token 0"));
  EXPECT_TRUE(admission.Authenticate(Conn(1), "token 1"));
  auto a = admission.Add(Conn(3));
  EXPECT_TRUE(a.admitted);
  EXPECT_EQ(a.evict, Conn(2));
  EXPECT_TRUE(admission.Authenticate(Conn(3), "token 1"));
  // All three belong to credentials: a fourth is refused and nothing is closed.
  auto refused = admission.Add(Conn(4));
  EXPECT_FALSE(refused.admitted);
  EXPECT_EQ(refused.evict, nullptr);
  admission.Remove(Conn(0));
  EXPECT_TRUE(admission.Add(Conn(4)).admitted);
}

TEST(ConnectionAdmissionTest, ACredentialHoldsAtMostItsCap) {
  ConnectionAdmission admission({10, 10, 2});
  for (int i = 0; i < 4; ++i) admission.Add(Conn(i));
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

}  // namespace
}  // namespace http
}  // namespace gateway
