#include "base/byte_budget.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace codemode {

ByteBudget::~ByteBudget() {
  // A budget dropped while holding bytes (its holders leaked them) no longer competes.
  CountHolder(used_, 0);
}

size_t ByteBudget::ReserveFloor(size_t used) const {
  if (!reserve_.fair_share) return reserve_.floor;
  // The children holding bytes after this charge, and room for one more.
  const size_t holders = reserve_.in->holders() + (used == 0 ? 1 : 0);
  return std::max(reserve_.floor, reserve_.in->limit() / (holders + 1));
}

void ByteBudget::CountHolder(size_t before, size_t after) {
  if (!reserve_.fair_share || (before == 0) == (after == 0)) return;
  if (after > 0) {
    reserve_.in->holders_.fetch_add(1, std::memory_order_relaxed);
  } else {
    reserve_.in->holders_.fetch_sub(1, std::memory_order_relaxed);
  }
}

const ByteBudget* ByteBudget::ChargeOrWait(size_t bytes, SteadyTime deadline,
                                           const std::function<bool()>& give_up) {
  MutexLock lock(&mu_);
  using Steady = std::chrono::steady_clock;
  if (bytes > limit_ - std::min(limit_, used_ + awaited_)) {
    if (awaited_ != 0 || bytes > limit_ || Steady::now() >= deadline) return this;
    // The one charge that waits: the room it waits for is kept from every other charge.
    awaited_ = bytes;
    auto fits = [this, bytes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return used_ + bytes <= limit_; };
    // Waits in slices of kGiveUpPoll; ends with room, at the deadline, or when given up.
    bool room = false;
    for (;;) {
      room = mu_.AwaitWithDeadline(absl::Condition(&fits), std::min(deadline, SteadyDeadline(kGiveUpPoll)));
      if (room || Steady::now() >= deadline || (give_up && give_up())) break;
    }
    awaited_ = 0;
    if (!room) return this;
  }
  return ChargeWithRoom(bytes);
}

const ByteBudget* ByteBudget::Charge(size_t bytes) {
  MutexLock lock(&mu_);
  if (bytes > limit_ - std::min(limit_, used_ + awaited_)) return this;
  return ChargeWithRoom(bytes);
}

const ByteBudget* ByteBudget::ChargeWithRoom(size_t bytes) {
  if (reserve_.in != nullptr && used_ + bytes > ReserveFloor(used_)) {
    // Read without holding the reserve's budget locked across the charge: a reserve is a
    // fairness margin, not a bound, and the bound itself is checked exactly below.
    const size_t limit = reserve_.in->limit();
    const size_t free = limit - std::min(limit, reserve_.in->used());
    if (bytes + reserve_.bytes > free) return reserve_.in.get();
  }
  for (size_t i = 0; i < parents_.size(); ++i) {
    if (const ByteBudget* full = parents_[i]->Charge(bytes)) {
      for (size_t j = 0; j < i; ++j) parents_[j]->Release(bytes);
      return full;
    }
  }
  CountHolder(used_, used_ + bytes);
  used_ += bytes;
  return nullptr;
}

void ByteBudget::Release(size_t bytes) {
  MutexLock lock(&mu_);
  bytes = std::min(bytes, used_);
  CountHolder(used_, used_ - bytes);
  used_ -= bytes;
  for (const auto& parent : parents_) parent->Release(bytes);
}

size_t ByteBudget::used() const {
  MutexLock lock(&mu_);
  return used_;
}

size_t ByteBudget::awaited() const {
  MutexLock lock(&mu_);
  return awaited_;
}

std::string ByteBudget::Describe() const { return absl::StrCat("--", flag_, "=", limit_); }

std::shared_ptr<ByteBudget> ByteBudgets::Of(const std::string& key,
                                            const ByteBudget::Parents& extra) {
  MutexLock lock(&mu_);
  std::weak_ptr<ByteBudget>& slot = by_key_[key];
  if (std::shared_ptr<ByteBudget> alive = slot.lock()) return alive;
  // The extra parents (a credential's share) first: a share's reserve is checked against
  // the ceiling before this charge reaches the ceiling through the other parents.
  ByteBudget::Parents parents = extra;
  parents.insert(parents.end(), parents_.begin(), parents_.end());
  auto made = std::make_shared<ByteBudget>(flag_, per_key_, std::move(parents), reserve_);
  slot = made;
  // Forget the keys nobody holds any more (each new key pays for the walk, so the map stays
  // within twice the keys in use).
  for (auto it = by_key_.begin(); it != by_key_.end();) {
    it = it->second.expired() ? by_key_.erase(it) : std::next(it);
  }
  return made;
}

size_t ByteBudgets::Used(const std::string& key) const {
  std::shared_ptr<ByteBudget> budget;
  {
    MutexLock lock(&mu_);
    auto it = by_key_.find(key);
    if (it != by_key_.end()) budget = it->second.lock();
  }
  return budget ? budget->used() : 0;
}

}  // namespace codemode
