// One sandboxd per state directory and per socket. A daemon that got SIGTERM stops
// listening at once but drains for up to --shutdown_grace while it still holds every
// session; a second one started in that window would see a socket nobody answers on, take
// it over and re-attach every session, and the two would lose them all between them. So
// each daemon holds exclusive flock(2)s on
// <state_dir>/sandboxd.lock and <socket>.lock from before it touches either until it
// exits (the kernel drops them with the process, also on a crash or SIGKILL), and a
// second start is refused at once, naming the holder's pid:
//
//   absl::StatusOr<DaemonLocks> locks = ClaimStateAndSocket(state_dir, socket_path);
//   if (!locks.ok()) { spdlog::critical("{}", locks.status().message()); return 1; }
//   ... bind socket_path ...
//   BoundSocket bound = BoundSocket::Pin(socket_path);
//   ... serve, drain ...
//   bound.RemoveIfOurs();   // never another daemon's socket
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace sandboxd {

// An exclusive, non-blocking flock(2) on a lock file, held until destruction. The file
// stays (removing it would let two daemons lock two different files of the same name).
class InstanceLock {
 public:
  InstanceLock() = default;  // holds nothing
  // Opens `path` (created 0600 in an existing directory; a symlink is refused), locks it
  // without waiting and writes our pid into it. When another process holds it:
  // FAILED_PRECONDITION "another sandboxd (pid N) holds <what> ...".
  static absl::StatusOr<InstanceLock> Acquire(const std::string& path, const std::string& what);
  InstanceLock(InstanceLock&& other) noexcept;
  InstanceLock& operator=(InstanceLock&& other) noexcept;
  ~InstanceLock();

  bool held() const { return fd_ >= 0; }

 private:
  explicit InstanceLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

struct DaemonLocks {
  InstanceLock state;   // <state_dir>/sandboxd.lock
  InstanceLock socket;  // <socket>.lock
};

// What a daemon does before it touches its state directory or socket: claims the state
// directory (codemode::ClaimPrivateDirectory: created 0700 when missing; an existing one
// must be ours and closed to others, and is never chmod'ed) and locks it, claims the
// socket's directory the same way and locks the socket, then removes a stale socket. Refuses (FAILED_PRECONDITION) when
// another sandboxd holds either lock, and (ALREADY_EXISTS) when a daemon that takes no
// lock (an older sandboxd) answers on the socket.
absl::StatusOr<DaemonLocks> ClaimStateAndSocket(const std::string& state_dir,
                                                const std::string& socket_path);

// The socket file this daemon bound, pinned by an O_PATH descriptor: while it is held,
// its inode (st_dev, st_ino) cannot be freed and so cannot come back as another file's,
// as a bare comparison of numbers after the path was replaced could (ext4 and others
// reuse a freed inode number at once).
class BoundSocket {
 public:
  BoundSocket() = default;  // holds nothing; removes nothing
  // The socket at `path` now; holds nothing when `path` is no socket.
  static BoundSocket Pin(const std::string& path);
  BoundSocket(BoundSocket&& other) noexcept;
  BoundSocket& operator=(BoundSocket&& other) noexcept;
  ~BoundSocket();

  bool held() const { return fd_ >= 0; }
  // Removes the path only while it is still this socket: one that another daemon has
  // bound there since is left alone. True if removed.
  bool RemoveIfOurs();

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace sandboxd
