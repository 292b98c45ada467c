// ParseHttpResponse: how PodmanApi reads the answers of podman's API service (HTTP/1.1
// framing, chunked bodies, the limits), without a service.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "sandboxd/podman_api.h"

namespace sandboxd {
namespace {

using ::testing::HasSubstr;

TEST(ParseHttpResponseTest, ABodyByContentLength) {
  absl::StatusOr<PodmanApi::Response> r = ParseHttpResponse(
      "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n"
      "{\"Id\":\"ab\"}extra");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 201);
  EXPECT_EQ(r->body, "{\"Id\":\"ab\"}");
}

TEST(ParseHttpResponseTest, AChunkedBody) {
  absl::StatusOr<PodmanApi::Response> r = ParseHttpResponse(
      "HTTP/1.1 500 Internal Server Error\r\ntransfer-encoding: Chunked\r\n\r\n"
      "4\r\n{\"a\"\r\nA;ext=1\r\n:\"bcdefgh\"\r\n1\r\n}\r\n0\r\n\r\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 500);
  EXPECT_EQ(r->body, "{\"a\":\"bcdefgh\"}");
}

TEST(ParseHttpResponseTest, NoLengthReadsToTheEndAndNoBodyIsEmpty) {
  EXPECT_EQ(ParseHttpResponse("HTTP/1.0 200 OK\r\n\r\nall of it")->body, "all of it");
  absl::StatusOr<PodmanApi::Response> r = ParseHttpResponse("HTTP/1.1 204 No Content\r\n\r\n");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->body, "");
}

TEST(ParseHttpResponseTest, BeforeTheEndOnlyFramingMakesAResponseWhole) {
  EXPECT_TRUE(ParseHttpResponse("HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}", false).ok());
  EXPECT_TRUE(ParseHttpResponse("HTTP/1.1 204 No Content\r\n\r\n", false).ok());
  EXPECT_TRUE(ParseHttpResponse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false).ok());
  EXPECT_FALSE(ParseHttpResponse("HTTP/1.1 200 OK\r\n\r\nmore may come", false).ok());
  EXPECT_FALSE(ParseHttpResponse("HTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\n{}", false).ok());
}

TEST(ParseHttpResponseTest, WhatIsNoResponseIsAnError) {
  for (const char* raw : {
           "",                                                     // nothing
           "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n",             // headers never end
           "SSH-2.0-OpenSSH\r\n\r\n",                              // another protocol
           "HTTP/1.1 2000 OK\r\n\r\n",                             // no three-digit status
           "HTTP/1.1 -01 OK\r\n\r\n",
           "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nshort",    // body cut short
           "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",        // no number
           "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",             // no header
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",           // cut short
           "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffff\r\nab",  // too large
           "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc",  // which?
           "HTTP/1.1 200 OK\r\nContent-Length: 4194305\r\n\r\n",  // over 4 MiB
       }) {
    EXPECT_FALSE(ParseHttpResponse(raw).ok()) << raw;
  }
}

TEST(ParseHttpResponseTest, ABodyOfFourMebibytesIsTheMost) {
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string chunk = "100000\r\n" + std::string(1 << 20, 'x') + "\r\n";  // 1 MiB
  absl::StatusOr<PodmanApi::Response> four = ParseHttpResponse(head + chunk + chunk + chunk + chunk + "0\r\n\r\n");
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->body.size(), size_t{4} << 20);
  absl::StatusOr<PodmanApi::Response> more = ParseHttpResponse(head + chunk + chunk + chunk + chunk + "1\r\nx\r\n0\r\n\r\n");
  ASSERT_FALSE(more.ok());
  EXPECT_THAT(more.status().message(), HasSubstr("body limit"));
}

}  // namespace
}  // namespace sandboxd
