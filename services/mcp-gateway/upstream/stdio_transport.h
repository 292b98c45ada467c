// StdioTransport: an MCP server as a child process speaking newline-delimited JSON on its
// stdin/stdout. The child gets an argv vector (no shell), a minimal environment plus the
// config's env, its own process group, and no file descriptor of ours beyond the three
// pipes. Its stderr is logged line by line under the server's name.
//
// Shutdown (spec: "Lifecycle / Shutdown / stdio"): close its stdin, wait stop_grace,
// SIGTERM, wait stop_grace, SIGKILL; the child is always reaped.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <thread>

#include "upstream/config.h"
#include "upstream/options.h"
#include "upstream/transport.h"
#include "base/log_text.h"
#include "base/mutex.h"

namespace gateway {

class StdioTransport : public ClientTransport {
 public:
  // A stdout line over `max_message_bytes` is skipped as it arrives, never buffered. At most
  // `log_lines_per_second` stderr lines and unusable stdout lines are logged, in bursts of
  // ten times as many (a traceback); the others are counted and reported.
  // Each stdout line is charged to `receive_budget` (when given; UpstreamOptions) while it
  // is read and dispatched, kReceiveCopies times its bytes: a line it refuses is skipped,
  // and the request it answered fails saying so. An answer line of a request sent with
  // SendRequest is charged to that request's `receiving` budget instead, from the moment
  // its id is read. A line that receives nothing for `message_idle_timeout` while
  // incomplete is abandoned (stdout_lines.h).
  StdioTransport(UpstreamConfig config, absl::Duration stop_grace,
                 size_t max_message_bytes = kDefaultMaxUpstreamMessageBytes,
                 double log_lines_per_second = 10,
                 std::shared_ptr<codemode::ByteBudget> receive_budget = nullptr,
                 absl::Duration message_idle_timeout = kDefaultUpstreamMessageIdleTimeout,
                 absl::Duration write_timeout = kDefaultUpstreamWriteTimeout);
  ~StdioTransport() override;  // Close()s

  absl::Status Start(TransportCallbacks callbacks, absl::Duration timeout) override;
  absl::Status Send(const nlohmann::json& message) override;
  // Send(), remembering that the answer to this request is charged to `receiving` (one
  // entry per request in flight: forgotten when its answer line ends or on Abandon), and
  // waiting to write it no longer than `limits` allow.
  absl::Status SendRequest(const nlohmann::json& request,
                           std::shared_ptr<codemode::ByteBudget> receiving,
                           const SendLimits& limits) override;
  void Abandon(const nlohmann::json& id) override;
  void Close() override;
  // Requests in flight remembered (for tests).
  size_t callers_remembered() const;

  pid_t pid() const { return pid_; }

 private:
  void ReadStdout();
  void ReadStderr();
  // Send and SendRequest: remembers a request with the budget its answer is charged to,
  // writes it, and forgets it again if that fails.
  absl::Status SendMessage(const nlohmann::json& message,
                           std::shared_ptr<codemode::ByteBudget> receiving,
                           const SendLimits& call);
  // Writes one line to stdin in turn with other writers, waiting for the turn and the
  // write together until `limits.deadline` or `limits.given_up`.
  absl::Status WriteLine(const std::string& line, const SendLimits& limits);
  // The budget of the caller of request `id`, if SendRequest named one and it still lives.
  std::shared_ptr<codemode::ByteBudget> CallerBudget(const nlohmann::json& id);
  // Requests in flight (Send), each with the budget its answer is charged to (SendRequest).
  void RememberRequest(const nlohmann::json& id, std::shared_ptr<codemode::ByteBudget> receiving);
  bool IsPending(const nlohmann::json& id);
  void ForgetCaller(const nlohmann::json& id);
  // After stdout's end: waits briefly for the exit status, then on_closed with why.
  void ReportClosed();
  // Reaps the child if it has exited (or waits for it, with `block`). True once reaped.
  bool Reap(bool block);
  // Polls Reap() until the child exited or `timeout` passed (or Close() began, with
  // `stop_on_close`).
  bool WaitExit(absl::Duration timeout, bool stop_on_close);
  // Whether one more stderr or unusable stdout line may be logged (rate-limited).
  bool MayLog();
  // No WriteLine is writing stdin_fd_ (a condition to wait for).
  bool WriteIdle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);
  // "exited with code N: <last stderr line>".
  std::string ExitDescription();
  void SignalGroup(int sig);

  const UpstreamConfig config_;
  const absl::Duration stop_grace_;
  const size_t max_message_bytes_;
  codemode::LogRateLimit log_limit_;
  const std::shared_ptr<codemode::ByteBudget> receive_budget_;  // may be null
  const absl::Duration message_idle_timeout_;
  const absl::Duration write_timeout_;
  mutable codemode::Mutex callers_mu_;
  // wire::Dump(id) of each request in flight -> the budget its answer is charged to while
  // it is read (none: the upstream's part of the shared one).
  std::map<std::string, std::weak_ptr<codemode::ByteBudget>> callers_
      ABSL_GUARDED_BY(callers_mu_);
  // eventfd: Abandon() tells the stdout reader that a caller gave up, so that an answer
  // line charged to it stops being (StdoutLines::CheckCallers). Closed by Close().
  int abandoned_fd_ ABSL_GUARDED_BY(callers_mu_) = -1;
  TransportCallbacks callbacks_;

  pid_t pid_ = -1;
  codemode::Mutex write_mu_;
  int stdin_fd_ ABSL_GUARDED_BY(write_mu_) = -1;  // closed by Close()
  bool writing_ ABSL_GUARDED_BY(write_mu_) = false;  // a WriteLine is writing stdin_fd_
  // The last write stopped part way through its line (timed out): the next one ends it.
  bool torn_line_ ABSL_GUARDED_BY(write_mu_) = false;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  int wake_fd_ = -1;    // eventfd: tells the reader threads that Close() has begun

  codemode::Mutex proc_mu_;  // also serialises waitpid
  bool reaped_ ABSL_GUARDED_BY(proc_mu_) = false;
  int exit_code_ ABSL_GUARDED_BY(proc_mu_) = -1;

  codemode::Mutex stderr_mu_;
  bool stderr_done_ ABSL_GUARDED_BY(stderr_mu_) = false;
  std::string last_stderr_line_ ABSL_GUARDED_BY(stderr_mu_);

  codemode::Mutex start_mu_;  // Close() waits for a Start() in progress (spawn) to finish
  std::atomic<bool> closing_{false};
  std::once_flag close_once_;
  std::thread stdout_thread_;
  std::thread stderr_thread_;
};

}  // namespace gateway
