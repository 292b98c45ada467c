#include "sandboxd/runner_connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/deadline.h"
#include "base/log_text.h"
#include "base/thread.h"
#include "base/unix_socket.h"

namespace sandboxd {

namespace {

// What is left until `deadline`, for poll(): whole milliseconds, rounded down.
int64_t MillisecondsUntil(std::chrono::steady_clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RunnerConnection>> RunnerConnection::Connect(
    const std::string& socket_path, absl::Duration timeout, absl::Duration frame_deadline) {
  if (absl::StatusOr<sockaddr_un> addr = codemode::UnixAddress(socket_path); !addr.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("runner ", addr.status().message(), ": use a shorter --state_dir"));
  }
  const SteadyTime deadline = codemode::SteadyDeadline(timeout);
  std::string last_error = "socket never appeared";
  for (;;) {
    // connect() follows symlinks: whatever sits at the path must be the socket itself.
    struct stat st;
    if (lstat(socket_path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode)) {
      return absl::UnavailableError(
          absl::StrCat("runner socket ", socket_path, " is not a socket (refusing to follow it)"));
    }
    // Non-blocking: a runner whose accept queue is full (code that stopped it and queued
    // connections) answers EAGAIN, retried until the deadline, where a blocking connect()
    // would wait for as long as the queue stays full. The connection is blocking after.
    codemode::UniqueFd connected = codemode::ConnectUnix(socket_path, codemode::Blocking::kNo);
    const int fd = connected.get();
    if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) {
      std::unique_ptr<RunnerConnection> conn(new RunnerConnection(connected.Release(), frame_deadline));
      conn->decoder_.set_max_frame_bytes(kMaxGreetingFrameBytes);
      absl::StatusOr<RunnerMessage> first = conn->ReadOne(deadline);
      conn->decoder_.set_max_frame_bytes(kMaxRunnerFrameBytes);
      if (!first.ok()) {
        return absl::UnavailableError(
            absl::StrCat("runner at ", socket_path, " did not say ready: ", first.status().message()));
      }
      if (!std::holds_alternative<ReadyMessage>(*first)) {
        return absl::UnavailableError("runner's first frame was not 'ready'");
      }
      conn->ready_ = std::get<ReadyMessage>(*first);
      ucred peer{};
      socklen_t peer_len = sizeof peer;
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) == 0) conn->peer_pid_ = peer.pid;
      // Version 1 runners (in containers started before an upgrade) still work: they get
      // file chunks as base64 JSON (kBinaryChunksSinceRunner).
      if (conn->ready_.runner_version < 1 || conn->ready_.runner_version > kRunnerVersion) {
        return absl::UnavailableError(absl::StrCat("runner speaks protocol version ",
                                                   conn->ready_.runner_version, ", not 1 to ",
                                                   kRunnerVersion));
      }
      return conn;
    }
    last_error = strerror(errno);
    connected.Reset();
    if (std::chrono::steady_clock::now() >= deadline) {
      return absl::UnavailableError(absl::StrCat("cannot connect to runner socket ", socket_path,
                                                 ": ", last_error));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
}

namespace {

// recv() that never waits (its caller polls, with a deadline: a socket can poll readable
// with nothing in line to read, as after an out-of-band byte, which this drops) and also
// takes a descriptor passed with the bytes (SCM_RIGHTS), close-on-exec, into *passed
// (replacing, and so closing, an earlier one). Room for one: the kernel closes any further
// ones of the same message, and all of them when `passed` is null.
ssize_t ReceiveWithDescriptor(int fd, char* buf, size_t len, codemode::UniqueFd* passed) {
  if (passed == nullptr) return recv(fd, buf, len, MSG_DONTWAIT);
  iovec iov{buf, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
        c->cmsg_len >= CMSG_LEN(sizeof(int))) {
      int received;
      memcpy(&received, CMSG_DATA(c), sizeof received);
      *passed = codemode::UniqueFd(received);
    }
  }
  return n;
}

}  // namespace

RunnerConnection::RunnerConnection(int fd, absl::Duration frame_deadline)
    : fd_(fd), frame_deadline_(frame_deadline), decoder_(kMaxRunnerFrameBytes) {
  writer_ = codemode::StartThread("runner writer", [this] { WriteLoop(); });
}

RunnerConnection::~RunnerConnection() {
  Close();
  close(fd_);
}

absl::StatusOr<RunnerMessage> RunnerConnection::ReadOne(SteadyTime deadline) {
  char buf[65536];
  for (;;) {
    absl::StatusOr<std::optional<RunnerMessage>> message = decoder_.NextMessage();
    if (!message.ok()) return message.status();
    if (*message) return std::move(**message);
    const int64_t left = MillisecondsUntil(deadline);
    if (left <= 0) return absl::DeadlineExceededError("timed out waiting for a frame");
    pollfd p{fd_, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = ReceiveWithDescriptor(fd_, buf, sizeof buf, taking_descriptor_ ? &passed_ : nullptr);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) return absl::UnavailableError("connection closed");
    decoder_.Append(buf, static_cast<size_t>(n));
  }
}

