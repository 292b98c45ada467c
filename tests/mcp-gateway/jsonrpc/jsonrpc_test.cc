// The JSON-RPC vocabulary (services/mcp-gateway/jsonrpc): message shapes, parsing of
// hostile input, the error-code mapping both ways, version negotiation and line framing.
#include "jsonrpc/jsonrpc.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseMessageTest, ParsesObjectsAndRejectsTheRest) {
  json error;
  auto ok = ParseMessage(R"({"jsonrpc":"2.0","id":1,"method":"ping"})", &error);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)["method"], "ping");

  EXPECT_FALSE(ParseMessage("{not json", &error).ok());
  EXPECT_EQ(error["error"]["code"], kParseError);
  EXPECT_TRUE(error["id"].is_null());

  EXPECT_FALSE(ParseMessage(R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", &error).ok());
  EXPECT_EQ(error["error"]["code"], kInvalidRequest);
  EXPECT_FALSE(ParseMessage("42", &error).ok());
  EXPECT_EQ(error["error"]["code"], kInvalidRequest);
  EXPECT_FALSE(ParseMessage("", &error).ok());
  EXPECT_EQ(error["error"]["code"], kParseError);
  EXPECT_FALSE(ParseMessage("\"\xff\xfe\"", &error).ok());  // invalid UTF-8
  EXPECT_EQ(error["error"]["code"], kParseError);
  EXPECT_FALSE(ParseMessage("[]", nullptr).ok());  // a null out-param is allowed
}

TEST(MakeMessageTest, BuildsJsonRpcShapes) {
  EXPECT_EQ(MakeError(1, -1, "m"),
            json({{"jsonrpc", "2.0"}, {"id", 1}, {"error", {{"code", -1}, {"message", "m"}}}}));
  EXPECT_EQ(MakeError(nullptr, -2, "m", {{"k", 1}})["error"]["data"], json({{"k", 1}}));
  EXPECT_EQ(MakeResult("x", {{"a", 1}}),
            json({{"jsonrpc", "2.0"}, {"id", "x"}, {"result", {{"a", 1}}}}));
  EXPECT_EQ(MakeNotification("n", json::object()),
            json({{"jsonrpc", "2.0"}, {"method", "n"}, {"params", json::object()}}));
  // MCP allows params to be absent, never null.
  EXPECT_EQ(MakeNotification("n", nullptr), json({{"jsonrpc", "2.0"}, {"method", "n"}}));
}

TEST(ErrorToStatusTest, MapsTheCodesThatSaySomething) {
  auto status = [](int code) {
    return ErrorToStatus({{"code", code}, {"message", "m"}}).code();
  };
  EXPECT_EQ(status(kInvalidParams), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status(kMethodNotFound), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(status(kResourceNotFound), absl::StatusCode::kNotFound);
  EXPECT_EQ(status(kInternalError), absl::StatusCode::kInternal);
  EXPECT_EQ(status(kParseError), absl::StatusCode::kInternal);
  EXPECT_EQ(status(kInvalidRequest), absl::StatusCode::kInternal);
  EXPECT_EQ(status(-32000), absl::StatusCode::kUnknown);
  EXPECT_EQ(status(7), absl::StatusCode::kUnknown);

  absl::Status st = ErrorToStatus({{"code", kInvalidParams}, {"message", "bad"}, {"data", {{"k", 1}}}});
  EXPECT_EQ(st.message(), "bad (code -32602): {\"k\":1}");
}

// An upstream decides what its error looks like: no shape may throw or pass as success.
TEST(ErrorToStatusTest, AnyShapeIsStillAnError) {
  for (const json& error : std::vector<json>{
           nullptr, 42, "text", json::array(), json::object(),
           {{"code", "-32602"}, {"message", 5}},
           {{"code", 1e300}, {"message", "huge"}},
           {{"code", int64_t{1} << 40}, {"message", "wide"}},
           {{"message", std::string("\xff\xfe bad utf-8")}, {"data", std::string("\xff")}}}) {
    absl::Status st = ErrorToStatus(error);
    EXPECT_FALSE(st.ok()) << error.dump(-1, ' ', false, json::error_handler_t::replace);
    EXPECT_THAT(std::string(st.message()), HasSubstr("(code "));
  }
  EXPECT_EQ(ErrorToStatus({{"code", int64_t{1} << 40}}).code(), absl::StatusCode::kUnknown);
}

TEST(StatusToErrorCodeTest, AnswersWithTheMatchingCode) {
  EXPECT_EQ(StatusToErrorCode(absl::InvalidArgumentError("x")), kInvalidParams);
  EXPECT_EQ(StatusToErrorCode(absl::NotFoundError("x")), kInvalidParams);
  EXPECT_EQ(StatusToErrorCode(absl::UnimplementedError("x")), kMethodNotFound);
  EXPECT_EQ(StatusToErrorCode(absl::UnavailableError("x")), kInternalError);
  // Both ways: what we answer maps back to the status we started from.
  EXPECT_EQ(ErrorToStatus(MakeError(1, StatusToErrorCode(absl::InvalidArgumentError("x")), "x")["error"]).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(VersionTest, NegotiatesAndKnowsBothSides) {
  EXPECT_EQ(NegotiateVersion("2025-06-18"), "2025-06-18");
  EXPECT_EQ(NegotiateVersion("1999-01-01"), kProtocolVersions[0]);
  EXPECT_EQ(NegotiateVersion(""), kProtocolVersions[0]);
  EXPECT_TRUE(IsServedVersion("2025-03-26"));
  EXPECT_FALSE(IsServedVersion("2024-11-05"));  // we serve Streamable HTTP only
  EXPECT_TRUE(IsUpstreamVersion("2024-11-05"));  // but still talk to HTTP+SSE servers
  EXPECT_FALSE(IsUpstreamVersion("2025-13-01"));
}

TEST(MakeRequestTest, OmitsNullParams) {
  EXPECT_EQ(MakeRequest(3, "ping", nullptr), json({{"jsonrpc", "2.0"}, {"id", 3}, {"method", "ping"}}));
  EXPECT_EQ(MakeRequest("a", "m", json::object())["params"], json::object());
}

struct Framed {
  std::vector<std::string> lines;
  int oversized = 0;
};

Framed Frame(size_t max, const std::vector<std::string>& chunks, bool finish = true) {
  Framed out;
  LineFramer framer(max);
  auto on_line = [&](const std::string& line) { out.lines.push_back(line); };
  for (const auto& c : chunks) {
    framer.Feed(c.data(), c.size(), on_line, [&] { ++out.oversized; });
  }
  if (finish) framer.Finish(on_line);
  return out;
}

TEST(LineFramerTest, SplitsLinesAcrossChunksAndDropsCarriageReturns) {
  Framed f = Frame(100, {"{\"a\":1}\r\n{\"b", "\":2}\n\n", "tail"});
  EXPECT_THAT(f.lines, ElementsAre("{\"a\":1}", "{\"b\":2}", "", "tail"));
  EXPECT_EQ(f.oversized, 0);
  EXPECT_THAT(Frame(100, {"tail"}, /*finish=*/false).lines, ElementsAre());
}

// A line over the limit costs nothing but itself: reported once, skipped to its newline,
// never buffered, and the next line is whole.
TEST(LineFramerTest, AnOversizedLineIsSkippedToItsNewline) {
  std::vector<std::string> chunks(1000, std::string(1000, 'x'));  // 1 MB, no newline
  chunks.push_back("still the long line\nnext\n");
  Framed f = Frame(64, chunks);
  EXPECT_EQ(f.oversized, 1);
  EXPECT_THAT(f.lines, ElementsAre("next"));
  // Exactly at the limit is fine; one byte more is not.
  EXPECT_THAT(Frame(4, {"abcd\nabcde\n"}).lines, ElementsAre("abcd"));
  // An oversized last line without a newline is not handed out at the end either.
  Framed tail = Frame(4, {"abcdefgh"});
  EXPECT_EQ(tail.oversized, 1);
  EXPECT_TRUE(tail.lines.empty());
}

}  // namespace
}  // namespace gateway
