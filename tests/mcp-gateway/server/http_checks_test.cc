// The Streamable HTTP header checks: Origin, Host, bearer, Accept; session ids.
#include "server/http_checks.h"

#include <gtest/gtest.h>

#include <set>

namespace gateway {
namespace http {
namespace {

TEST(OriginAllowedTest, LoopbackByDefault) {
  for (const char* ok : {"http://localhost", "http://localhost:3000", "https://127.0.0.1:8931",
                         "http://[::1]:80", "HTTP://LOCALHOST"}) {
    EXPECT_TRUE(OriginAllowed(ok, {})) << ok;
  }
  for (const char* bad : {"http://evil.example", "http://localhost.evil.example", "null", "file://",
                          "http://127.0.0.1:abc", "ftp://localhost", "http://localhost/path",
                          "http://user@localhost", ""}) {
    EXPECT_FALSE(OriginAllowed(bad, {})) << bad;
  }
}

TEST(OriginAllowedTest, ExplicitList) {
  std::vector<std::string> allowed = {"https://app.example.com"};
  EXPECT_TRUE(OriginAllowed("https://app.example.com", allowed));
  EXPECT_TRUE(OriginAllowed("HTTPS://APP.EXAMPLE.COM", allowed));
  EXPECT_FALSE(OriginAllowed("http://localhost", allowed));
}

TEST(HostAllowedTest, LoopbackAndBindHostByDefault) {
  EXPECT_TRUE(HostAllowed("127.0.0.1:8931", {}, "127.0.0.1"));
  EXPECT_TRUE(HostAllowed("localhost", {}, "127.0.0.1"));
  EXPECT_TRUE(HostAllowed("[::1]:9", {}, "127.0.0.1"));
  EXPECT_TRUE(HostAllowed("10.0.0.5:8931", {}, "10.0.0.5"));
  EXPECT_TRUE(HostAllowed("[fe80::1]:8931", {}, "fe80::1"));
  EXPECT_FALSE(HostAllowed("evil.example", {}, "127.0.0.1"));
  EXPECT_FALSE(HostAllowed("evil.example:8931", {}, "0.0.0.0"));
  EXPECT_FALSE(HostAllowed("", {}, "127.0.0.1"));
  EXPECT_FALSE(HostAllowed("localhost:x", {}, "127.0.0.1"));
}

TEST(HostAllowedTest, ExplicitList) {
  std::vector<std::string> allowed = {"gw.example.com", "other:8080"};
  EXPECT_TRUE(HostAllowed("gw.example.com:443", allowed, "0.0.0.0"));
  EXPECT_TRUE(HostAllowed("other:8080", allowed, "0.0.0.0"));
  EXPECT_FALSE(HostAllowed("other:9090", allowed, "0.0.0.0"));
  EXPECT_FALSE(HostAllowed("localhost", allowed, "127.0.0.1"));
}

TEST(BearerMatchesTest, ComparesTokens) {
  EXPECT_TRUE(BearerMatches("Bearer s3cret", "s3cret"));
  EXPECT_TRUE(BearerMatches("bearer s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cre", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer s3cret2", "s3cret"));
  EXPECT_FALSE(BearerMatches("Basic s3cret", "s3cret"));
  EXPECT_FALSE(BearerMatches("", "s3cret"));
  EXPECT_FALSE(BearerMatches("Bearer ", ""));
}

TEST(ParseAcceptTest, Types) {
  auto both = ParseAccept("application/json, text/event-stream");
  EXPECT_TRUE(both.json && both.sse && both.sse_explicit);
  auto json_only = ParseAccept("application/json;q=0.9");
  EXPECT_TRUE(json_only.json);
  EXPECT_FALSE(json_only.sse);
  auto any = ParseAccept("*/*");
  EXPECT_TRUE(any.json && any.sse);
  EXPECT_FALSE(any.sse_explicit);
  auto missing = ParseAccept("");
  EXPECT_TRUE(missing.json && missing.sse);
  auto html = ParseAccept("text/html");
  EXPECT_FALSE(html.json || html.sse);
  EXPECT_TRUE(ParseAccept("TEXT/EVENT-STREAM").sse_explicit);
}

TEST(NewSessionIdTest, RandomHex) {
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    std::string id = NewSessionId();
    EXPECT_EQ(id.size(), 32u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos);
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 100u);
}

}  // namespace
}  // namespace http
}  // namespace gateway
