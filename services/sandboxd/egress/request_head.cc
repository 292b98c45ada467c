#include "egress/request_head.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "egress/host_name.h"

namespace sandboxd {
namespace egress {
namespace {

// Proxy-to-proxy and hop-by-hop headers the origin does not get; the proxy sends its own
// Connection: close (one request per proxied connection).
bool Dropped(absl::string_view name) {
  for (const char* h : {"proxy-connection", "proxy-authorization", "connection", "keep-alive",
                        "upgrade", "te", "trailer"}) {
    if (absl::EqualsIgnoreCase(name, h)) return true;
  }
  return false;
}

// "host:port", "[v6]:port", or without the port when `default_port` is not 0.
absl::Status ParseAuthority(absl::string_view authority, uint16_t default_port, ProxyRequest* out) {
  if (absl::StrContains(authority, '@')) {
    return absl::InvalidArgumentError("user info in the request target is not accepted");
  }
  absl::string_view host = authority, port;
  bool has_port = false;
  if (absl::StartsWith(authority, "[")) {
    const size_t close = authority.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError("an unclosed '['");
    host = authority.substr(1, close - 1);
    absl::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return absl::InvalidArgumentError("junk after ']'");
    has_port = !rest.empty();
    if (has_port) port = rest.substr(1);
    if (!IpAddress::Parse(host) || !IpAddress::Parse(host)->v6) {
      return absl::InvalidArgumentError("brackets hold an IPv6 address only");
    }
  } else if (const size_t colon = authority.rfind(':'); colon != absl::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    has_port = true;
  }
  uint32_t p = default_port;
  if (has_port && (port.empty() || port.size() > 5 || !absl::ascii_isdigit(port[0]) ||
                   !absl::SimpleAtoi(port, &p) || p == 0 || p > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("port \"", port, "\" is not 1 to 65535"));
  }
  if (p == 0) return absl::InvalidArgumentError("CONNECT needs host:port");
  out->port = static_cast<uint16_t>(p);
  if ((out->literal = IpAddress::Parse(host))) {
    out->host = out->literal->ToString();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> name = NormalizeHostName(host);
  if (!name.ok()) return absl::InvalidArgumentError(absl::StrCat("host: ", name.status().message()));
  out->host = *std::move(name);
  return absl::OkStatus();
}

// The Host header of an absolute-URI request names the URI's host and port, or is absent.
absl::Status CheckHostHeader(const RequestHead& head, const ProxyRequest& request) {
  for (const auto& [name, value] : head.headers) {
    if (!absl::EqualsIgnoreCase(name, "host")) continue;
    ProxyRequest named;
    if (!ParseAuthority(absl::StripAsciiWhitespace(value), 80, &named).ok() ||
        named.host != request.host || named.port != request.port) {
      return absl::PermissionDeniedError(
          absl::StrCat("the Host header (\"", absl::CHexEscape(value.substr(0, 100)),
                       "\") names another host than the request target"));
    }
  }
  return absl::OkStatus();
}

std::string ForwardHead(const RequestHead& head, absl::string_view authority,
                        absl::string_view path) {
  std::string out = absl::StrCat(head.method, " ", path, head.version == 10 ? " HTTP/1.0\r\n"
                                                                            : " HTTP/1.1\r\n");
  bool has_host = false;
  for (const auto& [name, value] : head.headers) {
    if (Dropped(name)) continue;
    has_host = has_host || absl::EqualsIgnoreCase(name, "host");
    absl::StrAppend(&out, name, ": ", value, "\r\n");
  }
  if (!has_host) absl::StrAppend(&out, "Host: ", authority, "\r\n");
  absl::StrAppend(&out, "Connection: close\r\n\r\n");
  return out;
}

}  // namespace

absl::StatusOr<ProxyRequest> ParseProxyRequest(const RequestHead& head) {
  ProxyRequest request;
  if (head.method == "CONNECT") {
    request.tunnel = true;
    if (absl::Status s = ParseAuthority(head.target, 0, &request); !s.ok()) return s;
    return request;
  }
  absl::string_view target = head.target;
  if (absl::StartsWithIgnoreCase(target, "https://")) {
    return absl::InvalidArgumentError("https:// goes through CONNECT, not as a proxied request");
  }
  if (!absl::StartsWithIgnoreCase(target, "http://")) {
    return absl::InvalidArgumentError(
        "the egress proxy takes CONNECT host:port or an absolute http:// URI");
  }
  target.remove_prefix(7);
  const size_t end = target.find_first_of("/?#");
  const absl::string_view authority = target.substr(0, end);
  std::string path = end == absl::string_view::npos ? "/" : std::string(target.substr(end));
  if (path[0] != '/') path.insert(0, "/");
  path = path.substr(0, path.find('#'));  // a fragment is the client's own
  if (absl::Status s = ParseAuthority(authority, 80, &request); !s.ok()) return s;
  if (absl::Status s = CheckHostHeader(head, request); !s.ok()) return s;
  request.forward_head = ForwardHead(head, authority, path);
  return request;
}

}  // namespace egress
}  // namespace sandboxd
