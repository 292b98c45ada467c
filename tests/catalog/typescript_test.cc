// Unit tests of typescript.h: TypeScript from the JSON Schemas real servers send (the npm
// `everything` server's tools, nested objects, arrays, enums, $refs, unions) and from
// hostile ones (deep nesting, comment and line-terminator injection, odd property names,
// huge enums, fields of the wrong type, invalid UTF-8), and the size bound.
#include "catalog/typescript.h"

#include <algorithm>
#include <string>

#include "base/untrusted_json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "typescript_samples.h"

namespace codemode {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Ts(const json& schema, const TypeScriptOptions& options = {}) {
  return SchemaToTypeScript(schema, schema, options);
}

TypeScriptOptions Compact() {
  TypeScriptOptions o;
  o.jsdoc = false;
  return o;
}

// ---- representative schemas ---------------------------------------------------------------

TEST(SchemaToTypeScriptTest, Scalars) {
  EXPECT_EQ(Ts({{"type", "string"}}), "string");
  EXPECT_EQ(Ts({{"type", "integer"}}), "number");
  EXPECT_EQ(Ts({{"type", "number"}}), "number");
  EXPECT_EQ(Ts({{"type", "boolean"}}), "boolean");
  EXPECT_EQ(Ts({{"type", "null"}}), "null");
  EXPECT_EQ(Ts(json::object()), "unknown");
  EXPECT_EQ(Ts(true), "unknown");
  EXPECT_EQ(Ts(false), "never");
}

TEST(SchemaToTypeScriptTest, TypeArraysAndNullableAreUnions) {
  EXPECT_EQ(Ts({{"type", {"string", "null"}}}), "string | null");
  EXPECT_EQ(Ts({{"type", {"integer", "number"}}}), "number") << "deduplicated";
  EXPECT_EQ(Ts({{"type", "string"}, {"nullable", true}}), "string | null");
  EXPECT_EQ(Ts({{"type", {"array", "null"}}, {"items", {{"type", "string"}}}}), "string[] | null");
}

TEST(SchemaToTypeScriptTest, ObjectsWithRequiredAndOptionalProperties) {
  json s = {{"type", "object"},
            {"properties", {{"query", {{"type", "string"}}}, {"limit", {{"type", "integer"}}}}},
            {"required", {"query"}}};
  EXPECT_EQ(Ts(s), "{ limit?: number; query: string }");
  EXPECT_EQ(Ts({{"type", "object"}}), "Record<string, unknown>");
  EXPECT_EQ(Ts({{"type", "object"}, {"additionalProperties", {{"type", "number"}}}}),
            "Record<string, number>");
  EXPECT_EQ(Ts({{"type", "object"}, {"additionalProperties", false}}), "Record<string, never>");
  json mixed = {{"type", "object"},
                {"properties", {{"id", {{"type", "integer"}}}}},
                {"additionalProperties", {{"type", "string"}}}};
  EXPECT_EQ(Ts(mixed), "{ id?: number } & Record<string, string>")
      << "an intersection, so the properties need not match the index type";
}

TEST(SchemaToTypeScriptTest, NestedObjectsGetJSDocOnTheirProperties) {
  json s = json::parse(R"({"type": "object", "required": ["user"], "properties": {
    "user": {"type": "object", "description": "Who", "required": ["name"], "properties": {
      "name": {"type": "string", "description": "Full name"},
      "age": {"type": "integer", "default": 30}}}}})");
  EXPECT_EQ(Ts(s),
            "{\n"
            "  /** Who */\n"
            "  user: {\n"
            "    /** @default 30 */\n"
            "    age?: number;\n"
            "    /** Full name */\n"
            "    name: string;\n"
            "  };\n"
            "}");
  EXPECT_EQ(Ts(s, Compact()), "{ user: { age?: number; name: string } }");
}

