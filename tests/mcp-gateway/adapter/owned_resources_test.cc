// The resources of a request without an MCP session (protocol 2026-07-28) through
// RunCodeTool: resources/list shows every sandbox of the caller's credential by handle
// URI, nothing of another credential's, and only what a credential that names one client
// may see (owned_resources.h); and the watch behind resources/list_changed
// (resource_watch.h) tells a subscriber of changes made here and elsewhere.
#include <atomic>

#include "absl/strings/str_split.h"
#include "absl/synchronization/notification.h"
#include "adapter/run_code.h"
#include "bridge_fakes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log_capture.h"

namespace gateway {
namespace {

using nlohmann::json;
using sandbox::v1::Finished;
using testing::FakeSandboxes;
using testing::FakeUpstreams;

// Code "writes" the files it lists: "out/a.txt=bytes;out/b.csv=..."; "#" writes nothing.
void WriteFilesScript(FakeSandboxes& sandboxes) {
  sandboxes.SetScript([&sandboxes](const FakeSandboxes::Execution& e, const ExecuteHandlers&,
                                   std::shared_ptr<codemode::CancelToken>) -> absl::StatusOr<Finished> {
    for (absl::string_view item : absl::StrSplit(e.code, ';', absl::SkipEmpty())) {
      if (item.find('=') == absl::string_view::npos) continue;
      std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
      sandboxes.PutFile(e.session_id, kv.first, kv.second);
    }
    Finished f;
    f.set_status(Finished::OK);
    return f;
  });
}

class OwnedResourcesTest : public ::testing::Test {
 protected:
  OwnedResourcesTest() { WriteFilesScript(sandboxes_); }

