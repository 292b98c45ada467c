// The audit log against others sharing its directory: a directory another user could
// write is refused at start, rotation happens in the directory claimed then (renaming it or
// replacing its path later redirects nothing), names already at the rotated names do not
// stop rotation, and a write the file refuses is dropped, counted and followed by a reopen.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "audit/audit_log.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Read(const std::string& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> Lines(const std::string& file) {
  std::vector<std::string> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class AuditDirectoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/audit-dir-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    logs_ = dir_ + "/logs";
    ASSERT_EQ(mkdir(logs_.c_str(), 0700), 0);
    path_ = logs_ + "/audit.jsonl";
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string dir_, logs_, path_;
};

// In a sticky 1777 directory another user can make audit.jsonl.1 and stop rotation, so that
// most tool calls that reach the upstream go unlogged: a start in a directory others may
// write is refused.
TEST_F(AuditDirectoryTest, AStartInADirectoryOthersMayWriteIsRefusedWithTheReason) {
  ASSERT_EQ(chmod(logs_.c_str(), 01777), 0);  // as /tmp is
  auto log = AuditLog::Open({path_});
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(log.status().message(), HasSubstr("the audit log's directory " + logs_));
  EXPECT_THAT(log.status().message(), HasSubstr("01777"));
  EXPECT_THAT(log.status().message(), HasSubstr("--audit_log"));
  EXPECT_FALSE(fs::exists(path_)) << "nothing is made in a refused directory";
}

TEST_F(AuditDirectoryTest, AMissingDirectoryIsCreatedPrivate) {
  const std::string deeper = logs_ + "/a/b/audit.jsonl";
  auto log = AuditLog::Open({deeper});
  ASSERT_TRUE(log.ok()) << log.status();
  struct stat st;
  ASSERT_EQ(stat((logs_ + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

// Names at the rotated names are moved up or removed as names: a symlink is never followed,
// and none stops rotation.
TEST_F(AuditDirectoryTest, RotationGoesOnOverSymlinksAtTheRotatedNames) {
  const std::string target = dir_ + "/not-the-log";
  std::ofstream(target) << "keep me\n";
  fs::create_symlink(target, path_ + ".1");
  fs::create_symlink(dir_ + "/nowhere", path_ + ".2");
  AuditOptions o{path_};
  o.max_file_bytes = 200;
  o.keep = 2;
  o.reopen_interval = absl::ZeroDuration();
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok()) << log.status();
  for (int n = 0; n < 20; ++n) (*log)->Write({{"n", n}, {"pad", std::string(60, 'x')}});
  (*log)->Flush();
  EXPECT_EQ((*log)->rotation_failures(), 0u);
  EXPECT_EQ((*log)->dropped(), 0u);
  EXPECT_EQ((*log)->written(), 20u);
  EXPECT_GE((*log)->rotations(), 2u);
  EXPECT_EQ(Read(target), "keep me\n") << "a symlink at a rotated name was followed";
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(path_ + ".1")));
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(path_ + ".2")));
  EXPECT_FALSE(fs::exists(dir_ + "/nowhere"));
  // The newest lines are all there, in order.
  std::vector<std::string> lines = Lines(path_ + ".1");
  for (const std::string& line : Lines(path_)) lines.push_back(line);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(nlohmann::json::parse(lines.back())["n"], 19);
}

// The directory is held from the start: after it is renamed and its path names another
// directory, rotation and reopening still happen in the directory claimed at the start.
TEST_F(AuditDirectoryTest, RenamingTheDirectoryAfterTheStartRedirectsNothing) {
  AuditOptions o{path_};
  o.max_file_bytes = 200;
  o.keep = 100;  // every line kept
  o.reopen_interval = absl::ZeroDuration();
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok()) << log.status();
  (*log)->Write({{"n", 0}});
  (*log)->Flush();
  const std::string moved = dir_ + "/moved";
  const std::string elsewhere = dir_ + "/elsewhere";
  ASSERT_EQ(rename(logs_.c_str(), moved.c_str()), 0);
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0700), 0);
  fs::create_symlink(elsewhere, logs_);
  for (int n = 1; n < 20; ++n) (*log)->Write({{"n", n}, {"pad", std::string(60, 'x')}});
  (*log)->Flush();
  EXPECT_GT((*log)->rotations(), 0u);
  EXPECT_EQ((*log)->written(), 20u);
  EXPECT_TRUE(fs::is_empty(elsewhere)) << "a rotation followed the directory's old path";
  size_t lines = 0;
  for (const auto& entry : fs::directory_iterator(moved)) lines += Lines(entry.path()).size();
  EXPECT_EQ(lines, 20u);
}

// A write the file refuses drops its line (counted); the part of a line it left is ended
// before the next line, and the file is reopened, so a replaced file is written again.
TEST_F(AuditDirectoryTest, AFailedWriteIsDroppedAndTheFileReopened) {
  enum Mode { kWrite, kHalfThenFail, kFail };
  std::atomic<int> mode{kWrite};
  AuditOptions o{path_};
  o.reopen_interval = absl::ZeroDuration();
  o.write = [&mode](int fd, const void* data, size_t size) -> ssize_t {
    switch (mode.load()) {
      case kHalfThenFail:
        mode = kFail;
        return ::write(fd, data, size / 2);
      case kFail:
        errno = EIO;
        return -1;
      default:
        return ::write(fd, data, size);
    }
  };
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok()) << log.status();
  mode = kHalfThenFail;
  (*log)->Write({{"n", 1}});
  (*log)->Flush();
  EXPECT_EQ((*log)->dropped(), 1u);
  mode = kWrite;
  (*log)->Write({{"n", 2}});
  (*log)->Flush();
  std::vector<std::string> lines = Lines(path_);
  ASSERT_EQ(lines.size(), 2u) << Read(path_);
  const nlohmann::json last = nlohmann::json::parse(lines[1], nullptr, false);
  ASSERT_FALSE(last.is_discarded()) << "the next line was joined to the torn one: " << lines[1];
  EXPECT_EQ(last["n"], 2);

  // A failure closes the file: once the path names a new one, the next line goes there.
  mode = kFail;
  (*log)->Write({{"n", 3}});
  (*log)->Flush();
  ASSERT_EQ(rename(path_.c_str(), (logs_ + "/failed").c_str()), 0);
  mode = kWrite;
  (*log)->Write({{"n", 4}});
  (*log)->Flush();
  EXPECT_EQ((*log)->dropped(), 2u);
  EXPECT_EQ((*log)->written(), 2u);
  lines = Lines(path_);
  ASSERT_EQ(lines.size(), 1u) << "the line went to the file that failed";
  EXPECT_EQ(nlohmann::json::parse(lines[0])["n"], 4);
}

}  // namespace
}  // namespace gateway
