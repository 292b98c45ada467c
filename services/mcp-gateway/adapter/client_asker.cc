// A run's questions to the person behind its MCP client. See client_asker.h.
#include "adapter/client_asker.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace gateway {
namespace {

using nlohmann::json;

// The ApprovalAnswer an ElicitResult to a question about `calls` calls gives: an action
// other than accept or cancel declines; a decision or a checkbox of another type is none.
ApprovalAnswer AnswerOf(const json& result, size_t calls) {
  ApprovalAnswer answer;
  auto action = result.find("action");
  if (action == result.end() || *action != "accept") {
    answer.action = action != result.end() && *action == "cancel" ? ApprovalAnswer::Action::kCancel
                                                                   : ApprovalAnswer::Action::kDecline;
    return answer;
  }
  answer.action = ApprovalAnswer::Action::kAccept;
  auto content = result.find("content");
  if (content == result.end() || !content->is_object()) return answer;  // no decision
  auto decision = content->find("decision");
  if (decision != content->end() && decision->is_string()) answer.decision = decision->get<std::string>();
  for (size_t i = 0; i < calls && calls > 1; ++i) {
    auto box = content->find(absl::StrCat("call_", i + 1));
    answer.checked.push_back(box != content->end() && box->is_boolean() && box->get<bool>());
  }
  return answer;
}

}  // namespace

std::string ClientAsker::CannotAsk() const {
  if (!ctx_->ask_client) return "this request has no way to ask its client";
  if (!ctx_->client_capabilities.contains("elicitation")) {
    return "this MCP client cannot be asked (it declared no elicitation capability)";
  }
  return "";
}

absl::StatusOr<ApprovalAnswer> ClientAsker::Ask(const ApprovalAsk& question, absl::Duration timeout,
                                                const std::shared_ptr<codemode::CancelToken>& cancel) {
  json params = ApprovalQuestion(question.run_tool, question.calls, question.max_summary_bytes);
  if (ctx_->protocol_version >= "2025-11-25") params["mode"] = "form";  // before it, form was all
  absl::StatusOr<json> result = ctx_->ask_client("elicitation/create", std::move(params), timeout, cancel);
  if (!result.ok()) return result.status();
  return AnswerOf(*result, question.calls.size());
}


}  // namespace gateway