TEST(SchemaToTypeScriptTest, Arrays) {
  EXPECT_EQ(Ts({{"type", "array"}, {"items", {{"type", "string"}}}}), "string[]");
  EXPECT_EQ(Ts({{"type", "array"}}), "unknown[]");
  EXPECT_EQ(Ts({{"type", "array"}, {"items", {{"type", {"string", "number"}}}}}),
            "(string | number)[]");
  EXPECT_EQ(Ts({{"type", "array"}, {"items", {{{"type", "string"}}, {{"type", "integer"}}}}}),
            "[string, number]")
      << "draft-07 tuple";
  EXPECT_EQ(Ts({{"type", "array"}, {"prefixItems", {{{"type", "boolean"}}}}}), "[boolean]");
  EXPECT_EQ(
      Ts({{"type", "array"}, {"items", {{"type", "array"}, {"items", {{"type", "number"}}}}}}),
      "number[][]");
}

TEST(SchemaToTypeScriptTest, EnumsAndConstsAreLiteralUnions) {
  EXPECT_EQ(Ts({{"type", "string"}, {"enum", {"error", "success", "debug"}}}),
            R"("error" | "success" | "debug")");
  EXPECT_EQ(Ts({{"enum", {1, 2.5, true, nullptr, "x"}}}), R"(1 | 2.5 | true | null | "x")");
  EXPECT_EQ(Ts({{"const", "fixed"}}), R"("fixed")");
  EXPECT_EQ(Ts({{"enum", json::array()}}), "never");
  EXPECT_EQ(Ts({{"enum", {"say \"hi\"\\"}}}), R"("say \"hi\"\\")") << "JSON-escaped";
}

TEST(SchemaToTypeScriptTest, AnyOfOneOfAllOf) {
  EXPECT_EQ(Ts({{"anyOf", {{{"type", "string"}}, {{"type", "number"}}}}}), "string | number");
  EXPECT_EQ(Ts({{"oneOf", {{{"type", "string"}}, {{"type", "null"}}}}}), "string | null");
  EXPECT_EQ(Ts({{"anyOf", {{{"type", "string"}}, json::object()}}}), "unknown")
      << "unknown absorbs a union";
  json all = {{"allOf",
               {{{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}},
                {{"anyOf",
                  {{{"type", "object"}, {"properties", {{"b", {{"type", "number"}}}}}},
                   {{"type", "null"}}}}}}}};
  EXPECT_EQ(Ts(all), "{ a?: string } & ({ b?: number } | null)");
}

TEST(SchemaToTypeScriptTest, LocalRefsAreInlined) {
  json s = json::parse(R"({"type": "object", "required": ["p"],
    "properties": {"p": {"$ref": "#/$defs/Point"}, "q": {"$ref": "#/definitions/Tag"},
                   "r": {"$ref": "#/$defs/Missing"}, "s": {"$ref": "https://example.com/x"}},
    "$defs": {"Point": {"type": "object", "required": ["x", "y"],
                        "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}},
    "definitions": {"Tag": {"enum": ["a", "b"]}}})");
  EXPECT_EQ(Ts(s), R"({ p: { x: number; y: number }; q?: "a" | "b"; r?: unknown; s?: unknown })");
}

TEST(SchemaToTypeScriptTest, CyclicRefsEndInUnknown) {
  json s = json::parse(R"({"$ref": "#/$defs/Node", "$defs": {"Node": {"type": "object",
    "properties": {"value": {"type": "string"}, "next": {"$ref": "#/$defs/Node"}}}}})");
  EXPECT_EQ(Ts(s), "{ next?: unknown; value?: string }");
  json self = json::parse(R"({"type": "object", "properties": {"child": {"$ref": "#"}}})");
  EXPECT_EQ(Ts(self), "{ child?: { child?: unknown } }");
}

