// Unit tests of tool_call_dispatcher.h without gRPC: the answers are written to a recorder
// that stands for the Execute stream (and for a sandbox that does not read them). The caps
// of a run, the calls and bytes of a credential and of everyone, the worker pool growing
// with overlapping calls and shrinking to one idle worker, and an answer racing the run's
// cancel and its end. These run under ThreadSanitizer (scripts/sanitize.sh).
#include "bridge/tool_call_dispatcher.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>

#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "base/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Long enough never to be reached by a passing test; reaching it fails the test.
constexpr absl::Duration kPatience = absl::Seconds(30);

sandbox::v1::ToolCall CallOf(int i, size_t argument_bytes = 16) {
  sandbox::v1::ToolCall c;
  c.set_call_id("c" + std::to_string(i));
  c.set_server("everything");
  c.set_tool("echo");
  c.set_arguments_json("\"" + std::string(argument_bytes - 2, 'a') + "\"");
  return c;
}

// Waits for `done` (polled: some conditions are counts kept by other classes).
bool Eventually(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kPatience;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// The Execute stream's side: records every answer written. Writes of the results of the
// calls named by Block() wait until Unblock(), as a sandbox that reads none of its answers
// stalls them; Close() drops later writes, as the stream does once the run has ended.
class Stream {
 public:
  ToolCallDispatcher::Write Writer() {
    return [this](const sandbox::v1::ExecuteRequest& r) { Write(r); };
  }
  void Block(const std::string& id) {
    codemode::MutexLock lock(&mu_);
    blocking_.insert(id);
  }
  void Unblock() {
    codemode::MutexLock lock(&mu_);
    unblocked_ = true;
  }
  void Close() {
    codemode::MutexLock lock(&mu_);
    closed_ = true;
  }
  // The answer to `id`, once written (an error result when it never is).
  sandbox::v1::ToolResult Await(const std::string& id) {
    codemode::MutexLock lock(&mu_);
    auto written = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return answers_.count(id) > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&written), kPatience)) {
      sandbox::v1::ToolResult never;
      never.set_error("never answered");
      return never;
    }
    return answers_[id];
  }
  // Whether `n` writes are waiting in Block()'s stall.
  bool AwaitBlocked(size_t n) {
    codemode::MutexLock lock(&mu_);
    auto blocked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return blocked_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&blocked), kPatience);
  }
  size_t written() const {
    codemode::MutexLock lock(&mu_);
    return answers_.size();
  }
  size_t dropped() const {
    codemode::MutexLock lock(&mu_);
    return dropped_;
  }

 private:
  void Write(const sandbox::v1::ExecuteRequest& r) {
    codemode::MutexLock lock(&mu_);
    const std::string& id = r.tool_result().call_id();
    if (blocking_.count(id) > 0) {
      ++blocked_;
      auto unblocked = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return unblocked_; };
      mu_.AwaitWithTimeout(absl::Condition(&unblocked), kPatience);
    }
    if (closed_) {
      ++dropped_;
      return;
    }
    answers_[id] = r.tool_result();
  }

  mutable codemode::Mutex mu_;
  std::map<std::string, sandbox::v1::ToolResult> answers_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> blocking_ ABSL_GUARDED_BY(mu_);
  size_t blocked_ ABSL_GUARDED_BY(mu_) = 0;
  bool unblocked_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  size_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// The upstreams' side: on_tool_call answers `result` (each call once released, when
// holding) and counts the calls it was asked.
class Upstream {
 public:
  explicit Upstream(std::string credential = "token 0", bool hold = false) : hold_(hold) {
    handlers_.credential = std::move(credential);
    handlers_.on_tool_call = [this](const sandbox::v1::ToolCall&, const AnswerCharges&) {
      std::string result;
      {
        codemode::MutexLock lock(&mu_);
        ++started_;
        auto released = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !hold_; };
        mu_.AwaitWithTimeout(absl::Condition(&released), kPatience);
        result = result_;
      }
      sandbox::v1::ToolResult r;
      r.set_result_json(result);
      return r;
    };
  }
  const ExecuteHandlers& handlers() const { return handlers_; }
  void Release() {
    codemode::MutexLock lock(&mu_);
    hold_ = false;
  }
  void set_result(std::string json) {
    codemode::MutexLock lock(&mu_);
    result_ = std::move(json);
  }
  // Whether `n` calls reached the upstream.
  bool AwaitStarted(int n) {
    codemode::MutexLock lock(&mu_);
    auto started = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return started_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&started), kPatience);
  }
  int started() const {
    codemode::MutexLock lock(&mu_);
    return started_;
  }

 private:
  ExecuteHandlers handlers_;
  mutable codemode::Mutex mu_;
  bool hold_ ABSL_GUARDED_BY(mu_);
  std::string result_ ABSL_GUARDED_BY(mu_) = "{}";
  int started_ ABSL_GUARDED_BY(mu_) = 0;
};

