// The MCP server side of the gateway, independent of transport.
//
// McpSession holds the protocol state of one connected MCP client (initialize, version
// negotiation, logging level, in-flight requests) and dispatches tools/list, tools/call and
// the resources/ methods to a ToolProvider. Transports (stdio, Streamable HTTP) parse bytes into JSON,
// answer parse errors themselves (-32700), and hand every message to Handle() together
// with a ReplySink that says where the response and the request's notifications go.
//
//   auto session = std::make_shared<McpSession>("stdio", &provider, options);
//   session->SetNotificationSink(stdout_sink);          // list_changed, log messages
//   session->Handle(message, stdout_sink);              // responses go to the same sink
//   ...
//   session->Close();                                   // cancels in-flight calls
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "base/byte_budget.h"
#include "base/cancel.h"
#include "jsonrpc/jsonrpc.h"
#include "nlohmann/json.hpp"
#include "server/call_limits.h"

namespace gateway {

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
  // The MCP session this call belongs to (its key).
  std::string session_key;
  // The credential that session authenticated with ("token 0", "anonymous", "stdio"):
  // what it creates is counted against that credential's caps.
  std::string credential;
  // The protocol version negotiated with the client (what content it understands).
  std::string protocol_version;
  // Sends notifications/resources/list_changed (when the client has initialized).
  std::function<void()> resources_changed;
  // What the call comes to hold while it runs (a resources/read its file's copies) is
  // charged here: the credential's share of the gateway's byte ceiling and the ceiling.
  // Null without a ceiling.
  std::shared_ptr<codemode::ByteBudget> budget;
};

// What the gateway offers. Implemented by the run_python tool (gateway core).
class ToolProvider {
 public:
  ToolProvider() = default;
  ToolProvider(const ToolProvider&) = delete;
  ToolProvider& operator=(const ToolProvider&) = delete;
  virtual ~ToolProvider() = default;
  // The `tools` array of a tools/list result.
  virtual nlohmann::json ListTools() = 0;
  // Runs a tool; called on a worker thread, may block until done. Returns a
  // CallToolResult object ({content, structuredContent?, isError?}); a non-OK status
  // becomes a JSON-RPC error (INVALID_ARGUMENT -> -32602 e.g. unknown tool or bad
  // arguments, anything else -> -32603).
  virtual absl::StatusOr<nlohmann::json> CallTool(const std::string& name,
                                                  const nlohmann::json& arguments,
                                                  ToolCallContext& context) = 0;
  // The MCP session ended (stdio EOF, HTTP DELETE, idle expiry): release its resources.
  virtual void SessionClosed(const std::string& session_key) = 0;

  // MCP resources, optional. A provider whose HasResources() is true gets the `resources`
  // capability advertised (with listChanged) and these methods called; each returns the
  // method's result object. List and templates are answered on the transport's thread
  // (keep them quick); reads run on a worker like tools/call. NOT_FOUND becomes -32002
  // (resource not found), INVALID_ARGUMENT -32602, anything else -32603. `cursor` is the
  // client's params.cursor ("" for the first page): a provider with more than a page
  // answers a page and a nextCursor.
  virtual bool HasResources() { return false; }
  virtual absl::StatusOr<nlohmann::json> ListResources(const std::string& session_key,
                                                       const std::string& cursor) {
    return absl::UnimplementedError("no resources");
  }
  virtual absl::StatusOr<nlohmann::json> ListResourceTemplates(const std::string& session_key) {
    return absl::UnimplementedError("no resources");
  }
  virtual absl::StatusOr<nlohmann::json> ReadResource(const std::string& uri,
                                                      ToolCallContext& context) {
    return absl::UnimplementedError("no resources");
  }
};

struct ServerOptions {
  std::string name = "mcp-gateway";
  std::string version = "0.1.0";
  std::string instructions;  // sent in the initialize result when not empty
  int max_concurrent_calls = 64;
  // Values one client message may hold (jsonrpc.h); more get -32700.
  size_t max_message_json_values = kMaxMessageJsonValues;
  // Shared by every session of the server: calls in flight (and the bytes they hold) per
  // credential and overall. Null: only max_concurrent_calls bounds a session's calls.
  std::shared_ptr<CallLimits> call_limits;
  // The gateway's overall byte ceiling and each credential's share (base/byte_budget.h):
  // the HTTP front's budgets draw on it. Null: only their own bounds apply.
  std::shared_ptr<codemode::BufferCeiling> ceiling;
};

class McpSession : public std::enable_shared_from_this<McpSession> {
 public:
  // `credential` names who authenticated the session (ToolCallContext::credential).
  McpSession(std::string key, ToolProvider* provider, ServerOptions options,
             std::string credential = "");
  ~McpSession();
  McpSession(const McpSession&) = delete;
  McpSession& operator=(const McpSession&) = delete;

  // Handles one JSON-RPC message (request, notification or response). Requests are
  // answered through `reply`: quick ones before Handle returns, tools/call later from a
  // worker thread (with its progress notifications on the same sink, then Close()).
  // Invalid messages get -32600/-32601/-32602 answers; nothing here ever throws.
  void Handle(const nlohmann::json& message, std::shared_ptr<ReplySink> reply);

  // Where notifications that belong to no request go (tools/list_changed, log messages).
  void SetNotificationSink(std::shared_ptr<ReplySink> sink);

  // Tells the client the tool list changed (if it has initialized).
  void NotifyToolsChanged();
  // Tells the client the resource list changed (if it has initialized).
  void NotifyResourcesChanged();

  // Sends notifications/message at `level` if the client's logging level allows it.
  void Log(const std::string& level, const std::string& logger, const nlohmann::json& data);

  // Cancels in-flight calls and tells the provider the session is gone. Idempotent.
  void Close();

  const std::string& key() const { return key_; }
  const std::string& credential() const { return credential_; }
  bool initialized() const { return initialized_; }
  // The negotiated protocol version ("" before initialize).
  std::string protocol_version() const;
  // Milliseconds since the epoch of the last message (for idle expiry).
  int64_t last_activity_ms() const { return last_activity_ms_; }
  // Number of requests being worked on.
  int in_flight() const;

 private:
  // (implementation details are up to the implementer)
  struct Impl;
  std::unique_ptr<Impl> impl_;
  const std::string key_;
  const std::string credential_;
  std::atomic<bool> initialized_{false};
  std::atomic<int64_t> last_activity_ms_{0};
};

}  // namespace gateway
