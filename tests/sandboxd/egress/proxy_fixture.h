// The egress proxy on loopback: a session's proxy over a fake resolver, in front of a local
// echo server that logs what reaches it (proxy_support.h).
#pragma once

#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "egress/session_proxy.h"
#include "proxy_support.h"

namespace sandboxd {
namespace egress {
namespace egress_test {

using ::testing::HasSubstr;
using ::testing::StartsWith;

class ProxyFixture : public ::testing::Test {
 protected:
  ProxyFixture() {
    resolver_.Set("origin.test", {{*IpAddress::Parse("127.0.0.1")}});
  }
  ~ProxyFixture() override { resolver_.JoinAnswers(); }  // while io_ runs

  // The proxy of session `session` with `policy` (a policy's text; "$PORT" is the origin's
  // port), listening on a loopback port (port_of).
  std::unique_ptr<SessionProxy> Make(std::string policy, ProxyLimits limits = {},
                                     std::shared_ptr<ConnectionSlots> owner = nullptr,
                                     const std::string& session = "s1") {
    for (size_t at; (at = policy.find("$PORT")) != std::string::npos;) {
      policy.replace(at, 5, std::to_string(origin_.port()));
    }
    absl::StatusOr<Policy> parsed = Policy::Parse(policy);
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    SessionProxy::Options options;
    options.session = session;
    options.owner = "alice";
    options.policy = parsed.ok() ? *parsed : Policy();
    options.limits = limits;
    options.owner_slots = std::move(owner);
    options.owner_bytes = owner_bytes_;
    options.bytes_used = bytes_used_;
    options.resolver = &resolver_;
    options.sink = &sink_;
    auto proxy = std::make_unique<SessionProxy>(io_.io(), std::move(options));
    absl::StatusOr<uint16_t> port = proxy->ListenLoopback();
    EXPECT_TRUE(port.ok()) << port.status();
    last_port_ = port.ok() ? *port : 0;
    return proxy;
  }

  uint16_t last_port() const { return last_port_; }
  std::string Origin() const { return absl::StrCat("origin.test:", origin_.port()); }

  // Sends CONNECT `authority` and returns the response head (or what came before a close).
  static std::string Connect(Client& client, const std::string& authority) {
    client.Send(absl::StrCat("CONNECT ", authority, " HTTP/1.1\r\nHost: ", authority, "\r\n\r\n"));
    return client.Read("\r\n\r\n");
  }

  FakeResolver resolver_;
  RecordingSink sink_;
  EchoServer origin_;
  IoThreads io_;  // last: stopped first, before what its handlers use
  uint16_t last_port_ = 0;
  std::shared_ptr<ByteQuota> owner_bytes_;  // given to every proxy Make makes
  uint64_t bytes_used_ = 0;                 // and this restored count
};

}  // namespace egress_test
}  // namespace egress
}  // namespace sandboxd
