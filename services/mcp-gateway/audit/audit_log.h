// AuditLog: one JSON line per run_python call and per tool call (docs/observability.md,
// "Audit log"), appended to a file of the operator's (0600, created without following a
// symlink) in a directory only we may use, and rotated by size: `audit.jsonl` becomes
// `audit.jsonl.1`, `.1` becomes `.2`, and so on up to `keep` files. What a line holds is
// its caller's business; the gateway never writes a token, code or arguments into one
// (only their sizes and digests, and the arguments when the operator opts in with
// --audit_arguments).
//
// The directory is claimed at Open (codemode::ClaimPrivateDirectory) and held open: every
// later open, rename and removal is relative to it, so no other user can make or hold the
// rotated names, and renaming the directory or replacing its path later redirects nothing.
//
// Writing never blocks a run, and the audit log never stops one: Write() queues the line
// and returns; a thread appends. Past `max_queued_bytes` a line is dropped and counted
// (dropped(), the metric codemode_gateway_audit_lines_total{result="dropped"}), and so is
// a line the file refuses (disk full, I/O error): the first failure of a run of them is
// logged with its reason, the file is closed and the next line reopens it. The gateway's
// log reports the drops with their number, at most once a second, again once they stop,
// and at shutdown. A kept name (`.1` ... `.keep`) holding something other than a regular
// file or a symlink (a directory) stops rotation (counted: rotation_failures()) instead of
// being renamed or renamed over. The destructor writes what is queued within
// `drain_timeout`; what is left then is dropped, counted and logged.
//
//   auto audit = AuditLog::Open({.path = "/var/lib/mcp-gateway/audit.jsonl"});
//   (*audit)->Write({{"kind", "run"}, ...});
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/notification.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace gateway {

struct AuditOptions {
  std::string path;
  uint64_t max_file_bytes = 64 << 20;   // rotate past this (--audit_max_bytes)
  uint32_t keep = 5;                    // rotated files kept (--audit_keep)
  uint64_t max_queued_bytes = 16 << 20; // lines waiting for the writer
  // After a failed open (or rotation), the next try waits this long (lines meanwhile are
  // dropped, or appended to the current file up to twice max_file_bytes).
  absl::Duration reopen_interval = absl::Seconds(1);
  // How long the destructor waits for the queue to be written (--audit_drain_timeout):
  // keep it well under the service manager's stop timeout (systemd's TimeoutStopSec=20).
  absl::Duration drain_timeout = absl::Seconds(5);
  // write(2) of the writer thread (null: ::write); tests make a slow or a hung disk with it.
  std::function<ssize_t(int fd, const void* data, size_t size)> write = nullptr;
};

class AuditLog {
 public:
  // Claims the file's directory (created 0700 when missing; FAILED_PRECONDITION naming
  // --audit_log and the directory when another user could write it, enter it or swap it
  // on its path) and opens (creates) the file in it; an error when it cannot be opened, is
  // not a regular file, is a symlink, or others may read it.
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(AuditOptions options);
  // Writes what is queued, for at most drain_timeout; the lines left (with the one being
  // written, if any) are dropped, counted and logged, and a writer stuck in write(2) is
  // left to finish on its own (codemode::KeepUntilExit: main() joins it as it returns): it
  // holds what it touches and never logs again. Then logs the totals.
  ~AuditLog();
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Queues one line (`line` gets a "time" field: RFC 3339, UTC, milliseconds). Never blocks
  // on the file. Thread-safe.
  void Write(nlohmann::json line);

  uint64_t written() const;
  uint64_t dropped() const;
  // Rotations done, and refused because a kept name held something other than a regular
  // file or a symlink, or a rename failed.
  uint64_t rotations() const;
  uint64_t rotation_failures() const;
  // Blocks until the queue is empty and written (or dropped): tests.
  void Flush();

 private:
  struct Core;  // everything the writer thread touches: it may outlive the AuditLog
  explicit AuditLog(std::shared_ptr<Core> core);

  std::shared_ptr<Core> core_;
  // Notified as the writer's function returns (a writer left behind is joined after it).
  const std::shared_ptr<codemode::Notification> writer_ended_ = std::make_shared<codemode::Notification>();
  std::thread writer_;
};

// A hex SHA-256 of `text` (code and arguments are audited by digest).
std::string AuditDigest(const std::string& text);

// `text` cut to at most `max_bytes` bytes, at a UTF-8 character boundary, "..." marking a
// cut: for free text (an error message) in an audit line.
std::string AuditText(absl::string_view text, size_t max_bytes = 200);

}  // namespace gateway
