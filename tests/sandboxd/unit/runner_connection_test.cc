// RunnerConnection against a fake runner on a real unix socket: a runner that stops
// reading can neither block a caller of Send() nor hold frames without bound; bulk frames
// are paced by the runner and keep their place among queued frames.
#include "sandboxd/runner_connection.h"

#include "sandboxd/file_frames.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>
#include <optional>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sandboxd {
namespace {

using ::testing::HasSubstr;

// A unix stream socket listening in a directory of its own, with `backlog`; both go with it.
class ListeningSocket {
 public:
  explicit ListeningSocket(int backlog) {
    char tmpl[] = "/tmp/sbx-rc-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/runner.sock";
    addr_.sun_family = AF_UNIX;
    std::strcpy(addr_.sun_path, path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool listening = bind(fd_, addr(), sizeof addr_) == 0 && listen(fd_, backlog) == 0;
    EXPECT_TRUE(listening) << path_ << ": " << std::strerror(errno);
  }
  ~ListeningSocket() {
    close(fd_);
    std::filesystem::remove_all(dir_);
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  const sockaddr* addr() const { return reinterpret_cast<const sockaddr*>(&addr_); }
  socklen_t addr_size() const { return sizeof addr_; }

 private:
  std::string dir_, path_;
  sockaddr_un addr_{};
  int fd_ = -1;
};

// RunnerConnection::Connect on a thread of its own, left behind if it never returns: a
// hang is a failure of the test that waits on the future, not a test that hangs.
std::future<absl::Status> ConnectOnAThread(const std::string& path, absl::Duration timeout) {
  auto done = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> result = done->get_future();
  std::thread([path, timeout, done] {
    done->set_value(RunnerConnection::Connect(path, timeout).status());
  }).detach();
  return result;
}

// A runner that says `ready` (speaking protocol `version`) and then never reads.
class DeafRunner {
 public:
  explicit DeafRunner(int version = 1) : listener_(1) {
    acceptor_ = std::thread([this, version] {
      peer_ = accept4(listener_.fd(), nullptr, nullptr, SOCK_CLOEXEC);
      std::string ready =
          EncodeFrame(nlohmann::json{{"type", "ready"}, {"runner_version", version}});
      EXPECT_EQ(write(peer_, ready.data(), ready.size()), static_cast<ssize_t>(ready.size()));
    });
  }
  ~DeafRunner() {
    if (acceptor_.joinable()) acceptor_.join();
    close(peer_);
  }
  const std::string& path() const { return listener_.path(); }

  // Writes `frame`, with `fd` attached (SCM_RIGHTS) unless it is -1.
  void Reply(const nlohmann::json& frame, int fd = -1) {
    std::string bytes = EncodeFrame(frame);
    iovec iov{bytes.data(), bytes.size()};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
    }
    EXPECT_EQ(sendmsg(peer_, &msg, 0), static_cast<ssize_t>(bytes.size()));
  }

  // Starts reading: the next `n` frames, as JSON (blocking).
  std::vector<nlohmann::json> ReadFrames(int n) {
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<nlohmann::json> frames;
    for (int i = 0; i < n; ++i) {
      std::string len = ReadExactly(4);
      size_t size = 0;
      for (char c : len) size = (size << 8) | static_cast<unsigned char>(c);
      frames.push_back(nlohmann::json::parse(ReadExactly(size)));
    }
    return frames;
  }

 private:
  std::string ReadExactly(size_t n) {
    std::string out(n, '\0');
    for (size_t got = 0; got < n;) {
      ssize_t r = read(peer_, out.data() + got, n - got);
      if (r <= 0) {
        ADD_FAILURE() << "the connection ended";
        return out;
      }
      got += static_cast<size_t>(r);
    }
    return out;
  }

  ListeningSocket listener_;
  int peer_ = -1;
  std::thread acceptor_;
};

class Closed : public RunnerConnection::Listener {
 public:
  void OnRunnerMessage(RunnerMessage) override {}
  void OnRunnerClosed(absl::Status reason) override {
    reason_ = reason;
    done_.Notify();
  }
  absl::Notification done_;
  absl::Status reason_;
};

nlohmann::json BigFrame(size_t bytes) { return MakeExecFrame(1, std::string(bytes, 'x'), 1 << 20, 1 << 20, 64); }

TEST(RunnerConnectionTest, SendNeverBlocksAndAFullOutboxEndsTheConnection) {
  DeafRunner runner;
  Closed listener;  // outlives conn, whose reader reports the close to it
  auto conn = RunnerConnection::Connect(runner.path(), absl::Seconds(5), absl::Hours(1));
  ASSERT_TRUE(conn.ok()) << conn.status();
  (*conn)->Start(&listener);
  // Far more than the socket buffer: each Send returns at once (the old code blocked here
  // for 5 s per call, holding the session's lock).
  absl::Status s;
  int sent = 0;
  while ((s = (*conn)->Send(BigFrame(4 << 20))).ok()) ++sent;
  EXPECT_GE(sent, 14);  // 64 MiB of 4 MiB frames, less what the kernel buffered
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("not reading"));
  ASSERT_TRUE(listener.done_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_THAT(std::string(listener.reason_.message()), HasSubstr("not reading"));
  // Later sends fail with the same reason.
  EXPECT_THAT(std::string((*conn)->Send(BigFrame(10)).message()), HasSubstr("not reading"));
}

TEST(RunnerConnectionTest, AFrameNotTakenWithinItsDeadlineEndsTheConnection) {
  DeafRunner runner;
  Closed listener;  // outlives conn, whose reader reports the close to it
  auto conn = RunnerConnection::Connect(runner.path(), absl::Seconds(5), absl::Milliseconds(300));
  ASSERT_TRUE(conn.ok()) << conn.status();
  (*conn)->Start(&listener);
  ASSERT_TRUE((*conn)->Send(BigFrame(8 << 20)).ok());
  ASSERT_TRUE(listener.done_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(listener.reason_.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(listener.reason_.message()), HasSubstr("stopped reading"));
}

TEST(RunnerConnectionTest, ABulkFrameIsPacedByTheRunnerWithinItsDeadline) {
  DeafRunner runner;
  Closed listener;  // outlives conn, whose reader reports the close to it
  auto conn = RunnerConnection::Connect(runner.path(), absl::Seconds(5), absl::Milliseconds(300));
  ASSERT_TRUE(conn.ok()) << conn.status();
  (*conn)->Start(&listener);
  // The runner reads nothing: SendBulk waits for it (nothing is queued), then gives up.
  const std::string chunk = EncodeFileChunkFrame(1, std::string(8 << 20, 'x'));
  absl::Status s = (*conn)->SendBulk(chunk);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("stopped reading"));
  ASSERT_TRUE(listener.done_.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_THAT(std::string((*conn)->SendBulk(chunk).message()), HasSubstr("stopped reading"));
}

TEST(RunnerConnectionTest, BulkFramesKeepTheirPlaceAmongQueuedFrames) {
  DeafRunner runner;
  Closed listener;  // outlives conn, whose reader reports the close to it
  auto conn = RunnerConnection::Connect(runner.path(), absl::Seconds(5), absl::Seconds(30));
  ASSERT_TRUE(conn.ok()) << conn.status();
  (*conn)->Start(&listener);
  // A big frame that the socket cannot take at once is queued; the bulk frame goes after
  // it, and a frame sent while the bulk one is being written goes after that.
  ASSERT_TRUE((*conn)->Send(BigFrame(4 << 20)).ok());
  std::string buffer;
  EncodeFileChunkFrameInto(2, std::string(3 << 20, 'y'), &buffer);
  std::thread bulk([&] { EXPECT_TRUE((*conn)->SendBulk(buffer).ok()); });
  absl::SleepFor(absl::Milliseconds(100));
  ASSERT_TRUE((*conn)->Send(MakeExecFrame(3, "small", 1 << 20, 1 << 20, 64)).ok());
  std::vector<nlohmann::json> frames = runner.ReadFrames(3);
  bulk.join();
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0]["type"], "exec");
  EXPECT_EQ(frames[0]["id"], 1);
  EXPECT_EQ(frames[1]["type"], "file_chunk");
  EXPECT_EQ(frames[1]["data"].get<std::string>().size(), 4u << 20);  // base64 of 3 MiB
  EXPECT_EQ(frames[2]["id"], 3);
}

TEST(RunnerConnectionTest, RunnersOfVersionOneAndTwoAreServedNewerOnesAreNot) {
  for (int version : {1, 2}) {
    DeafRunner runner(version);
    auto conn = RunnerConnection::Connect(runner.path(), absl::Seconds(5));
    ASSERT_TRUE(conn.ok()) << version << ": " << conn.status();
    EXPECT_EQ((*conn)->ready().runner_version, version);
  }
  DeafRunner future(3);
  auto conn = RunnerConnection::Connect(future.path(), absl::Seconds(5));
  EXPECT_EQ(conn.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(conn.status().message()), HasSubstr("version 3, not 1 to 2"));
}

// `egress` asking (or not) for the listener, answered by `reply` of the runner (its id
// filled in) with `fd` attached: what TurnEgressOn returns, and the frame it sent.
absl::StatusOr<codemode::UniqueFd> TurnOn(bool ask, nlohmann::json reply, int fd,
                                          nlohmann::json* sent) {
  DeafRunner runner;
  auto conn = RunnerConnection::Connect(runner.path(), absl::Seconds(5));
  if (!conn.ok()) return conn.status();
  std::thread answer([&] {
    *sent = runner.ReadFrames(1).at(0);
    reply["id"] = (*sent)["id"];
    runner.Reply(reply, fd);
  });
  absl::StatusOr<codemode::UniqueFd> got = (*conn)->TurnEgressOn(absl::Seconds(5), ask);
  answer.join();
  return got;
}

TEST(RunnerConnectionTest, TurnEgressOnTakesTheListenerTheRunnerPasses) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const nlohmann::json handed{{"type", "egress_on"}, {"port", 4000}, {"listener", true}};
  nlohmann::json sent;
  absl::StatusOr<codemode::UniqueFd> got = TurnOn(true, handed, fds[0], &sent);
  EXPECT_EQ(sent.value("listener", false), true) << sent.dump();
  ASSERT_TRUE(got.ok()) << got.status();
  struct stat st {};
  ASSERT_EQ(fstat(got->get(), &st), 0) << "a descriptor of this process";
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_NE(fcntl(got->get(), F_GETFD) & FD_CLOEXEC, 0);

