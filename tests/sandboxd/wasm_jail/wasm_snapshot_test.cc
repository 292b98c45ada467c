// SnapshotAt (services/sandboxd/sandboxd/wasm_snapshot.h): of several sandboxd starting at
// once, one makes the snapshot and the others wait on its lock, then check what it made.
#include "sandboxd/wasm_snapshot.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jail_run.h"

namespace sandboxd {
namespace {

// Files with which making a snapshot fails at once (there is no Node): what matters here is
// whether SnapshotAt makes one at all while another holds the lock.
WasmFiles NoNode(const std::string& dir) {
  return {dir + "/no-node", dir + "/no-pyodide", dir + "/no-runner.js", dir + "/no-runner.pyz"};
}

TEST(WasmSnapshotTest, WaitsForTheMakerHoldingTheLockThenChecksWhatItMade) {
  wasm_jail_test::TempDir dir;
  const std::string path = dir.path() + "/python-0123456789abcdef.snap";
  const int held = open((path + ".lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);  // another sandboxd is making it
  std::atomic<bool> done{false};
  absl::StatusOr<std::string> got;
  std::thread waiter([&] {
    got = SnapshotAt(NoNode(dir.path()), path);
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_FALSE(done) << "made (or failed to make) a snapshot while another held the lock: "
                     << got.status();
  // The maker puts its snapshot and digest in place, then lets go.
  std::ofstream(path) << "snapshot bytes";
  absl::StatusOr<std::string> sha = FileSha256(path);
  ASSERT_TRUE(sha.ok());
  std::ofstream(path + ".sha256") << *sha << "\n";
  close(held);
  waiter.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, path) << "the waiter uses the snapshot the maker made";
}

TEST(WasmSnapshotTest, AMismatchedDigestIsRefusedNotRemade) {
  wasm_jail_test::TempDir dir;
  const std::string path = dir.path() + "/python-0123456789abcdef.snap";
  std::ofstream(path) << "snapshot bytes";
  std::ofstream(path + ".sha256") << std::string(64, '0') << "\n";
  absl::StatusOr<std::string> got = SnapshotAt(NoNode(dir.path()), path);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
  EXPECT_THAT(std::string(got.status().message()), ::testing::HasSubstr("is refused"));
}

}  // namespace
}  // namespace sandboxd
