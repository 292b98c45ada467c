// Session: one sandbox container's runner connection, its Python namespace and its queue
// of work (executions and resets), run one at a time in arrival order.
//
// A Session turns runner frames into ExecutionObserver callbacks, enforces the per-
// execution timeout (interrupt first, kill the container after a grace period), caps
// output, and checks every tool call against the session's catalog before it reaches
// the caller. When the container dies or breaks protocol the session becomes LOST: all
// its work finishes with SESSION_LOST and later calls get FAILED_PRECONDITION.
//
//   auto exec = session->Enqueue({.code = "x = 1"}, observer);   // StatusOr
//   exec->SubmitToolResult(result);   // answers an OnToolCall
//   exec->Cancel();
//
// Thread-safety: all public methods are safe for concurrent use. Observer callbacks are
// made without the session lock held, from the runner reader thread, the timer thread or
// the calling thread; they must not block.
#pragma once

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "sandbox/v1/sandbox.pb.h"
#include "sandboxd/async.h"
#include "catalog/catalog.h"
#include "sandboxd/container_runtime.h"
#include "sandboxd/egress_service.h"
#include "sandboxd/images.h"
#include "sandboxd/limits.h"
#include "sandboxd/metrics.h"
#include "sandboxd/runner_connection.h"
#include "sandboxd/sandbox_factory.h"
#include "sandboxd/session_records.h"
#include "sandboxd/workspace_files.h"

namespace sandboxd {

// The shared catalog (services/catalog) under sandboxd's names.
using codemode::Catalog;
using codemode::CatalogServer;
using codemode::CatalogTool;
using codemode::SanitizeIdentifier;

// Receives the events of one execution. OnFinished is called exactly once, last.
class ExecutionObserver {
 public:
  ExecutionObserver() = default;
  ExecutionObserver(const ExecutionObserver&) = delete;
  ExecutionObserver& operator=(const ExecutionObserver&) = delete;
  virtual ~ExecutionObserver() = default;
  virtual void OnStarted(uint64_t execution_id) = 0;
  virtual void OnOutput(OutputStream stream, const std::string& text) = 0;
  // A rich output, in order with OnOutput; Finished.displays repeats them all.
  virtual void OnDisplay(const sandbox::v1::Display&) {}
  // Only when the execution has a tool router; answer with Execution::SubmitToolResult.
  virtual void OnToolCall(const sandbox::v1::ToolCall& call) = 0;
  virtual void OnFinished(const sandbox::v1::Finished& finished) = 0;
};

// One execution's observer calls, delivered in the order the session posted them (under
// its lock) and one at a time: without it, OnStarted queued by the thread that started
// the execution could reach the client after output the reader thread queued later.
// Post under the session's lock (this lock is a leaf), Deliver after releasing it; a
// Deliver that finds another one running returns, and that one delivers the event.
class ObserverQueue {
 public:
  explicit ObserverQueue(std::shared_ptr<ExecutionObserver> observer)
      : observer_(std::move(observer)) {}
  void Post(std::function<void(ExecutionObserver&)> event);
  void Deliver();

 private:
  std::shared_ptr<ExecutionObserver> observer_;
  codemode::Mutex mu_;
  std::deque<std::function<void(ExecutionObserver&)>> events_ ABSL_GUARDED_BY(mu_);
  bool delivering_ ABSL_GUARDED_BY(mu_) = false;
};

struct ExecutionRequest {
  std::string code;
  uint32_t timeout_ms = 0;          // 0: the session's default
  std::optional<Catalog> catalog;   // replaces the session's catalog first
  bool tool_router = true;          // false: tool calls fail inside Python at once
  // Tool calls the caller answers at once; the runner holds the rest back. 0: the
  // daemon's SessionEnv::max_inflight_tool_calls, which also caps it.
  uint32_t max_tool_calls_in_flight = 0;
  // The W3C trace the caller's execution belongs to (its `traceparent` gRPC metadata),
  // named in this execution's log lines; empty: none.
  std::string trace_id;
  // The language of `code` as the caller sees it (StartExecution.runtime): when set, it
  // must be the session's (SessionManager::Execute refuses it otherwise); empty: unchecked.
  std::string runtime;
};

class Session;

// Whoever counts sessions against the daemon's limits. The one thing a session tells the
// layer above it: that it became lost, so its slot is free. Called without locks held, on
// whichever thread noticed, before the session's work hears SESSION_LOST (a client that
// hears it can create a new session at once); not when the daemon detaches it. The session
// is alive during the call; the keeper must not drop the last reference on this thread (it
// may be the session's reader).
class SlotKeeper {
 public:
  SlotKeeper(const SlotKeeper&) = delete;
  SlotKeeper& operator=(const SlotKeeper&) = delete;
  virtual void OnSessionLost(const Session& session) = 0;

