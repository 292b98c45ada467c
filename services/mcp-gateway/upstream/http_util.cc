// SSE parsing, URL handling and connection-error descriptions (see http_util.h).
#include "upstream/http_util.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "jsonrpc/header_value.h"
#include "jsonrpc/jsonrpc.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gateway {
namespace {


bool IsBlank(const std::string& s) {
  return s.find_first_not_of(" \t\r\n") == std::string::npos;
}

}  // namespace

bool SseParser::Feed(const char* data, size_t size, const Handler& handler) {
  size_t skip = 0;
  if (skip_lf_ && size > 0) {
    if (data[0] == '\n') skip = 1;
    skip_lf_ = false;
  }
  // What the buffer held had no line break (it is the start of a line): search only the
  // new bytes. Searching from 0 made a long line quadratic (16 MiB fed 4 KiB at a time
  // took minutes).
  size_t search = buffer_.size();
  buffer_.append(data + skip, size - skip);
  size_t start = 0;
  for (;;) {
    size_t end = buffer_.find_first_of("\r\n", std::max(start, search));
    if (end == std::string::npos) break;
    std::string line = buffer_.substr(start, end - start);
    if (buffer_[end] == '\r') {
      // "\r\n" is one line break; when the '\n' is still to come, skip it then.
      if (end + 1 < buffer_.size()) {
        if (buffer_[end + 1] == '\n') ++end;
      } else {
        skip_lf_ = true;
      }
    }
    start = end + 1;
    ProcessLine(line, handler);
  }
  buffer_.erase(0, start);
  if (buffer_.size() > max_bytes_ || overflow_) {
    buffer_.clear();
    current_ = Event();
    has_data_ = false;
    in_event_ = false;
    bad_name_ = false;
    return false;
  }
  return true;
}

void SseParser::ProcessLine(const std::string& line, const Handler& handler) {
  if (line.empty()) {  // blank line: dispatch
    // Never a truncated event, nor one whose name was too long to keep.
    if (has_data_ && !overflow_ && !bad_name_ && !IsBlank(current_.data)) {
      current_.id = last_id_;
      handler(current_);
    }
    current_ = Event();
    has_data_ = false;
    in_event_ = false;
    bad_name_ = false;
    return;
  }
  if (line[0] == ':') return;  // comment (keep-alive)
  in_event_ = true;
  size_t colon = line.find(':');
  std::string field = line.substr(0, colon);
  std::string value;
  if (colon != std::string::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.erase(0, 1);
  }
  if (field == "event") {
    bad_name_ = value.size() > kMaxEventNameBytes;
    current_.event = value.empty() || bad_name_ ? "message" : value;
  } else if (field == "data") {
    if (overflow_ || current_.data.size() + value.size() + 1 > max_bytes_) {
      overflow_ = true;  // many small data lines must not add up to an unbounded event
      return;
    }
    if (has_data_) current_.data += '\n';
    current_.data += value;
    has_data_ = true;
  } else if (field == "id") {
    if (value.size() <= kMaxEventIdBytes && value.find('\0') == std::string::npos) last_id_ = value;
  } else if (field == "retry") {
    // ASCII digits only; anything else (or an absurd length) is ignored.
    if (!value.empty() && value.size() <= 9 &&
        value.find_first_not_of("0123456789") == std::string::npos) {
      retry_ms_ = std::stoll(value);
    }
  }
  // Unknown fields are ignored.
}

absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("not an http(s) URL: ", url));
  }
  std::string scheme = absl::AsciiStrToLower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") {
    return absl::InvalidArgumentError(absl::StrCat("not an http(s) URL: ", url));
  }
  std::string rest = url.substr(scheme_end + 3);
  size_t authority_end = rest.find_first_of("/?#");
  std::string authority = rest.substr(0, authority_end);
  std::string target = authority_end == std::string::npos ? "" : rest.substr(authority_end);
  if (size_t hash = target.find('#'); hash != std::string::npos) target.erase(hash);
  if (target.empty() || target[0] != '/') target = "/" + target;
  if (authority.find('@') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("credentials in URLs are not supported (use headers): ", url));
  }

  HttpUrl out;
  std::string port_text;
  if (!authority.empty() && authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("bad host in URL: ", url));
    }
    out.host = authority.substr(1, close - 1);
    std::string after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return absl::InvalidArgumentError(absl::StrCat("bad URL: ", url));
      port_text = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    out.host = authority.substr(0, colon);
    if (colon != std::string::npos) port_text = authority.substr(colon + 1);
  }
  if (out.host.empty()) return absl::InvalidArgumentError(absl::StrCat("no host in URL: ", url));
  out.port = scheme == "https" ? 443 : 80;
  if (!port_text.empty() &&
      (!absl::SimpleAtoi(port_text, &out.port) || out.port <= 0 || out.port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("bad port in URL: ", url));
  }
  out.origin = absl::StrCat(scheme, "://", authority);
  out.target = target;
  return out;
}

std::string ResolveUrl(const std::string& base, const std::string& ref) {
  auto lower = absl::AsciiStrToLower(ref.substr(0, 8));
  if (lower.rfind("http://", 0) == 0 || lower.rfind("https://", 0) == 0) return ref;
  if (ref.empty()) return base;
  auto parsed = ParseHttpUrl(base);
  if (!parsed.ok()) return ref;
  if (ref.rfind("//", 0) == 0) {
    return absl::StrCat(parsed->origin.substr(0, parsed->origin.find("://")), ":", ref);
  }
  if (ref[0] == '/') return parsed->origin + ref;
  std::string path = parsed->target.substr(0, parsed->target.find('?'));
  if (ref[0] == '?') return parsed->origin + path + ref;
  return parsed->origin + path.substr(0, path.rfind('/') + 1) + ref;
}

std::string DescribeConnectFailure(const HttpUrl& url, absl::Duration timeout) {
  struct addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* addrs = nullptr;
  std::string port = std::to_string(url.port);
  int gai = getaddrinfo(url.host.c_str(), port.c_str(), &hints, &addrs);
  if (gai != 0) return absl::StrCat("resolve ", url.host, ": ", gai_strerror(gai));
  std::string last_error = "could not establish connection";
  for (struct addrinfo* ai = addrs; ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                    ai->ai_protocol);
    if (fd < 0) continue;
    int err = 0;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
      err = errno;
      if (err == EINPROGRESS) {
        struct pollfd pfd = {fd, POLLOUT, 0};
        int r = poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
        if (r == 0) {
          err = ETIMEDOUT;
        } else {
          socklen_t len = sizeof(err);
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
        }
      }
    }
    close(fd);
    if (err == 0) {  // it works now: the failure was transient (or not TCP's)
      last_error = "could not establish connection";
      break;
    }
    last_error = err == ETIMEDOUT ? "timed out" : std::strerror(err);
  }
  freeaddrinfo(addrs);
  return absl::StrCat("connect: ", last_error);
}


std::vector<std::pair<std::string, std::string>> StandardHeadersOf(const nlohmann::json& message) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (!message.is_object()) return headers;
  auto params = message.find("params");
  auto method = message.find("method");
  if (params == message.end() || !params->is_object() || method == message.end() || !method->is_string()) {
    return headers;
  }
  auto meta = params->find("_meta");
  if (meta == params->end() || !meta->is_object()) return headers;
  auto version = meta->find(kMetaProtocolVersion);
  if (version == meta->end() || !version->is_string()) return headers;
  headers.emplace_back("MCP-Protocol-Version", version->get<std::string>());
  const std::string& name = method->get_ref<const std::string&>();
  headers.emplace_back("Mcp-Method", EncodeHeaderValue(name));
  const char* field = name == "tools/call" || name == "prompts/get" ? "name"
                      : name == "resources/read"                    ? "uri"
                                                                    : nullptr;
  if (field) {
    auto value = params->find(field);
    if (value != params->end() && value->is_string()) {
      headers.emplace_back("Mcp-Name", EncodeHeaderValue(value->get<std::string>()));
    }
  }
  return headers;
}

}  // namespace gateway
