// AuditLog: one JSON line per run_python call and per tool call (docs/observability.md,
// "Audit log"), appended to a file of the operator's (0600, created without following a
// symlink) and rotated by size: `audit.jsonl` becomes `audit.jsonl.1`, `.1` becomes `.2`,
// and so on up to `keep` files. What a line holds is its caller's business; the gateway
// never writes a token, code or arguments into one (only their sizes and digests, and
// the arguments when the operator opts in with --audit_arguments).
//
// Writing never blocks a run: Write() queues the line and returns; a thread appends. Past
// `max_queued_bytes` a line is dropped and counted (dropped(), the metric
// codemode_gateway_audit_lines_dropped_total), and so is a line the file refuses (disk
// full); every drop is also reported in the gateway's log, at most once a second. The
// destructor writes what is queued.
//
//   auto audit = AuditLog::Open({.path = "/var/lib/mcp-gateway/audit.jsonl"});
//   (*audit)->Write({{"kind", "run"}, ...});
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/mutex.h"
#include "nlohmann/json.hpp"

namespace gateway {

struct AuditOptions {
  std::string path;
  uint64_t max_file_bytes = 64 << 20;   // rotate past this (--audit_max_bytes)
  uint32_t keep = 5;                    // rotated files kept (--audit_keep)
  uint64_t max_queued_bytes = 16 << 20; // lines waiting for the writer
  // After a failed open, the next try waits this long (lines meanwhile are dropped).
  absl::Duration reopen_interval = absl::Seconds(1);
};

class AuditLog {
 public:
  // Opens (creates) the file; an error when it cannot be opened, is not a regular file, is
  // a symlink, or others may read it.
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(AuditOptions options);
  ~AuditLog();  // writes what is queued, then closes
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Queues one line (`line` gets a "time" field: RFC 3339, UTC, milliseconds). Never blocks
  // on the file. Thread-safe.
  void Write(nlohmann::json line);

  uint64_t written() const { return written_.load(); }
  uint64_t dropped() const { return dropped_.load(); }
  // Blocks until the queue is empty and written (or dropped): tests, shutdown.
  void Flush();

 private:
  AuditLog(AuditOptions options, int fd, uint64_t size);
  void Loop();
  // Appends one line, rotating first when it would pass max_file_bytes. Writer thread only.
  bool Append(const std::string& line);
  bool Rotate();
  bool Reopen();
  void Drop(const char* why);

  const AuditOptions options_;
  int fd_;            // writer thread only
  uint64_t size_;     // writer thread only
  absl::Time next_reopen_ = absl::InfinitePast();  // writer thread only
  codemode::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // the writer holds a batch
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || stopping_;
  }
  bool Drained() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && !writing_; }
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<int64_t> last_report_ms_{0};
  std::thread writer_;
};

// A hex SHA-256 of `text` (code and arguments are audited by digest).
std::string AuditDigest(const std::string& text);

}  // namespace gateway
