// The approval gate of a run. See run_approvals.h.
#include "bridge/run_approvals.h"

#include <openssl/sha.h>

#include <algorithm>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "approvals/approval_question.h"
#include "base/log_text.h"
#include "base/utf8.h"
#include "spdlog/spdlog.h"

namespace gateway {

using nlohmann::json;

namespace {

std::string Sha256Hex(const std::string& data) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(digest), sizeof(digest)));
}

}  // namespace

std::vector<UpstreamStatus> ApplyApprovalPolicy(std::vector<UpstreamStatus> view, const ApprovalPolicy& policy) {
  for (UpstreamStatus& server : view) {
    std::vector<UpstreamTool> kept;
    for (UpstreamTool& tool : server.tools) {
      const Approval a = policy.For(server.name, tool.name, tool.annotations);
      if (a == Approval::kDeny) continue;
      if (a == Approval::kAsk) tool.description = "[needs approval] " + tool.description;
      kept.push_back(std::move(tool));
    }
    server.tools = std::move(kept);
  }
  return view;
}

RunApprovals::RunApprovals(const ApprovalPolicy* policy, ApprovalOptions options, ApprovalScope scope)
    : policy_(policy), options_(options), scope_(std::move(scope)) {}

// The approvals kept for the run's sandbox (null: none).
std::shared_ptr<ApprovedTools> RunApprovals::SandboxApprovals() const {
  return scope_.sandbox != nullptr ? scope_.sandbox->approved() : nullptr;
}

const UpstreamTool* RunApprovals::Find(const std::string& server, const std::string& tool) const {
  for (const UpstreamStatus& s : *scope_.view) {
    if (s.name != server) continue;
    for (const UpstreamTool& t : s.tools) {
      if (t.name == tool) return &t;
    }
  }
  return nullptr;
}

bool RunApprovals::Approved(const ToolId& tool) {
  const std::shared_ptr<ApprovedTools> sandbox = SandboxApprovals();
  return run_.Has(tool) || (sandbox && sandbox->Has(tool));
}

namespace {

// The metric's fixed set of decisions, from the words the log line uses.
ApprovalDecision DecisionOf(const std::string& decision) {
  if (decision == "denied") return ApprovalDecision::kPolicyDenied;
  if (decision == "timed out") return ApprovalDecision::kTimeout;
  if (absl::StartsWith(decision, "abandoned")) return ApprovalDecision::kWithdrawn;
  if (absl::StartsWith(decision, "approved") || decision == "once" || decision == "run" ||
      decision == "sandbox") {
    return ApprovalDecision::kApproved;
  }
  return ApprovalDecision::kDeclined;  // declined, cancelled, refused
}

}  // namespace

