#include "sandboxd/lost_sessions.h"

#include <utility>

#include "base/utf8.h"

namespace sandboxd {

std::vector<std::string> LostSessions::Add(sandbox::v1::Session session, int64_t now_ms) {
  std::vector<std::string> evicted;
  if (max_ == 0) return evicted;
  session.set_state(sandbox::v1::Session::LOST);
  std::string* reason = session.mutable_lost_reason();
  if (reason->size() > kMaxReasonBytes) {
    // On a character boundary: proto3 strings must stay valid UTF-8.
    reason->resize(codemode::Utf8Prefix(*reason, kMaxReasonBytes).size());
  }
  session.set_queued(0);
  const std::string id = session.id();
  by_id_[id] = Entry{std::move(session), now_ms, next_seq_++};
  while (by_id_.size() > max_) evicted.push_back(EvictOne());
  return evicted;
}

std::string LostSessions::EvictOne() {
  // Count per owner, then take that owner's oldest: O(n) over at most max_ + 1 entries,
  // only when a session is lost past the bound.
  std::map<std::string, size_t> per_owner;
  for (const auto& [id, e] : by_id_) ++per_owner[e.session.owner()];
  std::string top;
  size_t most = 0;
  for (const auto& [owner, n] : per_owner) {
    if (n > most) most = n, top = owner;
  }
  auto oldest = by_id_.end();
  for (auto it = by_id_.begin(); it != by_id_.end(); ++it) {
    if (it->second.session.owner() != top) continue;
    if (oldest == by_id_.end() || it->second.seq < oldest->second.seq) oldest = it;
  }
  std::string id = oldest->first;
  by_id_.erase(oldest);
  return id;
}

const sandbox::v1::Session* LostSessions::Find(const std::string& id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second.session;
}

bool LostSessions::Remove(const std::string& id) { return by_id_.erase(id) > 0; }

std::vector<sandbox::v1::Session> LostSessions::List(const std::string& owner) const {
  std::vector<sandbox::v1::Session> out;
  for (const auto& [id, e] : by_id_) {
    if (owner.empty() || e.session.owner() == owner) out.push_back(e.session);
  }
  return out;
}

std::vector<std::string> LostSessions::ExpireBefore(int64_t cutoff_ms) {
  std::vector<std::string> expired;
  for (auto it = by_id_.begin(); it != by_id_.end();) {
    if (it->second.lost_at_ms < cutoff_ms) {
      expired.push_back(it->first);
      it = by_id_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

}  // namespace sandboxd
