// LoadUpstreamConfig: files and directories, overrides, ${VAR} expansion, type inference,
// disabled and self-launching entries, and errors that name the file and entry.
#include <sys/stat.h>

#include <cstdlib>

#include "upstream/config.h"
#include "upstream/process.h"
#include "gtest/gtest.h"
#include "upstream_test_support.h"

namespace gateway {
namespace {

using testing::TempDir;

TEST(UpstreamConfigTest, ParsesAllThreeTypes) {
  TempDir dir;
  std::string file = dir.Write("servers.json", R"({
    "globalShortcut": "ignored",
    "mcpServers": {
      "files": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"],
                "env": {"DEBUG": "1"}, "cwd": "/tmp", "autoApprove": ["x"]},
      "remote": {"type": "http", "url": "https://example.com/mcp",
                 "headers": {"Authorization": "Bearer abc"}},
      "streamable": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp"},
      "legacy": {"type": "sse", "url": "http://127.0.0.1:8080/sse"},
      "explicit_stdio": {"type": "stdio", "command": "uvx", "args": []}
    }})");
  auto configs = LoadUpstreamConfig({file}, {}, "");
  ASSERT_TRUE(configs.ok()) << configs.status();
  ASSERT_EQ(configs->size(), 5u);
  // File order is kept.
  const auto& files = (*configs)[0];
  EXPECT_EQ(files.name, "files");
  EXPECT_EQ(files.type, UpstreamConfig::Type::kStdio);
  EXPECT_EQ(files.command, "npx");
  EXPECT_EQ(files.args, (std::vector<std::string>{"-y", "server-filesystem", "/tmp"}));
  EXPECT_EQ(files.env.at("DEBUG"), "1");
  EXPECT_EQ(files.cwd, "/tmp");
  const auto& remote = (*configs)[1];
  EXPECT_EQ(remote.type, UpstreamConfig::Type::kStreamableHttp);
  EXPECT_EQ(remote.url, "https://example.com/mcp");
  EXPECT_EQ(remote.headers.at("Authorization"), "Bearer abc");
  EXPECT_EQ((*configs)[2].type, UpstreamConfig::Type::kStreamableHttp);
  EXPECT_EQ((*configs)[3].type, UpstreamConfig::Type::kSse);
  EXPECT_EQ((*configs)[4].type, UpstreamConfig::Type::kStdio);
}

TEST(UpstreamConfigTest, InfersTypeFromCommandOrUrl) {
  TempDir dir;
  std::string file = dir.Write("a.json", R"({"mcpServers": {
      "s": {"command": "server"}, "h": {"url": "http://localhost:9/mcp"}}})");
  auto configs = LoadUpstreamConfig({file}, {}, "");
  ASSERT_TRUE(configs.ok()) << configs.status();
  ASSERT_EQ(configs->size(), 2u);
  EXPECT_EQ((*configs)[0].type, UpstreamConfig::Type::kStdio);
  EXPECT_EQ((*configs)[1].type, UpstreamConfig::Type::kStreamableHttp);
}

TEST(UpstreamConfigTest, ExpandsEnvironmentVariables) {
  setenv("UPSTREAM_TEST_TOKEN", "s3cret", 1);
  setenv("UPSTREAM_TEST_EMPTY", "", 1);
  unsetenv("UPSTREAM_TEST_UNSET");
  TempDir dir;
  std::string file = dir.Write("a.json", R"({"mcpServers": {
      "s": {"command": "${UPSTREAM_TEST_UNSET:-node}",
            "args": ["--token=${UPSTREAM_TEST_TOKEN}", "${UPSTREAM_TEST_EMPTY:-fallback}", "$HOME", "${"],
            "env": {"T": "x${UPSTREAM_TEST_TOKEN}y"}, "cwd": "${UPSTREAM_TEST_UNSET:-/tmp}"},
      "h": {"url": "http://localhost:${UPSTREAM_TEST_UNSET:-8080}/mcp",
            "headers": {"Authorization": "Bearer ${UPSTREAM_TEST_TOKEN}"}}}})");
  auto configs = LoadUpstreamConfig({file}, {}, "");
  ASSERT_TRUE(configs.ok()) << configs.status();
  const auto& s = (*configs)[0];
  EXPECT_EQ(s.command, "node");
  EXPECT_EQ(s.args, (std::vector<std::string>{"--token=s3cret", "fallback", "$HOME", "${"}));
  EXPECT_EQ(s.env.at("T"), "xs3crety");
  EXPECT_EQ(s.cwd, "/tmp");
  const auto& h = (*configs)[1];
  EXPECT_EQ(h.url, "http://localhost:8080/mcp");
  EXPECT_EQ(h.headers.at("Authorization"), "Bearer s3cret");
}

