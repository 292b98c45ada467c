// The daemon's locks and its socket clean-up (instance_lock.h). Real daemons racing on one
// state directory and socket: InstanceLockTest in the integration suite.
#include "sandboxd/instance_lock.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sbx-lock-test-XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Binds a unix socket at `path` (and leaves it there, as a daemon's socket is).
void BindSocket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << strerror(errno);
  close(fd);
}

std::string Read(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

ino_t Inode(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

TEST(InstanceLockTest, RemovesOnlyTheSocketItBound) {
  TempDir dir;
  const std::string sock = dir.path() + "/s.sock";
  BindSocket(sock);
  BoundSocket ours = BoundSocket::Pin(sock);
  ASSERT_TRUE(ours.held());
  // Another daemon removed ours and bound its own at the same path: our exit must leave it
  // alone. Pinned, ours keeps its inode number: the new socket's differs (unpinned, ext4
  // hands the freed number to the new socket at once).
  ASSERT_EQ(unlink(sock.c_str()), 0);
  BindSocket(sock);
  const ino_t theirs = Inode(sock);
  EXPECT_FALSE(ours.RemoveIfOurs());
  EXPECT_EQ(Inode(sock), theirs);
  // Nothing pinned, or a path that is no socket: nothing removed.
  EXPECT_FALSE(BoundSocket().RemoveIfOurs());
  EXPECT_FALSE(BoundSocket::Pin(dir.path()).held());
  EXPECT_TRUE(fs::exists(sock));
  // Its own socket is removed, once.
  BoundSocket current = BoundSocket::Pin(sock);
  EXPECT_TRUE(current.RemoveIfOurs());
  EXPECT_FALSE(fs::exists(sock));
  EXPECT_FALSE(current.RemoveIfOurs());
}

TEST(InstanceLockTest, ASecondHolderIsRefusedWithThePidUntilTheFirstLetsGo) {
  TempDir dir;
  const std::string path = dir.path() + "/sandboxd.lock";
  absl::StatusOr<InstanceLock> first = InstanceLock::Acquire(path, "the state directory x");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(Read(path), absl::StrCat(getpid(), "\n"));
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // flock is per open file: a second open in this process conflicts like another daemon.
  absl::StatusOr<InstanceLock> second = InstanceLock::Acquire(path, "the state directory x");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find(absl::StrCat("another sandboxd (pid ", getpid(),
                                                         ") holds the state directory x")),
            std::string::npos)
      << second.status();
  // A child (fork + exec, as podman is started) inherits no lock: O_CLOEXEC.
  pid_t child = fork();
  if (child == 0) {
    execl("/bin/sh", "sh", "-c", "ls -l /proc/$$/fd | grep -q sandboxd.lock && exit 1; exit 0",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  *first = InstanceLock();  // released
  absl::StatusOr<InstanceLock> third = InstanceLock::Acquire(path, "the state directory x");
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(InstanceLockTest, ClaimLocksTheStateDirectoryAndTheSocketAndRemovesAStaleSocket) {
  TempDir dir;
  const std::string state = dir.path() + "/state", sock = dir.path() + "/run/s.sock";
  ASSERT_EQ(mkdir((dir.path() + "/run").c_str(), 0700), 0);
  BindSocket(sock);  // a crashed daemon's: nobody answers
  absl::StatusOr<DaemonLocks> first = ClaimStateAndSocket(state, sock);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(fs::exists(sock));
  EXPECT_TRUE(fs::exists(state + "/sandboxd.lock"));
  EXPECT_TRUE(fs::exists(sock + ".lock"));
  struct stat st;
  ASSERT_EQ(stat(state.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // The same state directory with another socket, and another one with the same socket.
  absl::StatusOr<DaemonLocks> same_state = ClaimStateAndSocket(state, dir.path() + "/t.sock");
  ASSERT_FALSE(same_state.ok());
  EXPECT_NE(same_state.status().message().find("holds the state directory " + state),
            std::string::npos)
      << same_state.status();
  absl::StatusOr<DaemonLocks> same_socket = ClaimStateAndSocket(dir.path() + "/other", sock);
  ASSERT_FALSE(same_socket.ok());
  EXPECT_NE(same_socket.status().message().find("holds the socket " + sock), std::string::npos)
      << same_socket.status();
  first = DaemonLocks{};
  EXPECT_TRUE(ClaimStateAndSocket(state, sock).ok());
}

mode_t Mode(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}

// What we create is 0700, and an existing directory is never chmod'ed (chmod'ing a socket
// directory whenever it is ours would make /tmp 0700 for a root daemon with
// --socket=/tmp/x.sock): one others may enter is refused, and stays as it was. The state
// directory's owner and mode are checked too.
TEST(InstanceLockTest, ExistingDirectoriesOthersMayEnterAreRefusedAndKeepTheirMode) {
  TempDir dir;
  const std::string shared = dir.path() + "/shared", open = dir.path() + "/open";
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 01777), 0);  // as /tmp is
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0755), 0);

  absl::StatusOr<DaemonLocks> in_tmp = ClaimStateAndSocket(dir.path() + "/state", shared + "/s.sock");
  ASSERT_FALSE(in_tmp.ok());
  EXPECT_NE(in_tmp.status().message().find("the socket's directory " + shared +
                                           " can be entered by other users (mode 01777)"),
            std::string::npos)
      << in_tmp.status();
  EXPECT_NE(in_tmp.status().message().find("--socket"), std::string::npos) << in_tmp.status();
  EXPECT_EQ(Mode(shared), 01777u);
  EXPECT_FALSE(fs::exists(shared + "/s.sock.lock"));

  absl::StatusOr<DaemonLocks> open_state = ClaimStateAndSocket(open, dir.path() + "/run/s.sock");
  ASSERT_FALSE(open_state.ok());
  EXPECT_NE(open_state.status().message().find("the state directory " + open), std::string::npos)
      << open_state.status();
  EXPECT_NE(open_state.status().message().find("--state_dir"), std::string::npos) << open_state.status();
  EXPECT_EQ(Mode(open), 0755u);
  EXPECT_FALSE(fs::exists(open + "/sandboxd.lock"));

  // A file where the directory should be.
  std::ofstream(dir.path() + "/file") << "x";
  absl::StatusOr<DaemonLocks> file = ClaimStateAndSocket(dir.path() + "/file", dir.path() + "/run/s.sock");
  ASSERT_FALSE(file.ok());
  EXPECT_FALSE(file.status().message().empty());

  // Missing ones, nested, are created 0700 each.
  absl::StatusOr<DaemonLocks> fresh =
      ClaimStateAndSocket(dir.path() + "/a/b/state", dir.path() + "/c/d/s.sock");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  for (const char* made : {"/a", "/a/b", "/a/b/state", "/c", "/c/d"}) {
    EXPECT_EQ(Mode(dir.path() + made), 0700u) << made;
  }
}

// Checking only the directory itself is not enough: the owner of a parent (or anyone, in a
// parent others may write) could rename it away after the start and put in a directory of
// their own (with a seccomp profile that allows everything, or a socket of theirs). Every
// directory on the way must be root's or ours and, if others may write it, sticky; every
// symlink on it root's or ours.
TEST(InstanceLockTest, EveryDirectoryAndSymlinkOnTheWayMustBeSafeFromOtherUsers) {
  TempDir dir;  // in /tmp: root's and sticky, as it should be
  const std::string open = dir.path() + "/open", safe = dir.path() + "/safe";
  ASSERT_EQ(mkdir(open.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open.c_str(), 0777), 0);  // writable by all, not sticky
  ASSERT_EQ(mkdir(safe.c_str(), 0700), 0);

  absl::StatusOr<DaemonLocks> under_open = ClaimStateAndSocket(open + "/state", safe + "/s.sock");
  ASSERT_FALSE(under_open.ok());
  EXPECT_NE(under_open.status().message().find(open + " can be written by other users and is not sticky"),
            std::string::npos)
      << under_open.status();
  absl::StatusOr<DaemonLocks> socket_under_open = ClaimStateAndSocket(safe + "/state", open + "/run/s.sock");
  ASSERT_FALSE(socket_under_open.ok());
  EXPECT_NE(socket_under_open.status().message().find("the socket's directory " + open + "/run"),
            std::string::npos)
      << socket_under_open.status();
  // Refused before anything is made: neither the state directory nor a directory on a way
  // that leads back out of it ("made/..") is left behind.
  EXPECT_FALSE(fs::exists(safe + "/state"));
  EXPECT_FALSE(ClaimStateAndSocket(dir.path() + "/made/../open/state", safe + "/s.sock").ok());
  EXPECT_FALSE(fs::exists(dir.path() + "/made"));
  EXPECT_FALSE(ClaimStateAndSocket(safe + "/new/../state2", open + "/made/../run/s.sock").ok());
  EXPECT_FALSE(fs::exists(safe + "/new"));
  EXPECT_FALSE(fs::exists(safe + "/state2"));
  // Through what is missing to a directory that is there and refused (others may enter it).
  const std::string pub = safe + "/pub";
  ASSERT_EQ(mkdir(pub.c_str(), 0755), 0);
  ASSERT_EQ(chmod(pub.c_str(), 0755), 0);
  EXPECT_FALSE(ClaimStateAndSocket(safe + "/state3", safe + "/new3/../pub/s.sock").ok());
  EXPECT_FALSE(ClaimStateAndSocket(safe + "/new4/../pub", safe + "/s.sock").ok());
  for (const char* left : {"/state3", "/new3", "/new4"}) EXPECT_FALSE(fs::exists(safe + left)) << left;

  // A symlink of another user on the way (uid 65534 could re-point it), even to our own
  // directory; and a symlink of ours in a directory others may write.
  ASSERT_EQ(mkdir((safe + "/real").c_str(), 0700), 0);
  fs::create_symlink(safe + "/real", safe + "/theirs");
  ASSERT_EQ(lchown((safe + "/theirs").c_str(), 65534, 65534), 0) << strerror(errno);
  absl::StatusOr<DaemonLocks> via_theirs = ClaimStateAndSocket(safe + "/theirs", safe + "/s.sock");
  ASSERT_FALSE(via_theirs.ok());
  EXPECT_NE(via_theirs.status().message().find(safe + "/theirs is a symlink of uid 65534"), std::string::npos)
      << via_theirs.status();
  fs::create_symlink(safe + "/real", open + "/ours");
  EXPECT_FALSE(ClaimStateAndSocket(open + "/ours", safe + "/s.sock").ok());

  // Through a symlink of ours, in safe directories, to a safe directory: fine.
  fs::create_symlink(safe + "/real", safe + "/link");
  absl::StatusOr<DaemonLocks> via_ours = ClaimStateAndSocket(safe + "/link", safe + "/s.sock");
  EXPECT_TRUE(via_ours.ok()) << via_ours.status();
}

// Resolution is walked as the kernel does it. Taking the path as written and realpath()'s
// result would pass another user's symlink in the middle of a chain (ours -> theirs ->
// ours), and any path realpath() cannot resolve; and no missing directory is made before
// it is checked, which would follow other users' symlinks.
TEST(InstanceLockTest, SymlinkChainsAreWalkedAsTheKernelResolvesThemAndNothingIsMadeFirst) {
  TempDir dir;
  const std::string theirs = dir.path() + "/theirs", real = dir.path() + "/real";
  ASSERT_EQ(mkdir(theirs.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(chown(theirs.c_str(), 65534, 65534), 0) << strerror(errno);
  // ours -> theirs/l2 -> real: uid 65534 could re-point l2 at any time.
  fs::create_symlink(real, theirs + "/l2");
  ASSERT_EQ(lchown((theirs + "/l2").c_str(), 65534, 65534), 0);
  fs::create_symlink(theirs + "/l2", dir.path() + "/l1");
  absl::StatusOr<DaemonLocks> chain = ClaimStateAndSocket(dir.path() + "/l1/state", dir.path() + "/s/s.sock");
  ASSERT_FALSE(chain.ok());
  EXPECT_NE(chain.status().message().find(theirs + " belongs to uid 65534"), std::string::npos) << chain.status();
  // ours -> theirs/x/../../real: x could become a symlink.
  ASSERT_EQ(mkdir((theirs + "/x").c_str(), 0755), 0);
  fs::create_symlink(theirs + "/x/../../real", dir.path() + "/dotdot");
  EXPECT_FALSE(ClaimStateAndSocket(dir.path() + "/dotdot/state", dir.path() + "/s/s.sock").ok());
  // Nothing is created through their symlink before the check: theirs/a -> rootonly.
  const std::string rootonly = dir.path() + "/rootonly";
  ASSERT_EQ(mkdir(rootonly.c_str(), 0700), 0);
  fs::create_symlink(rootonly, theirs + "/a");
  ASSERT_EQ(lchown((theirs + "/a").c_str(), 65534, 65534), 0);
  EXPECT_FALSE(ClaimStateAndSocket(theirs + "/a/sandboxd", dir.path() + "/s/s.sock").ok());
  EXPECT_FALSE(fs::exists(rootonly + "/sandboxd"));
  // A relative path from a working directory that is theirs.
  const fs::path cwd = fs::current_path();
  fs::current_path(theirs + "/x");
  absl::StatusOr<DaemonLocks> relative = ClaimStateAndSocket("state", dir.path() + "/s/s.sock");
  fs::current_path(cwd);
  ASSERT_FALSE(relative.ok());
  EXPECT_NE(relative.status().message().find("belongs to uid 65534"), std::string::npos) << relative.status();
  // Our own chain, through "..", to a safe place: fine; what is missing is made 0700.
  fs::create_symlink("../real", real + "/up");  // real/up -> real
  absl::StatusOr<DaemonLocks> ok = ClaimStateAndSocket(real + "/up/up/new/state", dir.path() + "/s/s.sock");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(Mode(real + "/new"), 0700u);
  EXPECT_EQ(Mode(real + "/new/state"), 0700u);
}

}  // namespace
}  // namespace sandboxd
