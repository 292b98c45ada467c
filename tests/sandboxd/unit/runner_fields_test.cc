// The field readers every runner-frame parser uses: what each accepts and how it refuses.
#include "sandboxd/runner_fields.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandboxd {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// Frames reach the readers parsed from the runner's bytes, where a non-negative number is
// unsigned (a json built from a C++ int would be signed), so the tests parse too.
json Parse(const char* text) { return json::parse(text); }

TEST(RunnerFieldsTest, ViolationIsInvalidArgumentNamingTheProtocol) {
  absl::Status s = RunnerViolation("bad thing");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "runner protocol violation: bad thing");
}

TEST(RunnerFieldsTest, UintReadsNonNegativeIntegers) {
  json f = Parse(R"({"id": 7, "zero": 0, "big": 18446744073709551615})");
  EXPECT_EQ(*RunnerUint(f, "id"), 7u);
  EXPECT_EQ(*RunnerUint(f, "zero"), 0u);
  EXPECT_EQ(*RunnerUint(f, "big"), UINT64_MAX);
}

TEST(RunnerFieldsTest, UintRefusesOtherTypesAndNegatives) {
  json f = Parse(R"({"neg": -1, "real": 1.5, "text": "7", "null": null, "flag": true})");
  for (const char* key : {"neg", "real", "text", "null", "flag"}) {
    absl::StatusOr<uint64_t> v = RunnerUint(f, key, /*required=*/false);
    ASSERT_FALSE(v.ok()) << key;
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_THAT(v.status().message(), HasSubstr("is not a non-negative integer")) << key;
  }
}

TEST(RunnerFieldsTest, UintAbsentIsZeroOnlyWhenOptional) {
  json f = Parse("{}");
  EXPECT_EQ(*RunnerUint(f, "id", /*required=*/false), 0u);
  absl::StatusOr<uint64_t> v = RunnerUint(f, "id");
  ASSERT_FALSE(v.ok());
  EXPECT_THAT(v.status().message(), HasSubstr("missing field 'id'"));
}

TEST(RunnerFieldsTest, StringReadsUpToItsCap) {
  json f = Parse(R"({"name": "abcd"})");
  EXPECT_EQ(*RunnerString(f, "name", 4), "abcd");
  absl::StatusOr<std::string> v = RunnerString(f, "name", 3);
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(v.status().message(), HasSubstr("field 'name' is too long"));
}

TEST(RunnerFieldsTest, StringRefusesOtherTypes) {
  json f = Parse(R"({"n": 1, "o": {}, "a": []})");
  for (const char* key : {"n", "o", "a"}) {
    absl::StatusOr<std::string> v = RunnerString(f, key, 64, /*required=*/false);
    ASSERT_FALSE(v.ok()) << key;
    EXPECT_THAT(v.status().message(), HasSubstr("is not a string")) << key;
  }
}

TEST(RunnerFieldsTest, StringAbsentOrNullIsEmptyOnlyWhenOptional) {
  json f = Parse(R"({"null": null})");
  EXPECT_EQ(*RunnerString(f, "null", 8, /*required=*/false), "");
  EXPECT_EQ(*RunnerString(f, "absent", 8, /*required=*/false), "");
  for (const char* key : {"null", "absent"}) {
    absl::StatusOr<std::string> v = RunnerString(f, key, 8);
    ASSERT_FALSE(v.ok()) << key;
    EXPECT_THAT(v.status().message(), HasSubstr("missing field")) << key;
  }
}

}  // namespace
}  // namespace sandboxd
