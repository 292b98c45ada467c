#include "sandboxd/instance_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/secret_file.h"
#include "base/unix_socket.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;

absl::Status Failed(const std::string& what, const std::string& path, int err) {
  return absl::FailedPreconditionError(absl::StrCat(what, " ", path, ": ", strerror(err)));
}

// The pid the holder wrote into the lock file; 0 when unknown (it may not have written it yet).
long HolderPid(int fd) {
  char buf[32] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  long pid = 0;
  if (n <= 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(std::string(buf, n)), &pid)) return 0;
  return pid > 0 ? pid : 0;
}

// Removes a stale socket at `path`. ALREADY_EXISTS when a daemon answers on it: one that
// takes no lock (an older sandboxd), since one that does was refused before this.
absl::Status RemoveStaleSocket(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return absl::OkStatus();
  if (absl::StatusOr<sockaddr_un> addr = codemode::UnixAddress(path); !addr.ok()) return addr.status();
  // A listener whose backlog is full (EAGAIN) is as live as one that accepts.
  const codemode::UniqueFd probe = codemode::ConnectUnix(path, codemode::Blocking::kNo);
  const bool live = probe.get() >= 0 || errno == EAGAIN;
  if (live) return absl::AlreadyExistsError(absl::StrCat("another sandboxd serves ", path));
  fs::remove(path, ec);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<InstanceLock> InstanceLock::Acquire(const std::string& path,
                                                   const std::string& what) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Failed("cannot open the lock file", path, errno);
  InstanceLock lock(fd);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) return Failed("cannot lock", path, err);
    const long pid = HolderPid(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "another sandboxd", pid ? absl::StrCat(" (pid ", pid, ")") : "", " holds ", what,
        " (lock ", path, "); it may still be draining after SIGTERM: start this one once it "
        "has exited"));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    return Failed("cannot write", path, errno);
  }
  return lock;
}

InstanceLock::InstanceLock(InstanceLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

InstanceLock& InstanceLock::operator=(InstanceLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

InstanceLock::~InstanceLock() {
  if (fd_ >= 0) close(fd_);  // drops the flock
}

absl::StatusOr<DaemonLocks> ClaimStateAndSocket(const std::string& state_dir,
                                                const std::string& socket_path) {
  DaemonLocks locks;
  std::string socket_dir = fs::path(socket_path).parent_path().string();
  if (socket_dir.empty()) socket_dir = ".";
  // Both checked before either is made: a refused start leaves neither behind.
  if (absl::Status s = codemode::CheckPrivateDirectory(socket_dir, "the socket's directory", "--socket");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = codemode::ClaimPrivateDirectory(state_dir, "the state directory", "--state_dir");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<InstanceLock> state =
      InstanceLock::Acquire(state_dir + "/sandboxd.lock", "the state directory " + state_dir);
  if (!state.ok()) return state.status();
  locks.state = *std::move(state);
  if (absl::Status s = codemode::ClaimPrivateDirectory(socket_dir, "the socket's directory", "--socket");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<InstanceLock> socket =
      InstanceLock::Acquire(socket_path + ".lock", "the socket " + socket_path);
  if (!socket.ok()) return socket.status();
  locks.socket = *std::move(socket);
  if (absl::Status s = RemoveStaleSocket(socket_path); !s.ok()) return s;
  return locks;
}

BoundSocket BoundSocket::Pin(const std::string& path) {
  BoundSocket bound;
  int fd = open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0) return bound;
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    close(fd);
    return bound;
  }
  bound.path_ = path;
  bound.fd_ = fd;
  return bound;
}

BoundSocket::BoundSocket(BoundSocket&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

BoundSocket& BoundSocket::operator=(BoundSocket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

BoundSocket::~BoundSocket() {
  if (fd_ >= 0) close(fd_);
}

bool BoundSocket::RemoveIfOurs() {
  if (fd_ < 0) return false;
  struct stat ours, now;
  if (fstat(fd_, &ours) != 0 || lstat(path_.c_str(), &now) != 0) return false;
  if (ours.st_dev != now.st_dev || ours.st_ino != now.st_ino) return false;
  return unlink(path_.c_str()) == 0;
}

}  // namespace sandboxd
