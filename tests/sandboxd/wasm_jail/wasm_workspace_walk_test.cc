// MeasureWasmWorkspace (services/sandboxd/sandboxd/wasm_workspace.h) against code that
// moves files behind the walk: between two directories, at the instants the walk lists
// them (what a session learns when the walk's reads show, W7-1), and against code that is
// only busy.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jail_run.h"
#include "sandboxd/wasm_workspace.h"

namespace sandboxd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr int kFiles = 4;
constexpr uint64_t kFileBytes = 2 << 20;

ino_t InodeOf(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}
ino_t InodeOf(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// A workspace of two directories, a/ and b/, and kFiles files of kFileBytes in b/.
struct TwoDirectories {
  wasm_jail_test::TempDir dir;
  std::string ws = dir.path();
  ino_t a = 0, b = 0;
  bool in_a = false;  // where the files are
  TwoDirectories() {
    fs::create_directory(ws + "/a");
    fs::create_directory(ws + "/b");
    for (int i = 0; i < kFiles; ++i) std::ofstream(absl::StrCat(ws, "/b/f", i)) << std::string(kFileBytes, 'x');
    a = InodeOf(ws + "/a");
    b = InodeOf(ws + "/b");
  }
  // Moves the files into the directory `fd` if it is a/ or b/ and they are not there yet.
  bool MoveInto(int fd) {
    const ino_t to = InodeOf(fd);
    if ((to != a && to != b) || (to == a) == in_a) return false;
    const std::string from = in_a ? "/a/f" : "/b/f", into = in_a ? "/b/f" : "/a/f";
    for (int i = 0; i < kFiles; ++i) std::rename(absl::StrCat(ws, from, i).c_str(), absl::StrCat(ws, into, i).c_str());
    in_a = !in_a;
    return true;
  }
  uint64_t Inodes() const { return 1 + 2 + kFiles; }
};

struct ListedHook {
  explicit ListedHook(std::function<void(int)> hook) { SetWasmWorkspaceListedHookForTesting(std::move(hook)); }
  ~ListedHook() { SetWasmWorkspaceListedHookForTesting(nullptr); }
};

// The session's move of W7-1 in one walk: right after the walk lists the first of a/ and
// b/, the files move into it from the other (not listed yet); right after the walk lists
// the other, they move back. The walk lists neither with the files in it; the measure
// counts them, each once.
TEST(WasmWorkspaceTest, FilesMovedBehindTheWalkAreCountedOnce) {
  TwoDirectories two;
  int moves = 0;
  ListedHook hook([&](int fd) {
    if (moves < 2 && two.MoveInto(fd)) moves++;
  });
  absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(two.ws);
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_EQ(moves, 2) << "the hook did not see both directories listed";
  EXPECT_GE(use->bytes, kFiles * kFileBytes) << "the files moved behind the walk were not counted";
  EXPECT_LT(use->bytes, 2 * kFiles * kFileBytes) << "a file was counted twice";
  EXPECT_EQ(use->inodes, two.Inodes());
}

// The same move after every listing, the walk's re-checks included (a session that sees
// every read): the measure counts the files or says it cannot measure; never less.
TEST(WasmWorkspaceTest, FilesMovedBehindEveryListingAreCountedOrUnmeasured) {
  TwoDirectories two;
  int moves = 0;
  ListedHook hook([&](int fd) { moves += two.MoveInto(fd); });
  int counted = 0, unmeasured = 0, under = 0;
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(two.ws);
    if (!use.ok()) {
      EXPECT_THAT(use.status().message(), HasSubstr("changed under 3 walks in a row"));
      unmeasured++;
    } else {
      (use->bytes >= kFiles * kFileBytes ? counted : under)++;
    }
  }
  EXPECT_GT(moves, 40) << "the hook did not move the files behind the walk";
  EXPECT_EQ(under, 0) << counted << " measures counted the files, " << unmeasured << " could not measure, "
                      << under << " missed them";
}

// A directory the code removes while the walk lists it (a `rm -r` of a scratch tree) is
// gone, not uncountable: the measure still counts what the workspace holds.
TEST(WasmWorkspaceTest, ADirectoryRemovedWhileListedIsNotTakenForUnmeasurable) {
  TwoDirectories two;
  const std::string gone = two.ws + "/scratch";
  fs::create_directories(gone + "/sub");
  const ino_t scratch = InodeOf(gone);
  int removed = 0;
  ListedHook hook([&](int fd) {
    if (removed == 0 && InodeOf(fd) == scratch) removed += fs::remove_all(gone) > 0;
  });
  absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(two.ws);
  ASSERT_EQ(removed, 1) << "the hook did not see scratch/ listed";
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_EQ(use->hidden, "");
  EXPECT_GE(use->bytes, kFiles * kFileBytes);
}

// A hard link is one inode: counted once, whichever directories hold its names.
TEST(WasmWorkspaceTest, AHardLinkCountsOnce) {
  TwoDirectories two;
  for (int i = 0; i < kFiles; ++i) {
    ASSERT_EQ(link(absl::StrCat(two.ws, "/b/f", i).c_str(), absl::StrCat(two.ws, "/a/f", i).c_str()), 0);
  }
  absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(two.ws);
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_GE(use->bytes, kFiles * kFileBytes);
  EXPECT_LT(use->bytes, 2 * kFiles * kFileBytes) << "a file with two names was counted twice";
  EXPECT_EQ(use->inodes, two.Inodes());
}

// Code writing a temporary file and renaming it over its target all the time (a build)
// changes the directory under every walk: it stays measured, and each measure counts what
// the directory holds at one instant (never the replaced copies together).
TEST(WasmWorkspaceTest, ADirectoryBusyWithRenamesStaysMeasured) {
  wasm_jail_test::TempDir dir;
  const std::string ws = dir.path();
  fs::create_directories(ws + "/out");
  for (int i = 0; i < 200; ++i) fs::create_directories(absl::StrCat(ws, "/src/", i));
  constexpr uint64_t kTarget = 1 << 20;
  const std::string data(kTarget, 'x');
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> renames{0};
  std::thread busy([&] {
    for (uint64_t i = 0; !stop; ++i, ++renames) {
      const std::string tmp = absl::StrCat(ws, "/out/tmp.", i % 8);
      const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0) continue;
      if (write(fd, data.data(), data.size()) < 0) {}
      close(fd);
      std::rename(tmp.c_str(), (ws + "/out/target").c_str());
    }
  });
  int measured = 0, unmeasured = 0, over = 0;
  for (const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(3);
       std::chrono::steady_clock::now() < end;) {
    if (renames < 10) continue;
    absl::StatusOr<WasmWorkspaceUse> use = MeasureWasmWorkspace(ws);
    if (!use.ok()) {
      unmeasured++;
    } else {
      measured++;
      // target + at most one temporary being written, plus the directories.
      over += use->bytes > 2 * kTarget + (1 << 20);
    }
  }
  stop = true;
  busy.join();
  EXPECT_GT(measured, 0);
  EXPECT_EQ(unmeasured, 0) << measured << " measures, " << unmeasured << " unmeasured (" << renames << " renames)";
  EXPECT_EQ(over, 0) << "a measure counted replaced copies together";
}

}  // namespace
}  // namespace sandboxd
