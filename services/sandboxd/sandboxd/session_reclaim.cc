// SessionManager: room for a new session within --max_sessions and
// --max_sessions_per_owner, made when asked (CreateSessionRequest.reclaim_idle) by ending
// the owner's least recently used idle session.
//
// Whether a session is idle is known under its own lock, which is never taken under mu_
// (see ReaperLoop). So a reclaim is decided in steps: under mu_ the candidate is pinned
// (pinned_: no other creation picks it, and OnSessionLost leaves it alone), then
// Session::TerminateIfIdle ends it only if it is still idle and unused, and finally, under
// mu_ again, Register moves it to its tombstone and registers the new session in the same
// critical section.
#include <algorithm>
#include <tuple>

#include "base/log_text.h"
#include "sandboxd/log.h"
#include "sandboxd/session_manager.h"

namespace sandboxd {

absl::Status SessionManager::CheckRoom(const Room& room) {
  const std::string& owner = room.owner;
  std::string refused, reclaim;
  {
    codemode::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the daemon is shutting down");
    refused = RefuseLocked(room, room.reclaim_idle ? &reclaim : nullptr);
  }
  // The reclaim itself waits until the new session is ready (Register), so a creation
  // that fails ends nothing; with no idle session to reclaim, no container is started.
  if (refused.empty() || (!reclaim.empty() && HasIdleSession(owner))) return absl::OkStatus();
  return absl::ResourceExhaustedError(refused);
}

std::string SessionManager::Register(const std::shared_ptr<Session>& session, const Room& room) {
  const bool reclaim_idle = room.reclaim_idle;
  const std::string& id = session->metadata().id;
  const std::string& owner = session->metadata().owner;
  std::shared_ptr<Session> victim;  // reclaimed for this session: lost, pinned, registered
  std::string victim_reason;
  for (;;) {
    sandbox::v1::Session tombstone;
    if (victim) tombstone = victim->ToProto();  // before mu_: it takes the session's lock
    Retired retired;
    std::string refused, reclaim;
    {
      codemode::MutexLock lock(&mu_);
      if (victim) {
        pinned_.erase(victim->metadata().id);
        ++reclaimed_total_;
        retired = RetireLocked(*victim, std::move(tombstone));
        retired.reclaimed = victim_reason;
      }
      // Checked again (creations race), in the critical section that freed the slot.
      refused = stopping_ ? "the daemon is shutting down"
                          : RefuseLocked(room, reclaim_idle ? &reclaim : nullptr);
      if (refused.empty()) {
        sessions_[id] = session;
        pinned_.insert(id);
      }
    }
    FinishRetired(std::move(retired));
    // Ours may be the last reference (deleted meanwhile): dropped on a worker, which joins
    // the session's reader off this thread.
    if (victim) workers_.Post([v = std::move(victim)]() mutable { v.reset(); });
    if (refused.empty() || reclaim.empty()) return refused;
    // Full (again): another creation took the room, or this is the first reclaim.
    victim = ReclaimIdle(owner, reclaim);
    if (!victim) return refused;
    victim_reason = reclaim;
  }
}

std::shared_ptr<Session> SessionManager::ReclaimIdle(const std::string& owner,
                                                     const std::string& reason) {
  struct Candidate {
    int64_t used_ms;
    std::shared_ptr<Session> session;
  };
  std::vector<Candidate> idle;
  for (std::shared_ptr<Session>& s : ReclaimableOf(owner)) {
    int64_t used_ms = s->last_used_ms();
    if (s->idle()) idle.push_back({used_ms, std::move(s)});
  }
  auto key = [](const Candidate& c) {
    return std::tie(c.used_ms, c.session->metadata().created_at_ms, c.session->metadata().id);
  };
  std::sort(idle.begin(), idle.end(),
            [&](const Candidate& a, const Candidate& b) { return key(a) < key(b); });
  for (Candidate& c : idle) {
    const std::string& id = c.session->metadata().id;
    {
      codemode::MutexLock lock(&mu_);
      auto it = sessions_.find(id);
      // Gone meanwhile, or another creation is reclaiming it.
      if (it == sessions_.end() || it->second != c.session || !pinned_.insert(id).second) {
        continue;
      }
    }
    // Ends it only if nothing started on it and it was not used since it was seen idle.
    if (c.session->TerminateIfIdle(reason, c.used_ms)) return std::move(c.session);
    {
      codemode::MutexLock lock(&mu_);
      pinned_.erase(id);
    }
    // Lost meanwhile for another reason: OnSessionLost found it pinned and left it to us.
    if (c.session->lost()) OnSessionLost(*c.session);
  }
  return nullptr;
}

bool SessionManager::HasIdleSession(const std::string& owner) {
  for (const std::shared_ptr<Session>& s : ReclaimableOf(owner)) {
    if (s->idle()) return true;  // sessions' locks only outside mu_ (see ReaperLoop)
  }
  return false;
}

std::vector<std::shared_ptr<Session>> SessionManager::ReclaimableOf(const std::string& owner) {
  std::vector<std::shared_ptr<Session>> out;
  codemode::MutexLock lock(&mu_);
  for (const auto& [id, s] : sessions_) {
    if (s->metadata().owner == owner && !pinned_.count(id)) out.push_back(s);
  }
  return out;
}

}  // namespace sandboxd
