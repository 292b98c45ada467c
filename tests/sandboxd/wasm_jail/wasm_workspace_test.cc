// MeasureWasmWorkspace and OverWasmWorkspaceBudget (services/sandboxd/sandboxd/
// wasm_workspace.h) on real directories: what the budget thread of the wasm tier counts.
#include "sandboxd/wasm_workspace.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

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
