#include "sandboxd/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace sandboxd {
namespace {

// Owns a file descriptor; closes it on destruction.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

int WaitPid(pid_t pid, int flags, int* status) {
  for (;;) {
    pid_t r = waitpid(pid, status, flags);
    if (r >= 0 || errno != EINTR) return r;
  }
}

}  // namespace

std::string FindInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    return access(name.c_str(), X_OK) == 0 ? name : "";
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/", name);
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

absl::StatusOr<SubprocessResult> RunSubprocess(const std::vector<std::string>& argv,
                                               const SubprocessOptions& opts) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  std::string program = FindInPath(argv[0]);
  if (program.empty()) {
    return absl::NotFoundError(absl::StrCat("'", argv[0], "' not found in PATH"));
  }

  int out_pipe[2], err_pipe[2], in_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  Fd out_r(out_pipe[0]), out_w(out_pipe[1]);
  if (pipe2(err_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  Fd err_r(err_pipe[0]), err_w(err_pipe[1]);
  if (pipe2(in_pipe, O_CLOEXEC) != 0) return absl::InternalError("pipe2 failed");
  Fd in_r(in_pipe[0]), in_w(in_pipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_r.get(), 0);
  posix_spawn_file_actions_adddup2(&actions, out_w.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, err_w.get(), 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t default_signals;
  sigemptyset(&default_signals);
  sigaddset(&default_signals, SIGPIPE);
  sigaddset(&default_signals, SIGTERM);
  sigaddset(&default_signals, SIGINT);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  sigset_t empty_mask;
  sigemptyset(&empty_mask);
  posix_spawnattr_setsigmask(&attr, &empty_mask);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  std::vector<char*> cargv;
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  if (opts.env) {
    for (const auto& e : *opts.env) cenv.push_back(const_cast<char*>(e.c_str()));
    cenv.push_back(nullptr);
  }

  pid_t pid = -1;
  int rc = posix_spawn(&pid, program.c_str(), &actions, &attr, cargv.data(),
                       opts.env ? cenv.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot start ", program, ": ", strerror(rc)));
  }
  out_w.Reset();
  err_w.Reset();
  in_r.Reset();

  // Feed stdin (small payloads only: podman import streams are not used here).
  if (!opts.stdin_text.empty()) {
    size_t off = 0;
    while (off < opts.stdin_text.size()) {
      ssize_t n = write(in_w.get(), opts.stdin_text.data() + off, opts.stdin_text.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
  }
  in_w.Reset();

  SubprocessResult result;
  absl::Time deadline = absl::Now() + opts.timeout;
  bool out_open = true, err_open = true;
  char buf[65536];
  int status = 0;
  bool exited = false;
  while (out_open || err_open) {
    pollfd fds[2];
    int nfds = 0;
    if (out_open) fds[nfds++] = {out_r.get(), POLLIN, 0};
    if (err_open) fds[nfds++] = {err_r.get(), POLLIN, 0};
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      kill(pid, SIGKILL);
      result.timed_out = true;
      break;
    }
    int timeout_ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 50));
    int n = poll(fds, nfds, timeout_ms);
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < nfds && n > 0; ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      bool is_out = fds[i].fd == out_r.get();
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        (is_out ? out_open : err_open) = false;
        continue;
      }
      std::string& dst = is_out ? result.stdout_text : result.stderr_text;
      if (dst.size() < opts.max_output_bytes) {
        dst.append(buf, std::min<size_t>(static_cast<size_t>(got), opts.max_output_bytes - dst.size()));
      }
    }
    // A daemonising grandchild (conmon) may keep our pipes open: once the child has
    // exited and nothing is readable, stop waiting for EOF.
    if (n == 0 && WaitPid(pid, WNOHANG, &status) == pid) {
      exited = true;
      break;
    }
  }
  if (!exited) WaitPid(pid, 0, &status);
  result.exit_code = DecodeWaitStatus(status);
  return result;
}

}  // namespace sandboxd
