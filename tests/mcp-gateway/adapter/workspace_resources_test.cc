// Produced files through RunCodeTool: resource_link blocks for what a run created or
// changed under out/, resources/list and templates per MCP session, resources/read (text
// and blob, caps, errors), and the rule that matters most: one MCP session can never read
// another's files, whatever URI it sends.
#include "adapter/run_code.h"

#include <thread>

#include "absl/strings/escaping.h"
#include "absl/synchronization/notification.h"
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

class WorkspaceResourcesTest : public ::testing::Test {
 protected:
  WorkspaceResourcesTest() {
    // Code "writes" the files listed in the run's code: "out/a.png=bytes;out/b.csv=...";
    // "#" writes nothing.
    sandboxes_.SetScript([this](const FakeSandboxes::Execution& e, const ExecuteHandlers&,
                                std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
      for (absl::string_view item : absl::StrSplit(e.code, ';', absl::SkipEmpty())) {
        if (item.find('=') == absl::string_view::npos) continue;  // "#": writes nothing
        std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
        sandboxes_.PutFile(e.session_id, kv.first, kv.second);
      }
      Finished f;
      f.set_status(Finished::OK);
      f.set_out_digest(digest_);
      return f;
    });
  }

  ToolCallContext Context(const std::string& mcp, const std::string& version = "2025-11-25") {
    ToolCallContext ctx;
    if (!mcp.empty()) ctx.mcp_session = mcp;
    ctx.protocol_version = version;
    ctx.cancel = std::make_shared<codemode::CancelToken>();
    ctx.progress = [](double, std::optional<double>, const std::string&) {};
    ctx.resources_changed = [this] { ++changed_; };
    return ctx;
  }
  json Run(const std::string& code, const std::string& mcp = "mcp-1",
           const std::string& version = "2025-11-25", const std::string& session = "default") {
    ToolCallContext ctx = Context(mcp, version);
    absl::StatusOr<json> r = tool_.CallTool("run_python", {{"code", code}, {"session", session}}, ctx);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : json();
  }
  static json Links(const json& result) {
    json links = json::array();
    for (const json& block : result["content"]) {
      if (block["type"] == "resource_link") links.push_back(block);
    }
    return links;
  }
  absl::StatusOr<json> Read(const std::string& uri, const std::string& mcp = "mcp-1") {
    ToolCallContext ctx = Context(mcp);
    return tool_.resources()->ReadResource(uri, ctx);
  }

  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
  RunCodeOptions options_;
  RunCodeTool tool_{&sandboxes_, &upstreams_, options_};
  int changed_ = 0;
  std::string digest_;  // the runner's fingerprint of out/ in every Finished
};

TEST_F(WorkspaceResourcesTest, ARunLinksTheFilesItCreatedOrChanged) {
  json r = Run("out/chart.png=PNG;out/data/t.csv=a,b;in/x.txt=not out");
  json links = Links(r);
  ASSERT_EQ(links.size(), 2u) << r;
  EXPECT_EQ(links[0], json({{"type", "resource_link"},
                            {"uri", "sandbox://session/default/out/chart.png"},
                            {"name", "chart.png"},
                            {"mimeType", "image/png"},
                            {"size", 3}}));
  EXPECT_EQ(links[1]["uri"], "sandbox://session/default/out/data/t.csv");
  EXPECT_EQ(r["structuredContent"]["files_produced"], 2);
  EXPECT_EQ(r["structuredContent"]["files"][1]["path"], "/workspace/out/data/t.csv");
  EXPECT_THAT(r["content"][0]["text"].get<std::string>(), HasSubstr("chart.png, data/t.csv"));
  EXPECT_EQ(changed_, 1);

  json again = Run("#");
  EXPECT_TRUE(Links(again).empty()) << "nothing changed: " << again;
  EXPECT_EQ(changed_, 1) << "no list_changed when nothing changed";
  json changed = Run("out/data/t.csv=a,b,c");
  ASSERT_EQ(Links(changed).size(), 1u);
  EXPECT_EQ(Links(changed)[0]["size"], 5);
}

TEST_F(WorkspaceResourcesTest, OlderClientsGetTheUrisAsText) {
  json r = Run("out/chart.png=PNG", "mcp-1", "2025-03-26");
  EXPECT_TRUE(Links(r).empty()) << "resource_link is not in protocol 2025-03-26";
  EXPECT_THAT(r["content"][0]["text"].get<std::string>(),
              HasSubstr("chart.png (sandbox://session/default/out/chart.png)"));
}

