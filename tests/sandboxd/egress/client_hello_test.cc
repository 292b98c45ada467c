#include "egress/client_hello.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy_support.h"

namespace sandboxd {
namespace egress {
namespace {

using egress_test::ClientHelloFor;

TEST(ClientHelloTest, ReadsTheServerNameOfARealClientHello) {
  const std::string hello = ClientHelloFor("files.pythonhosted.org");
  const ClientHello parsed = ParseClientHello(hello);
  ASSERT_EQ(parsed.state, ClientHello::kDone) << parsed.error;
  EXPECT_EQ(parsed.server_name, "files.pythonhosted.org");
  EXPECT_FALSE(parsed.encrypted_client_hello);
  EXPECT_EQ(ParseClientHello(ClientHelloFor("")).server_name, std::nullopt);
}

TEST(ClientHelloTest, APartialHelloNeedsMoreAtEveryLength) {
  const std::string hello = ClientHelloFor("a.test");
  for (size_t n = 0; n < hello.size(); ++n) {
    EXPECT_EQ(ParseClientHello(hello.substr(0, n)).state, ClientHello::kNeedMore) << n;
  }
}

TEST(ClientHelloTest, AHelloSplitAcrossRecordsIsReassembled) {
  const std::string hello = ClientHelloFor("split.test");
  const std::string body = hello.substr(5);
  const size_t half = body.size() / 2;
  auto record = [&](const std::string& payload) {
    std::string r = hello.substr(0, 3);
    r += static_cast<char>(payload.size() >> 8);
    r += static_cast<char>(payload.size() & 0xff);
    return r + payload;
  };
  const ClientHello parsed = ParseClientHello(record(body.substr(0, half)) + record(body.substr(half)));
  ASSERT_EQ(parsed.state, ClientHello::kDone) << parsed.error;
  EXPECT_EQ(parsed.server_name, "split.test");
}

TEST(ClientHelloTest, AHelloInTinyRecordsIsRefused) {
  const std::string hello = ClientHelloFor("tiny.test");
  std::string records;
  for (char c : hello.substr(5)) records += hello.substr(0, 3) + std::string("\x00\x01", 2) + c;
  EXPECT_EQ(ParseClientHello(records).state, ClientHello::kMalformed);
}

TEST(ClientHelloTest, WhatIsNotAHelloIsSaidSo) {
  EXPECT_EQ(ParseClientHello("GET / HTTP/1.1\r\n").state, ClientHello::kNotTls);
  EXPECT_EQ(ParseClientHello(std::string("\x16\x03\x01\x00\x00", 5)).state, ClientHello::kMalformed);
  // A handshake that declares more than the proxy reads.
  EXPECT_EQ(ParseClientHello(std::string("\x16\x03\x01\x00\x04\x01\x7f\xff\xff", 9)).state,
            ClientHello::kMalformed);
  // A ServerHello (type 2) where a ClientHello belongs.
  EXPECT_EQ(ParseClientHello(std::string("\x16\x03\x01\x00\x04\x02\x00\x00\x00", 9)).state,
            ClientHello::kNotTls);
  // A whole message whose insides lie about their lengths.
  std::string hello = ClientHelloFor("a.test");
  hello[5 + 4 + 34] = static_cast<char>(0xff);  // the session id's length
  EXPECT_EQ(ParseClientHello(hello).state, ClientHello::kMalformed);
}

// A minimal ClientHello record: version, random, empty session id, one suite, null
// compression, and `extensions` (each type, length, data), then `tail` inside the message.
std::string HelloWith(const std::string& extensions, const std::string& tail = "") {
  std::string body = std::string("\x03\x03", 2) + std::string(32, 'r') + std::string("\x00", 1) +
                     std::string("\x00\x02\x13\x01\x01\x00", 6);
  body += static_cast<char>(extensions.size() >> 8);
  body += static_cast<char>(extensions.size() & 0xff);
  body += extensions + tail;
  std::string message = std::string("\x01\x00", 2);
  message += static_cast<char>(body.size() >> 8);
  message += static_cast<char>(body.size() & 0xff);
  message += body;
  std::string record("\x16\x03\x01", 3);
  record += static_cast<char>(message.size() >> 8);
  record += static_cast<char>(message.size() & 0xff);
  return record + message;
}

// A server_name extension whose list holds `names` as host_name entries (short names).
std::string ServerNameExtension(const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& n : names) {
    list += std::string("\x00\x00", 2) + static_cast<char>(n.size()) + n;
  }
  std::string ext = std::string("\x00", 1) + static_cast<char>(list.size()) + list;
  return std::string("\x00\x00\x00", 3) + static_cast<char>(ext.size()) + ext;
}

TEST(ClientHelloTest, AnEchExtensionIsReported) {
  const ClientHello parsed =
      ParseClientHello(HelloWith(ServerNameExtension({"a.test"}) + std::string("\xfe\x0d\x00\x00", 4)));
  ASSERT_EQ(parsed.state, ClientHello::kDone) << parsed.error;
  EXPECT_EQ(parsed.server_name, "a.test");
  EXPECT_TRUE(parsed.encrypted_client_hello);
}

TEST(ClientHelloTest, ARepeatedServerNameIsMalformed) {
  const ClientHello one = ParseClientHello(HelloWith(ServerNameExtension({"a.test"})));
  ASSERT_EQ(one.state, ClientHello::kDone) << one.error;
  EXPECT_EQ(one.server_name, "a.test");
  const ClientHello two = ParseClientHello(
      HelloWith(ServerNameExtension({"evil.test"}) + ServerNameExtension({"a.test"})));
  EXPECT_EQ(two.state, ClientHello::kMalformed) << "server name " << two.server_name.value_or("");
  EXPECT_EQ(two.error, "a ClientHello repeats an extension");
}

// What the check did not read is what a server could: bytes after the extensions, or a
// second handshake message in the ClientHello's record, make it malformed.
TEST(ClientHelloTest, BytesAfterItsExtensionsOrASecondMessageAreMalformed) {
  const ClientHello tail = ParseClientHello(HelloWith(ServerNameExtension({"a.test"}), "junk"));
  EXPECT_EQ(tail.state, ClientHello::kMalformed);
  EXPECT_EQ(tail.error, "bytes after a ClientHello's extensions");
  std::string two = HelloWith(ServerNameExtension({"a.test"}));
  const std::string second = std::string("\x01\x00\x00\x00", 4);
  const size_t length = ((static_cast<uint8_t>(two[3]) << 8) | static_cast<uint8_t>(two[4])) + second.size();
  two[3] = static_cast<char>(length >> 8);
  two[4] = static_cast<char>(length & 0xff);
  const ClientHello parsed = ParseClientHello(two + second);
  EXPECT_EQ(parsed.state, ClientHello::kMalformed);
  EXPECT_EQ(parsed.error, "another handshake message in the ClientHello's records");
}

TEST(ClientHelloTest, AServerNameListOfTwoIsMalformed) {
  const ClientHello parsed = ParseClientHello(HelloWith(ServerNameExtension({"a.test", "evil.test"})));
  EXPECT_EQ(parsed.state, ClientHello::kMalformed) << "server name " << parsed.server_name.value_or("");
  EXPECT_EQ(parsed.error, "a malformed server_name extension");
}

}  // namespace
}  // namespace egress
}  // namespace sandboxd
