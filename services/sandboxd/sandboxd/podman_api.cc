#include "sandboxd/podman_api.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/process.h"
#include "base/secret_file.h"
#include "spdlog/spdlog.h"

namespace sandboxd {
namespace {

// A service that listened this long before it ended has its restarts start over at
// first_restart; one that ends (or is replaced for hanging) sooner backs off further.
constexpr absl::Duration kHealthyRun = absl::Minutes(1);

// A response larger than this is no answer of podman's to create, start or remove.
constexpr size_t kMaxResponseBytes = 4 << 20;

// A connected socket to `path`, or -1 with errno. Non-blocking: a listener whose backlog
// is full fails at once (EAGAIN) rather than holding the caller.
codemode::UniqueFd Connect(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    errno = ENAMETOOLONG;
    return codemode::UniqueFd();
  }
  codemode::UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (fd.get() < 0) return fd;
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return codemode::UniqueFd();
  }
  return fd;
}

// Waits until `fd` is readable (or writable) or `deadline` passes; false then.
bool WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (ms < 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms + 1, 60'000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

absl::StatusOr<std::string> Dechunk(absl::string_view body) {
  std::string out;
  for (;;) {
    const size_t eol = body.find("\r\n");
    if (eol == absl::string_view::npos) return absl::InvalidArgumentError("a chunk size without its line end");
    absl::string_view size_text = body.substr(0, eol);
    size_text = size_text.substr(0, size_text.find(';'));  // chunk extensions
    uint64_t size = 0;
    if (size_text.empty() || size_text.size() > 8 ||
        !absl::SimpleHexAtoi(absl::StripAsciiWhitespace(size_text), &size)) {
      return absl::InvalidArgumentError("a chunk size that is no hexadecimal number");
    }
    body.remove_prefix(eol + 2);
    if (size == 0) return out;  // trailers, if any, are not needed
    if (body.size() < size + 2 || body.substr(size, 2) != "\r\n") {
      return absl::InvalidArgumentError("a chunk cut short");
    }
    out.append(body.data(), size);
    body.remove_prefix(size + 2);
  }
}

}  // namespace

absl::StatusOr<PodmanApi::Response> ParseHttpResponse(const std::string& raw, bool at_end) {
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) return absl::InvalidArgumentError("no end of the response's headers");
  std::vector<absl::string_view> lines =
      absl::StrSplit(absl::string_view(raw).substr(0, head_end), "\r\n");
  // "HTTP/1.1 201 Created"
  std::vector<absl::string_view> status_line = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
  PodmanApi::Response r;
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/1.") ||
      status_line[1].size() != 3 || !absl::ascii_isdigit(status_line[1][0]) ||
      !absl::SimpleAtoi(status_line[1], &r.status)) {
    return absl::InvalidArgumentError("no HTTP/1.x status line");
  }
  bool chunked = false;
  std::optional<uint64_t> length;
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos) return absl::InvalidArgumentError("a header line without ':'");
    const std::string name = absl::AsciiStrToLower(lines[i].substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
    if (name == "transfer-encoding") chunked = absl::EqualsIgnoreCase(value, "chunked");
    if (name == "content-length") {
      uint64_t n = 0;
      if (!absl::SimpleAtoi(value, &n)) return absl::InvalidArgumentError("a Content-Length that is no number");
      length = n;
    }
  }
  absl::string_view body = absl::string_view(raw).substr(head_end + 4);
  if (chunked) {
    absl::StatusOr<std::string> plain = Dechunk(body);
    if (!plain.ok()) return plain.status();
    r.body = std::move(*plain);
  } else if (length.has_value()) {
    if (body.size() < *length) return absl::InvalidArgumentError("a body shorter than its Content-Length");
    r.body = std::string(body.substr(0, *length));
  } else if (r.status == 204 || r.status == 304) {
    r.body.clear();  // no body, whatever follows
  } else if (at_end) {
    r.body = std::string(body);
  } else {
    return absl::InvalidArgumentError("a body that ends only with the connection");
  }
  return r;
}