TEST(UpstreamConfigTest, UnsetVariableWithoutDefaultIsAnError) {
  unsetenv("UPSTREAM_TEST_UNSET");
  TempDir dir;
  std::string file = dir.Write("a.json", R"({"mcpServers": {
      "h": {"url": "http://x/mcp", "headers": {"A": "${UPSTREAM_TEST_UNSET}"}}}})");
  auto configs = LoadUpstreamConfig({file}, {}, "");
  ASSERT_FALSE(configs.ok());
  EXPECT_EQ(configs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(configs.status().message().find("UPSTREAM_TEST_UNSET"), absl::string_view::npos);
  EXPECT_NE(configs.status().message().find("\"h\""), absl::string_view::npos);
}

TEST(UpstreamConfigTest, DirectoryFilesInNameOrderLaterOverride) {
  TempDir dir;
  std::string base = dir.Write("base.json", R"({"mcpServers": {
      "a": {"command": "from-file"}, "b": {"command": "b"}}})");
  std::string conf_d = dir.File("conf.d");
  mkdir(conf_d.c_str(), 0755);
  dir.Write("conf.d/20-second.json", R"({"mcpServers": {"a": {"command": "from-20"}}})");
  dir.Write("conf.d/10-first.json", R"({"a": {"command": "from-10"}, "c": {"command": "c"}})");
  dir.Write("conf.d/30-disable.json", R"({"mcpServers": {"b": {"command": "b", "disabled": true}}})");
  dir.Write("conf.d/notes.txt", "not json");
  dir.Write("conf.d/.hidden.json", "not json either");
  auto configs = LoadUpstreamConfig({base}, {conf_d, dir.File("missing.d")}, "");
  ASSERT_TRUE(configs.ok()) << configs.status();
  ASSERT_EQ(configs->size(), 2u);
  EXPECT_EQ((*configs)[0].name, "a");
  EXPECT_EQ((*configs)[0].command, "from-20");  // 10-first, then 20-second
  EXPECT_EQ((*configs)[1].name, "c");           // b was disabled by 30-disable
}

TEST(UpstreamConfigTest, DisabledEntriesAreDroppedWithoutExpansion) {
  unsetenv("UPSTREAM_TEST_UNSET");
  TempDir dir;
  std::string file = dir.Write("a.json", R"({"mcpServers": {
      "off": {"command": "${UPSTREAM_TEST_UNSET}", "disabled": true},
      "on": {"command": "x", "disabled": false}}})");
  auto configs = LoadUpstreamConfig({file}, {}, "");
  ASSERT_TRUE(configs.ok()) << configs.status();
  ASSERT_EQ(configs->size(), 1u);
  EXPECT_EQ((*configs)[0].name, "on");
}

TEST(UpstreamConfigTest, SkipsAnEntryThatLaunchesTheGatewayItself) {
  TempDir dir;
  std::string bin = dir.File("bin");
  mkdir(bin.c_str(), 0755);
  std::string self = dir.Write("bin/mcp-gateway-self", "#!/bin/sh\n");
  chmod(self.c_str(), 0755);
  std::string link = bin + "/gw-link";
  ASSERT_EQ(symlink(self.c_str(), link.c_str()), 0);
  std::string file = dir.Write("a.json", R"({"mcpServers": {
      "by_path": {"command": ")" + self + R"("},
      "by_symlink": {"command": ")" + link + R"("},
      "by_name": {"command": "mcp-gateway-self", "env": {"PATH": ")" + bin + R"("}},
      "other": {"command": "python3"}}})");
  auto configs = LoadUpstreamConfig({file}, {}, self);
  ASSERT_TRUE(configs.ok()) << configs.status();
  ASSERT_EQ(configs->size(), 1u);
  EXPECT_EQ((*configs)[0].name, "other");
}