  // A runner that says it passed one without passing it, or passes one unasked.
  got = TurnOn(true, handed, -1, &sent);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(got.status().message()), HasSubstr("none was asked for or arrived"));
  got = TurnOn(false, handed, fds[1], &sent);
  EXPECT_FALSE(sent.contains("listener")) << sent.dump();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);

  // A runner that relays itself answers without one: no descriptor.
  got = TurnOn(true, {{"type", "egress_on"}, {"port", 4000}}, -1, &sent);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->get(), -1);
  close(fds[1]);
}

// A runner that accepts nothing while its queue is full (its code stopped it and queued
// connections of its own) gets no connection within the timeout: Connect returns,
// UNAVAILABLE, instead of waiting for as long as the queue stays full.
TEST(RunnerConnectionTest, AFullAcceptQueueEndsConnectAtItsDeadline) {
  ListeningSocket listener(/*backlog=*/0);
  std::vector<int> queued;
  for (int i = 0; i < 64; ++i) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (connect(fd, listener.addr(), listener.addr_size()) != 0) {
      close(fd);
      break;
    }
    queued.push_back(fd);
  }
  ASSERT_FALSE(queued.empty());
  std::future<absl::Status> result = ConnectOnAThread(listener.path(), absl::Milliseconds(300));
  ASSERT_EQ(result.wait_for(std::chrono::seconds(60)), std::future_status::ready)
      << "Connect still waits on a full accept queue";
  absl::Status s = result.get();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot connect to runner socket"));
  for (int fd : queued) close(fd);
}

