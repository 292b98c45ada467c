// The JSON-RPC 2.0 vocabulary of MCP, one for both sides of the gateway: the server side
// (server/: agents' messages in, our answers out) and the client side (upstream/: our
// requests out, upstream servers' answers in) build, parse, tell apart, frame and map
// errors of messages with these functions only.
//
//   json request = MakeRequest(7, "tools/list", json::object());
//   std::string line = wire::Dump(request);            // one line, never throws
//   LineFramer framer(16 << 20);
//   framer.Feed(data, n, [](std::string& line) {...}, [] { /* a line over the limit */ });
//   absl::Status st = ErrorToStatus(response["error"]);   // -32602 -> INVALID_ARGUMENT
#pragma once

#include <cstddef>
#include <cstring>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace gateway {

// ---- protocol versions ------------------------------------------------------------------

// What we serve to agents, newest first. We speak the first; a client asking for another
// one in this list gets that one back.
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26"};
// What we accept from upstream servers, newest first; we ask for the first. Older servers
// (HTTP+SSE, 2024-11-05) are still common upstream.
inline constexpr const char* kUpstreamProtocolVersions[] = {"2025-11-25", "2025-06-18",
                                                            "2025-03-26", "2024-11-05"};

// The stateless revision (server/mcp_stateless.h): no initialize; each request names its version
// and the client's capabilities in params._meta (the envelope) under these keys, and over
// HTTP repeats the version, the method and the name in the standard headers.
inline constexpr const char* kStatelessVersion = "2026-07-28";
inline constexpr const char* kMetaProtocolVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* kMetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* kMetaClientInfo = "io.modelcontextprotocol/clientInfo";
inline constexpr const char* kMetaLogLevel = "io.modelcontextprotocol/logLevel";
inline constexpr const char* kMetaServerInfo = "io.modelcontextprotocol/serverInfo";
inline constexpr const char* kMetaSubscriptionId = "io.modelcontextprotocol/subscriptionId";

bool IsServedVersion(const std::string& version);
bool IsUpstreamVersion(const std::string& version);
// The version to answer an initialize that asked for `requested` (MCP's negotiation).
std::string NegotiateVersion(const std::string& requested);

// ---- error codes ---------------------------------------------------------------------------

inline constexpr int kParseError = -32700;
inline constexpr int kInvalidRequest = -32600;
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;
inline constexpr int kInternalError = -32603;
// MCP's code for a resource that does not exist. (The SDKs' -32000 "connection closed"
// and -32001 "request timeout" are raised locally; over the wire servers use the
// -32000..-32099 range for anything, so those codes say nothing certain.)
inline constexpr int kResourceNotFound = -32002;

// A JSON-RPC error object from a peer as a status: the code picks the status code
// (-32602 INVALID_ARGUMENT, -32601 UNIMPLEMENTED, -32002 NOT_FOUND, -32603 and -32700/
// -32600 (a request we got wrong) INTERNAL, anything else UNKNOWN); the message reads "<message> (code N)[: <data>]". Any shape is
// accepted: a malformed error object is still an error.
absl::Status ErrorToStatus(const nlohmann::json& error);
// The code to answer a failed request with: INVALID_ARGUMENT and NOT_FOUND -32602 (MCP
// reports unknown tools as invalid params), UNIMPLEMENTED -32601, anything else -32603.
int StatusToErrorCode(const absl::Status& status);

// ---- messages ----------------------------------------------------------------------------

nlohmann::json MakeRequest(const nlohmann::json& id, const std::string& method,
                           nlohmann::json params);
// Null params are left out (MCP allows params to be absent, never null).
nlohmann::json MakeNotification(const std::string& method, nlohmann::json params);
nlohmann::json MakeResult(const nlohmann::json& id, nlohmann::json result);
// Builds {"jsonrpc":"2.0","id":id,"error":{"code":code,"message":message[,"data"]}}.
nlohmann::json MakeError(const nlohmann::json& id, int code, const std::string& message,
                         const nlohmann::json& data = nullptr);

