// PendingRuns: stateless run_python calls (protocol 2026-07-28) that outlive the request that
// started them, so that the code can wait at a tool call for a person's answer.
//
// Stateless serving has no requests from server to client. A server that needs its client's
// answer (here: approval of a tool call, bridge/run_approvals.h) answers the request with an
// `input_required` result holding the questions (`inputRequests`, each an
// elicitation/create) and a sealed `requestState`; the client retries the same request with
// the answers (`inputResponses`) and the state (multi round-trip requests). The code must
// not start over on the retry: its earlier tool calls had side effects. So a stateless run
// goes on a thread of its own, held here, and the request waits for it. When the run ends,
// the request gets its result; when the run asks, the request gets input_required and the
// run keeps waiting at its call, in its sandbox. The retry finds the run by its state, hands
// over the answer and waits in turn, for the result or the next question.
//
// The state (HandleSealer::SealState) names the run, the question, and the digest of the
// call's name and arguments, and is sealed for the credential that started the run: an
// altered or expired state, another credential's, or one sent with other arguments gets one
// error. A run lives in one gateway process: a retry that reaches another replica, or comes
// after the run's result was collected or dropped, is told so.
//
// Bounds: at most `max_runs` runs held (each is a run_python call of a client: it holds a
// thread and, while it waits for an answer, its sandbox's run lock), `max_runs_per_credential`
// of one credential. A finished run whose result no request waits for keeps the result for a
// retry, charged to its credential's kept results (`max_kept_bytes_per_credential`, within
// the credential's share of the gateway's byte ceiling: ToolCallContext::budget) until a
// retry collects it or `keep` passes, when it is dropped. A result the budget cannot hold is
// dropped at once, and the retry gets RESOURCE_EXHAUSTED naming the flag instead.
//
//   PendingRuns runs(sealer, options);
//   absl::StatusOr<json> result = ctx.request_state.empty()
//       ? runs.Start([=](ToolCallContext& own) { return RunNow(name, args, own); }, name, args, ctx)
//       : runs.Resume(name, args, ctx);
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "base/mutex.h"
#include "base/thread_pool.h"
#include "handles/sandbox_handle.h"
#include "nlohmann/json.hpp"
#include "server/tool_provider.h"

namespace gateway {

struct PendingRunsOptions {
  size_t max_runs = 256;
  size_t max_runs_per_credential = 32;
  // How long a question's requestState stays valid, and how long the result of a run nobody
  // waits for is kept for a late retry. At least the approval timeout.
  absl::Duration keep = absl::Minutes(5);
  // Bytes of results (as JSON text) kept for retries, per credential
  // (--max_kept_result_bytes_per_credential).
  size_t max_kept_bytes_per_credential = 16 << 20;
};

class PendingRuns {
 public:
  using Work = std::function<absl::StatusOr<nlohmann::json>(ToolCallContext&)>;

  // `sealer` seals and opens requestState; it outlives this.
  PendingRuns(const HandleSealer* sealer, PendingRunsOptions options);
  // Cancels every run and joins every worker thread: nothing of a worker (its thread-local
  // destructors included, e.g. OpenSSL's) runs after this returns.
  ~PendingRuns();
  PendingRuns(const PendingRuns&) = delete;
  PendingRuns& operator=(const PendingRuns&) = delete;

  // Starts `work` (the call `name` with `arguments`) on a thread of its own, with a context
  // of its own made from `ctx` (its credential, capabilities and budget; its own
  // cancellation; asking the client by input_required), and waits for it as Resume does.
  // RESOURCE_EXHAUSTED past the bounds.
  absl::StatusOr<nlohmann::json> Start(Work work, const std::string& name, const nlohmann::json& arguments,
                                       ToolCallContext& ctx);

  // A retry (ctx.request_state set): hands ctx.input_responses' answer to the run's question
  // (a retry without it is asked again) and waits until the run ends (its result) or asks
  // (an input_required result). The request's progress goes to `ctx`, and cancelling it
  // cancels the run. INVALID_ARGUMENT (kInvalidState) for a state that is not valid for this
  // credential and call; FAILED_PRECONDITION when the run is not held here.
  absl::StatusOr<nlohmann::json> Resume(const std::string& name, const nlohmann::json& arguments,
                                        ToolCallContext& ctx);

  // Runs held (running, waiting for an answer, or finished and not yet collected).
  size_t size();
  // Bytes of `credential`'s results kept for retries now, and results dropped so far
  // because their credential's kept results or the byte ceiling could not hold them.
  size_t kept_bytes(const std::string& credential) const;
  uint64_t results_not_kept() const;

  static constexpr char kInvalidState[] =
      "this requestState is not valid for your credential and this call (it was altered, has "
      "expired, was issued to someone else, or came with other arguments)";

 private:
  struct Run;
  // Attaches `ctx` to `run` (after `on_attach`, nullable, under the run's lock: what a retry
  // hands over) and waits for its result or its next question. FAILED_PRECONDITION, with
  // nothing applied, when another request waits for the run.
  absl::StatusOr<nlohmann::json> Wait(const std::shared_ptr<Run>& run, ToolCallContext& ctx,
                                      const std::function<void(Run&)>& on_attach);
  // Drops finished runs nobody collected within `keep`.
  void Sweep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Charges the result of `run`, finished with no request waiting for it, to its
  // credential's kept results; one they cannot hold is replaced by the error that says so.
  // REQUIRES run.mu (not annotated: Run is defined in the .cc).
  void KeepResult(Run& run);
  // After `run` finished: waits until its result is collected, `keep` passes or the
  // gateway closes, then drops the run unless a request has it. On the run's worker.
  void HoldUntilCollected(const std::shared_ptr<Run>& run);

  const HandleSealer* const sealer_;
  const PendingRunsOptions options_;
  codemode::ByteBudgets kept_;  // results kept for retries, per credential
  std::atomic<uint64_t> not_kept_{0};
  codemode::Mutex mu_;
  std::map<std::string, std::shared_ptr<Run>> runs_ ABSL_GUARDED_BY(mu_);  // by id
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  // The runs' threads, joined by the destructor before the members they use go (and never
  // detached: a detached thread still runs its thread-local destructors after it has said
  // it is done, while the process may be tearing down the libraries those touch, such as
  // OpenSSL's thread-stop against its atexit). Parked workers are reused: creating a thread
  // costs hundreds of microseconds on the machines we measured, a run_python's whole budget.
  codemode::ThreadPool workers_;
};

}  // namespace gateway