TEST_F(WorkspaceResourcesTest, ReadReturnsTextOrABlob) {
  Run("out/t.csv=a,b\n1,2;out/p.png=\x89PNG;out/bad.txt=\xff\xfe");
  absl::StatusOr<json> csv = Read("sandbox://session/default/out/t.csv");
  ASSERT_TRUE(csv.ok()) << csv.status();
  EXPECT_EQ((*csv)["contents"][0],
            json({{"uri", "sandbox://session/default/out/t.csv"}, {"mimeType", "text/csv"},
                  {"text", "a,b\n1,2"}}));
  absl::StatusOr<json> png = Read("sandbox://session/default/out/p.png");
  ASSERT_TRUE(png.ok());
  EXPECT_EQ((*png)["contents"][0]["blob"], absl::Base64Escape("\x89PNG"));
  absl::StatusOr<json> bad = Read("sandbox://session/default/out/bad.txt");
  ASSERT_TRUE(bad.ok());
  EXPECT_TRUE((*bad)["contents"][0].contains("blob")) << "not UTF-8: sent as a blob";
  EXPECT_EQ(sandboxes_.downloads().back().path, "out/bad.txt");
}

// notifications/cancelled for a resources/read (or its session closing) cancels the
// request's token; the download in sandboxd must end with it, not run on for its 60 s.
TEST_F(WorkspaceResourcesTest, ACancelledReadCancelsItsDownload) {
  Run("out/slow.bin=bytes");
  absl::Notification started;
  sandboxes_.before_download = [&](const std::string&, std::shared_ptr<codemode::CancelToken> t) {
    started.Notify();
    if (t == nullptr) return absl::InternalError("the download has no cancel token");
    auto cancelled = std::make_shared<absl::Notification>();  // the token may outlive us
    t->OnCancel([cancelled] { cancelled->Notify(); });
    if (!cancelled->WaitForNotificationWithTimeout(absl::Seconds(30))) {
      return absl::DeadlineExceededError("the download ran on after its read was cancelled");
    }
    return absl::CancelledError("the download was cancelled");
  };
  ToolCallContext ctx = Context("mcp-1");
  absl::StatusOr<json> read;
  std::thread reader([&] { read = tool_.resources()->ReadResource("sandbox://session/default/out/slow.bin", ctx); });
  started.WaitForNotification();
  ctx.cancel->Cancel("client cancelled");
  reader.join();
  EXPECT_EQ(read.status().code(), absl::StatusCode::kCancelled) << read.status();
}

// The walk of out/ after a run is the run's work: notifications/cancelled (or the client
// leaving) during it must stop it. It calls ListFiles with the run's token; without it, a
// cancelled run would still walk up to 64 directories through sandboxd.
TEST_F(WorkspaceResourcesTest, CancellingARunStopsItsWalkOfOut) {
  std::string code;
  for (int i = 0; i < 10; ++i) absl::StrAppend(&code, "out/d", i, "/f.txt=x;");
  ToolCallContext ctx = Context("mcp-1");
  int listed_after_cancel = 0;
  sandboxes_.before_list = [&](const std::string&, std::shared_ptr<codemode::CancelToken>) {
    if (ctx.cancel->cancelled()) ++listed_after_cancel;
    // The client cancels while the walk lists its second directory.
    if (sandboxes_.list_calls() == 1) ctx.cancel->Cancel("client cancelled");
  };
  absl::StatusOr<json> r = tool_.CallTool("run_python", {{"code", code}}, ctx);
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<std::shared_ptr<codemode::CancelToken>> tokens = sandboxes_.list_tokens();
  ASSERT_EQ(tokens.size(), 2u) << "the walk went on after the run was cancelled";
  for (const auto& t : tokens) EXPECT_EQ(t, ctx.cancel) << "ListFiles without the run's token";
  EXPECT_TRUE(tokens.back()->cancelled()) << "sandboxd sees the listing in flight cancelled";
  EXPECT_EQ(listed_after_cancel, 0);
  EXPECT_EQ(changed_, 0) << "a walk cut short reports nothing";
}