namespace {

std::atomic<uint64_t> next_sync_request{1u << 30};

}  // namespace

absl::Status RunnerConnection::PingSync(absl::Duration timeout) {
  absl::StatusOr<AckMessage> ack =
      RequestSync(MakePingFrame(next_sync_request++), AckMessage::Kind::kPong, timeout);
  return ack.status();
}

absl::StatusOr<codemode::UniqueFd> RunnerConnection::TurnEgressOn(absl::Duration timeout,
                                                                  bool ask_listener) {
  passed_.Reset();
  taking_descriptor_ = ask_listener;
  absl::StatusOr<AckMessage> ack = RequestSync(MakeEgressFrame(next_sync_request++, ask_listener),
                                               AckMessage::Kind::kEgressOn, timeout);
  taking_descriptor_ = false;
  if (!ack.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the runner did not turn its egress relay on: ", ack.status().message()));
  }
  if (!ack->error.empty()) {
    return absl::UnavailableError(absl::StrCat("the runner could not turn its egress relay on: ",
                                               codemode::LogText(ack->error)));
  }
  codemode::UniqueFd listener = std::move(passed_);
  if (!ack->listener) return codemode::UniqueFd();
  if (!ask_listener || listener.get() < 0) {
    return absl::UnavailableError(
        "the runner's egress_on says it passed a listener, but none was asked for or arrived");
  }
  return listener;
}

absl::StatusOr<AckMessage> RunnerConnection::RequestSync(const nlohmann::json& frame,
                                                         AckMessage::Kind kind,
                                                         absl::Duration timeout) {
  const uint64_t id = frame["id"].get<uint64_t>();
  if (absl::Status s = Send(frame); !s.ok()) return s;
  const SteadyTime deadline = codemode::SteadyDeadline(timeout);
  for (;;) {
    absl::StatusOr<RunnerMessage> m = ReadOne(deadline);
    if (!m.ok()) return m.status();
    if (auto* ack = std::get_if<AckMessage>(&*m); ack && ack->kind == kind && ack->id == id) {
      return *ack;
    }
  }
}

void RunnerConnection::Start(Listener* listener, RunnerCpuShare share) {
  listener_ = listener;
  reader_ = codemode::StartThread("runner reader", [this, share] { ReadLoop(share); });
}

namespace {

absl::Duration ThreadCpuTime() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return absl::DurationFromTimespec(ts);
}

}  // namespace

void RunnerConnection::WaitForShare(const RunnerCpuShare& share, CpuBucket& bucket,
                                    SteadyTime& last_wall, absl::Duration& last_cpu) {
  const SteadyTime wall = std::chrono::steady_clock::now();
  const absl::Duration cpu = ThreadCpuTime();
  const bool over = bucket.Step(share.millis, share.burst, absl::FromChrono(wall - last_wall),
                                static_cast<uint64_t>(absl::ToInt64Nanoseconds(cpu - last_cpu)));
  last_wall = wall;
  last_cpu = cpu;
  if (!over) return;
  // In slices, so that Close() (which joins this thread) waits for at most one.
  const SteadyTime until = codemode::SteadyDeadline(bucket.Debt(share.millis));
  SteadyTime now = wall;
  for (; now < until && !closed_; now = std::chrono::steady_clock::now()) {
    absl::SleepFor(std::min(absl::FromChrono(until - now), absl::Milliseconds(20)));
  }
  last_wall = now;  // the wait earned nothing: the debt is paid
  bucket.credit_ns = 0;
  listener_->OnReaderWaited(absl::FromChrono(now - wall));
}

void RunnerConnection::ReadLoop(RunnerCpuShare share) {
  char buf[65536];
  absl::Status reason;
  CpuBucket bucket = CpuBucket::Full(share.millis, share.burst);
  SteadyTime last_wall = std::chrono::steady_clock::now();
  absl::Duration last_cpu = ThreadCpuTime();
  for (;;) {
    absl::StatusOr<std::optional<RunnerMessage>> message = decoder_.NextMessage();
    if (!message.ok()) {
      reason = message.status();
      break;
    }
    if (*message) {
      std::optional<RunnerMessage>& m = *message;
      if (!codemode::RunContained("runner message", [&] { listener_->OnRunnerMessage(std::move(*m)); })) {
        reason = absl::InternalError("a runner message could not be handled");
        break;
      }
      continue;
    }
    if (share.millis > 0) WaitForShare(share, bucket, last_wall, last_cpu);
    ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      reason = closed_ ? absl::CancelledError("connection closed by sandboxd")
                       : absl::UnavailableError("runner closed the connection");
      break;
    }
    decoder_.Append(buf, static_cast<size_t>(n));
  }
  shutdown(fd_, SHUT_RDWR);
  {
    codemode::MutexLock lock(&out_mu_);
    // A write that failed ended the connection: that is the reason, not the EOF it caused.
    if (!write_error_.empty() && !closed_) reason = absl::UnavailableError(write_error_);
  }
  listener_->OnRunnerClosed(reason);
}

