#include "audit/audit_log.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/mutex.h"
#include "base/secret_file.h"
#include "base/thread.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

// O_NONBLOCK: a FIFO planted at the path fails at once (ENXIO without a reader) instead of
// hanging the gateway's start; a regular file ignores it.
constexpr int kOpenFlags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK;

// Drops are reported in the gateway's log at most this often.
constexpr absl::Duration kReportEvery = absl::Seconds(1);

// Why lines were dropped (a mask of these, since the last report).
enum DropReason : uint32_t { kQueueFull = 1, kFileRefused = 2, kStopping = 4, kDrainTimeout = 8 };

std::string Reasons(uint32_t mask) {
  std::string out;
  auto add = [&](uint32_t bit, const char* text) {
    if (mask & bit) absl::StrAppend(&out, out.empty() ? "" : "; ", text);
  };
  add(kQueueFull, "the queue was full");
  add(kFileRefused, "the file refused them, or could not be rotated or reopened");
  add(kStopping, "written after shutdown began");
  add(kDrainTimeout, "still queued when --audit_drain_timeout passed at shutdown");
  return out;
}

// Opens `name` in the directory `dir_fd` for appending and checks it is a private regular
// file; its size in `size`. `path` names it in messages.
absl::StatusOr<int> OpenPrivateAt(int dir_fd, const std::string& name, const std::string& path,
                                  uint64_t* size) {
  const int fd = openat(dir_fd, name.c_str(), kOpenFlags, 0600);
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

// renameat(2) in `dir_fd` that never replaces `to`: renameat2(RENAME_NOREPLACE), or where
// the file system lacks it (NFS), renameat after checking that `to` does not exist (only we
// and root make names in the directory, so nothing comes between).
int RenameNoReplaceAt(int dir_fd, const std::string& from, const std::string& to) {
  if (renameat2(dir_fd, from.c_str(), dir_fd, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  struct stat st;
  if (fstatat(dir_fd, to.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    errno = EEXIST;
    return -1;
  }
  return renameat(dir_fd, from.c_str(), dir_fd, to.c_str());
}

}  // namespace

struct AuditLog::Core {
  Core(AuditOptions o, int dir_fd, std::string name, int fd, uint64_t size)
      : options(std::move(o)), dir_fd_(dir_fd), name_(std::move(name)), fd_(fd), size_(size) {
    if (!options.write) options.write = ::write;
  }
  ~Core() {
    if (fd_ >= 0) close(fd_);
    close(dir_fd_);
  }

  void Loop();
  // Appends one line, rotating first when it would pass max_file_bytes. Writer thread only.
  bool Append(const std::string& line);
  // write(2)s all of `text` to fd_; false (with the reason logged once a run of failures)
  // when the file refuses it: then fd_ is closed, for the next line to reopen the path.
  bool WriteAll(absl::string_view text);
  bool Rotate();
  std::string ShiftKept();
  bool Reopen();
  // Logs `message` unless the AuditLog is gone (a writer left behind never logs: spdlog may
  // be torn down by then).
  void Warn(const std::string& message);
  void DropLocked(uint32_t why, uint64_t lines) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReportDropsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Unreported() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return dropped_.load() != reported_; }

  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !queue_.empty() || stopping_;
  }
  // What wakes the idle writer: lines, the stop, or drops to report (Write drops lines
  // under mu_ while the writer may already be waiting here).
  bool HasWorkOrDropsToReport() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return HasWorkOrStopping() || (Unreported() && !abandoned_);
  }
  bool Drained() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty() && !writing_; }
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; }

  AuditOptions options;
  // The directory claimed at Open, and the file's name in it: every open, rename and
  // removal is relative to it, so whatever its path names later is never written to.
  const int dir_fd_;
  const std::string name_;
  int fd_;            // writer thread only
  uint64_t size_;     // writer thread only
  bool torn_ = false;     // a failed write left part of a line in the file: writer only
  bool failing_ = false;  // the last write failed (its reason is logged): writer only
  absl::Time next_reopen_ = absl::InfinitePast();  // writer thread only
  absl::Time next_rotate_ = absl::InfinitePast();  // writer thread only
  codemode::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  size_t unwritten_ ABSL_GUARDED_BY(mu_) = 0;  // lines of the writer's batch not yet counted
  bool writing_ ABSL_GUARDED_BY(mu_) = false;  // the writer holds a batch
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;       // the writer has returned
  bool abandoned_ ABSL_GUARDED_BY(mu_) = false;  // the AuditLog is gone; the writer may not be
  // Drops reported in the log so far, why the others were dropped, when the last report was.
  uint64_t reported_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t why_ ABSL_GUARDED_BY(mu_) = 0;
  codemode::SteadyTime last_report_ ABSL_GUARDED_BY(mu_) = codemode::SteadyTime::min();
  std::atomic<uint64_t> written_{0};
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> rotations_{0};
  std::atomic<uint64_t> rotation_failures_{0};
};

