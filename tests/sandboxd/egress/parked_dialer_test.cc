// What the parked dialer reads of a connection that polled readable (parked_dialer.h).
#include "egress/parked_dialer.h"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include <gtest/gtest.h>

namespace sandboxd {
namespace egress {
namespace {

using Woken = ParkedDialer::Woken;

class ParkedDialerPeekTest : public ::testing::Test {
 protected:
  ParkedDialerPeekTest() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0); }
  ~ParkedDialerPeekTest() override {
    if (fds_[0] >= 0) close(fds_[0]);
    if (fds_[1] >= 0) close(fds_[1]);
  }
  int parked() const { return fds_[0]; }
  int relay() const { return fds_[1]; }
  int fds_[2] = {-1, -1};
};

// A readiness with nothing behind it (asio's reactor may report one) leaves the connection
// parked: the peek answers at once instead of waiting for the relay to send.
TEST_F(ParkedDialerPeekTest, NothingToReadAnswersAtOnce) {
  auto peek = std::async(std::launch::async, [fd = parked()] { return ParkedDialer::Peek(fd); });
  if (peek.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "the peek waited for the relay";
    shutdown(relay(), SHUT_WR);  // lets it return, so the test ends
  }
  EXPECT_EQ(peek.get(), Woken::kStillParked);
}

TEST_F(ParkedDialerPeekTest, ARequestIsSeenAndLeftToBeRead) {
  ASSERT_EQ(write(relay(), "CONNECT", 7), 7);
  EXPECT_EQ(ParkedDialer::Peek(parked()), Woken::kRequest);
  char buf[16];
  EXPECT_EQ(read(parked(), buf, sizeof buf), 7) << "the peek takes nothing";
}

TEST_F(ParkedDialerPeekTest, AClosedRelaySideIsNotARequest) {
  close(fds_[1]);
  fds_[1] = -1;
  EXPECT_EQ(ParkedDialer::Peek(parked()), Woken::kNotARequest);
}

// Readable with nothing in line: parked again, it would wake again at once, for ever.
TEST_F(ParkedDialerPeekTest, AnOutOfBandByteIsNotARequest) {
  ASSERT_EQ(send(relay(), "x", 1, MSG_OOB), 1) << "this kernel has no MSG_OOB on unix sockets";
  EXPECT_EQ(ParkedDialer::Peek(parked()), Woken::kNotARequest);
}

TEST_F(ParkedDialerPeekTest, AnErrorIsNotARequest) {
  EXPECT_EQ(ParkedDialer::Peek(-1), Woken::kNotARequest);
}

}  // namespace
}  // namespace egress
}  // namespace sandboxd
