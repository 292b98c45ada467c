// Unit tests of run_service.h, the run core without MCP: a request with an MCP session
// and one without (stateless), an approval put to the request's Asker, and the one audit
// line of a run, refused or not, and the catalog a run's sandbox gets, kept while what it
// follows from is unchanged.
#include "bridge/run_service.h"

#include <stdlib.h>

#include <fstream>
#include <thread>

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
  // Runs in MCP session `mcp_session` (with `servers`, unless null) and returns the tools
  // of the catalog its sandbox then holds, "server.tool".
  std::vector<std::string> CatalogTools(const std::string& mcp_session, json servers = nullptr) {
    RunRequest request = Request(",", mcp_session);
    if (!servers.is_null()) request.arguments["servers"] = servers;
    absl::StatusOr<FinishedRun> run = service_.Run(request);
    EXPECT_TRUE(run.ok() && run->finished.ok()) << (run.ok() ? run->finished.status() : run.status());
    std::vector<std::string> tools;
    if (sandboxes_.executions().empty()) return tools;
    const sandbox::v1::Catalog catalog = sandboxes_.catalog_of(sandboxes_.executions().back().session_id);
    for (const auto& server : catalog.servers()) {
      for (const auto& tool : server.tools()) tools.push_back(server.name() + "." + tool.name());
    }
    return tools;
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

using ::testing::ElementsAre;

// Runs keep the catalog while the upstreams are unchanged (no snapshot taken), and a change
// of the upstreams, which bumps their catalog version, is in the next run's catalog.
TEST_F(RunServiceTest, TheCatalogFollowsTheUpstreams) {
  EXPECT_THAT(CatalogTools("mcp-1"), ElementsAre("github.search", "github.delete_repo"));
  const int snapshots = upstreams_.snapshots();
  EXPECT_THAT(CatalogTools("mcp-1"), ElementsAre("github.search", "github.delete_repo"));
  EXPECT_EQ(upstreams_.snapshots(), snapshots) << "nothing changed: the last catalog is kept";
  upstreams_.SetServers({testing::Server("github", {"search", "issues"})});
  EXPECT_THAT(CatalogTools("mcp-1"), ElementsAre("github.search", "github.issues"));
  EXPECT_THAT(CatalogTools("mcp-2"), ElementsAre("github.search", "github.issues"));
}

// The memory of a server that went down is the catalog's too: a snapshot taken before the
// server went down, handed to the memory after a run built the catalog (a slow run, or
// MayAsk), changes what the next run sees at the same catalog version.
TEST_F(RunServiceTest, TheCatalogFollowsTheMemoryOfADownServer) {
  EXPECT_THAT(CatalogTools("mcp-1"), ElementsAre("github.search", "github.delete_repo"));
  upstreams_.SetServers({testing::Server("github", {}, /*connected=*/false)});
  EXPECT_THAT(CatalogTools("mcp-1"), ElementsAre("github.search", "github.delete_repo"))
      << "a down server keeps its last known tools";
  upstreams_.SetServersKeepingVersion({testing::Server("github", {"search", "issues"})});
  service_.MayAsk();  // remembers github as that snapshot shows it
  upstreams_.SetServersKeepingVersion({testing::Server("github", {}, /*connected=*/false)});
  EXPECT_THAT(CatalogTools("mcp-1"), ElementsAre("github.search", "github.issues"));
}

// The run's `servers` chooses the servers of its catalog.
TEST_F(RunServiceTest, TheCatalogFollowsTheRunsServers) {
  upstreams_.SetServers({testing::Server("github", {"search"}), testing::Server("slack", {"post"})});
  EXPECT_THAT(CatalogTools("mcp-1", {"github"}), ElementsAre("github.search"));
  EXPECT_THAT(CatalogTools("mcp-1", {"slack"}), ElementsAre("slack.post"));
  EXPECT_THAT(CatalogTools("mcp-1"), ElementsAre("github.search", "slack.post"));
  EXPECT_THAT(CatalogTools("mcp-1", json::array()), ElementsAre());
  EXPECT_THAT(CatalogTools("mcp-1", {"github"}), ElementsAre("github.search"));
}

// Runs build and share the catalog concurrently while the upstreams change (TSan); once
// they stop changing, a run sees the last of them.
TEST_F(RunServiceTest, ConcurrentRunsShareTheCatalogWhileTheUpstreamsChange) {
  std::vector<std::thread> runners;
  for (int t = 0; t < 4; ++t) {
    runners.emplace_back([this, t] {
      for (int i = 0; i < 25; ++i) {
        RunRequest request = Request(",", "mcp-" + std::to_string(t));
        if (i % 3 == 0) request.arguments["servers"] = {"github"};
        absl::StatusOr<FinishedRun> run = service_.Run(request);
        EXPECT_TRUE(run.ok() && run->finished.ok());
      }
    });
  }
  for (int i = 0; i < 25; ++i) {
    upstreams_.SetServers({testing::Server("github", {"search", "tool_" + std::to_string(i)})});
    if (i % 5 == 0) service_.MayAsk();
  }
  for (std::thread& t : runners) t.join();
  EXPECT_THAT(CatalogTools("mcp-0"), ElementsAre("github.search", "github.tool_24"));
}

}  // namespace
}  // namespace gateway
