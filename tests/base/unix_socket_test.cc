// Unix sockets by path: an address that does not fit is refused, never cut; connections
// are close-on-exec, blocking or not as asked; a full backlog fails a non-blocking connect
// at once.
#include "base/unix_socket.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace codemode {
namespace {

class UnixSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/unix-socket-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/s.sock";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  // A socket bound at path_, listening with `backlog` unless it is negative.
  UniqueFd Bound(int backlog) {
    UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    absl::StatusOr<sockaddr_un> addr = UnixAddress(path_);
    EXPECT_TRUE(addr.ok()) << addr.status();
    EXPECT_EQ(bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof(*addr)), 0);
    if (backlog >= 0) {
      EXPECT_EQ(listen(fd.get(), backlog), 0);
    }
    return fd;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(UnixSocketTest, AnAddressThatDoesNotFitIsRefusedNotCut) {
  EXPECT_TRUE(UnixAddress("/" + std::string(106, 'a')).ok());  // 107 bytes and the NUL
  absl::StatusOr<sockaddr_un> long_one = UnixAddress("/" + std::string(107, 'a'));
  ASSERT_FALSE(long_one.ok());
  EXPECT_EQ(long_one.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(long_one.status().message().find("too long (108 bytes; the limit is 107)"),
            std::string::npos)
      << long_one.status();
  EXPECT_FALSE(UnixAddress("").ok());
  EXPECT_FALSE(UnixAddress(std::string("/tmp/a\0b", 8)).ok());

  errno = 0;
  EXPECT_LT(ConnectUnix("/" + std::string(200, 'a'), Blocking::kYes).get(), 0);
  EXPECT_EQ(errno, ENAMETOOLONG);
  errno = 0;
  EXPECT_LT(ConnectUnix(std::string("/tmp/a\0b", 8), Blocking::kNo).get(), 0);
  EXPECT_EQ(errno, EINVAL);
}

TEST_F(UnixSocketTest, ConnectsCloseOnExecBlockingAsAsked) {
  UniqueFd listener = Bound(4);
  UniqueFd blocking = ConnectUnix(path_, Blocking::kYes);
  ASSERT_GE(blocking.get(), 0) << strerror(errno);
  EXPECT_TRUE(fcntl(blocking.get(), F_GETFD) & FD_CLOEXEC);
  EXPECT_FALSE(fcntl(blocking.get(), F_GETFL) & O_NONBLOCK);
  UniqueFd nonblocking = ConnectUnix(path_, Blocking::kNo);
  ASSERT_GE(nonblocking.get(), 0) << strerror(errno);
  EXPECT_TRUE(fcntl(nonblocking.get(), F_GETFD) & FD_CLOEXEC);
  EXPECT_TRUE(fcntl(nonblocking.get(), F_GETFL) & O_NONBLOCK);

  UniqueFd accepted(accept(listener.get(), nullptr, nullptr));
  ASSERT_GE(accepted.get(), 0);
  ASSERT_EQ(write(blocking.get(), "x", 1), 1);
  char c = 0;
  EXPECT_EQ(read(accepted.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
}

TEST_F(UnixSocketTest, NoListenerFailsWithTheKernelsReason) {
  errno = 0;
  EXPECT_LT(ConnectUnix(path_, Blocking::kYes).get(), 0);
  EXPECT_EQ(errno, ENOENT);
  UniqueFd not_listening = Bound(-1);
  errno = 0;
  EXPECT_LT(ConnectUnix(path_, Blocking::kNo).get(), 0);
  EXPECT_EQ(errno, ECONNREFUSED);
}

TEST_F(UnixSocketTest, AFullBacklogFailsANonBlockingConnectAtOnce) {
  UniqueFd listener = Bound(0);
  std::vector<UniqueFd> queued;
  for (int i = 0; i < 64; ++i) {
    UniqueFd fd = ConnectUnix(path_, Blocking::kNo);
    if (fd.get() < 0) {
      EXPECT_EQ(errno, EAGAIN) << strerror(errno);
      return;
    }
    queued.push_back(std::move(fd));
  }
  FAIL() << "64 connections queued on a listener with backlog 0 and none was refused";
}

}  // namespace
}  // namespace codemode
