#include "sandboxd/frame.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "base/untrusted_json.h"

namespace sandboxd {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

std::string Header(uint32_t n) {
  std::string h(4, '\0');
  h[0] = static_cast<char>((n >> 24) & 0xff);
  h[1] = static_cast<char>((n >> 16) & 0xff);
  h[2] = static_cast<char>((n >> 8) & 0xff);
  h[3] = static_cast<char>(n & 0xff);
  return h;
}

std::string RawFrame(const std::string& body) { return Header(body.size()) + body; }

void Append(FrameDecoder& d, const std::string& bytes) { d.Append(bytes.data(), bytes.size()); }

// Decodes exactly one frame from `bytes`; the status of Next() otherwise.
absl::StatusOr<json> DecodeOne(const std::string& bytes, size_t max = kMaxRunnerFrameBytes) {
  FrameDecoder d(max);
  Append(d, bytes);
  absl::StatusOr<std::optional<json>> f = d.Next();
  if (!f.ok()) return f.status();
  if (!*f) return absl::NotFoundError("incomplete");
  return **f;
}

// ---- EncodeFrame / FrameDecoder ---------------------------------------------------

TEST(EncodeFrameTest, LengthPrefixIsBigEndian) {
  std::string f = EncodeFrame(json{{"type", "ping"}, {"id", 1}});
  ASSERT_GE(f.size(), 4u);
  std::string body = f.substr(4);
  EXPECT_EQ(f.substr(0, 4), Header(body.size()));
  EXPECT_EQ(json::parse(body), (json{{"type", "ping"}, {"id", 1}}));
}

TEST(EncodeFrameTest, LargeLengthUsesAllFourBytes) {
  json big = {{"type", "x"}, {"s", std::string(0x012345, 'a')}};
  std::string f = EncodeFrame(big);
  size_t body = f.size() - 4;
  EXPECT_EQ(f.substr(0, 4), Header(body));
  EXPECT_GT(body, 0x10000u);
}

TEST(EncodeFrameTest, InvalidUtf8InStringsIsReplacedNotThrown) {
  json j = {{"type", "x"}, {"s", std::string("a\xff" "b")}};
  std::string f;
  ASSERT_NO_THROW(f = EncodeFrame(j));
  absl::StatusOr<json> back = DecodeOne(f);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)["s"], "a\xef\xbf\xbd" "b");  // U+FFFD
}

TEST(FrameDecoderTest, RoundTrip) {
  json msgs[] = {
      {{"type", "exec"}, {"id", 7}, {"code", "print('héllo ☃')\n"}, {"max_output_bytes", 1024}},
      {{"type", "x"}, {"nested", {{"a", {1, 2, 3}}, {"b", nullptr}, {"c", true}}}},
      {{"type", "x"}, {"n", -5}, {"f", 1.5}, {"big", 18446744073709551615ull}},
      json::object(),
  };
  for (const json& m : msgs) {
    absl::StatusOr<json> back = DecodeOne(EncodeFrame(m));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, m);
  }
}

TEST(FrameDecoderTest, NeedsMoreBytes) {
  FrameDecoder d(kMaxRunnerFrameBytes);
  auto f = d.Next();
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has_value());
  Append(d, std::string("\0\0", 2));
  f = d.Next();
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has_value());
  EXPECT_EQ(d.buffered(), 2u);
}

TEST(FrameDecoderTest, FrameSplitByteByByte) {
  json m = {{"type", "output"}, {"id", 3}, {"chunks", {{"stdout", "hi\n"}}}};
  std::string bytes = EncodeFrame(m) + EncodeFrame(json{{"type", "pong"}, {"id", 4}});
  FrameDecoder d(kMaxRunnerFrameBytes);
  std::vector<json> got;
  for (char c : bytes) {
    d.Append(&c, 1);
    for (;;) {
      auto f = d.Next();
      ASSERT_TRUE(f.ok()) << f.status();
      if (!*f) break;
      got.push_back(**f);
    }
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], m);
  EXPECT_EQ(got[1], (json{{"type", "pong"}, {"id", 4}}));
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(FrameDecoderTest, SeveralFramesInOneAppend) {
  std::string bytes;
  for (int i = 0; i < 10; ++i) bytes += EncodeFrame(json{{"type", "pong"}, {"id", i}});
  bytes += EncodeFrame(json{{"type", "pong"}, {"id", 99}}).substr(0, 6);  // a partial one
  FrameDecoder d(kMaxRunnerFrameBytes);
  Append(d, bytes);
  for (int i = 0; i < 10; ++i) {
    auto f = d.Next();
    ASSERT_TRUE(f.ok()) << f.status();
    ASSERT_TRUE(f->has_value()) << i;
    EXPECT_EQ((**f)["id"], i);
  }
  auto f = d.Next();
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->has_value());
  EXPECT_EQ(d.buffered(), 6u);
  Append(d, EncodeFrame(json{{"type", "pong"}, {"id", 99}}).substr(6));
  f = d.Next();
  ASSERT_TRUE(f.ok());
  ASSERT_TRUE(f->has_value());
  EXPECT_EQ((**f)["id"], 99);
}

