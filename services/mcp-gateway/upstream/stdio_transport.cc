// StdioTransport: spawning, pipe I/O and shutdown of a stdio MCP server (see
// stdio_transport.h).
#include "upstream/stdio_transport.h"
#include "jsonrpc/jsonrpc.h"
#include "base/process.h"
#include "base/thread.h"
#include "base/untrusted_json.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "upstream/stdout_lines.h"
#include "upstream/process.h"
#include "base/log_text.h"
#include "spdlog/spdlog.h"
#include "base/deadline.h"
#include "base/mutex.h"

namespace gateway {

using nlohmann::json;

namespace {

constexpr size_t kMaxStderrLineBytes = 64u << 10;
constexpr size_t kMaxLoggedLineBytes = 4096;  // stderr lines are truncated in the log
constexpr size_t kMaxRequestsRemembered = 1u << 16;  // requests in flight to one upstream
// notifications/cancelled comes from a caller that has given up already: it waits little,
// and is dropped if the server does not take it (behind queued writes to a server that
// stopped reading, a timed-out call would otherwise return minutes late).
constexpr absl::Duration kCancelWriteTimeout = absl::Seconds(1);
// How often a write waiting for a server that does not read asks whether its caller gave up.
constexpr absl::Duration kGivenUpPoll = absl::Milliseconds(100);

void CloseFd(int* fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

std::string ErrnoText(int err) { return std::strerror(err); }

// Writes `data` to the non-blocking `fd` until done, `closing`, the deadline or the caller
// gave up (`limits`). `*written`: how much of it went out (all of it, unless the status is
// an error). A dead child is EPIPE here, not SIGPIPE.
absl::Status WriteAll(int fd, absl::string_view data, const std::atomic<bool>& closing,
                      const SendLimits& limits, size_t* written) {
  codemode::NoSigpipeHere no_sigpipe;
  absl::Status status;
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = write(fd, data.data() + off, data.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (closing || std::chrono::steady_clock::now() > limits.deadline) {
        status = absl::UnavailableError("server does not read its stdin");
        break;
      }
      if (limits.given_up && limits.given_up()) {
        status = absl::CancelledError("cancelled while the server did not read its stdin");
        break;
      }
      struct pollfd pfd = {fd, POLLOUT, 0};
      poll(&pfd, 1, 100);
      continue;
    }
    int err = errno;
    status = absl::UnavailableError(absl::StrCat("write to server stdin: ", ErrnoText(err)));
    break;
  }
  *written = off;
  return status;
}

std::string AbsolutePath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (getcwd(cwd, sizeof(cwd)) == nullptr) return path;
  return absl::StrCat(cwd, "/", path);
}

}  // namespace

StdioTransport::StdioTransport(UpstreamConfig config, absl::Duration stop_grace,
                               size_t max_message_bytes, double log_lines_per_second,
                               std::shared_ptr<codemode::ByteBudget> receive_budget,
                               absl::Duration message_idle_timeout,
                               absl::Duration write_timeout)
    : config_(std::move(config)),
      stop_grace_(stop_grace),
      max_message_bytes_(max_message_bytes),
      log_limit_(log_lines_per_second, 10 * std::max(1.0, log_lines_per_second)),
      receive_budget_(std::move(receive_budget)),
      message_idle_timeout_(message_idle_timeout),
      write_timeout_(write_timeout) {}

bool StdioTransport::MayLog() {
  uint64_t dropped = 0;
  if (!log_limit_.Allow(absl::Now(), &dropped)) return false;
  if (dropped > 0) {
    spdlog::info("upstream {}: {} more stderr or unusable stdout lines not logged "
                 "(--upstream_log_rate)", config_.name, dropped);
  }
  return true;
}

StdioTransport::~StdioTransport() { Close(); }

