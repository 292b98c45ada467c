// Unit tests of run_service.h, the run core without MCP: a request with an MCP session
// and one without (stateless), an approval put to the request's Asker, and the one audit
// line of a run, refused or not.
#include "bridge/run_service.h"

#include <stdlib.h>

#include <fstream>

#include "bridge_fakes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using testing::FakeSandboxes;
using testing::FakeUpstreams;

// Answers every question with `answer`, and keeps them.
class FakeAsker : public Asker {
 public:
  explicit FakeAsker(ApprovalAnswer answer) : answer_(std::move(answer)) {}
  std::string CannotAsk() const override { return ""; }
  absl::StatusOr<ApprovalAnswer> Ask(const ApprovalAsk& question, absl::Duration,
                                     const std::shared_ptr<codemode::CancelToken>&) override {
    asked.push_back(question);
    return answer_;
  }
  std::vector<ApprovalAsk> asked;

 private:
  const ApprovalAnswer answer_;
};

class RunServiceTest : public ::testing::Test {
 protected:
  RunServiceTest() {
    UpstreamStatus github = testing::Server("github", {"search", "delete_repo"});
    github.tools[1].annotations = {{"destructiveHint", true}};
    upstreams_.SetServers({github});
    sandboxes_.SetScript(testing::CallsNamedByCode("{}"));
  }
  RunRequest Request(const std::string& code, std::optional<std::string> mcp_session) {
    RunRequest r;
    r.language = &Spec(RunLanguage::kPython);
    r.arguments = {{"code", code}};
    r.credential = "token 0";
    r.mcp_session = std::move(mcp_session);
    r.cancel = std::make_shared<codemode::CancelToken>();
    return r;
  }
  std::vector<json> AuditLines() {
    audit_->Flush();
    std::ifstream in(dir_ + "/audit.jsonl");
    std::vector<json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
    return lines;
  }
  RunServiceOptions Options() {
    RunServiceOptions o;
    o.audit = audit_;
    return o;
  }
  static std::string MakeDir() {
    char tmpl[] = "/tmp/run-service-test-XXXXXX";
    return mkdtemp(tmpl);
  }

  std::string dir_ = MakeDir();
  std::shared_ptr<AuditLog> audit_ = *AuditLog::Open({dir_ + "/audit.jsonl"});
  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
  RunService service_{&sandboxes_, &upstreams_, Options()};
};

// A run sees a server that went down with its last known tools (UpstreamMemory); whether a
// run may ask is judged on the same view, so a tool that asks on a down server is still
// asked about, not refused for want of a way to ask.
TEST_F(RunServiceTest, MayAskSeesADownServerAsRunsDo) {
  EXPECT_TRUE(service_.MayAsk()) << "delete_repo is destructive: the default policy asks";
  UpstreamStatus down = testing::Server("github", {}, /*connected=*/false);
  upstreams_.SetServers({down});
  EXPECT_TRUE(service_.MayAsk());
}

TEST_F(RunServiceTest, AnMcpSessionKeepsItsSandboxAStatelessRequestGetsANewOne) {
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<FinishedRun> run = service_.Run(Request("github.search", "mcp-1"));
    ASSERT_TRUE(run.ok()) << run.status();
    ASSERT_TRUE(run->finished.ok()) << run->finished.status();
    EXPECT_EQ(run->report.session, "default");
    EXPECT_FALSE(run->report.sandbox_in_text) << "the MCP session finds its sandbox by name";
  }
  EXPECT_EQ(sandboxes_.creations().size(), 1u);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<FinishedRun> run = service_.Run(Request("github.search", std::nullopt));
    ASSERT_TRUE(run.ok()) << run.status();
    EXPECT_EQ(run->report.session, "");
    EXPECT_FALSE(run->report.sandbox.empty());
    EXPECT_TRUE(run->report.sandbox_in_text) << "only the handle finds it again";
  }
  EXPECT_EQ(sandboxes_.creations().size(), 3u) << "each stateless run without a handle has a sandbox of its own";
  RunRequest named = Request("github.search", std::nullopt);
  named.arguments["session"] = "work";
  absl::StatusOr<FinishedRun> refused = service_.Run(named);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_TRUE(absl::IsInvalidArgument(refused->finished.status())) << "no MCP session to name a sandbox of";
}

TEST_F(RunServiceTest, ACallThatNeedsApprovalIsPutToTheRequestsAsker) {
  FakeAsker asker({ApprovalAnswer::Action::kAccept, "once", {}});
  RunRequest request = Request("github.delete_repo,github.search", "mcp-1");
  request.asker = &asker;
  absl::StatusOr<FinishedRun> run = service_.Run(request);
  ASSERT_TRUE(run.ok() && run->finished.ok());
  EXPECT_EQ(run->finished->stdout(), "-|-");
  ASSERT_EQ(asker.asked.size(), 1u) << "search needs no approval";
  ASSERT_EQ(asker.asked[0].calls.size(), 1u);
  EXPECT_EQ(asker.asked[0].calls[0].server, "github");
  EXPECT_EQ(asker.asked[0].calls[0].tool, "delete_repo");
  EXPECT_EQ(asker.asked[0].run_tool, "run_python");
  EXPECT_EQ(run->report.calls.total, 2u);
  RunRequest nobody = Request("github.delete_repo", "mcp-1");
  run = service_.Run(nobody);
  ASSERT_TRUE(run.ok() && run->finished.ok());
  EXPECT_THAT(run->finished->stdout(), ::testing::HasSubstr("no way to ask its client"));
}

TEST_F(RunServiceTest, EachRunIsOneAuditLineRefusedOrNot) {
  ASSERT_TRUE(service_.Run(Request("github.search", "mcp-1")).ok());
  RunRequest bad = Request("", "mcp-1");
  bad.arguments["code"] = 5;
  EXPECT_TRUE(absl::IsInvalidArgument(service_.Run(bad).status()));
  const std::vector<json> lines = AuditLines();
  std::vector<json> runs;
  for (const json& l : lines) {
    if (l["kind"] == "run") runs.push_back(l);
  }
  ASSERT_EQ(runs.size(), 2u) << json(lines).dump();
  EXPECT_EQ(runs[0]["outcome"], "ok");
  EXPECT_EQ(runs[0]["tool_calls"], 1);
  EXPECT_EQ(runs[0]["tool_calls_failed"], 0);
  EXPECT_EQ(runs[0]["sandbox"], sandboxes_.creations()[0].session_id);
  EXPECT_FALSE(runs[0].contains("why"));
  EXPECT_EQ(runs[1]["outcome"], "refused");
  EXPECT_EQ(runs[1]["sandbox"], "");
  EXPECT_EQ(runs[1]["duration_ms"], 0) << "nothing ran";
  EXPECT_EQ(runs[1]["tool_calls"], 0);
  EXPECT_FALSE(runs[1].contains("tool_calls_failed"));
  EXPECT_THAT(runs[1]["why"].get<std::string>(), ::testing::HasSubstr("code"));
  EXPECT_EQ(runs[1]["code_sha256"], AuditDigest(""));
}

}  // namespace
}  // namespace gateway