absl::Status RunApprovals::Check(const std::string& server, const std::string& tool, const json& arguments,
                                 const std::shared_ptr<codemode::CancelToken>& cancel,
                                 std::string* decision) {
  std::string ignored;
  std::string& decided = decision ? *decision : ignored;
  auto w = std::make_shared<Waiter>();
  w->server = server;
  w->tool = tool;
  w->name = absl::StrCat(server, ".", tool);
  w->arguments = arguments;
  w->cancel = cancel;
  // A tool the run's view lacks has no annotations to judge it by, and its catalog (built
  // from the view) does not offer it: never allowed unasked. Denied tools are not in the
  // view either, so the policy speaks first.
  const UpstreamTool* known = Find(server, tool);
  const Approval approval = policy_->For(server, tool, known ? known->annotations : json::object());
  if (approval == Approval::kDeny) {
    decided = GatewayMetrics::Name(ApprovalDecision::kPolicyDenied);
    Record(*w, "denied", absl::StrCat("policy (", policy_->Reason(server, tool), ")"));
    return absl::PermissionDeniedError(absl::StrCat(w->name, " is denied by the gateway's operator"));
  }
  if (known == nullptr) {
    decided = GatewayMetrics::Name(ApprovalDecision::kPolicyDenied);
    Record(*w, "denied", "gateway (not in the run's catalog)");
    return absl::PermissionDeniedError(absl::StrCat(w->name, " is not in the catalog this run was given"));
  }
  if (approval == Approval::kAllow) return absl::OkStatus();
  ask_mu_.Lock();
  if (Approved(w->id())) {
    const bool by_run = run_.Has(w->id());
    ask_mu_.Unlock();
    decided = GatewayMetrics::Name(ApprovalDecision::kApproved);
    Record(*w, "approved", by_run ? "earlier answer (run)" : "earlier answer (sandbox)");
    return absl::OkStatus();
  }
  queue_.push_back(w);
  while (!w->decided) {
    if (asking_) {  // another call's question is out: wait for it, then maybe ask ours
      auto turn = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ask_mu_) { return w->decided || !asking_; };
      ask_mu_.Await(absl::Condition(&turn));
      continue;
    }
    asking_ = true;
    // The calls made with this one (asyncio.gather) join its question: it goes out once
    // none has come for `gather`, it is full, or a second has passed.
    const absl::Time latest = absl::Now() + std::max(options_.gather, absl::Seconds(1));
    while (queue_.size() < options_.max_batch && absl::Now() < latest) {
      const size_t before = queue_.size();
      auto joined = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ask_mu_) { return queue_.size() != before; };
      if (!ask_mu_.AwaitWithTimeout(absl::Condition(&joined), std::min(options_.gather, latest - absl::Now()))) break;
    }
    std::vector<std::shared_ptr<Waiter>> batch = TakeBatch();
    ask_mu_.Unlock();
    if (!batch.empty()) Ask(batch);
    ask_mu_.Lock();
    for (const auto& b : batch) {
      if (b->decision == "run" || b->decision == "sandbox") run_.Add(b->id());
      if (b->decision == "sandbox" && SandboxApprovals()) SandboxApprovals()->Add(b->id());
      b->decided = true;
    }
    asking_ = false;
  }
  ask_mu_.Unlock();
  decided = GatewayMetrics::Name(DecisionOf(w->decision.empty() ? "refused" : w->decision));
  return Outcome(*w);
}

std::vector<std::shared_ptr<RunApprovals::Waiter>> RunApprovals::TakeBatch() {
  std::vector<std::shared_ptr<Waiter>> batch;
  while (!queue_.empty() && batch.size() < options_.max_batch) {
    std::shared_ptr<Waiter> next = std::move(queue_.front());
    queue_.pop_front();
    if (next->cancel && next->cancel->cancelled()) {  // its execution ended while it queued
      next->decision = "abandoned (the run ended)";
      next->decided = true;
      Record(*next, next->decision, "nobody: the run ended");
      continue;
    }
    if (Approved(next->id())) {  // a "for the rest of this run" came meanwhile
      next->decision = "approved by an earlier answer";
      next->decided = true;
      Record(*next, "approved", "earlier answer (run)");
      continue;
    }
    batch.push_back(std::move(next));
  }
  return batch;
}

absl::Status RunApprovals::Outcome(const Waiter& w) {
  const std::string& d = w.decision;
  if (!w.why.empty()) {
    return absl::PermissionDeniedError(absl::StrCat(
        w.name, " needs a person's approval, and ", w.why, ". An operator can allow it with "
        "\"approval\": {\"allow\": [\"", w.tool.substr(0, 128), "\"]} in the server's mcpServers entry, "
        "or --approval_default"));
  }
  if (d == "once" || d == "run" || d == "sandbox" || d == "approved by an earlier answer") {
    return absl::OkStatus();
  }
  if (d == "timed out") {
    return absl::PermissionDeniedError(absl::StrCat(
        w.name, " was not approved: nobody answered within ", absl::FormatDuration(options_.timeout)));
  }
  if (d == "declined" || d == "cancelled") {
    return absl::PermissionDeniedError(absl::StrCat(w.name, " was ", d, " by the user"));
  }
  return absl::PermissionDeniedError(absl::StrCat(w.name, " was not approved: ", d));
}

