// run_javascript through RunCodeTool, over the fakes: listed with its TypeScript
// description, run in sandboxd sessions of runtime "javascript", one main sandbox per
// language for each MCP session, and a sandbox of one language (by handle or by session
// name) refused to the other's tool before anything reaches it; a tool not offered is
// unknown.
#include "adapter/run_code.h"

#include "adapter/run_descriptions.h"
#include "bridge_fakes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;
using ::testing::HasSubstr;
using testing::FakeSandboxes;
using testing::FakeUpstreams;
using testing::Server;

class RunJavaScriptTest : public ::testing::Test {
 protected:
  RunJavaScriptTest() { upstreams_.SetServers({Server("github", {"search"})}); }

  absl::StatusOr<json> Call(RunCodeTool& tool, const std::string& name, const json& args,
                            const std::string& mcp = "mcp-1") {
    ToolCallContext ctx;
    if (!mcp.empty()) ctx.mcp_session = mcp;
    ctx.credential = "token 0";
    ctx.protocol_version = "2025-11-25";
    ctx.cancel = std::make_shared<codemode::CancelToken>();
    ctx.progress = [](double, std::optional<double>, const std::string&) {};
    return tool.CallTool(name, args, ctx);
  }
  json Run(const std::string& name, const json& args, const std::string& mcp = "mcp-1") {
    absl::StatusOr<json> r = Call(tool_, name, args, mcp);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : json();
  }
  static std::string Text(const json& r) { return r["content"][0]["text"].get<std::string>(); }
  static std::string Handle(const json& r) { return r["structuredContent"]["sandbox"].get<std::string>(); }

  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
  RunCodeTool tool_{&sandboxes_, &upstreams_, RunCodeOptions{}};
};

TEST_F(RunJavaScriptTest, IsListedWithItsTypeScriptDescription) {
  json tools = tool_.ListTools("");
  ASSERT_EQ(tools.size(), 2u);
  const json& js = tools[1];
  EXPECT_EQ(js["name"], "run_javascript");
  EXPECT_EQ(js["title"], "Run JavaScript");
  EXPECT_EQ(js["description"], DescribeRunJavaScript(upstreams_.Snapshot(), 8192));
  EXPECT_THAT(js["description"].get<std::string>(), HasSubstr("mcp_github"));
  EXPECT_THAT(js["description"].get<std::string>(), HasSubstr("search("));
  EXPECT_THAT(js["inputSchema"]["properties"]["code"]["description"].get<std::string>(),
              HasSubstr("JavaScript"));
  EXPECT_EQ(js["inputSchema"]["properties"].size(), tools[0]["inputSchema"]["properties"].size())
      << "the same arguments as run_python";
  EXPECT_EQ(js["outputSchema"], tools[0]["outputSchema"]) << "the same structured result";
}

TEST_F(RunJavaScriptTest, RunsInAJavaScriptSessionOfItsOwnBesidePythons) {
  EXPECT_EQ(Text(Run("run_javascript", {{"code", "let a = 1"}})), "s1: let a = 1\n");
  EXPECT_EQ(Text(Run("run_python", {{"code", "a = 1"}})), "s2: a = 1\n");
  EXPECT_EQ(Text(Run("run_javascript", {{"code", "a"}})), "s1: a\n");
  ASSERT_EQ(sandboxes_.creations().size(), 2u) << "one main sandbox per language";
  EXPECT_EQ(sandboxes_.runtimes()["s1"], "javascript");
  EXPECT_EQ(sandboxes_.runtimes()["s2"], "python");
  EXPECT_EQ(sandboxes_.creations()[0].label, "default-javascript");
  EXPECT_EQ(sandboxes_.creations()[1].label, "default");
  const std::vector<FakeSandboxes::Execution> runs = sandboxes_.executions();
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[2].session_id, "s1") << "the JavaScript namespace is kept for the next call";
  // Each execution says its language, which sandboxd checks against the session's.
  EXPECT_EQ(runs[0].runtime, "javascript");
  EXPECT_EQ(runs[1].runtime, "python");
  EXPECT_EQ(runs[2].runtime, "javascript");
}

