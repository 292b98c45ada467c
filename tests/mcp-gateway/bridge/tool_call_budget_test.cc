// Unit tests of tool_call_budget.h: the bytes and the calls of tool calls, per credential
// and in total, the reserve kept for light credentials, and the gateway's byte ceiling.
#include "bridge/tool_call_budget.h"

#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

using ::testing::HasSubstr;

ToolCallBudgetOptions BudgetOptions(size_t bytes_per_credential, size_t bytes_total,
                                    size_t calls_per_credential = 128, size_t calls_total = 512) {
  ToolCallBudgetOptions o;
  o.bytes_per_credential = bytes_per_credential;
  o.bytes_total = bytes_total;
  o.calls_per_credential = calls_per_credential;
  o.calls_total = calls_total;
  return o;
}

TEST(ToolCallBudgetTest, ChargesPerCredentialAndInTotal) {
  ToolCallBudget budget(BudgetOptions(100, 150));
  std::shared_ptr<codemode::ByteBudget> a = budget.Of("a"), b = budget.Of("b"), c = budget.Of("c");
  EXPECT_EQ(a->Charge(100), nullptr);
  const codemode::ByteBudget* full = a->Charge(1);
  ASSERT_NE(full, nullptr);
  EXPECT_THAT(ToolCallBudget::Refusal(*full, *a), HasSubstr("--max_tool_call_bytes_in_flight_per_credential=100"));
  EXPECT_EQ(b->Charge(32), nullptr);  // all but the total's reserve (18)
  // Past b's fair share (150 / 3) the reserve is not for b.
  full = b->Charge(19);
  ASSERT_NE(full, nullptr);
  EXPECT_THAT(ToolCallBudget::Refusal(*full, *b), HasSubstr("--max_tool_call_bytes_in_flight_total=150"));
  a->Release(60);
  EXPECT_EQ(c->Charge(10), nullptr);
  EXPECT_EQ(budget.held("a"), 40u);
  EXPECT_EQ(budget.total(), 82u);
}

TEST(ToolCallBudgetTest, CountsCallsPerCredentialAndInTotalWithAReserve) {
  ToolCallBudget budget(BudgetOptions(1 << 20, 1 << 20, 8, 12));
  std::shared_ptr<codemode::ByteBudget> a = budget.CallsOf("a"), b = budget.CallsOf("b"),
                                        c = budget.CallsOf("c");
  for (int i = 0; i < 8; ++i) ASSERT_EQ(a->Charge(1), nullptr) << i;
  const codemode::ByteBudget* full = a->Charge(1);
  ASSERT_NE(full, nullptr);
  EXPECT_THAT(ToolCallBudget::CallRefusal(*full, *a),
              HasSubstr("--max_tool_calls_in_flight_per_credential=8"));
  // c, holding calls, may not take the last eighth of the total (one call): 3, not 4.
  for (int i = 0; i < 3; ++i) ASSERT_EQ(c->Charge(1), nullptr) << i;
  full = c->Charge(1);
  ASSERT_NE(full, nullptr);
  EXPECT_THAT(ToolCallBudget::CallRefusal(*full, *c),
              HasSubstr("--max_tool_calls_in_flight_total=12"));
  // That last one is b's, which holds none.
  EXPECT_EQ(b->Charge(1), nullptr);
  EXPECT_EQ(budget.calls("c"), 3u);
  EXPECT_EQ(budget.calls_total(), 12u);
  a->Release(8);
  EXPECT_EQ(c->Charge(1), nullptr);
  EXPECT_EQ(budget.held("a"), 0u) << "counts are not bytes";
}

// Four credentials flooding up to the reserve leave a fifth its first few calls, not one at
// a time: 512 in total, 64 kept, each credential may draw on the reserve while it has fewer
// than 8 in flight.
TEST(ToolCallBudgetTest, ALightCredentialGetsSeveralCallsWhileOthersFlood) {
  ToolCallBudget budget(BudgetOptions(1 << 20, 1 << 20, 128, 512));
  std::vector<std::shared_ptr<codemode::ByteBudget>> flooders;
  for (int f = 0; f < 4; ++f) {
    flooders.push_back(budget.CallsOf(absl::StrCat("flood ", f)));
    while (flooders.back()->Charge(1) == nullptr) {
    }
  }
  ASSERT_EQ(budget.calls_total(), 448u) << "the flooders leave the reserve";
  std::vector<std::shared_ptr<codemode::ByteBudget>> lights;
  for (int v = 0; v < 8; ++v) {
    lights.push_back(budget.CallsOf(absl::StrCat("light ", v)));
    const std::shared_ptr<codemode::ByteBudget>& light = lights.back();
    for (int i = 0; i < 8; ++i) EXPECT_EQ(light->Charge(1), nullptr) << "light " << v << " call " << i;
    const codemode::ByteBudget* full = light->Charge(1);
    ASSERT_NE(full, nullptr) << "a ninth call is not for the reserve";
    EXPECT_THAT(ToolCallBudget::CallRefusal(*full, *light),
                HasSubstr("--max_tool_calls_in_flight_total=512"));
  }
  EXPECT_EQ(budget.calls_total(), 512u);
}

// The gateway's byte ceiling bounds tool calls too: a credential's share, then everyone's.
TEST(ToolCallBudgetTest, DrawsOnTheCeiling) {
  auto ceiling = std::make_shared<codemode::BufferCeiling>(120, 80);
  ToolCallBudgetOptions options = BudgetOptions(100, 150);
  options.ceiling = ceiling;
  ToolCallBudget budget(options);
  std::shared_ptr<codemode::ByteBudget> a = budget.Of("a"), b = budget.Of("b");
  EXPECT_EQ(a->Charge(80), nullptr);
  const codemode::ByteBudget* full = a->Charge(1);
  ASSERT_NE(full, nullptr);
  EXPECT_THAT(ToolCallBudget::Refusal(*full, *a), HasSubstr("--max_buffered_bytes_per_credential=80"));
  full = b->Charge(41);
  ASSERT_NE(full, nullptr);
  EXPECT_THAT(ToolCallBudget::Refusal(*full, *b), HasSubstr("--max_buffered_bytes=120"));
  EXPECT_EQ(ceiling->all()->used(), 80u) << "a refused charge leaves nothing behind";
  a->Release(80);
  EXPECT_EQ(b->Charge(41), nullptr);
}

}  // namespace
}  // namespace gateway
