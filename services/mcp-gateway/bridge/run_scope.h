// What the parts of one run share, each given them at construction: the sandbox the run
// is in (RunSandbox; a lost sandbox's replacement changes it) and whom the run asks
// (Asker: the person behind its client, for approvals). Neither knows MCP: the adapter
// (adapter/run_code.h) gives an Asker over its client, a test a fake.
//
//   RunSandbox sandbox;
//   RunApprovals approvals(&policy, options,
//                          {&view, &asker, &sandbox, credential, "run_python", trace_id});
//   sandbox.Enter(binding.ref().session_id, binding.approved);  // as each attempt opens it
#pragma once

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "approvals/approval_question.h"
#include "base/cancel.h"
#include "base/mutex.h"

namespace gateway {

// An upstream tool as approvals know it: (server, tool).
using ToolId = std::pair<std::string, std::string>;

// Tools approved for a run, or "for this sandbox" (kept with the sandbox's binding).
class ApprovedTools {
 public:
  bool Has(const ToolId& tool) {
    codemode::MutexLock lock(&mu_);
    return tools_.count(tool) > 0;
  }
  void Add(const ToolId& tool) {
    codemode::MutexLock lock(&mu_);
    if (tools_.size() < kMax) tools_.insert(tool);
  }
  static constexpr size_t kMax = 4096;

 private:
  codemode::Mutex mu_;
  std::set<ToolId> tools_ ABSL_GUARDED_BY(mu_);
};

// The sandbox a run is in: none until its first attempt opens one, another when a lost one
// is replaced. Read by the run's tool calls (their audit lines, the approvals kept "for this
// sandbox") while the run core enters the next. Thread-safe.
class RunSandbox {
 public:
  // From now on the run is in sandboxd session `session_id`, whose approvals "for this
  // sandbox" are `approved` (null: none kept).
  void Enter(std::string session_id, std::shared_ptr<ApprovedTools> approved) {
    codemode::MutexLock lock(&mu_);
    id_ = std::move(session_id);
    approved_ = std::move(approved);
  }
  // sandboxd's session id ("" before the first attempt opened one).
  std::string id() const {
    codemode::MutexLock lock(&mu_);
    return id_;
  }
  std::shared_ptr<ApprovedTools> approved() const {
    codemode::MutexLock lock(&mu_);
    return approved_;
  }

 private:
  mutable codemode::Mutex mu_;
  std::string id_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<ApprovedTools> approved_ ABSL_GUARDED_BY(mu_);
};

// A question to a person about tool calls of a run: the calls (at least one), the tool
// whose code made them ("run_python"), and the bytes each call's arguments may take in it
// (approval_question.h says how an MCP client is shown them).
struct ApprovalAsk {
  std::string run_tool;
  std::vector<QuestionCall> calls;
  size_t max_summary_bytes = 0;
};

// The person's answer to an ApprovalAsk.
struct ApprovalAnswer {
  enum class Action { kAccept, kDecline, kCancel };
  Action action = Action::kDecline;
  // The choice they made of those offered: "once", "run" (the rest of this run) or
  // "sandbox" (the rest of the sandbox's life); empty when none of them.
  std::string decision;
  // For a question about several calls: whether each call, in the order asked, is checked.
  std::vector<bool> checked;
};

// Whom a run asks: the person behind its client (elicitation in MCP). Safe for concurrent
// use.
class Asker {
 public:
  Asker() = default;
  Asker(const Asker&) = delete;
  Asker& operator=(const Asker&) = delete;
  virtual ~Asker() = default;
  // Why the person cannot be asked ("this MCP client cannot be asked (...)"); empty when
  // they can.
  virtual std::string CannotAsk() const = 0;
  // Puts `question` to the person and waits for the answer. Ends CANCELLED when the run's
  // call is cancelled or `cancel` (nullable: what the question is for) is,
  // DEADLINE_EXCEEDED after `timeout`; any other error when the asking failed.
  virtual absl::StatusOr<ApprovalAnswer> Ask(const ApprovalAsk& question, absl::Duration timeout,
                                             const std::shared_ptr<codemode::CancelToken>& cancel) = 0;
};

}  // namespace gateway
