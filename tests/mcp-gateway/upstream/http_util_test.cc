// SseParser, URL parsing/resolution and connection-error descriptions.
#include "upstream/http_util.h"

#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "upstream_test_support.h"

namespace gateway {
namespace {

std::vector<SseParser::Event> ParseAll(const std::vector<std::string>& chunks) {
  SseParser parser;
  std::vector<SseParser::Event> events;
  for (const auto& chunk : chunks) {
    EXPECT_TRUE(parser.Feed(chunk.data(), chunk.size(),
                            [&](const SseParser::Event& e) { events.push_back(e); }));
  }
  return events;
}

TEST(SseParserTest, ParsesEventsDataAndIds) {
  auto events = ParseAll({"event: endpoint\ndata: /messages?id=1\n\n"
                          "id: 7\ndata: {\"a\":1}\n\n"});
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].event, "endpoint");
  EXPECT_EQ(events[0].data, "/messages?id=1");
  EXPECT_EQ(events[1].event, "message");  // the default type
  EXPECT_EQ(events[1].data, "{\"a\":1}");
  EXPECT_EQ(events[1].id, "7");
}

TEST(SseParserTest, ManySmallDataLinesCannotMakeAnUnboundedEvent) {
  SseParser parser(1024);
  std::string line = "data: " + std::string(100, 'x') + "\n";
  int events = 0;
  bool ok = true;
  for (int i = 0; i < 20 && ok; ++i) {  // 2 KiB of data in one event, no line over 1 KiB
    ok = parser.Feed(line.data(), line.size(), [&](const SseParser::Event&) { ++events; });
  }
  EXPECT_FALSE(ok);
  EXPECT_EQ(events, 0);
  std::string end = "\n";
  parser.Feed(end.data(), end.size(), [&](const SseParser::Event&) { ++events; });
  EXPECT_EQ(events, 0);  // the truncated event is never delivered
}

TEST(SseParserTest, JoinsMultiLineDataWithNewlines) {
  auto events = ParseAll({"data: {\n", "data:  \"a\": 1\n", "data: }\n\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "{\n \"a\": 1\n}");
}

TEST(SseParserTest, SkipsPrimingEventsAndComments) {
  auto events = ParseAll({"id: prime\ndata:\n\n", ": keep-alive\n\n", "retry: 100\n\n",
                          "data: x\n\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "x");
  EXPECT_EQ(events[0].id, "prime");  // the last id persists
}

TEST(SseParserTest, HandlesCrLfSplitAcrossChunksAndByteByByteInput) {
  std::string stream = "event: message\r\ndata: one\r\n\r\ndata: two\r\rdata: three\n\n";
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  for (const auto& chunks : {std::vector<std::string>{stream}, bytes}) {
    auto events = ParseAll(chunks);
    ASSERT_EQ(events.size(), 3u);
    EXPECT_EQ(events[0].data, "one");
    EXPECT_EQ(events[1].data, "two");
    EXPECT_EQ(events[2].data, "three");
  }
}

TEST(SseParserTest, FieldWithoutColonAndValueWithoutSpace) {
  auto events = ParseAll({"data:no-space\ndata\n\n"});
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].data, "no-space\n");
}

TEST(SseParserTest, TracksTheLastEventIdAndTheRetryDelay) {
  SseParser parser;
  int events = 0;
  auto count = [&](const SseParser::Event&) { ++events; };
  std::string stream = "id: a\nretry: 250\ndata:\n\nid: b\ndata: x\n\n";
  ASSERT_TRUE(parser.Feed(stream.data(), stream.size(), count));
  EXPECT_EQ(events, 1);  // the priming event is skipped, its id is not
  EXPECT_EQ(parser.last_event_id(), "b");
  EXPECT_EQ(parser.retry_ms(), std::optional<int64_t>(250));
  // Only digits set the delay; an id with NUL is ignored; an empty id resets it.
  static const char kMore[] = "retry: 1e3\nretry: -5\nid: c\0d\ndata: y\n\n";
  std::string more(kMore, sizeof kMore - 1);
  ASSERT_TRUE(parser.Feed(more.data(), more.size(), count));
  EXPECT_EQ(parser.retry_ms(), std::optional<int64_t>(250));
  EXPECT_EQ(parser.last_event_id(), "b");
  std::string reset = "id\ndata: z\n\n";
  ASSERT_TRUE(parser.Feed(reset.data(), reset.size(), count));
  EXPECT_EQ(parser.last_event_id(), "");
}

// A partial event can sit in its `event:` field as well as in its data. A stream that holds
// `event: <2 MiB>` and then ends (or waits) has buffered() == 0, so unless the field counts
// it is neither "in the middle of an event" nor stalled, and its bytes are charged to
// nothing. An event is open from its first field line to its blank line, and a name longer
// than any MCP uses drops the event without being kept.
TEST(SseParserTest, AnEventIsOpenFromItsFirstFieldAndLongNamesAreNotKept) {
  SseParser parser;
  std::vector<SseParser::Event> events;
  auto feed = [&](const std::string& s) {
    return parser.Feed(s.data(), s.size(), [&](const SseParser::Event& e) { events.push_back(e); });
  };
  EXPECT_FALSE(parser.mid_event());
  ASSERT_TRUE(feed(": keep-alive\n\n"));
  EXPECT_FALSE(parser.mid_event()) << "a comment opens no event";
  ASSERT_TRUE(feed("event: message\n"));
  EXPECT_TRUE(parser.mid_event()) << "an event: line opens the event";
  ASSERT_TRUE(feed("data: {}\n\n"));
  EXPECT_FALSE(parser.mid_event());
  ASSERT_TRUE(feed("event: " + std::string(2 << 20, 'e') + "\n"));
  EXPECT_TRUE(parser.mid_event());
  EXPECT_LE(parser.buffered(), 1024u) << "the long event name was kept";
  ASSERT_TRUE(feed("data: {\"jsonrpc\": \"2.0\"}\n\n"));
  ASSERT_EQ(events.size(), 1u) << "an event with a name over the limit is dropped";
  EXPECT_EQ(events[0].data, "{}");
  ASSERT_TRUE(feed("id: 1\n"));
  EXPECT_TRUE(parser.mid_event()) << "an id: line opens the event";
}

// An `id:` is copied into every event after it and sent back as Last-Event-ID, so a 7 MB
// one would cost a core per hostile stream. An id over 1 KiB is ignored, as one with NUL
// is: the last id stays.
TEST(SseParserTest, AnIdOverOneKibIsIgnored) {
  SseParser parser;
  std::vector<SseParser::Event> events;
  std::string in = "id: 7\ndata: a\n\nid: " + std::string(1025, 'i') + "\ndata: b\n\n";
  ASSERT_TRUE(parser.Feed(in.data(), in.size(),
                          [&](const SseParser::Event& e) { events.push_back(e); }));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].id, "7");
  EXPECT_EQ(parser.last_event_id(), "7");
  in = "id: " + std::string(1024, 'k') + "\ndata: c\n\n";  // at the limit: taken
  ASSERT_TRUE(parser.Feed(in.data(), in.size(), [](const SseParser::Event&) {}));
  EXPECT_EQ(parser.last_event_id(), std::string(1024, 'k'));
}

