// SessionManager tool calls: the round trip, back-pressure, catalogs and the router.
#include "session_manager_fixture.h"

namespace sandboxd::testing {
namespace {

// ---- tool calls ---------------------------------------------------------------------

TEST_F(SessionManagerTest, ToolCallRoundTrip) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  Started st = Exec(m, s.id(), "print('calling')\nr = await mcp_srv.echo(message='hi')\nr");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> call = st.collector->WaitToolCall();
  ASSERT_TRUE(call);
  EXPECT_EQ(call->server(), "srv");
  EXPECT_EQ(call->tool(), "echo");
  EXPECT_EQ(nlohmann::json::parse(call->arguments_json()), nlohmann::json({{"message", "hi"}}));
  EXPECT_FALSE(call->call_id().empty());
  // Output written before the call arrives before it.
  EXPECT_EQ(st.collector->stdout_text(), "calling\n");

  sandbox::v1::ToolResult unknown;
  unknown.set_call_id("no-such-call");
  unknown.set_result_json("{}");
  EXPECT_EQ(st.execution->SubmitToolResult(unknown).code(), absl::StatusCode::kNotFound);

  sandbox::v1::ToolResult res;
  res.set_call_id(call->call_id());
  res.set_result_json(R"({"content":[{"type":"text","text":"hello back"}]})");
  ASSERT_OK(st.execution->SubmitToolResult(res));
  // Answering twice is an error.
  EXPECT_EQ(st.execution->SubmitToolResult(res).code(), absl::StatusCode::kNotFound);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_EQ(f->result_repr(), "'hello back'");
  EXPECT_EQ(f->tool_calls(), 1u);
  EXPECT_EQ(m->GetInfo().tool_calls_total(), 1u);
}

// The caller's in-flight limit reaches the runner, which holds further calls back: ten
// gathered calls arrive three at a time, and all of them complete.
TEST_F(SessionManagerTest, CallerInFlightLimitHoldsCallsBackInTheSandbox) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  ExecutionRequest req;
  req.code = "rs = await asyncio.gather(*(mcp_srv.echo(message=str(i)) for i in range(10)))\nlen(rs)";
  req.max_tool_calls_in_flight = 3;
  Started st = Exec(m, s.id(), std::move(req));
  ASSERT_TRUE(st.execution);
  ASSERT_TRUE(st.collector->WaitToolCall(3));
  absl::SleepFor(absl::Milliseconds(300));  // a fourth must not come while three are open
  EXPECT_EQ(st.collector->tool_call_count(), 3u);
  size_t answered = 0;
  for (size_t n = 1; n <= 10; ++n) {
    std::optional<sandbox::v1::ToolCall> call = st.collector->WaitToolCall(n);
    ASSERT_TRUE(call) << "call " << n;
    EXPECT_LE(st.collector->tool_call_count() - answered, 3u);
    sandbox::v1::ToolResult res;
    res.set_call_id(call->call_id());
    res.set_result_json(R"({"content":[{"type":"text","text":"ok"}]})");
    ASSERT_OK(st.execution->SubmitToolResult(res));
    ++answered;
  }
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_EQ(f->result_repr(), "10");
  EXPECT_EQ(f->tool_calls(), 10u);
}

// The Python runner's bound on a call's argument values (MAX_ARGUMENT_VALUES) sits within
// the values sandboxd reads in one frame (frame.h, MaxFrameValues): a call at the bound
// reaches the caller, one value more is refused in the sandbox, and the session lives.
TEST_F(SessionManagerTest, ToolCallArgumentsAtTheRunnersValueBoundReachTheCaller) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  // The arguments, 'm' and the list are three values: 131,056 in all.
  Started st = Exec(m, s.id(), "r = await call_tool('srv', 'echo', {'message': 'm', 'd': [0] * 131053})\nr");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> call = st.collector->WaitToolCall();
  ASSERT_TRUE(call);
  EXPECT_EQ(nlohmann::json::parse(call->arguments_json())["d"].size(), 131053u);
  sandbox::v1::ToolResult res;
  res.set_call_id(call->call_id());
  res.set_result_json(R"({"content":[{"type":"text","text":"ok"}]})");
  ASSERT_OK(st.execution->SubmitToolResult(res));
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();

  Started over = Exec(m, s.id(), "await call_tool('srv', 'echo', {'message': 'm', 'd': [0] * 131054})");
  ASSERT_TRUE(over.execution);
  f = over.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::ERROR) << f->DebugString();
  EXPECT_THAT(f->error().message(), ::testing::HasSubstr("more than 131056 values"));
  EXPECT_EQ(over.collector->tool_call_count(), 0u);
  Started after = Exec(m, s.id(), "1 + 1");
  ASSERT_TRUE(after.execution);
  f = after.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->result_repr(), "2") << f->DebugString();
}