std::string AuditDigest(const std::string& text) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(digest), sizeof digest));
}

std::string AuditText(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes >= 3 ? max_bytes - 3 : 0;
  // Back off continuation bytes (10xxxxxx) so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "...");
}

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(AuditOptions options) {
  if (options.keep == 0) options.keep = 1;
  const std::string& path = options.path;
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(absl::StrCat("--audit_log ", path, " names no file"));
  }
  // Rotated names (audit.jsonl.1, ...) are made in this directory: one another user may
  // write could hold them first and stop rotation, or swap the directory under us.
  if (absl::Status claimed = codemode::ClaimPrivateDirectory(dir, "the audit log's directory", "--audit_log");
      !claimed.ok()) {
    return claimed;
  }
  const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("--audit_log ", path, ": cannot open its directory: ", std::strerror(errno)));
  }
  uint64_t size = 0;
  absl::StatusOr<int> fd = OpenPrivateAt(dir_fd, name, path, &size);
  if (!fd.ok()) {
    close(dir_fd);
    return fd.status();
  }
  return std::unique_ptr<AuditLog>(
      new AuditLog(std::make_shared<Core>(std::move(options), dir_fd, std::move(name), *fd, size)));
}

AuditLog::AuditLog(std::shared_ptr<Core> core) : core_(std::move(core)) {
  // The thread holds the Core, so a writer left behind at shutdown touches nothing freed.
  writer_ = codemode::StartThread("audit writer", [core = core_, ended = writer_ended_] {
    codemode::RunContained("audit writer", [&core] { core->Loop(); });
    ended->Notify();
  });
}

AuditLog::~AuditLog() {
  Core& c = *core_;
  bool drained;
  {
    codemode::MutexLock lock(&c.mu_);
    c.stopping_ = true;
    drained = c.mu_.AwaitWithTimeout(absl::Condition(&c, &Core::Done), c.options.drain_timeout);
    if (!drained && c.queue_.size() + c.unwritten_ > 0) {
      // The writer is slow or stuck in write(2): what it has not counted is lost to us.
      const uint64_t left = c.queue_.size() + c.unwritten_;
      c.queue_.clear();
      c.queued_bytes_ = 0;
      c.unwritten_ = 0;
      spdlog::error("audit log: {} line(s) not written within --audit_drain_timeout ({}): dropped",
                    left, absl::FormatDuration(c.options.drain_timeout));
      c.DropLocked(kDrainTimeout, left);
    }
    if (c.Unreported()) c.ReportDropsLocked();
    c.abandoned_ = true;
    spdlog::info("audit log closed: {} line(s) written, {} dropped", c.written_.load(),
                 c.dropped_.load());
  }
  if (drained) {
    writer_.join();
  } else {
    // It holds core_; main() joins it when it returns, or ends the process under it.
    codemode::KeepUntilExit(std::move(writer_), writer_ended_);
  }
}

uint64_t AuditLog::written() const { return core_->written_.load(); }
uint64_t AuditLog::dropped() const { return core_->dropped_.load(); }
uint64_t AuditLog::rotations() const { return core_->rotations_.load(); }
uint64_t AuditLog::rotation_failures() const { return core_->rotation_failures_.load(); }

