// Approvals of protocol 2026-07-28 (multi round-trip requests) through RunCodeTool over
// fakes: a run that asks answers its request with input_required and waits in its sandbox;
// the retry with the answer and the sealed requestState resumes the same run. A tampered
// state, another credential's retry and a retry with other arguments are refused alike and
// leave the run waiting; a retry without the answer is asked again; a run nobody comes back
// for is declined at the timeout and its result kept for a late retry; cancelling the retry
// cancels the run; the bounds hold.
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/strings/str_split.h"
#include "adapter/run_code.h"
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
using testing::Server;
using testing::ToolCallOf;

constexpr char kAlice[] = "token aaaaaaaaaaaa";
constexpr char kBob[] = "token bbbbbbbbbbbb";

class PendingRunsTest : public ::testing::Test {
 protected:
  PendingRunsTest() {
    UpstreamStatus github = Server("github", {"search", "delete_repo"});
    github.tools[1].annotations = {{"destructiveHint", true}};
    upstreams_.SetServers({github});
    sandboxes_.SetScript(testing::CallsNamedByCode(R"({"name":"x"})"));
  }

  // A tools/call of protocol 2026-07-28 by `credential`; `state` and `responses` make it a
  // retry.
  absl::StatusOr<json> Call(RunCodeTool& tool, const std::string& code, const std::string& state = "",
                            json responses = json::object(), const std::string& credential = kAlice,
                            std::shared_ptr<codemode::CancelToken> cancel = nullptr,
                            json capabilities = {{"elicitation", json::object()}}) {
    ToolCallContext ctx;
    ctx.credential = credential;
    ctx.protocol_version = "2026-07-28";
    ctx.cancel = cancel ? cancel : std::make_shared<codemode::CancelToken>();
    ctx.client_capabilities = std::move(capabilities);
    ctx.stateless = true;
    ctx.request_state = state;
    ctx.input_responses = std::move(responses);
    return tool.CallTool("run_python", {{"code", code}}, ctx);
  }
  static json Accept(const std::string& decision) {
    return {{"action", "accept"}, {"content", {{"decision", decision}}}};
  }
  static std::string Stdout(const absl::StatusOr<json>& r) {
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return "";
    EXPECT_FALSE(r->contains("resultType")) << r->dump();
    return (*r)["structuredContent"].value("stdout", "");
  }
  // The input_required result's question key (one question), checking its shape.
  static std::string QuestionOf(const absl::StatusOr<json>& r) {
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return "";
    EXPECT_EQ((*r)["resultType"], "input_required") << r->dump();
    EXPECT_THAT((*r)["requestState"].get<std::string>(), ::testing::StartsWith("rst1_"));
    const json& requests = (*r)["inputRequests"];
    EXPECT_EQ(requests.size(), 1u);
    if (requests.size() != 1) return "";
    EXPECT_EQ(requests.begin().value()["method"], "elicitation/create");
    EXPECT_THAT(requests.begin().value()["params"]["message"].get<std::string>(),
                HasSubstr("tool \"delete_repo\" of server \"github\""));
    return requests.begin().key();
  }
  size_t UpstreamCalls(const std::string& tool) {
    size_t n = 0;
    for (const auto& c : upstreams_.calls()) n += c.tool == tool;
    return n;
  }

  FakeSandboxes sandboxes_;
  FakeUpstreams upstreams_;
  RunCodeOptions options_;
};

TEST_F(PendingRunsTest, TheRetryWithTheAnswerResumesTheSameRun) {
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  const std::string code = "github.search,github.delete_repo,github.search";
  absl::StatusOr<json> first = Call(tool, code);
  const std::string key = QuestionOf(first);
  EXPECT_EQ(UpstreamCalls("search"), 1u) << "the code ran up to the call that asks";
  EXPECT_EQ(UpstreamCalls("delete_repo"), 0u);
  absl::StatusOr<json> done = Call(tool, code, (*first)["requestState"], {{key, Accept("once")}});
  EXPECT_EQ(Stdout(done), "-|-|-");
  EXPECT_EQ(UpstreamCalls("delete_repo"), 1u);
  EXPECT_EQ(UpstreamCalls("search"), 2u) << "the same run went on: nothing ran twice";
  EXPECT_EQ(sandboxes_.executions().size(), 1u);

  // A decline is the code's ToolError, and the code goes on.
  first = Call(tool, code);
  done = Call(tool, code, (*first)["requestState"], {{QuestionOf(first), {{"action", "decline"}}}});
  EXPECT_EQ(Stdout(done), "-|github.delete_repo was declined by the user|-");
  EXPECT_EQ(UpstreamCalls("delete_repo"), 1u);
}

