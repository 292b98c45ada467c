// ReadTurns. See read_turns.h.
#include "server/read_turns.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace gateway {

struct ReadTurns::Waiter {
  std::string credential;
  uint64_t place = 0;  // the line is ordered by it
  std::shared_ptr<codemode::ByteBudget> mine;
  bool granted = false;  // charged to `mine`; the slot is the waiter's
  bool left = false;     // out of the line
};

ReadTurns::ReadTurns(std::shared_ptr<codemode::ByteBudget> overall, absl::Duration wait, size_t max_line)
    : overall_(std::move(overall)), wait_(wait), max_line_(max_line) {}

ReadTurns::Turn ReadTurns::Take(const std::string& credential, const std::shared_ptr<codemode::ByteBudget>& mine) {
  codemode::MutexLock lock(&mu_);
  Turn turn;
  if (line_.empty() && (turn.full = mine->Charge(1)) == nullptr) {
    kept_.erase(credential);  // served: a place kept from an earlier wait is used up
    return turn;
  }
  // Its own bound first, as a charge names it.
  if (turn.full == nullptr) turn.full = mine->used() >= mine->limit() ? mine.get() : overall_.get();
  const bool in_line = std::any_of(line_.begin(), line_.end(),
                                   [&](const std::shared_ptr<Waiter>& w) { return w->credential == credential; });
  if (mine->used() > 0 || in_line || line_.size() >= max_line_) return turn;
  turn.full = nullptr;
  turn.waiting = std::make_shared<Waiter>();
  turn.waiting->credential = credential;
  turn.waiting->mine = mine;
  turn.waiting->place = next_place_++;
  const absl::Time now = absl::Now();
  if (auto kept = kept_.find(credential); kept != kept_.end()) {
    if (now < kept->second.second) turn.waiting->place = kept->second.first;
    kept_.erase(kept);
  }
  auto after = std::upper_bound(line_.begin(), line_.end(), turn.waiting->place,
                                [](uint64_t place, const std::shared_ptr<Waiter>& w) { return place < w->place; });
  line_.insert(after, turn.waiting);
  GrantLocked();  // a slot may have freed since the charge was refused
  return turn;
}

absl::Status ReadTurns::Await(const std::shared_ptr<Waiter>& waiting,
                              const std::shared_ptr<codemode::CancelToken>& cancel) {
  if (cancel) {
    // Wakes the wait below: taking the lock makes it look at its condition again.
    cancel->OnCancel([self = shared_from_this()] { codemode::MutexLock lock(&self->mu_); });
  }
  codemode::MutexLock lock(&mu_);
  auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return waiting->granted || waiting->left || (cancel && cancel->cancelled());
  };
  mu_.AwaitWithTimeout(absl::Condition(&done), wait_);
  if (waiting->granted) {
    waiting->left = true;
    return absl::OkStatus();
  }
  RemoveLocked(waiting);
  if (cancel && cancel->cancelled()) return absl::CancelledError("the request was cancelled");
  KeepPlaceLocked(*waiting);
  return absl::ResourceExhaustedError(absl::StrCat(
      "too much work in flight: every resources/read slot (", overall_->Describe(), ") stayed taken for the ",
      absl::FormatDuration(wait_), " this read waited in line (--resource_read_wait); retry later"));
}

void ReadTurns::KeepPlaceLocked(const Waiter& waiting) {
  const absl::Time now = absl::Now();
  for (auto it = kept_.begin(); it != kept_.end();) it = now < it->second.second ? std::next(it) : kept_.erase(it);
  if (kept_.size() < max_line_) kept_[waiting.credential] = {waiting.place, now + kKeepPlace};
}

void ReadTurns::Leave(const std::shared_ptr<Waiter>& waiting) {
  codemode::MutexLock lock(&mu_);
  RemoveLocked(waiting);
}

void ReadTurns::RemoveLocked(const std::shared_ptr<Waiter>& waiting) {
  if (waiting->left) return;
  waiting->left = true;
  line_.erase(std::remove(line_.begin(), line_.end(), waiting), line_.end());
  if (waiting->granted) {  // given a slot it will not use: the next in line gets it
    waiting->granted = false;
    waiting->mine->Release(1);
    GrantLocked();
  }
}

void ReadTurns::Released() {
  codemode::MutexLock lock(&mu_);
  GrantLocked();
}

void ReadTurns::GrantLocked() {
  while (!line_.empty() && line_.front()->mine->Charge(1) == nullptr) {
    line_.front()->granted = true;
    line_.pop_front();
  }
}

size_t ReadTurns::waiting() const {
  codemode::MutexLock lock(&mu_);
  return line_.size();
}

}  // namespace gateway
