// ToolCallDispatcher implementation: admission, the worker pool, and answers charged
// until they are written.
#include "bridge/tool_call_dispatcher.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/thread.h"

namespace gateway {

ToolCallDispatcher::ToolCallDispatcher(const ToolCallLimits& limits, ToolCallBudget* budget,
                                       const ExecuteHandlers& handlers, Write write)
    : limits_(limits),
      budget_(budget->Of(handlers.credential)),
      receiving_(budget->ReceivingOf(handlers.credential)),
      calls_(budget->CallsOf(handlers.credential)),
      handlers_(handlers),
      write_(std::move(write)) {}

void ToolCallDispatcher::Dispatch(sandbox::v1::ToolCall call) {
  JoinEnded();
  if (std::string error = Admit(call); !error.empty()) {
    if (limits_.metrics != nullptr) limits_.metrics->LimitHit(LimitKind::kToolCallCap);
    if (handlers_.on_tool_call_refused) handlers_.on_tool_call_refused(call, error);
    sandbox::v1::ExecuteRequest req;
    req.mutable_tool_result()->set_call_id(call.call_id());
    req.mutable_tool_result()->set_error(error);
    write_(req);
    return;
  }
  codemode::MutexLock lock(&mu_);
  queue_.push_back(std::move(call));
  // Unlock wakes an idle worker; start one when every idle one already has a call.
  if (queue_.size() > idle_) {
    std::thread worker = codemode::StartThread("tool call", [this] { Work(); });
    const std::thread::id id = worker.get_id();
    workers_.emplace(id, std::move(worker));
    ++running_;
  }
}

void ToolCallDispatcher::JoinAll() {
  {
    codemode::MutexLock lock(&mu_);
    closing_ = true;
  }
  for (auto& worker : workers_) worker.second.join();
  workers_.clear();
  codemode::MutexLock lock(&mu_);
  ended_.clear();
}

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

void ToolCallDispatcher::JoinEnded() {
  std::vector<std::thread::id> ended;
  {
    codemode::MutexLock lock(&mu_);
    ended.swap(ended_);
  }
  for (const std::thread::id& id : ended) {
    auto it = workers_.find(id);
    if (it == workers_.end()) continue;
    it->second.join();
    workers_.erase(it);
  }
}

void ToolCallDispatcher::Work() {
  mu_.Lock();
  // One idle worker takes the next call at once; more would only wait, holding threads
  // the credential's count no longer sees.
  while (!queue_.empty() || idle_ == 0) {
    ++idle_;
    mu_.Await(absl::Condition(this, &ToolCallDispatcher::HasWorkOrClosing));
    --idle_;
    if (queue_.empty()) break;  // closing, and nothing left to answer
    sandbox::v1::ToolCall call = std::move(queue_.front());
    queue_.pop_front();
    mu_.Unlock();
    const size_t size = call.arguments_json().size();
    // The upstream's answer is charged to the credential as it arrives and once parsed;
    // the parsed charge becomes part of the result's, so it is never held uncounted.
    AnswerCharges charges{receiving_, std::make_shared<codemode::ByteHold>(budget_)};
    sandbox::v1::ExecuteRequest answer = Answer(call, charges);
    const size_t held = ToolCallBudget::kCopies * size + ChargeResult(answer, *charges.parsed);
    mu_.Lock();
    // The answering slot is freed before the answer goes out: the sandbox sends its next
    // held-back call as soon as it has the answer, and must not find it still taken.
    --answering_;
    mu_.Unlock();
    write_(answer);  // blocks while the sandbox does not read
    budget_->Release(held);
    mu_.Lock();
    --unwritten_;
    bytes_in_flight_ -= size;
    calls_->Release(1);
  }
  --running_;
  ended_.push_back(std::this_thread::get_id());
  mu_.Unlock();
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
