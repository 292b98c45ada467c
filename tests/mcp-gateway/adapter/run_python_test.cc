// Unit tests of RunCodeTool over fakes of sandboxd and the upstreams: the whole way down
// (arguments, session, catalog, code) and back up (output as progress, tool calls routed,
// the result), lost sessions retried once, and MCP sessions closing.
#include "adapter/run_code.h"

#include <thread>

#include "absl/synchronization/notification.h"
#include "bridge_fakes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::FakeSandboxes;
using testing::FakeUpstreams;
using testing::Server;
using testing::ToolCallOf;

class RunCodeToolTest : public ::testing::Test {
 protected:
  RunCodeToolTest() { upstreams_.SetServers({Server("github", {"search"}), Server("memory", {"read"})}); }

  absl::StatusOr<json> Call(const json& args, const std::string& mcp = "mcp-1",
                            std::shared_ptr<codemode::CancelToken> cancel = nullptr) {
    ToolCallContext ctx;
    if (!mcp.empty()) ctx.mcp_session = mcp;
    ctx.credential = "token 0";
    ctx.cancel = cancel ? cancel : std::make_shared<codemode::CancelToken>();
    ctx.progress = [this](double, std::optional<double>, const std::string& m) {
      progress_.push_back(m);
    };
    return tool_.CallTool("run_python", args, ctx);
  }
  // The text the model reads, after checking the call succeeded.
  std::string Run(const json& args, const std::string& mcp = "mcp-1") {
    absl::StatusOr<json> r = Call(args, mcp);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)["content"][0]["text"].get<std::string>() : "";
  }

  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
  RunCodeTool tool_{&sandboxes_, &upstreams_, RunCodeOptions{}};
  std::vector<std::string> progress_;
};

TEST_F(RunCodeToolTest, ListsRunPythonFirstDescribingTheUpstreams) {
  json tools = tool_.ListTools("");
  ASSERT_EQ(tools.size(), 2u) << "run_python and run_javascript by default";
  EXPECT_EQ(tools[0]["name"], "run_python");
  EXPECT_THAT(tools[0]["description"].get<std::string>(), HasSubstr("mcp_github"));
  EXPECT_EQ(tools[0]["inputSchema"]["properties"]["timeout_seconds"]["maximum"], 300);
  EXPECT_TRUE(tools[0]["outputSchema"]["properties"].contains("tool_calls"));
}

// tools/list reads the upstreams and describes them once per catalog version: a flood of
// tools/list costs the HTTP event loop nothing per request.
TEST_F(RunCodeToolTest, ToolsListIsBuiltOncePerCatalogVersion) {
  const json first = tool_.ListTools("");
  const int snapshots = upstreams_.snapshots();
  for (int i = 0; i < 5; ++i) EXPECT_EQ(tool_.ListTools(""), first);
  EXPECT_EQ(upstreams_.snapshots(), snapshots) << "answered from the one built";
  upstreams_.SetServers({Server("other", {"ping"})});
  const json second = tool_.ListTools("");
  EXPECT_GT(upstreams_.snapshots(), snapshots);
  EXPECT_THAT(second[0]["description"].get<std::string>(), HasSubstr("mcp_other"));
  EXPECT_THAT(second[0]["description"].get<std::string>(), Not(HasSubstr("mcp_github")));
}

TEST_F(RunCodeToolTest, BadCallsAreProtocolErrors) {
  ToolCallContext ctx;
  EXPECT_TRUE(absl::IsInvalidArgument(tool_.CallTool("run_js", {{"code", "1"}}, ctx).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Call({{"code", ""}}).status()));
  EXPECT_TRUE(sandboxes_.creations().empty()) << "nothing was created for a bad call";
}

TEST_F(RunCodeToolTest, RunsInTheMcpSessionsOwnSandboxSession) {
  EXPECT_EQ(Run({{"code", "a = 1"}, {"timeout_seconds", 2}}), "s1: a = 1\n");
  EXPECT_EQ(Run({{"code", "a"}}), "s1: a\n") << "the same session keeps its namespace";
  EXPECT_EQ(Run({{"code", "a"}, {"session", "side"}}), "s2: a\n");
  EXPECT_EQ(Run({{"code", "a"}}, "mcp-2"), "s3: a\n");
  ASSERT_EQ(sandboxes_.creations().size(), 3u);
  EXPECT_EQ(sandboxes_.creations()[0].owner, "mcp:token 0");
  EXPECT_EQ(sandboxes_.creations()[1].label, "side");
  EXPECT_EQ(sandboxes_.executions()[0].timeout_ms, 2000u);
  EXPECT_EQ(sandboxes_.executions()[1].timeout_ms, 30000u);
}

