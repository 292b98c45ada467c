#include "egress/request_head.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sandboxd {
namespace egress {
namespace {

using ::testing::HasSubstr;

RequestHead Head(std::string method, std::string target,
                 std::vector<std::pair<std::string, std::string>> headers = {}) {
  RequestHead h;
  h.method = std::move(method);
  h.target = std::move(target);
  h.headers = std::move(headers);
  return h;
}

TEST(RequestHeadTest, ConnectNamesAHostAndAPort) {
  absl::StatusOr<ProxyRequest> r = ParseProxyRequest(Head("CONNECT", "PyPI.org.:443"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->tunnel);
  EXPECT_EQ(r->host, "pypi.org");
  EXPECT_EQ(r->port, 443);
  EXPECT_FALSE(r->literal);
  r = ParseProxyRequest(Head("CONNECT", "[::ffff:127.0.0.1]:8443"));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->literal);
  EXPECT_EQ(r->host, "::ffff:127.0.0.1");
  for (const char* bad : {"pypi.org", "pypi.org:0", "pypi.org:65536", "pypi.org:", ":443",
                          "user@pypi.org:443", "[pypi.org]:443", "127.1:443", "a..b:443"}) {
    EXPECT_EQ(ParseProxyRequest(Head("CONNECT", bad)).status().code(),
              absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(RequestHeadTest, AnAbsoluteUriIsForwardedInOriginFormWithoutProxyHeaders) {
  absl::StatusOr<ProxyRequest> r = ParseProxyRequest(
      Head("POST", "http://Index.test:8080/simple?a=1#x",
           {{"Host", "index.test:8080"}, {"Proxy-Authorization", "Basic c2VjcmV0"},
            {"Connection", "keep-alive"}, {"Content-Length", "3"}}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->tunnel);
  EXPECT_EQ(r->host, "index.test");
  EXPECT_EQ(r->port, 8080);
  EXPECT_EQ(r->forward_head,
            "POST /simple?a=1 HTTP/1.1\r\nHost: index.test:8080\r\nContent-Length: 3\r\n"
            "Connection: close\r\n\r\n");
  r = ParseProxyRequest(Head("GET", "http://index.test"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->port, 80);
  EXPECT_EQ(r->forward_head, "GET / HTTP/1.1\r\nHost: index.test\r\nConnection: close\r\n\r\n");
}

TEST(RequestHeadTest, WhatIsNotAProxyRequestIsRefusedWithTheReason) {
  EXPECT_THAT(std::string(ParseProxyRequest(Head("GET", "/")).status().message()),
              HasSubstr("CONNECT host:port or an absolute http:// URI"));
  EXPECT_THAT(std::string(ParseProxyRequest(Head("GET", "https://a.test/")).status().message()),
              HasSubstr("through CONNECT"));
  EXPECT_FALSE(ParseProxyRequest(Head("GET", "http://user:pw@a.test/")).ok());
  absl::Status lying = ParseProxyRequest(Head("GET", "http://a.test/", {{"Host", "b.test"}})).status();
  EXPECT_EQ(lying.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(ParseProxyRequest(Head("GET", "http://a.test/", {{"Host", "a.test:81"}})).ok());
  EXPECT_TRUE(ParseProxyRequest(Head("GET", "http://a.test/", {{"host", "A.test"}})).ok());
}

}  // namespace
}  // namespace egress
}  // namespace sandboxd
