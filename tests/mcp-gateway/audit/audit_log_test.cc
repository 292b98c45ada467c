// The audit log alone: lines as written, rotation that loses nothing, a file that is not
// ours or not private refused, a full queue counted, never blocking the writer's callers.
#include "audit/audit_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gateway {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/audit-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/audit.jsonl";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every line of the log and its rotated files, oldest file first.
  std::vector<std::string> AllLines(uint32_t keep) {
    std::vector<std::string> lines;
    for (int i = static_cast<int>(keep); i >= 0; --i) {
      std::ifstream in(i == 0 ? path_ : path_ + "." + std::to_string(i));
      for (std::string line; std::getline(in, line);) lines.push_back(line);
    }
    return lines;
  }

  std::string dir_, path_;
};

TEST_F(AuditLogTest, LinesAreJsonWithTimeAndTheFileIsPrivate) {
  auto log = AuditLog::Open({path_});
  ASSERT_TRUE(log.ok()) << log.status();
  (*log)->Write({{"kind", "run"}, {"note", "line\nbreak \xff and \xe2\x80\xae"}});
  (*log)->Flush();
  std::vector<std::string> lines = AllLines(0);
  ASSERT_EQ(lines.size(), 1u);
  const nlohmann::json j = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(j["kind"], "run");
  EXPECT_EQ(j["time"].get<std::string>().size(), std::string("2026-11-25T17:06:13.123Z").size());
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600);
}

TEST_F(AuditLogTest, RotationLosesNothing) {
  AuditOptions o{path_};
  o.max_file_bytes = 2000;
  o.keep = 1000;  // enough files for every line: none may be lost
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) (*log)->Write({{"writer", t}, {"n", i}});
    });
  }
  for (auto& w : writers) w.join();
  (*log)->Flush();
  EXPECT_EQ((*log)->dropped(), 0u);
  EXPECT_EQ((*log)->written(), 2000u);
  std::set<std::pair<int, int>> seen;
  for (const std::string& line : AllLines(o.keep)) {
    const nlohmann::json j = nlohmann::json::parse(line);  // each line whole
    seen.insert({j["writer"].get<int>(), j["n"].get<int>()});
  }
  EXPECT_EQ(seen.size(), 2000u);
  EXPECT_TRUE(fs::exists(path_ + ".1"));
  EXPECT_LE(fs::file_size(path_ + ".1"), 2000u);
}

TEST_F(AuditLogTest, KeepsOnlyKeepRotatedFiles) {
  AuditOptions o{path_};
  o.max_file_bytes = 200;
  o.keep = 2;
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 100; ++i) (*log)->Write({{"n", i}});
  (*log)->Flush();
  EXPECT_TRUE(fs::exists(path_ + ".2"));
  EXPECT_FALSE(fs::exists(path_ + ".3"));
}

TEST_F(AuditLogTest, SymlinksAndFilesOthersCanReadAreRefused) {
  const std::string target = dir_ + "/elsewhere";
  std::ofstream(target) << "";
  fs::create_symlink(target, path_);
  auto linked = AuditLog::Open({path_});
  ASSERT_FALSE(linked.ok());
  EXPECT_THAT(linked.status().message(), HasSubstr("symlink"));
  fs::remove(path_);
  std::ofstream(path_) << "";
  chmod(path_.c_str(), 0644);
  auto readable = AuditLog::Open({path_});
  ASSERT_FALSE(readable.ok());
  EXPECT_THAT(readable.status().message(), HasSubstr("0600"));
}

TEST_F(AuditLogTest, AFullQueueDropsAndCountsInsteadOfBlocking) {
  AuditOptions o{path_};
  o.max_queued_bytes = 10;  // smaller than any line: every line is dropped, none waits
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 50; ++i) (*log)->Write({{"n", i}});
  (*log)->Flush();
  EXPECT_EQ((*log)->dropped(), 50u);
  EXPECT_EQ((*log)->written(), 0u);
}

