// RunnerConnection: sandboxd's side of one runner socket (docs/runner-protocol.md).
//
// Connect() waits for the runner's socket and its `ready` frame. Before Start() the
// caller may use PingSync() (the warm pool checks a container is still alive this way).
// Start() hands every later frame, validated, to a Listener on a dedicated reader
// thread; the first broken frame or EOF ends the connection with one OnRunnerClosed.
//
//   ASSIGN_OR_RETURN(auto conn, RunnerConnection::Connect(path, absl::Seconds(10)));
//   conn->Start(listener);
//   conn->Send(MakeExecFrame(1, "print(1)", 1 << 20, 2 << 20, 64));
//   ...
//   conn->Close();   // never from the reader thread (it joins it)
#pragma once

#include <chrono>

#include <sys/types.h>

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "absl/time/time.h"
#include "base/process.h"  // UniqueFd
#include "sandboxd/cpu_bucket.h"
#include "sandboxd/frame.h"

namespace sandboxd {

// How much CPU a RunnerConnection's reader thread may spend on the runner's frames
// (reading, decoding and handling them), in thousandths of a core on average, past a burst
// of `burst` of wall time's worth at that rate. Over it, the reader waits before it reads
// on: a runner that writes frames faster than its share is slowed by its own socket
// filling up, instead of taking sandboxd's CPU from every other session. millis 0: no
// limit.
struct RunnerCpuShare {
  uint32_t millis = 0;
  absl::Duration burst = absl::Seconds(1);
};

class RunnerConnection {
 public:
  static constexpr size_t kMaxOutboxBytes = 64u << 20;
  // The newest runner protocol this sandboxd speaks (docs/runner-protocol.md).
  static constexpr int64_t kRunnerVersion = 2;
  static constexpr absl::Duration kFrameDeadline = absl::Seconds(30);

  class Listener {
   public:
    Listener() = default;
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;
    virtual ~Listener() = default;
    // Called on the reader thread for each valid frame, in order.
    virtual void OnRunnerMessage(RunnerMessage message) = 0;
    // Called once on the reader thread when the connection ends: EOF (the container died),
    // a protocol violation (INVALID_ARGUMENT with the reason) or Close() (CANCELLED).
    virtual void OnRunnerClosed(absl::Status reason) = 0;
    // Called on the reader thread after it waited `waited` for the frames' share of CPU
    // (RunnerCpuShare) before reading on.
    virtual void OnReaderWaited(absl::Duration waited) { (void)waited; }
  };

  // Connects to the runner's socket, retrying until it exists and accepts, and reads its
  // `ready` frame. UNAVAILABLE on timeout.
  // `frame_deadline` bounds the writing of each frame (see Send).
  static absl::StatusOr<std::unique_ptr<RunnerConnection>> Connect(
      const std::string& socket_path, absl::Duration timeout,
      absl::Duration frame_deadline = kFrameDeadline);
  ~RunnerConnection();  // Close()s
  RunnerConnection(const RunnerConnection&) = delete;
  RunnerConnection& operator=(const RunnerConnection&) = delete;

  const ReadyMessage& ready() const { return ready_; }
  // The process that last called listen() on the runner's socket (SO_PEERCRED), as
  // sandboxd's pid namespace sees it: the runner until the sandbox's code runs, which can
  // call listen() on it too and exit. 0 when the kernel did not say.
  pid_t peer_pid() const { return peer_pid_; }

  // Sends ping, waits for the matching pong. Only before Start().
  absl::Status PingSync(absl::Duration timeout);
  // Turns the runner's egress relay on (MakeEgressFrame) and waits for its egress_on.
  // With `ask_listener`, a runner that can hands its loopback listener over with the reply
  // (SCM_RIGHTS): returned, for the proxy to accept on; otherwise (a runner that relays
  // itself) an empty descriptor. UNAVAILABLE with the runner's reason, or when it does not
  // answer in time or says it passed a listener that did not arrive. Only before Start().
  absl::StatusOr<codemode::UniqueFd> TurnEgressOn(absl::Duration timeout,
                                                 bool ask_listener = false);

  // Starts the reader thread. `listener` must outlive Close().
  void Start(Listener* listener, RunnerCpuShare share = {});

