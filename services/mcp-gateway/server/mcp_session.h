// McpSession: the MCP server side of the gateway for one client, independent of transport.
//
// McpSession holds the protocol state of one connected MCP client (initialize, version
// negotiation, logging level, in-flight requests, subscriptions) and dispatches tools/list,
// tools/call and the resources/ methods to a ToolProvider (tool_provider.h). It serves
// session and stateless requests: 2025 clients initialize first; a stateless request
// (2026-07-28) carries its protocol version and the client's capabilities itself
// (mcp_stateless.h) and runs outside any MCP session. Transports (stdio,
// Streamable HTTP) parse bytes into JSON, answer parse errors themselves (-32700), and
// hand every message to Handle() together with a ReplySink that says where the response
// and the request's notifications go.
//
//   auto session = std::make_shared<McpSession>("stdio", &provider, options);
//   session->SetNotificationSink(stdout_sink);          // list_changed, log messages
//   session->Handle(message, stdout_sink);              // responses go to the same sink
//   ...
//   session->Close();                                   // cancels in-flight calls
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "base/cancel.h"
#include "base/thread_pool.h"
#include "jsonrpc/jsonrpc.h"
#include "metrics/gateway_metrics.h"
#include "base/version.h"
#include "nlohmann/json.hpp"
#include "server/call_limits.h"
#include "server/tool_provider.h"

namespace gateway {

struct ServerOptions {
  std::string name = "mcp-gateway";
  std::string version = codemode::kVersion;  // serverInfo.version
  std::string instructions;  // sent in the initialize result when not empty
  int max_concurrent_calls = 64;
  // Values one client message may hold (jsonrpc.h); more get -32700.
  size_t max_message_json_values = kMaxMessageJsonValues;
  // Shared by every session of the server: calls in flight (and the bytes they hold) per
  // credential and overall. Null: only max_concurrent_calls bounds a session's calls.
  std::shared_ptr<CallLimits> call_limits;
  // Every request is stateless (2026-07-28; mcp_stateless.h), whether or not it claims it:
  // an HTTP request without an MCP session. Otherwise a request is stateless when its
  // params._meta names a protocol version, and of the 2025 revisions (initialize first) when not.
  bool stateless = false;
  // The gateway's overall byte ceiling and each credential's share (base/byte_budget.h):
  // the HTTP front's budgets draw on it. Null: only their own bounds apply.
  std::shared_ptr<codemode::BufferCeiling> ceiling;
  // Requests refused by a bound are counted here (null: not counted).
  std::shared_ptr<GatewayMetrics> metrics;
  // Shared by every session of the server: how many threads that ended a call may wait
  // (kParkedCallThreadFor) for their session's next one, instead of each call making a
  // thread. Null: none waits.
  std::shared_ptr<codemode::ParkedThreads> parked_call_threads;
};

// How long a thread that ended a call waits for its session's next one (within
// ServerOptions::parked_call_threads): about what an agent takes to write its next call.
inline constexpr absl::Duration kParkedCallThreadFor = absl::Seconds(60);

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

  // Tells the client the tool list changed (if it has initialized, and on every
  // subscriptions/listen stream that asked for it).
  void NotifyToolsChanged();
  // Tells the client the resource list changed (likewise).
  void NotifyResourcesChanged();

  // Sends notifications/message at `level` if the client's logging level allows it.
  void Log(const std::string& level, const std::string& logger, const nlohmann::json& data);

  // Cancels in-flight calls, ends subscriptions/listen streams (with their final result)
  // and tells the provider the session is gone. Idempotent.
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
