// MeasureWasmWorkspace and OverWasmWorkspaceBudget (services/sandboxd/sandboxd/
// wasm_workspace.h) on real directories: what the budget thread of the wasm tier counts.
#include "sandboxd/wasm_workspace.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jail_run.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(WasmWorkspaceTest, CountsBlocksAndInodesAndFollowsNoLink) {
  wasm_jail_test::TempDir dir;
  const std::string root = dir.path();
  std::ofstream(root + "/one-mib") << std::string(1 << 20, 'x');
  fs::create_directory(root + "/d");
  for (const char* name : {"a", "b", "c"}) std::ofstream(root + "/d/" + name);
  fs::create_directory_symlink("/usr", root + "/usr");  // counted as itself, never walked
  absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(root);
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_EQ(use->inodes, 7u) << "the root, a file, a directory of 3 and a link";
  EXPECT_GE(use->bytes, 1u << 20);
  EXPECT_LT(use->bytes, 2u << 20) << "/usr was walked";
  EXPECT_FALSE(use->too_deep);
  EXPECT_EQ(OverWasmWorkspaceBudget(*use, WasmWorkspaceBudgetFor(16 << 20)), "");
  EXPECT_THAT(OverWasmWorkspaceBudget(*use, {1 << 19, 100}),
              HasSubstr("the workspace holds 2 MiB, over its budget of 1 MiB"));
  EXPECT_THAT(OverWasmWorkspaceBudget(*use, {16 << 20, 6}), HasSubstr("at least 7 files and directories, over its budget of 6"));
  // The budget thread stops counting once a workspace is over.
  use = MeasureWasmWorkspace(root, 3);
  ASSERT_TRUE(use.ok());
  EXPECT_EQ(use->inodes, 3u);
  EXPECT_EQ(MeasureWasmWorkspace(root + "/usr").status().code(), absl::StatusCode::kUnavailable)
      << "a workspace that is a link is not opened";
}

TEST(WasmWorkspaceTest, ADirectoryTooDeepToWalkIsOverTheBudget) {
  wasm_jail_test::TempDir dir;
  const std::string root = dir.path();
  std::string path = root;
  for (int i = 0; i < 130; ++i) path += "/d";
  fs::create_directories(path);
  absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(root);
  ASSERT_TRUE(use.ok());
  EXPECT_TRUE(use->too_deep);
  EXPECT_THAT(OverWasmWorkspaceBudget(*use, WasmWorkspaceBudgetFor(16 << 20)), HasSubstr("deeper than 128"));
}

TEST(WasmWorkspaceTest, ATmpfsIsMeasuredByStatvfs) {
  // /dev/shm is a tmpfs on Linux: its counts are the filesystem's, whatever is in it.
  absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmTmpfsWorkspace("/dev/shm", "/nonexistent");
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_GE(use->inodes, 1u);
  EXPECT_EQ(WasmWorkspaceBudgetFor(256ull << 20).inodes, 65536u);
  EXPECT_EQ(WasmWorkspaceBudgetFor(1 << 20).inodes, 1024u);
}

// Until bubblewrap has mounted the session's tmpfs, /proc/<init>/root shows the host's
// directory: measuring its filesystem gave the disk's 40 GiB and ended a starting session.
TEST(WasmWorkspaceTest, TheHostsDirectoryIsNotTakenForTheSandboxsTmpfs) {
  wasm_jail_test::TempDir dir;
  EXPECT_EQ(MeasureWasmTmpfsWorkspace(dir.path(), dir.path()).status().code(), absl::StatusCode::kUnavailable)
      << "the host's directory itself, not mounted over";
  EXPECT_EQ(MeasureWasmTmpfsWorkspace("/dev/shm", "/dev/shm").status().code(), absl::StatusCode::kUnavailable)
      << "a tmpfs that is the host's own directory (a --wasm_dir on a tmpfs)";
  EXPECT_EQ(MeasureWasmTmpfsWorkspace("/usr", "/nonexistent").status().code(), absl::StatusCode::kUnavailable)
      << "a directory on a disk is no tmpfs";
}

// Names that readdir gives after "s0".."s99" in a directory on the filesystem of `dir`
// (ext4 lists in the order of a hash that is the same for every directory of a filesystem).
std::vector<std::string> NamesListedAfterTheFillers(const std::string& dir) {
  const std::string scratch = dir + "/scratch";
  fs::create_directory(scratch);
  for (int i = 0; i < 100; ++i) std::ofstream(scratch + "/s" + std::to_string(i));
  for (int i = 0; i < 400; ++i) std::ofstream(scratch + "/n" + std::to_string(i));
  std::vector<std::string> order;
  for (const auto& e : fs::directory_iterator(scratch)) order.push_back(e.path().filename());
  fs::remove_all(scratch);
  std::vector<std::string> late;
  for (auto it = order.rbegin(); it != order.rend() && (*it)[0] == 'n'; ++it) late.push_back(*it);
  return late;
}

