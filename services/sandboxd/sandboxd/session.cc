// Session: its executions' lifecycle (queue, start, stop, cancel, kill timer), the runner
// connection closing, and the session's state. What the runner sends during an execution
// is handled in session_messages.cc.
#include "sandboxd/session.h"

#include "absl/strings/str_cat.h"
#include "base/notification.h"
#include "base/log_text.h"
#include "sandboxd/log.h"

namespace sandboxd {

// Every tool of a valid catalog can be called: its names fit a tool_call frame.
static_assert(kMaxNameBytes == codemode::kMaxCatalogNameBytes);

namespace {

using sandbox::v1::Finished;

std::string MiB(uint64_t bytes) { return absl::StrCat(bytes >> 20, " MiB"); }

Finished ErrorFinished(Finished::Status status, const std::string& type,
                       const std::string& message) {
  Finished f;
  f.set_status(status);
  f.mutable_error()->set_type(type);
  f.mutable_error()->set_message(message);
  return f;
}

}  // namespace

std::string DescribeContainerDeath(const ContainerStatus& st, const ResolvedLimits& limits,
                                   bool cgroup_limits) {
  std::string why = DescribeExit(st, limits, cgroup_limits);
  if (!st.last_words.empty()) absl::StrAppend(&why, "; it said: ", codemode::LogText(st.last_words));
  return why;
}

std::string DescribeExit(const ContainerStatus& st, const ResolvedLimits& limits, bool cgroup_limits) {
  if (!st.exists) return "the container disappeared (removed outside sandboxd?)";
  if (st.oom_killed) return absl::StrCat("out of memory (limit ", MiB(limits.memory_bytes), ")");
  if (st.running) return "the runner closed its connection while the container kept running";
  if (st.exit_code == 137) {
    return absl::StrCat("the container was killed (SIGKILL)",
                        cgroup_limits ? absl::StrCat(", most likely out of memory (limit ",
                                                     MiB(limits.memory_bytes), ")")
                                      : "");
  }
  if (st.exit_code == 143) {
    // The JavaScript runner's own end when its workers are stuck (docs/runner-protocol.md).
    return "the runner ended on SIGTERM (exit code 143); a JavaScript runner ends so once 3 of "
           "its workers are stuck in system calls, as the last execution's stderr said";
  }
  return absl::StrCat("the container exited with code ", st.exit_code);
}

// ---- Execution handle -------------------------------------------------------------

absl::Status Execution::SubmitToolResult(const sandbox::v1::ToolResult& result) {
  std::shared_ptr<Session> s = session_.lock();
  if (!s) return absl::NotFoundError("the session is gone");
  return s->SubmitToolResult(id_, result);
}

void Execution::Cancel() {
  if (std::shared_ptr<Session> s = session_.lock()) s->CancelExec(id_);
}

void Execution::CloseToolRouter() {
  if (std::shared_ptr<Session> s = session_.lock()) s->CloseRouter(id_);
}

// ---- Session ----------------------------------------------------------------------

std::shared_ptr<Session> Session::Create(SessionEnv* env, Metadata metadata, Catalog catalog,
                                         std::unique_ptr<RunnerConnection> conn,
                                         bool push_catalog) {
  std::shared_ptr<Session> s(
      new Session(env, std::move(metadata), std::move(catalog), std::move(conn)));
  s->conn_->Start(s.get(), env->runner_share);
  if (push_catalog) {
    // The runner handles frames in order, so the first execution sees this catalog. A
    // failed send shows up as EOF on the reader and loses the session.
    Deferred deferred;
    codemode::MutexLock lock(&s->mu_);  // the reader runs already
    if (!s->catalog_.servers().empty()) {
      s->SendOrLose(MakeSetCatalogFrame(s->next_request_id_++, s->catalog_.ToRunnerJson()),
                    deferred);
    }
  }
  return s;
}

Session::Session(SessionEnv* env, Metadata metadata, Catalog catalog,
                 std::unique_ptr<RunnerConnection> conn)
    : env_(env),
      metadata_(std::move(metadata)),
      conn_(std::move(conn)),
      files_([this](std::string frame) { return conn_->SendEncoded(std::move(frame)); },
             [this](std::string_view frame) { return conn_->SendBulk(frame); }, env->max_file_bytes,
             conn_->ready().runner_version >= kBinaryChunksSinceRunner),
      catalog_(std::move(catalog)),
      last_used_ms_(env->clock->NowMs()) {}

Session::~Session() { conn_->Close(); }

void Session::Run(Deferred& d) {
  for (auto& fn : d) fn();
  d.clear();
}

void ObserverQueue::Post(std::function<void(ExecutionObserver&)> event) {
  codemode::MutexLock lock(&mu_);
  events_.push_back(std::move(event));
}

void ObserverQueue::Deliver() {
  codemode::MutexLock lock(&mu_);
  if (delivering_) return;
  delivering_ = true;
  while (!events_.empty()) {
    auto event = std::move(events_.front());
    events_.pop_front();
    mu_.Unlock();
    event(*observer_);
    mu_.Lock();
  }
  delivering_ = false;
}

void Session::Notify(ExecState& e, std::function<void(ExecutionObserver&)> event, Deferred& out) {
  e.observer->Post(std::move(event));
  out.push_back([queue = e.observer] { queue->Deliver(); });
}

absl::StatusOr<std::shared_ptr<Execution>> Session::Enqueue(
    ExecutionRequest request, std::shared_ptr<ExecutionObserver> observer) {
  Deferred deferred;
  std::shared_ptr<Execution> handle;
  {
    codemode::MutexLock lock(&mu_);
    if (lost_) return absl::FailedPreconditionError(absl::StrCat("session lost: ", lost_reason_));
    uint32_t timeout = request.timeout_ms ? request.timeout_ms : metadata_.limits.default_timeout_ms;
    if (timeout > env_->max_timeout_ms) {
      return absl::InvalidArgumentError(absl::StrCat("timeout_ms ", timeout,
                                                     " exceeds the daemon maximum ",
                                                     env_->max_timeout_ms));
    }
    size_t waiting = queue_.size();
    if (waiting >= env_->max_queue) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "session ", metadata_.id, " already has ", waiting, " executions queued (the limit)"));
    }
    auto e = std::make_shared<ExecState>();
    e->id = next_exec_id_++;
    e->queued = absl::Now();
    e->timeout_ms = timeout;
    e->router_open = request.tool_router;
    e->request = std::move(request);
    e->observer = std::make_shared<ObserverQueue>(std::move(observer));
    handle = std::make_shared<Execution>(weak_from_this(), e->id);
    queue_.push_back(Work{e, nullptr, 0});
    StartNextLocked(deferred);
  }
  Run(deferred);
  return handle;
}

