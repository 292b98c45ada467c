// RecordStore: where sandboxd keeps the small records that let a restarted daemon find
// its sessions again. A seam in the manner of LevelDB's Env: the daemon writes files in
// its state directory (DirRecordStore); tests swap in an in-memory store that injects
// faults (tests/sandboxd/unit/fake_record_store.h) to check crash and disk-full handling.
//
//   DirRecordStore store("/var/lib/sandboxd/sessions");
//   if (absl::Status s = store.Put("s-0123", contents); !s.ok()) return s;   // all or nothing
//   for (auto& [key, contents] : *store.List()) ...
//
// The contract every implementation keeps: Put replaces a record as a whole, so after a
// crash at any moment a reader sees the old contents or the new ones, never a mix. Keys
// are short names made of [A-Za-z0-9_-]. Implementations are safe for concurrent use on
// different keys; SessionRecords (session_records.h) serialises writes to one key.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sandboxd {

class RecordStore {
 public:
  RecordStore() = default;
  RecordStore(const RecordStore&) = delete;
  RecordStore& operator=(const RecordStore&) = delete;
  virtual ~RecordStore() = default;
  // Creates or replaces `key`. A full disk is RESOURCE_EXHAUSTED; the old record stays.
  virtual absl::Status Put(const std::string& key, const std::string& contents) = 0;
  // Removes `key`; a key that does not exist is not an error.
  virtual absl::Status Delete(const std::string& key) = 0;
  // Every record as (key, contents), in key order. Fails only when the store as a whole
  // cannot be read; a single unreadable record comes back with empty contents.
  virtual absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List() = 0;
};

// One file per record, `<dir>/<key>.json`, written to `<key>.json.tmp` and renamed over
// the old one. No fsync: the records only have to outlive the daemon (a kill -9 or a
// crash), not the machine, whose reboot ends the containers they point at anyway.
class DirRecordStore : public RecordStore {
 public:
  explicit DirRecordStore(std::string dir) : dir_(std::move(dir)) {}
  absl::Status Put(const std::string& key, const std::string& contents) override;
  absl::Status Delete(const std::string& key) override;
  // Also removes `.tmp` files that a crash between write and rename left behind.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List() override;

  std::string PathOf(const std::string& key) const { return dir_ + "/" + key + ".json"; }

 private:
  const std::string dir_;
};

// Whether `key` is a name every RecordStore accepts.
bool IsValidRecordKey(const std::string& key);

}  // namespace sandboxd
