// ClientAsker: a run's Asker (bridge/run_scope.h) over MCP: the question is an
// elicitation/create (form mode; its params from approval_question.h) to the client of the
// tools/call, sent through ToolCallContext::ask_client (a request on the call's own stream;
// for a stateless request, PendingRuns' input_required result), and the client's
// ElicitResult ({action, content?}) becomes the person's ApprovalAnswer.
//
//   ClientAsker asker(&ctx);
//   RunApprovals approvals(&policy, options, {&view, &asker, &sandbox, ctx.credential, tool, trace});
#pragma once

#include <memory>
#include <string>

#include "bridge/run_scope.h"
#include "server/tool_provider.h"

namespace gateway {

class ClientAsker : public Asker {
 public:
  // `ctx` outlives the asker.
  explicit ClientAsker(const ToolCallContext* ctx) : ctx_(ctx) {}

  std::string CannotAsk() const override;
  absl::StatusOr<ApprovalAnswer> Ask(const ApprovalAsk& question, absl::Duration timeout,
                                     const std::shared_ptr<codemode::CancelToken>& cancel) override;

 private:
  const ToolCallContext* const ctx_;
};

}  // namespace gateway