TEST(FrameDecoderTest, ManyFramesAcrossCompaction) {
  // Enough bytes to cross the decoder's internal compaction threshold several times.
  FrameDecoder d(kMaxRunnerFrameBytes);
  const std::string pad(1000, 'p');
  int next_expected = 0;
  for (int i = 0; i < 500; ++i) {
    std::string f = EncodeFrame(json{{"type", "x"}, {"i", i}, {"pad", pad}});
    // Feed in uneven pieces.
    Append(d, f.substr(0, 7));
    Append(d, f.substr(7));
    if (i % 3 == 0) continue;  // let frames pile up sometimes
    for (;;) {
      auto n = d.Next();
      ASSERT_TRUE(n.ok()) << n.status();
      if (!*n) break;
      ASSERT_EQ((**n)["i"], next_expected);
      ++next_expected;
    }
  }
  for (;;) {
    auto n = d.Next();
    ASSERT_TRUE(n.ok()) << n.status();
    if (!*n) break;
    ASSERT_EQ((**n)["i"], next_expected);
    ++next_expected;
  }
  EXPECT_EQ(next_expected, 500);
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(FrameDecoderTest, OversizedLengthRejectedBeforeBody) {
  FrameDecoder d(100);
  Append(d, Header(101));  // no body at all
  auto f = d.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("exceeds"));
}

TEST(FrameDecoderTest, HugeLengthRejected) {
  FrameDecoder d(kMaxRunnerFrameBytes);
  Append(d, "\xff\xff\xff\xffjunk");
  auto f = d.Next();
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("protocol violation"));
}

TEST(FrameDecoderTest, FrameOfExactlyTheCapAccepted) {
  std::string body = R"({"type":"x","s":")";
  body += std::string(100 - body.size() - 2, 'a');
  body += "\"}";
  ASSERT_EQ(body.size(), 100u);
  absl::StatusOr<json> f = DecodeOne(RawFrame(body), 100);
  EXPECT_TRUE(f.ok()) << f.status();
}

TEST(FrameDecoderTest, InvalidJsonRejected) {
  for (std::string body : {"{", "{\"type\":}", "nope", "", "{\"a\":1}{\"b\":2}", "{'a':1}"}) {
    absl::StatusOr<json> f = DecodeOne(RawFrame(body));
    ASSERT_FALSE(f.ok()) << body;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("protocol violation")) << body;
  }
}

TEST(FrameDecoderTest, NonObjectRejected) {
  for (std::string body : {"[1,2]", "\"type\"", "42", "null", "true"}) {
    absl::StatusOr<json> f = DecodeOne(RawFrame(body));
    ASSERT_FALSE(f.ok()) << body;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_THAT(std::string(f.status().message()), HasSubstr("not a JSON object")) << body;
  }
}

TEST(FrameDecoderTest, TooDeepNestingRejected) {
  std::string body = "{\"type\":\"x\",\"a\":";
  body += std::string(codemode::kMaxJsonDepth + 5, '[');
  body += std::string(codemode::kMaxJsonDepth + 5, ']');
  body += "}";
  absl::StatusOr<json> f = DecodeOne(RawFrame(body));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(f.status().message()), HasSubstr("nests deeper"));
}