TEST(SchemaToTypeScriptTest, PropertyNamesThatAreNotIdentifiersAreQuoted) {
  json s = {{"type", "object"},
            {"properties",
             {{"x-api-key", {{"type", "string"}}},
              {"2fa", {{"type", "string"}}},
              {"delete", {{"type", "string"}}},
              {"$ok_1", {{"type", "string"}}},
              {"", {{"type", "string"}}},
              {"a\"b\\c\nd\u2028", {{"type", "string"}}}}}};
  std::string t = Ts(s);
  EXPECT_THAT(t, HasSubstr(R"("x-api-key"?: string)"));
  EXPECT_THAT(t, HasSubstr(R"("2fa"?: string)"));
  EXPECT_THAT(t, HasSubstr(R"("delete"?: string)"));
  EXPECT_THAT(t, HasSubstr(R"($ok_1?: string)"));
  EXPECT_THAT(t, HasSubstr(R"(""?: string)"));
  EXPECT_THAT(t, HasSubstr(R"("a\"b\\c\u000ad\u2028"?: string)"));
}

TEST(DeclareServerTypeScriptTest, EverythingServer) {
  TypeScriptDeclaration d = DeclareServerTypeScript(EverythingServer());
  EXPECT_TRUE(d.complete);
  EXPECT_THAT(d.text, HasSubstr("/** # Everything Server – Server Instructions */\n"
                                "declare const mcp_everything: {\n"));
  EXPECT_THAT(d.text, HasSubstr("  /** Echoes back the input string */\n"
                                "  echo(args: { message: string }): Promise<unknown>;\n"));
  EXPECT_THAT(d.text, HasSubstr("   * Returns the sum of two numbers\n"
                                "   * MCP name: \"get-sum\"\n"
                                "   */\n"
                                "  get_sum(args: { a: number; b: number }): Promise<unknown>;\n"));
  EXPECT_THAT(d.text, HasSubstr("get_structured_content(args: { location: \"New York\" | "
                                "\"Chicago\" | \"Los Angeles\" }): Promise<{ conditions: string; "
                                "humidity: number; temperature: number }>;"))
      << "the output schema types the result";
  EXPECT_THAT(d.text, HasSubstr("  get_env(args?: Record<string, unknown>): Promise<unknown>;"))
      << "no required argument: args may be left out";
  EXPECT_THAT(d.text, HasSubstr("    /** @default 3 */\n    count?: number;\n"));
  EXPECT_TRUE(IsValidUtf8(d.text));
  EXPECT_EQ(d.text.substr(d.text.size() - 3), "};\n");
}

TEST(DeclareServerTypeScriptTest, WithoutJSDocEveryToolIsOneLine) {
  TypeScriptDeclaration d = DeclareServerTypeScript(EverythingServer(), Compact());
  EXPECT_THAT(d.text, Not(HasSubstr("/*")));
  EXPECT_THAT(d.text, HasSubstr("declare const mcp_everything: {\n"
                                "  echo(args: { message: string }): Promise<unknown>;\n"));
  EXPECT_THAT(d.text,
              HasSubstr("  get_resource_links(args?: { count?: number }): Promise<unknown>;\n"));
}

TEST(DeclareServerTypeScriptTest, MethodAndServerNamesAreAlwaysValid) {
  CatalogServer server{"x", "not an identifier", "", {}};
  server.tools.push_back({"new", "new", "", {{"type", "object"}}, nullptr});
  server.tools.push_back({"a b", "a b", "", {{"type", "object"}}, nullptr});
  TypeScriptDeclaration d = DeclareServerTypeScript(server, Compact());
  EXPECT_THAT(d.text, HasSubstr("declare const mcp_not_an_identifier: {"));
  EXPECT_THAT(d.text, HasSubstr(R"(  "new"(args?: Record<string, unknown>))"))
      << "`new(` would be a construct signature";
  EXPECT_THAT(d.text, HasSubstr(R"(  "a b"(args?)"));
}

// A `then` method would make the server object a thenable (`await mcp_h` calls the tool):
// the runner names it then_ (or then_2, ... past the py_names taken), and so does the
// declaration, with the MCP name in its JSDoc. `constructor` and `__proto__` stay.
TEST(DeclareServerTypeScriptTest, ThenIsRenamedLikeTheJavaScriptRunnerDoes) {
  CatalogServer server{"h", "mcp_h", "", {}};
  for (const char* name : {"then", "constructor", "__proto__"}) {
    server.tools.push_back({name, name, "", {{"type", "object"}}, nullptr});
  }
  TypeScriptDeclaration d = DeclareServerTypeScript(server);
  EXPECT_THAT(d.text, HasSubstr("  /** MCP name: \"then\" */\n"
                                "  then_(args?: Record<string, unknown>)"));
  EXPECT_THAT(d.text, Not(HasSubstr(" then(")));
  EXPECT_THAT(d.text, HasSubstr("\n  constructor(args?"));
  EXPECT_THAT(d.text, HasSubstr("\n  __proto__(args?"));
  EXPECT_EQ(JsMethodName(server, server.tools[1]), "constructor");

  server.tools.push_back({"then-", "then_", "", {{"type", "object"}}, nullptr});
  server.tools.push_back({"then 2", "then_2", "", {{"type", "object"}}, nullptr});
  EXPECT_EQ(JsMethodName(server, server.tools[0]), "then_3");
  EXPECT_THAT(DeclareServerTypeScript(server, Compact()).text, HasSubstr("\n  then_3(args?"));
}

// ---- hostile schemas ------------------------------------------------------------------------

// Every "*/" in `text` is one the generator wrote (it ends its line), and no line
// terminator other than '\n' (nor any other control character) is in it.
void ExpectCommentsClosedOnlyByUs(const std::string& text) {
  for (size_t at = text.find("*/"); at != std::string::npos; at = text.find("*/", at + 1)) {
    EXPECT_TRUE(at + 2 == text.size() || text[at + 2] == '\n')
        << "a comment ends mid-line at " << at << " in:\n"
        << text;
  }
  for (const char* bad : {"\r", "\t", "\x0b", "\x0c", "\xc2\x85", "\xe2\x80\xa8", "\xe2\x80\xa9",
                          "\xe2\x80\xae", "\x1b"}) {
    EXPECT_EQ(text.find(bad), std::string::npos) << "control or line terminator in:\n" << text;
  }
  EXPECT_TRUE(IsValidUtf8(text)) << text;
}

TEST(TypeScriptHostileTest, NestingTenThousandDeepIsCutAtTheDepthBound) {
  json deep = DeeplyNestedSchema(10000);
  std::string t = Ts(deep);
  EXPECT_EQ(std::count(t.begin(), t.end(), '{'), 8) << t;
  EXPECT_THAT(t, HasSubstr("{ a: unknown }"));
  CatalogServer server{"deep", "mcp_deep", "", {}};
  server.tools.push_back({"t", "t", "", std::move(deep), DeeplyNestedSchema(10000)});
  TypeScriptDeclaration d = DeclareServerTypeScript(server);
  EXPECT_TRUE(d.complete);
  EXPECT_LT(d.text.size(), 1000u);
}

// Tag characters (U+E0000-E007F) spell text a model reads and a person does not see;
// zero-width characters and the soft hyphen hide in words.
TEST(TypeScriptHostileTest, InvisibleCharactersAreSpacesInCommentsAndEscapedInStrings) {
  const std::string hidden = "\U000E0049\U000E0047\u200b\u2060\u00ad";  // tag I, tag G, ...
  EXPECT_EQ(JsCommentLine("a" + hidden + "b", 100), "a b");
  EXPECT_EQ(JsStringLiteral("a\U000E0041"), "\"a\\udb40\\udc41\"") << "a surrogate pair, as JavaScript reads it";
  EXPECT_EQ(JsStringLiteral("a\u200bb"), "\"a\\u200bb\"");
}

TEST(TypeScriptHostileTest, DescriptionsCannotEndTheCommentOrBreakTheLine) {
  const std::string evil =
      "Nice tool */ declare const pwned: 1; /* and\u2028more\u2029lines\r\nNEL\u0085here"
      "\x1b[31m red \u202e reversed \t tab */";
  CatalogServer server{"s", "mcp_s", evil, {}};
  json input = {
      {"type", "object"},
      {"properties",
       {{"q", {{"type", "string"}, {"description", evil}, {"default", evil.substr(0, 40)}}},
        {"*/evil", {{"type", "string"}, {"enum", {evil}}}}}}};
  server.tools.push_back({"t", "t", evil, input, nullptr});
  server.tools.push_back({"*/ x", "x", evil, input, nullptr});
  for (bool jsdoc : {true, false}) {
    TypeScriptOptions o;
    o.jsdoc = jsdoc;
    TypeScriptDeclaration d = DeclareServerTypeScript(server, o);
    ExpectCommentsClosedOnlyByUs(d.text);
    EXPECT_THAT(d.text, Not(HasSubstr("\ndeclare const pwned"))) << d.text;
  }
  std::string d = DeclareServerTypeScript(server).text;
  EXPECT_THAT(d, HasSubstr("/** Nice tool *\\/ declare const pwned: 1; /* and more lines NEL here"))
      << "a one-line comment: line terminators are spaces";
  EXPECT_THAT(
      d, HasSubstr("   * Nice tool *\\/ declare const pwned: 1; /* and\n   * more\n   * lines\n"))
      << "a block: each line starts with ' * '";
  EXPECT_THAT(d,
              HasSubstr(R"("*\/evil"?: "Nice tool *\/ declare const pwned: 1; /* and\u2028more)"))
      << "string literals escape line terminators, and \"*/\" too";
  EXPECT_THAT(d, HasSubstr(R"(MCP name: "*\/ x")"));
}

TEST(TypeScriptHostileTest, HugeEnumsBecomeTheirBaseType) {
  json values = json::array();
  for (int i = 0; i < 100000; ++i) values.push_back("value_" + std::to_string(i));
  EXPECT_EQ(Ts({{"enum", values}}), "string");
  values.push_back(7);
  values.push_back(nullptr);
  EXPECT_EQ(Ts({{"enum", values}}), "string | number | null");
  json members = json::array();
  for (int i = 0; i < 100000; ++i) members.push_back({{"const", i}});
  EXPECT_EQ(Ts({{"anyOf", members}}), "unknown");
  EXPECT_EQ(Ts({{"enum", {std::string(100000, 'x')}}}), "string") << "no 100 KB literal";
}

TEST(TypeScriptHostileTest, FieldsOfTheWrongTypeAreIgnored) {
  EXPECT_EQ(Ts({{"type", "object"}, {"properties", "not an object"}}), "Record<string, unknown>");
  EXPECT_EQ(
      Ts({{"type", "object"}, {"properties", {{"a", {{"type", "string"}}}}}, {"required", "a"}}),
      "{ a?: string }");
  EXPECT_EQ(Ts({{"type", "object"}, {"properties", {{"a", 5}}}, {"required", {5, "a", nullptr}}}),
            "{ a: unknown }");
  EXPECT_EQ(Ts({{"type", 7}}), "unknown");
  EXPECT_EQ(Ts({{"type", {7, "string"}}}), "unknown");
  EXPECT_EQ(Ts({{"type", "array"}, {"items", 5}}), "unknown[]");
  EXPECT_EQ(Ts({{"enum", {{"k", "v"}}}}), "unknown") << "an enum that is not an array";
  EXPECT_EQ(Ts({{"anyOf", "x"}, {"type", "string"}}), "string");
  EXPECT_EQ(Ts({{"$ref", 5}, {"type", "string"}, {"nullable", "yes"}}), "string");
  EXPECT_EQ(Ts({{"$ref", "#/$defs/a/b/c"}, {"$defs", 3}}), "unknown");
  EXPECT_EQ(Ts({{"$ref", "#/properties/x/~0~1"}}), "unknown");
  EXPECT_EQ(Ts({{"type", "object"}, {"additionalProperties", "x"}}), "Record<string, unknown>");
  EXPECT_EQ(Ts(json::array({1, 2})), "unknown");
  EXPECT_EQ(Ts({{"type", "object"},
                {"properties", {{"a", {{"description", 5}, {"default", {{"x", 1}}}}}}}}),
            "{ a?: unknown }");
  CatalogServer server{"s", "mcp_s", "", {}};
  server.tools.push_back({"t", "t", "", json::array({1}), "not a schema"});
  EXPECT_THAT(DeclareServerTypeScript(server).text,
              HasSubstr("  t(args?: unknown): Promise<unknown>;\n"));
}

TEST(TypeScriptHostileTest, InvalidUtf8BecomesReplacementCharacters) {
  const std::string bad = "caf\xc3 \xff\xfe \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf end";
  json input = {
      {"type", "object"},
      {"properties", {{bad, {{"type", "string"}, {"description", bad}, {"enum", {bad}}}}}}};
  CatalogServer server{"s", "mcp_s", bad, {{"t", "t", bad, input, nullptr}}};
  for (bool jsdoc : {true, false}) {
    TypeScriptOptions o;
    o.jsdoc = jsdoc;
    std::string d = DeclareServerTypeScript(server, o).text;
    EXPECT_TRUE(IsValidUtf8(d)) << d;
    EXPECT_THAT(d, HasSubstr("caf\xef\xbf\xbd"));
  }
  EXPECT_TRUE(IsValidUtf8(JsStringLiteral(bad)));
}

TEST(TypeScriptHostileTest, OverlongPropertyNamesAreLeftOutButTheTypeStaysOpen) {
  json s = {{"type", "object"},
            {"properties",
             {{std::string(5000, 'k'), {{"type", "string"}}}, {"ok", {{"type", "string"}}}}}};
  EXPECT_EQ(Ts(s), "{ ok?: string; [key: string]: unknown }");
}

TEST(TypeScriptHostileTest, RefsThatFanOutStopAtTheWorkBound) {
  // Each level refers to the next ten times: 10^8 expansions without the bound.
  json defs = json::object();
  for (int level = 0; level < 9; ++level) {
    json properties = json::object();
    for (int k = 0; k < 10; ++k) {
      properties["p" + std::to_string(k)] = {{"$ref", "#/$defs/L" + std::to_string(level + 1)}};
    }
    defs["L" + std::to_string(level)] = {{"type", "object"}, {"properties", properties}};
  }
  json schema = {{"$ref", "#/$defs/L0"}, {"$defs", defs}};
  TypeScriptOptions o;
  o.max_bytes = 8192;
  std::string t = SchemaToTypeScript(schema, schema, o);
  EXPECT_LT(t.size(), 4 * o.max_bytes);
  EXPECT_THAT(t, HasSubstr("[key: string]: unknown")) << "cut short, and says the type is open";
  CatalogServer server{"s", "mcp_s", "", {}};
  for (int i = 0; i < 100; ++i)
    server.tools.push_back({"t" + std::to_string(i), "t" + std::to_string(i), "", schema, schema});
  TypeScriptDeclaration d = DeclareServerTypeScript(server, o);
  EXPECT_FALSE(d.complete);
  EXPECT_LE(d.text.size(), o.max_bytes);
}

TEST(TypeScriptHostileTest, TheWholeDeclarationStaysWithinMaxBytes) {
  CatalogServer server = EverythingServer();
  TypeScriptDeclaration full = DeclareServerTypeScript(server);
  for (size_t max :
       {size_t{0}, size_t{50}, size_t{200}, size_t{700}, full.text.size() - 1, full.text.size()}) {
    TypeScriptOptions o;
    o.max_bytes = max;
    TypeScriptDeclaration d = DeclareServerTypeScript(server, o);
    EXPECT_LE(d.text.size(), max);
    EXPECT_EQ(d.complete, max >= full.text.size()) << max;
    if (!d.text.empty()) EXPECT_EQ(d.text.substr(d.text.size() - 3), "};\n");
    if (!d.text.empty() && !d.complete) EXPECT_THAT(d.text, HasSubstr("more tools not shown"));
  }
}

}  // namespace
}  // namespace codemode
