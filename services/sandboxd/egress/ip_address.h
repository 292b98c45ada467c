// IP addresses and ranges as egress policies see them (docs/egress.md, "Addresses"): a
// strict parser (inet_pton's forms only: "127.1", "0x7f.0.0.1" and "2130706433" are not
// addresses here), CIDR ranges, and the class of an address, which decides whether a name
// may lead to it without a range written for it.
//
//   std::optional<IpAddress> a = IpAddress::Parse("::ffff:10.0.0.1");
//   Classify(*a);                 // IpClass::kPrivate (mapped addresses are their IPv4)
//   IpRange::Parse("10.0.0.0/8")  // an IpRange, or an error naming what is wrong
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sandboxd {
namespace egress {

struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // IPv4 uses the first 4

  static std::optional<IpAddress> Parse(absl::string_view text);
  static IpAddress V4(uint8_t a, uint8_t b, uint8_t c, uint8_t d);
  size_t bits() const { return v6 ? 128 : 32; }
  // The IPv4 address an IPv6 one stands for: IPv4-mapped (::ffff:a.b.c.d) and NAT64
  // (64:ff9b::/96, 64:ff9b:1::/48) addresses reach that IPv4 address. Itself otherwise.
  IpAddress Unwrapped() const;
  std::string ToString() const;
  bool operator==(const IpAddress& o) const { return v6 == o.v6 && bytes == o.bytes; }
};

struct IpRange {
  IpAddress network;  // host bits zero
  size_t prefix = 0;

  // "a.b.c.d", "a.b.c.d/n", "v6", "v6/n" (no brackets: the policy parser strips them).
  // Host bits set ("10.0.0.1/8") are an error: the writer meant something else.
  static absl::StatusOr<IpRange> Parse(absl::string_view text);
  bool Contains(const IpAddress& a) const;
  bool Contains(const IpRange& r) const { return r.prefix >= prefix && Contains(r.network); }
  std::string ToString() const;
};

// Why an address is not an ordinary public one. Every class but kPublic is refused unless
// the policy has a range inside the class's block that contains the address
// (ClassBlock): "0.0.0.0/0" opens no loopback, "127.0.0.0/8" does.
enum class IpClass {
  kPublic,
  kUnspecified,   // 0.0.0.0/8, ::
  kLoopback,      // 127.0.0.0/8, ::1
  kPrivate,       // 10/8, 172.16/12, 192.168/16 (RFC 1918)
  kCgnat,         // 100.64.0.0/10 (RFC 6598)
  kLinkLocal,     // 169.254.0.0/16, fe80::/10
  kMetadata,      // cloud instance metadata: 169.254.169.254, 169.254.170.2, fd00:ec2::254, 100.100.100.200
  kUniqueLocal,   // fc00::/7, and fec0::/10 (site-local, deprecated)
  kMulticast,     // 224.0.0.0/4, ff00::/8
  kReserved,      // 240.0.0.0/4 and broadcast, documentation, benchmarking, 192.0.0.0/24, ::/96
};

// The class of `a`, of its unwrapped IPv4 address where it has one.
IpClass Classify(const IpAddress& a);
const char* ClassName(IpClass c);
// The block of `c` that contains `a` (e.g. 10.0.0.0/8 for 10.1.2.3; the /32 itself for a
// metadata address); for kPublic, the whole family.
IpRange ClassBlock(const IpAddress& a);

}  // namespace egress
}  // namespace sandboxd