// A reopen after a rotation that fails may not make every later line shift the kept files
// (deleting the oldest each time) with auditing never resuming: a failed reopen touches
// nothing kept, and auditing resumes.
TEST_F(AuditLogTest, AFailedReopenTouchesNothingKeptAndAuditingResumes) {
  AuditOptions o{path_};
  o.max_file_bytes = 100;  // every line rotates
  o.keep = 2;
  o.reopen_interval = absl::ZeroDuration();
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 3; ++i) (*log)->Write({{"n", i}, {"pad", std::string(60, 'x')}});
  (*log)->Flush();
  ASSERT_EQ((*log)->written(), 3u);
  // Our file is moved away and a directory stands where a new one would be opened.
  fs::rename(path_, dir_ + "/moved");
  fs::create_directory(path_);
  const std::vector<std::string> kept = {path_ + ".1", path_ + ".2"};
  auto read = [](const std::string& file) {
    std::ifstream in(file);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  std::vector<std::string> before;
  for (const auto& k : kept) before.push_back(read(k));
  for (int i = 3; i < 8; ++i) (*log)->Write({{"n", i}, {"pad", std::string(60, 'x')}});
  (*log)->Flush();
  EXPECT_EQ((*log)->dropped(), 5u) << "nowhere to write them";
  for (size_t k = 0; k < kept.size(); ++k) EXPECT_EQ(read(kept[k]), before[k]) << kept[k] << " was touched";
  // The path is usable again: the next line opens it and is written.
  fs::remove(path_);
  (*log)->Write({{"n", 8}});
  (*log)->Flush();
  EXPECT_EQ((*log)->written(), 4u);
  std::ifstream in(path_);
  std::string line;
  ASSERT_TRUE(std::getline(in, line));
  EXPECT_EQ(nlohmann::json::parse(line)["n"], 8);
}

// A directory at a kept name makes the shift renames fail; ignored, every rotation would
// then replace `.1`, losing lines counted as written with nothing logged. Nothing is
// renamed onto or over it: rotation waits (counted) and no written line is lost.
TEST_F(AuditLogTest, ADirectoryAtAKeptNameStopsRotationInsteadOfOverwriting) {
  AuditOptions o{path_};
  o.max_file_bytes = 200;
  o.keep = 3;
  o.reopen_interval = absl::ZeroDuration();
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 4; ++i) (*log)->Write({{"n", i}, {"pad", std::string(60, 'x')}});
  (*log)->Flush();
  ASSERT_TRUE(fs::is_regular_file(path_ + ".1"));
  fs::remove(path_ + ".1");
  fs::create_directory(path_ + ".1");
  std::ofstream(path_ + ".1/x") << "not ours to move";
  const uint64_t written_before = (*log)->written();
  for (int n = 4; n < 40; ++n) (*log)->Write({{"n", n}, {"pad", std::string(60, 'x')}});
  (*log)->Flush();
  EXPECT_TRUE(fs::is_directory(path_ + ".1")) << "the directory was moved";
  EXPECT_TRUE(fs::exists(path_ + ".1/x"));
  EXPECT_GT((*log)->rotation_failures(), 0u);
  EXPECT_EQ((*log)->written() + (*log)->dropped(), 40u);
  EXPECT_GT((*log)->dropped(), 0u) << "past twice max_file_bytes lines are dropped, counted";
  EXPECT_LE(fs::file_size(path_), 2 * o.max_file_bytes + 200);
  // Every line counted as written since the directory came is in a file: none was lost to
  // a rename over `.1`.
  size_t present = 0;
  for (const std::string& line : AllLines(o.keep)) present += nlohmann::json::parse(line)["n"].get<int>() >= 4;
  EXPECT_EQ(present, (*log)->written() - written_before) << "lines counted as written are gone";
  // The directory goes: rotation resumes.
  fs::remove_all(path_ + ".1");
  const uint64_t rotations = (*log)->rotations();
  for (int n = 40; n < 50; ++n) (*log)->Write({{"n", n}, {"pad", std::string(60, 'x')}});
  (*log)->Flush();
  EXPECT_GT((*log)->rotations(), rotations);
  EXPECT_TRUE(fs::is_regular_file(path_ + ".1"));
  EXPECT_TRUE(fs::is_regular_file(path_ + ".3"));
}

// A FIFO at the path is refused, without hanging the gateway's start in open().
TEST_F(AuditLogTest, AFifoIsRefusedWithoutHanging) {
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
  auto log = AuditLog::Open({path_});
  ASSERT_FALSE(log.ok());
}

}  // namespace
}  // namespace gateway