absl::Status Session::Reset(absl::Duration timeout) {
  struct Waiter {
    codemode::Notification done;
    absl::Status status;
  };
  auto waiter = std::make_shared<Waiter>();
  Deferred deferred;
  {
    codemode::MutexLock lock(&mu_);
    if (lost_) return absl::FailedPreconditionError(absl::StrCat("session lost: ", lost_reason_));
    if (queue_.size() >= env_->max_queue) {
      return absl::ResourceExhaustedError("the session's queue is full");
    }
    queue_.push_back(Work{nullptr, [waiter](absl::Status s) {
                            waiter->status = std::move(s);
                            waiter->done.Notify();
                          },
                          0});
    StartNextLocked(deferred);
  }
  Run(deferred);
  if (!waiter->done.WaitForNotificationWithTimeout(timeout)) {
    return absl::DeadlineExceededError("the reset did not complete in time");
  }
  return waiter->status;
}

void Session::StartNextLocked(Deferred& out) {
  while (!lost_ && !current_ && !pending_reset_ && !queue_.empty()) {
    Work w = std::move(queue_.front());
    queue_.pop_front();
    uint64_t request_id = next_request_id_++;
    if (w.reset) {
      pending_reset_ = std::move(w.reset);
      pending_reset_id_ = request_id;
      SendOrLose(MakeResetFrame(request_id), out);
      continue;
    }
    std::shared_ptr<ExecState> e = std::move(w.exec);
    current_ = e;
    e->running = true;
    e->started = absl::Now();
    env_->metrics->QueueWaited(e->started - e->queued);
    last_used_ms_ = env_->clock->NowMs();
    if (e->request.catalog) {
      catalog_ = std::move(*e->request.catalog);
      e->request.catalog.reset();
      SendOrLose(MakeSetCatalogFrame(request_id, catalog_.ToRunnerJson()), out);
      if (lost_) return;
      if (env_->records) {
        // On a worker, never here: this may run on the reader thread, which must never
        // hold the last reference to its own session (the destructor joins it).
        std::weak_ptr<Session> weak = weak_from_this();
        env_->workers->Post([weak] {
          if (auto s = weak.lock()) s->SaveRecord();
        });
      }
    }
    std::weak_ptr<Session> weak = weak_from_this();
    uint64_t id = e->id;
    e->timeout_timer = env_->timers->Schedule(absl::Milliseconds(e->timeout_ms), [weak, id] {
      if (auto s = weak.lock()) s->StopExec(id, ExecState::Stop::kTimeout);
    });
    Notify(*e, [id](ExecutionObserver& o) { o.OnStarted(id); }, out);
    uint32_t in_flight = env_->max_inflight_tool_calls;
    if (e->request.max_tool_calls_in_flight > 0) {
      in_flight = std::min(in_flight, e->request.max_tool_calls_in_flight);
    }
    SendOrLose(MakeExecFrame(id, e->request.code, env_->max_output_bytes,
                             env_->max_display_bytes, in_flight), out);
    // The code is no longer needed; executions can be large.
    std::string().swap(e->request.code);
  }
}