TEST(FrameDecoderTest, MillionBracketsDoNotOverflowTheStack) {
  std::string body(1 << 20, '[');
  absl::StatusOr<json> f = DecodeOne(RawFrame(body));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(FrameDecoderTest, BracketsInsideStringsDoNotCountAsNesting) {
  std::string body = "{\"type\":\"x\",\"s\":\"" + std::string(1000, '[') + "\\\"" +
                     std::string(1000, '{') + "\"}";
  absl::StatusOr<json> f = DecodeOne(RawFrame(body));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)["s"].get<std::string>().size(), 2001u);
}

TEST(FrameDecoderTest, InvalidUtf8Rejected) {
  for (std::string body : {std::string("{\"type\":\"a\xff\"}"),
                           std::string("{\"type\":\"\xc3\"}"),          // truncated sequence
                           std::string("{\"type\":\"\xed\xa0\x80\"}"),  // UTF-16 surrogate
                           std::string("{\"type\":\"\xc0\xaf\"}")}) {   // overlong
    absl::StatusOr<json> f = DecodeOne(RawFrame(body));
    ASSERT_FALSE(f.ok()) << "body of " << body.size() << " bytes";
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// ---- ParseRunnerMessage -----------------------------------------------------------

// Frames reach ParseRunnerMessage from the JSON parser, where non-negative integers are
// unsigned; round-trip through text so literals here look the same.
absl::StatusOr<RunnerMessage> Parse(const json& frame) {
  return ParseRunnerMessage(json::parse(frame.dump()));
}

absl::Status ParseError(const json& frame) { return Parse(frame).status(); }

#define EXPECT_PROTOCOL_ERROR(frame, text)                                          \
  do {                                                                              \
    absl::Status _s = ParseError(frame);                                            \
    EXPECT_EQ(_s.code(), absl::StatusCode::kInvalidArgument) << (frame).dump();     \
    EXPECT_THAT(std::string(_s.message()), HasSubstr(text)) << (frame).dump();      \
    EXPECT_THAT(std::string(_s.message()), HasSubstr("protocol violation"));        \
  } while (0)

TEST(ParseRunnerMessageTest, Ready) {
  auto m = Parse(
      json{{"type", "ready"}, {"runner_version", 1}, {"python", "3.11.2"}, {"pid", 42}, {"execs", 3}});
  ASSERT_TRUE(m.ok()) << m.status();
  auto* r = std::get_if<ReadyMessage>(&*m);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->runner_version, 1);
  EXPECT_EQ(r->python, "3.11.2");
  EXPECT_EQ(r->pid, 42);
  EXPECT_EQ(r->execs, 3u);
}

TEST(ParseRunnerMessageTest, ReadyOptionalFields) {
  auto m = Parse(json{{"type", "ready"}, {"runner_version", 1}});
  ASSERT_TRUE(m.ok()) << m.status();
  auto* r = std::get_if<ReadyMessage>(&*m);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->python, "");
  EXPECT_EQ(r->pid, 0);
  EXPECT_EQ(r->execs, 0u);
}

TEST(ParseRunnerMessageTest, ReadyErrors) {
  EXPECT_PROTOCOL_ERROR((json{{"type", "ready"}}), "runner_version");
  EXPECT_PROTOCOL_ERROR((json{{"type", "ready"}, {"runner_version", "1"}}), "runner_version");
  EXPECT_PROTOCOL_ERROR((json{{"type", "ready"}, {"runner_version", 1.5}}), "runner_version");
  EXPECT_PROTOCOL_ERROR((json{{"type", "ready"}, {"runner_version", 1}, {"pid", -1}}), "pid");
  EXPECT_PROTOCOL_ERROR((json{{"type", "ready"}, {"runner_version", 1}, {"execs", "3"}}), "execs");
  EXPECT_PROTOCOL_ERROR((json{{"type", "ready"}, {"runner_version", 1}, {"python", 3}}), "python");
  EXPECT_PROTOCOL_ERROR(
      (json{{"type", "ready"}, {"runner_version", 1}, {"python", std::string(257, 'x')}}),
      "too long");
}