 protected:
  SlotKeeper() = default;
  ~SlotKeeper() = default;
};

// Daemon-wide settings and services a session uses. Everything outlives the session.
struct SessionEnv {
  TimerQueue* timers = nullptr;
  WorkerPool* workers = nullptr;
  // Owns the session's container: a session asks it to kill the container, never removes
  // it itself.
  SandboxFactory* containers = nullptr;
  // Where the session keeps its record (for re-attachment) current when its catalog
  // changes. May be null (then nothing is recorded).
  SessionRecords* records = nullptr;
  Clock* clock = nullptr;
  uint32_t max_timeout_ms = 600000;
  uint64_t max_output_bytes = 1u << 20;
  // Display data (the sum of MIME type + data sizes) one execution may produce.
  uint64_t max_display_bytes = 2u << 20;
  uint32_t max_queue = 16;
  absl::Duration kill_grace = absl::Seconds(2);
  // What the reader of each session's runner may spend on its frames (--runner_cpu_millis,
  // --runner_cpu_burst).
  RunnerCpuShare runner_share;
  uint32_t max_inflight_tool_calls = 1024;
  // Largest file moved in or out of a session's workspace (WorkspaceFiles).
  uint64_t max_file_bytes = 64u << 20;
  // Whether the runtime enforces limits with cgroups (set once the runtime is probed);
  // only changes how a SIGKILL is explained.
  std::atomic<bool> cgroup_limits{true};
  // Told when a session becomes lost (may be null).
  SlotKeeper* slots = nullptr;
  // Where executions, tool calls and what the caps dropped are counted; never null (the
  // manager sets it).
  SandboxdMetrics* metrics = nullptr;
  // Daemon-wide totals (GetInfo).
  std::atomic<uint64_t> executions_total{0};
  std::atomic<uint64_t> tool_calls_total{0};
};

class Session;

// Handle to a queued or running execution. Outliving the session is harmless.
class Execution {
 public:
  Execution(std::weak_ptr<Session> session, uint64_t id) : session_(std::move(session)), id_(id) {}
  uint64_t id() const { return id_; }
  // NOT_FOUND when no such call is pending (already answered, or never asked);
  // INVALID_ARGUMENT for malformed result_json (the tool call then fails in Python).
  absl::Status SubmitToolResult(const sandbox::v1::ToolResult& result);
  // Interrupts (or dequeues) the execution; it finishes with CANCELLED.
  void Cancel();
  // The caller can no longer answer tool calls: pending and later calls fail in Python.
  void CloseToolRouter();

 private:
  std::weak_ptr<Session> session_;
  uint64_t id_;
};

class Session : public RunnerConnection::Listener, public std::enable_shared_from_this<Session> {
 public:
  struct Metadata {
    std::string id;
    std::string label;
    std::string owner;
    std::string container_name;
    std::string container_id;
    ResolvedLimits limits;
    Isolation isolation = Isolation::kContainer;
    std::string image = kDefaultImageName;  // its name among the daemon's images
    Language language = Language::kPython;
    int64_t created_at_ms = 0;
    // The container's own user id, held while the session lives (rlimit mode; see
    // uid_pool.h). Null when all containers share uid 65534.
    std::shared_ptr<const void> uid_lease;
    // Why a session recorded with an egress policy has none now (a restart).
    std::string egress_lost_reason;
  };

