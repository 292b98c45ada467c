// sandboxd_bench's client side of sandboxd's gRPC api: one Execute stream as a
// tool-routing client drives it, the unary rpcs with their deadlines, waiting for a full
// warm pool, and the "bench" tool catalog with the two ways its calls are answered (at
// once, or after a delay from a thread of its own).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "grpcpp/grpcpp.h"
#include "sandbox/v1/sandbox.grpc.pb.h"
#include "stats.h"

namespace sandboxd_bench {

namespace sb = ::sandbox::v1;
using Stream = grpc::ClientReaderWriter<sb::ExecuteRequest, sb::ExecuteResponse>;

struct ExecOutcome {
  grpc::Status status;
  bool got_finished = false;
  sb::Finished finished;
  double wall_ms = 0;
  int tool_calls = 0;
  bool ok() const {
    return status.ok() && got_finished && finished.status() == sb::Finished::OK;
  }
  std::string Describe() const;
};

using ToolCallFn = std::function<void(const sb::ToolCall&, Stream*)>;

// One Execute stream, as a tool-routing client uses it: start, read until the server
// ends the stream, answer tool calls through `on_call`, then close our side and Finish.
// wall_ms covers everything from opening the stream to Finish().
ExecOutcome RunExecute(sb::SandboxService::Stub& stub, const sb::StartExecution& start,
                       const ToolCallFn& on_call = nullptr, int deadline_ms = 60000,
                       const std::function<void()>& before_close = nullptr);

sb::StartExecution MakeStart(const std::string& session_id, const std::string& code);

grpc::Status RunUnary(sb::SandboxService::Stub& stub, const std::string& session_id,
                      const std::string& code, sb::Finished* f, int deadline_ms = 60000);

grpc::Status GetInfo(sb::SandboxService::Stub& stub, sb::Info* info);

// `ms`, when given, gets the time the rpc took.
grpc::Status Create(sb::SandboxService::Stub& stub, const sb::CreateSessionRequest& req,
                    sb::Session* s, double* ms = nullptr);

grpc::Status Delete(sb::SandboxService::Stub& stub, const std::string& id);

std::string StatusText(const grpc::Status& s);

// Waits until the warm pool is full; false after `timeout_s`.
bool WaitPoolFull(sb::SandboxService::Stub& stub, int timeout_s, std::string* why);

// One server, "bench", with one tool, "echo".
sb::Catalog BenchCatalog();

// Answers a tool call at once, from the thread reading the stream.
void AnswerNow(const sb::ToolCall& call, Stream* stream);

// Answers tool calls `delay` after they arrived, from its own thread, so answers of
// calls made under asyncio.gather overlap.
class DelayedAnswerer {
 public:
  explicit DelayedAnswerer(std::chrono::milliseconds delay)
      : delay_(delay), thread_([this] { Loop(); }) {}
  ~DelayedAnswerer() { Stop(); }
  void Add(const sb::ToolCall& call, Stream* stream);
  // Waits for queued answers to go out, then ends the thread.
  void Stop();

 private:
  struct Item {
    SteadyClock::time_point due;
    std::string call_id;
    Stream* stream;
  };
  void Loop();
  const std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace sandboxd_bench
