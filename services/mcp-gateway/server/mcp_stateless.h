// The stateless MCP revision (2026-07-28) next to the 2025 ones: how a request says it is
// stateless, its per-request envelope, the checks of its HTTP headers and the shape of
// its results. Pure functions over JSON, shared by McpSession (both transports) and the
// Streamable HTTP front; docs/gateway.md, "Stateless and session requests on one endpoint".
//
// A 2026-07-28 request carries its protocol version, the client's capabilities and
// (optionally) its name in params._meta (the envelope) instead of an initialize handshake:
//
//   if (HasEnvelopeClaim(message)) {
//     if (auto error = EnvelopeError(id, params)) return *error;          // -32602
//     if (!IsStatelessVersion(version)) return UnsupportedVersion(id, version);  // -32022
//     ...
//     return MakeResult(id, StatelessResult(result, server_info, Cacheable::kNo));
//   }
#pragma once

#include <optional>
#include <string>

#include "jsonrpc/jsonrpc.h"
#include "nlohmann/json.hpp"

namespace gateway {

// (kStatelessVersion and the envelope's keys, kMeta*, are in jsonrpc/jsonrpc.h: the
// upstream client sends them too.)

// Error codes of the 2026-07-28 revision.
inline constexpr int kHeaderMismatch = -32020;
inline constexpr int kMissingClientCapability = -32021;
inline constexpr int kUnsupportedVersion = -32022;

// How long a client may reuse a result (the caching hints, ttlMs): the tool list and the
// resource templates change only when an upstream's catalog does (subscriptions/listen
// says so at once); the resource list and the files change with every run.
inline constexpr int64_t kListTtlMs = 60'000;

// Whether `message` claims stateless MCP: its params._meta names a protocol version.
// (The body decides; an MCP-Protocol-Version header is only checked against it.)
bool HasEnvelopeClaim(const nlohmann::json& message);

// Whether `version` (a header value or a claim) names stateless MCP or a later one,
// by the specification's rule: versions compare as strings.
bool NamesStatelessVersion(const std::string& version);

// A -32602 error response when params._meta lacks the envelope (protocol version, client
// capabilities) or holds it with the wrong types; nullopt when it is well formed.
std::optional<nlohmann::json> EnvelopeError(const nlohmann::json& id, const nlohmann::json& params);

// The claimed protocol version of a well-formed envelope.
std::string ClaimedVersion(const nlohmann::json& params);

// The -32022 answer to a claim of a version this server does not serve.
nlohmann::json UnsupportedVersion(const nlohmann::json& id, const std::string& requested);

// The HTTP headers a 2026-07-28 request must carry, as received (nullopt: absent).
struct StandardHeaders {
  std::optional<std::string> protocol_version;  // MCP-Protocol-Version
  std::optional<std::string> method;            // Mcp-Method
  std::optional<std::string> name;              // Mcp-Name
};

// A -32020 error response when the headers are missing or do not say what the body says:
// MCP-Protocol-Version the claimed version, Mcp-Method the method, and Mcp-Name the tool's
// name (tools/call, prompts/get) or the resource's uri (resources/read). Values are
// trimmed of spaces and tabs and compared exactly; a "=?base64?...?=" value is decoded
// first (invalid base64 is a mismatch). For a request (has_id) the protocol version and
// the method must be present; a notification's headers are checked when present.
std::optional<nlohmann::json> HeaderError(const nlohmann::json& id, const nlohmann::json& message,
                                          const StandardHeaders& headers, bool has_id);

// Whether a result of `method` carries caching hints (ttlMs, cacheScope).
bool IsCacheable(const std::string& method);

// `result` as stateless MCP sends it: resultType "complete", the server's name in
// _meta, and for cacheable methods ttlMs and cacheScope ("private": what the gateway
// answers may depend on the credential).
nlohmann::json StatelessResult(nlohmann::json result, const std::string& method,
                               const nlohmann::json& server_info);

// The time-to-live of `method`'s result in milliseconds.
int64_t TtlMs(const std::string& method);

// The HTTP status of a 2026-07-28 response: 404 for -32601 (an unknown or removed
// method), 400 for the errors about the request itself (-32020, -32021, -32022, an
// invalid envelope), 200 for results and every other error (they are in band).
int StatelessHttpStatus(const nlohmann::json& response);

}  // namespace gateway
