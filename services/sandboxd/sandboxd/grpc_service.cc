#include "sandboxd/grpc_service.h"

#include <algorithm>
#include <deque>

#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "base/notification.h"
#include "base/log_text.h"
#include "sandboxd/log.h"
#include "sandboxd/refusal.h"
#include "telemetry/trace_context.h"

namespace sandboxd {
namespace {

using sandbox::v1::ExecuteRequest;
using sandbox::v1::ExecuteResponse;
using sandbox::v1::Finished;

absl::StatusOr<ExecutionRequest> ToExecutionRequest(const std::string& code, uint32_t timeout_ms,
                                                    const sandbox::v1::Catalog* catalog,
                                                    bool tool_router) {
  ExecutionRequest r;
  r.code = code;
  r.timeout_ms = timeout_ms;
  r.tool_router = tool_router;
  if (catalog) {
    absl::StatusOr<Catalog> c = Catalog::FromProto(*catalog);
    if (!c.ok()) return c.status();
    r.catalog = std::move(*c);
  }
  return r;
}

// Collects one execution for the unary Run rpc.
class CollectingObserver : public ExecutionObserver {
 public:
  void OnStarted(uint64_t) override {}
  void OnOutput(OutputStream, const std::string&) override {}
  void OnToolCall(const sandbox::v1::ToolCall&) override {}
  void OnFinished(const Finished& f) override {
    finished_ = f;
    done_.Notify();
  }
  codemode::Notification done_;
  Finished finished_;
};

// What a queued message costs beyond its serialized bytes (the message objects and their
// allocations): a flood of one-byte outputs must count for what it takes.
constexpr size_t kQueuedMessageOverhead = 64;

// Drives one Execute stream. Lifetime: deleted in OnDone. Session callbacks reach it
// through a Bridge that OnDone detaches first, so no callback lands on a deleted reactor.
// Messages wait in an outbox while a write is in flight; a client that stops reading
// while its code prints would grow it without end, so it holds at most `max_outbox_bytes`
// (one message always fits): past that the stream ends RESOURCE_EXHAUSTED and the
// execution is cancelled, the session kept.
class ExecuteReactor : public grpc::ServerBidiReactor<ExecuteRequest, ExecuteResponse> {
 public:
  ExecuteReactor(SessionManager* manager, size_t max_outbox_bytes, std::string trace_id)
      : manager_(manager),
        max_outbox_bytes_(max_outbox_bytes),
        trace_id_(std::move(trace_id)),
        bridge_(std::make_shared<Bridge>(this)) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The client half-closed (what `grpcurl -d @` does) or the call ended: tool calls
      // can no longer be answered, but output and `finished` still flow.
      std::shared_ptr<Execution> exec;
      {
        codemode::MutexLock lock(&mu_);
        exec = execution_;
        if (!exec && !finish_called_) {
          FinishLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                    "the stream ended before a 'start' message"));
        }
      }
      if (exec) exec->CloseToolRouter();
      return;
    }
    std::shared_ptr<Execution> exec;
    {
      codemode::MutexLock lock(&mu_);
      exec = execution_;
    }
    if (!exec) {
      HandleStart();
    } else if (request_.has_tool_result()) {
      absl::Status s = exec->SubmitToolResult(request_.tool_result());
      if (!s.ok()) spdlog::debug("tool_result ignored: {}", codemode::LogLongText(s.message()));
    } else if (request_.has_cancel()) {
      exec->Cancel();
    } else if (request_.has_start()) {
      spdlog::debug("second 'start' on one Execute stream ignored");
    }
    codemode::MutexLock lock(&mu_);
    if (!finish_called_) StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    codemode::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      // The client is gone; OnDone will follow.
      outbox_.clear();
      outbox_bytes_ = 0;
      if (!finish_called_) FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "write failed"));
      return;
    }
    WriteNextLocked();
  }

  void OnCancel() override {
    std::shared_ptr<Execution> exec;
    {
      codemode::MutexLock lock(&mu_);
      exec = execution_;
      if (!finish_called_) FinishLocked(grpc::Status::CANCELLED);
    }
    if (exec) exec->Cancel();
  }

  void OnDone() override {
    bridge_->Detach();
    std::shared_ptr<Execution> exec;
    bool finished;
    {
      codemode::MutexLock lock(&mu_);
      exec = execution_;
      finished = finished_seen_;
    }
    // A client that disconnects mid-execution: interrupt the code, keep the namespace.
    if (exec && !finished) exec->Cancel();
    delete this;
  }

  // Called by the bridge (session threads). Returns the execution to cancel when this
  // message overflowed the outbox (the caller cancels it once it holds no lock).
  std::shared_ptr<Execution> Push(ExecuteResponse response, bool final) {
    codemode::MutexLock lock(&mu_);
    if (finish_called_) return nullptr;
    const size_t cost = response.ByteSizeLong() + kQueuedMessageOverhead;
    if (!outbox_.empty() && outbox_bytes_ + cost > max_outbox_bytes_) {
      outbox_.clear();
      outbox_bytes_ = 0;
      overflowed_ = true;
      FinishLocked(grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          absl::StrCat("the client did not read its Execute stream: more than ", max_outbox_bytes_,
                       " bytes of messages were waiting (sandboxd's --max_stream_buffer_bytes); "
                       "the execution was cancelled, the session is kept")));
      return final ? nullptr : execution_;
    }
    if (final) finished_seen_ = true;
    outbox_bytes_ += cost;
    outbox_.push_back(std::move(response));
    WriteNextLocked();
    return nullptr;
  }

 private:
  class Bridge : public ExecutionObserver {
   public:
    explicit Bridge(ExecuteReactor* r) : reactor_(r) {}
    void Detach() {
      codemode::MutexLock lock(&mu_);
      reactor_ = nullptr;
    }
    void OnStarted(uint64_t id) override {
      ExecuteResponse r;
      r.mutable_started()->set_execution_id(id);
      r.mutable_started()->set_session_id(session_id_);
      Forward(std::move(r), false);
    }
    void OnOutput(OutputStream stream, const std::string& text) override {
      ExecuteResponse r;
      r.mutable_output()->set_stream(stream == OutputStream::kStdout ? sandbox::v1::Output::STDOUT
                                                                     : sandbox::v1::Output::STDERR);
      r.mutable_output()->set_text(text);
      Forward(std::move(r), false);
    }
    void OnDisplay(const sandbox::v1::Display& display) override {
      ExecuteResponse r;
      *r.mutable_display() = display;
      Forward(std::move(r), false);
    }
    void OnToolCall(const sandbox::v1::ToolCall& call) override {
      ExecuteResponse r;
      *r.mutable_tool_call() = call;
      Forward(std::move(r), false);
    }
    void OnFinished(const Finished& f) override {
      ExecuteResponse r;
      *r.mutable_finished() = f;
      Forward(std::move(r), true);
    }
    std::string session_id_;

   private:
    void Forward(ExecuteResponse r, bool final) {
      std::shared_ptr<Execution> overflowed;
      {
        codemode::MutexLock lock(&mu_);
        if (reactor_) overflowed = reactor_->Push(std::move(r), final);
      }
      if (overflowed) overflowed->Cancel();
    }
    codemode::Mutex mu_;
    ExecuteReactor* reactor_ ABSL_GUARDED_BY(mu_);
  };

  void HandleStart() {
    if (!request_.has_start()) {
      codemode::MutexLock lock(&mu_);
      FinishLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "the first message must be 'start'"));
      return;
    }
    const auto& start = request_.start();
    bridge_->session_id_ = start.session_id();
    absl::StatusOr<ExecutionRequest> req = ToExecutionRequest(
        start.code(), start.timeout_ms(), start.has_catalog() ? &start.catalog() : nullptr, true);
    if (req.ok()) {
      req->max_tool_calls_in_flight = start.max_tool_calls_in_flight();
      req->trace_id = trace_id_;
      req->runtime = start.runtime();
    }
    absl::StatusOr<std::shared_ptr<Execution>> exec =
        req.ok() ? manager_->Execute(start.session_id(), std::move(*req), bridge_)
                 : absl::StatusOr<std::shared_ptr<Execution>>(req.status());
    bool overflowed;
    {
      codemode::MutexLock lock(&mu_);
      if (!exec.ok()) {
        FinishLocked(ToGrpcStatus(exec.status()));
        return;
      }
      execution_ = *exec;
      overflowed = overflowed_;
    }
    if (overflowed) (*exec)->Cancel();  // it overflowed before we knew it (Push)
  }

  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finish_called_) return;
    if (outbox_.empty()) {
      if (finished_seen_) FinishLocked(grpc::Status::OK);
      return;
    }
    current_write_ = std::move(outbox_.front());
    outbox_.pop_front();
    outbox_bytes_ -= std::min(outbox_bytes_, current_write_.ByteSizeLong() + kQueuedMessageOverhead);
    writing_ = true;
    if (finished_seen_ && outbox_.empty()) {
      // The last message: it and the status leave in one write, so the caller has the
      // stream's end with its Finished instead of one wake-up later (there is no
      // OnWriteDone for it; OnDone follows).
      finish_called_ = true;
      StartWriteAndFinish(&current_write_, grpc::WriteOptions(), grpc::Status::OK);
      return;
    }
    StartWrite(&current_write_);
  }

  void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    finish_called_ = true;
    Finish(status);
  }

  SessionManager* const manager_;
  const size_t max_outbox_bytes_;
  const std::string trace_id_;  // of the caller's traceparent; empty: none
  std::shared_ptr<Bridge> bridge_;
  ExecuteRequest request_;
  codemode::Mutex mu_;
  std::shared_ptr<Execution> execution_ ABSL_GUARDED_BY(mu_);
  std::deque<ExecuteResponse> outbox_ ABSL_GUARDED_BY(mu_);
  size_t outbox_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // ByteSizeLong + overhead of each
  bool overflowed_ ABSL_GUARDED_BY(mu_) = false;
  ExecuteResponse current_write_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_seen_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