void AuditLog::Write(nlohmann::json line) {
  line["time"] = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone());
  // Strings may hold what sandboxed code or an upstream chose: invalid UTF-8 is replaced,
  // and dump() escapes control characters, so one line stays one line.
  std::string text = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text += '\n';
  Core& c = *core_;
  codemode::MutexLock lock(&c.mu_);
  if (c.stopping_) {
    c.DropLocked(kStopping, 1);
  } else if (c.queued_bytes_ + text.size() > c.options.max_queued_bytes) {
    c.DropLocked(kQueueFull, 1);
  } else {
    c.queued_bytes_ += text.size();
    c.queue_.push_back(std::move(text));
  }
}

void AuditLog::Flush() {
  codemode::MutexLock lock(&core_->mu_);
  core_->mu_.Await(absl::Condition(core_.get(), &Core::Drained));
}

// Counts `lines` dropped and reports them when the last report is a second old.
void AuditLog::Core::DropLocked(uint32_t why, uint64_t lines) {
  dropped_.fetch_add(lines);
  why_ |= why;
  if (std::chrono::steady_clock::now() >= codemode::SteadyAfter(last_report_, kReportEvery)) ReportDropsLocked();
}

// Logs the drops since the last report: their true number, why, and the total.
void AuditLog::Core::ReportDropsLocked() {
  const uint64_t total = dropped_.load();
  if (abandoned_ || total == reported_) return;
  spdlog::warn("audit log: {} line(s) dropped since the last report ({}); {} dropped since the "
               "start, {} written",
               total - reported_, Reasons(why_), total, written_.load());
  reported_ = total;
  why_ = 0;
  last_report_ = std::chrono::steady_clock::now();
}

void AuditLog::Core::Warn(const std::string& message) {
  codemode::MutexLock lock(&mu_);
  if (!abandoned_) spdlog::warn("audit log: {}", message);
}

void AuditLog::Core::Loop() {
  for (;;) {
    std::deque<std::string> batch;
    {
      codemode::MutexLock lock(&mu_);
      const absl::Condition work(this, &Core::HasWorkOrStopping);
      // Drops not yet reported are reported once the last report is a second old, even
      // when no more come: nothing but this thread would report them.
      mu_.Await(absl::Condition(this, &Core::HasWorkOrDropsToReport));
      while (Unreported() && !abandoned_ &&
             !mu_.AwaitWithDeadline(work, codemode::SteadyAfter(last_report_, kReportEvery))) {
        ReportDropsLocked();
      }
      if (!HasWorkOrStopping()) continue;  // reported; wait again
      if (queue_.empty()) {  // stopping, and everything is written
        done_ = true;
        return;
      }
      batch.swap(queue_);
      queued_bytes_ = 0;
      unwritten_ = batch.size();
      writing_ = true;
    }
    for (const std::string& line : batch) {
      const bool ok = Append(line);
      codemode::MutexLock lock(&mu_);
      if (abandoned_) return;  // the destructor counted this line and the rest as dropped
      --unwritten_;
      if (ok) {
        written_.fetch_add(1);
      } else {
        DropLocked(kFileRefused, 1);
      }
    }
    codemode::MutexLock lock(&mu_);
    writing_ = false;
  }
}

bool AuditLog::Core::Append(const std::string& line) {
  if (fd_ < 0 && !Reopen()) return false;
  if (size_ > 0 && size_ + line.size() > options.max_file_bytes && !Rotate()) return false;
  // The part of a line a failed write left is ended first: every whole line stays a line.
  if (torn_ && !WriteAll("\n")) return false;
  torn_ = false;
  if (!WriteAll(line)) return false;
  failing_ = false;
  return true;
}

bool AuditLog::Core::WriteAll(absl::string_view text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = options.write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n > 0) {
      done += static_cast<size_t>(n);
      size_ += static_cast<uint64_t>(n);
      continue;
    }
    const int error = n < 0 ? errno : EIO;
    torn_ = torn_ || done > 0;
    if (!failing_) {
      Warn(absl::StrCat("cannot write ", options.path, ": ", std::strerror(error),
                        "; the line is dropped (counted) and the file reopened for the next one"));
    }
    failing_ = true;
    // The path may name a usable file again (a remount, a replaced file): the next line
    // opens it anew, at most once per reopen_interval.
    close(fd_);
    fd_ = -1;
    return false;
  }
  return true;
}