TEST_F(RunCodeToolTest, TheCatalogGoesAlongOnlyWhenItChanged) {
  Run({{"code", "1"}});
  EXPECT_EQ(sandboxes_.catalog_of("s1").servers_size(), 2) << "given at creation";
  Run({{"code", "2"}});
  upstreams_.SetServers({Server("github", {"search", "issues"}), Server("memory", {"read"})});
  Run({{"code", "3"}});
  Run({{"code", "4"}, {"servers", {"github"}}});
  Run({{"code", "5"}, {"servers", {"github"}}});
  std::vector<FakeSandboxes::Execution> e = sandboxes_.executions();
  ASSERT_EQ(e.size(), 5u);
  EXPECT_FALSE(e[0].catalog_sent);
  EXPECT_FALSE(e[1].catalog_sent);
  EXPECT_TRUE(e[2].catalog_sent) << "the upstream tools changed";
  EXPECT_EQ(e[2].catalog.servers(0).tools_size(), 2);
  EXPECT_TRUE(e[3].catalog_sent) << "the allowlist changed";
  EXPECT_FALSE(e[4].catalog_sent);
  // What decides is what the catalog holds: without memory, all servers make the catalog
  // the sandbox has (github's alone), whatever the allowlist and the catalog version.
  upstreams_.SetServers({Server("github", {"search", "issues"})});
  Run({{"code", "6"}});
  e = sandboxes_.executions();
  ASSERT_EQ(e.size(), 6u);
  EXPECT_FALSE(e[5].catalog_sent);
}

TEST_F(RunCodeToolTest, ServersDownKeepTheirToolsInTheCatalog) {
  Run({{"code", "1"}});
  upstreams_.SetServers({Server("github", {"search"}), Server("memory", {}, false)});
  Run({{"code", "2"}});
  EXPECT_EQ(sandboxes_.catalog_of("s1").servers_size(), 2)
      << "code calling memory gets a ToolError, not a NameError";
}