namespace {

// A unary rpc's answer: the manager's value into `resp`, or its error.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> value, T* resp) {
  if (!value.ok()) return ToGrpcStatus(value.status());
  *resp = std::move(*value);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status SandboxServiceImpl::CreateSession(grpc::ServerContext* ctx,
                                               const sandbox::v1::CreateSessionRequest* req,
                                               sandbox::v1::Session* resp) {
  // A caller that gave up (cancelled, or past its deadline: a gateway that placed the
  // sandbox elsewhere) never learns the id: the session would live on unseen, counted
  // against --max_sessions and its owner's limit until --idle_ttl, and another owner's idle
  // session may have been ended for its room. The manager asks before either; a session
  // made while the caller gave up ends here.
  absl::StatusOr<sandbox::v1::Session> created =
      manager_->CreateSession(*req, [ctx] { return !ctx->IsCancelled(); });
  if (created.ok() && ctx->IsCancelled()) {
    (void)manager_->DeleteSession(created->id());
    return grpc::Status(grpc::StatusCode::CANCELLED, "the caller gave up before its session was made; it was ended");
  }
  if (!created.ok() && DaemonWasFull(created.status())) ctx->AddTrailingMetadata(kRefusalMetadata, kDaemonFull);
  return Reply(std::move(created), resp);
}

grpc::Status SandboxServiceImpl::GetSession(grpc::ServerContext*,
                                            const sandbox::v1::GetSessionRequest* req,
                                            sandbox::v1::Session* resp) {
  return Reply(manager_->GetSession(req->session_id()), resp);
}

grpc::Status SandboxServiceImpl::GetSessionStats(grpc::ServerContext*,
                                                 const sandbox::v1::GetSessionStatsRequest* req,
                                                 sandbox::v1::SessionStats* resp) {
  return Reply(manager_->GetSessionStats(req->session_id(), req->owner()), resp);
}

grpc::Status SandboxServiceImpl::SetEgressPolicy(grpc::ServerContext*,
                                                 const sandbox::v1::SetEgressPolicyRequest* req,
                                                 sandbox::v1::Session* resp) {
  return Reply(manager_->SetEgressPolicy(req->session_id(), req->egress_policy(), req->owner()),
               resp);
}

grpc::Status SandboxServiceImpl::ListSessions(grpc::ServerContext*,
                                              const sandbox::v1::ListSessionsRequest* req,
                                              sandbox::v1::ListSessionsResponse* resp) {
  absl::StatusOr<std::vector<sandbox::v1::Session>> sessions = manager_->ListSessions(req->owner());
  if (!sessions.ok()) return ToGrpcStatus(sessions.status());
  for (auto& s : *sessions) *resp->add_sessions() = std::move(s);
  return grpc::Status::OK;
}

grpc::Status SandboxServiceImpl::DeleteSession(grpc::ServerContext*,
                                               const sandbox::v1::DeleteSessionRequest* req,
                                               sandbox::v1::DeleteSessionResponse*) {
  return ToGrpcStatus(manager_->DeleteSession(req->session_id()));
}

grpc::Status SandboxServiceImpl::ResetSession(grpc::ServerContext*,
                                              const sandbox::v1::ResetSessionRequest* req,
                                              sandbox::v1::Session* resp) {
  return Reply(manager_->ResetSession(req->session_id()), resp);
}

grpc::Status SandboxServiceImpl::Run(grpc::ServerContext* context,
                                     const sandbox::v1::RunRequest* req,
                                     sandbox::v1::Finished* resp) {
  absl::StatusOr<ExecutionRequest> r =
      ToExecutionRequest(req->code(), req->timeout_ms(), nullptr, /*tool_router=*/false);
  if (!r.ok()) return ToGrpcStatus(r.status());
  r->runtime = req->runtime();
  auto observer = std::make_shared<CollectingObserver>();
  absl::StatusOr<std::shared_ptr<Execution>> exec =
      manager_->Execute(req->session_id(), std::move(*r), observer);
  if (!exec.ok()) return ToGrpcStatus(exec.status());
  bool cancelled = false;
  while (!observer->done_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    if (!cancelled && context->IsCancelled()) {
      (*exec)->Cancel();
      cancelled = true;
    }
  }
  *resp = observer->finished_;
  return grpc::Status::OK;
}

grpc::Status SandboxServiceImpl::GetInfo(grpc::ServerContext*, const sandbox::v1::GetInfoRequest*,
                                         sandbox::v1::Info* resp) {
  *resp = manager_->GetInfo();
  return grpc::Status::OK;
}

grpc::ServerBidiReactor<ExecuteRequest, ExecuteResponse>* SandboxServiceImpl::Execute(
    grpc::CallbackServerContext* context) {
  // W3C trace context as gRPC metadata (what the gateway and OpenTelemetry send): only a
  // well-formed value names the execution's trace in our logs.
  std::string trace_id;
  const auto& metadata = context->client_metadata();
  if (auto it = metadata.find("traceparent"); it != metadata.end()) {
    const std::optional<codemode::telemetry::TraceContext> trace =
        codemode::telemetry::TraceContext::Parse(absl::string_view(it->second.data(), it->second.size()));
    if (trace) trace_id = trace->trace_id();
  }
  return new ExecuteReactor(manager_, max_stream_buffer_bytes_, std::move(trace_id));
}

}  // namespace sandboxd