TEST_F(PendingRunsTest, ForgedOrForeignStatesAreRefusedAlikeAndTheRunWaitsOn) {
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  const std::string code = "github.delete_repo";
  absl::StatusOr<json> first = Call(tool, code);
  const std::string key = QuestionOf(first);
  const std::string state = (*first)["requestState"];
  std::string altered = state;
  altered[state.size() / 2] = altered[state.size() / 2] == 'A' ? 'B' : 'A';
  const json approve = {{key, Accept("once")}};
  for (const absl::StatusOr<json>& refused :
       {Call(tool, code, altered, approve), Call(tool, code, state, approve, kBob),
        Call(tool, "github.search", state, approve), Call(tool, code, "rst1_", approve),
        Call(tool, code, "sbx1_" + state.substr(5), approve)}) {
    ASSERT_FALSE(refused.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
    EXPECT_EQ(refused.status().message(), PendingRuns::kInvalidState);
  }
  EXPECT_EQ(UpstreamCalls("delete_repo"), 0u);
  // A retry without the answer is asked again; the genuine answer then goes through.
  absl::StatusOr<json> again = Call(tool, code, state);
  EXPECT_EQ(QuestionOf(again), key);
  EXPECT_EQ(Stdout(Call(tool, code, (*again)["requestState"], approve)), "-");
  // The run is done with: its state no longer finds it.
  absl::StatusOr<json> late = Call(tool, code, state, approve);
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status())) << late.status();
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("not held by this gateway"));
}

TEST_F(PendingRunsTest, AnUnansweredQuestionIsDeclinedAtTheTimeoutAndTheResultKept) {
  options_.approval.timeout = absl::Milliseconds(50);
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  const std::string code = "github.delete_repo,github.search";
  absl::StatusOr<json> first = Call(tool, code);
  QuestionOf(first);
  // Nobody comes back in time: the call is declined, the run ends, its result waits.
  for (int i = 0; i < 200 && UpstreamCalls("search") == 0; ++i) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(UpstreamCalls("search"), 1u);
  absl::StatusOr<json> late = Call(tool, code, (*first)["requestState"], {{"approval-1", Accept("once")}});
  EXPECT_EQ(Stdout(late), "github.delete_repo was not approved: nobody answered within 50ms|-");
  EXPECT_EQ(UpstreamCalls("delete_repo"), 0u);
}

TEST_F(PendingRunsTest, CancellingTheRetryCancelsTheRun) {
  std::atomic<bool> run_cancelled{false};
  sandboxes_.SetScript([&](const FakeSandboxes::Execution&, const ExecuteHandlers& h,
                           std::shared_ptr<codemode::CancelToken> cancel) -> absl::StatusOr<Finished> {
    sandbox::v1::ToolResult r = h.on_tool_call(ToolCallOf("github", "delete_repo", "{}"), {});
    for (int i = 0; i < 500 && !cancel->cancelled(); ++i) absl::SleepFor(absl::Milliseconds(10));
    run_cancelled = cancel->cancelled();
    return absl::CancelledError("cancelled");
  });
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  absl::StatusOr<json> first = Call(tool, "x");
  const std::string key = QuestionOf(first);
  auto cancel = std::make_shared<codemode::CancelToken>();
  std::thread canceller([cancel] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel->Cancel("the client went away");
  });
  absl::StatusOr<json> retry = Call(tool, "x", (*first)["requestState"], {{key, Accept("once")}}, kAlice, cancel);
  canceller.join();
  EXPECT_TRUE(absl::IsCancelled(retry.status())) << retry.status();
  for (int i = 0; i < 200 && !run_cancelled; ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_TRUE(run_cancelled);
}