// Code renaming a directory that holds data round a ring of names the walk reaches late: the
// walk lists the name, walks what comes before it, and finds the name gone (W6-1). The
// measure counts the data or says it cannot measure; it never answers less, silently.
TEST(WasmWorkspaceTest, ADirectoryRenamedRoundARingIsCountedOrUnmeasured) {
  wasm_jail_test::TempDir dir;
  const std::string ws = dir.path();
  const std::vector<std::string> ring = NamesListedAfterTheFillers(ws);
  ASSERT_GE(ring.size(), 2u) << "no names that readdir lists after the fillers";
  for (int i = 0; i < 100; ++i) {  // 600 directories walked before the ring's names
    for (int j = 0; j < 5; ++j) fs::create_directories(absl::StrCat(ws, "/s", i, "/", j));
  }
  fs::create_directory(ws + "/" + ring[0]);
  constexpr uint64_t kData = 8 << 20;
  std::ofstream(ws + "/" + ring[0] + "/data") << std::string(kData, 'x');
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> renames{0};
  std::thread renamer([&] {
    for (size_t i = 0; !stop; ++i, ++renames) {
      rename((ws + "/" + ring[i % ring.size()]).c_str(), (ws + "/" + ring[(i + 1) % ring.size()]).c_str());
    }
  });
  int counted = 0, unmeasured = 0, under = 0;
  // For 3 s, while the renames go on (2 cores shared with other work may hold them up).
  for (const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
       std::chrono::steady_clock::now() < end;) {
    if (renames < 100) continue;
    absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(ws);
    if (!use.ok()) {
      EXPECT_THAT(use.status().message(), HasSubstr("changed under 3 walks in a row"));
      unmeasured++;
    } else {
      (use->bytes >= kData ? counted : under)++;
    }
  }
  stop = true;
  renamer.join();
  EXPECT_EQ(under, 0) << counted << " measures counted the data, " << unmeasured << " could not measure, "
                      << under << " missed it (" << renames << " renames)";
  absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(ws);
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_GE(use->bytes, kData) << "a workspace at rest";
  EXPECT_EQ(use->inodes, 1u + 600u + 2u);
}

// A --wasm_dir refused for a symbolic link or a '..' on the way changes nothing: the link's
// owner would choose which directory becomes 0711 and gets w/ and snapshots/ (W6-4).
// Walks are paced at ten times their cost, but one that could not measure a workspace does
// not push the next past the unmeasured bound: a re-checking walk of 1.5 s (a ring of
// renames on a loaded machine) would otherwise leave the workspace unmeasured for 15 s.
TEST(WasmWorkspaceTest, ASlowWalkDoesNotStretchHowLongAWorkspaceGoesUnmeasured) {
  const absl::Time t = absl::FromUnixSeconds(1000);
  const absl::Duration bound = absl::Seconds(5);
  EXPECT_EQ(NextWasmWorkspaceWalk(t, absl::Milliseconds(1500), std::nullopt, bound), t + absl::Seconds(15));
  EXPECT_EQ(NextWasmWorkspaceWalk(t, absl::Milliseconds(1500), t, bound), t + bound);
  EXPECT_EQ(NextWasmWorkspaceWalk(t, absl::Milliseconds(1500), t - absl::Seconds(3), bound), t + absl::Seconds(2));
  EXPECT_EQ(NextWasmWorkspaceWalk(t, absl::Milliseconds(20), t, bound), t + absl::Milliseconds(200));
}