  ToolCallContext Context(const std::string& credential, const std::string& mcp = "") {
    ToolCallContext ctx;
    if (!mcp.empty()) ctx.mcp_session = mcp;
    ctx.credential = credential;
    ctx.protocol_version = mcp.empty() ? "2026-07-28" : "2025-11-25";
    ctx.cancel = std::make_shared<codemode::CancelToken>();
    ctx.progress = [](double, std::optional<double>, const std::string&) {};
    ctx.resources_changed = [] {};
    return ctx;
  }
  json Run(RunCodeTool& tool, const std::string& code, const std::string& credential,
           const std::string& mcp = "") {
    ToolCallContext ctx = Context(credential, mcp);
    absl::StatusOr<json> r = tool.CallTool("run_python", {{"code", code}}, ctx);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : json();
  }
  json List(RunCodeTool& tool, const std::string& credential, const std::string& cursor = "") {
    ToolCallContext ctx = Context(credential);
    absl::StatusOr<json> r = tool.resources()->ListOwnedResources(cursor, ctx);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? (*r)["resources"] : json();
  }
  std::vector<std::string> Names(const json& resources) {
    std::vector<std::string> names;
    for (const json& r : resources) names.push_back(r["name"]);
    return names;
  }

  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
};

TEST_F(OwnedResourcesTest, ACredentialListsEverySandboxItHoldsByHandleAndNothingElse) {
  RunCodeTool tool(&sandboxes_, &upstreams_, {});
  json first = Run(tool, "out/a.txt=A", "token a");
  Run(tool, "out/b.txt=BB", "token a", "mcp-1");  // a 2025 session of the same credential
  Run(tool, "out/secret.txt=S", "token b");
  json mine = List(tool, "token a");
  ASSERT_EQ(mine.size(), 2u) << mine;
  EXPECT_THAT(Names(mine), ::testing::ElementsAre("a.txt", "b.txt"));
  const std::string uri = mine[0]["uri"];
  EXPECT_EQ(uri.rfind("sandbox://handle/", 0), 0u) << uri;
  EXPECT_EQ(mine[0]["title"], "sandbox 1: out/a.txt");
  EXPECT_EQ(mine[1]["size"], 2);
  // The URI reads for its credential, from a request without a session or with one.
  ToolCallContext ctx = Context("token a", "mcp-9");
  absl::StatusOr<json> read = tool.resources()->ReadResource(uri, ctx);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ((*read)["contents"][0]["text"], "A");
  // Another credential sees only its own, and cannot read this one's.
  EXPECT_THAT(Names(List(tool, "token b")), ::testing::ElementsAre("secret.txt"));
  ToolCallContext other = Context("token b");
  EXPECT_TRUE(absl::IsNotFound(tool.resources()->ReadResource(uri, other).status()));
  EXPECT_TRUE(List(tool, "token c").empty());
}

TEST_F(OwnedResourcesTest, ListingPagesWithACursor) {
  RunCodeOptions options;
  options.resources.list_page_size = 1;
  RunCodeTool tool(&sandboxes_, &upstreams_, options);
  Run(tool, "out/a.txt=A;out/b.txt=B", "token a");
  ToolCallContext ctx = Context("token a");
  absl::StatusOr<json> page = tool.resources()->ListOwnedResources("", ctx);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ((*page)["resources"].size(), 1u);
  ASSERT_EQ((*page)["nextCursor"], "1");
  EXPECT_THAT(Names(List(tool, "token a", "1")), ::testing::ElementsAre("b.txt"));
  EXPECT_TRUE(absl::IsInvalidArgument(tool.resources()->ListOwnedResources("x", ctx).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(tool.resources()->ListOwnedResources(std::string(21, '1'), ctx).status()));
  for (const char* odd : {" 1", "+1", "1 ", "-0"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(tool.resources()->ListOwnedResources(odd, ctx).status())) << odd;
  }
}

// Where a credential names no one client, sandboxd's owner is shared by all of them.
TEST_F(OwnedResourcesTest, ACredentialOfManyClientsListsOnlyWhatThisProcessMadeOrNothing) {
  RunCodeTool other_process(&sandboxes_, &upstreams_, {});
  Run(other_process, "out/theirs.txt=T", "stdio");
  RunCodeOptions options;
  options.owned_scope = OwnedScope::kThisProcess;
  RunCodeTool stdio(&sandboxes_, &upstreams_, options);
  Run(stdio, "out/mine.txt=M", "stdio");
  EXPECT_THAT(Names(List(stdio, "stdio")), ::testing::ElementsAre("mine.txt"));
  EXPECT_THAT(Names(List(other_process, "stdio")), ::testing::ElementsAre("theirs.txt", "mine.txt"))
      << "with sandboxd's view, both (which is why stdio does not use it)";
  options.owned_scope = OwnedScope::kNone;
  RunCodeTool anonymous(&sandboxes_, &upstreams_, options);
  Run(anonymous, "out/x.txt=X", "anonymous");
  EXPECT_TRUE(List(anonymous, "anonymous").empty());
}

// Counts a subscriber's calls; Ready() waits for its acknowledgement.
struct Subscriber {
  std::atomic<int> changes{0};
  absl::Notification ready;
  std::shared_ptr<void> Subscribe(RunCodeTool& tool, const std::string& credential) {
    return tool.resources()->WatchResources(credential, [this] { ready.Notify(); }, [this] { ++changes; });
  }
  bool Ready() { return ready.WaitForNotificationWithTimeout(absl::Seconds(30)); }
};

// A look is over when a later subscriber of the credential is ready: its first look is the
// one (or after the one) that followed what the test did, and calls go in subscription order.
void WaitForALook(RunCodeTool& tool, const std::string& credential) {
  Subscriber barrier;
  std::shared_ptr<void> sub = barrier.Subscribe(tool, credential);
  ASSERT_TRUE(barrier.Ready());
}

TEST_F(OwnedResourcesTest, TheWatchAnnouncesARunThatChangedTheListAndNotOneThatDidNot) {
  RunCodeOptions options;
  options.resources_poll_interval = absl::ZeroDuration();  // only runs here
  RunCodeTool tool(&sandboxes_, &upstreams_, options);
  json r = Run(tool, "out/a.txt=A", "token a");
  const std::string handle = r["structuredContent"]["sandbox"];
  Subscriber a;
  std::shared_ptr<void> sub = a.Subscribe(tool, "token a");
  ASSERT_TRUE(a.Ready());
  EXPECT_EQ(a.changes, 0);
  ToolCallContext ctx = Context("token a");
  ASSERT_TRUE(tool.CallTool("run_python", {{"code", "#"}, {"sandbox", handle}}, ctx).ok());
  WaitForALook(tool, "token a");
  EXPECT_EQ(a.changes, 0) << "the run changed nothing";
  ASSERT_TRUE(tool.CallTool("run_python", {{"code", "out/b.txt=B"}, {"sandbox", handle}}, ctx).ok());
  // No other look comes (no periodic ones, no new subscriber): the run's own.
  for (int i = 0; i < 3000 && a.changes == 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(a.changes, 1);
  Run(tool, "out/c.txt=C", "token b");  // another credential's
  WaitForALook(tool, "token a");
  EXPECT_EQ(a.changes, 1);
  sub.reset();
  ASSERT_TRUE(tool.CallTool("run_python", {{"code", "out/d.txt=D"}, {"sandbox", handle}}, ctx).ok());
  WaitForALook(tool, "token a");
  EXPECT_EQ(a.changes, 1) << "a dropped subscription hears nothing";
}

// A change this gateway did not make (another replica's run, a sandbox that ended) is
// found by the periodic look.
TEST_F(OwnedResourcesTest, TheWatchFindsChangesMadeElsewhere) {
  RunCodeOptions options;
  options.resources_poll_interval = absl::Milliseconds(100);
  RunCodeTool tool(&sandboxes_, &upstreams_, options);
  json r = Run(tool, "out/a.txt=A", "token a");
  Subscriber a;
  std::shared_ptr<void> sub = a.Subscribe(tool, "token a");
  ASSERT_TRUE(a.Ready());
  const SandboxRef ref{0, sandboxes_.executions().back().session_id};
  // A run through another replica: sandboxd counts one more execution.
  auto run_elsewhere = [&](const std::string& code) {
    ASSERT_TRUE(sandboxes_.Execute(ref, code, 1000, nullptr, ExecuteHandlers{}, nullptr).ok());
  };
  run_elsewhere("out/elsewhere.txt=E");
  for (int i = 0; i < 3000 && a.changes == 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(a.changes, 1);
  // An endpoint that does not answer is no change (nor is its coming back).
  sandboxes_.list_owned_incomplete = true;
  WaitForALook(tool, "token a");
  sandboxes_.list_owned_incomplete = false;
  WaitForALook(tool, "token a");
  EXPECT_EQ(a.changes, 1);
  // A file removed is a change too.
  sandboxes_.RemoveFile(ref.session_id, "out/elsewhere.txt");
  run_elsewhere("#");
  for (int i = 0; i < 3000 && a.changes == 1; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(a.changes, 2);
}

// A client listing again and again while a host is down does not make a log line each time.
TEST_F(OwnedResourcesTest, AnIncompleteListingIsLoggedAtMostInBursts) {
  RunCodeTool tool(&sandboxes_, &upstreams_, RunCodeOptions{});
  Run(tool, "out/a.txt=A", "token a");
  sandboxes_.list_owned_incomplete = true;
  testlog::LogCapture log;
  for (int i = 0; i < 40; ++i) List(tool, "token a");
  const int lines = log.Count("some of its sandboxes could not be listed");
  EXPECT_GE(lines, 1);
  EXPECT_LE(lines, 12) << "40 incomplete listings in a moment were each logged";
}

// An idle listener must not have every out/ of its credential walked each interval: a
// sandbox that has not run since the last look is not walked again.
TEST_F(OwnedResourcesTest, ASandboxThatHasNotRunIsNotWalkedAgain) {
  RunCodeOptions options;
  options.resources_poll_interval = absl::ZeroDuration();
  RunCodeTool tool(&sandboxes_, &upstreams_, options);
  Run(tool, "out/a.txt=A", "token a");
  Subscriber a;
  std::shared_ptr<void> sub = a.Subscribe(tool, "token a");
  ASSERT_TRUE(a.Ready());
  const int walked = sandboxes_.list_calls();
  for (int i = 0; i < 3; ++i) WaitForALook(tool, "token a");
  EXPECT_EQ(sandboxes_.list_calls(), walked) << "three looks, no run: nothing listed";
}

// Sandboxed code answers its own listings and reads and may stall them while the request
// holds one of the few read slots: a resources/list ends within --resources_list_timeout,
// each sandbox's walk within a quarter of it (the others are still listed), and a
// resources/read within --resources_read_timeout, with an error naming it.
TEST_F(OwnedResourcesTest, AStalledSandboxHoldsAListOrAReadOnlyUntilItsTimeout) {
  RunCodeOptions options;
  options.resources.list_timeout = absl::Milliseconds(400);
  options.resources.read_timeout = absl::Milliseconds(200);
  RunCodeTool tool(&sandboxes_, &upstreams_, options);
  Run(tool, "out/a.txt=A", "token a");
  Run(tool, "out/b.txt=B", "token a");
  const json both = List(tool, "token a");
  ASSERT_EQ(both.size(), 2u) << both;
  const std::string stalled_uri = both[0]["uri"];
  sandboxes_.Stall(sandboxes_.executions()[0].session_id);  // the first one listed
  const size_t earlier = sandboxes_.file_deadlines().size();

  EXPECT_THAT(Names(List(tool, "token a")), ::testing::ElementsAre("b.txt"));
  ToolCallContext ctx = Context("token a");
  absl::StatusOr<json> read = tool.resources()->ReadResource(stalled_uri, ctx);
  EXPECT_TRUE(absl::IsDeadlineExceeded(read.status())) << read.status();
  EXPECT_THAT(read.status().message(), ::testing::HasSubstr("--resources_read_timeout"));
  // Every file call had a deadline, and each has passed by now: none waited unbounded; the
  // listing of the credential's sandboxes had the list's.
  const std::vector<absl::Time> owned = sandboxes_.owned_deadlines();
  ASSERT_FALSE(owned.empty());
  EXPECT_LE(owned.back(), absl::Now() + options.resources.list_timeout);
  const std::vector<absl::Time> deadlines = sandboxes_.file_deadlines();
  ASSERT_GT(deadlines.size(), earlier);
  const absl::Time now = absl::Now();
  for (size_t i = earlier; i < deadlines.size(); ++i) EXPECT_LE(deadlines[i], now) << "call " << i;
}

// A credential's sandboxes are walked at once, so stalled ones listed before a healthy one
// cannot spend the whole list's time and hide its files; and the answer says what is
// missing (without naming sandboxd's addresses).
TEST_F(OwnedResourcesTest, StalledSandboxesDoNotHideAHealthyOnesFiles) {
  RunCodeOptions options;
  options.resources.list_timeout = absl::Milliseconds(400);
  RunCodeTool tool(&sandboxes_, &upstreams_, options);
  for (int i = 0; i < 4; ++i) Run(tool, absl::StrCat("out/frozen", i, ".txt=F"), "token a");
  Run(tool, "out/healthy.txt=H", "token a");
  for (int i = 0; i < 4; ++i) sandboxes_.Stall(sandboxes_.executions()[i].session_id);
  ToolCallContext ctx = Context("token a");
  absl::StatusOr<json> r = tool.resources()->ListOwnedResources("", ctx);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Names((*r)["resources"]), ::testing::ElementsAre("healthy.txt"));
  ASSERT_TRUE(r->contains("_meta")) << *r;
  const std::string note = (*r)["_meta"].value("codemode/incomplete", "");
  EXPECT_THAT(note, ::testing::HasSubstr("the files of 4 sandbox(es)")) << *r;
  // Complete lists say nothing.
  Run(tool, "out/b.txt=B", "token b");
  ToolCallContext b = Context("token b");
  absl::StatusOr<json> other = tool.resources()->ListOwnedResources("", b);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->contains("_meta")) << *other;
}

// Sandboxed code answers its own listings: one that never answers holds its credential's
// look only until the look's timeout.
TEST_F(OwnedResourcesTest, AStalledListingDoesNotHoldTheWatch) {
  RunCodeOptions options;
  options.resources_poll_interval = absl::ZeroDuration();
  options.resources_look_timeout = absl::Milliseconds(200);
  RunCodeTool tool(&sandboxes_, &upstreams_, options);
  Run(tool, "out/a.txt=A", "token a");
  Run(tool, "out/b.txt=B", "token b");
  const std::string stalled = sandboxes_.executions()[0].session_id;
  sandboxes_.before_list_of = [&](const std::string& session, std::shared_ptr<codemode::CancelToken> cancel) {
    if (session != stalled || cancel == nullptr) return;
    auto done = std::make_shared<absl::Notification>();
    cancel->OnCancel([done] { done->Notify(); });
    done->WaitForNotificationWithTimeout(absl::Seconds(120));  // "never"
  };
  Subscriber a, b;
  std::shared_ptr<void> sub_a = a.Subscribe(tool, "token a");
  std::shared_ptr<void> sub_b = b.Subscribe(tool, "token b");
  EXPECT_TRUE(a.Ready()) << "acknowledged after the look was given up";
  EXPECT_TRUE(b.Ready());
  EXPECT_EQ(a.changes + b.changes, 0);
}

// A stalled look of one tenant must not hold every other tenant's acknowledgements and
// notifications until its timeout, as it would with one thread for every credential.
TEST_F(OwnedResourcesTest, AStalledLookOfOneCredentialDelaysNoOther) {
  RunCodeOptions options;
  options.resources_poll_interval = absl::ZeroDuration();
  options.resources_look_timeout = absl::Minutes(10);  // longer than the waits below
  Run(*std::make_unique<RunCodeTool>(&sandboxes_, &upstreams_, options), "out/a.txt=A", "token a");
  const std::string stalled = sandboxes_.executions()[0].session_id;
  auto release = std::make_shared<absl::Notification>();
  sandboxes_.before_list_of = [&, release](const std::string& session, std::shared_ptr<codemode::CancelToken> cancel) {
    if (cancel == nullptr || session != stalled) return;
    cancel->OnCancel([release] { if (!release->HasBeenNotified()) release->Notify(); });
    release->WaitForNotification();  // until the watch gives up (its destructor cancels)
  };
  RunCodeTool tool(&sandboxes_, &upstreams_, options);
  Run(tool, "out/b.txt=B", "token b");
  Subscriber a, b;
  std::shared_ptr<void> sub_a = a.Subscribe(tool, "token a");
  absl::SleepFor(absl::Milliseconds(50));  // a's look is under way (it is not asserted)
  std::shared_ptr<void> sub_b = b.Subscribe(tool, "token b");
  EXPECT_TRUE(b.Ready()) << "b's acknowledgement waited for a's stalled look";
  Run(tool, "out/b2.txt=B", "token b");
  for (int i = 0; i < 3000 && b.changes == 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(b.changes, 1);
  EXPECT_FALSE(a.ready.HasBeenNotified());
}

}  // namespace
}  // namespace gateway