TEST_F(SessionManagerTest, ToolCallStructuredAndErrorResults) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  Started st = Exec(m, s.id(),
                    "a = await mcp_srv.echo(message='1')\n"
                    "try:\n"
                    "    await mcp_srv.echo(message='2')\n"
                    "    b = 'no error'\n"
                    "except ToolError as e:\n"
                    "    b = str(e)\n"
                    "(a, b)");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> c1 = st.collector->WaitToolCall(1);
  ASSERT_TRUE(c1);
  sandbox::v1::ToolResult r1;
  r1.set_call_id(c1->call_id());
  r1.set_result_json(R"({"content":[],"structuredContent":{"v":42}})");
  ASSERT_OK(st.execution->SubmitToolResult(r1));
  std::optional<sandbox::v1::ToolCall> c2 = st.collector->WaitToolCall(2);
  ASSERT_TRUE(c2);
  EXPECT_NE(c1->call_id(), c2->call_id());
  sandbox::v1::ToolResult r2;
  r2.set_call_id(c2->call_id());
  r2.set_error("upstream is down");
  ASSERT_OK(st.execution->SubmitToolResult(r2));
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_THAT(f->result_repr(), HasSubstr("{'v': 42}"));
  EXPECT_THAT(f->result_repr(), HasSubstr("upstream is down"));
  EXPECT_EQ(f->tool_calls(), 2u);
}

TEST_F(SessionManagerTest, InvalidToolResultFailsTheCallInPython) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  Started st = Exec(m, s.id(),
                    "try:\n"
                    "    await mcp_srv.echo(message='x')\n"
                    "    r = 'no error'\n"
                    "except ToolError as e:\n"
                    "    r = str(e)\n"
                    "r");
  std::optional<sandbox::v1::ToolCall> c = st.collector->WaitToolCall();
  ASSERT_TRUE(c);
  sandbox::v1::ToolResult res;
  res.set_call_id(c->call_id());
  res.set_result_json("[not json");
  EXPECT_EQ(st.execution->SubmitToolResult(res).code(), absl::StatusCode::kInvalidArgument);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK);
  EXPECT_THAT(f->result_repr(), HasSubstr("invalid result"));
}

TEST_F(SessionManagerTest, TimeoutWhileWaitingForATool) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  EXPECT_EQ(Eval(m, s.id(), "x = 'kept'"), "");
  Started st = Exec(m, s.id(), "await mcp_srv.echo(message='never answered')", 300);
  std::optional<sandbox::v1::ToolCall> c = st.collector->WaitToolCall();
  ASSERT_TRUE(c);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::TIMEOUT) << f->DebugString();
  // Too late to answer.
  sandbox::v1::ToolResult res;
  res.set_call_id(c->call_id());
  res.set_result_json("{}");
  EXPECT_EQ(st.execution->SubmitToolResult(res).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Eval(m, s.id(), "x"), "'kept'");
}

TEST_F(SessionManagerTest, ToolOutsideCatalogNeverReachesTheObserver) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  // User code can bypass the proxies and send any tool_call frame through the runner's
  // own ToolCalls object; sandboxd must refuse it against the catalog.
  Started st = Exec(m, s.id(),
                    "import gc\n"
                    "calls = [o for o in gc.get_objects() if type(o).__name__ == 'ToolCalls'][0]\n"
                    "out = []\n"
                    "for server, tool in [('srv', 'secret'), ('other', 'echo')]:\n"
                    "    try:\n"
                    "        await calls.call(server, tool, {})\n"
                    "        out.append('no error')\n"
                    "    except ToolError as e:\n"
                    "        out.append(str(e))\n"
                    "out");
  ASSERT_TRUE(st.execution);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_THAT(f->result_repr(), HasSubstr("srv.secret': it is not in this session's catalog"));
  EXPECT_THAT(f->result_repr(), HasSubstr("other.echo': it is not in this session's catalog"));
  EXPECT_THAT(f->result_repr(), Not(HasSubstr("no error")));
  EXPECT_EQ(st.collector->tool_call_count(), 0u);
  EXPECT_EQ(f->tool_calls(), 0u);
  EXPECT_EQ(m->GetInfo().tool_calls_total(), 0u);
}

TEST_F(SessionManagerTest, WithoutToolRouterCallsFailImmediately) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  ExecutionRequest req;
  req.code = "await mcp_srv.echo(message='x')";
  req.tool_router = false;
  Started st = Exec(m, s.id(), std::move(req));
  ASSERT_TRUE(st.execution);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::ERROR) << f->DebugString();
  EXPECT_EQ(f->error().type(), "ToolError");
  EXPECT_THAT(f->error().message(), HasSubstr("not available"));
  EXPECT_EQ(st.collector->tool_call_count(), 0u);
}