TEST(ParseRunnerMessageTest, Output) {
  auto m = Parse(json{{"type", "output"},
                                   {"id", 5},
                                   {"chunks", json::array({json::array({"stdout", "a"}),
                                                           json::array({"stderr", "b"}),
                                                           json::array({"stdout", ""})})}});
  ASSERT_TRUE(m.ok()) << m.status();
  auto* o = std::get_if<OutputMessage>(&*m);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->id, 5u);
  ASSERT_EQ(o->chunks.size(), 3u);
  EXPECT_EQ(o->chunks[0].stream, OutputStream::kStdout);
  EXPECT_EQ(o->chunks[0].text, "a");
  EXPECT_EQ(o->chunks[1].stream, OutputStream::kStderr);
  EXPECT_EQ(o->chunks[1].text, "b");
  EXPECT_EQ(o->chunks[2].text, "");
}

TEST(ParseRunnerMessageTest, OutputEmptyChunksIsFine) {
  auto m = Parse(json{{"type", "output"}, {"id", 1}, {"chunks", json::array()}});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(std::get<OutputMessage>(*m).chunks.empty());
}

TEST(ParseRunnerMessageTest, OutputErrors) {
  json chunks = json::array({json::array({"stdout", "a"})});
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"chunks", chunks}}), "missing field 'id'");
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"id", -1}, {"chunks", chunks}}), "'id'");
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"id", 1.5}, {"chunks", chunks}}), "'id'");
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"id", "1"}, {"chunks", chunks}}), "'id'");
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"id", true}, {"chunks", chunks}}), "'id'");
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"id", nullptr}, {"chunks", chunks}}), "'id'");
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"id", 1}}), "chunks");
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"id", 1}, {"chunks", "text"}}), "chunks");
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"id", 1}, {"chunks", {{"k", "v"}}}}), "chunks");
  EXPECT_PROTOCOL_ERROR((json{{"type", "output"}, {"id", 1}, {"chunks", json::array({"stdout"})}}),
                        "chunk");
  EXPECT_PROTOCOL_ERROR(
      (json{{"type", "output"}, {"id", 1}, {"chunks", json::array({json::array({"stdout"})})}}),
      "chunk");
  EXPECT_PROTOCOL_ERROR(
      (json{{"type", "output"}, {"id", 1}, {"chunks", json::array({json::array({"stdout", "a", "b"})})}}),
      "chunk");
  EXPECT_PROTOCOL_ERROR(
      (json{{"type", "output"}, {"id", 1}, {"chunks", json::array({json::array({"stdout", 5})})}}),
      "chunk");
  EXPECT_PROTOCOL_ERROR(
      (json{{"type", "output"}, {"id", 1}, {"chunks", json::array({json::array({1, "a"})})}}),
      "chunk");
  EXPECT_PROTOCOL_ERROR(
      (json{{"type", "output"}, {"id", 1}, {"chunks", json::array({json::array({"stdin", "a"})})}}),
      "unknown stream");
  EXPECT_PROTOCOL_ERROR(
      (json{{"type", "output"}, {"id", 1}, {"chunks", json::array({json::array({"STDOUT", "a"})})}}),
      "unknown stream");
}

TEST(ParseRunnerMessageTest, ToolCall) {
  auto m = Parse(json{{"type", "tool_call"},
                                   {"id", 2},
                                   {"call_id", "c1"},
                                   {"server", "github"},
                                   {"tool", "create-issue"},
                                   {"arguments", {{"title", "x"}, {"n", 1}}}});
  ASSERT_TRUE(m.ok()) << m.status();
  auto* t = std::get_if<ToolCallMessage>(&*m);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->id, 2u);
  EXPECT_EQ(t->call_id, "c1");
  EXPECT_EQ(t->server, "github");
  EXPECT_EQ(t->tool, "create-issue");
  EXPECT_EQ(t->arguments, (json{{"title", "x"}, {"n", 1}}));
}

TEST(ParseRunnerMessageTest, ToolCallMissingOrNullArgumentsBecomeEmptyObject) {
  json base = {{"type", "tool_call"}, {"id", 2}, {"call_id", "c1"}, {"server", "s"}, {"tool", "t"}};
  auto m = Parse(base);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(std::get<ToolCallMessage>(*m).arguments, json::object());
  json with_null = base;
  with_null["arguments"] = nullptr;
  m = Parse(with_null);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(std::get<ToolCallMessage>(*m).arguments.is_object());
}