TEST(HttpUrlTest, SplitsOriginAndTarget) {
  auto u = ParseHttpUrl("https://Example.com:8443/mcp/v1?x=1#frag");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->origin, "https://Example.com:8443");
  EXPECT_EQ(u->target, "/mcp/v1?x=1");
  EXPECT_EQ(u->host, "Example.com");
  EXPECT_EQ(u->port, 8443);

  u = ParseHttpUrl("http://127.0.0.1");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->target, "/");
  EXPECT_EQ(u->port, 80);

  u = ParseHttpUrl("HTTP://[::1]:9000?q");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->origin, "http://[::1]:9000");
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->target, "/?q");

  EXPECT_FALSE(ParseHttpUrl("ftp://x/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://:80/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://x:99999/").ok());
  EXPECT_FALSE(ParseHttpUrl("http://user:pw@x/").ok());
}

TEST(HttpUrlTest, ResolvesEndpointReferences) {
  const std::string base = "http://127.0.0.1:8080/mcp/sse?a=1";
  EXPECT_EQ(ResolveUrl(base, "/messages?sessionId=1"),
            "http://127.0.0.1:8080/messages?sessionId=1");
  EXPECT_EQ(ResolveUrl(base, "messages?s=1"), "http://127.0.0.1:8080/mcp/messages?s=1");
  EXPECT_EQ(ResolveUrl(base, "?s=2"), "http://127.0.0.1:8080/mcp/sse?s=2");
  EXPECT_EQ(ResolveUrl(base, "https://other:1/x"), "https://other:1/x");
  EXPECT_EQ(ResolveUrl(base, "//host:2/y"), "http://host:2/y");
}

TEST(HttpUrlTest, DescribesRefusedConnections) {
  HttpUrl url;
  url.host = "127.0.0.1";
  url.port = testing::UnusedPort();
  EXPECT_EQ(DescribeConnectFailure(url, absl::Seconds(2)), "connect: Connection refused");
}

// A stateless request (2026-07-28) repeats its version, method and name in headers; a value
// that is not plain ASCII goes as base64.
TEST(StandardHeadersTest, DerivedFromTheEnvelopeOnly) {
  nlohmann::json call = {{"jsonrpc", "2.0"}, {"id", 1}, {"method", "tools/call"},
                         {"params", {{"name", "echo"}, {"_meta", {{kMetaProtocolVersion, kStatelessVersion}}}}}};
  using Headers = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(StandardHeadersOf(call), (Headers{{"MCP-Protocol-Version", "2026-07-28"},
                                              {"Mcp-Method", "tools/call"},
                                              {"Mcp-Name", "echo"}}));
  nlohmann::json read = {{"jsonrpc", "2.0"}, {"id", 2}, {"method", "resources/read"},
                         {"params", {{"uri", "file:///caf\u00e9"}, {"_meta", {{kMetaProtocolVersion, kStatelessVersion}}}}}};
  EXPECT_EQ(StandardHeadersOf(read).back(),
            (std::pair<std::string, std::string>{"Mcp-Name", "=?base64?ZmlsZTovLy9jYWbDqQ==?="}));
  nlohmann::json legacy = {{"jsonrpc", "2.0"}, {"id", 3}, {"method", "tools/list"}, {"params", nlohmann::json::object()}};
  EXPECT_TRUE(StandardHeadersOf(legacy).empty());
}

}  // namespace
}  // namespace gateway
