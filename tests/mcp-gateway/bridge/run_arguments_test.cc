// Unit tests of run_arguments.h: every field of a run's arguments is checked and a bad one
// is named in an INVALID_ARGUMENT; the allowlist follows `servers`.
#include "bridge/run_arguments.h"

#include "bridge_fakes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing::Server;

const std::vector<UpstreamStatus> kUpstreams = {Server("github", {"search"}),
                                                Server("down", {}, false)};
constexpr RunLimits kLimits{30, 300};

absl::Status ErrorOf(const json& args) {
  return ParseRunArguments(args, kUpstreams, kLimits).status();
}

TEST(ParseRunArgumentsTest, DefaultsForEverythingButCode) {
  absl::StatusOr<RunArguments> run = ParseRunArguments({{"code", "print(1)"}}, kUpstreams, kLimits);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->code, "print(1)");
  EXPECT_EQ(run->timeout_seconds, 30);
  EXPECT_EQ(run->session, "default");
  EXPECT_FALSE(run->reset);
  EXPECT_TRUE(run->servers.Allows("github"));
  EXPECT_TRUE(run->servers.Allows("anything"));
}

TEST(ParseRunArgumentsTest, EveryFieldIsRead) {
  absl::StatusOr<RunArguments> run = ParseRunArguments(
      {{"code", "x"}, {"timeout_seconds", 2.5}, {"session", "side-1_B"}, {"reset", true},
       {"servers", {"github"}}},
      kUpstreams, kLimits);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->timeout_seconds, 2.5);
  EXPECT_EQ(run->session, "side-1_B");
  EXPECT_TRUE(run->reset);
  EXPECT_TRUE(run->servers.Allows("github"));
  EXPECT_FALSE(run->servers.Allows("down"));
}

TEST(ParseRunArgumentsTest, NullMeansAbsent) {
  for (const char* field : {"timeout_seconds", "session", "reset", "servers"}) {
    json args = {{"code", "x"}, {field, nullptr}};
    absl::StatusOr<RunArguments> run = ParseRunArguments(args, kUpstreams, kLimits);
    ASSERT_TRUE(run.ok()) << field << ": " << run.status();
    EXPECT_EQ(run->session, "default") << field;
    EXPECT_TRUE(run->servers.Allows("down")) << field;
  }
}

TEST(ParseRunArgumentsTest, CodeMustBeANonEmptyString) {
  for (const json& args : {json::object(), json{{"code", ""}}, json{{"code", 42}},
                           json{{"code", nullptr}}, json{{"code", {"print(1)"}}}}) {
    absl::Status s = ErrorOf(args);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << args.dump();
    EXPECT_THAT(std::string(s.message()), HasSubstr("'code'")) << args.dump();
  }
  EXPECT_TRUE(absl::IsInvalidArgument(ErrorOf(json::array({"code"}))));
  EXPECT_TRUE(absl::IsInvalidArgument(ErrorOf("print(1)")));
}

TEST(ParseRunArgumentsTest, UnknownArgumentsAreNamed) {
  absl::Status s = ErrorOf({{"code", "x"}, {"cwd", "/"}});
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'cwd'"));
}

TEST(ParseRunArgumentsTest, TimeoutMustBeWithinTheOperatorsBound) {
  for (const json& t : {json(0), json(-1), json(300.5), json(1e308), json("10"), json(true)}) {
    absl::Status s = ErrorOf({{"code", "x"}, {"timeout_seconds", t}});
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << t.dump();
    EXPECT_THAT(std::string(s.message()), HasSubstr("[0.001, 300]")) << t.dump();
  }
  EXPECT_TRUE(ParseRunArguments({{"code", "x"}, {"timeout_seconds", 300}}, kUpstreams, kLimits).ok());
}

// sandboxd counts whole milliseconds and reads 0 as its default (30 s): 0.0005 s used to
// become a 30 s run. A positive timeout below 1 ms is refused (-32602).
TEST(ParseRunArgumentsTest, ATimeoutBelowAMillisecondIsRefusedNotReplaced) {
  for (double t : {0.0005, 0.0009999, 1e-300}) {
    absl::Status s = ErrorOf({{"code", "x"}, {"timeout_seconds", t}});
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << t;
    EXPECT_THAT(std::string(s.message()), HasSubstr("[0.001, 300]")) << t;
  }
  absl::StatusOr<RunArguments> ms = ParseRunArguments({{"code", "x"}, {"timeout_seconds", 0.001}}, kUpstreams, kLimits);
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_EQ(static_cast<uint32_t>(ms->timeout_seconds * 1000), 1u);
}

