// Private helpers shared by the MCP session and its transports (not part of the public
// mcp_core API): serialising messages for the wire and telling message kinds apart.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace gateway {
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
// types; McpSession validates them).
inline bool LooksLikeRequest(const nlohmann::json& message) {
  return message.is_object() && message.contains("method") && message.contains("id");
}

// True for a response to a request: an id plus result or error, and no method.
inline bool IsResponse(const nlohmann::json& message) {
  return message.is_object() && !message.contains("method") && message.contains("id") &&
         (message.contains("result") || message.contains("error"));
}

}  // namespace wire
}  // namespace gateway