// Nothing is held once every dispatcher of `credential` has ended.
void ExpectReleased(const ToolCallBudget& budget, const std::string& credential = "token 0") {
  EXPECT_EQ(budget.held(credential), 0u);
  EXPECT_EQ(budget.calls(credential), 0u);
  EXPECT_EQ(budget.total(), 0u);
  EXPECT_EQ(budget.calls_total(), 0u);
}

TEST(ToolCallDispatcherTest, AnswersACallWithItsIdAndReleasesItsCharges) {
  ToolCallBudget budget({});
  Upstream upstream;
  upstream.set_result("{\"ok\":true}");
  Stream stream;
  {
    ToolCallDispatcher calls({}, &budget, upstream.handlers(), stream.Writer());
    calls.Dispatch(CallOf(7));
    sandbox::v1::ToolResult r = stream.Await("c7");
    EXPECT_EQ(r.result_json(), "{\"ok\":true}");
    EXPECT_THAT(r.error(), IsEmpty());
  }  // the destructor joins the workers
  ExpectReleased(budget);
}

// A flood of tool calls must give way to other clients' requests when the CPU is short:
// the calls are answered on threads kWorkerNice above the gateway's nice value.
TEST(ToolCallDispatcherTest, CallsAreAnsweredOnThreadsThatGiveWayToRequests) {
  ToolCallBudget budget({});
  const int base = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
  std::atomic<int> nice{-100};
  ExecuteHandlers handlers;
  handlers.credential = "token 0";
  handlers.on_tool_call = [&nice](const sandbox::v1::ToolCall&, const AnswerCharges&) {
    nice = getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)));
    return sandbox::v1::ToolResult();
  };
  Stream stream;
  {
    ToolCallDispatcher calls({}, &budget, handlers, stream.Writer());
    calls.Dispatch(CallOf(1));
    stream.Await("c1");
  }
  EXPECT_EQ(nice.load(), std::min(base + ToolCallDispatcher::kWorkerNice, 19));
  EXPECT_EQ(getpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid))), base) << "the caller's own thread";
}

TEST(ToolCallDispatcherTest, RefusesTheCallsPastTheRunsCap) {
  ToolCallLimits limits;
  limits.max_per_run = 3;
  ToolCallBudget budget(limits.shared);
  Upstream upstream;
  Stream stream;
  // The run hears of each refusal with what the sandbox is told (for its counts and audit).
  ExecuteHandlers handlers = upstream.handlers();
  std::vector<std::string> refused;  // on the dispatching thread: this one
  handlers.on_tool_call_refused = [&refused](const sandbox::v1::ToolCall& call, const std::string& why) {
    refused.push_back(call.call_id() + ": " + why);
  };
  ToolCallDispatcher calls(limits, &budget, handlers, stream.Writer());
  for (int i = 0; i < 4; ++i) calls.Dispatch(CallOf(i));
  EXPECT_THAT(stream.Await("c3").error(), HasSubstr("more than 3 tool calls"));
  EXPECT_THAT(stream.Await("c3").error(), HasSubstr("--max_tool_calls_per_run"));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(stream.Await("c" + std::to_string(i)).result_json(), "{}");
  calls.JoinAll();
  EXPECT_EQ(upstream.started(), 3);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0], "c3: " + stream.Await("c3").error());
  ExpectReleased(budget);
}

