#include "catalog/catalog.h"

#include <string>

#include "base/untrusted_json.h"
#include "absl/strings/ascii.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace codemode {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

// ---- SanitizeIdentifier -----------------------------------------------------------

TEST(SanitizeIdentifierTest, KeepsValidIdentifiers) {
  EXPECT_EQ(SanitizeIdentifier("echo"), "echo");
  EXPECT_EQ(SanitizeIdentifier("create_issue"), "create_issue");
  EXPECT_EQ(SanitizeIdentifier("_private"), "_private");
  EXPECT_EQ(SanitizeIdentifier("CamelCase2"), "CamelCase2");
}

TEST(SanitizeIdentifierTest, ReplacesPunctuationAndSpaces) {
  EXPECT_EQ(SanitizeIdentifier("get-weather"), "get_weather");
  EXPECT_EQ(SanitizeIdentifier("fs.read"), "fs_read");
  EXPECT_EQ(SanitizeIdentifier("list all files"), "list_all_files");
  EXPECT_EQ(SanitizeIdentifier("a/b:c@d"), "a_b_c_d");
  EXPECT_EQ(SanitizeIdentifier("---"), "___");
}

TEST(SanitizeIdentifierTest, LeadingDigitGetsPrefix) {
  EXPECT_EQ(SanitizeIdentifier("2fa"), "_2fa");
  EXPECT_EQ(SanitizeIdentifier("123"), "_123");
  EXPECT_EQ(SanitizeIdentifier("a1"), "a1");
}

TEST(SanitizeIdentifierTest, KeywordsGetSuffix) {
  EXPECT_EQ(SanitizeIdentifier("class"), "class_");
  EXPECT_EQ(SanitizeIdentifier("from"), "from_");
  EXPECT_EQ(SanitizeIdentifier("None"), "None_");
  EXPECT_EQ(SanitizeIdentifier("True"), "True_");
  EXPECT_EQ(SanitizeIdentifier("import"), "import_");
  EXPECT_EQ(SanitizeIdentifier("await"), "await_");
  EXPECT_EQ(SanitizeIdentifier("lambda"), "lambda_");
  // Case matters: "none" and "Class" are not keywords.
  EXPECT_EQ(SanitizeIdentifier("none"), "none");
  EXPECT_EQ(SanitizeIdentifier("Class"), "Class");
  // Already suffixed names are left alone.
  EXPECT_EQ(SanitizeIdentifier("class_"), "class_");
}

TEST(SanitizeIdentifierTest, EmptyBecomesUnderscore) { EXPECT_EQ(SanitizeIdentifier(""), "_"); }

TEST(SanitizeIdentifierTest, NonAsciiBytesBecomeUnderscores) {
  // "héllo": é is two UTF-8 bytes, each replaced.
  EXPECT_EQ(SanitizeIdentifier("h\xc3\xa9llo"), "h__llo");
  std::string out = SanitizeIdentifier("\xe6\x97\xa5\xe6\x9c\xac");  // 日本
  EXPECT_EQ(out, "______");
  for (char c : SanitizeIdentifier("\xff\xfe weird\x01name\x7f")) {
    EXPECT_TRUE(absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_') << int(c);
  }
}

TEST(SanitizeIdentifierTest, EmbeddedNulIsReplaced) {
  EXPECT_EQ(SanitizeIdentifier(std::string_view("a\0b", 3)), "a_b");
}

// ---- Catalog::FromProto -----------------------------------------------------------

sandbox::v1::Tool* AddTool(sandbox::v1::Server* s, const std::string& name,
                           const std::string& input_schema = "",
                           const std::string& output_schema = "") {
  auto* t = s->add_tools();
  t->set_name(name);
  t->set_description("does " + name);
  t->set_input_schema_json(input_schema);
  t->set_output_schema_json(output_schema);
  return t;
}

sandbox::v1::Server* AddServer(sandbox::v1::Catalog* c, const std::string& name) {
  auto* s = c->add_servers();
  s->set_name(name);
  s->set_description("server " + name);
  return s;
}

TEST(CatalogTest, EmptyCatalogIsValid) {
  absl::StatusOr<Catalog> c = Catalog::FromProto(sandbox::v1::Catalog());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->servers().empty());
  EXPECT_EQ(c->tool_count(), 0u);
  EXPECT_FALSE(c->Contains("a", "b"));
  EXPECT_EQ(c->ToRunnerJson(), json({{"servers", json::array()}}));
}