void Session::SendOrLose(const nlohmann::json& frame, Deferred& out) {
  absl::Status s = conn_->Send(frame);
  if (!s.ok()) LoseLocked(std::string(s.message()), out);
}

void Session::FinishExecLocked(ExecState& e, Finished f, Deferred& out) {
  if (e.timeout_timer) env_->timers->Cancel(e.timeout_timer);
  if (e.kill_timer) env_->timers->Cancel(e.kill_timer);
  f.set_execution_id(e.id);
  f.set_tool_calls(e.tool_calls);
  const absl::Duration ran = e.running ? absl::Now() - e.started : absl::ZeroDuration();
  if (e.running) f.set_duration_ms(static_cast<uint64_t>(absl::ToInt64Milliseconds(ran)));
  env_->metrics->ExecutionFinished(f.status(), e.running, ran);
  // The execution's line is written once its Finished is on the way: a log write wakes
  // whoever reads the log (journald, a supervisor's pipe), and the caller need not wait
  // for that.
  std::string line;
  if (spdlog::should_log(spdlog::level::info)) {
    line = fmt::format("session {} execution {}: {} in {} ms, {} tool calls (trace {})", metadata_.id, e.id,
                       Finished::Status_Name(f.status()), absl::ToInt64Milliseconds(ran), e.tool_calls,
                       e.request.trace_id.empty() ? "-" : e.request.trace_id);
  }
  f.set_stdout(std::move(e.stdout_text));
  f.set_stderr(std::move(e.stderr_text));
  for (auto& d : e.displays) *f.add_displays() = std::move(d);
  f.set_displays_dropped(f.displays_dropped() + e.displays_dropped);
  if (e.truncated) {
    f.set_output_truncated(true);
    uint64_t total = std::max<uint64_t>(f.output_bytes(), e.shown_bytes);
    f.mutable_stdout()->append(absl::StrCat("\n[output truncated: ", e.shown_bytes, " of ", total,
                                            " bytes shown; the cap is ", env_->max_output_bytes,
                                            " bytes]\n"));
  }
  e.running = false;
  last_used_ms_ = env_->clock->NowMs();
  ++executions_;
  ++env_->executions_total;
  Notify(e, [f = std::move(f)](ExecutionObserver& o) { o.OnFinished(f); }, out);
  if (!line.empty()) out.push_back([line = std::move(line)] { spdlog::info("{}", line); });
}