TEST_F(RunJavaScriptTest, AHandleRunsOnlyWithItsOwnLanguage) {
  const std::string py = Handle(Run("run_python", {{"code", "x = 1"}}));
  const std::string js = Handle(Run("run_javascript", {{"code", "let x = 1"}}));
  const size_t before = sandboxes_.executions().size();
  json r = Run("run_javascript", {{"code", "x"}, {"sandbox", py}}, "mcp-2");
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("names a python sandbox: pass it to run_python"));
  r = Run("run_python", {{"code", "x"}, {"sandbox", js}}, "mcp-2");
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("names a javascript sandbox: pass it to run_javascript"));
  EXPECT_EQ(sandboxes_.executions().size(), before) << "nothing ran";
  EXPECT_EQ(sandboxes_.creations().size(), 2u) << "and nothing was created";
  r = Run("run_javascript", {{"code", "x"}, {"sandbox", js}}, "mcp-2");
  EXPECT_EQ(r["isError"], false) << r;
  EXPECT_EQ(sandboxes_.executions().back().session_id, "s2");
}

TEST_F(RunJavaScriptTest, ASessionNameBelongsToOneLanguage) {
  Run("run_python", {{"code", "1"}, {"session", "work"}});
  json r = Run("run_javascript", {{"code", "1"}, {"session", "work"}});
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("the session 'work' of this client runs python, not javascript"));
  EXPECT_EQ(sandboxes_.executions().size(), 1u);
}

// A run_javascript call with session "default" as the first call would take
// run_python's main sandbox, and every plain run_python of that MCP session would then
// fail: each language's main sandbox names are refused to the other.
TEST_F(RunJavaScriptTest, TheMainSandboxNamesOfTheOtherLanguageAreRefused) {
  absl::StatusOr<json> r = Call(tool_, "run_javascript", {{"code", "1"}, {"session", "default"}});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("run_python's main sandbox"));
  r = Call(tool_, "run_python", {{"code", "1"}, {"session", "default-javascript"}});
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("run_javascript's main sandbox"));
  EXPECT_TRUE(sandboxes_.creations().empty()) << "nothing was created";
  EXPECT_EQ(Text(Run("run_python", {{"code", "a = 1"}})), "s1: a = 1\n") << "the plain run still works";
  EXPECT_EQ(Text(Run("run_javascript", {{"code", "1"}, {"session", "default-javascript"}})), "s2: 1\n")
      << "a tool may name its own main sandbox";
}

TEST_F(RunJavaScriptTest, AJavaScriptSandboxesResourceHandleIsJavaScript) {
  // Without an MCP session (protocol 2026-07-28) a run gets a sandbox of its own, whose
  // handle, and the handles resources/list mints for it, keep its language.
  json r = Run("run_javascript", {{"code", "1"}}, "");
  ASSERT_EQ(sandboxes_.runtimes()["s1"], "javascript");
  r = Run("run_python", {{"code", "1"}, {"sandbox", Handle(r)}}, "");
  EXPECT_THAT(Text(r), HasSubstr("names a javascript sandbox"));
}

TEST_F(RunJavaScriptTest, AToolNotOfferedIsUnknown) {
  RunCodeOptions only_js;
  only_js.languages = {RunLanguage::kJavaScript};
  RunCodeTool js(&sandboxes_, &upstreams_, only_js);
  json tools = js.ListTools("");
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0]["name"], "run_javascript");
  EXPECT_TRUE(absl::IsInvalidArgument(Call(js, "run_python", {{"code", "1"}}).status()));
  EXPECT_TRUE(Call(js, "run_javascript", {{"code", "1"}}).ok());
  RunCodeOptions only_python;
  only_python.languages = {RunLanguage::kPython};
  RunCodeTool py(&sandboxes_, &upstreams_, only_python);
  ASSERT_EQ(py.ListTools("").size(), 1u);
  EXPECT_TRUE(absl::IsInvalidArgument(Call(py, "run_javascript", {{"code", "1"}}).status()));
}

}  // namespace
}  // namespace gateway