TEST_F(SessionManagerTest, CloseToolRouterFailsPendingAndLaterCalls) {
  SessionManager* m = StartManager();
  sandbox::v1::Session s = CreateWithEchoCatalog(m);
  Started st = Exec(m, s.id(),
                    "out = []\n"
                    "for i in range(2):\n"
                    "    try:\n"
                    "        await mcp_srv.echo(message=str(i))\n"
                    "        out.append('no error')\n"
                    "    except ToolError as e:\n"
                    "        out.append(str(e))\n"
                    "out");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> c = st.collector->WaitToolCall();
  ASSERT_TRUE(c);
  st.execution->CloseToolRouter();
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_THAT(f->result_repr(), HasSubstr("closed its side"));
  EXPECT_THAT(f->result_repr(), HasSubstr("not available"));
  EXPECT_THAT(f->result_repr(), Not(HasSubstr("no error")));
  EXPECT_EQ(st.collector->tool_call_count(), 1u);
  // The pending call is gone: answering it now fails.
  sandbox::v1::ToolResult res;
  res.set_call_id(c->call_id());
  res.set_result_json("{}");
  EXPECT_EQ(st.execution->SubmitToolResult(res).code(), absl::StatusCode::kNotFound);
}

TEST_F(SessionManagerTest, CatalogReplacedByExecution) {
  SessionManager* m = StartManager();
  sandbox::v1::CreateSessionRequest r;
  *r.mutable_catalog() = EchoCatalogProto("srv", "echo");
  sandbox::v1::Session s = Create(m, r);
  EXPECT_EQ(Eval(m, s.id(), "sorted(k for k in globals() if k.startswith('mcp_') and k != 'mcp_servers')"),
            "['mcp_srv']");

  sandbox::v1::Catalog next = EchoCatalogProto("other-server", "ping");
  next.mutable_servers(0)->add_tools()->set_name("pong");
  Started st = ExecWithCatalog(m, s.id(), "sorted(k for k in globals() if k.startswith('mcp_') and k != 'mcp_servers')", next);
  std::optional<Finished> f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->status(), Finished::OK) << f->DebugString();
  EXPECT_EQ(f->result_repr(), "['mcp_other_server']");
  EXPECT_EQ(m->GetSession(s.id())->tool_count(), 2u);

  // The new catalog is enforced by sandboxd too: the old tool is refused.
  f = Run(m, s.id(),
          "import gc\n"
          "calls = [o for o in gc.get_objects() if type(o).__name__ == 'ToolCalls'][0]\n"
          "try:\n"
          "    await calls.call('srv', 'echo', {'message': 'x'})\n"
          "    r = 'no error'\n"
          "except ToolError as e:\n"
          "    r = str(e)\n"
          "r");
  ASSERT_TRUE(f);
  EXPECT_THAT(f->result_repr(), HasSubstr("not in this session's catalog"));

  // And it is what the session record now holds (for re-attachment).
  EXPECT_THAT(WaitForRecordContaining(s.id(), "other-server"), HasSubstr("other-server"));
}

// An execution that carries a catalog may wait behind another one; the catalog it
// installs must still end up in the session record, or a re-attached session disagrees
// with its runner about which tools exist.
TEST_F(SessionManagerTest, CatalogOfAQueuedExecutionIsPersisted) {
  SessionManager* m = StartManager();
  sandbox::v1::CreateSessionRequest r;
  *r.mutable_catalog() = EchoCatalogProto("srv", "echo");
  sandbox::v1::Session s = Create(m, r);
  Started running = Exec(m, s.id(), "import time\nwhile True:\n    time.sleep(0.01)");
  ASSERT_TRUE(running.collector->WaitStarted());

  Started queued = ExecWithCatalog(m, s.id(), "sorted(k for k in globals() if k.startswith('mcp_') and k != 'mcp_servers')",
                                   EchoCatalogProto("other-server", "ping"));
  ASSERT_TRUE(queued.execution);
  running.execution->Cancel();
  std::optional<Finished> f = queued.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->result_repr(), "['mcp_other_server']");

  EXPECT_THAT(WaitForRecordContaining(s.id(), "other-server"), HasSubstr("other-server"));

  // After a restart the re-attached session routes calls of the new catalog.
  StopManager(m);
  SessionManager* m2 = StartManager();
  ASSERT_TRUE(m2->GetSession(s.id()).ok());
  Started st = Exec(m2, s.id(), "await mcp_other_server.ping(message='x')");
  ASSERT_TRUE(st.execution);
  std::optional<sandbox::v1::ToolCall> call = st.collector->WaitToolCall();
  ASSERT_TRUE(call) << st.collector->WaitFinished()->DebugString();
  EXPECT_EQ(call->server(), "other-server");
  sandbox::v1::ToolResult res;
  res.set_call_id(call->call_id());
  res.set_result_json(R"({"content":[{"type":"text","text":"pong"}]})");
  ASSERT_OK(st.execution->SubmitToolResult(res));
  f = st.collector->WaitFinished();
  ASSERT_TRUE(f);
  EXPECT_EQ(f->result_repr(), "'pong'");
}

}  // namespace
}  // namespace sandboxd::testing
