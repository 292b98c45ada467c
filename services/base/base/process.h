// One way to start a child process, for both services.
//
// sandboxd runs the podman CLI and the gateway runs stdio MCP servers; both start them
// here, so every child gets the same hardening:
//   - exactly the environment given: never this process's (which may hold tokens);
//   - stdin/stdout/stderr as asked (a pipe to us, or /dev/null), every other descriptor
//     closed, signal mask and dispositions reset;
//   - optionally its own process group (so a signal reaches its grandchildren) and death
//     with us (PR_SET_PDEATHSIG: a crashed gateway leaves no upstream servers behind);
//   - a program that cannot be run is an error of Spawn (with errno), not a child that
//     exits 127.
//
//   codemode::SpawnOptions o;
//   o.argv = {"/usr/bin/podman", "ps"};
//   o.env = {"PATH=/usr/bin:/bin", "HOME=/root"};
//   absl::StatusOr<codemode::Child> child = codemode::Spawn(o);
//   if (!child.ok()) return child.status();
//   ... read child->stdout_fd ...
//   int status = codemode::WaitPid(child->pid);
//
// fork() rather than vfork()/posix_spawn: the child runs a few async-signal-safe calls
// (prctl, setpgid, dup2, chdir, close_range, execve) that posix_spawn cannot express all
// of (no death signal), and the copied page tables of a ~30 MiB process cost well under a
// millisecond, against the ~100 ms of the podman command it starts.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace codemode {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept;
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Reset();

 private:
  int fd_ = -1;
};

struct SpawnOptions {
  enum class Stdio { kNull, kPipe, kInherit };
  std::vector<std::string> argv;
  // What to execute; empty: argv[0], looked up in the PATH of `env` unless it has a '/'.
  std::string program;
  // KEY=VALUE: the child's whole environment.
  std::vector<std::string> env;
  std::string cwd;  // empty: ours
  Stdio stdin_mode = Stdio::kNull;
  Stdio stdout_mode = Stdio::kPipe;
  Stdio stderr_mode = Stdio::kPipe;
  bool new_process_group = false;
  bool die_with_parent = false;  // SIGKILL when this thread's process ends
  // Added to the child's nice value (the spawning thread's) before exec, at most 19: a
  // process that only does bulk work for us gives way to our requests when the CPU is
  // short (as LowerThreadPriority does for a thread); its children inherit it. 0 leaves
  // it; a system that refuses leaves it too.
  int nice = 0;
};

struct Child {
  pid_t pid = -1;
  UniqueFd stdin_fd, stdout_fd, stderr_fd;  // our ends of the kPipe streams
};

// NOT_FOUND when argv[0] is not in PATH; FAILED_PRECONDITION with errno when it cannot be
// executed (or cwd is missing); INTERNAL when no pipe or process could be made.
absl::StatusOr<Child> Spawn(const SpawnOptions& options);

// waitpid that survives EINTR. Returns what waitpid returns.
pid_t WaitPid(pid_t pid, int* status, int flags = 0);

// Exit code, or 128+signal for a child killed by a signal (as shells report it).
int DecodeWaitStatus(int status);

// `name` itself when it contains '/', else the first executable regular file of that name
// in `path` (colon-separated); empty when there is none.
std::string FindInPath(const std::string& name, const std::string& path);

// The PATH entry of a KEY=VALUE environment ("" when absent).
std::string PathOf(const std::vector<std::string>& env);

}  // namespace codemode