TEST_F(WorkspaceResourcesTest, AnotherMcpSessionCannotReadTheFiles) {
  Run("out/secret.txt=mine", "mcp-1");
  const std::string uri = "sandbox://session/default/out/secret.txt";
  ASSERT_TRUE(Read(uri, "mcp-1").ok());
  // mcp-2 has no session at all: not found, and nothing was downloaded for it.
  const size_t downloads = sandboxes_.downloads().size();
  EXPECT_TRUE(absl::IsNotFound(Read(uri, "mcp-2").status()));
  EXPECT_EQ(sandboxes_.downloads().size(), downloads);
  // mcp-2 with a session of the same name: the URI names mcp-2's own workspace.
  Run("out/other.txt=theirs", "mcp-2");
  absl::StatusOr<json> theirs = Read(uri, "mcp-2");
  EXPECT_TRUE(absl::IsNotFound(theirs.status())) << theirs.status();
  EXPECT_EQ(sandboxes_.downloads().back().session_id, "s2");
  json list = *tool_.resources()->ListResources("mcp-2", "");
  ASSERT_EQ(list["resources"].size(), 1u);
  EXPECT_EQ(list["resources"][0]["name"], "other.txt");
}

TEST_F(WorkspaceResourcesTest, ListAndTemplatesCoverEachSessionOfTheCaller) {
  EXPECT_EQ(*tool_.resources()->ListResources("mcp-1", ""), json({{"resources", json::array()}}));
  Run("out/a.txt=1");
  Run("out/b.txt=2", "mcp-1", "2025-11-25", "side");
  json list = *tool_.resources()->ListResources("mcp-1", "");
  ASSERT_EQ(list["resources"].size(), 2u);
  EXPECT_EQ(list["resources"][0]["uri"], "sandbox://session/default/out/a.txt");
  EXPECT_EQ(list["resources"][1]["uri"], "sandbox://session/side/out/b.txt");
  EXPECT_EQ(list["resources"][1]["mimeType"], "text/plain");
  EXPECT_TRUE(list["resources"][1]["annotations"].contains("lastModified"));
  json templates = *tool_.resources()->ListResourceTemplates("mcp-1");
  ASSERT_EQ(templates["resourceTemplates"].size(), 3u);
  EXPECT_EQ(templates["resourceTemplates"][1]["uriTemplate"], "sandbox://session/side/out/{+path}");
  EXPECT_EQ(templates["resourceTemplates"][2]["uriTemplate"], "sandbox://handle/{sandbox}/out/{+path}");
  sandboxes_.RemoveFile("s1", "out/a.txt");
  Run("#");
  EXPECT_EQ((*tool_.resources()->ListResources("mcp-1", ""))["resources"].size(), 1u) << "a.txt is gone";
}

// resources/list is paged: a client with many files gets pages of list_page_size and a
// nextCursor, never one answer as large as all its sessions' files.
TEST_F(WorkspaceResourcesTest, ResourcesListIsPagedWithNextCursor) {
  RunCodeOptions paged;
  paged.resources.list_page_size = 3;
  RunCodeTool tool(&sandboxes_, &upstreams_, paged);
  ToolCallContext ctx = Context("mcp-1");
  ASSERT_TRUE(tool.CallTool("run_python", {{"code", "out/a=1;out/b=2;out/c=3;out/d=4"}}, ctx).ok());
  ASSERT_TRUE(tool.CallTool("run_python", {{"code", "out/e=5;out/f=6"}, {"session", "side"}}, ctx).ok());
  std::vector<std::string> uris;
  std::string cursor;
  int pages = 0;
  do {
    absl::StatusOr<json> page = tool.resources()->ListResources("mcp-1", cursor);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE((*page)["resources"].size(), 3u);
    for (const json& r : (*page)["resources"]) uris.push_back(r["uri"]);
    cursor = page->value("nextCursor", "");
    ++pages;
  } while (!cursor.empty() && pages < 10);
  EXPECT_EQ(pages, 2);
  EXPECT_THAT(uris, ::testing::ElementsAre(
                        "sandbox://session/default/out/a", "sandbox://session/default/out/b",
                        "sandbox://session/default/out/c", "sandbox://session/default/out/d",
                        "sandbox://session/side/out/e", "sandbox://session/side/out/f"));
  EXPECT_TRUE(absl::IsInvalidArgument(tool.resources()->ListResources("mcp-1", "nonsense").status()));
  EXPECT_TRUE((*tool.resources()->ListResources("mcp-1", "99"))["resources"].empty()) << "past the end";
}

