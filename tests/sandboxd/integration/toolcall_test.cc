// Integration: tool calls over the Execute stream (issue section 4) against real Podman:
// the sandbox-side API, concurrency under asyncio.gather, catalog replacement, a client
// that half-closes (grpcurl -d @) or never answers, and Run without a router.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gtest/gtest.h"
#include "harness.h"
#include "nlohmann/json.hpp"

namespace sandboxd::testing {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;

void AddTool(sandbox::v1::Catalog* catalog, const std::string& server, const std::string& tool,
             const std::string& schema, const std::string& description = "A tool") {
  sandbox::v1::Server* s = nullptr;
  for (auto& existing : *catalog->mutable_servers()) {
    if (existing.name() == server) s = &existing;
  }
  if (!s) {
    s = catalog->add_servers();
    s->set_name(server);
  }
  auto* t = s->add_tools();
  t->set_name(tool);
  t->set_description(description);
  t->set_input_schema_json(schema);
}

constexpr char kMessageSchema[] =
    R"({"type":"object","properties":{"message":{"type":"string","description":"what to echo"}},"required":["message"]})";

class ToolCallTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    daemon_ = new SandboxdProcess({"--pool_size=1"});
    ASSERT_TRUE(daemon_->Start());
  }
  static void TearDownTestSuite() {
    daemon_->Stop();
    delete daemon_;
  }
  void SetUp() override {
    stub_ = daemon_->Stub();
    sandbox::v1::CreateSessionRequest req;
    AddTool(req.mutable_catalog(), "everything", "echo", kMessageSchema, "Echoes back the input");
    AddTool(req.mutable_catalog(), "everything", "get-sum",
            R"({"type":"object","properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]})",
            "Adds two numbers");
    AddTool(req.mutable_catalog(), "memory", "echo", kMessageSchema, "Another echo");
    AddTool(req.mutable_catalog(), "my-server.v2", "class", R"({"type":"object"})", "Keyword name");
    session_ = CreateSession(*stub_, req).id();
  }
  static SandboxdProcess* daemon_;
  std::unique_ptr<sandbox::v1::SandboxService::Stub> stub_;
  std::string session_;
};
SandboxdProcess* ToolCallTest::daemon_ = nullptr;

// Answers echo with its message and get-sum with a structured result.
sandbox::v1::ToolResult Answer(const sandbox::v1::ToolCall& c) {
  json args = json::parse(c.arguments_json());
  sandbox::v1::ToolResult r;
  r.set_call_id(c.call_id());
  if (c.tool() == "get-sum") {
    double sum = args["a"].get<double>() + args["b"].get<double>();
    r.set_result_json(json{{"content", {{{"type", "text"}, {"text", std::to_string(sum)}}}},
                           {"structuredContent", {{"sum", sum}}}}
                          .dump());
  } else {
    r.set_result_json(json{{"content", {{{"type", "text"}, {"text", c.server() + ":" + args.value("message", "")}}}}}.dump());
  }
  return r;
}

TEST_F(ToolCallTest, SandboxSideApiCallsTheRightServerAndTool) {
  ExecuteOutcome out = Execute(*stub_, Start(session_, R"(
a = await mcp_everything.echo(message="one")
b = await tools["memory.echo"](message="two")
c = await call_tool("everything", "get-sum", {"a": 2, "b": 3})
d = await mcp_servers["everything"].get_sum(a=1, b=1)
from mcp import runtime
e = await runtime.call_tool("memory", "echo", {"message": "three"})
f = await getattr(mcp_my_server_v2, "class_")()
(a, b, c, d, e, sorted(tools.keys()))
)"),
                               Answer);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
  EXPECT_EQ(out.finished.result_repr(),
            "('everything:one', 'memory:two', {'sum': 5.0}, {'sum': 2.0}, 'memory:three', "
            "['class', 'everything.echo', 'everything.get-sum', 'get-sum', 'memory.echo', "
            "'my-server.v2.class'])");
  EXPECT_EQ(out.finished.tool_calls(), 6u);
  std::vector<std::string> routed;
  for (const auto& m : out.messages) {
    if (m.has_tool_call()) routed.push_back(m.tool_call().server() + "/" + m.tool_call().tool());
  }
  EXPECT_EQ(routed, (std::vector<std::string>{"everything/echo", "memory/echo", "everything/get-sum",
                                               "everything/get-sum", "memory/echo", "my-server.v2/class"}));
}

TEST_F(ToolCallTest, SignaturesDocsAndValidationBeforeTheRpc) {
  ExecuteOutcome out = Execute(*stub_, Start(session_, R"(
import inspect
sig = str(inspect.signature(mcp_everything.echo))
doc = mcp_everything.echo.__doc__
errors = []
for bad in [lambda: mcp_everything.echo(), lambda: mcp_everything.echo(message=1),
            lambda: mcp_everything.echo(message="x", nope=2)]:
    try:
        await bad()
    except TypeError as e:
        errors.append("TypeError")
found = [r["tool"] for r in _search("sum numbers")]
(sig, "Echoes back the input" in doc, errors, found[:1], sorted(_discover()), _schema("get-sum")["input_schema"]["required"])
)"),
                               Answer);
  ASSERT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
  EXPECT_EQ(out.finished.result_repr(),
            "('(message: str)', True, ['TypeError', 'TypeError', 'TypeError'], ['get-sum'], "
            "['everything', 'memory', 'my-server.v2'], ['a', 'b'])");
  EXPECT_EQ(out.finished.tool_calls(), 0u);  // nothing reached the client
}