TEST(ParseRunnerMessageTest, ToolCallErrors) {
  json base = {{"type", "tool_call"}, {"id", 2}, {"call_id", "c1"}, {"server", "s"}, {"tool", "t"}};
  auto with = [&](const char* key, json v) {
    json f = base;
    f[key] = std::move(v);
    return f;
  };
  auto without = [&](const char* key) {
    json f = base;
    f.erase(key);
    return f;
  };
  EXPECT_PROTOCOL_ERROR(without("id"), "'id'");
  EXPECT_PROTOCOL_ERROR(with("id", -3), "'id'");
  EXPECT_PROTOCOL_ERROR(without("call_id"), "call_id");
  EXPECT_PROTOCOL_ERROR(with("call_id", 7), "call_id");
  EXPECT_PROTOCOL_ERROR(with("call_id", ""), "call_id");
  EXPECT_PROTOCOL_ERROR(with("call_id", std::string(kMaxCallIdBytes + 1, 'c')), "too long");
  EXPECT_TRUE(Parse(with("call_id", std::string(kMaxCallIdBytes, 'c'))).ok());
  EXPECT_PROTOCOL_ERROR(without("server"), "server");
  EXPECT_PROTOCOL_ERROR(with("server", json::array()), "server");
  EXPECT_PROTOCOL_ERROR(with("server", std::string(kMaxNameBytes + 1, 's')), "too long");
  EXPECT_PROTOCOL_ERROR(without("tool"), "tool");
  EXPECT_PROTOCOL_ERROR(with("tool", std::string(kMaxNameBytes + 1, 't')), "too long");
  EXPECT_PROTOCOL_ERROR(with("arguments", json::array({1, 2})), "arguments");
  EXPECT_PROTOCOL_ERROR(with("arguments", "{}"), "arguments");
  EXPECT_PROTOCOL_ERROR(with("arguments", 5), "arguments");
}

TEST(ParseRunnerMessageTest, DoneOk) {
  auto m = Parse(json{{"type", "done"},
                                   {"id", 9},
                                   {"status", "ok"},
                                   {"result", "42"},
                                   {"error", nullptr},
                                   {"output_bytes", 10},
                                   {"dropped_bytes", 2}});
  ASSERT_TRUE(m.ok()) << m.status();
  auto* d = std::get_if<DoneMessage>(&*m);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->id, 9u);
  EXPECT_EQ(d->status, DoneMessage::Status::kOk);
  ASSERT_TRUE(d->result.has_value());
  EXPECT_EQ(*d->result, "42");
  EXPECT_FALSE(d->error.has_value());
  EXPECT_EQ(d->output_bytes, 10u);
  EXPECT_EQ(d->dropped_bytes, 2u);
}

TEST(ParseRunnerMessageTest, DoneErrorAndInterrupted) {
  auto m = Parse(
      json{{"type", "done"},
           {"id", 1},
           {"status", "error"},
           {"result", nullptr},
           {"error", {{"type", "ZeroDivisionError"}, {"message", "division by zero"},
                      {"traceback", "Traceback ..."}}}});
  ASSERT_TRUE(m.ok()) << m.status();
  auto& d = std::get<DoneMessage>(*m);
  EXPECT_EQ(d.status, DoneMessage::Status::kError);
  EXPECT_FALSE(d.result.has_value());
  ASSERT_TRUE(d.error.has_value());
  EXPECT_EQ(d.error->type, "ZeroDivisionError");
  EXPECT_EQ(d.error->message, "division by zero");
  EXPECT_EQ(d.error->traceback, "Traceback ...");
  EXPECT_EQ(d.output_bytes, 0u);

  m = Parse(json{{"type", "done"}, {"id", 1}, {"status", "interrupted"}, {"error", json::object()}});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(std::get<DoneMessage>(*m).status, DoneMessage::Status::kInterrupted);
  ASSERT_TRUE(std::get<DoneMessage>(*m).error.has_value());
  EXPECT_EQ(std::get<DoneMessage>(*m).error->type, "");
  EXPECT_FALSE(std::get<DoneMessage>(*m).namespace_reset);  // absent: kept

  // The JavaScript runner says when it had to replace the namespace.
  m = Parse(json{{"type", "done"}, {"id", 1}, {"status", "interrupted"}, {"namespace_reset", true}});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(std::get<DoneMessage>(*m).namespace_reset);
}

