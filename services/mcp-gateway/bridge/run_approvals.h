// RunApprovals: the approval gate of one run (RouterOptions::gate). Before a tool call of
// the sandboxed code goes upstream, the policy (approvals/approval_policy.h) says allow,
// ask or deny. To ask, the run's Asker (run_scope.h; over MCP: an elicitation/create in
// form mode to the run's client) puts a question naming the server, the tool and the
// arguments as approvals/approval_question.h shows them (escaped, hidden only where the
// tool's schema or the operator says, what is not shown marked and said), and the code
// waits at its call, in its sandbox, until the person answers:
//
//   once     the call goes upstream
//   run      so do this tool's later calls in this run, unasked
//   sandbox  and in later runs in this sandbox (on this gateway)
//   decline / cancel / no answer within --approval_timeout: the code gets a ToolError
//
// "This tool" is the (server, tool) pair: server "up" with tool "v2.run_command" and server
// "up.v2" with tool "run_command" are two tools, never one joined name.
//
// A client that cannot be asked (Asker::CannotAsk: over MCP, one that declared no
// elicitation capability) gets a ToolError that says why and how an operator allows the
// tool. Nothing is approved silently. The calls of one run that wait together
// (asyncio.gather of 50 writes) are asked about in one question listing them all,
// approvable together or one by one; questions of one run go one at a time, so that a "for
// the rest of this run" answers the calls waiting behind it. Every decision is logged as
// one structured line ("approval: {json}").
//
//   RunSandbox sandbox;  // entered as each attempt opens its sandbox
//   RunApprovals approvals(&policy, options,
//                          {&view, &asker, &sandbox, credential, "run_python", trace_id});
//   RouterOptions calls;
//   calls.gate = [&](auto& server, auto& tool, auto& args, auto& cancel, auto* decision) {
//     return approvals.Check(server, tool, args, cancel, decision);
//   };
#pragma once

#include <deque>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "approvals/approval_policy.h"
#include "base/cancel.h"
#include "base/mutex.h"
#include "bridge/run_scope.h"
#include "metrics/gateway_metrics.h"
#include "nlohmann/json.hpp"
#include "upstream/manager.h"

namespace gateway {

struct ApprovalOptions {
  // An unanswered request is declined after this.
  absl::Duration timeout = absl::Minutes(5);
  // Calls that need asking join the question of the first while each comes within this of
  // the one before (asyncio.gather), for at most a second (or `gather`, when longer). A lone
  // call waits this long before it is asked (--approval_gather).
  absl::Duration gather = absl::Milliseconds(10);
  // At most this many calls in one question; the rest are in the next.
  size_t max_batch = 50;
  // The arguments shown to the person, at most this many bytes of JSON.
  size_t max_summary_bytes = 1024;
  // Decisions are counted here (null: not counted).
  GatewayMetrics* metrics = nullptr;
};

// The upstreams as a run's code sees them: the tools the policy denies are left out, and
// the description of each tool that asks starts with "[needs approval] " (which help(),
// _discover() and _schema() show).
std::vector<UpstreamStatus> ApplyApprovalPolicy(std::vector<UpstreamStatus> view, const ApprovalPolicy& policy);

// The run a gate judges the calls of.
struct ApprovalScope {
  // The upstreams as the run sees them (their tools' annotations and schemas), the view its
  // catalog was built from: a call of a tool not in it is refused.
  const std::vector<UpstreamStatus>* view = nullptr;
  // Whom a call that needs approval is put to.
  Asker* asker = nullptr;
  // The sandbox the run is in: its approvals "for this sandbox" (null: none kept).
  const RunSandbox* sandbox = nullptr;
  // Who runs, and in which trace: the approval log lines name both.
  std::string credential;
  // The tool the code runs in ("run_python", "run_javascript"), which the question names.
  std::string run_tool;
  std::string trace_id;
};

class RunApprovals {
 public:
  RunApprovals(const ApprovalPolicy* policy, ApprovalOptions options, ApprovalScope scope);

  // OK when the call may go upstream; else PERMISSION_DENIED with the ToolError's text.
  // Calls that wait for approval together are asked about in one question.
  // `decision`, when given, gets what was decided for a call that needed a decision
  // (GatewayMetrics::Name(ApprovalDecision): "approved", "declined", ...), and stays empty for
  // a call the policy allows: the audit line's "approval".
  absl::Status Check(const std::string& server, const std::string& tool, const nlohmann::json& arguments,
                     const std::shared_ptr<codemode::CancelToken>& cancel,
                     std::string* decision = nullptr);

 private:
  // One call waiting for its answer.
  struct Waiter {
    std::string server, tool;
    std::string name;  // "server.tool", for the code's ToolError only
    ToolId id() const { return {server, tool}; }
    nlohmann::json arguments;
    std::shared_ptr<codemode::CancelToken> cancel;
    bool decided = false;
    std::string decision;  // "once", "run", "sandbox", "declined", "cancelled", "timed out", ...
    std::string why;       // set when the client could not be asked
  };
  // The tool in the run's view (null: not in it).
  const UpstreamTool* Find(const std::string& server, const std::string& tool) const;
  bool Approved(const ToolId& tool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(ask_mu_);
  std::shared_ptr<ApprovedTools> SandboxApprovals() const;
  // Takes the next question's calls off the queue (those approved meanwhile are decided).
  std::vector<std::shared_ptr<Waiter>> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ask_mu_);
  // Asks the client about `batch` and decides each (without the lock).
  void Ask(const std::vector<std::shared_ptr<Waiter>>& batch);
  // The question about `batch`'s calls.
  ApprovalAsk Question(const std::vector<std::shared_ptr<Waiter>>& batch) const;
  absl::Status Outcome(const Waiter& w);
  void Record(const Waiter& w, const std::string& decision, const std::string& by) const;

  const ApprovalPolicy* const policy_;
  const ApprovalOptions options_;
  const ApprovalScope scope_;
  // One question at a time per run (see above).
  codemode::Mutex ask_mu_;
  ApprovedTools run_;
  bool asking_ ABSL_GUARDED_BY(ask_mu_) = false;
  std::deque<std::shared_ptr<Waiter>> queue_ ABSL_GUARDED_BY(ask_mu_);
};

}  // namespace gateway
