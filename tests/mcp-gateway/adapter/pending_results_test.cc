// PendingRuns' results that no request waits for: kept for a retry, charged to their
// credential's kept results (and through the request's budget to the byte ceiling), refused
// past them with an error naming the flag, and dropped once `keep` passes even when no
// other request comes.
#include <functional>
#include <memory>
#include <string>

#include "base/byte_budget.h"
#include "adapter/pending_runs.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr char kAlice[] = "token aaaaaaaaaaaa";
constexpr char kBob[] = "token bbbbbbbbbbbb";
constexpr size_t kResultText = 60000;

HandleSealer::Key TestKey() {
  HandleSealer::Key key;
  key.fill(7);
  return key;
}

// Polls `done` (the runs' workers finish on their own threads); true once it holds.
bool Eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 2000 && !done(); ++i) absl::SleepFor(absl::Milliseconds(5));
  return done();
}

class PendingResultsTest : public ::testing::Test {
 protected:
  ToolCallContext Context(const std::string& credential) {
    ToolCallContext ctx;
    ctx.cancel = std::make_shared<codemode::CancelToken>();
    ctx.credential = credential;
    ctx.protocol_version = "2026-07-28";
    ctx.client_capabilities = {{"elicitation", json::object()}};
    ctx.stateless = true;
    ctx.budget = budget_;
    return ctx;
  }

  // Starts a run of `credential` whose code asks once, is not answered (the question times
  // out), and then ends with a result holding kResultText bytes of text. Returns the
  // requestState of its question.
  std::string StartAsking(PendingRuns& runs, const std::string& credential) {
    ToolCallContext ctx = Context(credential);
    absl::StatusOr<json> asked = runs.Start(
        [](ToolCallContext& own) -> absl::StatusOr<json> {
          (void)own.ask_client("elicitation/create", {{"message", "allow?"}}, absl::Milliseconds(10), nullptr);
          return json{{"content", {{{"type", "text"}, {"text", std::string(kResultText, 'x')}}}}};
        },
        "run_python", {{"code", "x"}}, ctx);
    EXPECT_TRUE(asked.ok()) << asked.status();
    if (!asked.ok()) return "";
    EXPECT_EQ((*asked)["resultType"], "input_required") << asked->dump();
    return (*asked)["requestState"];
  }

  absl::StatusOr<json> Retry(PendingRuns& runs, const std::string& credential, const std::string& state) {
    ToolCallContext ctx = Context(credential);
    ctx.request_state = state;
    return runs.Resume("run_python", {{"code", "x"}}, ctx);
  }

  HandleSealer sealer_{{TestKey()}, absl::Hours(1)};
  std::shared_ptr<codemode::ByteBudget> budget_;  // what a request's budget draws on (null: none)
  PendingRunsOptions options_;
};

// A finished run nobody comes back for keeps its result for up to `keep`: kept results are
// charged to their credential, or 256 runs of a few MB each would be held on no budget.
TEST_F(PendingResultsTest, KeptResultsAreChargedToTheirCredentialAndRefusedPastIt) {
  options_.max_kept_bytes_per_credential = 100000;
  options_.keep = absl::Hours(1);
  PendingRuns runs(&sealer_, options_);
  const std::string kept = StartAsking(runs, kAlice);
  ASSERT_TRUE(Eventually([&] { return runs.kept_bytes(kAlice) > kResultText; }))
      << "the kept result is charged: " << runs.kept_bytes(kAlice);
  const std::string dropped = StartAsking(runs, kAlice);
  ASSERT_TRUE(Eventually([&] { return runs.results_not_kept() == 1; }));
  const std::string other = StartAsking(runs, kBob);
  ASSERT_TRUE(Eventually([&] { return runs.kept_bytes(kBob) > kResultText; }))
      << "another credential's results are charged to its own budget";
  EXPECT_EQ(runs.results_not_kept(), 1u);

  absl::StatusOr<json> refused = Retry(runs, kAlice, dropped);
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--max_kept_result_bytes_per_credential=100000"));
  absl::StatusOr<json> result = Retry(runs, kAlice, kept);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)["content"][0]["text"].get<std::string>().size(), kResultText);
  EXPECT_EQ(runs.kept_bytes(kAlice), 0u) << "a collected result is released";
  EXPECT_TRUE(Retry(runs, kBob, other).ok());
  EXPECT_EQ(runs.kept_bytes(kBob), 0u);
}

// The request's budget (the credential's share of --max_buffered_bytes and the ceiling)
// holds kept results too, and the refusal names it.
TEST_F(PendingResultsTest, TheByteCeilingHoldsKeptResultsToo) {
  budget_ = std::make_shared<codemode::ByteBudget>("max_buffered_bytes", kResultText / 2);
  PendingRuns runs(&sealer_, options_);
  const std::string state = StartAsking(runs, kAlice);
  ASSERT_TRUE(Eventually([&] { return runs.results_not_kept() == 1; }));
  EXPECT_EQ(budget_->used(), 0u);
  absl::StatusOr<json> refused = Retry(runs, kAlice, state);
  ASSERT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--max_buffered_bytes="));
}

// A kept result is dropped, its bytes released, once `keep` passes, without waiting for
// another request to come (before, only the next Start or Resume dropped it).
TEST_F(PendingResultsTest, AKeptResultIsDroppedWhenKeepPassesWithoutAnotherRequest) {
  budget_ = std::make_shared<codemode::ByteBudget>("max_buffered_bytes", 1 << 20);
  options_.keep = absl::Milliseconds(50);
  PendingRuns runs(&sealer_, options_);
  StartAsking(runs, kAlice);
  ASSERT_TRUE(Eventually([&] { return runs.size() == 0; })) << "the result is still held";
  EXPECT_EQ(runs.kept_bytes(kAlice), 0u);
  EXPECT_EQ(budget_->used(), 0u);
  EXPECT_EQ(runs.results_not_kept(), 0u);
}

}  // namespace
}  // namespace gateway