ApprovalAsk RunApprovals::Question(const std::vector<std::shared_ptr<Waiter>>& batch) const {
  ApprovalAsk question{scope_.run_tool, {}, options_.max_summary_bytes};
  for (const auto& w : batch) {
    const UpstreamTool* tool = Find(w->server, w->tool);  // in the view: Check asks no other
    question.calls.push_back({w->server, w->tool, &w->arguments,
                              {tool ? &tool->input_schema : nullptr, &policy_->Hidden(w->server)}});
  }
  return question;
}

void RunApprovals::Ask(const std::vector<std::shared_ptr<Waiter>>& batch) {
  auto decide_all = [&](const std::string& decision, const std::string& why) {
    // Who decided: the person, or nobody (no answer in time, the run ended), or the reason
    // the client could not be asked: the log line tells them apart.
    const std::string by = !why.empty() ? why
                           : decision == "timed out" ? "nobody: no answer in time"
                           : absl::StartsWith(decision, "abandoned") ? "nobody: the run ended"
                                                                     : "user";
    for (const auto& w : batch) {
      w->decision = decision;
      w->why = why;
      Record(*w, why.empty() ? decision : "refused", by);
    }
  };
  if (scope_.asker == nullptr) return decide_all("", "this request has no way to ask its client");
  if (std::string why = scope_.asker->CannotAsk(); !why.empty()) return decide_all("", why);
  const std::shared_ptr<codemode::CancelToken>& cancel = batch[0]->cancel;
  // The question is withdrawn when the execution whose calls ask ends: no answer can
  // approve a call of an execution that is gone.
  absl::StatusOr<ApprovalAnswer> answer = scope_.asker->Ask(Question(batch), options_.timeout, cancel);
  if (!answer.ok()) {
    if (absl::IsDeadlineExceeded(answer.status())) return decide_all("timed out", "");
    if (absl::IsCancelled(answer.status())) {
      return decide_all(cancel && cancel->cancelled() ? "abandoned (the run ended)" : "cancelled", "");
    }
    return decide_all("", absl::StrCat("asking the MCP client failed: ",
                                       codemode::Utf8Prefix(std::string(answer.status().message()), 200)));
  }
  if (answer->action != ApprovalAnswer::Action::kAccept) {
    return decide_all(answer->action == ApprovalAnswer::Action::kCancel ? "cancelled" : "declined", "");
  }
  // Anything but one of the offered choices approves nothing.
  std::string chosen;
  for (const char* choice : {"once", "run", "sandbox"}) {
    if (answer->decision == choice) chosen = choice;
  }
  if (chosen.empty()) return decide_all("declined", "");
  std::vector<bool> checked(batch.size(), batch.size() == 1);
  std::set<ToolId> refused;  // tools with a call the person unchecked
  for (size_t i = 0; i < batch.size() && batch.size() > 1; ++i) {
    checked[i] = i < answer->checked.size() && answer->checked[i];
    if (!checked[i]) refused.insert(batch[i]->id());
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    // "For the rest of this run" (or sandbox) does not cover a tool one of whose calls the
    // person refused in the same answer: its checked calls go once, and its next call asks
    // again: a refused call repeated does not go through unasked.
    const std::string scope = refused.count(batch[i]->id()) ? "once" : chosen;
    batch[i]->decision = checked[i] ? scope : "declined";
    Record(*batch[i], batch[i]->decision, "user");
  }
}


void RunApprovals::Record(const Waiter& w, const std::string& decision, const std::string& by) const {
  if (options_.metrics != nullptr) options_.metrics->Approval(DecisionOf(decision));
  const json line = {{"credential", scope_.credential},
                     {"server", w.server},
                     {"tool", w.tool},
                     {"arguments_sha256", Sha256Hex(w.arguments.dump())},
                     {"decision", decision},
                     {"by", by},
                     {"trace_id", scope_.trace_id}};
  spdlog::info("approval: {}", codemode::LogText(line.dump(-1, ' ', false, json::error_handler_t::replace)));
}

}  // namespace gateway
