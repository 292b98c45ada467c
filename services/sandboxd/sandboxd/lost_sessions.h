// LostSessions: the tombstones of lost sessions. A lost session (its container died, or
// its runner broke the protocol, which sandboxed code can do on purpose) gives its slot
// and its container back at once; what stays is this small record, so that its client
// still learns what happened (GetSession: state LOST with the reason; every other call:
// FAILED_PRECONDITION "session lost: <reason>") until it deletes the id, the tombstone
// expires, or newer tombstones push it out.
//
// Bounded: at most `max` tombstones (each a few KiB: label and owner are capped at 1 KiB
// by CreateSession, the reason here). Past the bound the oldest tombstone of the owner
// holding the most goes, so one owner losing sessions in a loop only pushes out its own.
//
// Not thread-safe: the SessionManager guards it with its own lock.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sandbox/v1/sandbox.pb.h"

namespace sandboxd {

class LostSessions {
 public:
  // Reasons longer than this are clipped (they can quote what the runner sent).
  static constexpr size_t kMaxReasonBytes = 1024;

  explicit LostSessions(size_t max) : max_(max) {}

  // Keeps `session` (its state set to LOST) as lost at `now_ms`; returns the ids pushed
  // out to stay within the bound. max 0: nothing is kept.
  std::vector<std::string> Add(sandbox::v1::Session session, int64_t now_ms);
  // The tombstone of `id`, or nullptr.
  const sandbox::v1::Session* Find(const std::string& id) const;
  bool Remove(const std::string& id);
  // Those of `owner` (all when empty).
  std::vector<sandbox::v1::Session> List(const std::string& owner) const;
  // Removes tombstones kept since before `cutoff_ms`; returns their ids.
  std::vector<std::string> ExpireBefore(int64_t cutoff_ms);
  size_t size() const { return by_id_.size(); }

 private:
  struct Entry {
    sandbox::v1::Session session;
    int64_t lost_at_ms = 0;
    uint64_t seq = 0;  // order of arrival: the oldest has the smallest
  };
  // Removes the oldest tombstone of the owner holding the most; returns its id.
  std::string EvictOne();

  const size_t max_;
  uint64_t next_seq_ = 0;
  std::map<std::string, Entry> by_id_;
};

}  // namespace sandboxd