TEST(CatalogTest, ServerPyNamesArePrefixedAndSanitised) {
  sandbox::v1::Catalog p;
  AddServer(&p, "github");
  AddServer(&p, "my-server.v2");
  AddServer(&p, "2fa");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->servers().size(), 3u);
  EXPECT_EQ(c->servers()[0].py_name, "mcp_github");
  EXPECT_EQ(c->servers()[1].py_name, "mcp_my_server_v2");
  EXPECT_EQ(c->servers()[2].py_name, "mcp_2fa");
  EXPECT_EQ(c->servers()[0].name, "github");
  EXPECT_EQ(c->servers()[0].description, "server github");
}

TEST(CatalogTest, ToolPyNamesAreSanitised) {
  sandbox::v1::Catalog p;
  auto* s = AddServer(&p, "srv");
  AddTool(s, "get-weather");
  AddTool(s, "class");
  AddTool(s, "1st");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& tools = c->servers()[0].tools;
  ASSERT_EQ(tools.size(), 3u);
  EXPECT_EQ(tools[0].py_name, "get_weather");
  EXPECT_EQ(tools[1].py_name, "class_");
  EXPECT_EQ(tools[2].py_name, "_1st");
  EXPECT_EQ(c->tool_count(), 3u);
}

// The runner's server object has these attributes itself: a tool of that name would fail
// to install (and take the whole catalog with it) or replace the object's own state.
TEST(CatalogTest, ToolsNamedLikeTheServerObjectsOwnAttributesGetASuffix) {
  sandbox::v1::Catalog p;
  auto* s = AddServer(&p, "srv");
  for (const char* name : {"__class__", "__dict__", "__weakref__", "__doc__", "_MCPServer__spec",
                           "__class___", "__x", "____", "_MCPServer__spec_", "__init__-x"}) {
    AddTool(s, name);
  }
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  std::vector<std::string> names;
  for (const CatalogTool& t : c->servers()[0].tools) names.push_back(t.py_name);
  EXPECT_THAT(names, testing::ElementsAre("__class___", "__dict___", "__weakref___", "__doc___",
                                          "_MCPServer__spec_", "__class____2", "__x", "____",
                                          "_MCPServer__spec__2", "__init___x"));
  EXPECT_EQ(c->servers()[0].tools[0].js_name, "__class___");
}

TEST(CatalogTest, CollidingToolNamesGetNumberedSuffixes) {
  sandbox::v1::Catalog p;
  auto* s = AddServer(&p, "srv");
  AddTool(s, "a-b");
  AddTool(s, "a_b");
  AddTool(s, "a.b");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& tools = c->servers()[0].tools;
  ASSERT_EQ(tools.size(), 3u);
  EXPECT_EQ(tools[0].py_name, "a_b");
  EXPECT_EQ(tools[1].py_name, "a_b_2");
  EXPECT_EQ(tools[2].py_name, "a_b_3");
  // Both original names stay reachable.
  EXPECT_TRUE(c->Contains("srv", "a-b"));
  EXPECT_TRUE(c->Contains("srv", "a_b"));
  EXPECT_TRUE(c->Contains("srv", "a.b"));
}

TEST(CatalogTest, SuffixedNameDoesNotCollideWithARealName) {
  sandbox::v1::Catalog p;
  auto* s = AddServer(&p, "srv");
  AddTool(s, "a_b_2");
  AddTool(s, "a-b");
  AddTool(s, "a_b");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& tools = c->servers()[0].tools;
  EXPECT_EQ(tools[0].py_name, "a_b_2");
  EXPECT_EQ(tools[1].py_name, "a_b");
  EXPECT_EQ(tools[2].py_name, "a_b_3");
}

TEST(CatalogTest, SameToolNameOnDifferentServersIsFine) {
  sandbox::v1::Catalog p;
  AddTool(AddServer(&p, "one"), "echo");
  AddTool(AddServer(&p, "two"), "echo");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->servers()[0].tools[0].py_name, "echo");
  EXPECT_EQ(c->servers()[1].tools[0].py_name, "echo");
  EXPECT_EQ(c->tool_count(), 2u);
}

TEST(CatalogTest, CollidingServerNamesGetNumberedSuffixes) {
  sandbox::v1::Catalog p;
  AddTool(AddServer(&p, "x-y"), "t1");
  AddTool(AddServer(&p, "x.y"), "t2");
  AddTool(AddServer(&p, "x_y"), "t3");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->servers().size(), 3u);
  EXPECT_EQ(c->servers()[0].py_name, "mcp_x_y");
  EXPECT_EQ(c->servers()[1].py_name, "mcp_x_y_2");
  EXPECT_EQ(c->servers()[2].py_name, "mcp_x_y_3");
  EXPECT_TRUE(c->Contains("x-y", "t1"));
  EXPECT_TRUE(c->Contains("x.y", "t2"));
  EXPECT_TRUE(c->Contains("x_y", "t3"));
  EXPECT_FALSE(c->Contains("x-y", "t2"));
}

TEST(CatalogTest, EmptyServerNameRejected) {
  sandbox::v1::Catalog p;
  AddServer(&p, "");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("empty name"));
}