TEST(WasmWorkspaceTest, ARefusedWorkDirIsNeitherMadeNorChmodded) {
  wasm_jail_test::TempDir dir;
  const std::string real = dir.path() + "/real";
  fs::create_directories(real + "/private");
  chmod((real + "/private").c_str(), 0700);
  fs::create_directory_symlink(real, dir.path() + "/link");
  for (const std::string& work_dir : {dir.path() + "/link/private", dir.path() + "/link/../real/private",
                                      dir.path() + "/link/private/new"}) {
    absl::Status refused = PrepareWasmWorkDir(work_dir);
    EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << work_dir;
    struct stat st;
    ASSERT_EQ(stat((real + "/private").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0700u) << work_dir << ": " << refused;
    EXPECT_TRUE(fs::is_empty(real + "/private")) << work_dir << ": " << refused;
  }
  // The same directory named without the link: made ready.
  ASSERT_TRUE(PrepareWasmWorkDir(real + "/private/new").ok());
  EXPECT_TRUE(fs::is_directory(real + "/private/new/w"));
}

constexpr uid_t kOrdinaryUid = 65534;

// Runs `body` in a child as kOrdinaryUid (after `as_root`, still root, if given), as a
// sandboxd that is not root: its exit code, what it wrote to its out fd in `*out`.
int RunAsOrdinaryUid(const std::function<int(int out)>& body, std::string* out,
                     const std::function<bool()>& as_root = nullptr) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    close(pipe_fds[0]);
    if (as_root && !as_root()) _exit(3);
    if (setresgid(kOrdinaryUid, kOrdinaryUid, kOrdinaryUid) != 0 ||
        setresuid(kOrdinaryUid, kOrdinaryUid, kOrdinaryUid) != 0) {
      _exit(2);
    }
    _exit(body(pipe_fds[1]));
  }
  close(pipe_fds[1]);
  *out = wasm_jail_test::ReadAll(pipe_fds[0]);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void Say(int fd, const std::string& text) {
  if (write(fd, text.data(), text.size()) < 0) _exit(4);
}

