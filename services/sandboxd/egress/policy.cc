#include "egress/policy.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "egress/host_name.h"

namespace sandboxd {
namespace egress {
namespace {

absl::StatusOr<PortSet> ParsePorts(absl::string_view text) {
  PortSet ports;
  if (text == "*") {
    ports.kind = PortSet::Kind::kAny;
    return ports;
  }
  uint32_t port = 0;
  if (text.empty() || text.size() > 5 || !absl::ascii_isdigit(text[0]) ||
      !absl::SimpleAtoi(text, &port) || port == 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("port \"", text, "\" is not 1 to 65535 or *"));
  }
  ports.kind = PortSet::Kind::kOne;
  ports.port = static_cast<uint16_t>(port);
  return ports;
}

// Splits "<address>[:port]" with the address maybe in brackets; `port` stays empty when
// there is none. Returns false for a bracket left open.
bool SplitPort(absl::string_view text, absl::string_view* address, absl::string_view* port,
               bool* has_port) {
  *has_port = false;
  if (absl::StartsWith(text, "[")) {
    const size_t close = text.find(']');
    if (close == absl::string_view::npos) return false;
    *address = text.substr(1, close - 1);
    absl::string_view rest = text.substr(close + 1);
    if (rest.empty()) return true;
    if (rest[0] != ':') return false;
    *port = rest.substr(1);
    *has_port = true;
    return true;
  }
  const size_t colon = text.rfind(':');
  *address = text.substr(0, colon);
  if (colon != absl::string_view::npos) {
    *port = text.substr(colon + 1);
    *has_port = true;
  }
  return true;
}

absl::Status ParseHost(absl::string_view host, PolicyEntry* entry) {
  if (host == "*") {
    return absl::InvalidArgumentError(
        "'*' alone would allow every name; write the names, or ranges such as 0.0.0.0/0");
  }
  if (absl::StartsWith(host, "*.")) {
    entry->kind = PolicyEntry::Kind::kSubdomains;
    host.remove_prefix(2);
  }
  if (absl::StrContains(host, '*')) {
    return absl::InvalidArgumentError("'*' is allowed only as a whole first label (\"*.example.com\")");
  }
  absl::StatusOr<std::string> name = NormalizeHostName(host);
  if (!name.ok()) return name.status();
  if (entry->kind == PolicyEntry::Kind::kSubdomains && name->find('.') == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"*.", *name, "\" would allow a whole top-level domain"));
  }
  entry->host = *std::move(name);
  return absl::OkStatus();
}

absl::StatusOr<PolicyEntry> ParseEntry(absl::string_view text) {
  PolicyEntry entry;
  absl::string_view address, port;
  bool has_port = false;
  const bool bracketed = absl::StartsWith(text, "[");
  if (!bracketed && std::count(text.begin(), text.end(), ':') > 1) {
    return absl::InvalidArgumentError("write an IPv6 range in brackets: [fd00::/8]:443");
  }
  if (!SplitPort(text, &address, &port, &has_port)) {
    return absl::InvalidArgumentError("a '[' without its ']' and port");
  }
  if (has_port) {
    absl::StatusOr<PortSet> ports = ParsePorts(port);
    if (!ports.ok()) return ports.status();
    entry.ports = *ports;
  }
  const bool looks_v4 = !address.empty() && absl::ascii_isdigit(address[0]) &&
                        (absl::StrContains(address, '/') || IpAddress::Parse(address));
  if (bracketed || looks_v4) {
    absl::StatusOr<IpRange> range = IpRange::Parse(address);
    if (!range.ok()) return range.status();
    entry.kind = PolicyEntry::Kind::kRange;
    entry.range = *range;
    return entry;
  }
  if (absl::Status s = ParseHost(address, &entry); !s.ok()) return s;
  return entry;
}

std::string Shortened(std::string text) {
  if (text.size() > 200) text = text.substr(0, 200) + "...";
  return text;
}

bool HostWithin(const PolicyEntry& a, const PolicyEntry& b) {
  using Kind = PolicyEntry::Kind;
  if (b.kind == Kind::kHost) return a.kind == Kind::kHost && a.host == b.host;
  return a.host == b.host ? a.kind == Kind::kSubdomains : IsSubdomainOf(a.host, b.host);
}

}  // namespace

bool PortSet::Contains(uint16_t p) const {
  switch (kind) {
    case Kind::kWeb: return p == 80 || p == 443;
    case Kind::kOne: return p == port;
    case Kind::kAny: return true;
  }
  return false;
}

