// ClientRequests: requests the gateway sends to its MCP client (elicitation/create, for
// approvals) and the matching of the client's responses, for one MCP session.
//
// A worker that needs the client's answer calls Ask(): the request goes out on the sink of
// the call it belongs to (the tools/call's SSE stream over HTTP, stdout on stdio) with an
// id of ours, and the worker waits until the client's response comes back through
// Answer(), the timeout passes or the call is cancelled; the last two tell the client with
// notifications/cancelled. A response that names no request of ours is dropped: ids are
// ours, per session, so one session's client cannot answer another session's request.
//
//   ClientRequests requests(/*max_pending=*/64);
//   absl::StatusOr<json> answer = requests.Ask(reply, "elicitation/create", params,
//                                              absl::Minutes(5), ctx.cancel);
//   requests.Answer(message);   // McpSession::Handle, for a message without a method
//   requests.CloseAll();        // the session ended
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/mutex.h"
#include "nlohmann/json.hpp"
#include "server/tool_provider.h"

namespace gateway {

class ClientRequests {
 public:
  explicit ClientRequests(size_t max_pending) : max_pending_(max_pending) {}
  ClientRequests(const ClientRequests&) = delete;
  ClientRequests& operator=(const ClientRequests&) = delete;

  // Sends the request and waits for its answer: the response's `result` (an object), or
  // FAILED_PRECONDITION with the client's error message (UNIMPLEMENTED for -32601),
  // DEADLINE_EXCEEDED after `timeout`, CANCELLED when `cancel` (nullable) is cancelled or
  // the session closes, RESOURCE_EXHAUSTED past max_pending requests waiting at once.
  absl::StatusOr<nlohmann::json> Ask(const std::shared_ptr<ReplySink>& sink, const std::string& method,
                                     nlohmann::json params, absl::Duration timeout,
                                     const std::shared_ptr<codemode::CancelToken>& cancel);

  // A response from the client: true when it answered a request waiting here.
  bool Answer(const nlohmann::json& message);

  // Every waiting request ends CANCELLED, and later ones at once.
  void CloseAll();

 private:
  // One request waiting; shared with its cancel callback, which may outlive this.
  struct Pending {
    codemode::Mutex mu;
    bool answered ABSL_GUARDED_BY(mu) = false;
    bool closed ABSL_GUARDED_BY(mu) = false;    // the session ended
    bool cancelled ABSL_GUARDED_BY(mu) = false;  // the call was
    nlohmann::json response ABSL_GUARDED_BY(mu);
  };
  // The answer of a request that was answered.
  static absl::StatusOr<nlohmann::json> Result(const nlohmann::json& response);

  const size_t max_pending_;
  codemode::Mutex mu_;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<std::string, std::shared_ptr<Pending>> pending_ ABSL_GUARDED_BY(mu_);  // by id
};

}  // namespace gateway
