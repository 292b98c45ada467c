// What the MCP server side of the gateway serves, and where its replies go: the two
// interfaces between McpSession (mcp_session.h) and the rest of the gateway.
//
// ToolProvider is what the gateway offers (tools/list, tools/call; the run_python tool
// implements it), ResourceProvider the resources/ methods of a provider that has
// resources (the files runs leave: adapter/run_resources.h). ReplySink is where a message for the client goes
// (a transport: stdout, an HTTP response or SSE stream). ToolCallContext carries one call's
// progress, cancellation and owner to the provider.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "base/cancel.h"
#include "nlohmann/json.hpp"
#include "telemetry/trace_context.h"

namespace gateway {

// A status that answers the request with -32021 MissingRequiredClientCapability (protocol
// 2026-07-28): `required` (a ClientCapabilities object) becomes the error's
// data.requiredCapabilities. For what the request cannot be processed without.
inline constexpr char kMissingCapabilityPayload[] = "mcp-gateway/missing-client-capability";
inline absl::Status MissingClientCapability(absl::string_view message, const nlohmann::json& required) {
  absl::Status s = absl::FailedPreconditionError(message);
  s.SetPayload(kMissingCapabilityPayload, absl::Cord(required.dump()));
  return s;
}
// The required capabilities of a MissingClientCapability status, or null.
inline nlohmann::json MissingCapabilityOf(const absl::Status& s) {
  auto payload = s.GetPayload(kMissingCapabilityPayload);  // absl::optional in Debian's Abseil
  if (!payload) return nullptr;
  nlohmann::json required = nlohmann::json::parse(std::string(*payload), nullptr, false);
  return required.is_discarded() ? nlohmann::json(nullptr) : required;
}

// Where messages for the client go. Send() is safe for concurrent use and never blocks
// for long (transports queue). After Close() sends are dropped.
class ReplySink {
 public:
  ReplySink() = default;
  ReplySink(const ReplySink&) = delete;
  ReplySink& operator=(const ReplySink&) = delete;
  virtual ~ReplySink() = default;
  virtual void Send(const nlohmann::json& message) = 0;
  // The request this sink belongs to has been answered (HTTP: end the SSE stream).
  virtual void Close() {}
};

// Progress and cancellation of one tools/call (or resources/read), handed to the
// ToolProvider.
struct ToolCallContext {
  // Sends notifications/progress; empty when the client gave no progressToken.
  // `progress` must increase with every call.
  std::function<void(double progress, std::optional<double> total, const std::string& message)>
      progress;
  // Cancelled on notifications/cancelled for this request, or when the session closes.
  std::shared_ptr<codemode::CancelToken> cancel;
  // The MCP session this call belongs to (its key); absent for a stateless request
  // (protocol 2026-07-28), which belongs to none, even on a connection that has one.
  std::optional<std::string> mcp_session;
  // The credential that session authenticated with ("token 3f2a9c01b7e4": server/http_token.h, "anonymous", "stdio"):
  // what it creates is counted against that credential's caps.
  std::string credential;
  // The protocol version negotiated with the client (what content it understands).
  std::string protocol_version;
  // Sends notifications/resources/list_changed (when the client has initialized).
  std::function<void()> resources_changed;
  // What the client declared it can do (2025: initialize's capabilities; 2026-07-28: the
  // request's _meta clientCapabilities), as far as the gateway may use it: the objects of
  // `elicitation`, `sampling` and `roots` (each at most 4 KiB; larger ones are kept empty).
  nlohmann::json client_capabilities = nlohmann::json::object();
  // Sends a request to the client and waits for its answer (ClientRequests::Ask on this
  // call's own stream; for a stateless request PendingRuns, an input_required result); empty where
  // the call has no way to ask. The wait ends CANCELLED when this call is cancelled or when
  // `cancel` (nullable: what the question is for, e.g. the execution whose tool calls ask)
  // is, and DEADLINE_EXCEEDED after `timeout`.
  std::function<absl::StatusOr<nlohmann::json>(const std::string& method, nlohmann::json params,
                                               absl::Duration timeout,
                                               const std::shared_ptr<codemode::CancelToken>& cancel)>
      ask_client;
  // A stateless tools/call (protocol 2026-07-28), a multi round-trip request: the call may
  // be answered with an `input_required` result ({resultType: "input_required",
  // inputRequests, requestState}) and retried by the client with the same params plus
  // `requestState` (the one it got, at most 4 KiB) and `inputResponses` (an object: the
  // answers by request key).
  bool stateless = false;
  std::string request_state;
  nlohmann::json input_responses = nlohmann::json::object();
  // The client's trace context (params._meta.traceparent, or the HTTP `traceparent`
  // header), when it sent a valid one: the run's span is its child (trace_context.h).
  std::optional<codemode::telemetry::TraceContext> trace_parent;
  // What the call comes to hold while it runs (a resources/read its file's copies) is
  // charged here: the credential's share of the gateway's byte ceiling and the ceiling.
  // Null without a ceiling.
  std::shared_ptr<codemode::ByteBudget> budget;
};

// MCP resources of a ToolProvider: each method returns its result object. List and
// templates are answered on the transport's thread (keep them quick); reads, and
// ListOwnedResources, run on a worker like tools/call. NOT_FOUND becomes -32002 (resource
// not found), INVALID_ARGUMENT -32602, anything else -32603. `cursor` is the client's
// params.cursor ("" for the first page): a provider with more than a page answers a page
// and a nextCursor.
class ResourceProvider {
 public:
  ResourceProvider() = default;
  ResourceProvider(const ResourceProvider&) = delete;
  ResourceProvider& operator=(const ResourceProvider&) = delete;
  virtual ~ResourceProvider() = default;
  virtual absl::StatusOr<nlohmann::json> ListResources(const std::string& session_key,
                                                       const std::string& cursor) = 0;
  virtual absl::StatusOr<nlohmann::json> ListResourceTemplates(const std::string& session_key) = 0;
  virtual absl::StatusOr<nlohmann::json> ReadResource(const std::string& uri, ToolCallContext& context) = 0;
  // A stateless request, which has no MCP session: the result of resources/list for
  // `context.credential` (every sandbox it holds), run on a worker like a read.
  virtual absl::StatusOr<nlohmann::json> ListOwnedResources(const std::string& cursor,
                                                            ToolCallContext& context) = 0;
  // subscriptions/listen's resourcesListChanged: `ready` once the list is being watched,
  // then `changed` whenever the list ListOwnedResources gives `credential` changes; both
  // from another thread, possibly once more after the returned subscription is dropped
  // (which ends it). Null when the provider does not watch.
  virtual std::shared_ptr<void> WatchResources(const std::string& credential, std::function<void()> ready,
                                               std::function<void()> changed) = 0;
};

// What the gateway offers. Implemented by the run_python tool (adapter/run_code.h).
class ToolProvider {
 public:
  ToolProvider() = default;
  ToolProvider(const ToolProvider&) = delete;
  ToolProvider& operator=(const ToolProvider&) = delete;
  virtual ~ToolProvider() = default;
  // The `tools` array of a tools/list result for a client of `credential`
  // (ToolCallContext::credential): a tool's description may depend on it.
  virtual nlohmann::json ListTools(const std::string& credential) = 0;
  // Runs a tool; called on a worker thread, may block until done. Returns a
  // CallToolResult object ({content, structuredContent?, isError?}); a non-OK status
  // becomes a JSON-RPC error (INVALID_ARGUMENT -> -32602 e.g. unknown tool or bad
  // arguments, anything else -> -32603).
  virtual absl::StatusOr<nlohmann::json> CallTool(const std::string& name,
                                                  const nlohmann::json& arguments,
                                                  ToolCallContext& context) = 0;
  // The MCP session ended (stdio EOF, HTTP DELETE, idle expiry): release its resources.
  virtual void SessionClosed(const std::string& session_key) = 0;

  // The provider's MCP resources; null when it has none. A provider with resources gets
  // the `resources` capability advertised (with listChanged).
  virtual ResourceProvider* resources() { return nullptr; }
};

}  // namespace gateway
