// StdioServer: the MCP stdio transport. One JSON-RPC message per line on in_fd, one per
// line on out_fd, and nothing else ever written to out_fd (logs go to stderr via spdlog).
//
// A single reader loop (Run) splits input into lines and feeds one McpSession; every
// message for the client, whichever thread produces it (responses, progress from tool
// workers, list_changed), goes through one FdSink that writes whole lines under a mutex.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "jsonrpc/jsonrpc.h"
#include "metrics/stage_times.h"
#include "server/stdio_server.h"

#include "base/thread.h"
#include "spdlog/spdlog.h"
#include "base/mutex.h"

namespace gateway {

using json = nlohmann::json;

namespace {

// Longest line we buffer. Anything longer is answered with a parse error and skipped up to
// its newline, so a runaway client cannot make us allocate without bound.
constexpr size_t kMaxLineBytes = 16u << 20;
constexpr size_t kReadChunk = 64u << 10;

// Writes all of `data`, riding out EINTR and (for a non-blocking fd) EAGAIN.
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 1000);
    } else {
      return false;
    }
  }
  return true;
}

// The one sink of a stdio session. Close() is a no-op: every request shares this sink, so
// "this request is answered" must not end the stream.
class FdSink : public ReplySink {
 public:
  explicit FdSink(int fd) : fd_(fd) {}

  void Send(const json& message) override {
    std::string line = wire::Dump(message);
    line.push_back('\n');
    StageTimes::Mark(Stage::kEncoded);
    // A response (not a notification or a request of ours) ends its request's stages;
    // they are taken before the write, which may let the client send the next request.
    const bool timed = StageTimes::enabled() && message.is_object() && message.contains("id") &&
                       (message.contains("result") || message.contains("error"));
    const StageMarks marks = timed ? StageTimes::Take() : StageMarks();
    {
      codemode::MutexLock lock(&mu_);
      if (broken_) return;
      if (!WriteAll(fd_, line.data(), line.size())) {
        broken_ = true;  // the client is gone; keep quiet from now on
        spdlog::warn("stdio: cannot write to the client: {}", std::strerror(errno));
      }
    }
    if (timed) StageTimes::Emit(marks);
  }

 private:
  const int fd_;
  codemode::Mutex mu_;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
};

bool IsBlank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace

struct StdioServer::Impl {
  int in_fd;
  std::shared_ptr<FdSink> sink;
  std::shared_ptr<McpSession> session;
  size_t max_json_values = kMaxMessageJsonValues;
  int wake[2] = {-1, -1};  // self-pipe: Stop() makes the reader's poll() return
  std::atomic<bool> stopping{false};
  std::thread reader;      // Start() only

  // Handles one complete line (without its '\n' or a trailing '\r').
  void HandleLine(const std::string& line) {
    if (IsBlank(line)) return;
    StageTimes::Mark(Stage::kRead);
    json error;
    auto message = ParseMessage(line, &error, max_json_values);
    if (!message.ok()) {
      sink->Send(error);
      return;
    }
    StageTimes::Mark(Stage::kParsed);
    session->Handle(*message, sink);
  }

  void ReportOversized() {
    sink->Send(MakeError(nullptr, kParseError,
                         "message too large: lines are limited to " +
                             std::to_string(kMaxLineBytes) + " bytes"));
  }
};

StdioServer::StdioServer(int in_fd, int out_fd, ToolProvider* provider, ServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->in_fd = in_fd;
  impl_->sink = std::make_shared<FdSink>(out_fd);
  impl_->max_json_values = options.max_message_json_values;
  impl_->session = std::make_shared<McpSession>("stdio-" + std::to_string(::getpid()), provider,
                                                std::move(options), "stdio");
  impl_->session->SetNotificationSink(impl_->sink);
  if (::pipe2(impl_->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    spdlog::error("stdio: pipe2 failed: {}", std::strerror(errno));
    impl_->wake[0] = impl_->wake[1] = -1;
  }
}

StdioServer::~StdioServer() {
  Stop();
  impl_->session->Close();  // no-op when Run() already did it
  for (int fd : impl_->wake) {
    if (fd >= 0) ::close(fd);
  }
}

void StdioServer::Run() {
  LineFramer framer(kMaxLineBytes);
  auto on_line = [this](const std::string& line) { impl_->HandleLine(line); };
  auto on_oversized = [this] { impl_->ReportOversized(); };
  std::string chunk(kReadChunk, '\0');
  while (!impl_->stopping) {
    pollfd fds[2] = {{impl_->in_fd, POLLIN, 0}, {impl_->wake[0], POLLIN, 0}};
    int ready = ::poll(fds, impl_->wake[0] >= 0 ? 2 : 1, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      spdlog::error("stdio: poll failed: {}", std::strerror(errno));
      break;
    }
    if (fds[1].revents & POLLIN) break;  // Stop()
    if (fds[0].revents == 0) continue;
    ssize_t n = ::read(impl_->in_fd, chunk.data(), chunk.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n < 0) {
      spdlog::error("stdio: read failed: {}", std::strerror(errno));
      break;
    }
    if (n == 0) {  // EOF: a last line without its newline still counts
      framer.Finish(on_line);
      break;
    }
    framer.Feed(chunk.data(), static_cast<size_t>(n), on_line, on_oversized);
  }
  // Cancels in-flight calls, waits for them, tells the provider.
  impl_->session->Close();
}

absl::Status StdioServer::Start(std::function<void()> on_end) {
  impl_->reader = codemode::StartThread("stdio server", [this, on_end = std::move(on_end)] {
    Run();
    if (!impl_->stopping && on_end) on_end();
  });
  return absl::OkStatus();
}

void StdioServer::Stop() {
  impl_->stopping = true;
  if (impl_->wake[1] >= 0) {
    char byte = 1;
    [[maybe_unused]] ssize_t n = ::write(impl_->wake[1], &byte, 1);
  }
  if (impl_->reader.joinable() && impl_->reader.get_id() != std::this_thread::get_id()) {
    impl_->reader.join();
  }
}

void StdioServer::NotifyToolsChanged() { impl_->session->NotifyToolsChanged(); }

}  // namespace gateway