  // Takes a connected (not yet started) runner connection. `push_catalog` sends the
  // catalog to the runner (false when re-attaching: the runner still has it).
  static std::shared_ptr<Session> Create(SessionEnv* env, Metadata metadata, Catalog catalog,
                                         std::unique_ptr<RunnerConnection> conn,
                                         bool push_catalog);
  ~Session() override;

  // Queues an execution. INVALID_ARGUMENT (bad timeout), RESOURCE_EXHAUSTED (queue full),
  // FAILED_PRECONDITION (lost).
  absl::StatusOr<std::shared_ptr<Execution>> Enqueue(ExecutionRequest request,
                                                     std::shared_ptr<ExecutionObserver> observer);

  // Queues a namespace reset behind earlier work and waits for it.
  absl::Status Reset(absl::Duration timeout);

  // Stops the session without killing its container (daemon shutdown: the container
  // stays for the next daemon to re-attach). Queued and running work finishes with
  // SESSION_LOST "session detached: the daemon is shutting down; ..."; the log says so
  // only when there was work (the session is not lost).
  void Detach();

  // Marks the session lost for `reason`, finishes its work with `status` and schedules
  // the container's removal. Idempotent.
  void Terminate(const std::string& reason,
                 sandbox::v1::Finished::Status status = sandbox::v1::Finished::SESSION_LOST);
  // Makes the session lost for `reason` as Terminate does, but only when it is idle (see
  // idle()) and unused since `unused_since_ms` (its last_used_ms() then), both checked
  // under the lock that queues work, so nothing starts in between. False, and nothing
  // done, when it is busy, was used since, or is lost already.
  bool TerminateIfIdle(const std::string& reason, int64_t unused_since_ms);

  sandbox::v1::Session ToProto() const;
  // What a restarted daemon re-attaches from.
  SessionRecord Record() const;
  const Metadata& metadata() const { return metadata_; }
  Catalog catalog() const;
  bool lost() const;
  std::string lost_reason() const;
  // True when nothing runs or waits, and no file is moving.
  bool idle() const;
  int64_t last_used_ms() const;
  // Counts as use for the idle reaper (a file transfer).
  void Touch();

  // The session's way out (docs/egress.md), attached once at its start; it ends when the
  // session is lost or detached. The policy in force shows in ToProto and the record, and
  // so do the bytes its quota has counted (the record's).
  void AttachEgress(std::unique_ptr<SessionEgress> egress);
  // Rewrites the record when the egress quota's count has moved since it was last written
  // and it has moved kEgressRecordBytes, or kEgressRecordInterval has passed since (the
  // manager's reaper calls it each second; Detach writes the last count). So a crash loses
  // at most that much of a session's count, and a busy session costs at most one write
  // per call, not one per connection.
  void RecordEgressUse();
  static constexpr uint64_t kEgressRecordBytes = uint64_t{16} << 20;
  static constexpr absl::Duration kEgressRecordInterval = absl::Seconds(5);
  // Narrows the policy in force (SessionEgress::Narrow) and records it. A session without
  // egress takes only a policy that allows nothing (`empty`).
  absl::Status NarrowEgress(absl::string_view policy, bool empty);

  // The session's file transfers (UploadFile, DownloadFile, ListFiles); they fail with
  // FAILED_PRECONDITION once the session is lost.
  WorkspaceFiles& files() { return files_; }

  // RunnerConnection::Listener
  void OnRunnerMessage(RunnerMessage message) override;
  void OnRunnerClosed(absl::Status reason) override;
  void OnReaderWaited(absl::Duration waited) override;