absl::Status StdioTransport::Start(TransportCallbacks callbacks, absl::Duration timeout) {
  codemode::MutexLock start_lock(&start_mu_);
  if (closing_) return absl::UnavailableError("connection closed");
  callbacks_ = std::move(callbacks);
  const std::string& command = config_.command;
  if (command.empty()) return absl::InvalidArgumentError("no command");
  std::string cwd = AbsolutePath(config_.cwd);
  if (!cwd.empty()) {
    struct stat st;
    if (stat(cwd.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::UnavailableError(absl::StrCat("cwd ", cwd, ": not a directory"));
    }
  }
  // Resolved with the child's PATH (posix_spawnp would use ours) and made absolute,
  // because the child changes to `cwd` before exec.
  std::string exe = AbsolutePath(ResolveExecutable(command, ChildPath(config_.env), cwd));
  if (exe.empty()) return absl::UnavailableError(absl::StrCat("command not found: ", command));

  codemode::SpawnOptions spawn;
  spawn.program = exe;
  spawn.argv = {command};  // argv[0] as the server would see it from a shell
  spawn.argv.insert(spawn.argv.end(), config_.args.begin(), config_.args.end());
  spawn.env = ChildEnvironment(config_.env);
  spawn.cwd = cwd;
  spawn.stdin_mode = codemode::SpawnOptions::Stdio::kPipe;
  // Its own group, so shutdown signals reach its children too (npx starts node).
  spawn.new_process_group = true;
  // A gateway that dies (crash, SIGKILL) must not leave its upstream servers running.
  spawn.die_with_parent = true;
  spawn.nice = kUpstreamNice;
  absl::StatusOr<codemode::Child> child = codemode::Spawn(spawn);
  if (!child.ok()) {
    return absl::UnavailableError(absl::StrCat("spawn ", command, ": ", child.status().message()));
  }
  pid_ = child->pid;
  {
    codemode::MutexLock lock(&write_mu_);
    stdin_fd_ = child->stdin_fd.Release();
    // Writes poll with a deadline instead of blocking forever on a server that stops reading.
    fcntl(stdin_fd_, F_SETFL, fcntl(stdin_fd_, F_GETFL) | O_NONBLOCK);
  }
  stdout_fd_ = child->stdout_fd.Release();
  stderr_fd_ = child->stderr_fd.Release();
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  {
    codemode::MutexLock lock(&callers_mu_);
    abandoned_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  }
  spdlog::info("upstream {}: started {} (pid {})", config_.name, command, pid_);

  stderr_thread_ = codemode::StartThread("upstream stderr", [this] {
    codemode::LowerThreadPriority(kUpstreamNice);
    ReadStderr();
  });
  stdout_thread_ = codemode::StartThread("upstream stdout", [this] {
    codemode::LowerThreadPriority(kUpstreamNice);
    ReadStdout();
  });
  return absl::OkStatus();
}

absl::Status StdioTransport::Send(const json& message) {
  return SendMessage(message, nullptr, SendLimits());
}

absl::Status StdioTransport::SendRequest(const json& request,
                                         std::shared_ptr<codemode::ByteBudget> receiving,
                                         const SendLimits& limits) {
  return SendMessage(request, std::move(receiving), limits);
}

absl::Status StdioTransport::SendMessage(const json& message,
                                         std::shared_ptr<codemode::ByteBudget> receiving,
                                         const SendLimits& call) {
  if (closing_) return absl::UnavailableError("connection closed");
  std::string line = wire::Dump(message);  // exactly one line
  line.push_back('\n');
  const bool request = wire::LooksLikeRequest(message);
  if (request) RememberRequest(message["id"], std::move(receiving));
  // One message waits at most write_timeout_ for its turn and to be written to a server that
  // stops reading stdin (every write waits behind the one before it), and never past its
  // call's deadline.
  const absl::Duration wait = wire::MethodOf(message) == "notifications/cancelled"
                                  ? kCancelWriteTimeout
                                  : write_timeout_;
  SendLimits limits = call;
  limits.deadline = std::min(call.deadline, codemode::SteadyDeadline(wait));
  absl::Status sent = WriteLine(line, limits);
  if (!sent.ok() && request) ForgetCaller(message["id"]);
  if (sent.code() == absl::StatusCode::kUnavailable &&
      std::chrono::steady_clock::now() >= call.deadline) {
    return absl::DeadlineExceededError(sent.message());  // the call's time ran out first
  }
  return sent;
}

absl::Status StdioTransport::WriteLine(const std::string& line, const SendLimits& limits) {
  int fd;
  bool torn;
  {
    codemode::MutexLock lock(&write_mu_);
    // The turn is waited for in slices, to notice a caller that gave up.
    while (!WriteIdle()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= limits.deadline) {
        return absl::UnavailableError(
            "server does not read its stdin (the messages before this one still wait)");
      }
      if (limits.given_up && limits.given_up()) {
        return absl::CancelledError("cancelled while waiting to write to the server");
      }
      write_mu_.AwaitWithTimeout(absl::Condition(this, &StdioTransport::WriteIdle),
                                 std::min(kGivenUpPoll, absl::FromChrono(limits.deadline - now)));
    }
    if (stdin_fd_ < 0) return absl::UnavailableError("connection closed");
    fd = stdin_fd_;
    writing_ = true;  // Close() waits for this write before it closes fd
    torn = torn_line_;
  }
  // The message before this one was cut off part way (its write timed out): end that line
  // first, or the server reads this message as the rest of it, and both are lost. The
  // server sees one line it cannot parse instead.
  size_t written = 0;
  absl::Status sent;
  if (torn) {
    sent = WriteAll(fd, "\n", closing_, limits, &written);
    torn = written == 0;
  }
  if (!torn) {
    sent = WriteAll(fd, line, closing_, limits, &written);
    torn = written > 0 && written < line.size();
  }
  codemode::MutexLock lock(&write_mu_);
  torn_line_ = torn;
  writing_ = false;
  return sent;
}

