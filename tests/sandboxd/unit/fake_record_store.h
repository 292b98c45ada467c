// FakeRecordStore: an in-memory RecordStore that injects faults, after LevelDB's
// FaultInjectionTestEnv. It keeps the store contract (a Put is whole or not at all) and
// lets a test break everything around it:
//
//   FakeRecordStore store;
//   store.FailPuts(absl::ResourceExhaustedError("No space left on device"));   // disk full
//   store.Corrupt("s-1", "{\"sess");      // a record damaged outside the daemon
//   store.FailList(absl::InternalError("EIO"));
//
// Safe for concurrent use.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "sandboxd/record_store.h"

namespace sandboxd::testing {

class FakeRecordStore : public RecordStore {
 public:
  absl::Status Put(const std::string& key, const std::string& contents) override {
    std::lock_guard<std::mutex> l(mu_);
    ++puts_;
    if (!put_error_.ok()) return put_error_;
    records_[key] = contents;
    return absl::OkStatus();
  }
  absl::Status Delete(const std::string& key) override {
    absl::Duration delay;
    {
      std::lock_guard<std::mutex> l(mu_);
      delay = delete_delay_;
      ++deletes_begun_;
    }
    absl::SleepFor(delay);  // a slow disk: the caller's cleanup is still running
    std::lock_guard<std::mutex> l(mu_);
    if (!delete_error_.ok()) return delete_error_;
    records_.erase(key);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> List() override {
    std::lock_guard<std::mutex> l(mu_);
    if (!list_error_.ok()) return list_error_;
    return std::vector<std::pair<std::string, std::string>>(records_.begin(), records_.end());
  }

  // Every later Put (or Delete, List) fails with `error` until called again with OK.
  void FailPuts(absl::Status error) {
    std::lock_guard<std::mutex> l(mu_);
    put_error_ = std::move(error);
  }
  void FailDeletes(absl::Status error) {
    std::lock_guard<std::mutex> l(mu_);
    delete_error_ = std::move(error);
  }
  void DelayDeletes(absl::Duration delay) {
    std::lock_guard<std::mutex> l(mu_);
    delete_delay_ = delay;
  }
  void FailList(absl::Status error) {
    std::lock_guard<std::mutex> l(mu_);
    list_error_ = std::move(error);
  }
  // Replaces a record's bytes behind the daemon's back.
  void Corrupt(const std::string& key, const std::string& contents) {
    std::lock_guard<std::mutex> l(mu_);
    records_[key] = contents;
  }

  std::optional<std::string> Get(const std::string& key) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = records_.find(key);
    if (it == records_.end()) return std::nullopt;
    return it->second;
  }
  size_t size() {
    std::lock_guard<std::mutex> l(mu_);
    return records_.size();
  }
  int puts() {
    std::lock_guard<std::mutex> l(mu_);
    return puts_;
  }
  // Deletes begun (counted before DelayDeletes' wait).
  int deletes_begun() {
    std::lock_guard<std::mutex> l(mu_);
    return deletes_begun_;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::string> records_;
  absl::Status put_error_, delete_error_, list_error_;
  absl::Duration delete_delay_;
  int puts_ = 0;
  int deletes_begun_ = 0;
};

}  // namespace sandboxd::testing