PodmanApi::PodmanApi(PodmanApiOptions options) : options_(std::move(options)) {
  thread_ = std::thread([this] { Supervise(); });
}

PodmanApi::~PodmanApi() {
  {
    codemode::MutexLock lock(&mu_);
    stopping_ = true;
    if (pid_ > 0) kill(pid_, SIGTERM);
    // A stopped or hung service does not end on SIGTERM.
    auto gone = [](pid_t* pid) { return *pid <= 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(+gone, &pid_), absl::Seconds(5))) kill(pid_, SIGKILL);
  }
  thread_.join();
}

void PodmanApi::Replace(absl::string_view why) {
  codemode::MutexLock lock(&mu_);
  if (!ready_) return;  // being replaced already
  ready_ = false;
  spdlog::warn("podman API service: {}; replacing it, the podman CLI starts containers meanwhile",
               std::string(why));
  if (pid_ > 0) kill(pid_, SIGKILL);
}

bool PodmanApi::Ready() {
  codemode::MutexLock lock(&mu_);
  return ready_;
}

bool PodmanApi::Rest(absl::Duration d) {
  codemode::MutexLock lock(&mu_);
  return !mu_.AwaitWithTimeout(absl::Condition(&stopping_), d);
}

bool PodmanApi::StartOnce(pid_t* pid, int* status) {
  if (absl::Status s = codemode::ClaimPrivateDirectory(options_.socket_dir,
                                                       "podman's API directory", "--state_dir");
      !s.ok()) {
    spdlog::warn("podman API service not started: {}", std::string(s.message()));
    return false;
  }
  unlink(socket_path().c_str());  // a service of an earlier sandboxd left it
  codemode::SpawnOptions o;
  o.argv = {options_.podman};
  o.argv.insert(o.argv.end(), options_.global_args.begin(), options_.global_args.end());
  o.argv.insert(o.argv.end(), {"system", "service", "--time=0", "unix://" + socket_path()});
  o.env = options_.env;
  o.stdout_mode = codemode::SpawnOptions::Stdio::kNull;
  o.stderr_mode = codemode::SpawnOptions::Stdio::kInherit;  // its complaints reach our log
  o.die_with_parent = true;  // this thread lives as long as the service may
  absl::StatusOr<codemode::Child> child = codemode::Spawn(o);
  if (!child.ok()) {
    spdlog::warn("podman API service not started: {}", std::string(child.status().message()));
    return false;
  }
  *pid = child->pid;
  {
    codemode::MutexLock lock(&mu_);
    pid_ = child->pid;
    if (stopping_) kill(child->pid, SIGTERM);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (codemode::WaitPid(*pid, status, WNOHANG) != 0) {
      codemode::MutexLock lock(&mu_);
      pid_ = -1;
      *pid = -1;
      return false;  // it exited before listening
    }
    if (Connect(socket_path()).get() >= 0) return true;
    if (!Rest(absl::Milliseconds(10))) return false;
  }
  spdlog::warn("podman API service did not listen within 30 s; using the podman CLI");
  return false;
}

