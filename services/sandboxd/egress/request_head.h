// What a client asks the egress proxy for (docs/egress.md, "Requests"): the request line and
// headers of one HTTP/1.1 request, as Beast parsed them, turned into a destination and,
// for an absolute-URI request, the head to send the origin in its place.
//
//   CONNECT pypi.org:443 HTTP/1.1             a tunnel (TLS, SNI compared)
//   GET http://index.test:8080/simple/ HTTP/1.1   one request, forwarded in origin form
//
//   absl::StatusOr<ProxyRequest> r = ParseProxyRequest(head);
//   // r->host, r->port; r->literal for an IP address; r->forward_head for GET and the like
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "egress/ip_address.h"

namespace sandboxd {
namespace egress {

struct RequestHead {
  std::string method;
  std::string target;
  int version = 11;  // 10 or 11
  std::vector<std::pair<std::string, std::string>> headers;
};

struct ProxyRequest {
  bool tunnel = false;                 // CONNECT
  std::string host;                    // canonical name, or the literal's text
  std::optional<IpAddress> literal;    // the target was an IP address
  uint16_t port = 0;
  std::string forward_head;            // !tunnel: the request as the origin gets it
};

// InvalidArgument (the proxy answers 400) for what is not a CONNECT to host:port or an
// http:// absolute URI: origin-form targets, https:// URIs (they go through CONNECT),
// user info, bad names or ports. PermissionDenied (403) for a Host header that names
// another host than the URI.
absl::StatusOr<ProxyRequest> ParseProxyRequest(const RequestHead& head);

}  // namespace egress
}  // namespace sandboxd
