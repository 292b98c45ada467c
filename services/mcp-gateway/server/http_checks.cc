// Header checks and session ids for the Streamable HTTP transport (see http_checks.h).
#include "server/http_checks.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <stdexcept>

namespace gateway {
namespace http {
namespace {

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Trim(const std::string& s) {
  size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  size_t end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

bool AllDigits(const std::string& s) {
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// Splits "name[:port]" ("[v6][:port]" for IPv6 literals) into a lowercase name (brackets
// kept) and the port text. False when the value is malformed.
bool SplitHostPort(const std::string& value, std::string* name, std::string* port) {
  if (value.empty()) return false;
  size_t name_end;
  if (value[0] == '[') {
    name_end = value.find(']');
    if (name_end == std::string::npos) return false;
    ++name_end;
  } else {
    name_end = value.find(':');
    if (name_end == std::string::npos) name_end = value.size();
  }
  *name = Lower(value.substr(0, name_end));
  std::string rest = value.substr(name_end);
  if (rest.empty()) {
    port->clear();
  } else if (rest[0] == ':' && rest.size() > 1 && AllDigits(rest.substr(1))) {
    *port = rest.substr(1);
  } else {
    return false;
  }
  return !name->empty() && name->find_first_of("/?#@ ") == std::string::npos;
}

bool IsLoopbackName(const std::string& name) {
  return name == "localhost" || name == "127.0.0.1" || name == "[::1]";
}

bool IsWildcard(const std::string& host) {
  return host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]";
}

}  // namespace

bool OriginAllowed(const std::string& origin, const std::vector<std::string>& allowed) {
  if (!allowed.empty()) {
    const std::string lower = Lower(origin);
    for (const auto& a : allowed) {
      if (Lower(a) == lower) return true;
    }
    return false;
  }
  const std::string lower = Lower(origin);
  std::string authority;
  if (lower.rfind("http://", 0) == 0) {
    authority = lower.substr(7);
  } else if (lower.rfind("https://", 0) == 0) {
    authority = lower.substr(8);
  } else {
    return false;  // includes "null" (sandboxed iframes, file://)
  }
  std::string name, port;
  return SplitHostPort(authority, &name, &port) && IsLoopbackName(name);
}

bool HostAllowed(const std::string& host, const std::vector<std::string>& allowed,
                 const std::string& bind_host) {
  std::string name, port;
  if (!SplitHostPort(Trim(host), &name, &port)) return false;
  if (!allowed.empty()) {
    const std::string whole = Lower(Trim(host));
    for (const auto& a : allowed) {
      const std::string la = Lower(a);
      if (la == whole || la == name) return true;
    }
    return false;
  }
  if (IsLoopbackName(name)) return true;
  if (IsWildcard(bind_host)) return false;
  std::string bind = Lower(bind_host);
  // A bare IPv6 bind address ("::1") appears bracketed in Host headers.
  if (bind.find(':') != std::string::npos && bind[0] != '[') bind = "[" + bind + "]";
  return name == bind;
}

bool BearerMatches(const std::string& authorization, const std::string& token) {
  const std::string value = Trim(authorization);
  if (value.size() < 7 || Lower(value.substr(0, 7)) != "bearer ") return false;
  const std::string given = Trim(value.substr(7));
  // Constant time over the expected token's length, whatever the given one is.
  unsigned char diff = given.size() == token.size() ? 0 : 1;
  for (size_t i = 0; i < token.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= static_cast<unsigned char>(g ^ static_cast<unsigned char>(token[i]));
  }
  return diff == 0 && !token.empty();
}

AcceptedTypes ParseAccept(const std::string& accept) {
  AcceptedTypes types;
  if (Trim(accept).empty()) {
    types.json = types.sse = true;
    return types;
  }
  size_t start = 0;
  while (start <= accept.size()) {
    size_t comma = accept.find(',', start);
    if (comma == std::string::npos) comma = accept.size();
    std::string item = accept.substr(start, comma - start);
    std::string media = Lower(Trim(item.substr(0, item.find(';'))));
    if (media == "application/json" || media == "application/*") types.json = true;
    if (media == "text/event-stream") types.sse = types.sse_explicit = true;
    if (media == "text/*") types.sse = true;
    if (media == "*/*") types.json = types.sse = true;
    start = comma + 1;
  }
  return types;
}

std::string NewSessionId() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      break;
    }
  }
  if (got < sizeof(bytes)) {  // very old kernel: fall back to the device
    int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && got < sizeof(bytes)) {
      ssize_t n = ::read(fd, bytes + got, sizeof(bytes) - got);
      if (n <= 0 && errno != EINTR) break;
      if (n > 0) got += static_cast<size_t>(n);
    }
    if (fd >= 0) ::close(fd);
  }
  if (got < sizeof(bytes)) throw std::runtime_error("no source of random bytes");
  static const char kHex[] = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 15]);
  }
  return id;
}

}  // namespace http
}  // namespace gateway