TEST_F(WorkspaceResourcesTest, ReadErrorsSayWhatIsWrong) {
  Run("out/a.txt=1");
  EXPECT_TRUE(absl::IsInvalidArgument(Read("sandbox://session/default/in/a.txt").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(Read("sandbox://session/default/out/../in/a.txt").status()));
  absl::StatusOr<json> missing = Read("sandbox://session/default/out/nope.txt");
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/workspace/out/nope.txt"));
  EXPECT_TRUE(absl::IsNotFound(Read("sandbox://session/other/out/a.txt").status()));
}

TEST_F(WorkspaceResourcesTest, ReadsAreCapped) {
  RunCodeOptions small;
  small.resources.max_read_bytes = 4;
  RunCodeTool tool(&sandboxes_, &upstreams_, small);
  ToolCallContext ctx = Context("mcp-1");
  ASSERT_TRUE(tool.CallTool("run_python", {{"code", "out/big.txt=12345"}}, ctx).ok());
  absl::StatusOr<json> big = tool.resources()->ReadResource("sandbox://session/default/out/big.txt", ctx);
  EXPECT_TRUE(absl::IsResourceExhausted(big.status())) << big.status();
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("from code"));
}

// A read holds the file's copies (WorkspaceResources::kReadCopies) against the caller's
// share of the byte ceiling while its answer is made, and gives them back once it is.
TEST_F(WorkspaceResourcesTest, ReadsAreChargedToTheCallersBudgetUntilAnswered) {
  ToolCallContext ctx = Context("mcp-1");
  ASSERT_TRUE(tool_.CallTool("run_python", {{"code", "out/five.txt=12345"}}, ctx).ok());
  const std::string uri = "sandbox://session/default/out/five.txt";
  ctx.budget = std::make_shared<codemode::ByteBudget>("--test_budget", 3 * 5 - 1);
  absl::StatusOr<json> refused = tool_.resources()->ReadResource(uri, ctx);
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--test_budget"));
  EXPECT_EQ(ctx.budget->used(), 0u);
  ctx.budget = std::make_shared<codemode::ByteBudget>("--test_budget", 3 * 5);
  absl::StatusOr<json> read = tool_.resources()->ReadResource(uri, ctx);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)["contents"][0]["text"], "12345");
  EXPECT_EQ(ctx.budget->used(), 0u) << "the hold ends with the answer";
}

// A run that finishes as sandboxd goes down for a restart: its files cannot be listed
// then, and the note says what happened (the code ran, the files stay) rather than only
// that they "could not be listed" (issue 49); the next run lists them.
TEST_F(WorkspaceResourcesTest, FilesNotListedAcrossARestartAreListedByTheNextRun) {
  sandboxes_.list_answer = [](const std::string&, uint32_t) -> absl::StatusOr<sandbox::v1::ListFilesResponse> {
    return absl::UnavailableError("sandboxd unix:/run/user/1000/sandboxd/sandboxd.sock is unavailable");
  };
  json r = Run("out/made.txt=x");
  EXPECT_TRUE(Links(r).empty());
  const std::string text = r["content"][0]["text"].get<std::string>();
  EXPECT_THAT(text, HasSubstr("the code ran, but the files under /workspace/out/ were not listed"));
  EXPECT_THAT(text, HasSubstr("sandboxd was unavailable right after the run"));
  EXPECT_THAT(text, HasSubstr("the next run lists what changed"));

  sandboxes_.list_answer = nullptr;
  json next = Run("#");
  ASSERT_EQ(Links(next).size(), 1u) << next;
  EXPECT_EQ(Links(next)[0]["uri"], "sandbox://session/default/out/made.txt");
}

TEST_F(WorkspaceResourcesTest, AWideOutDirectoryIsBoundedAndSaysSo) {
  std::string code;
  for (int i = 0; i < 150; ++i) code += "out/f" + std::to_string(1000 + i) + ".txt=x;";
  json r = Run(code);
  EXPECT_EQ(Links(r).size(), 100u) << "at most 100 links in one result";
  EXPECT_EQ(r["structuredContent"]["files_produced"], 150);
  EXPECT_EQ(r["structuredContent"]["files"].size(), 100u);
}