TEST_F(ToolCallTest, ToolErrorsAndImagesComeBackAsPythonValues) {
  ExecuteOutcome out = Execute(*stub_, Start(session_, R"(
results = []
try:
    await mcp_everything.echo(message="fail")
except ToolError as e:
    results.append(("ToolError", e.server, e.tool, str(e.message)))
try:
    await mcp_everything.echo(message="transport")
except ToolError as e:
    results.append(("ToolError", str(e.message)))
img = await mcp_memory.echo(message="image")
results.append((img[0]["type"], img[0]["mimeType"], img[0]["data"]))
results
)"),
                               [](const sandbox::v1::ToolCall& c) {
                                 json args = json::parse(c.arguments_json());
                                 sandbox::v1::ToolResult r;
                                 r.set_call_id(c.call_id());
                                 std::string m = args["message"];
                                 if (m == "fail") {
                                   r.set_result_json(R"({"content":[{"type":"text","text":"boom"}],"isError":true})");
                                 } else if (m == "transport") {
                                   r.set_error("upstream 'everything' is unavailable");
                                 } else {
                                   r.set_result_json(R"({"content":[{"type":"image","mimeType":"image/png","data":"iVBORw0K"},{"type":"text","text":"caption"}]})");
                                 }
                                 return r;
                               });
  ASSERT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
  EXPECT_EQ(out.finished.result_repr(),
            "[('ToolError', 'everything', 'echo', 'boom'), ('ToolError', \"upstream 'everything' "
            "is unavailable\"), ('image', 'image/png', 'iVBORw0K')]");
}

TEST_F(ToolCallTest, GatheredCallsAreInFlightTogether) {
  // Every answer waits until all 20 calls have reached the client: this only finishes if
  // the calls really are in flight at the same time.
  std::mutex mu;
  std::condition_variable cv;
  int seen = 0;
  ExecuteOutcome out = Execute(
      *stub_,
      Start(session_, "r = await asyncio.gather(*[mcp_everything.echo(message=str(i)) for i in range(20)])\nr[:3]",
            30000),
      [&](const sandbox::v1::ToolCall& c) {
        std::unique_lock<std::mutex> lock(mu);
        ++seen;
        cv.notify_all();
        cv.wait_for(lock, std::chrono::seconds(20), [&] { return seen >= 20; });
        return Answer(c);
      });
  ASSERT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
  EXPECT_EQ(seen, 20);
  EXPECT_EQ(out.finished.result_repr(), "['everything:0', 'everything:1', 'everything:2']");
}

TEST_F(ToolCallTest, CatalogCanBeReplacedAtExecuteStart) {
  sandbox::v1::StartExecution start = Start(session_, "r = await mcp_fresh.ping()\n(r, 'mcp_memory' in globals())");
  AddTool(start.mutable_catalog(), "fresh", "ping", R"({"type":"object"})");
  ExecuteOutcome out = Execute(*stub_, start, [](const sandbox::v1::ToolCall& c) {
    return TextResult(c.call_id(), "pong");
  });
  ASSERT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
  EXPECT_EQ(out.finished.result_repr(), "('pong', False)");
  // The replacement sticks for later executions, and sandboxd now refuses the old tools.
  grpc::ClientContext ctx;
  sandbox::v1::GetSessionRequest g;
  g.set_session_id(session_);
  sandbox::v1::Session s;
  ASSERT_TRUE(stub_->GetSession(&ctx, g, &s).ok());
  EXPECT_EQ(s.tool_count(), 1u);
}

TEST_F(ToolCallTest, HalfClosedClientGetsTheWholeStreamAndAClearToolError) {
  ExecuteOutcome out = Execute(*stub_, Start(session_, R"(
print("before")
try:
    await mcp_everything.echo(message="x")
except ToolError as e:
    print("tool error:", e.message)
"after"
)"),
                               nullptr, /*half_close=*/true);
  ASSERT_TRUE(out.status.ok()) << out.status.error_message();
  ASSERT_TRUE(out.got_finished);
  EXPECT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
  EXPECT_EQ(out.finished.result_repr(), "'after'");
  EXPECT_NE(out.finished.stdout().find("before\ntool error:"), std::string::npos) << out.finished.stdout();
  EXPECT_NE(out.finished.stdout().find("closed its side"), std::string::npos) << out.finished.stdout();
  EXPECT_EQ(out.StreamedStdout(), out.finished.stdout());
}

TEST_F(ToolCallTest, RunHasNoRouterAndSaysSo) {
  Finished f = RunCode(*stub_, session_, R"(
try:
    await mcp_everything.echo(message="x")
except ToolError as e:
    msg = e.message
msg
)");
  EXPECT_EQ(f.status(), Finished::OK) << f.DebugString();
  EXPECT_NE(f.result_repr().find("Run rpc"), std::string::npos) << f.result_repr();
}