void Session::StopExec(uint64_t exec_id, ExecState::Stop why) {
  Deferred deferred;
  {
    codemode::MutexLock lock(&mu_);
    if (lost_ || !current_ || current_->id != exec_id ||
        current_->stop != ExecState::Stop::kNone) {
      return;
    }
    current_->stop = why;
    SendOrLose(MakeInterruptFrame(exec_id), deferred);
    if (!lost_) {
      std::weak_ptr<Session> weak = weak_from_this();
      current_->kill_timer = env_->timers->Schedule(env_->kill_grace, [weak, exec_id] {
        if (auto s = weak.lock()) s->OnKillTimer(exec_id);
      });
    }
  }
  Run(deferred);
}

void Session::OnKillTimer(uint64_t exec_id) {
  codemode::MutexLock lock(&mu_);
  if (lost_ || !current_ || current_->id != exec_id) return;
  const char* what = current_->stop == ExecState::Stop::kTimeout ? "exceeded its timeout of "
                                                                   : "was cancelled";
  kill_reason_ = current_->stop == ExecState::Stop::kTimeout
                     ? absl::StrCat("execution ", what, current_->timeout_ms,
                                    " ms and did not stop within ",
                                    absl::FormatDuration(env_->kill_grace),
                                    " of being interrupted; the container was killed")
                     : absl::StrCat("execution ", what,
                                    " and did not stop within ",
                                    absl::FormatDuration(env_->kill_grace),
                                    "; the container was killed");
  spdlog::warn("session {}: {}", metadata_.id, codemode::LogLongText(kill_reason_));
  env_->containers->Kill(metadata_.container_name);
}

void Session::CancelExec(uint64_t exec_id) {
  Deferred deferred;
  {
    codemode::MutexLock lock(&mu_);
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (it->exec && it->exec->id == exec_id) {
        std::shared_ptr<ExecState> e = it->exec;
        queue_.erase(it);
        FinishExecLocked(*e, ErrorFinished(Finished::CANCELLED, "Cancelled",
                                           "cancelled before it started"),
                         deferred);
        break;
      }
    }
  }
  Run(deferred);
  StopExec(exec_id, ExecState::Stop::kCancel);
}

void Session::CloseRouter(uint64_t exec_id) {
  Deferred deferred;
  {
    codemode::MutexLock lock(&mu_);
    std::shared_ptr<ExecState> e;
    if (current_ && current_->id == exec_id) e = current_;
    for (auto& w : queue_) {
      if (w.exec && w.exec->id == exec_id) e = w.exec;
    }
    if (!e) return;
    e->router_open = false;
    for (auto& [client_id, call] : e->calls) {
      env_->metrics->ToolCall(false);  // never answered
      SendOrLose(MakeToolErrorFrame(call.runner_call_id,
                                    "tool calls are not available any more: the caller closed "
                                    "its side of the Execute stream"),
                 deferred);
      if (lost_) break;
    }
    e->calls.clear();
    e->runner_ids.clear();
  }
  Run(deferred);
}

void Session::OnReaderWaited(absl::Duration waited) {
  env_->metrics->RunnerFramesWaited(waited);
  if (reader_waited_) return;
  reader_waited_ = true;
  spdlog::warn("session {}: its runner's frames used their share of sandboxd's CPU "
               "(--runner_cpu_millis={}); they are read more slowly while they come faster",
               metadata_.id, env_->runner_share.millis);
}

