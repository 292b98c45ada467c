// An egress policy: the destinations a session's code may reach through the egress proxy
// (docs/egress.md, "Policy syntax"). The empty policy allows nothing.
//
//   pypi.org, *.pythonhosted.org        names on ports 80 and 443
//   api.example.com:8443                one port
//   git.example.com:*                   every port
//   10.1.0.0/16:5432, [fd00:1::/64]:443, 192.0.2.7   IP ranges, only when written as such
//
//   absl::StatusOr<Policy> p = Policy::Parse("pypi.org, *.pythonhosted.org");
//   p->MatchName("files.pythonhosted.org", 443);     // the entry that allows it, or null
//   p->WithinMaximum(operator_maximum);               // PermissionDenied naming an entry
//
// Immutable once parsed; safe to share between threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "egress/ip_address.h"

namespace sandboxd {
namespace egress {

constexpr size_t kMaxPolicyBytes = 64 << 10;
constexpr size_t kMaxPolicyEntries = 1000;

// The ports of an entry: without a port, 80 and 443; ":N" one port; ":*" every port.
struct PortSet {
  enum class Kind { kWeb, kOne, kAny };
  Kind kind = Kind::kWeb;
  uint16_t port = 0;  // kOne

  bool Contains(uint16_t p) const;
  bool Covers(const PortSet& o) const;
  std::string Suffix() const;  // "", ":8443", ":*"
};

struct PolicyEntry {
  enum class Kind { kHost, kSubdomains, kRange };
  Kind kind = Kind::kHost;
  std::string host;  // kHost: the name; kSubdomains: the name under "*."
  IpRange range;     // kRange
  PortSet ports;

  // Whether every destination this entry allows, `wider` allows too.
  bool Within(const PolicyEntry& wider) const;
  std::string ToString() const;  // canonical: parses back to the same entry
};

class Policy {
 public:
  Policy() = default;

  // Entries separated by commas, spaces or new lines; '#' starts a comment to the end of
  // its line. An error names the entry (its number and text) and what is wrong with it.
  static absl::StatusOr<Policy> Parse(absl::string_view text);

  bool empty() const { return entries_.empty(); }
  const std::vector<PolicyEntry>& entries() const { return entries_; }
  std::string ToString() const;  // canonical entries joined by ", "

  // The name entry that allows `host` (canonical, NormalizeHostName) on `port`, or null.
  const PolicyEntry* MatchName(absl::string_view host, uint16_t port) const;
  // The range entry that allows `address` on `port`, or null. An address outside the
  // public class (IpClass) needs a range that also lies inside its class's block.
  const PolicyEntry* MatchRange(const IpAddress& address, uint16_t port) const;
  // Whether the proxy may connect to `address`, port `port`: an address a name resolved to
  // (`named`) needs a range only when it is not public; an IP literal always needs one.
  // PermissionDenied saying why not.
  absl::Status CheckAddress(const IpAddress& address, uint16_t port, bool named) const;

  // OK when every entry is within an entry of `maximum`; otherwise PermissionDenied
  // naming the first entry that is not. Narrowing a running session is
  // `narrower.WithinMaximum(current, "the session's policy")`. `maximum_is` says what the
  // maximum is, in the message.
  absl::Status WithinMaximum(const Policy& maximum,
                             absl::string_view maximum_is = "the operator allows") const;

 private:
  std::vector<PolicyEntry> entries_;
};

}  // namespace egress
}  // namespace sandboxd