// Values (objects, arrays, strings, numbers, ...) a client's message may hold by default:
// a parsed value costs tens of bytes, and clients send a few (run_python's arguments, at
// most 100 files), while a 4 MiB body of "[]," would otherwise parse into ~60 MiB.
inline constexpr size_t kMaxMessageJsonValues = 1 << 16;

// Parses one incoming message (a stdio line or an HTTP body) with the depth- and size-
// budgeted parser, allowing `max_values` values. On failure returns the error response to
// send (-32700 for bad JSON or too many values, -32600 for a batch or a non-object).
absl::StatusOr<nlohmann::json> ParseMessage(const std::string& text,
                                            nlohmann::json* error_response,
                                            size_t max_values = kMaxMessageJsonValues);

namespace wire {

// Serialises one message as a single line. Invalid UTF-8 in strings (tool output can
// contain anything) is replaced instead of throwing; dump() escapes control characters,
// so the result never contains a raw newline.
inline std::string Dump(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A JSON-RPC id we accept: a string or an integer (MCP forbids null).
inline bool IsValidId(const nlohmann::json& id) {
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

// True for a request: an object with a "method" and an "id" member (whatever their
// types; the receiver validates them).
inline bool LooksLikeRequest(const nlohmann::json& message) {
  return message.is_object() && message.contains("method") && message.contains("id");
}

// The "method" member, or "" when there is none or it is not a string.
inline std::string MethodOf(const nlohmann::json& message) {
  if (!message.is_object()) return "";
  auto it = message.find("method");
  return it != message.end() && it->is_string() ? it->get<std::string>() : "";
}

// True for a response to a request: an id plus result or error, and no method.
inline bool IsResponse(const nlohmann::json& message) {
  return message.is_object() && !message.contains("method") && message.contains("id") &&
         (message.contains("result") || message.contains("error"));
}

}  // namespace wire

// ---- framing -----------------------------------------------------------------------------

// Splits a byte stream into newline-delimited messages (MCP's stdio framing; a trailing
// '\r' is dropped), none longer than `max_bytes`: a longer line is reported once and its
// bytes skipped up to its newline, so memory stays bounded whatever the peer sends.
class LineFramer {
 public:
  explicit LineFramer(size_t max_bytes) : max_bytes_(max_bytes) {}

  // Calls on_line(std::string&) for each complete line and on_oversized() for each line
  // over the limit.
  template <typename OnLine, typename OnOversized>
  void Feed(const char* data, size_t size, OnLine&& on_line, OnOversized&& on_oversized) {
    while (size > 0) {
      const char* newline = static_cast<const char*>(std::memchr(data, '\n', size));
      size_t take = newline ? static_cast<size_t>(newline - data) : size;
      if (!discarding_) pending_.append(data, take);
      if (!discarding_ && pending_.size() > max_bytes_) {
        std::string().swap(pending_);
        discarding_ = true;
        on_oversized();
      }
      if (!newline) return;
      if (!discarding_) Emit(on_line);
      pending_.clear();
      discarding_ = false;
      data = newline + 1;
      size -= take + 1;
    }
  }
  // Drops the line being buffered; the rest of it, up to its newline, is discarded as it
  // comes (no on_oversized).
  void Skip() {
    std::string().swap(pending_);
    discarding_ = true;
  }
  bool skipping() const { return discarding_; }

  // At end of stream: a last line without its newline, handled like the others.
  template <typename OnLine>
  void Finish(OnLine&& on_line) {
    if (!discarding_ && !pending_.empty()) Emit(on_line);
    pending_.clear();
    discarding_ = false;
  }

 private:
  template <typename OnLine>
  void Emit(OnLine& on_line) {
    if (!pending_.empty() && pending_.back() == '\r') pending_.pop_back();
    on_line(pending_);
  }

  const size_t max_bytes_;
  std::string pending_;
  bool discarding_ = false;
};

}  // namespace gateway
