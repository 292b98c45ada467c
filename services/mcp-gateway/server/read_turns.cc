// ReadTurns. See read_turns.h.
#include "server/read_turns.h"

#include <algorithm>
#include <utility>

namespace gateway {

ReadTurns::ReadTurns(std::shared_ptr<codemode::ByteBudget> overall, absl::Duration hold)
    : overall_(std::move(overall)), hold_(hold) {}

ReadTurns::Turn ReadTurns::Take(const std::string& credential, codemode::ByteBudget& mine, absl::Time now) {
  codemode::MutexLock lock(&mu_);
  line_.erase(std::remove_if(line_.begin(), line_.end(), [&](const Waiting& w) { return now - w.asked > hold_; }),
              line_.end());
  auto mine_in_line = std::find_if(line_.begin(), line_.end(), [&](const Waiting& w) { return w.credential == credential; });
  const size_t ahead = static_cast<size_t>(mine_in_line - line_.begin());  // the whole line when not in it
  const size_t used = overall_->used();
  const size_t free = used < overall_->limit() ? overall_->limit() - used : 0;
  Turn turn;
  if (ahead < free) {
    turn.full = mine.Charge(1);
  } else {  // its own bound first, as a charge names it
    turn.full = mine.used() >= mine.limit() ? &mine : overall_.get();
  }
  if (turn.full == nullptr) {
    if (mine_in_line != line_.end()) line_.erase(mine_in_line);
    return turn;
  }
  // Refused. Only a credential holding no read waits in line: one holding some has a read
  // going, and gets its next turn when that ends.
  if (mine.used() == 0) {
    if (mine_in_line != line_.end()) {
      mine_in_line->asked = now;
    } else if (line_.size() < kMaxLine) {
      line_.push_back({credential, now});
      mine_in_line = line_.end() - 1;
    }
    if (mine_in_line != line_.end()) turn.place = static_cast<size_t>(mine_in_line - line_.begin()) + 1;
  }
  turn.line = line_.size();
  return turn;
}

}  // namespace gateway