// Without bwrap a session of a sandboxd that is not root runs as sandboxd's uid and may
// make a directory it cannot read (mkdir with mode 0300): the walk gives it the owner's rwx
// (and leaves them: a mode given back moves the ctime on each walk, which code could watch
// to learn when the walk reads it), and names what it cannot read at all (not ours) as
// over the budget.
TEST(WasmWorkspaceTest, AsAnOrdinaryUidADirectoryItCannotReadIsStillCounted) {
  ASSERT_EQ(geteuid(), 0u) << "the test gives the tree to another uid: run it as root (CI does)";
  wasm_jail_test::TempDir dir;
  const std::string ws = dir.path() + "/ws";
  fs::create_directories(ws + "/h/deeper");
  fs::create_directory(ws + "/closed");
  for (int i = 0; i < 20; ++i) std::ofstream(ws + "/h/deeper/" + std::to_string(i)) << std::string(64 << 10, 'x');
  for (const auto& e : fs::recursive_directory_iterator(dir.path())) lchown(e.path().c_str(), kOrdinaryUid, kOrdinaryUid);
  lchown(dir.path().c_str(), kOrdinaryUid, kOrdinaryUid);
  chmod((ws + "/h/deeper").c_str(), 0100);
  chmod((ws + "/h").c_str(), 0300);
  chmod((ws + "/closed").c_str(), 0);
  std::string said;
  auto measure = [&](int out) {
    absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(ws);
    if (!use.ok()) return 1;
    Say(out, absl::StrCat(use->inodes, " inodes, ", use->bytes >= (1280 << 10) ? "all" : "not all", " bytes; ",
                          OverWasmWorkspaceBudget(*use, WasmWorkspaceBudgetFor(16 << 20))));
    return 0;
  };
  ASSERT_EQ(RunAsOrdinaryUid(measure, &said), 0) << said;
  EXPECT_EQ(said, "24 inodes, all bytes; ") << "1 + h + deeper + 20 files of 64 KiB + closed, within the budget";
  struct stat st;
  ASSERT_EQ(stat((ws + "/h").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "the walk did not keep the owner's rwx";
  ASSERT_EQ(stat((ws + "/h/deeper").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "the walk did not keep the owner's rwx";
  ASSERT_EQ(stat((ws + "/closed").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u) << "the walk did not keep the owner's rwx";
  // Root's directory, not ours to open up: what is in it stays unseen, so over the budget.
  fs::create_directory(ws + "/roots");
  chmod((ws + "/roots").c_str(), 0700);
  ASSERT_EQ(RunAsOrdinaryUid(measure, &said), 0) << said;
  EXPECT_THAT(said, HasSubstr("the workspace holds a directory sandboxd cannot read, which its budget "
                              "cannot measure"));
}

// A file whose name is gone keeps its blocks while a process holds it open: counted for
// the holders given, once however often it is open, and only on the workspace's filesystem.
TEST(WasmWorkspaceTest, CountsTheUnlinkedFilesItsProcessesHoldOpen) {
  wasm_jail_test::TempDir dir;
  const std::string ws = dir.path();
  // What this process holds already (an unlinked file it inherited) counts in both measures.
  absl::StatusOr<WasmWorkspaceUse> base = MeasureWasmWorkspace(ws, 0, {getpid()});
  ASSERT_TRUE(base.ok()) << base.status();
  std::ofstream(ws + "/gone") << std::string(1 << 20, 'x');
  const int held = open((ws + "/gone").c_str(), O_RDONLY | O_CLOEXEC);
  const int again = open((ws + "/gone").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(unlink((ws + "/gone").c_str()), 0);
  std::ofstream("/dev/shm/wasm-workspace-test-elsewhere") << std::string(1 << 20, 'y');
  const int elsewhere = open("/dev/shm/wasm-workspace-test-elsewhere", O_RDONLY | O_CLOEXEC);
  unlink("/dev/shm/wasm-workspace-test-elsewhere");
  absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(ws, 0, {getpid(), 999999999});
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_EQ(use->inodes - base->inodes, 1u) << "the held file, once";
  EXPECT_GE(use->bytes - base->bytes, 1u << 20);
  EXPECT_LT(use->bytes - base->bytes, 2u << 20) << "counted twice, or another filesystem's file counted";
  EXPECT_EQ(use->hidden, "") << "an ended process hides nothing";
  use = MeasureWasmWorkspace(ws);
  ASSERT_TRUE(use.ok());
  EXPECT_LT(use->bytes, 1u << 20) << "no holders given";
  for (int fd : {held, again, elsewhere}) close(fd);
}

// Under bwrap code may chmod its tmpfs's root 0300; a sandboxd that is not root (only its
// owner) still measures it, opening it for its counts only (O_PATH).
TEST(WasmWorkspaceTest, AsAnOrdinaryUidATmpfsItCannotReadIsMeasured) {
  ASSERT_EQ(geteuid(), 0u) << "the test mounts a tmpfs in a mount namespace: run it as root (CI does)";
  wasm_jail_test::TempDir dir;
  chmod(dir.path().c_str(), 0711);
  const std::string mnt = dir.path() + "/mnt";
  fs::create_directory(mnt);
  auto mount_tmpfs = [&] {
    const std::string options = absl::StrCat("mode=0300,size=1m,uid=", kOrdinaryUid, ",gid=", kOrdinaryUid);
    return unshare(CLONE_NEWNS) == 0 && mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           mount("tmpfs", mnt.c_str(), "tmpfs", 0, options.c_str()) == 0;
  };
  std::string said;
  const int code = RunAsOrdinaryUid(
      [&](int out) {
        absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmTmpfsWorkspace(mnt, "/nonexistent");
        Say(out, use.ok() ? absl::StrCat(use->inodes) : std::string(use.status().message()));
        return use.ok() ? 0 : 1;
      },
      &said, mount_tmpfs);
  EXPECT_EQ(code, 0) << said;
  EXPECT_EQ(said, "1") << "the tmpfs's root only";
}

// A sandboxd that is not root does not bypass modes: a directory the session made
// unwritable (chmod 0500, 0000) would stay on disk after DeleteSession. Run as an ordinary
// uid in a child, as such a sandboxd would, on a tree that uid owns.
TEST(WasmWorkspaceTest, RemovesWhatCodeMadeUnwritableAsAnOrdinaryUid) {
  ASSERT_EQ(geteuid(), 0u) << "the test gives the tree to another uid: run it as root (CI does)";
  wasm_jail_test::TempDir dir;
  const std::string ws = dir.path() + "/ws";
  for (const char* d : {"/ws", "/ws/locked", "/ws/locked/inner", "/ws/closed", "/ws/keep"}) {
    fs::create_directory(dir.path() + d);
  }
  std::ofstream(ws + "/locked/inner/f") << "x";
  std::ofstream(ws + "/closed/g") << "y";
  fs::create_directory_symlink("/usr", ws + "/usr");
  constexpr uid_t kUid = 65534;
  for (const auto& e : fs::recursive_directory_iterator(dir.path())) lchown(e.path().c_str(), kUid, kUid);
  lchown(dir.path().c_str(), kUid, kUid);
  chmod((ws + "/locked/inner").c_str(), 0500);
  chmod((ws + "/locked").c_str(), 0500);
  chmod((ws + "/closed").c_str(), 0);
  auto remove_as_uid = [&](bool keep_root) {
    pid_t pid = fork();
    if (pid == 0) {
      if (setresgid(kUid, kUid, kUid) != 0 || setresuid(kUid, kUid, kUid) != 0) _exit(2);
      _exit(RemoveWasmWorkspace(ws, keep_root) ? 1 : 0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(remove_as_uid(/*keep_root=*/true), 0);
  EXPECT_TRUE(fs::exists(ws));
  EXPECT_TRUE(fs::is_empty(ws));
  EXPECT_TRUE(fs::exists("/usr/bin")) << "a link was followed";
  fs::create_directory(ws + "/again");
  lchown((ws + "/again").c_str(), kUid, kUid);
  chmod((ws + "/again").c_str(), 0);
  EXPECT_EQ(remove_as_uid(/*keep_root=*/false), 0);
  EXPECT_FALSE(fs::exists(ws));
}

}  // namespace
}  // namespace sandboxd
