// Session: what its runner sends during an execution (output, tool calls, done) and the
// answers to the tool calls that go back to it. Everything the runner sends is untrusted:
// output is capped, tool calls are checked against the session's catalog, and a frame
// that breaks the protocol loses the session. The rest of Session is in session.cc.
#include "absl/strings/str_cat.h"
#include "base/log_text.h"
#include "base/untrusted_json.h"
#include "base/utf8.h"
#include "sandboxd/log.h"
#include "sandboxd/session.h"

namespace sandboxd {
namespace {

using sandbox::v1::Finished;

}  // namespace

absl::Status Session::SubmitToolResult(uint64_t exec_id, const sandbox::v1::ToolResult& r) {
  Deferred deferred;
  absl::Status status;
  {
    codemode::MutexLock lock(&mu_);
    if (!current_ || current_->id != exec_id) {
      return absl::NotFoundError("the execution is not running");
    }
    ExecState& e = *current_;
    auto it = e.calls.find(r.call_id());
    if (it == e.calls.end()) {
      return absl::NotFoundError(absl::StrCat("no pending tool call '", r.call_id(), "'"));
    }
    std::string runner_id = it->second.runner_call_id;
    e.calls.erase(it);
    e.runner_ids.erase(runner_id);
    if (r.outcome_case() == sandbox::v1::ToolResult::kResultJson) {
      absl::StatusOr<nlohmann::json> v = codemode::ParseUntrustedJson(r.result_json(), "result_json");
      if (v.ok() && !v->is_object()) v = absl::InvalidArgumentError("result_json is not an object");
      env_->metrics->ToolCall(v.ok());
      if (v.ok()) {
        SendOrLose(MakeToolResultFrame(runner_id, *v), deferred);
      } else {
        status = v.status();
        SendOrLose(MakeToolErrorFrame(runner_id, absl::StrCat("the caller answered with an invalid "
                                                              "result: ", v.status().message())),
                   deferred);
      }
    } else if (r.outcome_case() == sandbox::v1::ToolResult::kError) {
      env_->metrics->ToolCall(false);
      SendOrLose(MakeToolErrorFrame(runner_id, r.error()), deferred);
    } else {
      env_->metrics->ToolCall(false);
      status = absl::InvalidArgumentError("tool_result has neither result_json nor error");
      SendOrLose(MakeToolErrorFrame(runner_id, "the caller answered with an empty tool_result"),
                 deferred);
    }
  }
  Run(deferred);
  return status;
}

void Session::OnRunnerMessage(RunnerMessage message) {
  if (auto* file = std::get_if<FileReplyMessage>(&message)) {
    files_.OnReply(std::move(*file));  // transfers have their own lock and waiters
    return;
  }
  Deferred deferred;
  {
    codemode::MutexLock lock(&mu_);
    if (lost_) return;
    if (auto* out = std::get_if<OutputMessage>(&message)) {
      HandleOutput(std::move(*out), deferred);
    } else if (auto* call = std::get_if<ToolCallMessage>(&message)) {
      HandleToolCall(std::move(*call), deferred);
    } else if (auto* done = std::get_if<DoneMessage>(&message)) {
      HandleDone(std::move(*done), deferred);
    } else if (auto* ack = std::get_if<AckMessage>(&message)) {
      if (ack->kind == AckMessage::Kind::kResetDone && pending_reset_ &&
          ack->id == pending_reset_id_) {
        auto cb = std::move(pending_reset_);
        pending_reset_ = nullptr;
        last_used_ms_ = env_->clock->NowMs();
        deferred.push_back([cb] { cb(absl::OkStatus()); });
        StartNextLocked(deferred);
      } else if (ack->kind == AckMessage::Kind::kEgressOn && !ack->error.empty() &&
                 !egress_error_logged_) {
        // The answer to a restart's `egress`, which nobody waits for: the relay did not come
        // back (its port taken by the session's code, say), and the session's fetches fail.
        egress_error_logged_ = true;
        spdlog::warn("session {}: its runner could not turn egress on again: {}", metadata_.id,
                     codemode::LogText(ack->error));
      }
    }
    // A repeated `ready` is harmless and ignored.
  }
  Run(deferred);
}

void Session::HandleOutput(OutputMessage m, Deferred& out) {
  if (!current_ || current_->id != m.id) return;  // late output of an earlier execution
  ExecState& e = *current_;
  for (OutputChunk& chunk : m.chunks) {
    if (chunk.stream == OutputStream::kDisplay) {
      HandleDisplay(e, std::move(chunk.display), out);
      continue;
    }
    const OutputStream stream = chunk.stream;
    const std::string& text = chunk.text;
    if (text.empty()) continue;
    if (e.shown_bytes >= env_->max_output_bytes) {
      e.truncated = true;
      env_->metrics->OutputDropped(text.size());
      continue;
    }
    std::string shown(codemode::Utf8Prefix(text, env_->max_output_bytes - e.shown_bytes));
    bool cut = shown.size() < text.size();
    env_->metrics->OutputDropped(text.size() - shown.size());
    e.shown_bytes += shown.size();
    (stream == OutputStream::kStdout ? e.stdout_text : e.stderr_text) += shown;
    Notify(e, [stream, shown = std::move(shown)](ExecutionObserver& o) {
      o.OnOutput(stream, shown);
    }, out);
    if (cut) {
      e.truncated = true;
      e.shown_bytes = env_->max_output_bytes;
      std::string marker = absl::StrCat("\n[output truncated: the cap is ", env_->max_output_bytes,
                                        " bytes]\n");
      Notify(e, [marker](ExecutionObserver& o) { o.OnOutput(OutputStream::kStderr, marker); }, out);
    }
  }
}

void Session::HandleDisplay(ExecState& e, DisplayBundle bundle, Deferred& out) {
  // The runner keeps under the cap (it counts the encoded JSON, which is never smaller);
  // one that does not is only dropped, like the output past its cap; one marker says so.
  if (e.display_bytes + bundle.bytes > env_->max_display_bytes) {
    env_->metrics->DisplaysDropped(1);
    if (e.displays_dropped++ > 0) return;
    std::string marker = absl::StrCat("[display dropped: the cap is ", env_->max_display_bytes,
                                      " bytes per execution]\n");
    e.stderr_text += marker;
    Notify(e, [marker](ExecutionObserver& o) { o.OnOutput(OutputStream::kStderr, marker); }, out);
    return;
  }
  e.display_bytes += bundle.bytes;
  sandbox::v1::Display display;
  for (auto& [mime, data] : bundle.data) (*display.mutable_data())[mime] = std::move(data);
  e.displays.push_back(display);
  Notify(e, [display = std::move(display)](ExecutionObserver& o) { o.OnDisplay(display); }, out);
}

void Session::HandleToolCall(ToolCallMessage m, Deferred& out) {
  auto refuse = [&](const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    env_->metrics->ToolCall(false);  // refused: the caller never sees it
    SendOrLose(MakeToolErrorFrame(m.call_id, why), out);
  };
  if (!current_ || current_->id != m.id || !current_->running) {
    return refuse("no execution is running");
  }
  ExecState& e = *current_;
  if (!catalog_.Contains(m.server, m.tool)) {
    return refuse(absl::StrCat("unknown tool '", m.server, ".", m.tool,
                               "': it is not in this session's catalog"));
  }
  if (!e.router_open) {
    return refuse(
        "tool calls are not available in this execution: it was started with the Run rpc, "
        "or the caller closed its side of the Execute stream");
  }
  if (e.runner_ids.count(m.call_id)) return refuse("duplicate call_id");
  if (e.calls.size() >= env_->max_inflight_tool_calls) {
    return refuse(absl::StrCat("too many tool calls in flight (limit ",
                               env_->max_inflight_tool_calls, ")"));
  }
  std::string client_id = absl::StrCat(e.id, ".", e.next_call++);
  e.calls[client_id] = PendingCall{m.call_id};
  e.runner_ids[m.call_id] = client_id;
  ++e.tool_calls;
  ++env_->tool_calls_total;
  sandbox::v1::ToolCall call;
  call.set_call_id(client_id);
  call.set_server(std::move(m.server));
  call.set_tool(std::move(m.tool));
  call.set_arguments_json(m.arguments.dump());
  Notify(e, [call = std::move(call)](ExecutionObserver& o) { o.OnToolCall(call); }, out);
}

void Session::HandleDone(DoneMessage m, Deferred& out) {
  if (!current_ || current_->id != m.id) return;  // forged or stale: ignore
  std::shared_ptr<ExecState> e = std::move(current_);
  current_.reset();
  // Calls still pending cannot be answered any more; the runner already dropped them.
  // The runner stops sending past the cap and only counts what it dropped.
  if (m.dropped_bytes > 0) e->truncated = true;
  env_->metrics->OutputDropped(m.dropped_bytes);
  env_->metrics->DisplaysDropped(m.displays_dropped);
  Finished f;
  f.set_displays_dropped(static_cast<uint32_t>(std::min<uint64_t>(m.displays_dropped, UINT32_MAX)));
  f.set_output_bytes(m.output_bytes);
  if (m.result) f.set_result_repr(*m.result);
  if (m.error) {
    f.mutable_error()->set_type(m.error->type);
    f.mutable_error()->set_message(m.error->message);
    f.mutable_error()->set_traceback(m.error->traceback);
  }
  switch (m.status) {
    case DoneMessage::Status::kOk:
      f.set_status(Finished::OK);
      break;
    case DoneMessage::Status::kError:
      f.set_status(Finished::ERROR);
      break;
    case DoneMessage::Status::kInterrupted: {
      const char* kept = m.namespace_reset
                             ? "the code did not stop, so the session's namespace was reset: "
                               "every variable defined before is gone"
                             : "the session's variables are kept";
      if (e->stop == ExecState::Stop::kTimeout) {
        f.set_status(Finished::TIMEOUT);
        f.mutable_error()->set_type("TimeoutError");
        f.mutable_error()->set_message(absl::StrCat("execution exceeded its timeout of ",
                                                    e->timeout_ms, " ms and was interrupted; ",
                                                    kept));
      } else {
        f.set_status(Finished::CANCELLED);
        f.mutable_error()->set_type("Cancelled");
        f.mutable_error()->set_message(absl::StrCat("execution cancelled; ", kept));
      }
      break;
    }
  }
  f.set_namespace_reset(m.namespace_reset);
  f.set_out_digest(std::move(m.out_digest));
  FinishExecLocked(*e, std::move(f), out);
  StartNextLocked(out);
}

}  // namespace sandboxd