// Connect, with `timeout`, to a peer that sends `bytes` (with send `flags`) once it
// accepts and then waits for sandboxd to close. What Connect returned, or nullopt when it
// had not returned after `wait` (the peer is then left behind: the test fails anyway).
std::optional<absl::Status> ConnectToAPeerSending(const std::string& bytes, int flags,
                                                  absl::Duration timeout, std::chrono::seconds wait) {
  ListeningSocket listener(/*backlog=*/1);
  std::thread answer([fd = listener.fd(), bytes, flags] {
    int peer = accept4(fd, nullptr, nullptr, SOCK_CLOEXEC);
    EXPECT_EQ(send(peer, bytes.data(), bytes.size(), flags), static_cast<ssize_t>(bytes.size()))
        << "the peer could not send (MSG_OOB on unix sockets needs Linux 5.15)";
    char byte;
    EXPECT_LE(read(peer, &byte, 1), 0);  // until sandboxd gives up and closes
    close(peer);
  });
  std::future<absl::Status> result = ConnectOnAThread(listener.path(), timeout);
  if (result.wait_for(wait) != std::future_status::ready) {
    shutdown(listener.fd(), SHUT_RDWR);
    answer.detach();
    return std::nullopt;
  }
  absl::Status s = result.get();
  answer.join();
  return s;
}

