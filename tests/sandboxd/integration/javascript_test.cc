// Integration: JavaScript sessions (CreateSessionRequest.runtime "javascript") against real
// Podman, in both isolation modes: the Node.js runner in the sandbox image keeps its
// namespace, streams console output, calls tools over the Execute stream, is stopped in a
// synchronous loop without losing its session, and survives a daemon restart.
#include "gtest/gtest.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace sandboxd::testing {
namespace {

using sandbox::v1::Finished;

sandbox::v1::CreateSessionRequest JavaScript() {
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("javascript");
  return req;
}

class JavaScriptTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new SandboxdProcess({"--pool_size=1"});
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
SandboxdProcess* JavaScriptTest::daemon_ = nullptr;

TEST_F(JavaScriptTest, NamespacePersistsAndTrailingExpressionIsTheResult) {
  sandbox::v1::Session s = CreateSession(*stub_, JavaScript());
  EXPECT_EQ(s.runtime(), "javascript");
  Finished f = RunCode(*stub_, s.id(), "const x = 40;\nconsole.log('hello');\nconsole.error('warn')");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.stdout(), "hello\n");
  EXPECT_EQ(f.stderr(), "warn\n");
  f = RunCode(*stub_, s.id(), "const y = await Promise.resolve(2);\nx + y");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "42");
  // A notebook cell run again declares its const again.
  f = RunCode(*stub_, s.id(), "const x = 1; x");
  EXPECT_EQ(f.result_repr(), "1") << f.DebugString();
  sandbox::v1::Session got;
  ASSERT_TRUE(GetSession(*stub_, s.id(), &got).ok());
  EXPECT_EQ(got.runtime(), "javascript");
  EXPECT_EQ(got.executions(), 3u);
}

TEST_F(JavaScriptTest, ErrorsHaveTypeMessageAndOnlyTheUsersFrames) {
  sandbox::v1::Session s = CreateSession(*stub_, JavaScript());
  Finished f = RunCode(*stub_, s.id(), "function f() {\n  return null.x;\n}\nf()");
  EXPECT_EQ(f.status(), Finished::ERROR) << f.DebugString();
  EXPECT_EQ(f.error().type(), "TypeError");
  EXPECT_NE(f.error().traceback().find("at f"), std::string::npos) << f.error().traceback();
  EXPECT_EQ(f.error().traceback().find("sandbox_runner"), std::string::npos) << f.error().traceback();
  EXPECT_EQ(f.error().traceback().find("node:"), std::string::npos) << f.error().traceback();
  f = RunCode(*stub_, s.id(), "let = = 1");
  EXPECT_EQ(f.status(), Finished::ERROR);
  EXPECT_EQ(f.error().type(), "SyntaxError") << f.DebugString();
}

TEST_F(JavaScriptTest, ToolCallsRoundTripAndRunConcurrently) {
  sandbox::v1::CreateSessionRequest req = JavaScript();
  auto* server = req.mutable_catalog()->add_servers();
  server->set_name("demo");
  auto* tool = server->add_tools();
  tool->set_name("echo");
  tool->set_input_schema_json(
      R"({"type":"object","properties":{"message":{"type":"string"}},"required":["message"]})");
  sandbox::v1::Session s = CreateSession(*stub_, req);
  const std::string code =
      "const one = await mcp_demo.echo({message: 'hi'});\n"
      "console.log(one);\n"
      "const many = await Promise.all([...Array(20).keys()].map(i => "
      "callTool('demo', 'echo', {message: String(i)})));\n"
      "many.length + ' ' + many[19]";
  ExecuteOutcome out = Execute(*stub_, Start(s.id(), code), [](const sandbox::v1::ToolCall& c) {
    auto args = nlohmann::json::parse(c.arguments_json());
    return TextResult(c.call_id(), "echo: " + args["message"].get<std::string>());
  });
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_TRUE(out.got_finished);
  EXPECT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
  EXPECT_EQ(out.finished.result_repr(), "'20 echo: 19'");
  EXPECT_EQ(out.finished.tool_calls(), 21u);
  EXPECT_EQ(out.StreamedStdout(), "echo: hi\n");
  // A missing required argument is refused before any call goes out.
  out = Execute(*stub_, Start(s.id(), "await mcp_demo.echo({})"), [](const sandbox::v1::ToolCall& c) {
    ADD_FAILURE() << "the call went out: " << c.arguments_json();
    return TextResult(c.call_id(), "");
  });
  ASSERT_TRUE(out.got_finished);
  EXPECT_EQ(out.finished.status(), Finished::ERROR);
  EXPECT_EQ(out.finished.tool_calls(), 0u);
}