TEST(CatalogTest, DuplicateServerNameRejected) {
  sandbox::v1::Catalog p;
  AddServer(&p, "github");
  AddServer(&p, "github");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("duplicate"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("github"));
}

TEST(CatalogTest, EmptyToolNameRejected) {
  sandbox::v1::Catalog p;
  AddTool(AddServer(&p, "srv"), "");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("empty name"));
}

TEST(CatalogTest, DuplicateToolNameRejected) {
  sandbox::v1::Catalog p;
  auto* s = AddServer(&p, "srv");
  AddTool(s, "echo");
  AddTool(s, "echo");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("duplicate"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("srv.echo"));
}

TEST(CatalogTest, InputSchemaMustBeAnObject) {
  for (const char* bad : {"[]", "\"string\"", "42", "null", "true"}) {
    sandbox::v1::Catalog p;
    AddTool(AddServer(&p, "srv"), "t", bad);
    absl::StatusOr<Catalog> c = Catalog::FromProto(p);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("input_schema_json")) << bad;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("not a JSON object")) << bad;
  }
}

TEST(CatalogTest, InputSchemaInvalidJsonRejected) {
  for (const char* bad : {"{", "{\"type\": }", "not json", "{\"a\":1} trailing"}) {
    sandbox::v1::Catalog p;
    AddTool(AddServer(&p, "srv"), "t", bad);
    absl::StatusOr<Catalog> c = Catalog::FromProto(p);
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("input_schema_json")) << bad;
  }
}

std::string Nested(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  for (int i = 0; i < depth; ++i) s += "}";
  return s;
}

TEST(CatalogTest, InputSchemaTooDeepRejected) {
  sandbox::v1::Catalog p;
  AddTool(AddServer(&p, "srv"), "t", Nested(codemode::kMaxJsonDepth + 1));
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("nests deeper"));
}

TEST(CatalogTest, InputSchemaAtDepthLimitAccepted) {
  sandbox::v1::Catalog p;
  AddTool(AddServer(&p, "srv"), "t", Nested(codemode::kMaxJsonDepth));
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  EXPECT_TRUE(c.ok()) << c.status();
}

TEST(CatalogTest, HugeNestingDoesNotCrash) {
  sandbox::v1::Catalog p;
  AddTool(AddServer(&p, "srv"), "t", std::string(1 << 20, '['));
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CatalogTest, EmptyInputSchemaDefaultsToObject) {
  sandbox::v1::Catalog p;
  AddTool(AddServer(&p, "srv"), "t");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->servers()[0].tools[0].input_schema, json({{"type", "object"}}));
  EXPECT_TRUE(c->servers()[0].tools[0].output_schema.is_null());
}

TEST(CatalogTest, OutputSchemaValidated) {
  {
    sandbox::v1::Catalog p;
    AddTool(AddServer(&p, "srv"), "t", "", "[1]");
    absl::StatusOr<Catalog> c = Catalog::FromProto(p);
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("output_schema_json"));
  }
  {
    sandbox::v1::Catalog p;
    AddTool(AddServer(&p, "srv"), "t", "", "{\"type\":\"object\"}");
    absl::StatusOr<Catalog> c = Catalog::FromProto(p);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->servers()[0].tools[0].output_schema, json({{"type", "object"}}));
  }
}

TEST(CatalogTest, TooManyServersRejected) {
  sandbox::v1::Catalog p;
  for (size_t i = 0; i <= kMaxCatalogServers; ++i) AddServer(&p, "s" + std::to_string(i));
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("servers"));
}

TEST(CatalogTest, TooManyToolsRejected) {
  sandbox::v1::Catalog p;
  auto* s = AddServer(&p, "srv");
  for (size_t i = 0; i <= kMaxCatalogTools; ++i) {
    s->add_tools()->set_name("t" + std::to_string(i));
  }
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("tools"));
}

TEST(CatalogTest, TooLargeCatalogRejected) {
  sandbox::v1::Catalog p;
  AddTool(AddServer(&p, "srv"), "t")->set_description(std::string(kMaxCatalogBytes + 1, 'x'));
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("larger"));
}

TEST(CatalogTest, Contains) {
  sandbox::v1::Catalog p;
  auto* s = AddServer(&p, "github");
  AddTool(s, "create-issue");
  AddTool(s, "list");
  AddTool(AddServer(&p, "fs"), "read");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->Contains("github", "create-issue"));
  EXPECT_TRUE(c->Contains("github", "list"));
  EXPECT_TRUE(c->Contains("fs", "read"));
  // Catalog names only: not the Python names, not tools of another server.
  EXPECT_FALSE(c->Contains("github", "create_issue"));
  EXPECT_FALSE(c->Contains("mcp_github", "list"));
  EXPECT_FALSE(c->Contains("github", "read"));
  EXPECT_FALSE(c->Contains("fs", "list"));
  EXPECT_FALSE(c->Contains("", ""));
  EXPECT_FALSE(c->Contains("nope", "read"));
}