TEST(ParseRunArgumentsTest, SessionNamesAreShortAndPlain) {
  for (const json& n : {json(""), json(std::string(65, 'a')), json("a b"), json("../x"),
                        json("a\x1f" "b"), json("é"), json(7)}) {
    absl::Status s = ErrorOf({{"code", "x"}, {"session", n}});
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << n.dump();
    EXPECT_THAT(std::string(s.message()), HasSubstr("'session'"));
  }
  EXPECT_TRUE(ParseRunArguments({{"code", "x"}, {"session", std::string(64, 'a')}}, kUpstreams,
                                kLimits)
                  .ok());
}

TEST(ParseRunArgumentsTest, ResetMustBeABoolean) {
  absl::Status s = ErrorOf({{"code", "x"}, {"reset", "yes"}});
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'reset'"));
}

TEST(ParseRunArgumentsTest, ServersMustNameConfiguredServers) {
  EXPECT_THAT(std::string(ErrorOf({{"code", "x"}, {"servers", "github"}}).message()),
              HasSubstr("array of server names"));
  EXPECT_THAT(std::string(ErrorOf({{"code", "x"}, {"servers", {"github", 1}}}).message()),
              HasSubstr("array of server names"));
  EXPECT_THAT(std::string(ErrorOf({{"code", "x"}, {"servers", {"gitlab"}}}).message()),
              HasSubstr("unknown server 'gitlab'"));
  absl::StatusOr<RunArguments> down =
      ParseRunArguments({{"code", "x"}, {"servers", {"down"}}}, kUpstreams, kLimits);
  ASSERT_TRUE(down.ok()) << "a configured server that is down may be named";
}

TEST(ParseRunArgumentsTest, AnEmptyServerListAllowsNothing) {
  absl::StatusOr<RunArguments> run =
      ParseRunArguments({{"code", "x"}, {"servers", json::array()}}, kUpstreams, kLimits);
  ASSERT_TRUE(run.ok());
  EXPECT_FALSE(run->servers.Allows("github"));
  EXPECT_FALSE(run->servers.Allows(""));
}

TEST(ParseRunArgumentsTest, FilesAreTextOrBase64WithinTheLimits) {
  absl::StatusOr<RunArguments> run = ParseRunArguments(
      {{"code", "x"}, {"files", {{"in/a.txt", "hello"}, {"b.bin", {{"base64", "AP8="}}}}}},
      kUpstreams, kLimits);
  ASSERT_TRUE(run.ok()) << run.status();
  ASSERT_EQ(run->files.size(), 2u);
  EXPECT_EQ(run->files[0].path, "b.bin");  // JSON objects come sorted
  EXPECT_EQ(run->files[0].data, std::string("\x00\xff", 2));
  EXPECT_EQ(run->files[1].data, "hello");
  EXPECT_THAT(ErrorOf({{"code", "x"}, {"files", "a.txt"}}).message(), HasSubstr("'files' must be an object"));
  EXPECT_THAT(ErrorOf({{"code", "x"}, {"files", {{"a", 5}}}}).message(), HasSubstr("files['a'] must be text"));
  EXPECT_THAT(ErrorOf({{"code", "x"}, {"files", {{"a", {{"base64", "!!"}}}}}}).message(),
              HasSubstr("files['a'].base64 is not base64"));
  EXPECT_THAT(ErrorOf({{"code", "x"}, {"files", {{"a", {{"base64", "AA=="}, {"x", 1}}}}}}).message(),
              HasSubstr("must be text or"));
  EXPECT_THAT(ErrorOf({{"code", "x"}, {"files", {{"", "x"}}}}).message(), HasSubstr("bad path"));
  RunLimits small = kLimits;
  small.max_files = 2;
  small.max_files_bytes = 10;
  json three = {{"code", "x"}, {"files", {{"a", "1"}, {"b", "2"}, {"c", "3"}}}};
  EXPECT_THAT(ParseRunArguments(three, kUpstreams, small).status().message(), HasSubstr("at most 2"));
  json big = {{"code", "x"}, {"files", {{"a", "123456"}, {"b", "123456"}}}};
  EXPECT_THAT(ParseRunArguments(big, kUpstreams, small).status().message(),
              HasSubstr("more than 10 bytes"));
}

// Code over the limit (2 MB, say) would otherwise wait in the gateway's queue of its
// sandbox, holding its copies, only for sandboxd to refuse it: it is refused as the
// arguments are read.
TEST(ParseRunArgumentsTest, CodeOverTheLimitIsRefusedNamingTheFlag) {
  RunLimits limits = kLimits;
  limits.max_code_bytes = 10;
  EXPECT_TRUE(ParseRunArguments({{"code", std::string(10, 'x')}}, kUpstreams, limits).ok());
  absl::Status s = ParseRunArguments({{"code", std::string(11, 'x')}}, kUpstreams, limits).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("'code' is 11 bytes; the limit is 10 (the gateway's --max_code_bytes)"));
}

}  // namespace
}  // namespace gateway