void PodmanApi::Supervise() {
  absl::Duration wait = options_.first_restart;
  for (int failures = 0;; ++failures) {
    pid_t pid = -1;
    int status = -1;  // none: no process was started (StartOnce said why)
    const bool listening = StartOnce(&pid, &status);
    const absl::Time listened = absl::Now();
    if (listening) {
      codemode::MutexLock lock(&mu_);
      ready_ = true;
    }
    if (listening) spdlog::info("podman API service listening at {}", socket_path());
    if (pid > 0) {
      if (!listening) kill(pid, SIGKILL);
      // Waited for without reaping: until pid_ is cleared below, no one may signal a pid
      // that another process has been given meanwhile.
      siginfo_t info{};
      while (waitid(P_PID, pid, &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
      }
    }
    bool stopping;
    {
      codemode::MutexLock lock(&mu_);
      ready_ = false;
      pid_ = -1;
      stopping = stopping_;
    }
    if (pid > 0) codemode::WaitPid(pid, &status);
    if (stopping) return;
    if (listening && absl::Now() - listened >= kHealthyRun) {
      failures = 0;  // it served a while: the next failure starts over
      wait = options_.first_restart;
    }
    // Said once a streak: a podman that cannot serve at all is not news every 30 s.
    spdlog::log(failures == 0 ? spdlog::level::warn : spdlog::level::debug,
                "podman API service {}{}; the podman CLI starts containers until it is back, "
                "in {}",
                listening ? "ended" : "did not start",
                status < 0 ? "" : absl::StrCat(" (exit ", codemode::DecodeWaitStatus(status), ")"),
                absl::FormatDuration(wait));
    if (!Rest(wait)) return;
    wait = std::min(wait * 2, options_.longest_restart);
  }
}

absl::StatusOr<PodmanApi::Response> PodmanApi::Post(const std::string& path,
                                                    const std::string& body) {
  return Request("POST", path, body);
}

absl::StatusOr<PodmanApi::Response> PodmanApi::Delete(const std::string& path) {
  return Request("DELETE", path, "");
}

absl::StatusOr<PodmanApi::Response> PodmanApi::Request(const std::string& method,
                                                       const std::string& path,
                                                       const std::string& body) {
  if (!Ready()) return absl::UnavailableError("podman's API service is not running");
  codemode::UniqueFd fd = Connect(socket_path());
  if (fd.get() < 0) {
    const std::string why = absl::StrCat("connect: ", strerror(errno));
    if (errno != EAGAIN) Replace(why);  // its socket is gone (EAGAIN: it is only busy)
    return absl::UnavailableError(absl::StrCat("podman's API service: ", why));
  }
  const absl::Time deadline = absl::Now() + options_.request_timeout;
  auto lost = [&](absl::string_view why) {
    Replace(why);
    return absl::AbortedError(absl::StrCat("podman's API service: ", why));
  };
  std::string out = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: podman\r\n",
                                 "Content-Type: application/json\r\nContent-Length: ",
                                 body.size(), "\r\nConnection: close\r\n\r\n", body);
  for (size_t sent = 0; sent < out.size();) {
    if (!WaitFor(fd.get(), POLLOUT, deadline)) return lost("no answer in time");
    const ssize_t n = send(fd.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return absl::AbortedError(absl::StrCat("podman's API service: send: ", strerror(errno)));
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  std::string raw;
  size_t head_end = std::string::npos;
  bool chunked = false;
  char buf[16384];
  for (;;) {
    if (!WaitFor(fd.get(), POLLIN, deadline)) return lost("no answer in time");
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::AbortedError(absl::StrCat("podman's API service: recv: ", strerror(errno)));
    }
    const size_t before = raw.size();
    raw.append(buf, static_cast<size_t>(n));
    if (raw.size() > kMaxResponseBytes) return lost("an answer over 4 MiB");
    // Whole by its framing: the service need not close first. Parsed only when it may be
    // (a chunked body once it ends with an empty line), so that many small chunks cost
    // one parse, not one per read.
    if (head_end == std::string::npos) {
      head_end = raw.find("\r\n\r\n", before < 3 ? 0 : before - 3);
      if (head_end == std::string::npos) continue;
      chunked = absl::StrContains(absl::AsciiStrToLower(raw.substr(0, head_end)), "chunked");
    }
    if (chunked && !absl::EndsWith(raw, "\r\n\r\n")) continue;
    if (absl::StatusOr<Response> whole = ParseHttpResponse(raw, /*at_end=*/false); whole.ok()) return whole;
  }
  absl::StatusOr<Response> r = ParseHttpResponse(raw);
  if (!r.ok()) return absl::AbortedError(absl::StrCat("podman's API service: ", r.status().message()));
  return r;
}

}  // namespace sandboxd
