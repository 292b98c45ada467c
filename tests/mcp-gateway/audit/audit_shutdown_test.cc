// The audit log's drops as the gateway's log reports them, and its shutdown: every drop is
// reported with its true number (also once drops stop, and at shutdown), and a slow or hung
// disk cannot hold the gateway past --audit_drain_timeout, the lines left counted as dropped.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "audit/audit_log.h"
#include "base/thread.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"

namespace gateway {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The gateway's log lines while it lives (spdlog's default logger), safe to read at any time.
class LogLines : public spdlog::sinks::base_sink<std::mutex> {
 public:
  std::vector<std::string> Lines() {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_;
  }
  // The sum of the "N line(s) dropped since the last report" figures, and the last total.
  std::pair<uint64_t, uint64_t> Reported() {
    static const std::regex kReport(R"((\d+) line\(s\) dropped since the last report .*; (\d+) dropped since the start)");
    uint64_t sum = 0, total = 0;
    for (const std::string& line : Lines()) {
      std::smatch m;
      if (!std::regex_search(line, m, kReport)) continue;
      sum += std::stoull(m[1]);
      total = std::stoull(m[2]);
    }
    return {sum, total};
  }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    lines_.emplace_back(msg.payload.data(), msg.payload.size());
  }
  void flush_() override {}

 private:
  std::vector<std::string> lines_;
};

class AuditShutdownTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/audit-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/audit.jsonl";
    previous_ = spdlog::default_logger();
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", log_));
  }
  void TearDown() override {
    spdlog::set_default_logger(previous_);
    fs::remove_all(dir_);
  }
  size_t LinesInFile() {
    std::ifstream in(path_);
    size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

  std::string dir_, path_;
  std::shared_ptr<LogLines> log_ = std::make_shared<LogLines>();
  std::shared_ptr<spdlog::logger> previous_;
};

// Every drop is reported with its number (32 lines dropped are not "1 dropped"), also when
// the drops stop and at shutdown.
TEST_F(AuditShutdownTest, EveryDropIsReportedWithItsNumber) {
  AuditOptions o{path_};
  o.max_queued_bytes = 10;  // every line is dropped
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  // The writer is idle before the drops come (under TSan it often was, and the drops were
  // never reported: nothing woke it).
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (int i = 0; i < 5; ++i) (*log)->Write({{"n", i}});
  EXPECT_EQ(log_->Reported().first, 1u) << "the first drop is reported at once, the next 4 wait";
  // The drops stopped: within about a second they are reported, with their number.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (log_->Reported().first < 5 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(log_->Reported(), std::make_pair(uint64_t{5}, uint64_t{5}));
  // Three more within the second after that report: reported at shutdown.
  for (int i = 0; i < 3; ++i) (*log)->Write({{"n", i}});
  EXPECT_EQ(log_->Reported().first, 5u);
  log->reset();
  EXPECT_EQ(log_->Reported(), std::make_pair(uint64_t{8}, uint64_t{8}));
  EXPECT_THAT(log_->Lines().back(), HasSubstr("0 line(s) written, 8 dropped"));
}

// With a slow disk, writing the whole 16 MiB queue in the destructor would run past
// systemd's stop timeout: it stops at drain_timeout and counts the rest as dropped.
TEST_F(AuditShutdownTest, ASlowDiskHoldsShutdownOnlyForTheDrainTimeout) {
  AuditOptions o{path_};
  o.drain_timeout = absl::Milliseconds(300);
  o.write = [](int fd, const void* data, size_t size) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return ::write(fd, data, size);
  };
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 200; ++i) (*log)->Write({{"n", i}});  // 4 s of writing
  const auto start = std::chrono::steady_clock::now();
  log->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(1500));
  const std::vector<std::string> lines = log_->Lines();
  const std::regex kClosed(R"(audit log closed: (\d+) line\(s\) written, (\d+) dropped)");
  std::smatch m;
  ASSERT_FALSE(lines.empty());
  ASSERT_TRUE(std::regex_search(lines.back(), m, kClosed)) << lines.back();
  const uint64_t written = std::stoull(m[1]), dropped = std::stoull(m[2]);
  EXPECT_EQ(written + dropped, 200u) << "every line written or counted as dropped";
  EXPECT_GT(dropped, 100u);
  EXPECT_EQ(log_->Reported().first, dropped) << "and the dropped ones reported";
  bool said = false;
  for (const std::string& line : lines) said = said || line.find("not written within --audit_drain_timeout") != std::string::npos;
  EXPECT_TRUE(said);
  // The writer left behind finishes the line it was writing (counted as dropped) and stops,
  // kept until then, and joined.
  EXPECT_TRUE(codemode::JoinKeptThreads(absl::Seconds(5))) << "the writer left behind never ended";
  EXPECT_GE(LinesInFile(), written);
  EXPECT_LE(LinesInFile(), written + 1);
}

// A write that never returns (a hung NFS server): shutdown still ends at the drain timeout,
// and the writer, left behind, touches nothing freed when the write finally returns.
TEST_F(AuditShutdownTest, AHungWriteDoesNotHangShutdown) {
  struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    std::atomic<bool> entered{false};
  };
  auto gate = std::make_shared<Gate>();
  AuditOptions o{path_};
  o.drain_timeout = absl::Milliseconds(200);
  o.write = [gate](int, const void*, size_t) -> ssize_t {
    gate->entered = true;
    std::unique_lock<std::mutex> lock(gate->mu);
    gate->cv.wait(lock, [&] { return gate->open; });
    errno = EIO;
    return -1;
  };
  auto log = AuditLog::Open(o);
  ASSERT_TRUE(log.ok());
  for (int i = 0; i < 10; ++i) (*log)->Write({{"n", i}});
  while (!gate->entered) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  // Without the bound the destructor would wait for ever: a watchdog opens the gate after 5 s.
  std::thread watchdog([gate] {
    std::unique_lock<std::mutex> lock(gate->mu);
    gate->cv.wait_for(lock, std::chrono::seconds(5), [&] { return gate->open; });
    gate->open = true;
    gate->cv.notify_all();
  });
  const auto start = std::chrono::steady_clock::now();
  log->reset();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // Left behind, not detached: kept until main() ends, which joins it.
  EXPECT_FALSE(codemode::JoinKeptThreads(absl::ZeroDuration())) << "the stuck writer is not kept";
  ASSERT_FALSE(log_->Lines().empty());
  EXPECT_THAT(log_->Lines().back(), HasSubstr("0 line(s) written, 10 dropped"));
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    gate->open = true;
    gate->cv.notify_all();
  }
  watchdog.join();
  EXPECT_TRUE(codemode::JoinKeptThreads(absl::Seconds(5))) << "the writer returned and was joined";
  EXPECT_EQ(log_->Lines().back().find("audit log: "), std::string::npos)
      << "the writer left behind logged: " << log_->Lines().back();
}

}  // namespace
}  // namespace gateway