// audit.jsonl -> .1 -> .2 ... -> .keep (the oldest is replaced), then a new audit.jsonl.
// Only this thread writes the file, so no line is lost between the rename and the open.
// Everything happens in the directory claimed at Open, whatever its path names now. The
// kept files move only when the file's name there still names the file we write: when it
// was moved or removed (or a reopen failed), a new file is opened under that name and
// nothing kept is touched (otherwise a failed reopen would make every later line shift the
// kept files, each shift deleting the oldest, and auditing would never resume).
// A rotation that cannot be done whole is not done (a directory at `.1` would otherwise
// make every rotation replace `.1`): lines go on to the current file up to twice
// max_file_bytes, then are dropped, and rotation is tried again each reopen_interval.
bool AuditLog::Core::Rotate() {
  const bool may_grow = size_ < 2 * options.max_file_bytes;
  const absl::Time now = absl::Now();
  if (now < next_rotate_) return may_grow;
  const std::string& path = options.path;
  struct stat ours, there;
  const bool still_ours = fstat(fd_, &ours) == 0 &&
                          fstatat(dir_fd_, name_.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0 &&
                          ours.st_ino == there.st_ino && ours.st_dev == there.st_dev;
  if (still_ours) {
    std::string failed = ShiftKept();
    if (failed.empty() && RenameNoReplaceAt(dir_fd_, name_, absl::StrCat(name_, ".1")) != 0) {
      failed = absl::StrCat("cannot rename it to ", path, ".1: ", std::strerror(errno));
    }
    if (!failed.empty()) {
      rotation_failures_.fetch_add(1);
      next_rotate_ = now + options.reopen_interval;
      Warn(absl::StrCat("not rotating ", path, ": ", failed, "; it grows to ",
                        2 * options.max_file_bytes, " bytes, then lines are dropped, until "
                        "the kept names are regular files, symlinks or free (tried again in ",
                        absl::FormatDuration(options.reopen_interval), ")"));
      return may_grow;
    }
    rotations_.fetch_add(1);
  }
  close(fd_);
  fd_ = -1;
  return Reopen();
}

// Frees `.1` for the file being written: removes `.keep` and moves `.keep-1` ... `.1` up by
// one, never renaming onto anything. A kept name may hold a regular file or a symlink,
// whoever's (only we and root make names in the claimed directory; a symlink is moved or
// removed, never followed). Anything else there (a directory, a FIFO, a device) stops the
// rotation before anything is touched. The error, or "" when `.1` is free.
std::string AuditLog::Core::ShiftKept() {
  const std::string& path = options.path;
  for (uint32_t i = 1; i <= options.keep; ++i) {
    const std::string name = absl::StrCat(name_, ".", i);
    struct stat st;
    if (fstatat(dir_fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;
      return absl::StrCat("cannot stat ", path, ".", i, ": ", std::strerror(errno));
    }
    if (!S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
      return absl::StrCat(path, ".", i, " is not a regular file or a symlink");
    }
  }
  const std::string oldest = absl::StrCat(name_, ".", options.keep);
  if (unlinkat(dir_fd_, oldest.c_str(), 0) != 0 && errno != ENOENT) {
    return absl::StrCat("cannot remove ", path, ".", options.keep, ": ", std::strerror(errno));
  }
  for (uint32_t i = options.keep; i > 1; --i) {
    const std::string from = absl::StrCat(name_, ".", i - 1), to = absl::StrCat(name_, ".", i);
    if (RenameNoReplaceAt(dir_fd_, from, to) != 0 && errno != ENOENT) {
      return absl::StrCat("cannot rename ", path, ".", i - 1, " to ", path, ".", i, ": ",
                          std::strerror(errno));
    }
  }
  return "";
}

// Opens the file's name in the claimed directory anew (at most once per reopen_interval:
// lines in between are dropped and counted, not each one a failed open and a log line).
bool AuditLog::Core::Reopen() {
  const absl::Time now = absl::Now();
  if (now < next_reopen_) return false;
  absl::StatusOr<int> fd = OpenPrivateAt(dir_fd_, name_, options.path, &size_);
  if (!fd.ok()) {
    next_reopen_ = now + options.reopen_interval;
    Warn(std::string(fd.status().message()));
    return false;
  }
  fd_ = *fd;
  if (size_ == 0) torn_ = false;  // a new file holds no part of a line
  return true;
}

}  // namespace gateway
