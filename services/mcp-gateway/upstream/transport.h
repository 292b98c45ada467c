// ClientTransport: how JSON-RPC messages travel between the gateway (as MCP client) and one
// upstream server. Implementations: StdioTransport (stdio_transport.h),
// StreamableHttpTransport and SseTransport (http_transport.h).
//
// A transport only moves messages; JsonRpcClient (jsonrpc_client.h) matches responses to
// requests, and McpClient (client.h) runs the MCP lifecycle.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/byte_budget.h"
#include "nlohmann/json.hpp"
#include "upstream/param_headers.h"

namespace gateway {

struct UpstreamConfig;
struct UpstreamOptions;

// An answer is charged this many times its bytes while it is received (to the caller's
// budget or UpstreamOptions::receive_budget): the body (or SSE buffer) and its parse at the
// same time; and as many again once parsed, until its caller takes it (JsonRpcClient).
inline constexpr size_t kReceiveCopies = 2;

// What the answer to one request is charged to, so that a caller's large answers count
// against that caller (a credential) and not against everyone. Either may be null.
struct AnswerCharges {
  // While the answer is received on a connection of its own (Streamable HTTP), instead of
  // UpstreamOptions::receive_budget: kReceiveCopies times its bytes, released once read.
  std::shared_ptr<codemode::ByteBudget> receiving;
  // Once parsed, kReceiveCopies times its size, until the caller releases or takes over the
  // hold (after charging what it keeps of the result). Stdio and legacy SSE answers arrive
  // on one shared stream and are charged only here; an answer this refuses is dropped and
  // its request fails (RESOURCE_EXHAUSTED naming the budget's flag).
  std::shared_ptr<codemode::ByteHold> parsed;
};

// How long sending a request may block, and what ends it sooner: a stdio request waits for
// its turn to write and for a server that reads, at most --upstream_write_timeout, and no
// longer than its call (so that with that flag "inf" neither a call nor the gateway's
// shutdown waits as long as the server does not read). Transports that send on worker
// threads return at once and need neither.
struct SendLimits {
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::function<bool()> given_up;  // the caller cancelled (polled; may be empty)
};

struct TransportCallbacks {
  // Every message the server sends (responses, notifications, server->client requests).
  std::function<void(nlohmann::json message)> on_message;
  // A request the transport sent could not get a response (HTTP error, session lost...).
  std::function<void(const nlohmann::json& id, const absl::Status& error)> on_request_failed;
  // The connection is gone for good (process exited, SSE stream dropped). Not called once
  // Close() has begun.
  std::function<void(const std::string& reason)> on_closed;
};

// Callbacks run on transport threads, from Start() until Close() returns. Send() is safe
// for concurrent use, also from inside a callback.
class ClientTransport {
 public:
  virtual ~ClientTransport() = default;
  // Connects: spawns the process / opens the SSE stream and waits for its endpoint.
  virtual absl::Status Start(TransportCallbacks callbacks, absl::Duration timeout) = 0;
  // Sends one message. May return before the server has it (the HTTP transport posts
  // requests on worker threads so callers can time out); failures of a request are then
  // reported through on_request_failed.
  virtual absl::Status Send(const nlohmann::json& message) = 0;
  // Send() of a request whose answer, while this transport receives it on the request's
  // own connection, is charged to `receiving` (AnswerCharges::receiving; may be null).
  // Transports that receive every answer on one shared stream (stdio, legacy SSE) cannot
  // tell whose bytes they read; JsonRpcClient charges the caller once the answer is parsed.
  // A send that `limits` end fails DEADLINE_EXCEEDED or CANCELLED.
  virtual absl::Status SendRequest(const nlohmann::json& request,
                                   std::shared_ptr<codemode::ByteBudget> receiving,
                                   const SendLimits& limits) {
    return Send(request);
  }
  // The request with this id no longer needs its response (timed out, cancelled): the
  // HTTP transport drops the connection it is reading the response from.
  virtual void Abandon(const nlohmann::json& id) {}
  // Whether the connection ended because the gateway cut it for the upstream's fault (an
  // event it refused: oversized, stalled, over the receive budget): the manager then keeps
  // backing off however long the connection lasted, instead of reconnecting at once.
  virtual bool CutForMisbehaviour() const { return false; }
  // The tools' x-mcp-header declarations, from the latest tools/list: over HTTP in the
  // stateless MCP a tools/call mirrors the declared arguments into Mcp-Param-* headers.
  virtual void SetParamHeaders(std::map<std::string, std::vector<ParamHeader>> by_tool) {}
  // initialize succeeded with this protocol version (HTTP: the MCP-Protocol-Version header
  // from now on, and the GET stream for server notifications).
  virtual void OnInitialized(const std::string& protocol_version) {}
  // Shuts down (stdio: close stdin, SIGTERM, SIGKILL; HTTP: DELETE the session) and joins
  // every thread. Idempotent.
  virtual void Close() = 0;
};

// Why a request failed when the upstream answered it with a message over `limit` bytes
// (UpstreamOptions::max_message_bytes): what the caller (sandboxed code) reads, after the
// upstream's and the tool's names (UpstreamManager::CallTool adds them).
inline absl::Status MessageTooLargeError(size_t limit) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "the upstream sent a message larger than ", limit,
      " bytes (--max_upstream_message_bytes); it was not read"));
}

// One upstream's part of UpstreamOptions::receive_budget (`all`, may be null): a quarter of
// it, and none of its last eighth once the upstream holds a 64th (client.cc).
std::shared_ptr<codemode::ByteBudget> UpstreamPart(const std::shared_ptr<codemode::ByteBudget>& all);

// The transport for an upstream's configured type.
std::unique_ptr<ClientTransport> MakeTransport(const UpstreamConfig& config,
                                               const UpstreamOptions& options);

}  // namespace gateway
