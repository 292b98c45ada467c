// SessionManager: room for a new session within --max_sessions and
// --max_sessions_per_owner. A full daemon makes room for an owner that holds fewer
// sessions than another by ending the least recently used idle session of the owner
// holding the most; an owner at a limit gets room when it asks
// (CreateSessionRequest.reclaim_idle) by ending its own least recently used idle session.
//
// Whether a session is idle is known under its own lock, which is never taken under mu_
// (see ReaperLoop). So a reclaim is decided in steps: under mu_ the candidate is pinned
// (pinned_: no other creation picks it, and OnSessionLost leaves it alone), then
// Session::TerminateIfIdle ends it only if it is still idle and unused, and finally, under
// mu_ again, Register moves it to its tombstone and registers the new session in the same
// critical section.
#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/log_text.h"
#include "sandboxd/log.h"
#include "sandboxd/session_manager.h"

namespace sandboxd {
namespace {

// Appended to a refusal when sessions could have made room but none of them is idle.
constexpr char kNoneIdle[] = " and none that could make room is idle";

std::string Count(size_t n, const char* noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

}  // namespace

std::string SessionManager::RefuseLocked(const Room& room, Reclaim* reclaim) {
  const std::string& owner = room.owner;
  std::map<std::string, size_t> held = held_;  // owner -> live sessions and held rooms
  for (const auto& [id, s] : sessions_) ++held[s->metadata().owner];
  const size_t live = sessions_.size() + held_total_;
  const size_t owned = held.count(owner) ? held[owner] : 0;
  // The request may ask for less than the flag, never more.
  const bool asked = room.owner_limit > 0 && room.owner_limit < options_.max_sessions_per_owner;
  const uint32_t owner_limit = asked ? room.owner_limit : options_.max_sessions_per_owner;
  // Ending one session makes room unless a limit is exceeded (flags lowered since its
  // sessions were re-attached).
  const bool one_makes_room = live <= options_.max_sessions && owned <= owner_limit;
  const bool own_reclaim = room.reclaim_idle && !owner.empty() && owned > 0 && one_makes_room;
  if (live >= options_.max_sessions) {
    const std::string full =
        absl::StrCat(Count(live, "session"), " of ", Count(held.size(), "owner"));
    // Fair share: only from an owner that, after the reclaim, still holds at least as many
    // as this one, so two owners never take turns ending each other's sessions.
    if (one_makes_room && owned < owner_limit) {
      for (const auto& [other, n] : held) {
        if (other != owner && owned + 1 < n) reclaim->owners[other] = n;
      }
    }
    if (!reclaim->empty()) {
      reclaim->reason = absl::StrCat(
          "reclaimed: for another owner at ",
          absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(clock_->NowMs()),
                           absl::UTCTimeZone()),
          ": the daemon was full (", full, ") and this session's owner held more than the new one's");
    } else if (own_reclaim) {
      reclaim->owners[owner] = owned;
      reclaim->reason = absl::StrCat("reclaimed: the daemon reached --max_sessions (",
                                     options_.max_sessions,
                                     ") and this was its owner's least recently used idle session");
    }
    return absl::StrCat("too many sessions (the limit is ", options_.max_sessions,
                        "): the daemon is full (", full, "; this owner holds ", owned, ")");
  }
  if (owned >= owner_limit) {
    const std::string which = asked ? "the limit its creator asked for (max_owner_sessions)"
                                    : "--max_sessions_per_owner";
    if (own_reclaim) {
      reclaim->owners[owner] = owned;
      reclaim->reason = absl::StrCat("reclaimed: its owner reached ", which, " (", owner_limit,
                                     ") and this was its least recently used idle session");
    }
    return absl::StrCat("too many sessions of this owner (the limit is ", owner_limit,
                        " per owner, ", which, ")");
  }
  return "";
}

absl::StatusOr<bool> SessionManager::CheckRoom(const Room& room) {
  std::string refused;
  Reclaim reclaim;
  {
    codemode::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("the daemon is shutting down");
    refused = RefuseLocked(room, &reclaim);
    if (refused.empty()) {
      ++held_[room.owner];
      ++held_total_;
      return true;
    }
  }
  // The reclaim itself waits until the new session is ready (Register), so a creation
  // that fails ends nothing; with no idle session to reclaim, no container is started.
  if (!reclaim.empty() && HasIdleSession(reclaim)) return false;
  return absl::ResourceExhaustedError(reclaim.empty() ? refused : refused + kNoneIdle);
}

void SessionManager::GiveBackRoom(const std::string& owner) {
  codemode::MutexLock lock(&mu_);
  auto it = held_.find(owner);
  if (it == held_.end()) return;
  if (--it->second == 0) held_.erase(it);
  --held_total_;
}

std::string SessionManager::Register(const std::shared_ptr<Session>& session, const Room& room,
                                     bool held) {
  const std::string& id = session->metadata().id;
  std::shared_ptr<Session> victim;  // reclaimed for this session: lost, pinned, registered
  std::string victim_reason;
  for (;;) {
    sandbox::v1::Session tombstone;
    if (victim) tombstone = victim->ToProto();  // before mu_: it takes the session's lock
    Retired retired;
    std::string refused;
    Reclaim reclaim;
    {
      codemode::MutexLock lock(&mu_);
      if (victim) {
        pinned_.erase(victim->metadata().id);
        ++reclaimed_total_;
        retired = RetireLocked(*victim, std::move(tombstone));
        retired.reclaimed = victim_reason;
      }
      if (held) {  // this session's own room, taken over by the check below
        if (--held_[room.owner] == 0) held_.erase(room.owner);
        --held_total_;
        held = false;
      }
      // Checked again (creations race), in the critical section that freed the slot.
      refused = stopping_ ? "the daemon is shutting down" : RefuseLocked(room, &reclaim);
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
    victim = ReclaimIdle(reclaim);
    if (!victim) return refused + kNoneIdle;
    victim_reason = reclaim.reason;
  }
}

std::shared_ptr<Session> SessionManager::ReclaimIdle(const Reclaim& reclaim) {
  struct Candidate {
    int64_t fewer_held;  // minus the sessions its owner holds: the owner holding the most first
    int64_t used_ms;
    std::shared_ptr<Session> session;
  };
  std::vector<Candidate> idle;
  for (std::shared_ptr<Session>& s : ReclaimableOf(reclaim)) {
    int64_t used_ms = s->last_used_ms();
    int64_t held = static_cast<int64_t>(reclaim.owners.at(s->metadata().owner));
    if (s->idle()) idle.push_back({-held, used_ms, std::move(s)});
  }
  auto key = [](const Candidate& c) {
    return std::tie(c.fewer_held, c.used_ms, c.session->metadata().created_at_ms,
                    c.session->metadata().id);
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
    if (c.session->TerminateIfIdle(reclaim.reason, c.used_ms)) return std::move(c.session);
    {
      codemode::MutexLock lock(&mu_);
      pinned_.erase(id);
    }
    // Lost meanwhile for another reason: OnSessionLost found it pinned and left it to us.
    if (c.session->lost()) OnSessionLost(*c.session);
  }
  return nullptr;
}

bool SessionManager::HasIdleSession(const Reclaim& reclaim) {
  for (const std::shared_ptr<Session>& s : ReclaimableOf(reclaim)) {
    if (s->idle()) return true;  // sessions' locks only outside mu_ (see ReaperLoop)
  }
  return false;
}

std::vector<std::shared_ptr<Session>> SessionManager::ReclaimableOf(const Reclaim& reclaim) {
  std::vector<std::shared_ptr<Session>> out;
  codemode::MutexLock lock(&mu_);
  for (const auto& [id, s] : sessions_) {
    if (reclaim.owners.count(s->metadata().owner) && !pinned_.count(id)) out.push_back(s);
  }
  return out;
}

}  // namespace sandboxd