 private:
  friend class Execution;
  struct PendingCall {
    std::string runner_call_id;
  };
  struct ExecState {
    uint64_t id = 0;
    ExecutionRequest request;
    std::shared_ptr<ObserverQueue> observer;
    absl::Time queued;   // Enqueue
    absl::Time started;
    uint32_t timeout_ms = 0;
    bool running = false;
    bool router_open = true;
    enum class Stop { kNone, kTimeout, kCancel } stop = Stop::kNone;
    TimerQueue::Id timeout_timer = 0;
    TimerQueue::Id kill_timer = 0;
    std::string stdout_text, stderr_text;
    uint64_t shown_bytes = 0;
    bool truncated = false;
    std::vector<sandbox::v1::Display> displays;
    uint64_t display_bytes = 0;
    uint32_t displays_dropped = 0;  // by sandboxd; the runner counts its own in `done`
    uint32_t tool_calls = 0;
    uint64_t next_call = 1;
    std::map<std::string, PendingCall> calls;  // client call id -> runner call id
    std::map<std::string, std::string> runner_ids;  // runner call id -> client call id
  };
  struct Work {
    std::shared_ptr<ExecState> exec;           // an execution, or
    std::function<void(absl::Status)> reset;   // a reset
    uint64_t reset_id = 0;
  };
  // Deferred observer calls, made after the lock is released.
  using Deferred = std::vector<std::function<void()>>;

  Session(SessionEnv* env, Metadata metadata, Catalog catalog,
          std::unique_ptr<RunnerConnection> conn);

  void StartNextLocked(Deferred& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishExecLocked(ExecState& e, sandbox::v1::Finished f, Deferred& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LoseLocked(const std::string& reason, Deferred& out,
                  sandbox::v1::Finished::Status status = sandbox::v1::Finished::SESSION_LOST)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void StopExec(uint64_t exec_id, ExecState::Stop why);
  void OnKillTimer(uint64_t exec_id);
  void HandleOutput(OutputMessage m, Deferred& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts an observer call of `e` and has `out` deliver it once the lock is released.
  static void Notify(ExecState& e, std::function<void(ExecutionObserver&)> event, Deferred& out);
  void HandleDisplay(ExecState& e, DisplayBundle bundle, Deferred& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleToolCall(ToolCallMessage m, Deferred& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void HandleDone(DoneMessage m, Deferred& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendOrLose(const nlohmann::json& frame, Deferred& out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SubmitToolResult(uint64_t exec_id, const sandbox::v1::ToolResult& r);
  void CancelExec(uint64_t exec_id);
  void CloseRouter(uint64_t exec_id);
  static void Run(Deferred& d);
  // Rewrites the session's record (its catalog, egress policy or egress count changed);
  // logs a failure.
  void SaveRecord() const;
  // The bytes the egress quota has counted; 0 without egress.
  uint64_t EgressBytesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  SessionEnv* const env_;
  const Metadata metadata_;
  std::unique_ptr<RunnerConnection> conn_;
  WorkspaceFiles files_;  // sends through conn_

  mutable codemode::Mutex mu_;
  Catalog catalog_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<ExecState> current_ ABSL_GUARDED_BY(mu_);
  std::deque<Work> queue_ ABSL_GUARDED_BY(mu_);
  std::function<void(absl::Status)> pending_reset_ ABSL_GUARDED_BY(mu_);
  uint64_t pending_reset_id_ ABSL_GUARDED_BY(mu_) = 0;
  // An egress_on that came with an error was logged (once: the runner may send many).
  bool egress_error_logged_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_exec_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_request_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t executions_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t last_used_ms_ ABSL_GUARDED_BY(mu_) = 0;
  bool lost_ ABSL_GUARDED_BY(mu_) = false;
  bool detached_ ABSL_GUARDED_BY(mu_) = false;
  bool reader_waited_ = false;  // the reader thread's: its first wait is logged
  std::string lost_reason_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<SessionEgress> egress_ ABSL_GUARDED_BY(mu_);
  // The egress count last put in the record, and when (RecordEgressUse).
  uint64_t egress_recorded_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t egress_recorded_ms_ ABSL_GUARDED_BY(mu_) = 0;
  // Set before we kill the container ourselves, so the EOF that follows is reported with
  // the real cause.
  std::string kill_reason_ ABSL_GUARDED_BY(mu_);
};

// "out of memory (limit 256 MiB)" style text for lost sessions, with the process's last
// words when the runtime kept them.
std::string DescribeContainerDeath(const ContainerStatus& status, const ResolvedLimits& limits,
                                   bool cgroup_limits);
// The same without the last words.
std::string DescribeExit(const ContainerStatus& status, const ResolvedLimits& limits, bool cgroup_limits);

}  // namespace sandboxd
