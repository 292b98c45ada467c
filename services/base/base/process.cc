#include "base/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace codemode {

UniqueFd& UniqueFd::operator=(UniqueFd&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.Release();
  }
  return *this;
}

void UniqueFd::Reset() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

pid_t WaitPid(pid_t pid, int* status, int flags) {
  for (;;) {
    pid_t r = waitpid(pid, status, flags);
    if (r >= 0 || errno != EINTR) return r;
  }
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

std::string FindInPath(const std::string& name, const std::string& path) {
  if (name.find('/') != std::string::npos) return name;
  for (absl::string_view dir : absl::StrSplit(path.empty() ? "/usr/bin:/bin" : path, ':')) {
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

std::string PathOf(const std::vector<std::string>& env) {
  for (const auto& kv : env) {
    if (kv.rfind("PATH=", 0) == 0) return kv.substr(5);
  }
  return "";
}

namespace {

// In the child, between fork and exec: async-signal-safe calls only (the parent has
// threads). Reports errno through `report` and exits on failure.
// Child after fork: tells the parent why through `report`, then exits.
[[noreturn]] void ReportAndExit(int report, int err) {
  while (write(report, &err, sizeof err) < 0 && errno == EINTR) {
  }
  _exit(127);
}

[[noreturn]] void ExecChild(const SpawnOptions& o, const char* exe, char* const* argv,
                            char* const* envp, const int stdio[3], int report, pid_t parent) {
  auto fail = [report](int err) { ReportAndExit(report, err); };
  if (o.die_with_parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
    if (getppid() != parent) _exit(127);  // the parent died before prctl took effect
  }
  if (o.new_process_group && setpgid(0, 0) != 0) fail(errno);
  if (o.nice > 0) {
    errno = 0;
    const int now = getpriority(PRIO_PROCESS, 0);
    if (now != -1 || errno == 0) setpriority(PRIO_PROCESS, 0, std::min(now + o.nice, 19));
  }
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int fd = 0; fd < 3; ++fd) {
    // dup2 clears O_CLOEXEC on the copy; a descriptor already in place keeps its flags.
    if (stdio[fd] != fd && dup2(stdio[fd], fd) < 0) fail(errno);
    if (stdio[fd] == fd) fcntl(fd, F_SETFD, 0);
  }
  if (!o.cwd.empty() && chdir(o.cwd.c_str()) != 0) fail(errno);
  // Everything above 2 but the report pipe (O_CLOEXEC: a successful exec closes it).
  if (report > 3 && syscall(SYS_close_range, 3, report - 1, 0) != 0) {
    for (int fd = 3; fd < report; ++fd) close(fd);
  }
  if (syscall(SYS_close_range, report + 1, ~0U, 0) != 0) {
    for (int fd = report + 1; fd < 65536; ++fd) close(fd);
  }
  execve(exe, argv, envp);
  ReportAndExit(report, errno);
}

}  // namespace

absl::StatusOr<Child> Spawn(const SpawnOptions& o) {
  if (o.argv.empty()) return absl::InvalidArgumentError("nothing to run: empty argv");
  const std::string exe = !o.program.empty() ? o.program : FindInPath(o.argv[0], PathOf(o.env));
  if (exe.empty()) return absl::NotFoundError(absl::StrCat("'", o.argv[0], "' not found in PATH"));

  // Everything the child needs is built before fork().
  std::vector<char*> argv, envp;
  for (const auto& a : o.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : o.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  Child child;
  UniqueFd child_ends[3];
  const SpawnOptions::Stdio modes[3] = {o.stdin_mode, o.stdout_mode, o.stderr_mode};
  for (int fd = 0; fd < 3; ++fd) {
    if (modes[fd] == SpawnOptions::Stdio::kInherit) continue;
    if (modes[fd] == SpawnOptions::Stdio::kNull) {
      child_ends[fd] = UniqueFd(open("/dev/null", fd == 0 ? O_RDONLY | O_CLOEXEC : O_WRONLY | O_CLOEXEC));
      if (child_ends[fd].get() < 0) return absl::InternalError("cannot open /dev/null");
      continue;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
    UniqueFd read_end(p[0]), write_end(p[1]);
    child_ends[fd] = fd == 0 ? std::move(read_end) : std::move(write_end);
    (fd == 0 ? child.stdin_fd : fd == 1 ? child.stdout_fd : child.stderr_fd) =
        fd == 0 ? std::move(write_end) : std::move(read_end);
  }
  int stdio[3];
  for (int fd = 0; fd < 3; ++fd) stdio[fd] = child_ends[fd].get() >= 0 ? child_ends[fd].get() : fd;

  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  UniqueFd report_r(report_pipe[0]), report_w(report_pipe[1]);
  const pid_t parent = getpid();
  child.pid = fork();
  if (child.pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (child.pid == 0) ExecChild(o, exe.c_str(), argv.data(), envp.data(), stdio, report_w.get(), parent);

  report_w.Reset();
  for (auto& end : child_ends) end.Reset();
  int err = 0;
  ssize_t n;
  do {
    n = read(report_r.get(), &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof err)) {  // exec failed: the child has exited
    int status;
    WaitPid(child.pid, &status);
    return absl::FailedPreconditionError(absl::StrCat("cannot run ", exe, ": ", strerror(err)));
  }
  return child;
}

}  // namespace codemode
