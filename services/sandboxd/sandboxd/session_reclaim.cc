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

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/deadline.h"
#include "base/log_text.h"
#include "sandboxd/log.h"
#include "sandboxd/refusal.h"
#include "sandboxd/session_manager.h"

namespace sandboxd {
namespace {

// Appended to a refusal when sessions could have made room but none of them is idle, or
// every idle one is claimed by creations admitted before.
constexpr char kNoneIdle[] = " and none that could make room is idle";
constexpr char kAllClaimed[] =
    " and each idle session that could make room is being reclaimed for another creation";
constexpr char kFairShareTaken[] =
    " and the creations under way already take this owner's fair share";
constexpr char kOwnerLimitTaken[] =
    " and this owner's creations under way already reach its limit";

std::string Count(size_t n, const char* noun) {
  return absl::StrCat(n, " ", noun, n == 1 ? "" : "s");
}

}  // namespace

SessionManager::Refusal SessionManager::RefuseLocked(const Room& room, uint64_t self) {
  const std::string& owner = room.owner;
  Holders holders = HoldersLocked();
  std::map<std::string, size_t>& held = holders.by_owner;
  const size_t live = sessions_.size() + holders.rooms;
  const size_t owned = held.count(owner) ? held[owner] : 0;
  const uint32_t owner_limit = OwnerLimit(room);
  // The daemon is full for this owner only while it has room of its own, its creations under
  // way counted (claims on other owners' sessions, each of which lands as one of its own):
  // told otherwise, a gateway would place one more of its sessions on another sandboxd.
  const size_t claiming = ClaimingLocked(owner, self);
  const bool owner_has_room = owned + claiming < owner_limit;
  Refusal refusal;
  Reclaim* reclaim = &refusal.reclaim;
  // Ending one session makes room unless a limit is exceeded (flags lowered since its
  // sessions were re-attached).
  const bool one_makes_room = live <= options_.max_sessions && owned <= owner_limit;
  const bool own_reclaim = room.reclaim_idle && !owner.empty() && owned > 0 && one_makes_room;
  if (live >= options_.max_sessions) {
    const std::string full =
        absl::StrCat(Count(sessions_.size(), "session"),
                     holders.rooms > 0 ? absl::StrCat(" and ", holders.rooms, " being created") : "",
                     " of ", Count(held.size(), "owner"));
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
    refusal.why = absl::StrCat("too many sessions (the limit is ", options_.max_sessions,
                               "): the daemon is full (", full, "; this owner holds ", owned, ")");
    refusal.daemon_full = owner_has_room;
  } else if (!owner_has_room) {
    const std::string which = owner_limit < options_.max_sessions_per_owner
                                  ? "the limit its creator asked for (max_owner_sessions)"
                                  : "--max_sessions_per_owner";
    if (own_reclaim) {
      reclaim->owners[owner] = owned;
      reclaim->reason = absl::StrCat("reclaimed: its owner reached ", which, " (", owner_limit,
                                     ") and this was its least recently used idle session");
    }
    refusal.why = absl::StrCat("too many sessions of this owner (the limit is ", owner_limit,
                               " per owner, ", which, ")",
                               claiming > 0 ? absl::StrCat(", ", claiming, " of them being created")
                                            : "");
  }
  // Containers still starting for callers that gave up (for room or for a claim) are not
  // sessions anyone wants, and no session is ended for them; but they are containers,
  // bounded as sessions are: a creation that needs the room they take, or that would
  // reclaim an idle session beside them at --max_sessions, waits for one to finish.
  const size_t finishing = FinishingLocked(self);
  if (finishing > 0 && live + finishing >= options_.max_sessions &&
      (!refusal.refused() || !reclaim->empty())) {
    refusal.finishing = finishing;
    // Refused for those containers alone: full for an owner with room.
    refusal.daemon_full = refusal.daemon_full || (!refusal.refused() && owner_has_room);
    const std::string starting =
        absl::StrCat(Count(finishing, "container"), " still starting for callers that gave up");
    refusal.why = refusal.refused() ? absl::StrCat(refusal.why, "; ", starting)
                                    : absl::StrCat("too many sessions (the limit is ",
                                                   options_.max_sessions, "): ", starting);
  }
  return refusal;
}

uint32_t SessionManager::OwnerLimit(const Room& room) const {
  // The request may ask for less than the flag, never more.
  const bool asked = room.owner_limit > 0 && room.owner_limit < options_.max_sessions_per_owner;
  return asked ? room.owner_limit : options_.max_sessions_per_owner;
}

absl::StatusOr<SessionManager::Hold> SessionManager::CheckRoom(const Room& room,
                                                               const Wanted& wanted) {
  const auto wait_until = codemode::SteadyDeadline(options_.runner_start_timeout);
  for (;;) {
    Refusal refusal;
    uint64_t pins = 0;
    {
      codemode::MutexLock lock(&mu_);
      if (draining_) return absl::UnavailableError("the daemon is shutting down");
      refusal = RefuseLocked(room);
      if (!refusal.refused()) return Hold{HoldLocked(room.owner, wanted, nullptr)};
      pins = pins_;
    }
    if (refusal.finishing > 0) {
      absl::Status waited = AwaitFinishing(room.owner, wanted, refusal, 0, wait_until);
      if (!waited.ok()) return waited;
      continue;
    }
    const Reclaim& reclaim = refusal.reclaim;
    if (reclaim.empty()) return RefusedForRoom(refusal.why, refusal.daemon_full);
    // The reclaim itself waits until the new session is ready (Register), so a creation
    // that fails ends nothing; with no idle session to reclaim, no container is started.
    // Each admitted creation claims one idle session: concurrent creations beyond them are
    // refused here, not after they took or started a container.
    const std::map<std::string, size_t> idle = IdleSessions();  // sessions' locks only outside mu_
    codemode::MutexLock lock(&mu_);
    if (pins_ != pins) continue;  // a reclaim pinned or let go of one meanwhile: count again
    std::string not_now = MayClaimLocked(room, reclaim, idle);
    if (!not_now.empty()) {
      // Its own creations under way reach its limit: the owner's refusal, not the daemon's.
      return RefusedForRoom(refusal.why + not_now,
                            refusal.daemon_full && not_now != kOwnerLimitTaken);
    }
    return Hold{HoldLocked(room.owner, wanted, &reclaim)};
  }
}

absl::Status SessionManager::AwaitFinishing(const std::string& owner, const Wanted& wanted,
                                            const Refusal& refusal, uint64_t self,
                                            std::chrono::steady_clock::time_point until) {
  codemode::MutexLock lock(&mu_);
  // Each such container makes room for one creation once started: more waiters of one
  // owner than that would only hold RPC threads, which the other calls need. The count is
  // per owner, so an owner whose own abandoned starts made those containers cannot take
  // every place to wait for them; all owners' together stay within max_waiting_creations
  // (a quarter of the RPC threads), so waiters never take the threads other calls need.
  if (draining_) return absl::UnavailableError("the daemon is shutting down");
  auto mine = awaiting_finish_.find(owner);
  const size_t owners = mine == awaiting_finish_.end() ? 0 : mine->second;
  if (owners >= refusal.finishing || awaiting_finish_total_ >= options_.max_waiting_creations) {
    return RefusedForRoom(refusal.why, refusal.daemon_full);
  }
  ++awaiting_finish_[owner];
  ++awaiting_finish_total_;
  auto done = absl::MakeCleanup([this, &owner]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    --awaiting_finish_total_;
    if (--awaiting_finish_[owner] == 0) awaiting_finish_.erase(owner);
  });
  auto fewer = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return draining_ || FinishingLocked(self) < refusal.finishing;
  };
  // A caller giving up takes no lock of ours: asked between short waits.
  while (!mu_.AwaitWithTimeout(absl::Condition(&fewer), absl::Milliseconds(50))) {
    if (wanted && !wanted()) return CallerGaveUp(owner);
    if (std::chrono::steady_clock::now() >= until) return RefusedForRoom(refusal.why, refusal.daemon_full);
  }
  if (draining_) return absl::UnavailableError("the daemon is shutting down");
  return absl::OkStatus();
}