void StdioTransport::RememberRequest(const json& id,
                                     std::shared_ptr<codemode::ByteBudget> receiving) {
  codemode::MutexLock lock(&callers_mu_);
  // A safety bound: entries go when their answer line ends or the request is abandoned, so
  // only answers the scanner could not see (none of JsonRpcClient's) could pile up.
  if (callers_.size() >= kMaxRequestsRemembered) callers_.erase(callers_.begin());
  auto [it, added] = callers_.try_emplace(wire::Dump(id));
  if (receiving) it->second = std::move(receiving);
}

void StdioTransport::ReadStdout() {
  codemode::JsonLimits limits;
  limits.max_values = UpstreamJsonValueLimit(max_message_bytes_);
  StdoutLines::Hooks hooks;
  hooks.on_line = [this, limits](const std::string& line) {
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    absl::StatusOr<json> message = codemode::ParseUntrustedJson(line, "stdout line", limits);
    if (!message.ok()) {
      if (MayLog()) {
        spdlog::warn("upstream {}: ignoring output on stdout ({}): {}", config_.name,
                     codemode::LogLongText(message.status().message()), codemode::LogText(line));
      }
      return;
    }
    if (callbacks_.on_message) callbacks_.on_message(std::move(*message));
  };
  hooks.on_failed = [this](const std::vector<json>& ids, const absl::Status& why) {
    if (!callbacks_.on_request_failed) return;
    for (const json& id : ids) callbacks_.on_request_failed(id, why);
  };
  hooks.caller_budget = [this](const json& id) { return CallerBudget(id); };
  hooks.on_answer_end = [this](const json& id) { ForgetCaller(id); };
  hooks.is_pending = [this](const json& id) { return IsPending(id); };
  hooks.may_log = [this] { return MayLog(); };
  // Every upstream's lines together, whatever they carry (answers, notifications, requests
  // for us): a flood of 15 MiB messages of any kind from several upstreams otherwise adds
  // up uncounted.
  StdoutLines lines(config_.name, max_message_bytes_, receive_budget_, message_idle_timeout_,
                    std::move(hooks));
  int abandoned_fd;
  {
    codemode::MutexLock lock(&callers_mu_);
    abandoned_fd = abandoned_fd_;  // open until Close() has joined this thread
  }
  std::vector<char> chunk(64 * 1024);
  for (;;) {
    struct pollfd fds[3] = {
        {stdout_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}, {abandoned_fd, POLLIN, 0}};
    // While an incomplete line is held, wake up when it has been idle too long.
    int ready = poll(fds, 3, lines.PollTimeoutMs(absl::Now()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) return;  // Close() began: no more callbacks
    if (fds[2].revents != 0) {
      uint64_t count;
      ssize_t ignored = read(abandoned_fd, &count, sizeof(count));
      (void)ignored;
      lines.CheckCallers();
    }
    if (fds[0].revents == 0) {
      lines.CheckIdle(absl::Now());
      continue;
    }
    ssize_t n = read(stdout_fd_, chunk.data(), chunk.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    lines.Feed(chunk.data(), static_cast<size_t>(n), absl::Now());
  }
  if (!closing_) ReportClosed();
}

void StdioTransport::Abandon(const json& id) {
  ForgetCaller(id);
  codemode::MutexLock lock(&callers_mu_);
  if (abandoned_fd_ >= 0) {
    uint64_t one = 1;
    ssize_t ignored = write(abandoned_fd_, &one, sizeof(one));
    (void)ignored;
  }
}

std::shared_ptr<codemode::ByteBudget> StdioTransport::CallerBudget(const json& id) {
  codemode::MutexLock lock(&callers_mu_);
  auto it = callers_.find(wire::Dump(id));
  return it == callers_.end() ? nullptr : it->second.lock();
}

bool StdioTransport::IsPending(const json& id) {
  codemode::MutexLock lock(&callers_mu_);
  return callers_.count(wire::Dump(id)) > 0;
}

void StdioTransport::ForgetCaller(const json& id) {
  codemode::MutexLock lock(&callers_mu_);
  callers_.erase(wire::Dump(id));
}

bool StdioTransport::WriteIdle() const { return !writing_; }

size_t StdioTransport::callers_remembered() const {
  codemode::MutexLock lock(&callers_mu_);
  return callers_.size();
}

void StdioTransport::ReportClosed() {
  // The child closed stdout, normally by exiting. Wait briefly for its exit status and the
  // rest of its stderr so that the reason says why ("exited with code 1: <error>").
  bool exited = WaitExit(absl::Seconds(2), /*stop_on_close=*/true);
  {
    codemode::MutexLock lock(&stderr_mu_);
    stderr_mu_.AwaitWithTimeout(absl::Condition(&stderr_done_), absl::Milliseconds(500));
  }
  std::string reason = exited ? ExitDescription() : "server closed its stdout";
  if (!closing_ && callbacks_.on_closed) callbacks_.on_closed(reason);
}

void StdioTransport::ReadStderr() {
  // Long lines are cut to kMaxLoggedLineBytes when logged; endless ones are skipped.
  LineFramer framer(kMaxStderrLineBytes);
  std::vector<char> chunk(16 * 1024);
  auto log_line = [this](const std::string& raw) {
    std::string line(absl::StripAsciiWhitespace(raw));
    if (line.empty()) return;
    if (line.size() > kMaxLoggedLineBytes) line = line.substr(0, kMaxLoggedLineBytes) + "...";
    if (MayLog()) {
      spdlog::info("upstream {} stderr: {}", config_.name,
                   codemode::LogText(line, kMaxLoggedLineBytes));
    }
    codemode::MutexLock lock(&stderr_mu_);
    last_stderr_line_ = line;
  };
  bool closing = false;
  for (;;) {
    struct pollfd fds[2] = {{stderr_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    // Once Close() has begun, only drain what is already there.
    if (poll(fds, 2, closing ? 0 : -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents != 0) closing = true;
    if (fds[0].revents == 0) {
      if (closing) break;
      continue;
    }
    ssize_t n = read(stderr_fd_, chunk.data(), chunk.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) break;
    framer.Feed(chunk.data(), static_cast<size_t>(n), log_line, [&] {
      log_line(absl::StrCat("(a line longer than ", kMaxStderrLineBytes, " bytes, not logged)"));
    });
  }
  framer.Finish(log_line);
  codemode::MutexLock lock(&stderr_mu_);
  stderr_done_ = true;
}

bool StdioTransport::Reap(bool block) {
  codemode::MutexLock lock(&proc_mu_);
  if (reaped_ || pid_ <= 0) return true;
  int status = 0;
  pid_t r;
  r = codemode::WaitPid(pid_, &status, block ? 0 : WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    exit_code_ = codemode::DecodeWaitStatus(status);
    spdlog::info("upstream {}: process {} exited with code {}", config_.name, pid_, exit_code_);
    return true;
  }
  if (r < 0) {  // ECHILD: reaped elsewhere (SIGCHLD ignored); the status is lost
    reaped_ = true;
    return true;
  }
  return false;
}

bool StdioTransport::WaitExit(absl::Duration timeout, bool stop_on_close) {
  auto deadline = codemode::SteadyDeadline(timeout);
  for (;;) {
    if (Reap(false)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    if (stop_on_close && closing_) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string StdioTransport::ExitDescription() {
  int code;
  {
    codemode::MutexLock lock(&proc_mu_);
    code = exit_code_;
  }
  std::string text = absl::StrCat("server exited with code ", code);
  codemode::MutexLock lock(&stderr_mu_);
  if (!last_stderr_line_.empty()) absl::StrAppend(&text, ": ", last_stderr_line_);
  return text;
}

void StdioTransport::SignalGroup(int sig) {
  codemode::MutexLock lock(&proc_mu_);
  if (reaped_ || pid_ <= 0) return;  // never signal a pid that may have been reused
  if (kill(-pid_, sig) != 0) kill(pid_, sig);
}

void StdioTransport::Close() {
  std::call_once(close_once_, [this] {
    closing_ = true;
    { codemode::MutexLock start_lock(&start_mu_); }  // a spawn in progress completes
    {
      codemode::MutexLock lock(&write_mu_);
      // A write in progress ends within a poll interval (closing_).
      write_mu_.Await(absl::Condition(this, &StdioTransport::WriteIdle));
      CloseFd(&stdin_fd_);  // EOF on its stdin: a well-behaved server exits now
    }
    if (pid_ > 0 && !WaitExit(stop_grace_, false)) {
      spdlog::info("upstream {}: still running after stdin closed; SIGTERM", config_.name);
      SignalGroup(SIGTERM);
      if (!WaitExit(stop_grace_, false)) {
        spdlog::warn("upstream {}: still running after SIGTERM; SIGKILL", config_.name);
        SignalGroup(SIGKILL);
        Reap(/*block=*/true);
      }
    }
    if (wake_fd_ >= 0) {
      uint64_t one = 1;
      ssize_t ignored = write(wake_fd_, &one, sizeof(one));
      (void)ignored;
    }
    if (stdout_thread_.joinable()) stdout_thread_.join();
    if (stderr_thread_.joinable()) stderr_thread_.join();
    CloseFd(&stdout_fd_);
    CloseFd(&stderr_fd_);
    CloseFd(&wake_fd_);
    codemode::MutexLock lock(&callers_mu_);
    CloseFd(&abandoned_fd_);
  });
}

}  // namespace gateway
