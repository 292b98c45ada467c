#include "sandboxd/wasm_process.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/deadline.h"
#include "base/unix_socket.h"
#include "nlohmann/json.hpp"
#include "sandboxd/resource_usage.h"
#include "sandboxd/subprocess.h"

namespace sandboxd {

namespace {

// What one session's environment may hold (a pipe of this size is allowed to any user).
constexpr size_t kMaxEnvBytes = 1 << 20;

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void release() { fd_ = -1; }
  void reset(int fd = -1) {
    if (fd_ >= 0) close(fd_);
    fd_ = fd;
  }

 private:
  int fd_;
};

absl::StatusOr<int> BindListening(const std::string& path) {
  absl::StatusOr<sockaddr_un> addr = codemode::UnixAddress(path);
  if (!addr.ok()) return absl::InvalidArgumentError(absl::StrCat(addr.status().message(), ": ", path));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  unlink(path.c_str());
  // Only sandboxd connects; the jailed process accepts on the inherited descriptor. The
  // mode is set before listen(), so nobody else can connect in between; not through
  // umask(), which is the whole process's and would race other threads' mkdir and bind.
  int rc = bind(fd, reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr));
  if (rc == 0) rc = chmod(path.c_str(), 0600);
  if (rc != 0 || listen(fd, 4) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(absl::StrCat("cannot listen on ", path, ": ", strerror(err)));
  }
  return fd;
}

// bwrap's --info-fd: {"child-pid": N, ...} once the sandbox's init runs.
absl::StatusOr<pid_t> ReadInitPid(int fd) {
  std::string text;
  const int64_t deadline_ms = 10000;
  int64_t waited = 0;
  char buf[512];
  while (waited < deadline_ms && text.size() < 4096) {
    pollfd p{fd, POLLIN, 0};
    int n = poll(&p, 1, 100);
    waited += 100;
    if (n <= 0) continue;
    ssize_t got = read(fd, buf, sizeof(buf));
    if (got <= 0) break;
    text.append(buf, static_cast<size_t>(got));
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_object() && j.contains("child-pid") && j["child-pid"].is_number_integer()) {
      return j["child-pid"].get<pid_t>();
    }
  }
  return absl::InternalError(absl::StrCat("bwrap did not say its sandbox's pid: '", text, "'"));
}

// A pipe holding `env` (NUL-terminated entries) and closed for writing: its read end.
absl::StatusOr<int> EnvPipe(const std::vector<std::string>& env) {
  std::string bytes;
  for (const std::string& kv : env) bytes.append(kv).push_back('\0');
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  Fd read_end(fds[0]), write_end(fds[1]);
  if (bytes.size() > kMaxEnvBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the session's environment is over ", kMaxEnvBytes, " bytes (--env, --pass_env)"));
  }
  // Written whole before the start: the pipe is made big enough to hold it.
  if (bytes.size() > 65536 && fcntl(write_end.get(), F_SETPIPE_SZ, static_cast<int>(kMaxEnvBytes)) < 0) {
    return absl::InternalError(absl::StrCat("cannot grow the environment's pipe: ", strerror(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(write_end.get(), bytes.data() + done, bytes.size() - done);
    if (n <= 0) return absl::InternalError(absl::StrCat("cannot write the environment: ", strerror(errno)));
    done += static_cast<size_t>(n);
  }
  const int fd = read_end.get();
  fds[0] = -1;
  read_end.release();
  return fd;
}

}  // namespace

absl::StatusOr<SpawnedProcess> SpawnJailed(const SpawnRequest& request) {
  if (request.argv.empty()) return absl::InvalidArgumentError("nothing to start");
  absl::StatusOr<int> listening = BindListening(request.socket_dir + "/runner.sock");
  if (!listening.ok()) return listening.status();
  Fd sock(*listening);
  absl::StatusOr<int> egress_listening = BindListening(request.socket_dir + "/egress.sock");
  if (!egress_listening.ok()) return egress_listening.status();
  Fd egress(*egress_listening);
  Fd log(open(request.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  Fd null(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (log.get() < 0 || null.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", request.log_path, ": ", strerror(errno)));
  }
  int info[2] = {-1, -1};
  if (request.bwrap && pipe2(info, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  Fd info_read(info[0]), info_write(info[1]);
  absl::StatusOr<int> env_pipe = EnvPipe(request.env);
  if (!env_pipe.ok()) return env_pipe.status();
  Fd env(*env_pipe);
  // Everything the child uses is made before fork: after it only async-signal-safe calls.
  // execve does not search PATH ("bwrap").
  const std::string program = FindInPath(request.argv[0]);
  if (program.empty()) return absl::UnavailableError(absl::StrCat(request.argv[0], " is not in PATH"));
  std::vector<char*> argv = {const_cast<char*>(program.c_str())};
  for (size_t i = 1; i < request.argv.size(); ++i) argv.push_back(const_cast<char*>(request.argv[i].c_str()));
  argv.push_back(nullptr);
  char* const envp[] = {nullptr};
  const bool drop = request.uid.has_value();
  const uid_t uid = drop ? *request.uid : 0;
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    setsid();
    // Moved above every descriptor the child keeps, then into place (dup2 clears CLOEXEC).
    int s = fcntl(sock.get(), F_DUPFD_CLOEXEC, 10);
    int i = info_write.get() >= 0 ? fcntl(info_write.get(), F_DUPFD_CLOEXEC, 10) : -1;
    int e = fcntl(env.get(), F_DUPFD_CLOEXEC, 10);
    int g = fcntl(egress.get(), F_DUPFD_CLOEXEC, 10);
    if (s < 0 || e < 0 || g < 0 || dup2(null.get(), 0) < 0 || dup2(null.get(), 1) < 0 ||
        dup2(log.get(), 2) < 0 || dup2(s, 3) < 0 || dup2(i >= 0 ? i : null.get(), 4) < 0 ||
        dup2(e, 5) < 0 || dup2(g, 6) < 0) {
      _exit(125);
    }
    syscall(SYS_close_range, 7, ~0U, 0);
    if (drop && (setgroups(0, nullptr) != 0 || setgid(uid) != 0 || setuid(uid) != 0)) {
      static const char kMessage[] = "sandboxd: cannot take the session's uid\n";
      (void)!write(2, kMessage, sizeof(kMessage) - 1);
      _exit(125);
    }
    execve(argv[0], argv.data(), envp);
    static const char kMessage[] = "sandboxd: cannot execute the jail\n";
    (void)!write(2, kMessage, sizeof(kMessage) - 1);
    _exit(127);
  }
  SpawnedProcess out;
  out.pid = pid;
  if (request.bwrap) {
    info_write.reset();
    absl::StatusOr<pid_t> init = ReadInitPid(info_read.get());
    if (!init.ok()) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
      return init.status();
    }
    out.init_pid = *init;
  }
  return out;
}

bool ProcessRunning(pid_t pid, uint64_t start_time) {
  absl::StatusOr<uint64_t> now = ProcessStartTime("/proc", pid);
  if (!now.ok() || *now != start_time) return false;
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // "pid (comm) S ...": the comm may hold ") ", so the state follows the last ')'.
  const size_t end = text.rfind(')');
  if (end == std::string::npos || end + 2 >= text.size()) return false;  // gone meanwhile
  return text[end + 2] != 'Z' && text[end + 2] != 'X';
}

void WaitGone(pid_t pid, uint64_t start_time, absl::Duration limit) {
  const auto deadline = codemode::SteadyDeadline(limit);
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return;
    if (!ProcessRunning(pid, start_time)) return;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

}  // namespace sandboxd