TEST_F(PendingRunsTest, TheFirstRequestsCancellationAfterItsAnswerDoesNotTouchTheRun) {
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  auto cancel = std::make_shared<codemode::CancelToken>();
  absl::StatusOr<json> first = Call(tool, "github.delete_repo", "", json::object(), kAlice, cancel);
  const std::string key = QuestionOf(first);
  cancel->Cancel("the connection closed after the answer");
  EXPECT_EQ(Stdout(Call(tool, "github.delete_repo", (*first)["requestState"], {{key, Accept("once")}})), "-");
}

TEST_F(PendingRunsTest, RunsWaitingForAnswersAreBoundedPerCredential) {
  options_.pending.max_runs_per_credential = 2;
  options_.max_sandboxes_per_credential = 8;
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  absl::StatusOr<json> a = Call(tool, "github.delete_repo");
  absl::StatusOr<json> b = Call(tool, "github.delete_repo");
  QuestionOf(a);
  QuestionOf(b);
  absl::StatusOr<json> c = Call(tool, "github.delete_repo");
  EXPECT_TRUE(absl::IsResourceExhausted(c.status())) << c.status();
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("2 runs of this credential"));
  // Nothing about other credentials' runs.
  EXPECT_THAT(std::string(c.status().message()), ::testing::Not(HasSubstr("in all")));
  EXPECT_TRUE(Call(tool, "github.search", "", json::object(), kBob).ok()) << "another credential is not held";
  EXPECT_EQ(Stdout(Call(tool, "github.delete_repo", (*a)["requestState"], {{"approval-1", Accept("once")}})), "-");
  EXPECT_EQ(QuestionOf(Call(tool, "github.delete_repo")), "approval-1") << "room again";
}

// A retry's answer racing the question's timeout (run under TSan): every run ends with
// one outcome, approved or declined, and its retry gets it.
TEST_F(PendingRunsTest, AnAnswerRacingTheTimeoutGivesOneOutcome) {
  options_.approval.timeout = absl::Milliseconds(2);
  options_.max_sandboxes_per_credential = 64;
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<json> first = Call(tool, "github.delete_repo");
    ASSERT_TRUE(first.ok()) << first.status();
    if (!first->contains("resultType")) continue;  // declined before the answer went out
    absl::StatusOr<json> done = Call(tool, "github.delete_repo", (*first)["requestState"],
                                     {{"approval-1", Accept("once")}});
    const std::string out = Stdout(done);
    EXPECT_TRUE(out == "-" || absl::StrContains(out, "nobody answered")) << out;
  }
}

// A question whose asker ended (the execution timed out while its call waited) is withdrawn
// at once, not held until --approval_timeout.
TEST_F(PendingRunsTest, AQuestionIsWithdrawnWhenWhatAskedEnds) {
  const HandleSealer sealer({HandleSealer::Key{}}, absl::Hours(1));
  PendingRuns runs(&sealer, {});
  auto execution = std::make_shared<codemode::CancelToken>();
  PendingRuns::Work work = [execution](ToolCallContext& own) -> absl::StatusOr<json> {
    absl::StatusOr<json> answer = own.ask_client("elicitation/create", {{"message", "ok?"}}, absl::Hours(1), execution);
    return json{{"outcome", std::string(absl::StatusCodeToString(answer.status().code()))}};
  };
  ToolCallContext ctx;
  ctx.credential = kAlice;
  ctx.cancel = std::make_shared<codemode::CancelToken>();
  absl::StatusOr<json> asked = runs.Start(work, "run_python", json::object(), ctx);
  ASSERT_TRUE(asked.ok()) << asked.status();
  ASSERT_EQ((*asked)["resultType"], "input_required") << asked->dump();
  execution->Cancel("the execution finished");
  ToolCallContext retry;
  retry.credential = kAlice;
  retry.cancel = std::make_shared<codemode::CancelToken>();
  retry.request_state = (*asked)["requestState"];
  absl::StatusOr<json> done = runs.Resume("run_python", json::object(), retry);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ((*done)["outcome"], "CANCELLED");
}

// The destructor joins its workers: nothing of theirs runs after it returns, not even
// thread-local destructors (CI's TSan run saw OpenSSL's thread-stop handler of a detached
// worker race the process's atexit cleanup). The thread-local here takes 200 ms to go.
struct SlowThreadLocal {
  std::atomic<bool>* gone = nullptr;
  ~SlowThreadLocal() {
    if (!gone) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    gone->store(true);
  }
};