TEST(UpstreamConfigTest, MissingFileIsAnError) {
  TempDir dir;
  auto configs = LoadUpstreamConfig({dir.File("nope.json")}, {}, "");
  ASSERT_FALSE(configs.ok());
  EXPECT_NE(configs.status().message().find("nope.json"), absl::string_view::npos);
}

// Each bad entry gives INVALID_ARGUMENT naming the file and the entry.
TEST(UpstreamConfigTest, ErrorsNameFileAndEntry) {
  struct Case {
    const char* json;
    const char* expect;  // part of the message
  };
  const Case cases[] = {
      {R"({"mcpServers": {"bad": {"command": "x", "args": "not-an-array"}}})", "args"},
      {R"({"mcpServers": {"bad": {"command": "x", "args": [1, 2]}}})", "args"},
      {R"({"mcpServers": {"bad": {"command": "x", "env": {"A": 1}}}})", "env.A"},
      {R"({"mcpServers": {"bad": {"command": "x", "env": ["A=1"]}}})", "env"},
      {R"({"mcpServers": {"bad": {"url": "http://x", "headers": {"A": true}}}})", "headers.A"},
      {R"({"mcpServers": {"bad": {"type": "carrier-pigeon", "command": "x"}}})", "unknown type"},
      {R"({"mcpServers": {"bad": {"type": "sse"}}})", "url"},
      {R"({"mcpServers": {"bad": {"url": "ftp://x"}}})", "url"},
      {R"({"mcpServers": {"bad": {"type": "stdio"}}})", "command"},
      {R"({"mcpServers": {"bad": {}}})", "command"},
      {R"({"mcpServers": {"bad": "string"}})", "object"},
      {R"({"mcpServers": {"bad": {"command": 7}}})", "command"},
      {R"({"mcpServers": {"bad": {"command": "x", "disabled": "yes"}}})", "disabled"},
  };
  TempDir dir;
  for (const auto& c : cases) {
    std::string file = dir.Write("bad.json", c.json);
    auto configs = LoadUpstreamConfig({file}, {}, "");
    ASSERT_FALSE(configs.ok()) << c.json;
    EXPECT_EQ(configs.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    std::string message(configs.status().message());
    EXPECT_NE(message.find("bad.json"), std::string::npos) << message;
    EXPECT_NE(message.find("\"bad\""), std::string::npos) << message;
    EXPECT_NE(message.find(c.expect), std::string::npos) << message;
  }
}

TEST(UpstreamConfigTest, FileLevelErrorsNameTheFile) {
  TempDir dir;
  for (const char* text : {"{not json", "[1, 2]", R"({"mcpServers": []})"}) {
    std::string file = dir.Write("broken.json", text);
    auto configs = LoadUpstreamConfig({file}, {}, "");
    ASSERT_FALSE(configs.ok()) << text;
    EXPECT_EQ(configs.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(configs.status().message().find("broken.json"), absl::string_view::npos);
  }
}

TEST(UpstreamConfigTest, FileWithoutMcpServersHasNoServers) {
  TempDir dir;
  std::string file = dir.Write("claude.json", R"({"theme": "dark"})");
  auto configs = LoadUpstreamConfig({file}, {}, "");
  ASSERT_TRUE(configs.ok()) << configs.status();
  EXPECT_TRUE(configs->empty());
}

TEST(UpstreamProcessTest, ChildEnvironmentIsMinimalPlusConfig) {
  setenv("GATEWAY_SECRET", "do-not-leak", 1);
  auto env = ChildEnvironment({{"FOO", "bar"}, {"HOME", "/override"}});
  bool has_path = false, has_foo = false, home_overridden = false;
  for (const auto& kv : env) {
    EXPECT_NE(kv.rfind("GATEWAY_SECRET=", 0), 0u) << kv;
    has_path |= kv.rfind("PATH=", 0) == 0;
    has_foo |= kv == "FOO=bar";
    home_overridden |= kv == "HOME=/override";
  }
  EXPECT_TRUE(has_path);
  EXPECT_TRUE(has_foo);
  EXPECT_TRUE(home_overridden);
}

}  // namespace
}  // namespace gateway