TEST(ParseRunnerMessageTest, DoneErrors) {
  json base = {{"type", "done"}, {"id", 1}, {"status", "ok"}};
  auto with = [&](const char* key, json v) {
    json f = base;
    f[key] = std::move(v);
    return f;
  };
  EXPECT_PROTOCOL_ERROR((json{{"type", "done"}, {"status", "ok"}}), "'id'");
  EXPECT_PROTOCOL_ERROR(with("id", -1), "'id'");
  EXPECT_PROTOCOL_ERROR((json{{"type", "done"}, {"id", 1}}), "status");
  EXPECT_PROTOCOL_ERROR(with("status", "weird"), "unknown status");
  EXPECT_PROTOCOL_ERROR(with("status", 1), "status");
  EXPECT_PROTOCOL_ERROR(with("result", 42), "result");
  EXPECT_PROTOCOL_ERROR(with("error", "boom"), "error");
  EXPECT_PROTOCOL_ERROR(with("error", json({{"type", 5}})), "type");
  EXPECT_PROTOCOL_ERROR(with("error", json({{"message", json::array()}})), "message");
  EXPECT_PROTOCOL_ERROR(with("error", json({{"type", std::string(1025, 't')}})), "too long");
  EXPECT_PROTOCOL_ERROR(with("output_bytes", -1), "output_bytes");
  EXPECT_PROTOCOL_ERROR(with("output_bytes", "10"), "output_bytes");
  EXPECT_PROTOCOL_ERROR(with("dropped_bytes", -1), "dropped_bytes");
  EXPECT_PROTOCOL_ERROR(with("dropped_bytes", 0.5), "dropped_bytes");
  EXPECT_PROTOCOL_ERROR(with("namespace_reset", 1), "namespace_reset");
  EXPECT_PROTOCOL_ERROR(with("namespace_reset", "yes"), "namespace_reset");
  EXPECT_PROTOCOL_ERROR(with("out_digest", 7), "out_digest");
  EXPECT_PROTOCOL_ERROR(with("out_digest", std::string(65, 'a')), "too long");
}

TEST(ParseRunnerMessageTest, Acks) {
  struct Case {
    const char* type;
    AckMessage::Kind kind;
  } cases[] = {{"pong", AckMessage::Kind::kPong},
               {"reset_done", AckMessage::Kind::kResetDone},
               {"catalog_set", AckMessage::Kind::kCatalogSet},
               {"egress_on", AckMessage::Kind::kEgressOn}};
  for (const auto& c : cases) {
    auto m = Parse(json{{"type", c.type}, {"id", 77}});
    ASSERT_TRUE(m.ok()) << c.type << ": " << m.status();
    auto* a = std::get_if<AckMessage>(&*m);
    ASSERT_NE(a, nullptr) << c.type;
    EXPECT_EQ(a->kind, c.kind) << c.type;
    EXPECT_EQ(a->id, 77u) << c.type;
    EXPECT_PROTOCOL_ERROR((json{{"type", c.type}}), "'id'");
    EXPECT_PROTOCOL_ERROR((json{{"type", c.type}, {"id", -77}}), "'id'");
    EXPECT_PROTOCOL_ERROR((json{{"type", c.type}, {"id", "77"}}), "'id'");
  }
}

TEST(ParseRunnerMessageTest, EgressOnCarriesTheRunnersReason) {
  auto on = Parse(json{{"type", "egress_on"}, {"id", 3}, {"port", 41234}});
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(std::get<AckMessage>(*on).error, "");
  EXPECT_FALSE(std::get<AckMessage>(*on).listener);
  auto handed = Parse(json{{"type", "egress_on"}, {"id", 3}, {"port", 41234}, {"listener", true}});
  ASSERT_TRUE(handed.ok()) << handed.status();
  EXPECT_TRUE(std::get<AckMessage>(*handed).listener);
  EXPECT_PROTOCOL_ERROR((json{{"type", "egress_on"}, {"id", 3}, {"listener", 1}}), "listener");
  auto failed = Parse(json{{"type", "egress_on"}, {"id", 3}, {"error", "no egress.sock"}});
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(std::get<AckMessage>(*failed).error, "no egress.sock");
  // An error without words still fails the relay.
  auto empty = Parse(json{{"type", "egress_on"}, {"id", 3}, {"error", ""}});
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(std::get<AckMessage>(*empty).error, "the runner gave no reason");
  EXPECT_PROTOCOL_ERROR((json{{"type", "egress_on"}, {"id", 3}, {"error", 5}}), "error");
  EXPECT_PROTOCOL_ERROR((json{{"type", "egress_on"}, {"id", 3}, {"error", std::string(2000, 'x')}}),
                        "error");
}

