// ClientAsker: a run's Asker (bridge/run_scope.h) over MCP: the question is an elicitation/create
// (form mode) to the client of the tools/call, sent through ToolCallContext::ask_client
// (a request on the call's own stream; for a stateless request, PendingRuns' input_required
// result).
//
//   ClientAsker asker(&ctx);
//   RunApprovals approvals(&policy, options, {&view, &asker, &sandbox, ctx.credential, tool, trace});
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "bridge/run_scope.h"
#include "server/tool_provider.h"

namespace gateway {

class ClientAsker : public Asker {
 public:
  // `ctx` outlives the asker.
  explicit ClientAsker(const ToolCallContext* ctx) : ctx_(ctx) {}

  std::string CannotAsk() const override {
    if (!ctx_->ask_client) return "this request has no way to ask its client";
    if (!ctx_->client_capabilities.contains("elicitation")) {
      return "this MCP client cannot be asked (it declared no elicitation capability)";
    }
    return "";
  }

  absl::StatusOr<nlohmann::json> Ask(nlohmann::json question, absl::Duration timeout,
                                     const std::shared_ptr<codemode::CancelToken>& cancel) override {
    if (ctx_->protocol_version >= "2025-11-25") question["mode"] = "form";  // before it, form was all
    return ctx_->ask_client("elicitation/create", std::move(question), timeout, cancel);
  }

 private:
  const ToolCallContext* const ctx_;
};

}  // namespace gateway
