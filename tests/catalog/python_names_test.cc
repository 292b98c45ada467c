#include "catalog/python_names.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "catalog/catalog.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace codemode {
namespace {

using nlohmann::json;
using Names = std::vector<std::pair<std::string, std::string>>;  // property, py_name

Names NamesOf(const PythonParameters& p) {
  Names out;
  for (const CatalogParam& param : p.params) out.emplace_back(param.name, param.py_name);
  return out;
}

// Names for these properties (keys in the sorted order sandboxd sends them in; "" stands
// for None): keywords, Unicode letters, digits and marks, dunder names, `then`, collisions,
// required names the schema does not describe, and names Python would read as another
// (NFKC: the ligature, fraktur and fullwidth letters, e + U+0301) that only ** reaches.
TEST(PythonParameterNamesTest, HostilePropertiesAsTheRunnerNamedThem) {
  json schema = json::parse(R"({"type": "object", "properties": {
      "": {}, "1x": {}, "__init__": {}, "a b": {}, "a.b": {}, "a_b": {}, "a\u00b7b": {},
      "caf\u00e9": {}, "caf\u00e9-x": {}, "class": {}, "class_": {}, "from": {}, "kwargs": {},
      "max-results": {}, "self": {}, "then": {}, "x\u0301-y": {}, "\u00b2x": {},
      "\u0663d": {}, "\ufb01le": {}, "\ud835\udd18x": {}, "\uff46": {}, "e\u0301": {}},
    "required": ["from", "zzz", "zzz", 5, "1x"]})");
  PythonParameters p = PythonParameterNames(schema);
  EXPECT_EQ(NamesOf(p),
            (Names{{"1x", "_1x"},
                   {"from", "from_"},
                   {"zzz", "zzz"},
                   {"", "_"},
                   {"__init__", "__init__"},
                   {"a b", ""},
                   {"a.b", ""},
                   {"a_b", "a_b"},
                   {"a\u00b7b", "a\u00b7b"},
                   {"caf\u00e9", "caf\u00e9"},
                   {"caf\u00e9-x", "caf\u00e9_x"},
                   {"class", ""},
                   {"class_", "class_"},
                   {"e\u0301", "e_"},
                   {"kwargs", "kwargs"},
                   {"max-results", "max_results"},
                   {"self", "self"},
                   {"then", "then"},
                   {"x\u0301-y", "x__y"},
                   {"\u00b2x", ""},
                   {"\u0663d", "_\u0663d"},
                   {"\ufb01le", ""},
                   {"\uff46", ""},
                   {"\U0001D518x", ""}}));
  EXPECT_EQ(p.kwargs, "extra");
}

TEST(PythonParameterNamesTest, KwargsAvoidsEveryParameterName) {
  json schema = {{"properties", {{"kwargs", {}}, {"extra", {}}, {"a b", {}}, {"a_b", {}}}}};
  EXPECT_EQ(PythonParameterNames(schema).kwargs, "_kwargs");
  schema["properties"]["_kwargs"] = json::object();
  schema["properties"]["__kwargs"] = json::object();
  EXPECT_EQ(PythonParameterNames(schema).kwargs, "kwargs_2");
  schema["properties"].erase("a b");
  EXPECT_EQ(PythonParameterNames(schema).kwargs, "") << "every property has a name";
}

TEST(PythonParameterNamesTest, SchemasOfTheWrongShapeHaveNoParameters) {
  for (const char* text : {R"([1])", R"({"properties": [1]})", R"({"required": "x"})",
                           R"({"properties": 5, "required": [5, null]})"}) {
    PythonParameters p = PythonParameterNames(json::parse(text));
    EXPECT_TRUE(p.params.empty()) << text;
    EXPECT_EQ(p.kwargs, "") << text;
  }
}

TEST(IsPythonIdentifierTest, FollowsStrIsIdentifier) {
  for (const char* yes : {"a", "_", "__init__", "caf\u00e9", "\u0394x", "a\u0301", "then"}) {
    EXPECT_TRUE(IsPythonIdentifier(yes)) << yes;
  }
  for (const char* no : {"", "1a", "a-b", "a b", "\u00b2", "\u0301a", "\xff", "a\xc3"}) {
    EXPECT_FALSE(IsPythonIdentifier(no)) << no;
  }
  EXPECT_TRUE(IsPythonKeyword("class"));
  EXPECT_FALSE(IsPythonKeyword("match")) << "a soft keyword is a valid name";
}

// ---- the names set_catalog carries --------------------------------------------------

sandbox::v1::Tool* AddTool(sandbox::v1::Server* s, const std::string& name,
                           const std::string& input_schema) {
  auto* t = s->add_tools();
  t->set_name(name);
  t->set_input_schema_json(input_schema);
  return t;
}

TEST(CatalogNamesTest, ThenIsNamedPastThePyNamesTaken) {
  sandbox::v1::Catalog p;
  auto* s = p.add_servers();
  s->set_name("h");
  AddTool(s, "then", "");
  AddTool(s, "then-", "");
  AddTool(s, "constructor", "");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  const json tools = c->ToRunnerJson()["servers"][0]["tools"];
  EXPECT_EQ(tools[0]["py_name"], "then");
  EXPECT_EQ(tools[0]["js_name"], "then_2");
  EXPECT_EQ(tools[1]["js_name"], "then_");
  EXPECT_EQ(tools[2]["js_name"], "constructor");
}

TEST(CatalogNamesTest, RunnerJsonCarriesThePythonParameters) {
  sandbox::v1::Catalog p;
  auto* s = p.add_servers();
  s->set_name("s");
  AddTool(s, "t", R"({"type": "object", "required": ["q"],
                      "properties": {"from": {}, "a b": {}, "a_b": {}, "q": {}}})");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  const json tool = c->ToRunnerJson()["servers"][0]["tools"][0];
  EXPECT_EQ(tool["py_params"],
            json({{"q", "q"}, {"from", "from_"}, {"a b", nullptr}, {"a_b", "a_b"}}));
  EXPECT_EQ(tool["py_kwargs"], "kwargs");
}

// Property names of control characters cost the same again in py_params: a catalog within
// kMaxCatalogBytes whose set_catalog would pass the runner's 16 MiB is refused.
TEST(CatalogNamesTest, NamesThatWouldTakeTheRunnerFramePastItsLimitAreRefused) {
  // The control characters JSON has no short escape (\b, \t, \n, \f, \r) for: six bytes
  // each in the schema and again in py_params.
  std::string controls;
  for (char c = 1; c < 0x20; ++c) {
    if (c != '\b' && c != '\t' && c != '\n' && c != '\f' && c != '\r') controls.push_back(c);
  }
  std::string schema = R"({"properties": {)";
  for (size_t i = 0; i < 270000; ++i) {
    absl::StrAppend(&schema, i ? "," : "", "\"");
    for (size_t n = i, k = 0; k < 4; ++k, n /= controls.size()) {
      const int c = controls[n % controls.size()];
      absl::StrAppend(&schema, "\\u00", c >> 4, std::string(1, "0123456789abcdef"[c & 15]));
    }
    absl::StrAppend(&schema, "\":{}");
  }
  schema += "}}";
  sandbox::v1::Catalog p;
  auto* s = p.add_servers();
  s->set_name("s");
  AddTool(s, "t", schema);
  ASSERT_LE(p.ByteSizeLong(), kMaxCatalogBytes);
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), testing::HasSubstr("bytes of JSON"));
}

}  // namespace
}  // namespace codemode