// Code that prints 100,000 bytes (execution `id`, the runner's fingerprint `digest`).
FakeSandboxes::Script LongStdout(uint64_t id, const std::string& digest) {
  return [id, digest](const FakeSandboxes::Execution&, const ExecuteHandlers&,
                      std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    Finished f;
    f.set_status(Finished::OK);
    f.set_execution_id(id);
    f.set_stdout(std::string(100000, 'x'));
    f.set_out_digest(digest);
    return f;
  };
}

TEST_F(WorkspaceResourcesTest, ASpilledStdoutIsAProducedFile) {
  sandboxes_.SetScript(LongStdout(7, ""));
  json r = Run("print('x' * 100000)");
  ASSERT_EQ(Links(r).size(), 1u) << r;
  EXPECT_EQ(Links(r)[0]["uri"], "sandbox://session/default/out/run_python/stdout-7.txt");
  absl::StatusOr<json> read = Read(Links(r)[0]["uri"]);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ((*read)["contents"][0]["text"].get<std::string>().size(), 100000u);
}

TEST_F(WorkspaceResourcesTest, AnUnchangedFingerprintOfOutSkipsTheWalk) {
  digest_ = "d1";
  ASSERT_EQ(Links(Run("out/a.txt=x")).size(), 1u);
  const int walked = sandboxes_.list_calls();
  EXPECT_GT(walked, 0);
  json same = Run("#");
  EXPECT_TRUE(Links(same).empty()) << same;
  EXPECT_EQ(sandboxes_.list_calls(), walked) << "out/ is as the last walk found it: no ListFiles";
  digest_ = "d2";
  json other = Run("out/b.txt=y");
  ASSERT_EQ(Links(other).size(), 1u) << other;
  EXPECT_EQ(Links(other)[0]["uri"], "sandbox://session/default/out/b.txt");
  EXPECT_GT(sandboxes_.list_calls(), walked);
  absl::StatusOr<json> listed = tool_.resources()->ListResources("mcp-1", "");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ((*listed)["resources"].size(), 2u) << *listed;
}

TEST_F(WorkspaceResourcesTest, WithoutAFingerprintEveryRunWalks) {
  Run("out/a.txt=x");
  const int walked = sandboxes_.list_calls();
  Run("#");
  EXPECT_GT(sandboxes_.list_calls(), walked);
}

TEST_F(WorkspaceResourcesTest, AWalkThatFailedIsNotSkippedByTheNextRun) {
  digest_ = "d1";
  sandboxes_.list_answer = [](const std::string&, uint32_t) -> absl::StatusOr<sandbox::v1::ListFilesResponse> {
    return absl::UnavailableError("sandboxd is unavailable");
  };
  EXPECT_TRUE(Links(Run("out/made.txt=x")).empty());
  sandboxes_.list_answer = nullptr;
  json next = Run("#");  // the same fingerprint, but no walk followed it
  ASSERT_EQ(Links(next).size(), 1u) << next;
  EXPECT_EQ(Links(next)[0]["uri"], "sandbox://session/default/out/made.txt");
}

TEST_F(WorkspaceResourcesTest, AStdoutSpilledAfterTheFingerprintIsStillListed) {
  digest_ = "d1";
  Run("#");
  // The fingerprint was taken before the gateway wrote the stdout into out/.
  sandboxes_.SetScript(LongStdout(8, "d1"));
  json r = Run("print('x' * 100000)");
  ASSERT_EQ(Links(r).size(), 1u) << r;
  EXPECT_EQ(Links(r)[0]["uri"], "sandbox://session/default/out/run_python/stdout-8.txt");
}

TEST_F(WorkspaceResourcesTest, ASkippedWalkStillSaysOutIsTooLarge) {
  digest_ = "d1";
  std::string code;
  for (int i = 0; i < 1001; ++i) code += "out/f" + std::to_string(10000 + i) + ".txt=x;";
  const std::string kTooLarge = "/workspace/out/ is larger than the gateway follows";
  EXPECT_THAT(Run(code)["content"][0]["text"].get<std::string>(), HasSubstr(kTooLarge));
  const int walked = sandboxes_.list_calls();
  EXPECT_THAT(Run("#")["content"][0]["text"].get<std::string>(), HasSubstr(kTooLarge));
  EXPECT_EQ(sandboxes_.list_calls(), walked);
}

}  // namespace
}  // namespace gateway