// A call being answered holds its slot: past --max_tool_calls_in_flight the next is refused,
// and admitted again once an answer was written.
TEST(ToolCallDispatcherTest, RefusesTheCallsPastTheInFlightCapUntilOneIsAnswered) {
  ToolCallLimits limits;
  limits.max_in_flight = 2;
  ToolCallBudget budget(limits.shared);
  Upstream upstream("token 0", /*hold=*/true);
  Stream stream;
  ToolCallDispatcher calls(limits, &budget, upstream.handlers(), stream.Writer());
  calls.Dispatch(CallOf(0));
  calls.Dispatch(CallOf(1));
  ASSERT_TRUE(upstream.AwaitStarted(2));
  calls.Dispatch(CallOf(2));
  EXPECT_THAT(stream.Await("c2").error(), HasSubstr("--max_tool_calls_in_flight"));
  upstream.Release();
  EXPECT_EQ(stream.Await("c0").result_json(), "{}");
  EXPECT_EQ(stream.Await("c1").result_json(), "{}");
  calls.Dispatch(CallOf(3));  // the slots were freed before the answers went out
  EXPECT_EQ(stream.Await("c3").result_json(), "{}");
  calls.JoinAll();
  EXPECT_EQ(upstream.started(), 3);
  ExpectReleased(budget);
}

// An answer the sandbox has not taken holds its place: a sandbox that reads none of its
// answers gets at most twice --max_tool_calls_in_flight of them answered.
TEST(ToolCallDispatcherTest, AnswersNotTakenByTheSandboxHoldTheirPlaces) {
  ToolCallLimits limits;
  limits.max_in_flight = 1;
  ToolCallBudget budget(limits.shared);
  Upstream upstream;
  Stream stream;
  stream.Block("c0");
  stream.Block("c1");
  ToolCallDispatcher calls(limits, &budget, upstream.handlers(), stream.Writer());
  calls.Dispatch(CallOf(0));
  ASSERT_TRUE(stream.AwaitBlocked(1));  // answered; its write waits on the sandbox
  calls.Dispatch(CallOf(1));
  ASSERT_TRUE(stream.AwaitBlocked(2));
  calls.Dispatch(CallOf(2));
  EXPECT_THAT(stream.Await("c2").error(), HasSubstr("has not taken the answers of 2 tool calls"));
  EXPECT_EQ(budget.calls("token 0"), 2u) << "the unwritten answers still count";
  stream.Unblock();
  EXPECT_EQ(stream.Await("c0").result_json(), "{}");
  EXPECT_EQ(stream.Await("c1").result_json(), "{}");
  ASSERT_TRUE(Eventually([&] { return budget.calls("token 0") == 0; }));
  calls.Dispatch(CallOf(3));
  EXPECT_EQ(stream.Await("c3").result_json(), "{}");
  calls.JoinAll();
  EXPECT_EQ(upstream.started(), 3);
  ExpectReleased(budget);
}

TEST(ToolCallDispatcherTest, RefusesArgumentsPastTheirBounds) {
  ToolCallLimits limits;
  limits.max_argument_bytes = 100;
  limits.max_argument_bytes_in_flight = 150;
  ToolCallBudget budget(limits.shared);
  Upstream upstream("token 0", /*hold=*/true);
  Stream stream;
  ToolCallDispatcher calls(limits, &budget, upstream.handlers(), stream.Writer());
  calls.Dispatch(CallOf(0, 101));
  EXPECT_THAT(stream.Await("c0").error(), HasSubstr("(the gateway's --max_tool_call_bytes)"));
  calls.Dispatch(CallOf(1, 100));
  ASSERT_TRUE(upstream.AwaitStarted(1));
  calls.Dispatch(CallOf(2, 100));
  EXPECT_THAT(stream.Await("c2").error(), HasSubstr("already carry 100 bytes of arguments"));
  EXPECT_THAT(stream.Await("c2").error(), HasSubstr("--max_tool_call_bytes_in_flight is 150"));
  upstream.Release();
  EXPECT_EQ(stream.Await("c1").result_json(), "{}");
  calls.JoinAll();
  EXPECT_EQ(upstream.started(), 1);
  ExpectReleased(budget);
}

TEST(ToolCallDispatcherTest, ResultsPastTheirBoundBecomeErrors) {
  ToolCallLimits limits;
  limits.max_result_bytes = 10;
  ToolCallBudget budget(limits.shared);
  Upstream upstream;
  upstream.set_result("\"123456789\"");  // 11 bytes
  Stream stream;
  ToolCallDispatcher calls(limits, &budget, upstream.handlers(), stream.Writer());
  calls.Dispatch(CallOf(0));
  EXPECT_THAT(stream.Await("c0").error(), HasSubstr("the result is 11 bytes"));
  EXPECT_THAT(stream.Await("c0").error(), HasSubstr("--max_tool_result_bytes"));
  calls.JoinAll();
  ExpectReleased(budget);
}

