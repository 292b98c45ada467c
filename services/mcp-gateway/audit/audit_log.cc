#include "audit/audit_log.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

// O_NONBLOCK: a FIFO planted at the path fails at once (ENXIO without a reader) instead of
// hanging the gateway's start (attack round 19, F5); a regular file ignores it.
constexpr int kOpenFlags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;

// Opens `path` for appending and checks it is a private regular file; its size in `size`.
absl::StatusOr<int> OpenPrivate(const std::string& path, uint64_t* size) {
  const int fd = open(path.c_str(), kOpenFlags, 0600);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--audit_log ", path, ": cannot open: ", std::strerror(errno),
                     errno == ELOOP ? " (a symlink: refused)" : ""));
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 077) != 0 ||
      st.st_uid != geteuid()) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "--audit_log ", path, ": must be a regular file of ours that only we can read (mode 0600)"));
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

}  // namespace

std::string AuditDigest(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(AuditOptions options) {
  if (options.keep == 0) options.keep = 1;
  uint64_t size = 0;
  absl::StatusOr<int> fd = OpenPrivate(options.path, &size);
  if (!fd.ok()) return fd.status();
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(options), *fd, size));
}

AuditLog::AuditLog(AuditOptions options, int fd, uint64_t size)
    : options_(std::move(options)), fd_(fd), size_(size) {
  writer_ = std::thread([this] { Loop(); });
}

AuditLog::~AuditLog() {
  {
    codemode::MutexLock lock(&mu_);
    stopping_ = true;
  }
  writer_.join();
  if (fd_ >= 0) close(fd_);
}

void AuditLog::Write(nlohmann::json line) {
  line["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  // Strings may hold what sandboxed code or an upstream chose: invalid UTF-8 is replaced,
  // and dump() escapes control characters, so one line stays one line.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  {
    codemode::MutexLock lock(&mu_);
    if (!stopping_ && queued_bytes_ + text.size() <= options_.max_queued_bytes) {
      queued_bytes_ += text.size();
      queue_.push_back(std::move(text));
      return;
    }
  }
  Drop("the queue is full");
}

void AuditLog::Flush() {
  codemode::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(this, &AuditLog::Drained));
}

void AuditLog::Loop() {
  for (;;) {
    std::deque<std::string> batch;
    {
      codemode::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &AuditLog::HasWorkOrStopping));
      if (queue_.empty()) return;  // stopping, and everything is written
      batch.swap(queue_);
      queued_bytes_ = 0;
      writing_ = true;
    }
    for (const std::string& line : batch) {
      if (Append(line)) {
        written_.fetch_add(1);
      } else {
        Drop("the file refused it");
      }
    }
    codemode::MutexLock lock(&mu_);
    writing_ = false;
  }
}

bool AuditLog::Append(const std::string& line) {
  if (fd_ < 0 && !Reopen()) return false;
  if (size_ > 0 && size_ + line.size() > options_.max_file_bytes && !Rotate()) return false;
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  size_ += line.size();
  return true;
}

// audit.jsonl -> .1 -> .2 ... -> .keep (the oldest is replaced), then a new audit.jsonl.
// Only this thread writes the file, so no line is lost between the rename and the open.
// The kept files move only when `path` still names the file we write: when it was moved or
// removed (or a reopen failed), a new file is opened there and nothing kept is touched
// (attack round 19, F4: a failed reopen made every later line shift the kept files, each
// shift deleting the oldest, and auditing never resumed).
bool AuditLog::Rotate() {
  const std::string& path = options_.path;
  struct stat ours, there;
  const bool still_ours = fstat(fd_, &ours) == 0 && stat(path.c_str(), &there) == 0 &&
                          ours.st_ino == there.st_ino && ours.st_dev == there.st_dev;
  if (still_ours) {
    for (uint32_t i = options_.keep; i > 1; --i) {
      (void)rename(absl::StrCat(path, ".", i - 1).c_str(), absl::StrCat(path, ".", i).c_str());
    }
    if (rename(path.c_str(), absl::StrCat(path, ".1").c_str()) != 0) {
      spdlog::warn("audit log: cannot rotate {}: {}", path, std::strerror(errno));
      return size_ < 2 * options_.max_file_bytes;  // keep writing a while, not without bound
    }
  }
  close(fd_);
  fd_ = -1;
  return Reopen();
}

// Opens `path` anew (at most once per reopen_interval: lines in between are dropped and
// counted, not each one a failed open and a log line).
bool AuditLog::Reopen() {
  const absl::Time now = absl::Now();
  if (now < next_reopen_) return false;
  absl::StatusOr<int> fd = OpenPrivate(options_.path, &size_);
  if (!fd.ok()) {
    next_reopen_ = now + options_.reopen_interval;
    spdlog::warn("audit log: {}", std::string(fd.status().message()));
    return false;
  }
  fd_ = *fd;
  return true;
}

void AuditLog::Drop(const char* why) {
  const uint64_t dropped = dropped_.fetch_add(1) + 1;
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  int64_t last = last_report_ms_.load();
  if (now_ms - last >= 1000 && last_report_ms_.compare_exchange_strong(last, now_ms)) {
    spdlog::warn("audit log: a line was dropped ({}); {} dropped since the start", why, dropped);
  }
}

}  // namespace gateway
