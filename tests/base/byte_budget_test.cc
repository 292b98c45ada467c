// ByteBudget and ByteBudgets (base/byte_budget.h): all-or-nothing charges up a tree of
// budgets, the refusing budget named, keyed budgets forgotten when unused, and the
// ceiling's shares.
#include "base/byte_budget.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "gtest/gtest.h"

namespace codemode {
namespace {

TEST(ByteBudgetTest, ChargesEveryParentAllOrNothing) {
  auto global = std::make_shared<ByteBudget>("all", 100);
  ByteBudget a("a", 80, {global}), b("b", 80, {global});
  EXPECT_EQ(a.Charge(60), nullptr);
  EXPECT_EQ(b.Charge(60), global.get());  // b has room, the global budget has not
  EXPECT_EQ(b.used(), 0u);
  EXPECT_EQ(a.Charge(30), &a);  // a has not
  EXPECT_EQ(global->used(), 60u);
  a.Release(60);
  EXPECT_TRUE(b.TryCharge(60));
  EXPECT_EQ(global->used(), 60u);
}

TEST(ByteBudgetTest, ARefusalByALaterParentUndoesTheEarlierOnes) {
  auto kind = std::make_shared<ByteBudget>("kind", 100);
  auto share = std::make_shared<ByteBudget>("share", 10);
  ByteBudget mine("mine", 100, {kind, share});
  const ByteBudget* full = mine.Charge(11);
  ASSERT_EQ(full, share.get());
  EXPECT_EQ(full->Describe(), "--share=10");
  EXPECT_EQ(kind->used(), 0u) << "the charge of the first parent was left behind";
  EXPECT_EQ(mine.used(), 0u);
}

TEST(ByteBudgetTest, ReleaseNeverUnderflows) {
  auto global = std::make_shared<ByteBudget>("all", 100);
  ByteBudget a("a", 100, {global}), b("b", 100, {global});
  ASSERT_TRUE(a.TryCharge(10));
  ASSERT_TRUE(b.TryCharge(10));
  a.Release(50);  // more than a holds: only what it holds leaves the parent
  EXPECT_EQ(a.used(), 0u);
  EXPECT_EQ(global->used(), 10u);
}

TEST(ByteBudgetsTest, AKeysBudgetLivesWhileHeld) {
  auto all = std::make_shared<ByteBudget>("all", 1000);
  ByteBudgets per_key("per_key", 100, {all});
  std::shared_ptr<ByteBudget> a = per_key.Of("a");
  EXPECT_EQ(per_key.Of("a"), a) << "one budget per key while it is held";
  ASSERT_TRUE(a->TryCharge(100));
  EXPECT_EQ(per_key.Of("a")->Charge(1), a.get());
  EXPECT_EQ(per_key.Used("a"), 100u);
  a->Release(100);
  a.reset();
  EXPECT_EQ(per_key.Used("a"), 0u);
  EXPECT_EQ(per_key.Of("b")->limit(), 100u);
}

TEST(BufferCeilingTest, SharesBoundEachCredentialAndAllBoundsEveryone) {
  auto ceiling = std::make_shared<BufferCeiling>(100, 60);
  auto requests = std::make_shared<ByteBudget>("requests", 1000, AllOf(ceiling));
  auto writes = std::make_shared<ByteBudget>("writes", 1000, AllOf(ceiling));
  ByteBudgets requests_of("requests_per_credential", 1000, {requests});
  ByteBudgets writes_of("writes_per_credential", 1000, {writes});
  auto a_requests = requests_of.Of("a", SharesOf(ceiling, "a"));
  auto a_writes = writes_of.Of("a", SharesOf(ceiling, "a"));
  auto b_writes = writes_of.Of("b", SharesOf(ceiling, "b"));
  ASSERT_TRUE(a_requests->TryCharge(40));
  // Two kinds of one credential add up in its share.
  const ByteBudget* full = a_writes->Charge(21);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->flag(), "max_buffered_bytes_per_credential");
  ASSERT_TRUE(a_writes->TryCharge(20));
  // And every credential's in all.
  full = b_writes->Charge(41);
  ASSERT_NE(full, nullptr);
  EXPECT_EQ(full->flag(), "max_buffered_bytes");
  EXPECT_EQ(ceiling->all()->used(), 60u);
  EXPECT_TRUE(b_writes->TryCharge(28)) << "all but the ceiling's reserve (12)";
}

TEST(ByteBudgetTest, AReserveIsKeptForChildrenBelowTheirFairShare) {
  auto all = std::make_shared<ByteBudget>("all", 800);
  ByteBudgets per_key("per_key", 400, {all}, FairReserve(all, 400));
  ASSERT_EQ(FairReserve(all, 400).bytes, 100u);
  ASSERT_EQ(FairReserve(all, 400).floor, 12u);
  auto a = per_key.Of("a"), b = per_key.Of("b"), c = per_key.Of("c"), d = per_key.Of("d");
  ASSERT_TRUE(a->TryCharge(400));
  ASSERT_TRUE(b->TryCharge(250));
  EXPECT_EQ(all->holders(), 2u);
  // Fair shares are 800 / (2 + 1) = 266 now: b past it may not take the last 100.
  EXPECT_EQ(b->Charge(60), all.get()) << "b is past its fair share: the last 100 are not for it";
  ASSERT_TRUE(b->TryCharge(50));
  EXPECT_TRUE(c->TryCharge(60)) << "c holds nothing: the reserve is for it, in large pieces";
  EXPECT_EQ(all->holders(), 3u);
  b->Release(50);  // 90 free, b holds 250 and fair shares are 800 / 4 now
  EXPECT_EQ(b->Charge(1), all.get()) << "b, past its share, may not take the reserve";
  EXPECT_TRUE(c->TryCharge(40)) << "c, at 100 of its 200, still may";
  EXPECT_TRUE(d->TryCharge(12)) << "d gets a piece too";
  EXPECT_EQ(all->used(), 762u);
  a->Release(400);
  b->Release(250);
  EXPECT_EQ(all->holders(), 2u) << "a child holding nothing no longer counts";
  // With one child allowed everything there is no reserve.
  EXPECT_EQ(FairReserve(all, 800).in, nullptr);
}

// Two credentials flooding large results, each inside its share (64 of 128), fill the
// ceiling down to its reserve (the last eighth); a third credential's 3 MiB result (charged
// 4 times) must still fit in the reserve, the flooders' next ones not.
TEST(ByteBudgetTest, TwoFloodersLeaveTheReserveToANewcomersLargeCharges) {
  auto all = std::make_shared<ByteBudget>("max_buffered_bytes", 128);
  ByteBudgets shares("max_buffered_bytes_per_credential", 64, {all}, FairReserve(all, 64));
  auto a = shares.Of("a"), b = shares.Of("b"), c = shares.Of("c");
  ASSERT_TRUE(a->TryCharge(30));
  ASSERT_TRUE(a->TryCharge(26));
  ASSERT_TRUE(b->TryCharge(30));
  ASSERT_TRUE(b->TryCharge(26));
  ASSERT_EQ(all->used(), 112u) << "the two fill the ceiling down to the reserve";
  EXPECT_EQ(a->Charge(4), all.get()) << "a is past its fair share (128 / 3)";
  EXPECT_EQ(b->Charge(4), all.get());
  EXPECT_TRUE(c->TryCharge(12)) << "the newcomer's large charge takes the reserve";
  EXPECT_TRUE(c->TryCharge(4));
  EXPECT_EQ(all->used(), 128u);
  c->Release(16);
  EXPECT_TRUE(c->TryCharge(12)) << "and again once it was released";
}

TEST(ByteBudgetTest, AChildBelowTheFloorMayStillDrawOnTheReserve) {
  auto all = std::make_shared<ByteBudget>("all", 100);
  ByteBudgets per_key("per_key", 80, {all}, ByteReserve{all, 20, 5});
  auto a = per_key.Of("a"), b = per_key.Of("b");
  ASSERT_TRUE(a->TryCharge(80));
  ASSERT_TRUE(b->TryCharge(3));
  EXPECT_TRUE(b->TryCharge(2)) << "b holds 5 after this one: within the floor";
  EXPECT_EQ(b->Charge(1), all.get()) << "past the floor the reserve is kept for others";
  EXPECT_EQ(all->used(), 85u);
}

TEST(ByteBudgetTest, ConcurrentChargesNeverPassALimit) {
  auto all = std::make_shared<ByteBudget>("all", 1000);
  ByteBudgets per_key("per_key", 600, {all});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::shared_ptr<ByteBudget> mine = per_key.Of(t % 2 ? "a" : "b");
      for (int i = 0; i < 20000; ++i) {
        if (mine->TryCharge(7)) {
          EXPECT_LE(all->used(), 1000u);
          mine->Release(7);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(all->used(), 0u);
}

// Many holds growing at once in a budget that fits few of them, each failing when refused:
// refused together, they could all fail before any released, and none would complete. The
// first one refused while nobody waits waits for room instead, and gets it as the others
// fail or finish.
const auto kNever = [] { return false; };

// Waits (at most 10 s) until a charge of `budget` waits for room; whether one does.
bool SomeoneWaits(const ByteBudget& budget) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  while (budget.awaited() == 0 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  return budget.awaited() != 0;
}

// A full budget of 100 bytes and two holds of it, the first holding `first` of them.
struct Full {
  explicit Full(size_t first) {
    EXPECT_EQ(a.GrowBy(first), nullptr);
    EXPECT_EQ(b.GrowBy(100 - first), nullptr);
  }
  std::shared_ptr<ByteBudget> budget = std::make_shared<ByteBudget>("receiving", 100);
  ByteHold a{budget}, b{budget};
};

TEST(ByteHoldTest, OneRefusedHoldWaitsForRoomAndTheOthersFail) {
  Full full(40);
  const SteadyTime later = SteadyDeadline(absl::Seconds(30));
  std::thread waiter([&] {
    EXPECT_EQ(full.a.GrowOrWait(50, later, kNever), nullptr)
        << "the hold was refused instead of waiting for the room a release made";
  });
  ASSERT_TRUE(SomeoneWaits(*full.budget)) << "the refused hold did not wait";
  EXPECT_EQ(full.b.GrowOrWait(10, later, kNever), full.budget.get())
      << "a second hold waited too: each would keep its bytes while it waits for the other's";
  full.b.ShrinkTo(0);  // it failed: its bytes go
  waiter.join();
  EXPECT_EQ(full.a.held(), 90u);
  EXPECT_EQ(full.budget->used(), 90u);
}

TEST(ByteHoldTest, WhileOneWaitsNoOtherChargeTakesItsRoom) {
  Full full(50);
  std::thread waiter([&] {
    EXPECT_EQ(full.a.GrowOrWait(30, SteadyDeadline(absl::Seconds(30)), kNever), nullptr);
  });
  ASSERT_TRUE(SomeoneWaits(*full.budget));
  EXPECT_EQ(full.budget->awaited(), 30u);
  full.b.ShrinkTo(20);  // 30 free: exactly what the waiting hold needs
  EXPECT_FALSE(full.budget->TryCharge(1)) << "a charge took the room the waiting hold needs";
  waiter.join();
  EXPECT_EQ(full.budget->used(), 100u);
}

TEST(ByteHoldTest, AWaitEndsAtItsDeadlineOrWhenGivenUp) {
  Full full(40);
  EXPECT_EQ(full.a.GrowOrWait(20, SteadyDeadline(absl::Milliseconds(20)), kNever), full.budget.get());
  std::atomic<bool> cancelled{false};
  std::thread waiter([&] {
    EXPECT_EQ(full.a.GrowOrWait(20, SteadyDeadline(absl::Hours(1)), [&] { return cancelled.load(); }),
              full.budget.get());
  });
  ASSERT_TRUE(SomeoneWaits(*full.budget));
  cancelled = true;  // the call it answers ended: the wait ends within a poll, not in an hour
  waiter.join();
  EXPECT_EQ(full.budget->awaited(), 0u);
  EXPECT_EQ(full.budget->used(), 100u);
}

// Room that can never come is not waited for: a hold that would pass its budget's limit, a
// charge larger than the limit, a parent's refusal (only the budget's own room is waited for).
TEST(ByteHoldTest, NoWaitForRoomThatCannotCome) {
  Full full(60);
  std::atomic<int> asked{0};
  auto count = [&] {
    ++asked;
    return false;
  };
  const SteadyTime later = SteadyDeadline(absl::Hours(1));
  EXPECT_EQ(full.a.GrowOrWait(50, later, count), full.budget.get()) << "60 + 50 > 100";
  EXPECT_EQ(full.a.GrowOrWait(101, later, count), full.budget.get());
  EXPECT_EQ(asked.load(), 0);
  EXPECT_EQ(full.budget->awaited(), 0u);

  auto parent = std::make_shared<ByteBudget>("all", 50);
  ByteHold child(std::make_shared<ByteBudget>("receiving", 100, ByteBudget::Parents{parent}));
  ASSERT_EQ(child.GrowBy(40), nullptr);
  EXPECT_EQ(child.GrowOrWait(20, later, count), parent.get());
  EXPECT_EQ(asked.load(), 0);
}

}  // namespace
}  // namespace codemode
