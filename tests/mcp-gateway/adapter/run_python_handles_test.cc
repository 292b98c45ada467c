// Sandbox handles through RunCodeTool: every result names its sandbox, a handle passed
// back runs there again from any MCP session of its credential, a handle another
// credential presents fails exactly like a forged one, a handle whose sandbox is gone runs
// in a fresh sandbox and says so, and produced files are read by handle URIs.
#include "adapter/run_code.h"

#include "absl/strings/str_split.h"
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

constexpr char kAlice[] = "token alice";
constexpr char kBob[] = "token bob";

class RunPythonHandlesTest : public ::testing::Test {
 protected:
  RunPythonHandlesTest() {
    // Prints "<session>: <code>"; code "out/x=y" also writes out/x.
    sandboxes_.SetScript([this](const FakeSandboxes::Execution& e, const ExecuteHandlers&,
                                std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
      std::pair<std::string, std::string> kv = absl::StrSplit(e.code, absl::MaxSplits('=', 1));
      if (absl::StartsWith(e.code, "out/")) sandboxes_.PutFile(e.session_id, kv.first, kv.second);
      Finished f;
      f.set_status(Finished::OK);
      f.set_stdout(e.session_id + ": " + e.code + "\n");
      return f;
    });
  }

  ToolCallContext Context(const std::string& credential, const std::string& mcp) {
    ToolCallContext ctx;
    if (!mcp.empty()) ctx.mcp_session = mcp;
    ctx.credential = credential;
    ctx.protocol_version = "2025-11-25";
    ctx.cancel = std::make_shared<codemode::CancelToken>();
    ctx.progress = [](double, std::optional<double>, const std::string&) {};
    return ctx;
  }
  json Call(const json& args, const std::string& credential = kAlice, const std::string& mcp = "mcp-1") {
    ToolCallContext ctx = Context(credential, mcp);
    absl::StatusOr<json> r = tool_.CallTool("run_python", args, ctx);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : json();
  }
  static std::string Text(const json& r) { return r["content"][0]["text"].get<std::string>(); }
  static std::string Handle(const json& r) {
    return r["structuredContent"]["sandbox"].is_string() ? r["structuredContent"]["sandbox"].get<std::string>()
                                                         : "";
  }
  // What a forged handle gets: the one error every invalid handle gets.
  json Forged() {
    std::string h = Handle(Call({{"code", "1"}}, kAlice, "mcp-forger"));
    h[10] = h[10] == 'A' ? 'B' : 'A';
    return Call({{"code", "1"}, {"sandbox", h}});
  }

  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
  RunCodeTool tool_{&sandboxes_, &upstreams_, RunCodeOptions{}};
};

TEST_F(RunPythonHandlesTest, AHandlePassedBackRunsInTheSameSandboxFromAnyMcpSession) {
  json first = Call({{"code", "a = 1"}});
  const std::string h = Handle(first);
  ASSERT_THAT(h, ::testing::StartsWith("sbx1_"));
  EXPECT_EQ(Text(first), "s1: a = 1\n") << "an MCP session's own sandbox needs no handle in the text";
  json again = Call({{"code", "a"}, {"sandbox", h}}, kAlice, "mcp-2");
  EXPECT_EQ(again["isError"], false) << again;
  EXPECT_EQ(Text(again), "s1: a\n[sandbox] " + Handle(again) + "\n") << "a model that came by handle reads the next";
  EXPECT_EQ(sandboxes_.creations().size(), 1u) << "no new sandbox";
  EXPECT_NE(Handle(again), h) << "each result carries a fresh handle";
  EXPECT_THAT(Text(Call({{"code", "b"}, {"sandbox", Handle(again)}})), ::testing::StartsWith("s1: b\n"));
}

TEST_F(RunPythonHandlesTest, AnotherCredentialGetsTheSameErrorAsAForgedHandle) {
  const std::string h = Handle(Call({{"code", "secret = 42"}}));
  const size_t executions = sandboxes_.executions().size();
  json stolen = Call({{"code", "print(secret)"}, {"sandbox", h}}, kBob, "mcp-bob");
  EXPECT_EQ(stolen["isError"], true);
  EXPECT_EQ(Text(stolen), "[error] " + std::string(HandleSealer::kInvalidHandle));
  EXPECT_EQ(sandboxes_.executions().size(), executions) << "nothing ran anywhere";
  json forged = Forged();
  EXPECT_EQ(Text(forged), Text(stolen)) << "no oracle: the same answer for both";
  EXPECT_EQ(forged["structuredContent"], stolen["structuredContent"]);
  EXPECT_TRUE(stolen["structuredContent"]["sandbox"].is_null());
}

