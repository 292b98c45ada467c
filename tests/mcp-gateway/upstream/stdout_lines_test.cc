// StdoutLines: a stdio upstream's lines against the receive budgets. A line that stops
// growing is abandoned after the idle timeout; an answer line is charged to its caller once
// its id is read, not to the budget every credential shares; one upstream's part of the
// shared budget is a quarter of it.
#include "upstream/stdout_lines.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "upstream/transport.h"

namespace gateway {
namespace {

using nlohmann::json;

struct Recorder {
  std::vector<std::string> lines;
  std::vector<std::pair<json, absl::Status>> failed;
  std::vector<json> ended;
  std::shared_ptr<codemode::ByteBudget> caller;  // the budget of request 7's caller
};

StdoutLines::Hooks HooksOf(Recorder* r) {
  StdoutLines::Hooks hooks;
  hooks.on_line = [r](const std::string& line) { r->lines.push_back(line); };
  hooks.on_failed = [r](const std::vector<json>& ids, const absl::Status& why) {
    for (const json& id : ids) r->failed.emplace_back(id, why);
  };
  hooks.caller_budget = [r](const json& id) {
    return id == json(7) ? r->caller : nullptr;
  };
  hooks.on_answer_end = [r](const json& id) { r->ended.push_back(id); };
  hooks.may_log = [] { return true; };
  return hooks;
}

void Feed(StdoutLines& lines, const std::string& bytes, absl::Time now) {
  lines.Feed(bytes.data(), bytes.size(), now);
}

TEST(StdoutLinesTest, ALineThatStopsGrowingIsAbandonedAndItsRequestFails) {
  auto shared = std::make_shared<codemode::ByteBudget>("max_upstream_bytes_in_flight", 1 << 20);
  Recorder r;
  StdoutLines lines("s", 1 << 20, shared, absl::Seconds(30), HooksOf(&r));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Feed(lines, R"({"jsonrpc":"2.0","id":3,"result":{"text":")" + std::string(1000, 'x'), t0);
  EXPECT_EQ(shared->used(), lines.held());
  EXPECT_GT(shared->used(), 2000u);
  EXPECT_EQ(lines.PollTimeoutMs(t0), 30001);
  lines.CheckIdle(t0 + absl::Seconds(29));
  EXPECT_GT(shared->used(), 0u);  // not idle long enough
  EXPECT_EQ(lines.PollTimeoutMs(t0 + absl::Seconds(29)), 1001);
  lines.CheckIdle(t0 + absl::Seconds(30));
  EXPECT_EQ(shared->used(), 0u);
  EXPECT_EQ(lines.PollTimeoutMs(t0 + absl::Seconds(30)), -1);  // nothing held: no wake-up
  ASSERT_EQ(r.failed.size(), 1u);
  EXPECT_EQ(r.failed[0].first, json(3));
  EXPECT_TRUE(absl::IsDeadlineExceeded(r.failed[0].second));
  EXPECT_TRUE(absl::StrContains(r.failed[0].second.message(), "--upstream_message_idle_timeout"))
      << r.failed[0].second;
  // The rest of the line, when it comes, is skipped and charges nothing; it fails nothing
  // again; the next line is read.
  Feed(lines, std::string(5000, 'y'), t0 + absl::Seconds(40));
  EXPECT_EQ(shared->used(), 0u);
  Feed(lines, "\"}}\n{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n", t0 + absl::Seconds(41));
  EXPECT_EQ(r.failed.size(), 1u);
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_EQ(json::parse(r.lines[0])["id"], json(4));
  EXPECT_EQ(shared->used(), 0u);
}

TEST(StdoutLinesTest, ALineThatKeepsGrowingIsNotAbandoned) {
  auto shared = std::make_shared<codemode::ByteBudget>("max_upstream_bytes_in_flight", 1 << 20);
  Recorder r;
  StdoutLines lines("s", 1 << 20, shared, absl::Seconds(30), HooksOf(&r));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Feed(lines, R"({"jsonrpc":"2.0","id":3,"result":{"text":")", t0);
  for (int i = 1; i <= 4; ++i) {
    Feed(lines, "x", t0 + absl::Seconds(20 * i));
    lines.CheckIdle(t0 + absl::Seconds(20 * i + 29));
  }
  Feed(lines, "\"}}\n", t0 + absl::Seconds(110));
  EXPECT_TRUE(r.failed.empty());
  EXPECT_EQ(r.lines.size(), 1u);
}

TEST(StdoutLinesTest, AnAnswerIsChargedToItsCallerOnceItsIdIsRead) {
  auto shared = std::make_shared<codemode::ByteBudget>("max_upstream_bytes_in_flight", 1 << 20);
  Recorder r;
  r.caller = std::make_shared<codemode::ByteBudget>("per_credential", 1 << 20);
  StdoutLines lines("s", 1 << 20, shared, absl::Seconds(30), HooksOf(&r));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Feed(lines, R"({"jsonrpc":"2.0","id":7,)", t0);
  Feed(lines, R"("result":{"text":")" + std::string(100000, 'x'), t0);
  EXPECT_EQ(shared->used(), 0u);
  EXPECT_EQ(r.caller->used(), lines.held());
  EXPECT_GT(r.caller->used(), 200000u);
  Feed(lines, "\"}}\n", t0);
  EXPECT_EQ(r.caller->used(), 0u);
  ASSERT_EQ(r.ended.size(), 1u);
  EXPECT_EQ(r.ended[0], json(7));
  // Another request's answer (no caller budget) stays on the shared budget.
  Feed(lines, R"({"jsonrpc":"2.0","id":8,"result":{"text":")" + std::string(1000, 'x'), t0);
  EXPECT_EQ(r.caller->used(), 0u);
  EXPECT_GT(shared->used(), 2000u);
}

// The request fails when its answer is refused, not at a newline that a hostile server may
// never send (the call would wait out its timeout).
TEST(StdoutLinesTest, AnAnswerItsCallerCannotHoldIsSkippedAndItsRequestFails) {
  auto shared = std::make_shared<codemode::ByteBudget>("max_upstream_bytes_in_flight", 1 << 20);
  Recorder r;
  r.caller = std::make_shared<codemode::ByteBudget>("per_credential", 50000);
  StdoutLines lines("s", 1 << 20, shared, absl::Seconds(30), HooksOf(&r));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Feed(lines, R"({"jsonrpc":"2.0","id":7,"result":{"text":")" + std::string(100000, 'x'), t0);
  EXPECT_EQ(shared->used(), 0u);
  EXPECT_EQ(r.caller->used(), 0u);
  EXPECT_EQ(r.failed.size(), 1u) << "not failed until the line's newline";
  Feed(lines, "\"}}\n", t0);
  ASSERT_EQ(r.failed.size(), 1u);  // once
  EXPECT_EQ(r.failed[0].first, json(7));
  EXPECT_TRUE(absl::IsResourceExhausted(r.failed[0].second));
  EXPECT_TRUE(absl::StrContains(r.failed[0].second.message(), "--per_credential=50000"))
      << r.failed[0].second;
  EXPECT_TRUE(r.lines.empty());
}

// The caller of request 7 gives up (timed out, cancelled) while its answer line trickles in
// a byte at a time. The line's charge leaves the caller's budget at once (CheckCallers,
// which the reader runs when a call is abandoned), the rest of the line is skipped, nothing
// is reported failed (nobody waits), and the next line is read.
TEST(StdoutLinesTest, AnAnswerWhoseCallerGaveUpStopsChargingIt) {
  auto shared = std::make_shared<codemode::ByteBudget>("max_upstream_bytes_in_flight", 1 << 20);
  Recorder r;
  r.caller = std::make_shared<codemode::ByteBudget>("per_credential", 1 << 20);
  bool waiting = true;
  StdoutLines::Hooks hooks = HooksOf(&r);
  hooks.is_pending = [&waiting](const json& id) { return waiting && id == json(7); };
  StdoutLines lines("s", 1 << 20, shared, absl::Seconds(30), std::move(hooks));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  Feed(lines, R"({"jsonrpc":"2.0","id":7,"result":{"text":")" + std::string(100000, 'x'), t0);
  EXPECT_GT(r.caller->used(), 200000u);
  lines.CheckCallers();
  EXPECT_GT(r.caller->used(), 200000u);  // still waited for
  waiting = false;
  lines.CheckCallers();
  EXPECT_EQ(r.caller->used(), 0u);
  EXPECT_EQ(shared->used(), 0u);
  EXPECT_EQ(lines.PollTimeoutMs(t0), -1);  // nothing held
  Feed(lines, std::string(5000, 'y'), t0 + absl::Seconds(20));
  EXPECT_EQ(r.caller->used(), 0u);
  EXPECT_EQ(shared->used(), 0u);
  Feed(lines, "\"}}\n{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":{}}\n", t0 + absl::Seconds(21));
  EXPECT_TRUE(r.failed.empty());
  ASSERT_EQ(r.lines.size(), 1u);
  EXPECT_EQ(json::parse(r.lines[0])["id"], json(4));
}

TEST(StdoutLinesTest, OneUpstreamsPartIsAQuarterOfTheReceiveBudget) {
  auto all = std::make_shared<codemode::ByteBudget>("max_upstream_bytes_in_flight", 96 << 20);
  std::shared_ptr<codemode::ByteBudget> part = UpstreamPart(all);
  const codemode::ByteBudget* full = part->Charge((24 << 20) + 1);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->Describe(), "--max_upstream_bytes_in_flight/4=25165824");
  EXPECT_EQ(part->Charge(24 << 20), nullptr);
  EXPECT_EQ(all->used(), size_t{24} << 20);
}

}  // namespace
}  // namespace gateway