// Code in a session can answer on its runner's socket when sandboxd reconnects after a
// restart. An out-of-band byte makes the socket readable with nothing in line; a read that
// waited for more would hold the restart past every runner's 5 s (and ReadOne's deadline).
TEST(RunnerConnectionTest, AnOutOfBandByteDoesNotHoldConnectPastItsDeadline) {
  std::optional<absl::Status> s =
      ConnectToAPeerSending("x", MSG_OOB, absl::Milliseconds(300), std::chrono::seconds(30));
  ASSERT_TRUE(s.has_value()) << "Connect still waits after its deadline";
  EXPECT_EQ(s->code(), absl::StatusCode::kUnavailable) << *s;
  EXPECT_THAT(std::string(s->message()), HasSubstr("did not say ready"));
}

// The first frame of a connection is the runner's `ready`, under 1 KiB: after a restart,
// code of a session answering in the runner's place cannot have the daemon read and parse
// megabytes (in every session at once, before it serves). A larger one is refused by its
// length, before its body is read.
TEST(RunnerConnectionTest, AFirstFrameLargerThanAReadyIsRefusedByItsLength) {
  const std::string header("\x00\x10\x00\x00", 4);  // 1 MiB follows (it never does)
  std::optional<absl::Status> s =
      ConnectToAPeerSending(header, 0, absl::Seconds(30), std::chrono::seconds(20));
  ASSERT_TRUE(s.has_value()) << "Connect waited for the body of an oversized first frame";
  EXPECT_EQ(s->code(), absl::StatusCode::kUnavailable) << *s;
  EXPECT_THAT(std::string(s->message()), HasSubstr("exceeds the cap of 65536"));
}

// A runner's frame is parsed into a document in the daemon: a dense frame (3 bytes a value)
// would cost ~30 times its size there, in every session at once. A frame holds at most one
// value per 128 bytes of its cap; a denser one is the runner's violation, parsed no further.
// Counts the frames read and the reader's waits for its share of CPU.
class Counting : public RunnerConnection::Listener {
 public:
  void OnRunnerMessage(RunnerMessage) override {
    if (++frames_ == kExpected) all_read_.Notify();
  }
  void OnRunnerClosed(absl::Status) override {}
  void OnReaderWaited(absl::Duration waited) override {
    waited_ += waited;
    ++waits_;
  }
  static constexpr int kExpected = 300;
  std::atomic<int> frames_{0};
  absl::Notification all_read_;
  absl::Duration waited_;  // the reader thread's until all_read_
  int waits_ = 0;
};