// A full sandboxd gives the least recently used idle sandbox of the owner holding the most
// to a new owner; that owner's next answer says so, also by handle (whose notes otherwise
// pass on nothing of sandboxd's message, which names the session).
TEST_F(RunPythonHandlesTest, ASandboxReclaimedForAnotherOwnerSaysSo) {
  const std::string h = Handle(Call({{"code", "a = 1"}}));
  sandboxes_.Lose("s1", "reclaimed: for another owner at 2026-11-26T09:00:00Z: the daemon was full (4 sessions "
                        "of 2 owners) and this session's owner held more than the new one's");
  json r = Call({{"code", "a"}, {"sandbox", h}}, kAlice, "mcp-2");
  EXPECT_EQ(r["isError"], false);
  EXPECT_THAT(Text(r), HasSubstr("[note] the sandbox this handle names was reclaimed for another owner"));
  const std::string note = Text(r).substr(0, Text(r).find("[sandbox]"));
  EXPECT_THAT(note, ::testing::Not(HasSubstr("s1"))) << "no session id in the note (F4)";
}

TEST_F(RunPythonHandlesTest, AGoneSandboxSaysSoAndRunsInAFreshOneOfTheCallersSession) {
  const std::string h = Handle(Call({{"code", "a = 1"}}));
  sandboxes_.Lose("s1");
  json r = Call({{"code", "a"}, {"sandbox", h}}, kAlice, "mcp-2");
  EXPECT_EQ(r["isError"], false);
  EXPECT_THAT(Text(r), HasSubstr("s2: a\n[note] the sandbox this handle names is gone"));
  // (The note only: the handle on the last line is random base64, which may hold "s1".)
  const std::string note = Text(r).substr(0, Text(r).find("[sandbox]"));
  EXPECT_THAT(note, ::testing::Not(HasSubstr("s1"))) << "no session id in the note (F4)";
  EXPECT_EQ(r["structuredContent"]["session_reset"], true);
  ASSERT_EQ(sandboxes_.creations().size(), 2u);
  EXPECT_EQ(sandboxes_.creations()[1].owner, "mcp:token alice");
  const std::string fresh = Handle(r);
  EXPECT_THAT(Text(Call({{"code", "b"}, {"sandbox", fresh}})), ::testing::StartsWith("s2: b\n"));
  tool_.SessionClosed("mcp-1");
  EXPECT_EQ(sandboxes_.live(), std::set<std::string>{"s2"});
  tool_.SessionClosed("mcp-2");
  EXPECT_TRUE(sandboxes_.live().empty()) << "the fresh sandbox ended with the MCP session it belongs to";
}

// Each call with a stale handle makes a new sandbox: those count against the caller's MCP
// session and credential, or stale handles would mint sandboxes outside every gateway cap.
TEST_F(RunPythonHandlesTest, AStaleHandleCannotMintSandboxesPastTheCaps) {
  RunCodeOptions options;
  options.max_sandboxes_per_credential = 3;
  RunCodeTool tool{&sandboxes_, &upstreams_, options};
  ToolCallContext ctx = Context(kAlice, "mcp-1");
  const std::string h = Handle(*tool.CallTool("run_python", {{"code", "1"}}, ctx));
  sandboxes_.Lose("s1");
  int fresh = 0;
  for (int i = 0; i < 10; ++i) {
    ToolCallContext c = Context(kAlice, "mcp-1");
    absl::StatusOr<json> r = tool.CallTool("run_python", {{"code", "1"}, {"sandbox", h}}, c);
    ASSERT_TRUE(r.ok()) << r.status();
    if ((*r)["isError"] == false) ++fresh;
  }
  EXPECT_EQ(fresh, 2) << "the default sandbox (lost) and two fresh ones fill the cap of 3";
  EXPECT_LE(sandboxes_.live().size(), 3u);
}