absl::Status SessionManager::GiveBackRefused(Hold hold, const Room& room, absl::Status refused) {
  codemode::MutexLock lock(&mu_);
  auto give_back = absl::MakeCleanup([&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { holds_.erase(hold.id); });
  if (!DaemonWasFull(refused)) return refused;
  // What the owner holds once the creations under way have landed, but for this one: its
  // sessions, and its other creations but those reclaiming its own (which change nothing).
  size_t owned = 0;
  for (const auto& [id, s] : sessions_) owned += s->metadata().owner == room.owner;
  for (const auto& [key, h] : holds_) {
    owned += key != hold.id && h.owner == room.owner && h.counts() && !h.victims.count(h.owner);
  }
  if (owned < OwnerLimit(room)) return refused;
  return absl::ResourceExhaustedError(refused.message());
}

void SessionManager::GiveBack(Hold hold) {
  codemode::MutexLock lock(&mu_);
  holds_.erase(hold.id);
}

uint64_t SessionManager::HoldLocked(const std::string& owner, const Wanted& wanted,
                                    const Reclaim* reclaim) {
  Held& h = holds_[++last_hold_];
  h.owner = owner;
  h.wanted = wanted;
  if (reclaim) {
    for (const auto& [victim, n] : reclaim->owners) h.victims.insert(victim);
  }
  return last_hold_;
}

SessionManager::Holders SessionManager::HoldersLocked() const {
  Holders holders;
  for (const auto& [id, s] : sessions_) ++holders.by_owner[s->metadata().owner];
  for (const auto& [key, h] : holds_) {
    if (!h.victims.empty() || !h.counts()) continue;
    ++holders.by_owner[h.owner];
    ++holders.rooms;
  }
  return holders;
}

size_t SessionManager::ClaimingLocked(const std::string& owner, uint64_t except) const {
  size_t claiming = 0;
  for (const auto& [key, h] : holds_) {
    claiming += key != except && h.owner == owner && h.counts() && !h.victims.empty() &&
                !h.victims.count(owner);
  }
  return claiming;
}

size_t SessionManager::FinishingLocked(uint64_t except) const {
  size_t finishing = 0;
  for (const auto& [key, h] : holds_) finishing += key != except && !h.counts();
  return finishing;
}

std::string SessionManager::MayClaimLocked(const Room& room, const Reclaim& reclaim,
                                           const std::map<std::string, size_t>& idle) {
  const std::string& owner = room.owner;
  std::map<std::string, size_t> idle_left = idle;
  size_t idle_here = 0;  // idle sessions of reclaim.owners
  for (const auto& [victim, n] : reclaim.owners) idle_here += idle_left[victim];
  if (idle_here == 0) return kNoneIdle;
  size_t on_these = 0;  // unpinned claims that may land on a session of reclaim.owners
  for (const auto& [key, h] : holds_) {
    if (h.victims.empty() || h.pinned || !h.counts()) continue;
    for (const std::string& victim : h.victims) {
      if (reclaim.owners.count(victim)) {
        ++on_these;
        break;
      }
    }
  }
  if (idle_here <= on_these) return kAllClaimed;
  if (reclaim.owners.count(owner)) return "";  // its own: the sessions it holds stay the same
  // Fair share and the owner's limit once the claims under way have landed, as ReclaimIdle
  // lands them: each is a session its owner will hold and one its victim's owner will have
  // lost, the pinned victim's, or else an idle one of the owner holding the most. An
  // owner's own reclaim changes no count.
  std::map<std::string, size_t> held = HoldersLocked().by_owner;
  for (const auto& [key, h] : holds_) {
    if (h.victims.empty() || !h.counts() || h.victims.count(h.owner)) continue;
    std::optional<std::string> victim = h.pinned;
    for (const std::string& v : h.victims) {
      if (!h.pinned && idle_left[v] > 0 && (!victim || held[v] > held[*victim])) victim = v;
    }
    if (!victim) continue;  // nothing idle for it: it lands nowhere
    if (!h.pinned) --idle_left[*victim];
    if (held[*victim] > 0) --held[*victim];
    ++held[h.owner];
  }
  if (held[owner] >= OwnerLimit(room)) return kOwnerLimitTaken;
  for (const auto& [other, n] : reclaim.owners) {
    if (idle_left[other] > 0 && held[owner] + 1 < held[other]) return "";
  }
  return kFairShareTaken;
}

absl::Status SessionManager::CallerGaveUp(const std::string& owner) {
  spdlog::info("a session creation of owner '{}' ended: its caller gave up, and nothing was "
               "reclaimed for it", codemode::LogQuoted(owner));
  return absl::CancelledError(
      "the caller gave up before its session was made: nothing was made or reclaimed for it");
}

absl::Status SessionManager::Register(const std::shared_ptr<Session>& session, const Room& room,
                                      Hold hold, const Wanted& wanted) {
  // What CheckRoom held for it (holds_): room until the first check below takes it over, a
  // claim until it is registered or refused.
  uint64_t held = hold.id;
  auto give_back = absl::MakeCleanup([&] {
    if (held == 0) return;
    codemode::MutexLock lock(&mu_);
    holds_.erase(held);
  });
  const std::string& id = session->metadata().id;
  std::shared_ptr<Session> victim;  // reclaimed for this session: lost, pinned, registered
  std::string victim_reason;
  const auto wait_until = codemode::SteadyDeadline(options_.runner_start_timeout);  // all waits
  for (;;) {
    sandbox::v1::Session tombstone;
    if (victim) tombstone = victim->ToProto();  // before mu_: it takes the session's lock
    Retired retired;
    Refusal refusal;
    {
      codemode::MutexLock lock(&mu_);
      if (victim) {
        pinned_.erase(victim->metadata().id);
        ++reclaimed_total_;
        retired = RetireLocked(*victim, std::move(tombstone));
        retired.reclaimed = victim_reason;
      }
      auto it = holds_.find(held);
      if (it != holds_.end() && it->second.victims.empty()) {  // room: the check below takes it over
        holds_.erase(it);
        held = 0;
      }
      // Checked again (creations race), in the critical section that freed the slot. A
      // drain alone does not refuse it: its container has started, and its session is
      // kept as the others are (detached at shutdown, for the next start).
      if (stopping_) {
        refusal.why = "the daemon is shutting down";
      } else {
        refusal = RefuseLocked(room, held);  // its own claim, if it gave up, is no other's wait
      }
      if (!refusal.refused()) {
        sessions_[id] = session;
        pinned_.insert(id);
        holds_.erase(std::exchange(held, 0));  // a claim is now one of its owner's sessions
      } else if (held == 0 && !refusal.reclaim.empty()) {  // another creation took its room
        held = HoldLocked(room.owner, wanted, &refusal.reclaim);
      } else if (held != 0) {
        holds_[held].pinned.reset();  // its victim is retired: another is looked for
      }
    }
    FinishRetired(std::move(retired));
    // Ours may be the last reference (deleted meanwhile): dropped on a worker, which joins
    // the session's reader off this thread.
    if (victim) workers_.Post([v = std::move(victim)]() mutable { v.reset(); });
    if (!refusal.refused()) return absl::OkStatus();
    if (refusal.finishing > 0) {
      absl::Status waited = AwaitFinishing(room.owner, wanted, refusal, held, wait_until);
      if (!waited.ok()) return waited;
      continue;
    }
    const Reclaim& reclaim = refusal.reclaim;
    if (reclaim.empty()) return RefusedForRoom(refusal.why, refusal.daemon_full);
    // Full (again): another creation took the room, or this is the first reclaim. Nothing
    // is ended for a caller that gave up.
    if (wanted && !wanted()) return CallerGaveUp(room.owner);
    victim = ReclaimIdle(reclaim, held);
    if (!victim) return RefusedForRoom(refusal.why + kNoneIdle, refusal.daemon_full);
    victim_reason = reclaim.reason;
  }
}

std::shared_ptr<Session> SessionManager::ReclaimIdle(const Reclaim& reclaim, uint64_t held) {
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
      if (held != 0) holds_[held].pinned = c.session->metadata().owner;  // no idle one now
      ++pins_;
    }
    // Ends it only if nothing started on it and it was not used since it was seen idle.
    if (c.session->TerminateIfIdle(reclaim.reason, c.used_ms)) return std::move(c.session);
    {
      codemode::MutexLock lock(&mu_);
      pinned_.erase(id);
      if (held != 0) holds_[held].pinned.reset();
      ++pins_;
    }
    // Lost meanwhile for another reason: OnSessionLost found it pinned and left it to us.
    if (c.session->lost()) OnSessionLost(*c.session);
  }
  return nullptr;
}

std::map<std::string, size_t> SessionManager::IdleSessions() {
  std::vector<std::shared_ptr<Session>> unpinned;
  {
    codemode::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) {
      if (!pinned_.count(id)) unpinned.push_back(s);
    }
  }
  std::map<std::string, size_t> idle;
  for (const std::shared_ptr<Session>& s : unpinned) {
    if (s->idle()) ++idle[s->metadata().owner];  // sessions' locks only outside mu_ (see ReaperLoop)
  }
  return idle;
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