  // Sends one frame without ever waiting: what the socket does not take at once (with
  // MSG_DONTWAIT) is queued for the writer thread. Callers may hold locks (a session's)
  // and must never wait on a runner. Safe for concurrent use. The outbox is
  // bounded (kMaxOutboxBytes) and each frame must be written within kFrameDeadline of
  // reaching its head, in total, however slowly the runner reads. Either limit, or a write
  // error, shuts the connection down: OnRunnerClosed then reports why, and later Sends
  // fail with the same reason.
  absl::Status Send(const nlohmann::json& frame);
  // The same for a frame already encoded (EncodeFrame, EncodeFileChunkFrame).
  absl::Status SendEncoded(std::string bytes);
  // Sends a bulk frame (a file chunk) from the caller's buffer: it takes its place in the
  // outbox like any frame, uncopied, and the call returns once the writer has sent it (or
  // the connection failed), so the buffer may then be reused. The sender is paced by the
  // runner: a fast upload can never fill the outbox. Only from a thread that may wait,
  // holding no lock (an upload's rpc thread).
  absl::Status SendBulk(std::string_view bytes);

  // Shuts the socket down and joins the reader and writer threads. Idempotent. Must not be
  // called on the reader thread.
  void Close();


 private:
  // Every deadline and the CPU share's wall time run on the monotonic clock: a step of the
  // wall clock neither fails a frame nor holds the reader.
  using SteadyTime = std::chrono::steady_clock::time_point;
  RunnerConnection(int fd, absl::Duration frame_deadline);
  void WriteLoop();
  // Records the first failure and shuts the socket down, which ends the reader too.
  void Fail(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(out_mu_);
  // Writes all of `bytes` by `deadline`.
  absl::Status WriteAll(std::string_view bytes, SteadyTime deadline);

  // A frame waiting to be written: owned (Send), or borrowed from a SendBulk caller, who
  // waits until the writer is done with it.
  struct Outgoing {
    std::string owned;
    std::string_view borrowed;
    uint64_t bulk = 0;  // SendBulk's number (1, 2, ...); 0 for an owned frame
    std::string_view bytes() const { return bulk ? borrowed : std::string_view(owned); }
  };
  // Blocking read of the next frame with a deadline (used before Start()).
  absl::StatusOr<RunnerMessage> ReadOne(SteadyTime deadline);
  // Sends `frame` (which has an "id") and reads until the `kind` reply with its id.
  absl::StatusOr<AckMessage> RequestSync(const nlohmann::json& frame, AckMessage::Kind kind,
                                         absl::Duration timeout);
  void ReadLoop(RunnerCpuShare share);
  // Charges the reader's CPU time since the last call to `bucket` and waits while it is
  // empty (until Close()).
  void WaitForShare(const RunnerCpuShare& share, CpuBucket& bucket, SteadyTime& last_wall,
                    absl::Duration& last_cpu);

  const int fd_;
  const absl::Duration frame_deadline_;
  // The descriptor that arrived last with the runner's bytes while TurnEgressOn asked for a
  // listener (ReadOne); older ones are closed. At any other time the kernel drops what a
  // runner passes.
  codemode::UniqueFd passed_;
  bool taking_descriptor_ = false;
  FrameDecoder decoder_;  // owned by whoever reads: the caller before Start(), then the reader
  ReadyMessage ready_;
  pid_t peer_pid_ = 0;
  Listener* listener_ = nullptr;
  std::thread reader_;
  std::atomic<bool> closed_{false};

  codemode::Mutex out_mu_;
  std::deque<Outgoing> outbox_ ABSL_GUARDED_BY(out_mu_);
  size_t outbox_bytes_ ABSL_GUARDED_BY(out_mu_) = 0;  // owned frames only
  uint64_t next_bulk_ ABSL_GUARDED_BY(out_mu_) = 1;
  uint64_t bulk_written_ ABSL_GUARDED_BY(out_mu_) = 0;  // bulk frames are written in order
  uint64_t bulk_in_writer_ ABSL_GUARDED_BY(out_mu_) = 0;  // the writer holds its buffer
  bool stop_writer_ ABSL_GUARDED_BY(out_mu_) = false;
  bool writing_ ABSL_GUARDED_BY(out_mu_) = false;  // the writer is sending a frame
  std::string write_error_ ABSL_GUARDED_BY(out_mu_);  // empty while healthy
  std::thread writer_;
};

}  // namespace sandboxd
