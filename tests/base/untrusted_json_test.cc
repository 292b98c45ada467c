// ParseUntrustedJson: every budget (depth, values, bytes) refuses before memory or stack
// can run away, comments cannot hide nesting, and nothing throws.
#include "base/untrusted_json.h"

#include <string>

#include "base/thread.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace codemode {
namespace {

using ::testing::HasSubstr;

std::string Nested(size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(UntrustedJsonTest, DeepNestingIsRefusedNotACrash) {
  absl::StatusOr<nlohmann::json> v = ParseUntrustedJson(Nested(200000), "message");
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("message nests deeper than 128"));
  EXPECT_TRUE(ParseUntrustedJson(Nested(kMaxJsonDepth), "message").ok());
  EXPECT_FALSE(ParseUntrustedJson(Nested(kMaxJsonDepth + 1), "message").ok());
}

TEST(UntrustedJsonTest, CommentsCannotHideNesting) {
  JsonLimits limits;
  limits.allow_comments = true;
  // A quote inside a comment would fool a scanner that only counts brackets.
  std::string text = "// \"\n" + Nested(100000);
  absl::StatusOr<nlohmann::ordered_json> v = ParseUntrustedJson<nlohmann::ordered_json>(text, "file", limits);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("nests deeper"));
  auto ok = ParseUntrustedJson<nlohmann::ordered_json>("/* c */ {\"b\": 1, \"a\": 2} // end", "file", limits);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->begin().key(), "b");  // ordered_json keeps the file's order
}

TEST(UntrustedJsonTest, ManySmallValuesAreRefused) {
  JsonLimits limits;
  limits.max_values = 1000;
  std::string text = "[";
  for (int i = 0; i < 2000; ++i) text += i ? ",0" : "0";
  text += "]";
  absl::StatusOr<nlohmann::json> v = ParseUntrustedJson(text, "arguments", limits);
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("more than 1000 values"));
  limits.max_values = 5000;
  EXPECT_TRUE(ParseUntrustedJson(text, "arguments", limits).ok());
}

TEST(UntrustedJsonTest, SizeAndSyntax) {
  JsonLimits limits;
  limits.max_bytes = 10;
  EXPECT_THAT(std::string(ParseUntrustedJson("\"0123456789\"", "body", limits).status().message()),
              HasSubstr("the limit is 10"));
  EXPECT_THAT(std::string(ParseUntrustedJson("{broken", "body").status().message()),
              HasSubstr("body is not valid JSON"));
  EXPECT_FALSE(ParseUntrustedJson("", "body").ok());
  EXPECT_FALSE(ParseUntrustedJson("1 2", "body").ok());
}

TEST(UntrustedJsonTest, TypedFieldsNeverThrow) {
  nlohmann::json j = {{"protocolVersion", 20251125}, {"name", "x"}, {"o", {{"k", 1}}}, {"a", {1}}};
  EXPECT_EQ(StringField(j, "protocolVersion"), std::nullopt);  // value() would throw here
  EXPECT_EQ(StringField(j, "name"), "x");
  EXPECT_EQ(StringField(nlohmann::json::array(), "name"), std::nullopt);
  EXPECT_NE(ObjectField(j, "o"), nullptr);
  EXPECT_EQ(ObjectField(j, "a"), nullptr);
  EXPECT_NE(ArrayField(j, "a"), nullptr);
  EXPECT_EQ(ArrayField(j, "missing"), nullptr);
}

TEST(ThreadTest, AnEscapingExceptionEndsTheThreadNotTheProcess) {
  bool after = false;
  std::thread t = StartThread("test", [] { throw std::runtime_error("boom"); });
  t.join();
  after = RunContained("test", [] { throw 42; });
  EXPECT_FALSE(after);
  EXPECT_TRUE(RunContained("test", [] {}));
}

TEST(IsValidUtf8Test, AcceptsWellFormedAndRefusesTheRest) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain ascii"));
  EXPECT_TRUE(IsValidUtf8("\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_TRUE(IsValidUtf8("\xf4\x8f\xbf\xbf"));                          // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));          // cut short
  EXPECT_FALSE(IsValidUtf8("\xc3("));              // bad continuation
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));          // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xe0\x80\xaf"));      // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));      // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xf4\x90\x80\x80"));  // past U+10FFFF
}

}  // namespace
TEST(ApproxJsonBytesTest, CountsStringsKeysAndNodes) {
  nlohmann::json args = {{"code", std::string(1 << 20, 'x')}, {"list", {"ab", 1, 2.5}}};
  EXPECT_GE(ApproxJsonBytes(args), (1u << 20) + 6);
  EXPECT_LT(ApproxJsonBytes(args), (1u << 20) + 1024);
}

}  // namespace codemode