TEST(CatalogTest, ToRunnerJsonShape) {
  sandbox::v1::Catalog p;
  auto* s = AddServer(&p, "everything");
  AddTool(s, "echo",
          R"({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]})",
          R"({"type":"object"})");
  AddTool(s, "get-sum");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();
  json expected = {
      {"servers",
       {{{"name", "everything"},
         {"py_name", "mcp_everything"},
         {"description", "server everything"},
         {"tools",
          {{{"name", "echo"},
            {"py_name", "echo"},
            {"js_name", "echo"},
            {"py_params", {{"message", "message"}}},
            {"py_kwargs", nullptr},
            {"description", "does echo"},
            {"input_schema",
             {{"type", "object"},
              {"properties", {{"message", {{"type", "string"}}}}},
              {"required", {"message"}}}},
            {"output_schema", {{"type", "object"}}}},
           {{"name", "get-sum"},
            {"py_name", "get_sum"},
            {"js_name", "get_sum"},
            {"py_params", json::object()},
            {"py_kwargs", nullptr},
            {"description", "does get-sum"},
            {"input_schema", {{"type", "object"}}},
            {"output_schema", nullptr}}}}}}}};
  EXPECT_EQ(c->ToRunnerJson(), expected) << c->ToRunnerJson().dump(2);
}

TEST(CatalogTest, ToProtoRoundTrip) {
  sandbox::v1::Catalog p;
  auto* s = AddServer(&p, "a-b");
  AddTool(s, "x-y", R"({"type":"object","properties":{"n":{"type":"integer"}}})",
          R"({"type":"object"})");
  AddTool(s, "x_y");
  AddTool(AddServer(&p, "a_b"), "class");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok()) << c.status();

  sandbox::v1::Catalog back = c->ToProto();
  ASSERT_EQ(back.servers_size(), 2);
  EXPECT_EQ(back.servers(0).name(), "a-b");
  EXPECT_EQ(back.servers(0).description(), "server a-b");
  ASSERT_EQ(back.servers(0).tools_size(), 2);
  EXPECT_EQ(back.servers(0).tools(0).name(), "x-y");
  EXPECT_EQ(back.servers(0).tools(0).description(), "does x-y");
  EXPECT_EQ(json::parse(back.servers(0).tools(0).input_schema_json()),
            json::parse(p.servers(0).tools(0).input_schema_json()));
  EXPECT_EQ(json::parse(back.servers(0).tools(0).output_schema_json()), json({{"type", "object"}}));
  // Empty input schema comes back as its default; empty output schema stays empty.
  EXPECT_EQ(json::parse(back.servers(0).tools(1).input_schema_json()), json({{"type", "object"}}));
  EXPECT_EQ(back.servers(0).tools(1).output_schema_json(), "");

  absl::StatusOr<Catalog> again = Catalog::FromProto(back);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->ToRunnerJson(), c->ToRunnerJson());
  EXPECT_EQ(again->tool_count(), c->tool_count());
  EXPECT_EQ(again->ToProto().SerializeAsString(), back.SerializeAsString());
}

TEST(CatalogTest, CopiesAreIndependent) {
  sandbox::v1::Catalog p;
  AddTool(AddServer(&p, "srv"), "t");
  absl::StatusOr<Catalog> c = Catalog::FromProto(p);
  ASSERT_TRUE(c.ok());
  Catalog copy = *c;
  *c = Catalog();
  EXPECT_TRUE(copy.Contains("srv", "t"));
  EXPECT_FALSE(c->Contains("srv", "t"));
}

// A name longer than a runner's tool_call frame carries would make the session that calls
// it lost: such catalogs are refused, at exactly the bound.
TEST(CatalogTest, NamesLongerThanAToolCallCarriesAreRefused) {
  auto catalog = [](const std::string& server, const std::string& tool) {
    sandbox::v1::Catalog p;
    auto* s = p.add_servers();
    s->set_name(server);
    s->add_tools()->set_name(tool);
    return Catalog::FromProto(p);
  };
  EXPECT_TRUE(catalog(std::string(kMaxCatalogNameBytes, 's'), std::string(kMaxCatalogNameBytes, 't')).ok());
  absl::StatusOr<Catalog> c = catalog("s", std::string(kMaxCatalogNameBytes + 1, 't'));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("257 bytes"), std::string::npos) << c.status();
  EXPECT_FALSE(catalog(std::string(kMaxCatalogNameBytes + 1, 's'), "t").ok());
}

}  // namespace
}  // namespace codemode
