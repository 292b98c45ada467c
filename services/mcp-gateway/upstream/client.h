// McpClient: one connection to one upstream MCP server, speaking the client side of the
// MCP lifecycle over any ClientTransport, in the revision the server speaks:
//   server/discover (stdio and Streamable HTTP): a server that lists 2026-07-28 gets no
//   initialize; each request carries the envelope in params._meta (and over HTTP the
//   standard headers, which the transport derives from it) -> tools/list -> tools/call ...
//   otherwise initialize (protocolVersion 2025-11-25, capabilities {}, clientInfo) -> check
//   the version the server chose -> notifications/initialized -> tools/list (following
//   nextCursor) -> tools/call ... -> Close().
//
//   McpClient client(config, options, handlers);
//   if (absl::Status s = client.Connect(); !s.ok()) return s;
//   for (auto& tool : client.tools()) ...
//   auto result = client.CallTool("echo", {{"message", "hi"}}, call_options, absl::Seconds(60));
//
// A client is used for one connection only: after a disconnect, make a new one.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/cancel.h"
#include "base/mutex.h"
#include "upstream/config.h"
#include "upstream/options.h"
#include "jsonrpc/jsonrpc.h"
#include "upstream/jsonrpc_client.h"
#include "upstream/param_headers.h"

namespace gateway {

// A tool as the upstream's tools/list described it.
struct UpstreamTool {
  std::string name;
  std::string description;
  nlohmann::json input_schema;   // object
  nlohmann::json output_schema;  // object or null
  std::vector<ParamHeader> param_headers;  // its x-mcp-header declarations (SEP-2243)
  // Its annotations' boolean hints (readOnlyHint, destructiveHint, ...); an object.
  nlohmann::json annotations = nlohmann::json::object();
};

class McpClient {
 public:
  // The server said its tool list changed, or the connection dropped (both run on a
  // transport thread: refresh elsewhere).
  using Handlers = JsonRpcClient::Handlers;

  McpClient(UpstreamConfig config, UpstreamOptions options, Handlers handlers);
  ~McpClient();  // Close()s
  McpClient(const McpClient&) = delete;
  McpClient& operator=(const McpClient&) = delete;

  // Connects and runs initialize and the first tools/list, each within connect_timeout.
  // The error says what failed, e.g. "initialize timed out", "connect: Connection refused".
  absl::Status Connect();
  absl::StatusOr<std::vector<UpstreamTool>> ListTools(absl::Duration timeout);
  // tools/call; the CallToolResult object (possibly isError: true) or an error.
  absl::StatusOr<nlohmann::json> CallTool(const std::string& tool,
                                          const nlohmann::json& arguments,
                                          const CallOptions& options, absl::Duration timeout);
  // Shuts the connection down (see ClientTransport::Close). Idempotent, thread-safe.
  void Close();

  bool connected() const;
  std::string disconnect_reason() const;
  // The connection ended because the gateway cut it for the upstream's fault
  // (ClientTransport::CutForMisbehaviour).
  bool cut_for_misbehaviour() const;
  // From Connect(): the initialize result and the first tool list.
  const std::string& server_name() const { return server_name_; }
  const std::string& instructions() const { return instructions_; }
  const std::string& protocol_version() const { return protocol_version_; }
  // The server serves 2026-07-28 and this client speaks it (no initialize was sent).
  bool stateless() const { return stateless_; }
  const std::vector<UpstreamTool>& tools() const { return tools_; }
  // The transport (tests look at a stdio child's pid, an HTTP session id).
  ClientTransport* transport() const { return transport_; }
  // When the tool list of the latest ListTools() should be asked again: its ttlMs (the
  // smallest of its pages') from then, or SteadyTime::max() when it gave none or 0.
  codemode::SteadyTime tools_expire() const;

 private:
  const UpstreamConfig config_;
  const UpstreamOptions options_;
  ClientTransport* transport_ = nullptr;  // owned by rpc_
  std::unique_ptr<JsonRpcClient> rpc_;
  std::string server_name_;
  std::string instructions_;
  std::string protocol_version_;
  bool stateless_ = false;
  std::vector<UpstreamTool> tools_;
  std::function<void()> on_tools_list_changed_;
  // The subscriptions/listen stream of a 2026-07-28 upstream (Listen()).
  std::thread listener_;
  mutable codemode::Mutex mu_;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<codemode::CancelToken> listen_request_ ABSL_GUARDED_BY(mu_);  // the open one
  codemode::SteadyTime tools_expire_ ABSL_GUARDED_BY(mu_) = codemode::SteadyTime::max();
  std::once_flag close_once_;

  // Keeps a subscriptions/listen request open while connected (toolsListChanged), opening
  // it again a second after it ends; a server that does not serve it is left alone.
  void Listen();

  // server/discover: whether the server serves 2026-07-28 (then this client speaks it).
  bool Discover();
  // Connect's 2025 handshake: initialize, the version check, notifications/initialized.
  absl::Status Initialize();
  // `params` with the envelope of stateless MCP in _meta, when this client speaks it.
  nlohmann::json Enveloped(nlohmann::json params) const;
  // `params` with that envelope (server/discover's probe carries it in either case).
  nlohmann::json Envelope(nlohmann::json params) const;
  // Every page of tools/list (ListTools, before the transport learns the tools' headers).
  absl::StatusOr<std::vector<UpstreamTool>> ListAllPages(absl::Duration timeout);
};

// Parses a tools/list result page; malformed entries are skipped (and logged).
std::vector<UpstreamTool> ParseTools(const std::string& server, const nlohmann::json& result);

}  // namespace gateway