TEST(ToolCallDispatcherTest, AFailingOrMissingHandlerAnswersWithAnError) {
  ToolCallBudget budget({});
  ExecuteHandlers throwing;
  throwing.credential = "token 0";
  throwing.on_tool_call = [](const sandbox::v1::ToolCall&,
                             const AnswerCharges&) -> sandbox::v1::ToolResult {
    throw std::runtime_error("the router broke");
  };
  ExecuteHandlers none;
  none.credential = "token 0";
  Stream stream;
  {
    ToolCallDispatcher calls({}, &budget, throwing, stream.Writer());
    calls.Dispatch(CallOf(0));
    EXPECT_THAT(stream.Await("c0").error(), HasSubstr("failed while routing this call"));
  }
  {
    ToolCallDispatcher calls({}, &budget, none, stream.Writer());
    calls.Dispatch(CallOf(1));
    EXPECT_THAT(stream.Await("c1").error(), HasSubstr("does not route tool calls"));
  }
  ExpectReleased(budget);
}

// The bytes a credential's calls hold are bounded over all its runs, whatever each run's
// own bound; another credential still gets its calls answered.
TEST(ToolCallDispatcherTest, ACredentialsArgumentBytesAreBoundedOverItsRuns) {
  ToolCallLimits limits;
  // Two calls of 400 KiB, not three: each is charged ToolCallBudget::kCopies (4) times.
  limits.shared.bytes_per_credential = 4u << 20;
  ToolCallBudget budget(limits.shared);
  Upstream mine("token 0", /*hold=*/true);
  Upstream theirs("token 1");
  Stream stream;
  ToolCallDispatcher run_a(limits, &budget, mine.handlers(), stream.Writer());
  ToolCallDispatcher run_b(limits, &budget, mine.handlers(), stream.Writer());
  ToolCallDispatcher run_c(limits, &budget, theirs.handlers(), stream.Writer());
  run_a.Dispatch(CallOf(0, 400u << 10));
  run_b.Dispatch(CallOf(1, 400u << 10));
  ASSERT_TRUE(mine.AwaitStarted(2));
  run_b.Dispatch(CallOf(2, 400u << 10));
  EXPECT_THAT(stream.Await("c2").error(),
              HasSubstr("--max_tool_call_bytes_in_flight_per_credential"));
  run_c.Dispatch(CallOf(3, 400u << 10));
  EXPECT_EQ(stream.Await("c3").result_json(), "{}");
  mine.Release();
  run_a.JoinAll();
  run_b.JoinAll();
  run_c.JoinAll();
  EXPECT_EQ(mine.started(), 2);
  ExpectReleased(budget);
  ExpectReleased(budget, "token 1");
}

// A result is charged to its credential until it is written: past the budget the sandbox
// gets a ToolError naming it instead.
TEST(ToolCallDispatcherTest, AResultPastTheCredentialsBytesBecomesAnError) {
  ToolCallLimits limits;
  limits.shared.bytes_per_credential = 1u << 20;
  ToolCallBudget budget(limits.shared);
  Upstream upstream;
  upstream.set_result("\"" + std::string(300u << 10, 'r') + "\"");  // x4 > 1 MiB
  Stream stream;
  ToolCallDispatcher calls(limits, &budget, upstream.handlers(), stream.Writer());
  calls.Dispatch(CallOf(0));
  sandbox::v1::ToolResult r = stream.Await("c0");
  EXPECT_THAT(r.error(), HasSubstr("--max_tool_call_bytes_in_flight_per_credential"));
  EXPECT_THAT(r.result_json(), IsEmpty());
  calls.JoinAll();
  ExpectReleased(budget);
}