TEST_F(PendingRunsTest, TheDestructorJoinsItsWorkersThreadLocalsIncluded) {
  static std::atomic<bool> gone{false};
  {
    const HandleSealer sealer({HandleSealer::Key{}}, absl::Hours(1));
    PendingRuns runs(&sealer, {});
    PendingRuns::Work work = [](ToolCallContext&) -> absl::StatusOr<json> {
      thread_local SlowThreadLocal slow;
      slow.gone = &gone;
      return json{{"ok", true}};
    };
    ToolCallContext ctx;
    ctx.credential = kAlice;
    ctx.cancel = std::make_shared<codemode::CancelToken>();
    absl::StatusOr<json> done = runs.Start(work, "run_python", json::object(), ctx);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ((*done)["ok"], true);
  }
  EXPECT_TRUE(gone.load()) << "a worker thread outlived ~PendingRuns";
}

// The retry of an older question's state (the answer that carried the newer question was
// lost) gets the question that waits now, at once.
TEST_F(PendingRunsTest, AnOlderQuestionsStateGetsTheCurrentQuestion) {
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  const std::string code = "github.delete_repo,github.delete_repo";
  absl::StatusOr<json> first = Call(tool, code);
  const std::string old_state = (*first)["requestState"];
  absl::StatusOr<json> second = Call(tool, code, old_state, {{QuestionOf(first), Accept("once")}});
  EXPECT_EQ(QuestionOf(second), "approval-2");
  // Its answer is lost; the client tries again with what it has.
  absl::StatusOr<json> again = Call(tool, code, old_state, {{"approval-1", Accept("once")}});
  EXPECT_EQ(QuestionOf(again), "approval-2");
  EXPECT_EQ(Stdout(Call(tool, code, (*again)["requestState"], {{"approval-2", Accept("once")}})), "-|-");
}

// Of retries racing with different answers, the answer that decides is one from a retry
// that was not refused.
TEST_F(PendingRunsTest, ARefusedRetryChangesNothing) {
  options_.max_sandboxes_per_credential = 64;
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<json> first = Call(tool, "github.delete_repo");
    const std::string state = (*first)["requestState"];
    absl::StatusOr<json> approve, decline;
    std::thread a([&] { approve = Call(tool, "github.delete_repo", state, {{"approval-1", Accept("once")}}); });
    std::thread b([&] { decline = Call(tool, "github.delete_repo", state, {{"approval-1", {{"action", "decline"}}}}); });
    a.join();
    b.join();
    for (const absl::StatusOr<json>* r : {&approve, &decline}) {
      if (!r->ok()) {
        EXPECT_TRUE(absl::IsFailedPrecondition(r->status())) << r->status();
        continue;
      }
      if ((*r)->contains("resultType")) continue;  // asked again: the other one's answer came first
      const std::string out = (**r)["structuredContent"].value("stdout", "");
      // The approver's retry that got the result saw its answer applied, unless the
      // decliner's retry was not refused either (then either may have decided).
      if (r == &approve && !decline.ok()) {
        EXPECT_EQ(out, "-");
      }
      if (r == &decline && !approve.ok()) {
        EXPECT_THAT(out, HasSubstr("declined"));
      }
    }
  }
}

// -32021: a retry that answers an elicitation while declaring no elicitation capability is
// told which capability it lacks; the run keeps waiting for a retry that has it.
TEST_F(PendingRunsTest, ARetryWithoutTheCapabilityIsToldWhatItLacks) {
  RunCodeTool tool(&sandboxes_, &upstreams_, options_);
  absl::StatusOr<json> first = Call(tool, "github.delete_repo");
  const std::string key = QuestionOf(first);
  absl::StatusOr<json> lacking = Call(tool, "github.delete_repo", (*first)["requestState"], {{key, Accept("once")}},
                                      kAlice, nullptr, json::object());
  ASSERT_FALSE(lacking.ok());
  EXPECT_EQ(MissingCapabilityOf(lacking.status()), json({{"elicitation", {{"form", json::object()}}}}));
  EXPECT_EQ(UpstreamCalls("delete_repo"), 0u);
  EXPECT_EQ(Stdout(Call(tool, "github.delete_repo", (*first)["requestState"], {{key, Accept("once")}})), "-");
}

}  // namespace
}  // namespace gateway