void Session::OnRunnerClosed(absl::Status reason) {
  std::string why;
  bool describe_death = false;
  {
    codemode::MutexLock lock(&mu_);
    if (lost_ || detached_) return;
    if (!kill_reason_.empty()) {
      why = kill_reason_;
    } else if (absl::IsInvalidArgument(reason)) {
      why = std::string(reason.message());
      kill_reason_ = why;
    } else {
      describe_death = true;
    }
  }
  if (describe_death) {
    // The container died on its own (OOM, the code called os._exit, podman rm from outside).
    // Give podman a moment to record the exit.
    absl::StatusOr<ContainerStatus> st = env_->containers->Inspect(metadata_.container_name);
    for (int i = 0; i < 20 && st.ok() && st->exists && st->running; ++i) {
      absl::SleepFor(absl::Milliseconds(50));
      st = env_->containers->Inspect(metadata_.container_name);
    }
    why = st.ok() ? DescribeContainerDeath(*st, metadata_.limits, env_->cgroup_limits)
                  : absl::StrCat("the runner connection closed (", st.status().message(), ")");
  }
  Deferred deferred;
  {
    codemode::MutexLock lock(&mu_);
    LoseLocked(why, deferred);
  }
  Run(deferred);
}

void Session::LoseLocked(const std::string& reason, Deferred& out, Finished::Status status) {
  if (lost_) return;
  lost_ = true;
  lost_reason_ = reason;
  if (!detached_ && env_->slots) {
    // First of the deferred calls: a client that hears SESSION_LOST can create a new
    // session in the slot at once.
    out.insert(out.begin(), [this] { env_->slots->OnSessionLost(*this); });
  }
  const bool lost = status == Finished::SESSION_LOST;
  // A detached session is not lost: its container stays and the next start re-attaches it
  // (Detach says what of its work ended).
  if (lost && !detached_) spdlog::warn("session {} lost: {}", metadata_.id, codemode::LogLongText(reason));
  std::string message = detached_ ? absl::StrCat("session detached: ", reason)
                        : lost    ? absl::StrCat("session lost: ", reason)
                                  : reason;
  files_.Fail(message);
  const char* type = lost ? "SessionLost" : "Cancelled";
  if (current_) {
    std::shared_ptr<ExecState> e = std::move(current_);
    current_.reset();
    FinishExecLocked(*e, ErrorFinished(status, type, message), out);
  }
  for (Work& w : queue_) {
    if (w.exec) {
      FinishExecLocked(*w.exec, ErrorFinished(status, type, message), out);
    } else if (w.reset) {
      auto cb = std::move(w.reset);
      out.push_back([cb, message] { cb(absl::FailedPreconditionError(message)); });
    }
  }
  queue_.clear();
  if (pending_reset_) {
    auto cb = std::move(pending_reset_);
    pending_reset_ = nullptr;
    out.push_back([cb, message] { cb(absl::FailedPreconditionError(message)); });
  }
  if (!detached_) env_->containers->Kill(metadata_.container_name);
  if (egress_) out.push_back([egress = std::shared_ptr<SessionEgress>(std::move(egress_))] {});
}

void Session::Terminate(const std::string& reason, Finished::Status status) {
  Deferred deferred;
  {
    codemode::MutexLock lock(&mu_);
    LoseLocked(reason, deferred, status);
  }
  Run(deferred);
}

bool Session::TerminateIfIdle(const std::string& reason, int64_t unused_since_ms) {
  Deferred deferred;
  {
    codemode::MutexLock lock(&mu_);
    // files_'s lock is taken under ours here as in LoseLocked (files_.Fail).
    if (lost_ || current_ || pending_reset_ || !queue_.empty() || files_.busy() ||
        last_used_ms_ != unused_since_ms) {
      return false;
    }
    // LOST all the same; CANCELLED only keeps LoseLocked from warning about an ordinary
    // reclaim (there is no work to finish: it is idle), which its manager logs.
    LoseLocked(reason, deferred, Finished::CANCELLED);
  }
  Run(deferred);
  return true;
}

