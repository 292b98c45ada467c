// The lines spdlog's default logger writes while a LogCapture lives: for tests of what a
// component logs. Create it before what logs and let it go after.
//
// Every capture shares one sink that test_main.cc adds to the default logger before any
// test runs, and attaches to it and detaches from it under that sink's lock. spdlog's logger
// walks its sink list without a lock, so adding or removing a sink (or swapping the default
// logger) while another thread logs is a race: a daemon's thread that logs just as a test's
// capture goes would call into a destroyed sink.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spdlog/spdlog.h"

namespace testlog {

class LogCapture {
 public:
  // `pattern`: spdlog's pattern for the captured lines (the default logger's by default).
  // `level`: the default logger's level while the capture lives (unchanged when unset).
  explicit LogCapture(const std::string& pattern = "%+",
                      std::optional<spdlog::level::level_enum> level = std::nullopt);
  ~LogCapture();
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  // Everything captured so far.
  std::string text() const;
  // How many times `text` occurs in what was logged.
  int Count(const std::string& text) const;
  // The captured lines, empty ones left out.
  std::vector<std::string> Lines() const;
  size_t bytes() const { return text().size(); }

  // Adds the shared sink to the default logger. test_main.cc calls it before any test runs.
  static void Install();

  struct Buffer;  // what one capture holds (log_capture.cc)

 private:
  std::unique_ptr<Buffer> buffer_;
  std::optional<spdlog::level::level_enum> previous_level_;
};

}  // namespace testlog
