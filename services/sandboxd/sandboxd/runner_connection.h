// RunnerConnection: sandboxd's side of one runner socket (docs/runner-protocol.md).
//
// Connect() waits for the runner's socket and its `ready` frame. Before Start() the
// caller may use PingSync() (the warm pool checks a container is still alive this way).
// Start() hands every later frame, validated, to a Listener on a dedicated reader
// thread; the first broken frame or EOF ends the connection with one OnRunnerClosed.
//
//   ASSIGN_OR_RETURN(auto conn, RunnerConnection::Connect(path, absl::Seconds(10)));
//   conn->Start(listener);
//   conn->Send(MakeExecFrame(1, "print(1)", 1 << 20));
//   ...
//   conn->Close();   // never from the reader thread (it joins it)
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sandboxd/frame.h"

namespace sandboxd {

class RunnerConnection {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // Called on the reader thread for each valid frame, in order.
    virtual void OnRunnerMessage(RunnerMessage message) = 0;
    // Called once on the reader thread when the connection ends: EOF (the container died),
    // a protocol violation (INVALID_ARGUMENT with the reason) or Close() (CANCELLED).
    virtual void OnRunnerClosed(absl::Status reason) = 0;
  };

  // Connects to the runner's socket, retrying until it exists and accepts, and reads its
  // `ready` frame. UNAVAILABLE on timeout.
  static absl::StatusOr<std::unique_ptr<RunnerConnection>> Connect(const std::string& socket_path,
                                                                   absl::Duration timeout);
  ~RunnerConnection();  // Close()s
  RunnerConnection(const RunnerConnection&) = delete;
  RunnerConnection& operator=(const RunnerConnection&) = delete;

  const ReadyMessage& ready() const { return ready_; }

  // Sends ping, waits for the matching pong. Only before Start().
  absl::Status PingSync(absl::Duration timeout);

  // Starts the reader thread. `listener` must outlive Close().
  void Start(Listener* listener);

  // Sends one frame. Safe for concurrent use. A runner that stops reading for 5 s makes
  // this fail (and the connection is shut down) rather than block forever.
  absl::Status Send(const nlohmann::json& frame);

  // Shuts the socket down and joins the reader thread. Idempotent. Must not be called on
  // the reader thread.
  void Close();

 private:
  explicit RunnerConnection(int fd) : fd_(fd), decoder_(kMaxRunnerFrameBytes) {}
  // Blocking read of the next frame with a deadline (used before Start()).
  absl::StatusOr<RunnerMessage> ReadOne(absl::Time deadline);
  void ReadLoop();

  const int fd_;
  FrameDecoder decoder_;  // owned by whoever reads: the caller before Start(), then the reader
  ReadyMessage ready_;
  Listener* listener_ = nullptr;
  std::thread reader_;
  absl::Mutex send_mu_;
  std::atomic<bool> closed_{false};
};

}  // namespace sandboxd