TEST(ParseRunnerMessageTest, LargestIdAccepted) {
  auto m = Parse(json{{"type", "pong"}, {"id", 18446744073709551615ull}});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(std::get<AckMessage>(*m).id, 18446744073709551615ull);
}

TEST(ParseRunnerMessageTest, TypeErrors) {
  EXPECT_PROTOCOL_ERROR((json{{"id", 1}}), "type");
  EXPECT_PROTOCOL_ERROR((json{{"type", 5}}), "type");
  EXPECT_PROTOCOL_ERROR((json{{"type", nullptr}}), "type");
  EXPECT_PROTOCOL_ERROR((json{{"type", "exec"}, {"id", 1}}), "unknown frame type 'exec'");
  EXPECT_PROTOCOL_ERROR((json{{"type", "PONG"}, {"id", 1}}), "unknown frame type");
  // The echoed type is capped.
  absl::Status s = ParseError(json{{"type", std::string(10000, 'z')}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(s.message().size(), 200u);
}

TEST(ParseRunnerMessageTest, FramesFromTheRealDecoderParse) {
  // End to end: encoded frames of every runner message type decode and parse.
  std::vector<json> frames = {
      {{"type", "ready"}, {"runner_version", 1}, {"python", "3.11"}, {"pid", 1}, {"execs", 0}},
      {{"type", "output"}, {"id", 1}, {"chunks", json::array({json::array({"stdout", "x"})})}},
      {{"type", "tool_call"}, {"id", 1}, {"call_id", "c1"}, {"server", "s"}, {"tool", "t"},
       {"arguments", json::object()}},
      {{"type", "done"}, {"id", 1}, {"status", "ok"}, {"result", nullptr}, {"error", nullptr},
       {"output_bytes", 1}, {"dropped_bytes", 0}},
      {{"type", "reset_done"}, {"id", 2}},
      {{"type", "catalog_set"}, {"id", 3}},
      {{"type", "pong"}, {"id", 4}},
  };
  std::string bytes;
  for (const auto& f : frames) bytes += EncodeFrame(f);
  FrameDecoder d(kMaxRunnerFrameBytes);
  Append(d, bytes);
  size_t n = 0;
  for (;;) {
    auto f = d.Next();
    ASSERT_TRUE(f.ok()) << f.status();
    if (!*f) break;
    auto m = ParseRunnerMessage(**f);
    EXPECT_TRUE(m.ok()) << (**f).dump() << ": " << m.status();
    ++n;
  }
  EXPECT_EQ(n, frames.size());
}

// ---- sandboxd -> runner frames ----------------------------------------------------

TEST(MakeFrameTest, Shapes) {
  EXPECT_EQ(MakeExecFrame(3, "x = 1", 100, 200, 8),
            (json{{"type", "exec"}, {"id", 3}, {"code", "x = 1"}, {"max_output_bytes", 100},
                  {"max_display_bytes", 200}, {"max_tool_calls_in_flight", 8}}));
  EXPECT_EQ(MakeToolResultFrame("c1", json{{"content", json::array()}}),
            (json{{"type", "tool_result"}, {"call_id", "c1"}, {"ok", true},
                  {"result", {{"content", json::array()}}}}));
  EXPECT_EQ(MakeToolErrorFrame("c2", "nope"),
            (json{{"type", "tool_result"}, {"call_id", "c2"}, {"ok", false}, {"error", "nope"}}));
  EXPECT_EQ(MakeInterruptFrame(4), (json{{"type", "interrupt"}, {"id", 4}}));
  EXPECT_EQ(MakeResetFrame(5), (json{{"type", "reset"}, {"id", 5}}));
  EXPECT_EQ(MakeSetCatalogFrame(6, json{{"servers", json::array()}}),
            (json{{"type", "set_catalog"}, {"id", 6}, {"catalog", {{"servers", json::array()}}}}));
  EXPECT_EQ(MakePingFrame(7), (json{{"type", "ping"}, {"id", 7}}));
}

}  // namespace
}  // namespace sandboxd