// A synchronous endless loop cannot be interrupted in place: the runner ends the worker
// that ran it and says so. The session lives on, with a fresh namespace.
TEST_F(JavaScriptTest, TimeoutStopsAnEndlessLoopAndTheSessionLivesOn) {
  sandbox::v1::Session s = CreateSession(*stub_, JavaScript());
  RunCode(*stub_, s.id(), "globalThis.kept = 'before'");
  Finished f = RunCode(*stub_, s.id(), "while (true) {}", /*timeout_ms=*/1000);
  EXPECT_EQ(f.status(), Finished::TIMEOUT) << f.DebugString();
  EXPECT_NE(f.stderr().find("namespace"), std::string::npos) << f.stderr();
  EXPECT_TRUE(f.namespace_reset());
  EXPECT_NE(f.error().message().find("namespace was reset"), std::string::npos) << f.error().message();
  f = RunCode(*stub_, s.id(), "typeof kept + ' ' + (1 + 1)");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_EQ(f.result_repr(), "'undefined 2'");
  // Awaiting something that never settles is interrupted in place: the namespace stays.
  RunCode(*stub_, s.id(), "globalThis.kept = 'after'");
  f = RunCode(*stub_, s.id(), "await new Promise(() => {})", /*timeout_ms=*/1000);
  EXPECT_EQ(f.status(), Finished::TIMEOUT) << f.DebugString();
  EXPECT_FALSE(f.namespace_reset());
  EXPECT_NE(f.error().message().find("variables are kept"), std::string::npos) << f.error().message();
  EXPECT_EQ(RunCode(*stub_, s.id(), "kept").result_repr(), "'after'");
}

TEST_F(JavaScriptTest, UnknownRuntimeIsInvalidAndPythonIsTheDefault) {
  sandbox::v1::CreateSessionRequest req;
  req.set_runtime("ruby");
  sandbox::v1::Session s;
  grpc::ClientContext ctx;
  grpc::Status st = stub_->CreateSession(&ctx, req, &s);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("javascript"), std::string::npos) << st.error_message();
  sandbox::v1::Session py = CreateSession(*stub_);
  EXPECT_EQ(py.runtime(), "python");
  EXPECT_EQ(RunCode(*stub_, py.id(), "import sys; sys.version_info[0]").result_repr(), "3");
}

// StartExecution.runtime and RunRequest.runtime: code the caller says is of another
// language than the session's is refused (FAILED_PRECONDITION naming both) before it runs;
// empty is not checked (older clients, grpcurl).
TEST_F(JavaScriptTest, CodeOfAnotherRuntimeIsRefusedBeforeItRuns) {
  sandbox::v1::Session js = CreateSession(*stub_, JavaScript());
  sandbox::v1::StartExecution start = Start(js.id(), "import os\nos.getpid()");
  start.set_runtime("python");
  ExecuteOutcome out = Execute(*stub_, start);
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(out.status.error_message().find("this code is python"), std::string::npos)
      << out.status.error_message();
  EXPECT_NE(out.status.error_message().find(js.id() + " runs javascript"), std::string::npos)
      << out.status.error_message();
  EXPECT_FALSE(out.got_finished);
  start = Start(js.id(), "'checked'");
  start.set_runtime("javascript");
  out = Execute(*stub_, start);
  ASSERT_TRUE(out.got_finished) << out.status.error_message();
  EXPECT_EQ(out.finished.result_repr(), "'checked'");

  sandbox::v1::Session py = CreateSession(*stub_);
  sandbox::v1::RunRequest run;
  run.set_session_id(py.id());
  run.set_code("globalThis.x = 1");
  run.set_runtime("javascript");
  grpc::ClientContext ctx;
  Finished f;
  grpc::Status st = stub_->Run(&ctx, run, &f);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << st.error_message();
  EXPECT_EQ(RunCode(*stub_, py.id(), "'unchecked'").result_repr(), "'unchecked'");
  sandbox::v1::Session got;
  ASSERT_TRUE(GetSession(*stub_, js.id(), &got).ok());
  EXPECT_EQ(got.executions(), 1u) << "only the matching execution ran";
}

TEST(JavaScriptRestartTest, SessionsAreReattachedWithTheirVariables) {
  SandboxdProcess d({"--pool_size=0"});
  ASSERT_TRUE(d.Start());
  auto stub = d.Stub();
  sandbox::v1::Session s = CreateSession(*stub, JavaScript());
  RunCode(*stub, s.id(), "let secret = 'survives'");
  ASSERT_EQ(d.Stop(), 0);
  ASSERT_TRUE(d.Start());
  stub = d.Stub();
  EXPECT_EQ(RunCode(*stub, s.id(), "secret").result_repr(), "'survives'");
  sandbox::v1::Session got;
  ASSERT_TRUE(GetSession(*stub, s.id(), &got).ok());
  EXPECT_EQ(got.runtime(), "javascript");
}

}  // namespace
}  // namespace sandboxd::testing
