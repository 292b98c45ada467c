// Private to gateway_server: the header checks of the Streamable HTTP transport (Origin and Host
// against DNS rebinding, bearer tokens, Accept negotiation) and session id generation.
// Pure functions, so they can be tested without a server.
#pragma once

#include <string>
#include <vector>

namespace gateway {
namespace http {

// An Origin header value is allowed when it equals (case-insensitively) one of `allowed`;
// with `allowed` empty, when it is an http(s) origin on a loopback name (localhost,
// 127.0.0.1, [::1]) with any port. "null" and malformed origins are never allowed.
bool OriginAllowed(const std::string& origin, const std::vector<std::string>& allowed);

// A Host header value is allowed when it equals one of `allowed` (case-insensitively,
// either as a whole "name:port" or by its name alone); with `allowed` empty, when its name
// is a loopback name or `bind_host` (unless that is a wildcard such as 0.0.0.0), with any
// port. An empty Host is never allowed.
bool HostAllowed(const std::string& host, const std::vector<std::string>& allowed,
                 const std::string& bind_host);

// True when `authorization` is "Bearer <token>" (scheme case-insensitive). Compares in
// time independent of where the strings differ.
bool BearerMatches(const std::string& authorization, const std::string& token);

// What an Accept header allows. A missing (empty) header allows everything, as in HTTP.
struct AcceptedTypes {
  bool json = false;          // application/json, application/*, */*
  bool sse = false;           // text/event-stream, text/*, */*
  bool sse_explicit = false;  // text/event-stream named explicitly (required for GET)
};
AcceptedTypes ParseAccept(const std::string& accept);

// 32 lowercase hex digits from the kernel's CSPRNG (getrandom, else /dev/urandom).
std::string NewSessionId();

}  // namespace http
}  // namespace gateway
