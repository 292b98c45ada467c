#include "sandboxd/podman_api.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/deadline.h"
#include "base/process.h"
#include "base/secret_file.h"
#include "base/unix_socket.h"
#include "spdlog/spdlog.h"

namespace sandboxd {
namespace {

namespace http = boost::beast::http;

// A service that listened this long before it ended has its restarts start over at
// first_restart; one that ends (or is replaced for hanging) sooner backs off further.
constexpr absl::Duration kHealthyRun = absl::Minutes(1);

// A response larger than this is no answer of podman's to create, start or remove.
constexpr size_t kMaxResponseBytes = 4 << 20;

using SteadyTime = std::chrono::steady_clock::time_point;

// Waits until `fd` is readable (or writable) or `deadline` passes; false then. On the
// monotonic clock: a step of the wall clock neither cuts a request short nor stretches it.
bool WaitFor(int fd, short events, SteadyTime deadline) {
  for (;;) {
    const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           deadline - std::chrono::steady_clock::now())
                           .count();
    if (ms < 0) return false;
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, static_cast<int>(std::min<int64_t>(ms + 1, 60'000)));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// An HTTP/1.1 response, read by Beast's parser as its bytes arrive: whole once its framing
// (Content-Length, chunked, a status without body) or the end of the connection says so.
class ResponseReader {
 public:
  ResponseReader() {
    parser_.eager(true);
    parser_.body_limit(kMaxResponseBytes);
  }

  // INVALID_ARGUMENT when the bytes so far are no HTTP response (or one over the limit).
  absl::Status Feed(absl::string_view bytes) {
    pending_.append(bytes.data(), bytes.size());
    while (!pending_.empty() && !parser_.is_done()) {
      boost::beast::error_code ec;
      // A header that is not whole yet is not consumed: it stays pending for the next bytes.
      const size_t used = parser_.put(boost::asio::buffer(pending_), ec);
      pending_.erase(0, used);
      if (ec == http::error::need_more) break;
      if (ec) return absl::InvalidArgumentError(absl::StrCat("no HTTP response: ", ec.message()));
    }
    return absl::OkStatus();
  }

  // The server closed: a body without length ends here; anything else not whole is an error.
  absl::Status End() {
    if (parser_.is_done()) return absl::OkStatus();
    if (!parser_.got_some()) return absl::InvalidArgumentError("no answer at all");
    boost::beast::error_code ec;
    parser_.put_eof(ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("no whole HTTP response: ", ec.message()));
    return absl::OkStatus();
  }

  bool done() const { return parser_.is_done(); }

  PodmanApi::Response Take() {
    PodmanApi::Response r;
    r.status = static_cast<int>(parser_.get().result_int());
    r.body = std::move(parser_.get().body());
    return r;
  }

 private:
  http::response_parser<http::string_body> parser_;
  std::string pending_;
};

}  // namespace

absl::StatusOr<PodmanApi::Response> ParseHttpResponse(const std::string& raw, bool at_end) {
  ResponseReader reader;
  if (absl::Status s = reader.Feed(raw); !s.ok()) return s;
  if (at_end) {
    if (absl::Status s = reader.End(); !s.ok()) return s;
  }
  if (!reader.done()) return absl::InvalidArgumentError("no whole HTTP response yet");
  return reader.Take();
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
  if (options_.check_programs) {
    if (absl::Status s = options_.check_programs(); !s.ok()) {
      spdlog::warn("podman API service not started: {}", std::string(s.message()));
      return false;
    }
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
  const SteadyTime deadline = codemode::SteadyDeadline(absl::Seconds(30));
  while (std::chrono::steady_clock::now() < deadline) {
    if (codemode::WaitPid(*pid, status, WNOHANG) != 0) {
      codemode::MutexLock lock(&mu_);
      pid_ = -1;
      *pid = -1;
      return false;  // it exited before listening
    }
    if (codemode::ConnectUnix(socket_path(), codemode::Blocking::kNo).get() >= 0) return true;
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
  return Request("POST", path, body, Kind::kStart);
}

absl::StatusOr<PodmanApi::Response> PodmanApi::Delete(const std::string& path) {
  return Request("DELETE", path, "", Kind::kRemoval);
}

bool PodmanApi::AnswersPing() {
  // ABORTED: sent, and no whole answer in time. UNAVAILABLE is no verdict: its listen queue
  // was full (busy), or it is being replaced already.
  return Request("GET", "/libpod/_ping", "", Kind::kPing).status().code() !=
         absl::StatusCode::kAborted;
}

absl::StatusOr<PodmanApi::Response> PodmanApi::Request(const std::string& method,
                                                       const std::string& path,
                                                       const std::string& body, Kind kind) {
  if (!Ready()) return absl::UnavailableError("podman's API service is not running");
  codemode::UniqueFd fd = codemode::ConnectUnix(socket_path(), codemode::Blocking::kNo);
  if (fd.get() < 0) {
    const std::string why = absl::StrCat("connect: ", strerror(errno));
    if (errno != EAGAIN) Replace(why);  // its socket is gone (EAGAIN: it is only busy)
    return absl::UnavailableError(absl::StrCat("podman's API service: ", why));
  }
  const SteadyTime deadline = codemode::SteadyDeadline(
      kind == Kind::kPing ? options_.request_timeout / 4 : options_.request_timeout);
  SteadyTime ping_at = kind == Kind::kPing ? SteadyTime::max()
                                           : codemode::SteadyDeadline(options_.request_timeout / 4);
  const std::string what = absl::StrCat("no answer to ", method, " ", path, " in time");
  const absl::Time began = absl::Now();
  auto cut_off = [&] {
    return options_.cutoff != nullptr && absl::Now() >= options_.cutoff->For(began);
  };
  auto lost = [&](absl::string_view why) {
    Replace(why);
    return absl::AbortedError(absl::StrCat("podman's API service: ", why));
  };
  auto hung = [&] { return lost(absl::StrCat(what, ", nor to a ping")); };
  // Waits until `fd` is ready for `events`: OK; ABORTED when the deadline passes or the
  // service, pinged on the way, answers no ping. A late removal leaves the service be (it
  // answered the ping).
  auto wait = [&](short events) -> absl::Status {
    for (;;) {
      const bool ping_due = ping_at < deadline;
      const SteadyTime due = ping_due ? ping_at : deadline;
      // In slices of 100 ms, so that a stopping daemon's cutoff ends the wait soon.
      const SteadyTime slice = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
      if (WaitFor(fd.get(), events, std::min(due, slice))) return absl::OkStatus();
      if (cut_off()) {
        return absl::AbortedError(absl::StrCat("podman's API service: ", method, " ", path,
                                               " cut off: sandboxd is stopping"));
      }
      if (std::chrono::steady_clock::now() < due) continue;
      if (!ping_due) {
        if (kind != Kind::kRemoval) return lost(what);
        return absl::AbortedError(absl::StrCat("podman's API service: ", what));
      }
      ping_at = SteadyTime::max();
      if (!AnswersPing()) return hung();
    }
  };
  std::string out = absl::StrCat(method, " ", path, " HTTP/1.1\r\nHost: podman\r\n",
                                 "Content-Type: application/json\r\nContent-Length: ",
                                 body.size(), "\r\nConnection: close\r\n\r\n", body);
  for (size_t sent = 0; sent < out.size();) {
    if (absl::Status s = wait(POLLOUT); !s.ok()) return s;
    const ssize_t n = send(fd.get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return absl::AbortedError(absl::StrCat("podman's API service: send: ", strerror(errno)));
    }
    if (n > 0) sent += static_cast<size_t>(n);
  }
  ResponseReader reader;  // at most 4 MiB of body and Beast's 8 KiB of header
  char buf[16384];
  for (;;) {
    if (absl::Status s = wait(POLLIN); !s.ok()) return s;
    const ssize_t n = recv(fd.get(), buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return absl::AbortedError(absl::StrCat("podman's API service: recv: ", strerror(errno)));
    }
    // No HTTP, or an answer over the limit: no podman's.
    if (absl::Status s = reader.Feed(absl::string_view(buf, static_cast<size_t>(n))); !s.ok()) {
      return lost(s.message());
    }
    if (reader.done()) return reader.Take();  // whole by its framing: need not wait for the close
  }
  if (absl::Status s = reader.End(); !s.ok()) {
    return absl::AbortedError(absl::StrCat("podman's API service: ", s.message()));
  }
  return reader.Take();
}

}  // namespace sandboxd
