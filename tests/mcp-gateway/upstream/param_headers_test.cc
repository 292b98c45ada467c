// x-mcp-header declarations (SEP-2243): which are valid, and the Mcp-Param-* headers a
// call's arguments become. (The conformance suite's http-custom-headers and
// http-invalid-tool-headers scenarios check the same on the wire.)
#include "upstream/param_headers.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

json Schema(json properties) { return {{"type", "object"}, {"properties", std::move(properties)}}; }

TEST(ParamHeadersTest, DeclarationsOnStringIntegerAndBooleanProperties) {
  absl::StatusOr<std::vector<ParamHeader>> got = ParamHeadersOf(Schema({
      {"region", {{"type", "string"}, {"x-mcp-header", "Region"}}},
      {"priority", {{"type", "integer"}, {"x-mcp-header", "Priority"}}},
      {"verbose", {{"type", "boolean"}, {"x-mcp-header", "X_Verbose.1"}}},
      {"query", {{"type", "string"}}},
  }));
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_TRUE(ParamHeadersOf(json{{"type", "object"}}).ok());
  EXPECT_TRUE(ParamHeadersOf(json::array()).ok());
}

TEST(ParamHeadersTest, InvalidDeclarationsLeaveTheToolOut) {
  auto why = [](json properties) {
    absl::StatusOr<std::vector<ParamHeader>> got = ParamHeadersOf(Schema(std::move(properties)));
    EXPECT_FALSE(got.ok());
    return std::string(got.status().message());
  };
  EXPECT_THAT(why({{"v", {{"type", "string"}, {"x-mcp-header", ""}}}}), HasSubstr("not an HTTP header name"));
  EXPECT_THAT(why({{"v", {{"type", "string"}, {"x-mcp-header", "My Region"}}}}), HasSubstr("not an HTTP header name"));
  EXPECT_THAT(why({{"v", {{"type", "string"}, {"x-mcp-header", "Region:Primary"}}}}), HasSubstr("not an HTTP"));
  EXPECT_THAT(why({{"v", {{"type", "string"}, {"x-mcp-header", "R\xc3\xa9gion"}}}}), HasSubstr("not an HTTP"));
  EXPECT_THAT(why({{"v", {{"type", "string"}, {"x-mcp-header", "Region\t1"}}}}), HasSubstr("not an HTTP"));
  EXPECT_THAT(why({{"v", {{"type", "string"}, {"x-mcp-header", "X\r\nEvil: 1"}}}}), HasSubstr("not an HTTP"));
  EXPECT_THAT(why({{"v", {{"type", "string"}, {"x-mcp-header", std::string(129, 'a')}}}}), HasSubstr("longer than 128"));
  EXPECT_THAT(why({{"v", {{"type", "string"}, {"x-mcp-header", 7}}}}), HasSubstr("not a string"));
  for (const char* type : {"number", "object", "array", "null"}) {
    EXPECT_THAT(why({{"v", {{"type", type}, {"x-mcp-header", "V"}}}}), HasSubstr("not string, integer or boolean"));
  }
  EXPECT_THAT(why({{"v", {{"x-mcp-header", "V"}}}}), HasSubstr("not string, integer or boolean"));
  EXPECT_THAT(why({{"a", {{"type", "string"}, {"x-mcp-header", "MyField"}}},
                   {"b", {{"type", "string"}, {"x-mcp-header", "myfield"}}}}),
              HasSubstr("repeats"));
}

TEST(ParamHeadersTest, ValuesAreEncodedAndNullsOmitted) {
  const std::vector<ParamHeader> declared = {{"Region", "region"}, {"Priority", "priority"},
                                             {"Verbose", "verbose"}, {"Padded", "padded"},
                                             {"Crlf", "crlf"}, {"Score", "score"}, {"Absent", "absent"}};
  const json arguments = {{"region", "us west 1"}, {"priority", 42}, {"verbose", nullptr},
                          {"padded", " x "}, {"crlf", "a\r\nEvil: 1"}, {"score", 3.5}, {"query", "q"}};
  EXPECT_THAT(ParamHeaderValues(declared, arguments),
              ElementsAre(Pair("Mcp-Param-Region", "us west 1"), Pair("Mcp-Param-Priority", "42"),
                          Pair("Mcp-Param-Padded", "=?base64?IHgg?="),
                          Pair("Mcp-Param-Crlf", "=?base64?YQ0KRXZpbDogMQ==?=")));
  EXPECT_THAT(ParamHeaderValues({{"Flag", "flag"}}, json{{"flag", false}}), ElementsAre(Pair("Mcp-Param-Flag", "false")));
  EXPECT_TRUE(ParamHeaderValues(declared, json::array()).empty());
}

}  // namespace
}  // namespace gateway
