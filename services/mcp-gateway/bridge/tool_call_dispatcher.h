// ToolCallDispatcher: the admission of one execution's tool calls (the sandboxed code's
// calls to upstream tools) and the workers that answer them. The Execute stream's loop
// hands it each call; it refuses the calls past the run's bounds (ToolCallLimits) or the
// credential's and everyone's (ToolCallBudget) at once with an error, and answers the rest
// through ExecuteHandlers::on_tool_call on workers of its own, writing every answer with
// the function it was given. It knows no gRPC: SandboxClient writes the answers to the
// Execute stream, unit tests to a recorder.
//
//   ToolCallDispatcher calls(limits, &budget, handlers,
//                            [&](const sandbox::v1::ExecuteRequest& r) { stream.Write(r); });
//   while (stream.Read(&msg)) if (msg.has_tool_call()) calls.Dispatch(msg.tool_call());
//   calls.JoinAll();  // the stream ended; waits for the calls still being answered
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "base/mutex.h"
#include "base/thread_pool.h"
#include "bridge/sandboxes.h"
#include "bridge/tool_call_budget.h"
#include "metrics/gateway_metrics.h"
#include "sandbox/v1/sandbox.pb.h"

namespace gateway {

// Bounds on the tool calls of one execution. Calls past either bound are answered at once
// with an error, which the sandboxed code sees as a ToolError; the gateway never grows a
// thread or a queue per call without limit.
struct ToolCallLimits {
  uint32_t max_in_flight = 64;    // calls being answered at the same time
  uint32_t max_per_run = 10000;   // calls in total
  // What every run's calls share, per credential over all its runs and for everyone:
  // calls in flight (each holds a gateway thread, and a credential may run many
  // sandboxes) and bytes held (ToolCallBudget).
  ToolCallBudgetOptions shared;
  // JSON sizes of one call's arguments and of one result; larger ones become ToolErrors
  // before anything parses them (arguments) or sends them on (results).
  size_t max_argument_bytes = 4u << 20;
  size_t max_result_bytes = 8u << 20;
  // Arguments of the calls in flight together: each parsed copy costs a few times its
  // size, so this bounds what a flood of large calls can make the gateway hold.
  size_t max_argument_bytes_in_flight = 32u << 20;
  // A cancelled run's Execute stream must end within this of its `cancel` message; past
  // it (a stream backed up by code that reads none of its answers) the gRPC call is
  // cancelled instead (the gateway's --sandbox_cancel_grace).
  absl::Duration cancel_grace = absl::Seconds(5);
  // Calls refused by the caps above are counted here, and SandboxClient's placements (null:
  // not counted).
  GatewayMetrics* metrics = nullptr;
};

// Answers the tool calls of one execution within ToolCallLimits, on workers that are
// started as calls overlap (at most max_in_flight) and reused while calls keep coming, so
// a run that makes 100,000 calls starts a handful of threads, not 100,000. A call holds
// its slot, its place in the credential's count of calls (`budget`'s CallsOf) and its
// bytes (arguments, then also its result; charged to the run and to the credential's
// share of `budget`) until its answer is written: a sandbox that does not read its answers
// stalls the write, and must not get further calls admitted meanwhile. A worker that finds
// nothing queued while another already waits ends, so a run keeps one idle worker: the
// threads of a credential's runs are its calls in flight plus one per run, not the sum of
// each run's peak (idle workers kept until each stream ended would add up across runs).
// Dispatch and JoinAll are called by one thread (the Execute loop's) only.
class ToolCallDispatcher {
 public:
  // The workers' nice value above the gateway's: when the CPU is short, the threads that
  // answer tool calls get about a tenth of the share of those serving requests, so one
  // sandbox's flood of calls slows other clients' runs little; alone, it loses nothing.
  static constexpr int kWorkerNice = 10;

  // Writes one answer (an ExecuteRequest holding a tool_result) to the sandbox; called by
  // the workers and, for refusals, by Dispatch. It may block while the sandbox does not
  // read, and drops answers once the run has ended.
  using Write = std::function<void(const sandbox::v1::ExecuteRequest&)>;

  // `handlers` (on_tool_call, credential) must outlive the dispatcher; `budget` is shared
  // by every execution.
  ToolCallDispatcher(const ToolCallLimits& limits, ToolCallBudget* budget,
                     const ExecuteHandlers& handlers, Write write);
  ~ToolCallDispatcher() { JoinAll(); }  // before the members its workers use
  ToolCallDispatcher(const ToolCallDispatcher&) = delete;
  ToolCallDispatcher& operator=(const ToolCallDispatcher&) = delete;

  // Admits `call` and queues it for a worker (starting one when every idle one already has
  // a call), or writes its refusal at once.
  void Dispatch(sandbox::v1::ToolCall call) ABSL_LOCKS_EXCLUDED(mu_);

  // Waits for the calls in flight; their late answers are dropped by the writer.
  void JoinAll() ABSL_LOCKS_EXCLUDED(mu_);

  // Workers started and not yet returned (tests: the pool grows with overlapping calls and
  // shrinks to one idle worker).
  size_t workers_running() const { return workers_.threads(); }

 private:
  // Empty when the call may go ahead (and is then counted in flight); otherwise why not.
  std::string Admit(const sandbox::v1::ToolCall& call) ABSL_LOCKS_EXCLUDED(mu_);
  // Answers an admitted call and writes the answer, on a worker.
  void Work(const sandbox::v1::ToolCall& call) ABSL_LOCKS_EXCLUDED(mu_);
  // Writes `error` as the answer to `call`.
  void Refuse(const sandbox::v1::ToolCall& call, const std::string& error);
  // Charges the result to the credential until it is written (returns the bytes charged),
  // taking over what `parsed` holds of it; past the budget the sandbox gets a ToolError
  // instead of the result.
  size_t ChargeResult(sandbox::v1::ExecuteRequest& answer, codemode::ByteHold& parsed);
  sandbox::v1::ExecuteRequest Answer(const sandbox::v1::ToolCall& call,
                                     const AnswerCharges& charges) const;

  const ToolCallLimits limits_;
  // The credential's, held for the run: its charges must be released to the same budget.
  const std::shared_ptr<codemode::ByteBudget> budget_;
  const std::shared_ptr<codemode::ByteBudget> receiving_;  // the credential's; may be null
  const std::shared_ptr<codemode::ByteBudget> calls_;  // the credential's count, 1 per call
  const ExecuteHandlers& handlers_;
  const Write write_;
  mutable codemode::Mutex mu_;
  uint32_t total_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t answering_ ABSL_GUARDED_BY(mu_) = 0;  // admitted and not yet answered
  size_t unwritten_ ABSL_GUARDED_BY(mu_) = 0;    // admitted and not yet written back
  size_t bytes_in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // arguments of the unwritten calls
  // Last: joined (JoinAll) before the members its tasks use go. At most one parked; a
  // call holds its worker until written, which admission bounds (twice max_in_flight).
  codemode::ThreadPool workers_;
};

}  // namespace gateway