void Session::Detach() {
  // The last egress count, while the egress (and so its policy, which the record keeps)
  // is still attached.
  bool count_moved;
  {
    codemode::MutexLock lock(&mu_);
    count_moved = !lost_ && EgressBytesLocked() != egress_recorded_bytes_;
  }
  if (count_moved && env_->records) SaveRecord();
  Deferred deferred;
  {
    codemode::MutexLock lock(&mu_);
    if (current_ || !queue_.empty() || pending_reset_) {
      spdlog::warn("session {} detached with work under way, which ends now (the daemon is shutting "
                   "down); the session stays for the next start",
                   metadata_.id);
    }
    detached_ = true;
    LoseLocked("the daemon is shutting down; the session stays and the next start re-attaches it",
               deferred);
  }
  Run(deferred);
  conn_->Close();
}

Catalog Session::catalog() const {
  codemode::MutexLock lock(&mu_);
  return catalog_;
}

bool Session::lost() const {
  codemode::MutexLock lock(&mu_);
  return lost_;
}

std::string Session::lost_reason() const {
  codemode::MutexLock lock(&mu_);
  return lost_reason_;
}

bool Session::idle() const {
  if (files_.busy()) return false;
  codemode::MutexLock lock(&mu_);
  return !current_ && !pending_reset_ && queue_.empty();
}

void Session::Touch() {
  codemode::MutexLock lock(&mu_);
  last_used_ms_ = env_->clock->NowMs();
}

int64_t Session::last_used_ms() const {
  codemode::MutexLock lock(&mu_);
  return last_used_ms_;
}

sandbox::v1::Session Session::ToProto() const {
  codemode::MutexLock lock(&mu_);
  sandbox::v1::Session p;
  p.set_id(metadata_.id);
  p.set_label(metadata_.label);
  p.set_owner(metadata_.owner);
  p.set_state(lost_ ? sandbox::v1::Session::LOST : sandbox::v1::Session::READY);
  p.set_lost_reason(lost_reason_);
  *p.mutable_limits() = sandboxd::ToProto(metadata_.limits);
  p.set_isolation(sandboxd::ToProto(metadata_.isolation));
  p.set_image(metadata_.image);
  p.set_runtime(std::string(LanguageName(metadata_.language)));
  p.set_created_at_ms(metadata_.created_at_ms);
  p.set_last_used_at_ms(last_used_ms_);
  p.set_executions(executions_);
  p.set_queued(static_cast<uint32_t>(queue_.size()));
  p.set_container_id(metadata_.container_id);
  p.set_tool_count(static_cast<uint32_t>(catalog_.tool_count()));
  if (egress_) p.set_egress_policy(egress_->policy());
  p.set_egress_lost_reason(metadata_.egress_lost_reason);
  return p;
}

SessionRecord Session::Record() const {
  SessionRecord r;
  r.session = ToProto();
  r.catalog = catalog().ToProto();
  r.container_name = metadata_.container_name;
  if (env_->containers) r.init = env_->containers->NotedProcesses(metadata_.container_name);
  codemode::MutexLock lock(&mu_);
  r.egress_bytes_used = EgressBytesLocked();
  return r;
}

void Session::SaveRecord() const {
  absl::Status st = env_->records->Update(metadata_.id, [this] { return Record(); });
  if (!st.ok()) {
    spdlog::error("session {}: cannot record its new catalog, egress policy or egress count ({}); "
                  "after a daemon restart it would have the old one", metadata_.id,
                  codemode::LogLongText(st.message()));
  }
}

}  // namespace sandboxd