bool PortSet::Covers(const PortSet& o) const {
  switch (o.kind) {
    case Kind::kWeb: return kind != Kind::kOne;
    case Kind::kOne: return Contains(o.port);
    case Kind::kAny: return kind == Kind::kAny;
  }
  return false;
}

std::string PortSet::Suffix() const {
  switch (kind) {
    case Kind::kWeb: return "";
    case Kind::kOne: return absl::StrCat(":", port);
    case Kind::kAny: return ":*";
  }
  return "";
}

bool PolicyEntry::Within(const PolicyEntry& wider) const {
  if (!wider.ports.Covers(ports)) return false;
  if ((kind == Kind::kRange) != (wider.kind == Kind::kRange)) return false;
  if (kind == Kind::kRange) return wider.range.Contains(range);
  return HostWithin(*this, wider);
}

std::string PolicyEntry::ToString() const {
  switch (kind) {
    case Kind::kHost: return host + ports.Suffix();
    case Kind::kSubdomains: return absl::StrCat("*.", host, ports.Suffix());
    case Kind::kRange:
      if (range.network.v6) return absl::StrCat("[", range.ToString(), "]", ports.Suffix());
      return range.ToString() + ports.Suffix();
  }
  return "";
}

absl::StatusOr<Policy> Policy::Parse(absl::string_view text) {
  if (text.size() > kMaxPolicyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("egress policy of ", text.size(), " bytes (at most ", kMaxPolicyBytes, ")"));
  }
  Policy policy;
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    if (c == ',' || absl::ascii_isspace(c)) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && text[end] != ',' && text[end] != '#' &&
           !absl::ascii_isspace(text[end])) {
      ++end;
    }
    const absl::string_view raw = text.substr(i, end - i);
    i = end;
    const size_t number = policy.entries_.size() + 1;
    if (number > kMaxPolicyEntries) {
      return absl::InvalidArgumentError(
          absl::StrCat("egress policy has more than ", kMaxPolicyEntries, " entries"));
    }
    absl::StatusOr<PolicyEntry> entry = ParseEntry(raw);
    if (!entry.ok()) {
      const absl::string_view shown = raw.substr(0, 80);
      return absl::InvalidArgumentError(
          absl::StrCat("egress policy entry ", number, " (\"", absl::CHexEscape(shown),
                       shown.size() < raw.size() ? "...\"" : "\"", "): ", entry.status().message()));
    }
    policy.entries_.push_back(*std::move(entry));
  }
  return policy;
}

std::string Policy::ToString() const {
  return absl::StrJoin(entries_, ", ", [](std::string* out, const PolicyEntry& e) {
    out->append(e.ToString());
  });
}

const PolicyEntry* Policy::MatchName(absl::string_view host, uint16_t port) const {
  for (const PolicyEntry& e : entries_) {
    if (e.kind == PolicyEntry::Kind::kRange || !e.ports.Contains(port)) continue;
    if (e.kind == PolicyEntry::Kind::kHost ? host == e.host : IsSubdomainOf(host, e.host)) return &e;
  }
  return nullptr;
}

const PolicyEntry* Policy::MatchRange(const IpAddress& address, uint16_t port) const {
  const bool special = Classify(address) != IpClass::kPublic;
  const IpRange block = ClassBlock(address);
  for (const PolicyEntry& e : entries_) {
    if (e.kind != PolicyEntry::Kind::kRange || !e.ports.Contains(port)) continue;
    if (!e.range.Contains(address)) continue;
    if (special && !block.Contains(e.range)) continue;
    return &e;
  }
  return nullptr;
}

absl::Status Policy::CheckAddress(const IpAddress& address, uint16_t port, bool named) const {
  const IpClass cls = Classify(address);
  if (named && cls == IpClass::kPublic) return absl::OkStatus();
  if (MatchRange(address, port) != nullptr) return absl::OkStatus();
  if (cls == IpClass::kPublic) {
    return absl::PermissionDeniedError(
        absl::StrCat(address.ToString(), " is an IP address no range of the policy allows on port ", port));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      address.ToString(), " is ", ClassName(cls), " (", ClassBlock(address).ToString(),
      "); no range of the policy inside that block allows it on port ", port));
}

absl::Status Policy::WithinMaximum(const Policy& maximum, absl::string_view maximum_is) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const PolicyEntry& e = entries_[i];
    bool covered = false;
    for (const PolicyEntry& m : maximum.entries_) covered = covered || e.Within(m);
    if (!covered) {
      return absl::PermissionDeniedError(absl::StrCat(
          "egress policy entry ", i + 1, " (\"", e.ToString(),
          "\") is wider than ", maximum_is, " (",
          maximum.empty() ? "nothing" : Shortened(maximum.ToString()), ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace egress
}  // namespace sandboxd