// The calls in flight are counted per credential over its runs and over everyone.
TEST(ToolCallDispatcherTest, CountsCallsPerCredentialAndInTotal) {
  ToolCallLimits limits;
  limits.shared.calls_per_credential = 2;
  limits.shared.calls_total = 3;
  ToolCallBudget budget(limits.shared);
  Upstream mine("token 0", /*hold=*/true);
  Upstream theirs("token 1", /*hold=*/true);
  Stream stream;
  ToolCallDispatcher run_a(limits, &budget, mine.handlers(), stream.Writer());
  ToolCallDispatcher run_b(limits, &budget, mine.handlers(), stream.Writer());
  ToolCallDispatcher run_c(limits, &budget, theirs.handlers(), stream.Writer());
  run_a.Dispatch(CallOf(0));
  run_b.Dispatch(CallOf(1));
  ASSERT_TRUE(mine.AwaitStarted(2));
  run_b.Dispatch(CallOf(2));
  EXPECT_THAT(stream.Await("c2").error(), HasSubstr("this credential already has 2 tool calls"));
  EXPECT_THAT(stream.Await("c2").error(), HasSubstr("--max_tool_calls_in_flight_per_credential=2"));
  // Everyone's third: the reserve of one call is kept for a credential with none in flight.
  run_c.Dispatch(CallOf(3));
  ASSERT_TRUE(theirs.AwaitStarted(1));
  run_c.Dispatch(CallOf(4));
  EXPECT_THAT(stream.Await("c4").error(), HasSubstr("too many tool calls in flight now"));
  EXPECT_EQ(budget.calls_total(), 3u);
  mine.Release();
  theirs.Release();
  run_a.JoinAll();
  run_b.JoinAll();
  run_c.JoinAll();
  EXPECT_EQ(mine.started(), 2);
  EXPECT_EQ(theirs.started(), 1);
  ExpectReleased(budget);
  ExpectReleased(budget, "token 1");
}

// Overlapping calls get a worker each; once they are answered one worker stays for the
// next call and the others end, and the idle one takes the next call without a new thread.
TEST(ToolCallDispatcherTest, WorkersGrowWithOverlappingCallsAndShrinkToOneIdle) {
  constexpr int kCalls = 8;
  ToolCallBudget budget({});
  Upstream upstream("token 0", /*hold=*/true);
  Stream stream;
  ToolCallDispatcher calls({}, &budget, upstream.handlers(), stream.Writer());
  for (int i = 0; i < kCalls; ++i) calls.Dispatch(CallOf(i));
  ASSERT_TRUE(upstream.AwaitStarted(kCalls)) << "the calls did not overlap";
  EXPECT_EQ(calls.workers_running(), static_cast<size_t>(kCalls));
  upstream.Release();
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(stream.Await("c" + std::to_string(i)).result_json(), "{}");
  ASSERT_TRUE(Eventually([&] { return calls.workers_running() == 1; }))
      << calls.workers_running() << " workers stayed after the burst";
  calls.Dispatch(CallOf(kCalls));
  EXPECT_EQ(calls.workers_running(), 1u) << "the idle worker takes the call";
  EXPECT_EQ(stream.Await("c" + std::to_string(kCalls)).result_json(), "{}");
  calls.JoinAll();
  EXPECT_EQ(calls.workers_running(), 0u);
  ExpectReleased(budget);
}

// The end of a run (the stream closes, then JoinAll) races the answers of calls that the
// run's cancel is just ending: each answer is written or dropped, never lost in between,
// JoinAll returns with every worker joined and nothing stays charged. Repeated, so that
// ThreadSanitizer sees the orders interleave.
TEST(ToolCallDispatcherTest, AnswersRacingACancelAndTheEndOfTheRunAreJoinedAndReleased) {
  ToolCallBudget budget({});
  for (int round = 0; round < 50; ++round) {
    Upstream upstream("token 0", /*hold=*/true);
    Stream stream;
    ToolCallDispatcher calls({}, &budget, upstream.handlers(), stream.Writer());
    calls.Dispatch(CallOf(0));
    calls.Dispatch(CallOf(1));
    ASSERT_TRUE(upstream.AwaitStarted(2));
    std::thread cancel([&] { upstream.Release(); });  // the run's cancel ends the calls
    if (round % 2 == 0) stream.Close();  // the stream ended first
    calls.JoinAll();
    stream.Close();
    cancel.join();
    EXPECT_EQ(stream.written() + stream.dropped(), 2u) << "round " << round;
    EXPECT_EQ(calls.workers_running(), 0u) << "round " << round;
    ExpectReleased(budget);
  }
}

}  // namespace
}  // namespace gateway