// A replacement's name never comes from a counter ("sandbox-<n>"), which could be a name
// the client uses itself: the handle run would then land in that sandbox.
TEST_F(RunPythonHandlesTest, AReplacementNeverTakesANameTheClientUses) {
  Call({{"code", "mine = 1"}, {"session", "sandbox-1"}}, kAlice, "mcp-1");   // s1
  const std::string h = Handle(Call({{"code", "b"}}, kAlice, "mcp-2"));      // s2
  sandboxes_.Lose("s2");
  json r = Call({{"code", "c"}, {"sandbox", h}}, kAlice, "mcp-1");
  EXPECT_THAT(Text(r), ::testing::StartsWith("s3: c\n")) << "a fresh sandbox, not the client's sandbox-1";
  EXPECT_THAT(Text(Call({{"code", "d"}, {"session", "sandbox-1"}}, kAlice, "mcp-1")),
              ::testing::StartsWith("s1: d\n"));
}

// A replacement refused by the caps returns no handle, not even the gone sandbox's.
TEST_F(RunPythonHandlesTest, ARefusedReplacementReturnsNoHandle) {
  RunCodeOptions options;
  options.max_sandboxes_per_credential = 1;
  RunCodeTool tool{&sandboxes_, &upstreams_, options};
  ToolCallContext first = Context(kAlice, "mcp-1");
  const std::string h = Handle(*tool.CallTool("run_python", {{"code", "1"}}, first));
  sandboxes_.Lose("s1");
  ToolCallContext again = Context(kAlice, "mcp-1");
  absl::StatusOr<json> r = tool.CallTool("run_python", {{"code", "2"}, {"sandbox", h}}, again);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["isError"], true);
  EXPECT_THAT(Text(*r), HasSubstr("max_sandboxes_per_credential"));
  EXPECT_EQ(Handle(*r), "") << Text(*r);
  EXPECT_THAT(Text(*r), ::testing::Not(HasSubstr("[sandbox]")));
}

// Sandboxes made without an MCP session may not escape --max_sandboxes_per_credential:
// sandboxd caps the credential's sandboxes at it (and reclaims the least recently used
// idle one), for every creation.
TEST_F(RunPythonHandlesTest, EveryNewSandboxAsksSandboxdForTheCredentialsCap) {
  RunCodeOptions options;
  options.max_sandboxes_per_credential = 3;
  RunCodeTool tool{&sandboxes_, &upstreams_, options};
  for (const char* mcp : {"", "", "mcp-1"}) {
    ToolCallContext ctx = Context(kAlice, mcp);
    ASSERT_TRUE(tool.CallTool("run_python", {{"code", "1"}}, ctx).ok());
  }
  ASSERT_EQ(sandboxes_.rooms().size(), 3u);
  for (const auto& room : sandboxes_.rooms()) {
    EXPECT_EQ(room.owner_limit, 3u);
    EXPECT_TRUE(room.reclaim_idle);
  }
}

// Every stdio gateway process is the credential "stdio" (and every --no_auth client
// "anonymous"): capped in sandboxd, one process's new sandbox would end another's. Those
// gateways ask for no cap there.
TEST_F(RunPythonHandlesTest, AGatewayOfOneSharedCredentialAsksSandboxdForNoCap) {
  RunCodeOptions options;
  options.max_sandboxes_per_credential = 3;
  options.cap_credentials_in_sandboxd = false;
  RunCodeTool tool{&sandboxes_, &upstreams_, options};
  ToolCallContext ctx = Context("stdio", "stdio");
  ASSERT_TRUE(tool.CallTool("run_python", {{"code", "1"}}, ctx).ok());
  ASSERT_EQ(sandboxes_.rooms().size(), 1u);
  EXPECT_EQ(sandboxes_.rooms()[0].owner_limit, 0u);
}

// A gone handle's replacement may not make room by ending another of the credential's live
// sandboxes, whose handle's next run would then do the same. A replacement never reclaims;
// at the limit nothing runs and the result says how to start anew.
TEST_F(RunPythonHandlesTest, AGoneHandlesReplacementNeverEndsAnotherSandbox) {
  const std::string h = Handle(Call({{"code", "a = 1"}}, kAlice, ""));
  sandboxes_.Lose("s1");
  sandboxes_.create_error = absl::ResourceExhaustedError("too many sessions of this owner (the limit is 1 per owner)");
  json r = Call({{"code", "a"}, {"sandbox", h}}, kAlice, "");
  EXPECT_EQ(r["isError"], true);
  EXPECT_THAT(Text(r), HasSubstr("nothing ran. Run without `sandbox` to start a new sandbox"));
  ASSERT_EQ(sandboxes_.rooms().size(), 1u) << "the refused creation is not recorded by the fake";
  sandboxes_.create_error = absl::OkStatus();
  json again = Call({{"code", "a"}, {"sandbox", h}}, kAlice, "");
  ASSERT_EQ(sandboxes_.rooms().size(), 2u);
  EXPECT_FALSE(sandboxes_.rooms()[1].reclaim_idle) << "a replacement may not end another sandbox";
  EXPECT_THAT(Text(again), HasSubstr("the sandbox this handle names is gone"));
}

