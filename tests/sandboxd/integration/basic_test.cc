// Integration: sessions, executions and tool calls against real Podman.
#include <thread>

#include "gtest/gtest.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace sandboxd::testing {
namespace {

using sandbox::v1::Finished;

class BasicTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new SandboxdProcess({"--pool_size=2"});
    ASSERT_TRUE(daemon_->Start());
  }
  static void TearDownTestSuite() {
    EXPECT_EQ(daemon_->Stop(), 0) << daemon_->Log();
    delete daemon_;
  }
  void SetUp() override { stub_ = daemon_->Stub(); }
  static SandboxdProcess* daemon_;
  std::unique_ptr<sandbox::v1::SandboxService::Stub> stub_;
};
SandboxdProcess* BasicTest::daemon_ = nullptr;

TEST_F(BasicTest, NamespacePersistsAndTrailingExpressionIsTheResult) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), "x = 40\nprint('hello')");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.stdout(), "hello\n");
  f = RunCode(*stub_, s.id(), "x + 2");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "42");
}

TEST_F(BasicTest, ExceptionsComeBackWithTypeMessageAndUserTraceback) {
  auto s = CreateSession(*stub_);
  Finished f = RunCode(*stub_, s.id(), "def f():\n    return 1/0\nf()");
  EXPECT_EQ(f.status(), Finished::ERROR);
  EXPECT_EQ(f.error().type(), "ZeroDivisionError");
  EXPECT_NE(f.error().traceback().find("return 1/0"), std::string::npos) << f.error().traceback();
  EXPECT_EQ(f.error().traceback().find("sandbox_runner"), std::string::npos) << f.error().traceback();
}

TEST_F(BasicTest, ToolCallRoundTripOverTheStream) {
  sandbox::v1::CreateSessionRequest req;
  auto* server = req.mutable_catalog()->add_servers();
  server->set_name("demo");
  auto* tool = server->add_tools();
  tool->set_name("echo");
  tool->set_description("Echoes back the input");
  tool->set_input_schema_json(
      R"({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]})");
  auto s = CreateSession(*stub_, req);
  ExecuteOutcome out = Execute(*stub_, Start(s.id(), "r = await mcp_demo.echo(message='hi')\nprint(r)\nr"),
                               [](const sandbox::v1::ToolCall& c) {
                                 auto args = nlohmann::json::parse(c.arguments_json());
                                 return TextResult(c.call_id(), "echo: " + args["message"].get<std::string>());
                               });
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_TRUE(out.got_finished);
  EXPECT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
  EXPECT_EQ(out.finished.result_repr(), "'echo: hi'");
  EXPECT_EQ(out.finished.tool_calls(), 1u);
  EXPECT_EQ(out.StreamedStdout(), "echo: hi\n");
}

}  // namespace
}  // namespace sandboxd::testing
