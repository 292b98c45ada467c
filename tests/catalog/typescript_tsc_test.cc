// The generated declarations are TypeScript: TypeScript's own compiler (tsc --noEmit
// --strict, from deploy/node, which scripts/setup.sh installs) checks them for the
// `everything` server, representative and hostile schemas, with and without JSDoc, and
// checks code that calls the tools against them (a missing required argument is an error).
// A binary of its own, so catalog_unit_tests needs no Node.js.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "base/process.h"
#include "catalog/typescript.h"
#include "gtest/gtest.h"
#include "typescript_samples.h"

namespace codemode {
namespace {

using nlohmann::json;

// Tools whose schemas use every construct the generator knows.
CatalogServer RepresentativeServer() {
  CatalogServer server{"repr", "mcp_repr", "Representative schemas", {}};
  auto add = [&server](const char* name, const char* input, json output = nullptr) {
    server.tools.push_back(
        {name, SanitizeIdentifier(name), name, json::parse(input), std::move(output)});
  };
  add("nested",
      R"({"type": "object", "required": ["user"], "properties": {"user": {"type": "object",
      "description": "Who", "required": ["name"], "properties": {"name": {"type": "string"},
      "tags": {"type": "array", "items": {"type": ["string", "null"]}},
      "point": {"type": "array", "items": [{"type": "number"}, {"type": "number"}]},
      "extra": {"type": "object", "additionalProperties": {"type": "integer"}}}}}})");
  add("refs",
      R"({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}, "list": {"$ref": "#/$defs/List"}},
      "$defs": {"A": {"enum": ["x", "y", 3, null, true]},
                "List": {"type": "object", "properties": {"next": {"$ref": "#/$defs/List"}}}}})",
      json::parse(R"({"anyOf": [{"type": "object", "properties": {"ok": {"const": true}}},
                                {"allOf": [{"type": "object", "properties": {"a": {"type": "string"}}},
                                           {"type": "object", "properties": {"b": {"type": "string", "nullable": true}},
                                            "additionalProperties": {"type": "boolean"}}]}]})"));
  add("mixed",
      R"({"type": "object", "properties": {"id": {"type": "integer"}}, "additionalProperties": {"type": "string"}})");
  return server;
}

CatalogServer HostileServer() {
  const std::string evil = "x */ declare const pwned: 1; /*\u2028y\r\n\xff\xc3 \u202e z *";
  CatalogServer server{"hostile", "mcp_hostile", evil, {}};
  json names = {{"type", "object"}, {"properties", json::object()}, {"required", "not an array"}};
  for (const std::string& key : {std::string("*/"), std::string("new"), std::string("a\u2028b"),
                                 std::string("\xff"), std::string(""), std::string("`${x}`")}) {
    names["properties"][key] = {{"type", "string"}, {"description", evil}, {"enum", {evil, key}}};
  }
  json values = json::array();
  for (int i = 0; i < 100000; ++i) values.push_back(i);
  server.tools.push_back(
      {"names", "names", evil, names, {{"type", "object"}, {"properties", "str"}}});
  server.tools.push_back(
      {"deep", "deep", evil, DeeplyNestedSchema(10000), DeeplyNestedSchema(10000)});
  server.tools.push_back({"enum", "enum", evil, {{"enum", values}}, {{"type", {"array", 5}}}});
  server.tools.push_back(
      {"new", "new", "", {{"anyOf", "x"}, {"items", 3}}, {{"$ref", "#/nowhere"}}});
  server.tools.push_back({"constructor", "constructor", "", {{"$ref", "#"}}, nullptr});
  return server;
}

constexpr char kUsage[] = R"ts(
async function use(): Promise<void> {
  const weather = await mcp_everything.get_structured_content({ location: "Chicago" });
  const degrees: number = weather.temperature;
  await mcp_everything.echo({ message: "hi " + degrees });
  await mcp_everything.get_env();
  const [sum, echo] = await Promise.all([mcp_everything.get_sum({ a: 1, b: 2 }),
                                         mcp_everything.echo({ message: "x" })]);
  // @ts-expect-error: message is required
  await mcp_everything.echo({});
  // @ts-expect-error: "Paris" is not one of the locations
  await mcp_everything.get_structured_content({ location: "Paris" });
  void sum, echo;
}
void use;
)ts";

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) != 0;) {
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    if (n < 0 && errno != EINTR) break;
  }
  return out;
}

std::string TempDir() {
  std::string dir =
      (std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + std::string("/tsc_test_XXXXXX");
  return mkdtemp(dir.data()) ? dir : "";
}

TEST(TypeScriptCompilerTest, DeclarationsCompileAndTypeTheCalls) {
  const char* tsc = std::getenv("TYPESCRIPT_TSC") ? std::getenv("TYPESCRIPT_TSC") : TYPESCRIPT_TSC;
  ASSERT_EQ(access(tsc, R_OK), 0) << tsc << " is missing: scripts/setup.sh installs TypeScript "
                                  << "into deploy/node (or set TYPESCRIPT_TSC)";
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  std::vector<CatalogServer> servers;  // moved in: copies of the deep schemas would recurse
  servers.push_back(EverythingServer());
  servers.push_back(RepresentativeServer());
  servers.push_back(HostileServer());
  std::vector<std::string> files;
  for (bool jsdoc : {true, false}) {
    TypeScriptOptions o;
    o.jsdoc = jsdoc;
    for (const CatalogServer& server : servers) {
      TypeScriptDeclaration d = DeclareServerTypeScript(server, o);
      EXPECT_TRUE(d.complete) << server.name;
      files.push_back(dir + "/" + server.name + (jsdoc ? "_jsdoc" : "_compact") + ".ts");
      std::ofstream(files.back()) << d.text << (server.name == "everything" ? kUsage : "")
                                  << "export {};\n";
    }
  }
  SpawnOptions spawn;
  spawn.argv = {NODE_EXECUTABLE, tsc,      "--noEmit", "--strict",
                "--target",      "es2022", "--lib",    "es2022"};
  spawn.argv.insert(spawn.argv.end(), files.begin(), files.end());
  spawn.env = {"PATH=/usr/bin:/bin", "HOME=" + dir};
  spawn.stderr_mode = SpawnOptions::Stdio::kInherit;  // tsc reports on stdout
  absl::StatusOr<Child> child = Spawn(spawn);
  ASSERT_TRUE(child.ok()) << child.status();
  std::string out = ReadAll(child->stdout_fd.get());
  int status = 0;
  WaitPid(child->pid, &status);
  EXPECT_EQ(DecodeWaitStatus(status), 0) << out << "\n(the files are kept in " << dir << ")";
  if (!HasFailure()) std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace codemode