TEST_F(ToolCallTest, AClientThatNeverAnswersIsCoveredByTheTimeout) {
  // The session's first cell runs on its own: on a loaded machine a wasm session's first
  // cell can take longer than the timeout below to start, and would be interrupted before
  // it made its call.
  ASSERT_EQ(RunCode(*stub_, session_, "kept = 1").status(), Finished::OK);
  std::atomic<int> calls{0};
  ExecuteOutcome out = Execute(
      *stub_, Start(session_, "await mcp_everything.echo(message='x')", 3000), nullptr,
      false, [&](const sandbox::v1::ExecuteResponse& m, auto*) {
        if (m.has_tool_call()) ++calls;  // and never answered
      });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(out.finished.status(), Finished::TIMEOUT) << out.finished.DebugString();
  EXPECT_EQ(RunCode(*stub_, session_, "kept").result_repr(), "1");
}

TEST_F(ToolCallTest, CancelInterruptsPendingCallsAndKeepsTheNamespace) {
  ExecuteOutcome out = Execute(
      *stub_, Start(session_, "kept = 2\nawait mcp_everything.echo(message='x')", 30000), nullptr,
      false, [&](const sandbox::v1::ExecuteResponse& m, auto* stream) {
        if (m.has_tool_call()) {
          sandbox::v1::ExecuteRequest cancel;
          cancel.mutable_cancel();
          stream->Write(cancel);
        }
      });
  EXPECT_EQ(out.finished.status(), Finished::CANCELLED) << out.finished.DebugString();
  EXPECT_EQ(RunCode(*stub_, session_, "kept").result_repr(), "2");
}

TEST_F(ToolCallTest, BadAnswersFailTheCallNotTheStream) {
  ExecuteOutcome out = Execute(*stub_, Start(session_, R"(
out = []
for m in ["garbage", "array"]:
    try:
        await mcp_everything.echo(message=m)
    except ToolError as e:
        out.append("ToolError")
out
)"),
                               [](const sandbox::v1::ToolCall& c) {
                                 sandbox::v1::ToolResult r;
                                 r.set_call_id(c.call_id());
                                 json args = json::parse(c.arguments_json());
                                 r.set_result_json(args["message"] == "garbage" ? "{not json" : "[1,2]");
                                 return r;
                               });
  ASSERT_TRUE(out.status.ok());
  EXPECT_EQ(out.finished.result_repr(), "['ToolError', 'ToolError']") << out.finished.DebugString();
}

// sandboxd ends a session over a frame nested deeper than 128 levels; the runners refuse an
// argument deeper than 120 (the tool_call frame adds two), so user code gets an ordinary
// error and keeps its session. An argument 120 deep goes out. Both runtimes.
TEST_F(ToolCallTest, ADeepArgumentIsAnErrorAndTheSessionIsKept) {
  const struct {
    const char* runtime;
    const char* setup;
    const char* call;  // deep(N) nests N levels
  } kCases[] = {
      {"python",
       "keep = 42\ndef deep(n):\n    v = 1\n    for _ in range(n): v = [v]\n    return v",
       "await call_tool('everything', 'echo', {'message': 'm', 'd': deep(N)})"},
      {"javascript",
       "globalThis.keep = 42; globalThis.deep = (n) => { let v = 1; "
       "for (let i = 0; i < n; i++) v = [v]; return v; }",
       "await callTool('everything', 'echo', { message: 'm', d: deep(N) })"},
  };
  for (const auto& c : kCases) {
    SCOPED_TRACE(c.runtime);
    auto call = [&c](int n) {
      std::string code = c.call;
      return code.replace(code.find("deep(N)"), 7, "deep(" + std::to_string(n) + ")");
    };
    sandbox::v1::CreateSessionRequest req;
    req.set_runtime(c.runtime);
    AddTool(req.mutable_catalog(), "everything", "echo", kMessageSchema);
    const std::string id = CreateSession(*stub_, req).id();
    ASSERT_EQ(RunCode(*stub_, id, c.setup).status(), Finished::OK);
    for (int n : {127, 200}) {
      ExecuteOutcome out = Execute(*stub_, Start(id, call(n)), Answer);
      ASSERT_TRUE(out.got_finished) << n;
      EXPECT_EQ(out.finished.status(), Finished::ERROR) << n << out.finished.DebugString();
      EXPECT_EQ(out.finished.error().type(), "TypeError") << n;
      EXPECT_NE(out.finished.error().message().find("nested deeper than 120 levels"),
                std::string::npos) << out.finished.error().message();
      EXPECT_EQ(out.finished.tool_calls(), 0u) << n;
    }
    ExecuteOutcome out = Execute(*stub_, Start(id, call(120)), Answer);
    EXPECT_EQ(out.finished.status(), Finished::OK) << out.finished.DebugString();
    EXPECT_EQ(out.finished.tool_calls(), 1u);
    EXPECT_EQ(RunCode(*stub_, id, "keep").result_repr(), "42");
  }
}

}  // namespace
}  // namespace sandboxd::testing
