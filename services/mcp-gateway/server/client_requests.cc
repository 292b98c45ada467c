// Requests to the MCP client. See client_requests.h.
#include "server/client_requests.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "jsonrpc/jsonrpc.h"

namespace gateway {

using json = nlohmann::json;

absl::StatusOr<json> ClientRequests::Ask(const std::shared_ptr<ReplySink>& sink, const std::string& method,
                                         json params, absl::Duration timeout,
                                         const std::shared_ptr<codemode::CancelToken>& cancel) {
  if (sink == nullptr) return absl::FailedPreconditionError("this call has no way to reach its client");
  auto pending = std::make_shared<Pending>();
  std::string id;
  {
    codemode::MutexLock lock(&mu_);
    if (closed_) return absl::CancelledError("the MCP session ended");
    if (pending_.size() >= max_pending_) {
      return absl::ResourceExhaustedError(
          absl::StrCat(pending_.size(), " requests to this client are waiting for answers already"));
    }
    // Ours alone, per session: a prefix and a counter.
    id = absl::StrCat("gw-", ++next_id_);
    pending_[id] = pending;
  }
  if (cancel) {
    cancel->OnCancel([pending] {
      codemode::MutexLock lock(&pending->mu);
      pending->cancelled = true;
    });
  }
  sink->Send({{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}});

  bool in_time, answered, closed;
  json response;
  {
    codemode::MutexLock lock(&pending->mu);
    auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(pending->mu) {
      return pending->answered || pending->closed || pending->cancelled;
    };
    in_time = pending->mu.AwaitWithTimeout(absl::Condition(&done), timeout);
    answered = pending->answered;
    closed = pending->closed;
    if (answered) response = std::move(pending->response);
  }
  {
    codemode::MutexLock lock(&mu_);
    pending_.erase(id);
  }
  if (answered) return Result(response);
  if (closed) return absl::CancelledError("the MCP session ended");
  // Unanswered: the client may stop asking its user.
  sink->Send(MakeNotification("notifications/cancelled",
                              {{"requestId", id}, {"reason", in_time ? "cancelled" : "timed out"}}));
  if (!in_time) return absl::DeadlineExceededError("the client did not answer in time");
  return absl::CancelledError("the call was cancelled");
}

absl::StatusOr<json> ClientRequests::Result(const json& response) {
  auto result = response.find("result");
  if (result != response.end() && result->is_object()) return *result;
  auto error = response.find("error");
  if (error != response.end() && error->is_object()) {
    auto message = error->find("message");
    std::string text = message != error->end() && message->is_string() ? message->get<std::string>() : "no message";
    text = text.substr(0, 1024);
    auto code = error->find("code");
    if (code != error->end() && code->is_number_integer() && *code == -32601) {
      return absl::UnimplementedError(text);
    }
    return absl::FailedPreconditionError(text);
  }
  return absl::FailedPreconditionError("the client's answer has neither a result object nor an error");
}

bool ClientRequests::Answer(const json& message) {
  auto id = message.find("id");
  if (id == message.end() || !id->is_string()) return false;
  std::shared_ptr<Pending> pending;
  {
    codemode::MutexLock lock(&mu_);
    auto it = pending_.find(id->get<std::string>());
    if (it == pending_.end()) return false;
    pending = it->second;
  }
  codemode::MutexLock lock(&pending->mu);
  if (pending->answered) return false;
  pending->answered = true;
  pending->response = message;
  return true;
}

void ClientRequests::CloseAll() {
  std::vector<std::shared_ptr<Pending>> waiting;
  {
    codemode::MutexLock lock(&mu_);
    closed_ = true;
    for (const auto& [id, p] : pending_) waiting.push_back(p);
  }
  for (const auto& p : waiting) {
    codemode::MutexLock lock(&p->mu);
    p->closed = true;
  }
}

}  // namespace gateway
