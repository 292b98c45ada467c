// tests/common/log_capture.h: the capture every test of what a component logs uses.
#include "log_capture.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/sink.h"
#include "spdlog/spdlog.h"

namespace {

// A daemon's thread may still be logging when a test's capture goes (a session logs an
// execution's line after its caller has the result): captures come and go while another
// thread logs, and each holds exactly its own lines.
TEST(LogCaptureTest, CapturesComeAndGoWhileAnotherThreadLogs) {
  // The other thread's lines pass through every sink; the terminal's drops them.
  const std::shared_ptr<spdlog::sinks::sink> terminal = spdlog::default_logger()->sinks().front();
  const spdlog::level::level_enum terminal_level = terminal->level();
  terminal->set_level(spdlog::level::warn);
  std::atomic<bool> stop{false};
  std::thread other([&] {
    while (!stop) spdlog::info("from another thread");
  });
  for (int i = 0; i < 300; ++i) {
    testlog::LogCapture capture;
    spdlog::info("mine {}", i);
    EXPECT_EQ(capture.Count(absl::StrCat("mine ", i, "\n")), 1);
    EXPECT_EQ(capture.Count(absl::StrCat("mine ", i - 1, "\n")), 0);
  }
  stop = true;
  other.join();
  terminal->set_level(terminal_level);
}

TEST(LogCaptureTest, APatternAndALevelOfItsOwn) {
  {
    testlog::LogCapture capture("%l %v", spdlog::level::debug);
    spdlog::debug("a debug line");
    EXPECT_EQ(capture.Lines(), std::vector<std::string>{"debug a debug line"});
  }
  EXPECT_EQ(spdlog::get_level(), spdlog::level::info) << "the level was not restored";
}

}  // namespace
