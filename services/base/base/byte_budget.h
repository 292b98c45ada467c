// ByteBudget: a count of bytes a peer has made us hold, against a limit and against every
// ancestor's. The gateway keeps one tree of them so that no peer can make it hold more than
// so much per connection, session or credential, per kind (request bodies, queued
// responses, replay, call arguments, tool-call bytes) and, at the root, overall
// (--max_buffered_bytes, and a credential's share of it).
//
//   auto all = std::make_shared<ByteBudget>("max_buffered_bytes", 128 << 20);
//   auto writes = std::make_shared<ByteBudget>("max_pending_write_bytes", 96 << 20,
//                                              ByteBudget::Parents{all});
//   if (const ByteBudget* full = writes->Charge(n)) refuse(full->Describe());
//   ...
//   writes->Release(n);
//
// A charge walks every path to the roots, in the order of the parents, so give a budget at
// most one path to each ancestor (or it is charged twice), and list a parent whose reserve
// is kept in a budget before the parent through which the charge reaches that budget. Locks
// are taken child before parent; the graph has no cycles, so that order is a partial order
// and cannot deadlock.
//
// Holds that grow piece by piece and fail when refused (an answer read as it arrives) can
// all be refused at once when many grow together, each failing before any failure has
// released its bytes, so that none completes. Such holds grow with ByteHold::GrowOrWait: the
// first one its budget refuses while nobody waits on it waits for room instead of failing,
// and while it waits no other charge takes that room; the others are refused as before, and
// their failures make the room. So one of them always completes if it fits alone.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <map>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "base/mutex.h"

namespace codemode {

class ByteBudget;

// Fairness among the children of a budget: a charge that takes a child past `floor` bytes
// may not take the last `bytes` of `in`, which are kept for children that hold little or
// nothing, in pieces of up to `floor` each. Without it, two credentials whose shares add up
// to the whole could leave a third nothing at all; without the floor, a third would get one
// piece at a time (a count of calls: one call in flight, never two, while four others hold
// the rest); and were a child holding nothing exempt whatever it charged, a flooding
// credential whose bytes were released for a moment could take the whole reserve with one
// large charge, and every other credential's next small response would be refused.
//
// With `fair_share` (FairReserve), the floor also grows to the child's fair share: `in`'s
// limit divided by one more than the children holding bytes now (counting the one
// charging), as a fair scheduler sizes shares by who is active. A newcomer, below its share,
// may take the reserve in large pieces (a 3 MiB tool result), while two credentials each
// above theirs cannot fill it (with a fixed floor a newcomer gets few of its large results).
// The "one more" keeps a share free for the next newcomer: with the count alone,
// two flooders each below half of the ceiling could take the reserve too.
struct ByteReserve {
  std::shared_ptr<ByteBudget> in;
  size_t bytes = 0;
  size_t floor = 0;  // what a child may hold and still draw on the reserve
  bool fair_share = false;
};

class ByteBudget {
 public:
  using Parents = std::vector<std::shared_ptr<ByteBudget>>;
  using Reserve = ByteReserve;

  // `flag` names the bound in refusals, without dashes ("max_pending_write_bytes").
  ByteBudget(std::string flag, size_t limit, Parents parents = {}, Reserve reserve = {})
      : flag_(std::move(flag)), limit_(limit), parents_(std::move(parents)),
        reserve_(std::move(reserve)) {}
  ByteBudget(const ByteBudget&) = delete;
  ByteBudget& operator=(const ByteBudget&) = delete;