TEST_F(RunCodeToolTest, ToolCallsGoUpAndComeBackInTheResult) {
  sandboxes_.SetScript([](const FakeSandboxes::Execution&, const ExecuteHandlers& h,
                          std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    h.on_output(false, "calling\n");
    sandbox::v1::ToolResult ok = h.on_tool_call(ToolCallOf("github", "search", R"({"q":"x"})"), {});
    sandbox::v1::ToolResult bad = h.on_tool_call(ToolCallOf("github", "search", "[]"), {});
    Finished f;
    f.set_status(Finished::OK);
    f.set_stdout(ok.result_json() + "|" + bad.error());
    return f;
  });
  absl::StatusOr<json> r = Call({{"code", "..."}, {"servers", {"github"}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT((*r)["content"][0]["text"].get<std::string>(), HasSubstr("github.search"));
  EXPECT_THAT((*r)["content"][0]["text"].get<std::string>(), HasSubstr("must be a JSON object"));
  ASSERT_EQ(upstreams_.calls().size(), 1u);
  EXPECT_EQ(upstreams_.calls()[0].arguments["q"], "x");
  const json& s = (*r)["structuredContent"];
  EXPECT_EQ(s["tool_calls_total"], 2);
  EXPECT_EQ(s["tool_calls_failed"], 1);
  EXPECT_EQ(progress_, std::vector<std::string>{"calling\n"});
}

// What answers at sandboxd's address may not be sandboxd (another local user listening
// there while it was down) or may misbehave: a tool call outside the catalog this run gave
// its sandbox (a server left out by `servers`, a tool no server has) is never sent
// upstream, ends the run's execution at once, and the session is not used again.
TEST_F(RunCodeToolTest, AToolCallOutsideTheRunsCatalogEndsTheRun) {
  bool execution_cancelled = false;
  sandboxes_.SetScript([&](const FakeSandboxes::Execution& e, const ExecuteHandlers& h,
                           std::shared_ptr<codemode::CancelToken> cancel) -> absl::StatusOr<Finished> {
    if (e.code == "forged") {
      h.on_tool_call(ToolCallOf("memory", "read", "{}"), {});
      execution_cancelled = cancel->cancelled();
      h.on_tool_call(ToolCallOf("github", "search", "{}"), {});
    }
    Finished f;
    f.set_status(Finished::OK);
    return f;
  });
  ASSERT_TRUE(Call({{"code", "x = 1"}, {"servers", {"github"}}}).ok());
  absl::StatusOr<json> r = Call({{"code", "forged"}, {"servers", {"github"}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["isError"], true);
  const std::string text = (*r)["content"][0]["text"].get<std::string>();
  EXPECT_THAT(text, HasSubstr("server 'memory' tool 'read'"));
  EXPECT_THAT(text, HasSubstr("the run was ended and its session dropped"));
  EXPECT_TRUE(execution_cancelled);
  EXPECT_TRUE(upstreams_.calls().empty()) << "neither the forged call nor any after it";
  ASSERT_TRUE(Call({{"code", "y = 2"}, {"servers", {"github"}}}).ok());
  EXPECT_EQ(sandboxes_.executions().back().session_id, "s2") << "the session was not used again";
}

TEST_F(RunCodeToolTest, CancellingTheRunCancelsItsUpstreamCalls) {
  std::shared_ptr<codemode::CancelToken> seen;
  upstreams_.SetAnswer([&](const FakeUpstreams::Call& c) -> absl::StatusOr<json> {
    seen = c.options.cancel;
    return json{{"content", json::array()}};
  });
  bool cancelled_by_client = false;
  sandboxes_.SetScript([&](const FakeSandboxes::Execution&, const ExecuteHandlers& h,
                           std::shared_ptr<codemode::CancelToken> cancel) -> absl::StatusOr<Finished> {
    h.on_tool_call(ToolCallOf("github", "search", "{}"), {});
    EXPECT_FALSE(seen->cancelled());
    cancel->Cancel("client cancelled");  // notifications/cancelled, before the stream ends
    cancelled_by_client = seen->cancelled();
    Finished f;
    f.set_status(Finished::CANCELLED);
    return f;
  });
  absl::StatusOr<json> r = Call({{"code", "..."}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["isError"], true);
  EXPECT_TRUE(cancelled_by_client);
  EXPECT_TRUE(seen->cancelled()) << "and the end of the stream cancels what is left";
}

// A run queued behind a long one of the same session, whose client gives up, ends at once
// (issue 27: 30 abandoned queued calls held 42 threads and 200 MiB until the run ahead
// ended, up to --max_timeout_seconds later).
TEST_F(RunCodeToolTest, ACancelledQueuedRunEndsWhileTheRunAheadGoesOn) {
  absl::Notification first_started, release_first;
  sandboxes_.SetScript([&](const FakeSandboxes::Execution& e, const ExecuteHandlers&,
                           std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    if (e.code == "long") {
      first_started.Notify();
      release_first.WaitForNotification();
    }
    return FakeSandboxes::PrintCode(e);
  });
  std::thread first([&] { (void)Call({{"code", "long"}}); });
  first_started.WaitForNotification();
  auto cancel = std::make_shared<codemode::CancelToken>();
  absl::Notification second_done;
  absl::StatusOr<json> second;
  std::thread queued([&] {
    second = Call({{"code", "queued"}}, "mcp-1", cancel);
    second_done.Notify();
  });
  cancel->Cancel("client went away");
  // Not a speed limit: the old code never returns here until the first run ends; the
  // bound only turns that hang into a failure.
  const bool returned_while_first_ran = second_done.WaitForNotificationWithTimeout(absl::Seconds(30));
  release_first.Notify();
  first.join();
  queued.join();
  EXPECT_TRUE(returned_while_first_ran) << "the cancelled run waited for the run ahead";
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)["isError"], true);
  EXPECT_THAT((*second)["content"][0]["text"].get<std::string>(),
              HasSubstr("cancelled (client went away)"));
  ASSERT_EQ(sandboxes_.executions().size(), 1u) << "the cancelled run's code never ran";
  EXPECT_EQ(Run({{"code", "next"}}), "s1: next\n") << "the session serves the next run";
}

TEST_F(RunCodeToolTest, ALostSessionIsRetriedOnceInANewOne) {
  Run({{"code", "a = 1"}});
  sandboxes_.Lose("s1");
  absl::StatusOr<json> r = Call({{"code", "a"}, {"reset", true}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["isError"], false);
  EXPECT_THAT((*r)["content"][0]["text"].get<std::string>(),
              HasSubstr("s2: a\n[note] the previous sandbox session was lost"));
  EXPECT_EQ((*r)["structuredContent"]["session_reset"], true);
  EXPECT_EQ(sandboxes_.resets(), std::vector<std::string>{"s1"}) << "reset is not repeated";
  EXPECT_EQ(Run({{"code", "b"}}), "s2: b\n") << "later runs stay in the new session";
  EXPECT_EQ(sandboxes_.deleted(), std::vector<std::string>{"s1"})
      << "the lost session is deleted, so it gives its slot in sandboxd back";
}

TEST_F(RunCodeToolTest, ASessionLostTwiceIsAnError) {
  sandboxes_.SetScript([](const FakeSandboxes::Execution& e, const ExecuteHandlers&,
                          std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    return absl::NotFoundError("session " + e.session_id + " not found");
  });
  absl::StatusOr<json> r = Call({{"code", "1"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["isError"], true);
  EXPECT_EQ((*r)["content"][0]["text"], "[error] session s2 not found");
  EXPECT_EQ(sandboxes_.creations().size(), 2u);
}

TEST_F(RunCodeToolTest, SessionLostDuringTheRunStartsTheNextRunAfresh) {
  sandboxes_.SetScript([](const FakeSandboxes::Execution&, const ExecuteHandlers&,
                          std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    Finished f;
    f.set_status(Finished::SESSION_LOST);
    return f;
  });
  absl::StatusOr<json> r = Call({{"code", "1"}});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)["structuredContent"]["status"], "session_lost");
  EXPECT_THAT((*r)["content"][0]["text"].get<std::string>(), HasSubstr("next run starts in a new session"));
  EXPECT_EQ(sandboxes_.deleted(), std::vector<std::string>{"s1"})
      << "sandboxd counts a lost session against its caps until it is deleted";
  sandboxes_.SetScript(nullptr);
  EXPECT_EQ(Run({{"code", "2"}}), "s2: 2\n");
}

TEST_F(RunCodeToolTest, NoSandboxIsAnErrorResultNotAProtocolError) {
  sandboxes_.create_error = absl::UnavailableError("sandboxd at unix:/x is unavailable");
  absl::StatusOr<json> r = Call({{"code", "1"}});
  ASSERT_TRUE(r.ok()) << "the model should read why";
  EXPECT_EQ((*r)["isError"], true);
  EXPECT_EQ((*r)["structuredContent"]["error"]["message"], "sandboxd at unix:/x is unavailable");
  EXPECT_EQ(sandboxes_.creations().size(), 0u);
}

// A sandbox on a sandboxd that stopped answering: the model reads both ways on, for a
// session by name and for a sandbox by handle, and nothing is retried elsewhere.
TEST_F(RunCodeToolTest, ASandboxOnAnUnansweringSandboxdSaysHowToStartOver) {
  absl::StatusOr<json> first = Call({{"code", "1"}});
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string handle = (*first)["structuredContent"]["sandbox"].get<std::string>();
  sandboxes_.SetScript([](const FakeSandboxes::Execution&, const ExecuteHandlers&,
                          std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    return absl::UnavailableError("sandboxd at fake0 is unavailable: Connection refused");
  });
  for (const json& args : {json{{"code", "2"}}, json{{"code", "2"}, {"sandbox", handle}}}) {
    absl::StatusOr<json> r = Call(args);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ((*r)["isError"], true);
    const std::string message = (*r)["structuredContent"]["error"]["message"];
    EXPECT_THAT(message, HasSubstr("sandboxd at fake0 is unavailable: Connection refused; "));
    EXPECT_THAT(message, HasSubstr(args.contains("sandbox") ? "run without `sandbox`"
                                                            : "give a new `session` name"));
  }
  EXPECT_EQ(sandboxes_.creations().size(), 1u) << "its session may come back: none replaces it";
}

TEST_F(RunCodeToolTest, TooManyNamedSessionsIsAnErrorResult) {
  for (int i = 0; i < 8; ++i) Run({{"code", "1"}, {"session", "n" + std::to_string(i)}});
  absl::StatusOr<json> r = Call({{"code", "1"}, {"session", "n8"}});
  ASSERT_TRUE(r.ok());
  EXPECT_THAT((*r)["content"][0]["text"].get<std::string>(), HasSubstr("(the limit)"));
}

TEST_F(RunCodeToolTest, ClosingTheMcpSessionDeletesItsSandboxes) {
  Run({{"code", "1"}});
  Run({{"code", "1"}, {"session", "side"}});
  Run({{"code", "1"}}, "mcp-2");
  tool_.SessionClosed("mcp-1");
  EXPECT_EQ(sandboxes_.live(), std::set<std::string>{"s3"});
  tool_.CloseAll();
  EXPECT_TRUE(sandboxes_.live().empty());
}

TEST_F(RunCodeToolTest, FilesAreUploadedBeforeTheCodeRuns) {
  EXPECT_EQ(Run({{"code", "1"}}), "s1: 1\n");
  EXPECT_EQ(Run({{"code", "open('in.csv').read()"}, {"files", {{"in.csv", "a,b\n"}}}}),
            "s1: open('in.csv').read()\n");
  ASSERT_EQ(sandboxes_.uploads().size(), 1u);
  const FakeSandboxes::Upload up = sandboxes_.uploads()[0];
  EXPECT_EQ(up.session_id, "s1");
  EXPECT_EQ(up.path, "in.csv");
  EXPECT_EQ(up.data, "a,b\n");
  EXPECT_EQ(up.executions_before, 1u) << "after the first run, before the second";
}

TEST_F(RunCodeToolTest, ARefusedFileFailsTheRunBeforeTheCode) {
  absl::StatusOr<json> r = Call({{"code", "boom()"}, {"files", {{"../etc/passwd", "x"}}}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)["isError"]);
  EXPECT_THAT((*r)["content"][0]["text"].get<std::string>(),
              HasSubstr("files['../etc/passwd']: '..' is not allowed"));
  EXPECT_TRUE(sandboxes_.executions().empty()) << "the code did not run";
}

TEST_F(RunCodeToolTest, ALongStdoutIsKeptInTheWorkspaceNotInTheContext) {
  const std::string big = std::string(40000, 'a') + "THE END\n";
  sandboxes_.SetScript([&](const FakeSandboxes::Execution&, const ExecuteHandlers&,
                           std::shared_ptr<codemode::CancelToken>) {
    sandbox::v1::Finished f;
    f.set_status(sandbox::v1::Finished::OK);
    f.set_execution_id(7);
    f.set_stdout(big);
    return absl::StatusOr<sandbox::v1::Finished>(f);
  });
  absl::StatusOr<json> r = Call({{"code", "print(...)"}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(sandboxes_.uploads().size(), 1u);
  EXPECT_EQ(sandboxes_.uploads()[0].path, "out/run_python/stdout-7.txt");
  EXPECT_EQ(sandboxes_.uploads()[0].data, big);
  const std::string text = (*r)["content"][0]["text"];
  EXPECT_LT(text.size(), 34000u);
  EXPECT_THAT(text, HasSubstr("THE END"));  // the tail stays
  EXPECT_THAT(text, HasSubstr("all of it is in /workspace/out/run_python/stdout-7.txt"));
  const json& s = (*r)["structuredContent"];
  EXPECT_EQ(s["stdout_file"], "/workspace/out/run_python/stdout-7.txt");
  EXPECT_LT(s["stdout"].get<std::string>().size(), 34000u);
  // Short output stays where it was.
  sandboxes_.SetScript(nullptr);
  r = Call({{"code", "1"}});
  EXPECT_EQ(sandboxes_.uploads().size(), 1u);
  EXPECT_TRUE((*r)["structuredContent"]["stdout_file"].is_null());
}

}  // namespace
}  // namespace gateway
