#include "log_capture.h"

#include <algorithm>
#include <mutex>

#include "absl/strings/str_split.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/base_sink.h"

namespace testlog {

struct LogCapture::Buffer {
  explicit Buffer(const std::string& pattern)
      : formatter(std::make_unique<spdlog::pattern_formatter>(pattern)) {}
  std::unique_ptr<spdlog::formatter> formatter;
  std::string text;  // guarded by the sink's lock
};

namespace {

class CaptureSink final : public spdlog::sinks::base_sink<std::mutex> {
 public:
  void Attach(LogCapture::Buffer* b) {
    std::lock_guard<std::mutex> lock(mutex_);
    buffers_.push_back(b);
  }
  void Detach(LogCapture::Buffer* b) {
    std::lock_guard<std::mutex> lock(mutex_);
    buffers_.erase(std::remove(buffers_.begin(), buffers_.end(), b), buffers_.end());
  }
  std::string Read(const LogCapture::Buffer& b) {
    std::lock_guard<std::mutex> lock(mutex_);
    return b.text;
  }

 protected:
  // base_sink::log holds mutex_ around this call.
  void sink_it_(const spdlog::details::log_msg& msg) override {
    for (LogCapture::Buffer* b : buffers_) {
      spdlog::memory_buf_t line;
      b->formatter->format(msg, line);
      b->text.append(line.data(), line.size());
    }
  }
  void flush_() override {}

 private:
  std::vector<LogCapture::Buffer*> buffers_;
};

CaptureSink& Sink() {
  static CaptureSink* sink = [] {
    auto s = std::make_shared<CaptureSink>();
    s->set_level(spdlog::level::trace);  // the logger's level decides
    spdlog::default_logger()->sinks().push_back(s);
    return s.get();  // the logger keeps it for the program's life
  }();
  return *sink;
}

}  // namespace

void LogCapture::Install() { Sink(); }

LogCapture::LogCapture(const std::string& pattern, std::optional<spdlog::level::level_enum> level)
    : buffer_(std::make_unique<Buffer>(pattern)) {
  if (level) {
    previous_level_ = spdlog::get_level();
    spdlog::set_level(*level);
  }
  Sink().Attach(buffer_.get());
}

LogCapture::~LogCapture() {
  Sink().Detach(buffer_.get());
  if (previous_level_) spdlog::set_level(*previous_level_);
}

std::string LogCapture::text() const { return Sink().Read(*buffer_); }

int LogCapture::Count(const std::string& text) const {
  const std::string all = this->text();
  int n = 0;
  for (size_t at = all.find(text); at != std::string::npos; at = all.find(text, at + 1)) ++n;
  return n;
}

std::vector<std::string> LogCapture::Lines() const {
  return absl::StrSplit(text(), '\n', absl::SkipEmpty());
}

}  // namespace testlog
