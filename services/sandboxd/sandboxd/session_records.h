// SessionRecords: what a restarted sandboxd needs to re-attach to each live session (its
// proto, its catalog and its container), kept in a RecordStore one record per session.
//
//   SessionRecords records(&store);
//   absl::Status added = records.Add(id, [&] { return RecordOf(*session); });  // CreateSession
//   if (!added.ok()) return added;
//   records.Update(id, [&] { return RecordOf(*session); });   // its catalog changed
//   records.Remove(id);                                        // DeleteSession
//   absl::StatusOr<SessionRecords::Loaded> loaded = records.Load();   // at start
//   if (!loaded.ok()) return loaded.status();
//
// A record exists exactly while its session is registered here (Add, or Adopt after Load):
// Update of an unregistered id writes nothing, so a catalog change that lands after
// DeleteSession cannot bring a deleted session's record back. Writes are serialised and
// take their snapshot under the same lock, so the last write always holds the newest
// state even when two updates race. Safe for concurrent use.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "sandbox/v1/sandbox.pb.h"
#include "sandboxd/host_processes.h"
#include "sandboxd/record_store.h"

namespace sandboxd {

struct SessionRecord {
  sandbox::v1::Session session;
  sandbox::v1::Catalog catalog;
  std::string container_name;
  // The bytes its egress quota had counted when the record was written (docs/egress.md,
  // "Across a sandboxd restart").
  uint64_t egress_bytes_used = 0;
  // The init of the sandbox's pid namespace, as noted when its container started
  // (SandboxFactory::NoteProcesses): what a re-attached session's end kills. Absent in an
  // older version's record, and for a runner noted without one.
  std::optional<ProcessRef> init;
};

// The stored form (JSON, readable by hand) and back. An egress count that is not a
// non-negative integer below 2^64 reads as the most there is (UINT64_MAX, which the quota
// caps at its limit): damage spends the session's quota rather than refilling it. A record
// without one (an older version's) reads as 0. An init that is not two positive integers
// reads as none.
std::string EncodeSessionRecord(const SessionRecord& record);
absl::StatusOr<SessionRecord> DecodeSessionRecord(const std::string& contents);

class SessionRecords {
 public:
  using Snapshot = std::function<SessionRecord()>;

  explicit SessionRecords(RecordStore* store) : store_(store) {}

  // Registers `id` and writes its first record. On error nothing is registered or kept.
  absl::Status Add(const std::string& id, const Snapshot& snapshot);
  // Rewrites the record of a registered id; a no-op (OK) for any other id.
  absl::Status Update(const std::string& id, const Snapshot& snapshot);
  // Unregisters `id` and deletes its record.
  absl::Status Remove(const std::string& id);

  struct Loaded {
    std::vector<SessionRecord> records;                        // decoded, not registered
    std::vector<std::pair<std::string, std::string>> broken;   // (id, why) undecodable
  };
  // Reads every record. A recovered session must be registered with Adopt; broken and
  // unwanted ones are deleted with Remove.
  absl::StatusOr<Loaded> Load();
  void Adopt(const std::string& id);

 private:
  RecordStore* const store_;
  codemode::Mutex mu_;
  std::set<std::string> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sandboxd