// A runner's frames take no more of the reader's CPU than their share: past its burst the
// reader waits (and says so) before it reads on, and reads everything all the same.
// Without a share it never waits.
TEST(RunnerConnectionTest, TheReaderWaitsForItsShareOfCpuAndReadsEverything) {
  for (const uint32_t millis : {0u, 1u}) {
    DeafRunner runner;
    Counting listener;  // outlives conn
    auto conn = RunnerConnection::Connect(runner.path(), absl::Seconds(5));
    ASSERT_TRUE(conn.ok()) << conn.status();
    // A thousandth of a core, a millisecond's worth at once (a microsecond of CPU).
    (*conn)->Start(&listener, RunnerCpuShare{millis, absl::Milliseconds(1)});
    for (int i = 0; i < Counting::kExpected; ++i) {
      runner.Reply({{"type", "pong"}, {"id", i}});
    }
    ASSERT_TRUE(listener.all_read_.WaitForNotificationWithTimeout(absl::Seconds(60))) << millis;
    (*conn)->Close();
    if (millis == 0) {
      EXPECT_EQ(listener.waits_, 0);
    } else {
      EXPECT_GT(listener.waits_, 0);
      EXPECT_GT(listener.waited_, absl::ZeroDuration());
    }
  }
}

// What the reader waits when over its share, and what it may use at once.
TEST(CpuBucketTest, DebtIsTheTimeToEarnBackToZeroAndFullIsTheBurst) {
  CpuBucket b = CpuBucket::Full(100, absl::Seconds(5));
  EXPECT_EQ(b.credit_ns, 500000000);  // 5 s at a tenth of a core
  EXPECT_EQ(b.Debt(100), absl::ZeroDuration());
  EXPECT_TRUE(b.Step(100, absl::Seconds(5), absl::ZeroDuration(), 600000000));
  EXPECT_EQ(b.Debt(100), absl::Seconds(1)) << "100 ms of CPU over, at 100 ms a second";
  EXPECT_EQ(b.Debt(0), absl::ZeroDuration()) << "no rate: nothing to wait for";
}

TEST(FrameDecoderBudgetTest, AFrameHoldsAtMostOneValuePer128BytesOfItsCap) {
  const size_t budget = MaxFrameValues(kMaxRunnerFrameBytes);
  EXPECT_EQ(budget, 131072u);
  auto frame_of = [](size_t values) {  // 8 of the call's own, the rest zeros
    nlohmann::json args = nlohmann::json::array();
    for (size_t i = 0; i + 8 < values; ++i) args.push_back(0);
    return EncodeFrame({{"type", "tool_call"}, {"id", 1}, {"call_id", "c"}, {"server", "s"},
                        {"tool", "t"}, {"arguments", {{"a", args}}}});
  };
  FrameDecoder within(kMaxRunnerFrameBytes);
  const std::string fits = frame_of(budget);
  within.Append(fits.data(), fits.size());
  absl::StatusOr<std::optional<RunnerMessage>> m = within.NextMessage();
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->has_value());

  FrameDecoder over(kMaxRunnerFrameBytes);
  const std::string dense = frame_of(budget + 1);
  over.Append(dense.data(), dense.size());
  m = over.NextMessage();
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("protocol violation"));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("more than 131072 values"));
}

TEST(RunnerConnectionTest, ASymlinkInPlaceOfTheSocketIsNotFollowed) {
  DeafRunner runner;  // a real, listening runner socket elsewhere
  std::string link = std::filesystem::path(runner.path()).parent_path() / "link.sock";
  ASSERT_EQ(symlink(runner.path().c_str(), link.c_str()), 0);
  auto conn = RunnerConnection::Connect(link, absl::Seconds(2));
  ASSERT_FALSE(conn.ok());
  EXPECT_THAT(std::string(conn.status().message()), HasSubstr("not a socket"));
  // The real socket is still accepted (and the fake runner's accept finishes).
  EXPECT_TRUE(RunnerConnection::Connect(runner.path(), absl::Seconds(5)).ok());
}

}  // namespace
}  // namespace sandboxd