absl::Status RunnerConnection::Send(const nlohmann::json& frame) {
  return SendEncoded(EncodeFrame(frame));
}

absl::Status RunnerConnection::SendEncoded(std::string bytes) {
  codemode::MutexLock lock(&out_mu_);
  if (write_error_.empty() && outbox_bytes_ + bytes.size() > kMaxOutboxBytes) {
    Fail(absl::StrCat("runner is not reading its socket (", outbox_bytes_,
                      " bytes already queued for it)"));
  }
  if (!write_error_.empty()) return absl::UnavailableError(write_error_);
  if (outbox_.empty() && !writing_) {
    // The common case: nothing queued and room in the socket buffer. A non-blocking send
    // never waits, so it may happen here, and it saves a hand-over to the writer thread.
    ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(bytes.size())) return absl::OkStatus();
    if (n > 0) bytes.erase(0, static_cast<size_t>(n));  // the writer sends the rest, in order
  }
  outbox_bytes_ += bytes.size();
  outbox_.push_back(Outgoing{std::move(bytes), {}, 0});
  return absl::OkStatus();
}

absl::Status RunnerConnection::SendBulk(std::string_view bytes) {
  codemode::MutexLock lock(&out_mu_);
  if (write_error_.empty() && stop_writer_) Fail("the connection is closing");
  if (!write_error_.empty()) return absl::UnavailableError(write_error_);
  const uint64_t mine = next_bulk_++;
  outbox_.push_back(Outgoing{{}, bytes, mine});
  // Written, or dropped by a failure (Fail empties the outbox; Close stops the writer):
  // either way the writer no longer reads the caller's buffer once this holds.
  auto finished = [this, mine]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(out_mu_) {
    return bulk_written_ >= mine ||
           ((!write_error_.empty() || stop_writer_) && bulk_in_writer_ != mine);
  };
  out_mu_.Await(absl::Condition(&finished));
  if (bulk_written_ >= mine) return absl::OkStatus();
  if (write_error_.empty()) Fail("the connection is closing");
  return absl::UnavailableError(write_error_);
}

void RunnerConnection::Fail(const std::string& why) {
  if (write_error_.empty()) write_error_ = absl::StrCat("cannot send to runner: ", why);
  outbox_.clear();
  outbox_bytes_ = 0;
  shutdown(fd_, SHUT_RDWR);
}

void RunnerConnection::WriteLoop() {
  for (;;) {
    Outgoing frame;
    {
      codemode::MutexLock lock(&out_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(out_mu_) {
        return stop_writer_ || !outbox_.empty();
      };
      out_mu_.Await(absl::Condition(&ready));
      if (stop_writer_) return;
      frame = std::move(outbox_.front());
      outbox_.pop_front();
      writing_ = true;  // Send() must not overtake this frame
      bulk_in_writer_ = frame.bulk;
    }
    absl::Status s = WriteAll(frame.bytes(), codemode::SteadyDeadline(frame_deadline_));
    codemode::MutexLock lock(&out_mu_);
    writing_ = false;
    bulk_in_writer_ = 0;
    if (frame.bulk) {
      if (s.ok()) bulk_written_ = frame.bulk;
    } else {
      outbox_bytes_ -= std::min(outbox_bytes_, frame.owned.size());
    }
    if (!s.ok()) Fail(std::string(s.message()));
  }
}

absl::Status RunnerConnection::WriteAll(std::string_view bytes, SteadyTime deadline) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return absl::UnavailableError(strerror(errno));
    const int64_t left = MillisecondsUntil(deadline);
    if (left <= 0) {
      return absl::DeadlineExceededError(absl::StrCat(
          "runner stopped reading its socket (a ", bytes.size(), "-byte frame was not taken within ",
          absl::FormatDuration(frame_deadline_), ")"));
    }
    pollfd p{fd_, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) < 0 && errno != EINTR) {
      return absl::UnavailableError(strerror(errno));
    }
  }
  return absl::OkStatus();
}

void RunnerConnection::Close() {
  closed_ = true;
  {
    codemode::MutexLock lock(&out_mu_);
    stop_writer_ = true;
  }
  shutdown(fd_, SHUT_RDWR);
  if (writer_.joinable()) writer_.join();
  if (reader_.joinable()) reader_.join();
}

}  // namespace sandboxd
