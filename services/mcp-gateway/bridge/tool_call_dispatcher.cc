// ToolCallDispatcher implementation: admission, the worker pool, and answers charged
// until they are written.
#include "bridge/tool_call_dispatcher.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/thread.h"

namespace gateway {

namespace {

codemode::ThreadPoolOptions WorkerOptions(const ToolCallLimits& limits) {
  codemode::ThreadPoolOptions o;
  o.name = "tool call";
  // Admission bounds the calls not yet written; past this a call waits for a worker.
  o.max_threads = 2 * static_cast<size_t>(std::max<uint32_t>(limits.max_in_flight, 1));
  // A worker that finds nothing queued while another already waits ends, so a run keeps
  // one idle worker: a credential's threads are its calls in flight plus one per run.
  o.max_idle = 1;
  // Answering a flood of tool calls must not crowd out everyone's requests when the CPU
  // is short (docs/gateway.md, "Tool calls and the CPU").
  o.nice = ToolCallDispatcher::kWorkerNice;
  return o;
}

}  // namespace

ToolCallDispatcher::ToolCallDispatcher(const ToolCallLimits& limits, ToolCallBudget* budget,
                                       const ExecuteHandlers& handlers, Write write)
    : limits_(limits),
      budget_(budget->Of(handlers.credential)),
      receiving_(budget->ReceivingOf(handlers.credential)),
      calls_(budget->CallsOf(handlers.credential)),
      handlers_(handlers),
      write_(std::move(write)),
      workers_(WorkerOptions(limits)) {}

void ToolCallDispatcher::Dispatch(sandbox::v1::ToolCall call) {
  if (std::string error = Admit(call); !error.empty()) {
    if (limits_.metrics != nullptr) limits_.metrics->LimitHit(LimitKind::kToolCallCap);
    if (handlers_.on_tool_call_refused) handlers_.on_tool_call_refused(call, error);
    Refuse(call, error);
    return;
  }
  auto admitted = std::make_shared<sandbox::v1::ToolCall>(std::move(call));
  absl::Status scheduled = workers_.Schedule([this, admitted] { Work(*admitted); });
  if (scheduled.ok()) return;
  // No worker for it (no thread could be started): the call was admitted, and is released.
  const size_t size = admitted->arguments_json().size();
  {
    codemode::MutexLock lock(&mu_);
    --answering_;
    --unwritten_;
    bytes_in_flight_ -= size;
  }
  budget_->Release(ToolCallBudget::kCopies * size);
  calls_->Release(1);
  Refuse(*admitted, absl::StrCat("the gateway could not answer this call: ", scheduled.message()));
}

void ToolCallDispatcher::Refuse(const sandbox::v1::ToolCall& call, const std::string& error) {
  sandbox::v1::ExecuteRequest req;
  req.mutable_tool_result()->set_call_id(call.call_id());
  req.mutable_tool_result()->set_error(error);
  write_(req);
}

void ToolCallDispatcher::JoinAll() { workers_.Stop(); }

std::string ToolCallDispatcher::Admit(const sandbox::v1::ToolCall& call) {
  codemode::MutexLock lock(&mu_);
  const size_t size = call.arguments_json().size();
  if (total_ >= limits_.max_per_run) {
    return absl::StrCat("this run made more than ", limits_.max_per_run,
                        " tool calls (the gateway's --max_tool_calls_per_run)");
  }
  if (answering_ >= limits_.max_in_flight) {
    return absl::StrCat("more than ", limits_.max_in_flight, " tool calls in flight at once "
                        "(the gateway's --max_tool_calls_in_flight); await some first");
  }
  // Answers the sandbox has not taken yet still hold their worker and bytes. Twice the
  // bound: a well-behaved sandbox may send its next call the moment it reads an answer,
  // before the worker that wrote it has counted it written.
  if (unwritten_ >= 2 * static_cast<size_t>(limits_.max_in_flight)) {
    return absl::StrCat("the sandbox has not taken the answers of ", unwritten_,
                        " tool calls (twice the gateway's --max_tool_calls_in_flight)");
  }
  if (size > limits_.max_argument_bytes) {
    return absl::StrCat("the arguments are ", size, " bytes of JSON; the limit is ",
                        limits_.max_argument_bytes, " (the gateway's --max_tool_call_bytes)");
  }
  if (bytes_in_flight_ + size > limits_.max_argument_bytes_in_flight) {
    return absl::StrCat("the calls in flight already carry ", bytes_in_flight_,
                        " bytes of arguments (the gateway's --max_tool_call_bytes_in_flight is ",
                        limits_.max_argument_bytes_in_flight, "); await some first");
  }
  if (const codemode::ByteBudget* full = calls_->Charge(1)) {
    return ToolCallBudget::CallRefusal(*full, *calls_);
  }
  if (const codemode::ByteBudget* full = budget_->Charge(ToolCallBudget::kCopies * size)) {
    calls_->Release(1);
    return ToolCallBudget::Refusal(*full, *budget_);
  }
  ++total_;
  ++answering_;
  ++unwritten_;
  bytes_in_flight_ += size;
  return "";
}

void ToolCallDispatcher::Work(const sandbox::v1::ToolCall& call) {
  const size_t size = call.arguments_json().size();
  // The upstream's answer is charged to the credential as it arrives and once parsed;
  // the parsed charge becomes part of the result's, so it is never held uncounted.
  AnswerCharges charges{receiving_, std::make_shared<codemode::ByteHold>(budget_)};
  sandbox::v1::ExecuteRequest answer = Answer(call, charges);
  const size_t held = ToolCallBudget::kCopies * size + ChargeResult(answer, *charges.parsed);
  {
    // The answering slot is freed before the answer goes out: the sandbox sends its next
    // held-back call as soon as it has the answer, and must not find it still taken.
    codemode::MutexLock lock(&mu_);
    --answering_;
  }
  write_(answer);  // blocks while the sandbox does not read
  budget_->Release(held);
  codemode::MutexLock lock(&mu_);
  --unwritten_;
  bytes_in_flight_ -= size;
  calls_->Release(1);
}

size_t ToolCallDispatcher::ChargeResult(sandbox::v1::ExecuteRequest& answer,
                                        codemode::ByteHold& parsed) {
  const size_t n = ToolCallBudget::kCopies * answer.tool_result().result_json().size();
  parsed.ShrinkTo(n);  // what the parse holds beyond the result's charge is freed
  const size_t more = n - parsed.held();
  const codemode::ByteBudget* full = more == 0 ? nullptr : budget_->Charge(more);
  if (full == nullptr) {
    parsed.Detach();  // its bytes are the result's now, released with them
    return n;
  }
  parsed.ShrinkTo(0);
  const std::string call_id = answer.tool_result().call_id();
  answer.mutable_tool_result()->Clear();
  answer.mutable_tool_result()->set_call_id(call_id);
  answer.mutable_tool_result()->set_error(ToolCallBudget::Refusal(*full, *budget_));
  return 0;
}

sandbox::v1::ExecuteRequest ToolCallDispatcher::Answer(const sandbox::v1::ToolCall& call,
                                                       const AnswerCharges& charges) const {
  sandbox::v1::ExecuteRequest req;
  bool answered = codemode::RunContained("tool call", [&] {
    if (handlers_.on_tool_call) {
      *req.mutable_tool_result() = handlers_.on_tool_call(call, charges);
    } else {
      req.mutable_tool_result()->set_error("this client does not route tool calls");
    }
  });
  if (!answered) {
    req.mutable_tool_result()->Clear();
    req.mutable_tool_result()->set_error("the gateway failed while routing this call");
  } else if (const size_t n = req.tool_result().result_json().size();
             n > limits_.max_result_bytes) {
    req.mutable_tool_result()->set_error(absl::StrCat(
        "the result is ", n, " bytes of JSON; the limit is ", limits_.max_result_bytes,
        " (the gateway's --max_tool_result_bytes)"));
  }
  req.mutable_tool_result()->set_call_id(call.call_id());
  return req;
}

}  // namespace gateway