  // nullptr when `bytes` are now charged here and in every ancestor; otherwise the budget
  // that refused them, and nothing is charged anywhere.
  const ByteBudget* Charge(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Charge(), except that when this budget itself has no room for `bytes` (at most its
  // limit) and no other charge waits on it, waits for releases until they fit, `deadline`
  // passes or `give_up()` says so (asked every kGiveUpPoll, with this budget locked: it may
  // read flags, not take locks), keeping the room it waits for from every other charge.
  // Only this budget's own room is waited for: a parent's or a reserve's refusal is
  // returned at once, also after a wait.
  const ByteBudget* ChargeOrWait(size_t bytes, SteadyTime deadline,
                                 const std::function<bool()>& give_up) ABSL_LOCKS_EXCLUDED(mu_);
  static constexpr absl::Duration kGiveUpPoll = absl::Milliseconds(100);
  bool TryCharge(size_t bytes) { return Charge(bytes) == nullptr; }
  void Release(size_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  size_t used() const ABSL_LOCKS_EXCLUDED(mu_);
  // What the charge waiting on this budget waits for now (0: none waits).
  size_t awaited() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t limit() const { return limit_; }
  const std::string& flag() const { return flag_; }
  // "--flag=limit", for a refusal that tells the operator what to raise.
  std::string Describe() const;
  // Children with a fair_share reserve in this budget that hold bytes now (a hint: read
  // without the children's locks).
  size_t holders() const { return holders_.load(std::memory_order_relaxed); }

  ~ByteBudget();

 private:
  // What this budget may hold and still draw on its reserve, holding `used` now.
  size_t ReserveFloor(size_t used) const;
  void CountHolder(size_t before, size_t after);
  // Charges `bytes`, for which this budget has room, to the reserve's check and the parents.
  const ByteBudget* ChargeWithRoom(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string flag_;
  const size_t limit_;
  const Parents parents_;
  const Reserve reserve_;
  mutable Mutex mu_;
  size_t used_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<size_t> holders_{0};  // see holders()
  size_t awaited_ ABSL_GUARDED_BY(mu_) = 0;  // kept for the charge that waits
};

// The reserve of `parent` for children of `per_child` bytes each: an eighth of it, kept for
// children holding less than their fair share (and at least an eighth of the reserve); none
// when one child may take all of it anyway (one credential).
inline ByteBudget::Reserve FairReserve(const std::shared_ptr<ByteBudget>& parent, size_t per_child) {
  if (per_child >= parent->limit()) return {};
  const size_t reserve = parent->limit() / 8;
  return {parent, reserve, std::max<size_t>(1, reserve / 8), /*fair_share=*/true};
}

// The reserve of a count (calls in flight, charged 1 each) for children of `per_child`:
// an eighth of it (at least one), kept for children with at most an eighth of that in
// flight (at least one: 8 of 512 tool calls, 1 of 256 MCP calls by default), so a light
// credential gathering a few calls gets them while others flood.
// None when one child may take all of it anyway.
inline ByteBudget::Reserve CountReserve(const std::shared_ptr<ByteBudget>& count,
                                        size_t per_child) {
  if (per_child >= count->limit()) return {};
  const size_t reserve = std::max<size_t>(1, count->limit() / 8);
  return {count, reserve, std::max<size_t>(1, reserve / 8)};
}

// Bytes one piece of work holds in a budget, grown and shrunk as it goes and released when
// the hold goes (movable, not copyable; one thread at a time).
//
//   ByteHold hold(budget);
//   if (const ByteBudget* full = hold.GrowBy(n)) return refuse(full->Describe());
//   hold.ShrinkTo(m);  // what is still held
class ByteHold {
 public:
  explicit ByteHold(std::shared_ptr<ByteBudget> budget) : budget_(std::move(budget)) {}
  ByteHold(ByteHold&& other) noexcept
      : budget_(std::move(other.budget_)), held_(std::exchange(other.held_, 0)) {}
  ByteHold(const ByteHold&) = delete;
  ByteHold& operator=(const ByteHold&) = delete;
  ByteHold& operator=(ByteHold&&) = delete;
  ~ByteHold() { ShrinkTo(0); }

  // nullptr when `bytes` more are held (always, without a budget); otherwise the budget
  // that refused them, and the hold is unchanged.
  const ByteBudget* GrowBy(size_t bytes) {
    if (!budget_ || bytes == 0) return nullptr;
    if (const ByteBudget* full = budget_->Charge(bytes)) return full;
    held_ += bytes;
    return nullptr;
  }
  // GrowBy(), waiting for room as ByteBudget::ChargeOrWait does, unless the hold would then
  // be more than its budget's limit (room that can never come).
  const ByteBudget* GrowOrWait(size_t bytes, SteadyTime deadline,
                               const std::function<bool()>& give_up) {
    if (!budget_ || bytes == 0) return nullptr;
    if (held_ + bytes > budget_->limit()) return GrowBy(bytes);
    if (const ByteBudget* full = budget_->ChargeOrWait(bytes, deadline, give_up)) return full;
    held_ += bytes;
    return nullptr;
  }
  void ShrinkTo(size_t bytes) {
    if (budget_ && bytes < held_) budget_->Release(held_ - bytes);
    if (bytes < held_) held_ = bytes;
  }
  size_t held() const { return held_; }
  // Hands the bytes held over to whoever now releases them from the budget; returns them.
  size_t Detach() { return std::exchange(held_, 0); }

 private:
  std::shared_ptr<ByteBudget> budget_;
  size_t held_ = 0;
};

// Budgets made on demand, one per key (a credential, a session), each with `per_key`
// bytes and drawing on whatever the caller adds for that key, then on `parents`. A key's
// budget lives while someone holds it (whoever charges it must hold it until released) and
// is then forgotten, so keys that come and go do not accumulate.
//
//   ByteBudgets governor("max_buffered_bytes_per_credential", 64 << 20, {all});
//   std::shared_ptr<ByteBudget> mine = governor.Of("token 0");
class ByteBudgets {
 public:
  ByteBudgets(std::string flag, size_t per_key, ByteBudget::Parents parents = {},
              ByteBudget::Reserve reserve = {})
      : flag_(std::move(flag)), per_key_(per_key), parents_(std::move(parents)),
        reserve_(std::move(reserve)) {}

  // The budget of `key`. `extra` parents are used only when the budget is made: pass the
  // same ones for a key every time (e.g. the governor's budget of the key's credential).
  std::shared_ptr<ByteBudget> Of(const std::string& key, const ByteBudget::Parents& extra = {})
      ABSL_LOCKS_EXCLUDED(mu_);
  // What `key` holds now (0 for a key nobody holds a budget of).
  size_t Used(const std::string& key) const ABSL_LOCKS_EXCLUDED(mu_);
  size_t per_key() const { return per_key_; }

 private:
  const std::string flag_;
  const size_t per_key_;
  const ByteBudget::Parents parents_;
  const ByteBudget::Reserve reserve_;
  mutable Mutex mu_;
  std::map<std::string, std::weak_ptr<ByteBudget>> by_key_ ABSL_GUARDED_BY(mu_);
};

// The roots of a process's budgets: `all` bytes (--max_buffered_bytes), and each
// credential's share of them (--max_buffered_bytes_per_credential). Every kind's overall
// budget draws on all(); every per-credential or per-session budget on its credential's
// Share(). A share does not draw on all() itself: a charge reaches all() through its kind.
//
//   auto ceiling = std::make_shared<BufferCeiling>(160 << 20, 96 << 20);
//   auto writes = std::make_shared<ByteBudget>("max_pending_write_bytes", 96 << 20,
//                                              ByteBudget::Parents{ceiling->all()});
//   ByteBudgets writes_per_credential("max_pending_write_bytes_per_credential", 48 << 20,
//                                     {writes});
//   auto mine = writes_per_credential.Of("token 0", ceiling->Shares("token 0"));
class BufferCeiling {
 public:
  BufferCeiling(size_t all, size_t per_credential)
      : all_(std::make_shared<ByteBudget>("max_buffered_bytes", all)),
        shares_("max_buffered_bytes_per_credential", per_credential, {},
                FairReserve(all_, per_credential)) {}

  const std::shared_ptr<ByteBudget>& all() const { return all_; }
  // The parents a budget of `credential` adds: its share.
  ByteBudget::Parents Shares(const std::string& credential) { return {shares_.Of(credential)}; }

 private:
  const std::shared_ptr<ByteBudget> all_;
  ByteBudgets shares_;
};

// Null-safe helpers for components that may run without a ceiling (unit tests).
inline ByteBudget::Parents AllOf(const std::shared_ptr<BufferCeiling>& ceiling) {
  return ceiling ? ByteBudget::Parents{ceiling->all()} : ByteBudget::Parents{};
}
inline ByteBudget::Parents SharesOf(const std::shared_ptr<BufferCeiling>& ceiling,
                                    const std::string& credential) {
  return ceiling ? ceiling->Shares(credential) : ByteBudget::Parents{};
}

}  // namespace codemode