TEST_F(RunPythonHandlesTest, SandboxAndSessionTogetherAreRefused) {
  const std::string h = Handle(Call({{"code", "1"}}));
  ToolCallContext ctx = Context(kAlice, "mcp-1");
  absl::StatusOr<json> r = tool_.CallTool("run_python", {{"code", "1"}, {"sandbox", h}, {"session", "x"}}, ctx);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  r = tool_.CallTool("run_python", {{"code", "1"}, {"sandbox", 7}}, ctx);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  r = tool_.CallTool("run_python", {{"code", "1"}, {"sandbox", std::string(3000, 'A')}}, ctx);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
}

// Protocol 2026-07-28: a call without an MCP session (session_key "") gets a sandbox of
// its own, named only by the handle in its result, and keeps it by passing that back.
TEST_F(RunPythonHandlesTest, WithoutAnMcpSessionEachFirstRunGetsASandboxItsHandleKeeps) {
  json first = Call({{"code", "a = 1"}}, kAlice, "");
  const std::string h = Handle(first);
  EXPECT_EQ(Text(first), "s1: a = 1\n[sandbox] " + h + "\n") << "no MCP session remembers it: the text names it";
  EXPECT_EQ(first["structuredContent"]["session"], "");
  json again = Call({{"code", "a"}, {"sandbox", h}}, kAlice, "");
  EXPECT_THAT(Text(again), ::testing::StartsWith("s1: a\n"));
  json other = Call({{"code", "b"}}, kAlice, "");
  EXPECT_THAT(Text(other), ::testing::StartsWith("s2: b\n")) << "no handle: a sandbox of its own";
  EXPECT_EQ(sandboxes_.creations().size(), 2u);
  EXPECT_EQ(sandboxes_.creations()[1].owner, "mcp:token alice");
  tool_.SessionClosed("");
  EXPECT_EQ(sandboxes_.live().size(), 2u) << "they belong to no MCP session: sandboxd's idle expiry ends them";
  // A lost one is deleted and replaced, and the result says so.
  sandboxes_.Lose("s1");
  json lost = Call({{"code", "c"}, {"sandbox", h}}, kAlice, "");
  EXPECT_THAT(Text(lost), HasSubstr("[note] the sandbox this handle names is gone"));
  EXPECT_THAT(Text(lost), ::testing::StartsWith("s3: c\n"));
}

TEST_F(RunPythonHandlesTest, WithoutAnMcpSessionANamedSessionIsRefused) {
  ToolCallContext ctx = Context(kAlice, "");
  absl::StatusOr<json> r = tool_.CallTool("run_python", {{"code", "1"}, {"session", "default"}}, ctx);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["isError"], true);
  EXPECT_THAT(Text(*r), HasSubstr("pass the `sandbox` handle"));
  EXPECT_TRUE(sandboxes_.creations().empty());
}

TEST_F(RunPythonHandlesTest, FilesAreReadByHandleUrisOnlyByTheirCredential) {
  const std::string h = Handle(Call({{"code", "1"}}));
  json r = Call({{"code", "out/t.txt=hello"}, {"sandbox", h}});
  ASSERT_EQ(r["structuredContent"]["files"].size(), 1u) << r;
  const std::string uri = r["structuredContent"]["files"][0]["uri"];
  EXPECT_EQ(uri, OutFileUriOfHandle(Handle(r), "t.txt"));
  ToolCallContext mine = Context(kAlice, "mcp-9");
  absl::StatusOr<json> read = tool_.resources()->ReadResource(uri, mine);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)["contents"][0]["text"], "hello");
  ToolCallContext theirs = Context(kBob, "mcp-1");
  absl::StatusOr<json> stolen = tool_.resources()->ReadResource(uri, theirs);
  EXPECT_TRUE(absl::IsNotFound(stolen.status())) << stolen.status();
  EXPECT_EQ(stolen.status().message(), HandleSealer::kInvalidHandle);
  EXPECT_EQ(sandboxes_.downloads().size(), 1u) << "the other credential downloaded nothing";
}

}  // namespace
}  // namespace gateway
